//! The Kubernetes side of a kind dev-env: the node label kind sets that
//! MetalLB would honour, and when the controller and speakers are ready.

use super::NAMESPACE;
use anyhow::{Context, Result, bail};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use std::time::{Duration, Instant};

/// Nodes carry it in kind; MetalLB would then skip them.
const EXCLUDE_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

pub(super) async fn remove_exclude_label(client: &kube::Client) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({ "metadata": { "labels": { EXCLUDE_LB: null } } });
    for node in nodes.list(&ListParams::default()).await? {
        let name = node.metadata.name.unwrap_or_default();
        nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("removing {EXCLUDE_LB} from node {name}"))?;
    }
    Ok(())
}

/// Waits, with a spinner, until the controller is Available and every
/// speaker Ready.
pub(super) async fn wait_for_components(client: &kube::Client, timeout: Duration) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(120));
    let deadline = Instant::now() + timeout;
    loop {
        let d = deployments.get_opt("controller").await?;
        let s = daemonsets.get_opt("speaker").await?;
        let ready_speakers = s
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .map(|s| (s.number_ready, s.desired_number_scheduled))
            .unwrap_or_default();
        spinner.set_message(format!(
            "waiting for metallb-rs: controller {}, speakers ready {}/{}",
            if d.as_ref().is_some_and(available) {
                "available"
            } else {
                "starting"
            },
            ready_speakers.0,
            ready_speakers.1
        ));
        if let (Some(d), Some(s)) = (&d, &s)
            && components_ready(d, s)
        {
            spinner.finish_with_message("metallb-rs: controller available, every speaker ready");
            return Ok(());
        }
        if Instant::now() > deadline {
            spinner.abandon();
            bail!(
                "metallb-rs did not become ready within {}s: see `kubectl -n {NAMESPACE} get pods` and `kubectl -n {NAMESPACE} logs -l app=metallb`",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn available(d: &Deployment) -> bool {
    d.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
        })
}

/// The deployment is Available and the daemon set has every pod ready.
pub fn components_ready(deployment: &Deployment, daemonset: &DaemonSet) -> bool {
    let ds_ready = daemonset.status.as_ref().is_some_and(|s| {
        s.desired_number_scheduled > 0
            && s.number_ready == s.desired_number_scheduled
            && s.updated_number_scheduled.unwrap_or(0) == s.desired_number_scheduled
    });
    available(deployment) && ds_ready
}

/// The speaker pod on `node`.
pub(super) async fn speaker_pod(client: &kube::Client, node: &str) -> Result<Option<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    Ok(pods
        .list(
            &ListParams::default()
                .labels("component=speaker")
                .fields(&format!("spec.nodeName={node}")),
        )
        .await?
        .items
        .into_iter()
        .next())
}

pub(super) fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_needs_an_available_controller_and_every_speaker() {
        let deployment = |available: &str| -> Deployment {
            serde_json::from_value(json!({ "status": { "conditions": [{ "type": "Available", "status": available }] } }))
                .expect("deployment")
        };
        let ds = |ready: i32, desired: i32| -> DaemonSet {
            serde_json::from_value(json!({ "status": {
                "numberReady": ready, "desiredNumberScheduled": desired, "updatedNumberScheduled": desired,
                "currentNumberScheduled": desired, "numberMisscheduled": 0 } }))
            .expect("daemonset")
        };
        assert!(components_ready(&deployment("True"), &ds(3, 3)));
        assert!(!components_ready(&deployment("True"), &ds(2, 3)));
        assert!(!components_ready(&deployment("False"), &ds(3, 3)));
        assert!(!components_ready(&deployment("True"), &ds(0, 0)));
    }
}
