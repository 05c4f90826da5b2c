//! What the lab's Deployment and ReplicaSet controllers decide, without
//! I/O: from the listed Deployments, ReplicaSets and Pods, the writes
//! that bring them one step closer to their specs ([`Action`]s), as
//! kube-controller-manager's controllers do.
//!
//! A Deployment owns one ReplicaSet per Pod template, named after the
//! template's hash (`<deployment>-<hash>`, label `pod-template-hash`);
//! a changed template gets a new ReplicaSet that is scaled up while the
//! old ones are scaled down within `maxSurge` and `maxUnavailable` (or,
//! with the `Recreate` strategy, after the old Pods are gone). A Pod is
//! available as soon as it is Ready (`minReadySeconds` is not honoured)
//! and `progressDeadlineSeconds` never expires.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{
    DaemonSetStatus, Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus,
    StatefulSetStatus,
};
use k8s_openapi::api::batch::v1::JobStatus;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::BTreeMap;

mod deployment;

/// The label naming a ReplicaSet's template hash.
pub const HASH_LABEL: &str = "pod-template-hash";

/// The annotation holding a Deployment's (and its ReplicaSets')
/// revision.
pub const REVISION: &str = "deployment.kubernetes.io/revision";

/// At most this many Pods are created for one ReplicaSet per round (the
/// next round creates more), so one huge `replicas` cannot flood the API.
pub const MAX_CREATES: usize = 50;

/// One write.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create a Pod (from `generateName`).
    CreatePod(Pod),
    /// Delete a Pod.
    DeletePod {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// Create a ReplicaSet for a Deployment.
    CreateReplicaSet(ReplicaSet),
    /// Set a ReplicaSet's `spec.replicas`.
    ScaleReplicaSet {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The owning Deployment (for its event).
        deployment: String,
        /// Replicas now.
        from: i32,
        /// Replicas wanted.
        to: i32,
    },
    /// Delete an old ReplicaSet beyond `revisionHistoryLimit`.
    DeleteReplicaSet {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// Write a ReplicaSet's status.
    ReplicaSetStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The new status.
        status: ReplicaSetStatus,
    },
    /// Write a Deployment's revision annotation.
    DeploymentRevision {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The revision of its newest ReplicaSet.
        revision: i64,
    },
    /// Write a DaemonSet's status.
    DaemonSetStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The new status.
        status: DaemonSetStatus,
    },
    /// Write a StatefulSet's status.
    StatefulSetStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The new status.
        status: StatefulSetStatus,
    },
    /// Write a Job's status.
    JobStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The new status.
        status: JobStatus,
    },
    /// Write a Deployment's status.
    DeploymentStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The new status.
        status: DeploymentStatus,
    },
}

pub(super) fn ns(meta: &ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_default()
}

pub(super) fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

pub(super) fn owned_by(meta: &ObjectMeta, owner: &ObjectMeta) -> bool {
    owner.uid.is_some()
        && controller_uid(meta) == owner.uid.as_deref()
        && meta.namespace == owner.namespace
}

pub(super) fn live(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && !matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

pub(super) fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub(super) fn owner_ref(kind: &str, meta: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".to_owned(),
        kind: kind.to_owned(),
        name: name(meta),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The live Pods of `rs`.
fn pods_of<'a>(rs: &ReplicaSet, pods: &'a [Pod]) -> Vec<&'a Pod> {
    pods.iter()
        .filter(|p| live(p) && owned_by(&p.metadata, &rs.metadata))
        .collect()
}

/// kube-controller-manager's template hash: FNV-1a (32 bit) of the
/// template, its decimal digits spelled in an alphabet without vowels.
pub fn template_hash(template: &PodTemplateSpec) -> String {
    let text = serde_json::to_string(template).unwrap_or_default();
    let hash = text.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| char::from(ALPHABET[usize::from(b) % ALPHABET.len()]))
        .collect()
}

