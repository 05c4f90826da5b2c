//! The lab's scheduler (kube-scheduler's basic filters): a Pod without a
//! node is bound to a node that is Ready, schedulable, matches its
//! nodeSelector and required node affinity, carries no taint it does not
//! tolerate and has the `hostPort`s it declares free. Among those it
//! takes the node with the fewest Pods of the same owner, then the fewest
//! Pods, then the first by name. (Lab Pods share their node's addresses,
//! but the ports they are played on are shared too, see
//! [`super::backend`], so only declared host ports exclude each other.)
//! A Pod no node fits gets `PodScheduled=False` (reason `Unschedulable`)
//! and a `FailedScheduling` event worded as kube-scheduler words it.
//!
//! [`plan`] decides without I/O, judging each node with `filters` (which
//! the DaemonSet controller shares); [`run`] lists, plans and carries the
//! decisions out.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use metallb_rs::k8s::events::{EventSpec, Recorder};
use serde_json::json;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

pub mod filters;
#[cfg(test)]
mod tests;

use filters::{Load, Misfit, host_ports, misfit};
pub use filters::{fits, may_stay};

/// The `schedulerName` this scheduler serves (kube-scheduler's).
pub const SCHEDULER_NAME: &str = "default-scheduler";

/// What to do with one Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Bind the Pod to `node`.
    Bind {
        /// The Pod.
        pod: PodKey,
        /// The chosen node.
        node: String,
    },
    /// Report that no node fits (the Pod does not say so yet).
    Unschedulable {
        /// The Pod.
        pod: PodKey,
        /// kube-scheduler's message, e.g. `0/3 nodes are available: ...`.
        message: String,
    },
}

/// A Pod as the API names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The resourceVersion the decision was made on (a bind carries it,
    /// so a Pod changed meanwhile is looked at again).
    pub resource_version: Option<String>,
}

fn owner(pod: &Pod) -> Option<String> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn wants_scheduling(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty)
        && pod.metadata.deletion_timestamp.is_none()
        && !finished(pod)
        && spec
            .and_then(|s| s.scheduler_name.as_deref())
            .is_none_or(|n| n.is_empty() || n == SCHEDULER_NAME)
}

fn pod_scheduled_message(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| c.message.as_deref())
}

/// Where each of `pods` that has no node should go, in creation order
/// (later Pods see the earlier ones' bindings); Pods already reporting
/// the same unschedulable message get no decision.
pub fn plan(pods: &[Pod], nodes: &[Node]) -> Vec<Decision> {
    let mut load: BTreeMap<&str, Load> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .map(|n| (n, Load::default()))
        .collect();
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !finished(p))
    {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        if let Some(l) = load.get_mut(node) {
            l.pods += 1;
            if let Some(o) = owner(pod) {
                *l.by_owner.entry(o).or_default() += 1;
            }
            l.ports.extend(host_ports(pod));
        }
    }
    let mut pending: Vec<&Pod> = pods.iter().filter(|p| wants_scheduling(p)).collect();
    pending.sort_by_key(|p| {
        (
            p.metadata.creation_timestamp.as_ref().map(|t| t.0),
            p.metadata.namespace.clone(),
            p.metadata.name.clone(),
        )
    });
    let mut out = Vec::new();
    for pod in pending {
        let key = PodKey {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            resource_version: pod.metadata.resource_version.clone(),
        };
        let ports = host_ports(pod);
        let own = owner(pod);
        let mut misfits: BTreeMap<Misfit, usize> = BTreeMap::new();
        let mut best: Option<((usize, usize), &str)> = None;
        for node in nodes {
            let Some(name) = node.metadata.name.as_deref() else {
                continue;
            };
            let l = load.get(name).cloned().unwrap_or_default();
            match misfit(pod, &ports, node, &l) {
                Some(m) => *misfits.entry(m).or_default() += 1,
                None => {
                    let same = own.as_ref().and_then(|o| l.by_owner.get(o)).copied();
                    let score = (same.unwrap_or(0), l.pods);
                    if best.is_none_or(|(s, n)| (score, name) < (s, n)) {
                        best = Some((score, name));
                    }
                }
            }
        }
        match best {
            Some((_, node)) => {
                if let Some(l) = load.get_mut(node) {
                    l.pods += 1;
                    if let Some(o) = own {
                        *l.by_owner.entry(o).or_default() += 1;
                    }
                    l.ports.extend(ports);
                }
                out.push(Decision::Bind {
                    pod: key,
                    node: node.to_owned(),
                });
            }
            None => {
                let mut reasons: Vec<String> =
                    misfits.iter().map(|(m, n)| format!("{n} {m}")).collect();
                reasons.sort();
                let message = if reasons.is_empty() {
                    format!("0/{} nodes are available.", nodes.len())
                } else {
                    format!(
                        "0/{} nodes are available: {}.",
                        nodes.len(),
                        reasons.join(", ")
                    )
                };
                if pod_scheduled_message(pod) != Some(message.as_str()) {
                    out.push(Decision::Unschedulable { pod: key, message });
                }
            }
        }
    }
    out
}

