//! What the lab's DaemonSet controller decides, without I/O: one Pod of
//! the template on every node it fits (nodeSelector, required node
//! affinity and taints, as [`crate::lab::scheduler::filters::fits`]
//! judges them, with the tolerations kube-controller-manager adds to
//! daemon Pods), put there directly (`nodeName`); Pods on nodes they may
//! no longer stay on ([`crate::lab::scheduler::filters::may_stay`]) are
//! deleted. A changed template is rolled out node by node within
//! `maxUnavailable` (`RollingUpdate`, the default) or waits for the user
//! to delete old Pods (`OnDelete`). Pods carry the template's hash as
//! `controller-revision-hash` (no ControllerRevision objects are kept).

use super::plan::{Action, live, name, ns, owned_by, owner_ref, ready, template_hash};
use crate::lab::scheduler::filters;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// The label naming a daemon Pod's template hash.
pub const HASH_LABEL: &str = "controller-revision-hash";

/// The tolerations every daemon Pod gets (kube-controller-manager's).
fn daemon_tolerations() -> Vec<Toleration> {
    let t = |key: &str, effect: &str| Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some(effect.to_owned()),
        ..Toleration::default()
    };
    vec![
        t("node.kubernetes.io/not-ready", "NoExecute"),
        t("node.kubernetes.io/unreachable", "NoExecute"),
        t("node.kubernetes.io/disk-pressure", "NoSchedule"),
        t("node.kubernetes.io/memory-pressure", "NoSchedule"),
        t("node.kubernetes.io/pid-pressure", "NoSchedule"),
        t("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
}

/// The daemon Pod for `node` (without its name: `generateName`).
fn daemon_pod(ds: &DaemonSet, hash: &str, node: Option<&str>) -> Pod {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(HASH_LABEL.to_owned(), hash.to_owned());
    let mut spec: PodSpec = template.spec.unwrap_or_default();
    let mut tolerations = spec.tolerations.take().unwrap_or_default();
    for t in daemon_tolerations() {
        if !tolerations.contains(&t) {
            tolerations.push(t);
        }
    }
    spec.tolerations = Some(tolerations);
    spec.node_name = node.map(str::to_owned);
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", name(&ds.metadata))),
            namespace: Some(ns(&ds.metadata)),
            labels: Some(labels),
            annotations: meta.annotations,
            owner_references: Some(vec![owner_ref("DaemonSet", &ds.metadata)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

fn hash_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(HASH_LABEL))
        .map(String::as_str)
}

/// `maxUnavailable` of a rolling update (a count or a percentage of the
/// nodes, rounded up; at least one).
fn max_unavailable(ds: &DaemonSet, desired: usize) -> usize {
    let value = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_unavailable.clone());
    let n = match value {
        Some(IntOrString::Int(i)) => usize::try_from(i).unwrap_or(0),
        Some(IntOrString::String(s)) => {
            let pct: usize = s.trim_end_matches('%').parse().unwrap_or(0);
            (pct * desired).div_ceil(100)
        }
        None => 1,
    };
    n.max(1)
}

/// The live Pods of `ds`, by the node they are on (`""`: none yet).
fn pods_by_node<'a>(ds: &DaemonSet, pods: &'a [Pod]) -> BTreeMap<String, Vec<&'a Pod>> {
    let mut by_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for p in pods
        .iter()
        .filter(|p| live(p) && owned_by(&p.metadata, &ds.metadata))
    {
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        by_node.entry(node).or_default().push(p);
    }
    by_node
}

/// The nodes that should run a Pod like `probe`: a node gets one where it
/// fits, and keeps one where it may stay.
fn wanted_nodes<'a>(
    probe: &Pod,
    nodes: &'a [Node],
    by_node: &BTreeMap<String, Vec<&Pod>>,
) -> Vec<&'a str> {
    nodes
        .iter()
        .filter(|n| {
            let name = n.metadata.name.as_deref().unwrap_or_default();
            filters::fits(probe, n) || (by_node.contains_key(name) && filters::may_stay(probe, n))
        })
        .filter_map(|n| n.metadata.name.as_deref())
        .collect()
}

/// Every write `ds`'s controller would make now.
pub fn plan(ds: &DaemonSet, nodes: &[Node], pods: &[Pod], out: &mut Vec<Action>) {
    let Some(spec) = ds.spec.as_ref() else { return };
    let hash = template_hash(&spec.template);
    let namespace = ns(&ds.metadata);
    let probe = daemon_pod(ds, &hash, None);
    let by_node = pods_by_node(ds, pods);
    let wanted = wanted_nodes(&probe, nodes, &by_node);
    let delete = |p: &Pod, out: &mut Vec<Action>| {
        out.push(Action::DeletePod {
            namespace: namespace.clone(),
            name: name(&p.metadata),
        })
    };
    let mut misscheduled = 0;
    for (node, here) in &by_node {
        if !wanted.contains(&node.as_str()) {
            misscheduled += 1;
            here.iter().for_each(|p| delete(p, out));
        }
    }
    let rolling = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate");
    let unavailable_now = wanted
        .iter()
        .filter(|n| {
            !by_node
                .get(**n)
                .is_some_and(|ps| ps.iter().any(|p| ready(p)))
        })
        .count();
    let mut budget = max_unavailable(ds, wanted.len()).saturating_sub(unavailable_now);
    let (mut current, mut ready_count, mut updated) = (0, 0, 0);
    for node in &wanted {
        let mut here = by_node.get(*node).cloned().unwrap_or_default();
        // The oldest stays when a node has more than one.
        here.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
        for extra in here.iter().skip(1) {
            delete(extra, out);
        }
        match here.first() {
            None => out.push(Action::CreatePod(daemon_pod(ds, &hash, Some(node)))),
            Some(p) => {
                current += 1;
                let is_ready = ready(p);
                ready_count += usize::from(is_ready);
                if hash_of(p) == Some(hash.as_str()) {
                    updated += 1;
                } else if rolling && (!is_ready || budget > 0) {
                    // An old Pod that is not ready costs no availability.
                    if is_ready {
                        budget -= 1;
                    }
                    delete(p, out);
                }
            }
        }
    }
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let status = DaemonSetStatus {
        desired_number_scheduled: count(wanted.len()),
        current_number_scheduled: count(current),
        number_misscheduled: misscheduled,
        number_ready: count(ready_count),
        number_available: Some(count(ready_count)),
        number_unavailable: Some(count(wanted.len().saturating_sub(ready_count))),
        updated_number_scheduled: Some(count(updated)),
        observed_generation: ds.metadata.generation,
        collision_count: None,
        conditions: None,
    };
    if ds.status.as_ref() != Some(&status) {
        out.push(Action::DaemonSetStatus {
            namespace,
            name: name(&ds.metadata),
            status,
        });
    }
}
