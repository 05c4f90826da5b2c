//! The lab's Deployment, ReplicaSet, DaemonSet, StatefulSet and Job
//! controllers (kube-controller-manager's): [`plan`], [`daemonset`],
//! [`statefulset`] and [`job`] decide from what is listed, [`run`] lists
//! every half second and carries the decisions out. Deleting a
//! Deployment deletes its ReplicaSets and their Pods through the API
//! server's garbage collection (the owner references set here), and so
//! does deleting any other of these workloads.

pub mod daemonset;
pub mod job;
pub mod plan;
pub mod statefulset;

#[cfg(test)]
mod tests;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use metallb_rs::k8s::events::{EventSpec, Recorder};
use plan::Action;
use serde_json::json;
use std::future::Future;
use std::time::Duration;

/// How often [`run`] looks.
const INTERVAL: Duration = Duration::from_millis(500);

/// How long one round of lists and writes may take.
const ROUND_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the controllers until `shutdown` completes; errors are logged and
/// the next round retries.
pub async fn run(client: Client, shutdown: impl Future<Output = ()>) {
    let recorder = Recorder::new(
        client.clone(),
        "deployment-controller",
        "lab-controller-manager",
    );
    super::rounds::every(
        "workload controllers",
        INTERVAL,
        ROUND_TIMEOUT,
        shutdown,
        || reconcile(&client, &recorder),
    )
    .await;
}

async fn reconcile(client: &Client, recorder: &Recorder) -> Result<(), kube::Error> {
    let lp = ListParams::default();
    let deployments = Api::<Deployment>::all(client.clone())
        .list(&lp)
        .await?
        .items;
    let replicasets = Api::<ReplicaSet>::all(client.clone())
        .list(&lp)
        .await?
        .items;
    let daemonsets = list_if_served::<DaemonSet>(client, &lp).await?;
    let statefulsets = list_if_served::<StatefulSet>(client, &lp).await?;
    let jobs = list_if_served::<Job>(client, &lp).await?;
    let nodes = Api::<Node>::all(client.clone()).list(&lp).await?.items;
    let pods = Api::<Pod>::all(client.clone()).list(&lp).await?.items;
    let mut actions = plan::plan(&deployments, &replicasets, &pods, Timestamp::now());
    for ds in daemonsets
        .iter()
        .filter(|d| d.metadata.deletion_timestamp.is_none())
    {
        daemonset::plan(ds, &nodes, &pods, &mut actions);
    }
    for sts in statefulsets
        .iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
    {
        statefulset::plan(sts, &pods, &mut actions);
    }
    for job in jobs
        .iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
    {
        job::plan(job, &pods, Timestamp::now(), &mut actions);
    }
    for action in actions {
        match carry_out(client, recorder, &deployments, action).await {
            Ok(()) => {}
            // Someone changed or deleted the object meanwhile: the next
            // round sees it as it is.
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Every `K`; none from an API server that does not serve `K` (404: a
/// lab's server outlives rebuilds), so the other controllers still work.
async fn list_if_served<K>(client: &Client, lp: &ListParams) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    match Api::<K>::all(client.clone()).list(lp).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Makes the write `action` asks for, with the event and log line a
/// scaling gets.
async fn carry_out(
    client: &Client,
    recorder: &Recorder,
    deployments: &[Deployment],
    action: Action,
) -> Result<(), kube::Error> {
    let events = ScalingEvents {
        recorder,
        deployments,
    };
    match action {
        Action::CreatePod(pod) => {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            Api::<Pod>::namespaced(client.clone(), &ns)
                .create(&PostParams::default(), &pod)
                .await?;
        }
        Action::DeletePod { namespace, name } => {
            Api::<Pod>::namespaced(client.clone(), &namespace)
                .delete(&name, &DeleteParams::default())
                .await?;
        }
        Action::CreateReplicaSet(rs) => create_replicaset(client, &events, &rs).await?,
        Action::ScaleReplicaSet {
            namespace,
            name,
            deployment,
            from,
            to,
        } => {
            let scaling = Scaling {
                namespace: &namespace,
                name: &name,
                deployment: &deployment,
                from,
                to,
            };
            scale_replicaset(client, &events, scaling).await?;
        }
        Action::DeleteReplicaSet { namespace, name } => {
            Api::<ReplicaSet>::namespaced(client.clone(), &namespace)
                .delete(&name, &DeleteParams::background())
                .await?;
        }
        Action::ReplicaSetStatus {
            namespace,
            name,
            status,
        } => patch_status::<ReplicaSet>(client, &namespace, &name, json!(status)).await?,
        Action::DeploymentRevision {
            namespace,
            name,
            revision,
        } => {
            let patch = json!({ "metadata": { "annotations": {
                plan::REVISION: revision.to_string() } } });
            Api::<Deployment>::namespaced(client.clone(), &namespace)
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await?;
        }
        Action::DaemonSetStatus {
            namespace,
            name,
            status,
        } => patch_status::<DaemonSet>(client, &namespace, &name, json!(status)).await?,
        Action::StatefulSetStatus {
            namespace,
            name,
            status,
        } => patch_status::<StatefulSet>(client, &namespace, &name, json!(status)).await?,
        Action::JobStatus {
            namespace,
            name,
            status,
        } => patch_status::<Job>(client, &namespace, &name, job_status(&status)).await?,
        // The whole status replaces the old one (conditions are a list a
        // merge patch would replace anyway).
        Action::DeploymentStatus {
            namespace,
            name,
            status,
        } => patch_status::<Deployment>(client, &namespace, &name, json!(status)).await?,
    }
    Ok(())
}

/// Writes `status` as the status of the `K` `namespace/name` (a merge
/// patch).
async fn patch_status<K>(
    client: &Client,
    namespace: &str,
    name: &str,
    status: serde_json::Value,
) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), namespace)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
    Ok(())
}

/// A Job's status as a merge patch: the counts the API omits at zero
/// must be cleared, not left as a merge patch leaves what it does not
/// name.
fn job_status(status: &JobStatus) -> serde_json::Value {
    let mut status = serde_json::to_value(status).unwrap_or_default();
    for key in [
        "active",
        "succeeded",
        "failed",
        "completionTime",
        "conditions",
    ] {
        if status.get(key).is_none() {
            status[key] = serde_json::Value::Null;
        }
    }
    status
}

/// Where a ReplicaSet's scaling is told: an event on its Deployment, as
/// kube-controller-manager records one, found among those listed this
/// round.
struct ScalingEvents<'a> {
    recorder: &'a Recorder,
    deployments: &'a [Deployment],
}