/// How often [`run`] looks for Pods to schedule.
const INTERVAL: Duration = Duration::from_millis(500);

/// How long one round of lists and writes may take.
const ROUND_TIMEOUT: Duration = Duration::from_secs(10);

/// Schedules Pods until `shutdown` completes; errors are logged and the
/// next round retries.
pub async fn run(client: Client, shutdown: impl Future<Output = ()>) {
    let recorder = Recorder::new(client.clone(), SCHEDULER_NAME, "lab-controller-manager");
    super::rounds::every("scheduling", INTERVAL, ROUND_TIMEOUT, shutdown, || {
        schedule(&client, &recorder)
    })
    .await;
}

async fn schedule(client: &Client, recorder: &Recorder) -> Result<(), kube::Error> {
    let lp = ListParams::default();
    let nodes = Api::<Node>::all(client.clone()).list(&lp).await?.items;
    let pods = Api::<Pod>::all(client.clone()).list(&lp).await?.items;
    let now = Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default();
    let pp = PatchParams::default();
    for decision in plan(&pods, &nodes) {
        match decision {
            Decision::Bind { pod, node } => {
                let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
                // The resourceVersion makes the bind fail (409) when the
                // Pod changed meanwhile; the next round looks again.
                let bind = json!({
                    "metadata": { "resourceVersion": pod.resource_version },
                    "spec": { "nodeName": node },
                });
                match api.patch(&pod.name, &pp, &Patch::Merge(bind)).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => continue,
                    Err(e) => return Err(e),
                }
                tracing::info!(pod = %pod.name, namespace = %pod.namespace, %node, "pod bound");
                let status = json!({ "status": { "conditions": [
                    { "type": "PodScheduled", "status": "True", "lastTransitionTime": now },
                ] } });
                api.patch_status(&pod.name, &pp, &Patch::Strategic(status))
                    .await?;
                publish(
                    recorder,
                    &api,
                    &pod.name,
                    EventSpec::normal(
                        "Scheduled",
                        format!(
                            "Successfully assigned {}/{} to {node}",
                            pod.namespace, pod.name
                        ),
                    ),
                )
                .await;
            }
            Decision::Unschedulable { pod, message } => {
                let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
                let status = json!({ "status": { "phase": "Pending", "conditions": [
                    { "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "message": message, "lastTransitionTime": now },
                ] } });
                match api
                    .patch_status(&pod.name, &pp, &Patch::Strategic(status))
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => continue,
                    Err(e) => return Err(e),
                }
                tracing::info!(pod = %pod.name, namespace = %pod.namespace, %message, "pod unschedulable");
                publish(
                    recorder,
                    &api,
                    &pod.name,
                    EventSpec::warning("FailedScheduling", message),
                )
                .await;
            }
        }
    }
    Ok(())
}

/// Publishes `ev` about the Pod `name` as it is now (the reference needs
/// its uid).
async fn publish(recorder: &Recorder, api: &Api<Pod>, name: &str, ev: EventSpec) {
    if let Ok(Some(pod)) = api.get_opt(name).await {
        recorder.publish(&Recorder::reference(&pod), &ev).await;
    }
}