/// What a ReplicaSet's controller does: create or delete Pods to match
/// `spec.replicas`, and report counts.
fn plan_replicaset(rs: &ReplicaSet, pods: &[Pod], out: &mut Vec<Action>) {
    let mine = pods_of(rs, pods);
    let want = rs
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
        .max(0);
    let want = usize::try_from(want).unwrap_or(0);
    let namespace = ns(&rs.metadata);
    if mine.len() < want {
        let template = rs
            .spec
            .as_ref()
            .and_then(|s| s.template.clone())
            .unwrap_or_default();
        let meta = template.metadata.unwrap_or_default();
        for _ in 0..(want - mine.len()).min(MAX_CREATES) {
            out.push(Action::CreatePod(Pod {
                metadata: ObjectMeta {
                    generate_name: Some(format!("{}-", name(&rs.metadata))),
                    namespace: Some(namespace.clone()),
                    labels: meta.labels.clone(),
                    annotations: meta.annotations.clone(),
                    owner_references: Some(vec![owner_ref("ReplicaSet", &rs.metadata)]),
                    ..ObjectMeta::default()
                },
                spec: template.spec.clone(),
                status: None,
            }));
        }
    } else if mine.len() > want {
        // kube-controller-manager's order: unscheduled, then not ready,
        // then the newest go first.
        let mut doomed = mine.clone();
        doomed.sort_by_key(|p| {
            let scheduled = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some();
            (
                scheduled,
                ready(p),
                std::cmp::Reverse(p.metadata.creation_timestamp.as_ref().map(|t| t.0)),
                name(&p.metadata),
            )
        });
        for p in doomed.into_iter().take(mine.len() - want) {
            out.push(Action::DeletePod {
                namespace: namespace.clone(),
                name: name(&p.metadata),
            });
        }
    }
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let ready_pods = count(mine.iter().filter(|p| ready(p)).count());
    let status = ReplicaSetStatus {
        replicas: count(mine.len()),
        fully_labeled_replicas: Some(count(mine.len())),
        ready_replicas: Some(ready_pods),
        available_replicas: Some(ready_pods),
        observed_generation: rs.metadata.generation,
        conditions: None,
        terminating_replicas: None,
    };
    if rs.status.as_ref() != Some(&status) {
        out.push(Action::ReplicaSetStatus {
            namespace,
            name: name(&rs.metadata),
            status,
        });
    }
}

/// Every write the Deployment and ReplicaSet controllers would make now.
pub fn plan(
    deployments: &[Deployment],
    replicasets: &[ReplicaSet],
    pods: &[Pod],
    now: Timestamp,
) -> Vec<Action> {
    let mut out = Vec::new();
    for d in deployments
        .iter()
        .filter(|d| d.metadata.deletion_timestamp.is_none())
    {
        deployment::plan_deployment(d, replicasets, pods, now, &mut out);
    }
    // The ReplicaSets as the Deployments just scaled them: planning on
    // the listed replicas would create Pods a scale-down is removing.
    let scaled: BTreeMap<(&str, &str), i32> = out
        .iter()
        .filter_map(|a| match a {
            Action::ScaleReplicaSet {
                namespace,
                name,
                to,
                ..
            } => Some(((namespace.as_str(), name.as_str()), *to)),
            _ => None,
        })
        .collect();
    let mut more = Vec::new();
    for rs in replicasets
        .iter()
        .filter(|r| r.metadata.deletion_timestamp.is_none())
    {
        let key = (
            rs.metadata.namespace.as_deref().unwrap_or_default(),
            rs.metadata.name.as_deref().unwrap_or_default(),
        );
        match scaled.get(&key) {
            Some(to) => {
                let mut rs = rs.clone();
                rs.spec.get_or_insert_with(ReplicaSetSpec::default).replicas = Some(*to);
                plan_replicaset(&rs, pods, &mut more);
            }
            None => plan_replicaset(rs, pods, &mut more),
        }
    }
    out.extend(more);
    out
}