impl ScalingEvents<'_> {
    /// Publishes `ev` on the Deployment `namespace/deployment`, if it was
    /// listed.
    async fn event(&self, namespace: &str, deployment: &str, ev: EventSpec) {
        let d = self.deployments.iter().find(|d| {
            d.metadata.namespace.as_deref() == Some(namespace)
                && d.metadata.name.as_deref() == Some(deployment)
        });
        if let Some(d) = d {
            self.recorder.publish(&Recorder::reference(d), &ev).await;
        }
    }
}

/// Creates a Deployment's new ReplicaSet and says so on the Deployment.
async fn create_replicaset(
    client: &Client,
    events: &ScalingEvents<'_>,
    rs: &ReplicaSet,
) -> Result<(), kube::Error> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let created = Api::<ReplicaSet>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), rs)
        .await?;
    let owner = rs
        .metadata
        .owner_references
        .iter()
        .flatten()
        .next()
        .map(|o| o.name.clone())
        .unwrap_or_default();
    let to = created.spec.and_then(|s| s.replicas).unwrap_or(0);
    let name = created.metadata.name.unwrap_or_default();
    tracing::info!(%ns, deployment = %owner, replicaset = %name, to, "new replica set");
    let ev = EventSpec::normal(
        "ScalingReplicaSet",
        format!("Scaled up replica set {name} from 0 to {to}"),
    );
    events.event(&ns, &owner, ev).await;
    Ok(())
}

/// A ReplicaSet of `deployment` scaled `from` replicas `to` others.
struct Scaling<'a> {
    namespace: &'a str,
    name: &'a str,
    deployment: &'a str,
    from: i32,
    to: i32,
}

/// Scales a ReplicaSet and says so on its Deployment.
async fn scale_replicaset(
    client: &Client,
    events: &ScalingEvents<'_>,
    s: Scaling<'_>,
) -> Result<(), kube::Error> {
    let Scaling {
        namespace,
        name,
        deployment,
        from,
        to,
    } = s;
    Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": to } })),
        )
        .await?;
    let verb = if to > from { "up" } else { "down" };
    tracing::info!(%namespace, %deployment, replicaset = %name, from, to, "scaled replica set");
    let ev = EventSpec::normal(
        "ScalingReplicaSet",
        format!("Scaled {verb} replica set {name} from {from} to {to}"),
    );
    events.event(namespace, deployment, ev).await;
    Ok(())
}
