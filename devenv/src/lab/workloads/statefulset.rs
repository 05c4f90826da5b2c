//! What the lab's StatefulSet controller decides, without I/O: Pods named
//! `<set>-0` .. `<set>-(N-1)` (hostname the Pod's name, subdomain the
//! set's `serviceName`), created in order, each once the ones before it
//! are Ready (`OrderedReady`, the default) or all at once (`Parallel`);
//! removed from the highest ordinal down. A changed template is rolled
//! out from the highest ordinal down, one Pod at a time while every Pod
//! is Ready, to `partition` (`RollingUpdate`), or waits for the user to
//! delete old Pods (`OnDelete`). Revisions are `<set>-<template hash>`
//! (no ControllerRevision objects are kept); volumeClaimTemplates get no
//! PersistentVolumeClaims (the lab has no storage).

use super::daemonset::HASH_LABEL;
use super::plan::{Action, live, name, ns, owned_by, owner_ref, ready, template_hash};
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// The label naming a stateful Pod.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";

/// The label holding a stateful Pod's ordinal.
pub const INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// The Pod with ordinal `ordinal` of `sts` at `revision`.
fn stateful_pod(sts: &StatefulSet, revision: &str, ordinal: usize) -> Pod {
    let spec = sts.spec.clone().unwrap_or_default();
    let meta = spec.template.metadata.unwrap_or_default();
    let pod_name = format!("{}-{ordinal}", name(&sts.metadata));
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(HASH_LABEL.to_owned(), revision.to_owned());
    labels.insert(POD_NAME_LABEL.to_owned(), pod_name.clone());
    labels.insert(INDEX_LABEL.to_owned(), ordinal.to_string());
    let mut pod_spec: PodSpec = spec.template.spec.unwrap_or_default();
    pod_spec.hostname = Some(pod_name.clone());
    pod_spec.subdomain = spec.service_name.filter(|s| !s.is_empty());
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name),
            namespace: Some(ns(&sts.metadata)),
            labels: Some(labels),
            annotations: meta.annotations,
            owner_references: Some(vec![owner_ref("StatefulSet", &sts.metadata)]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    }
}

/// The ordinal of `pod` in the set named `set`.
fn ordinal(set: &str, pod: &Pod) -> Option<usize> {
    name(&pod.metadata)
        .strip_prefix(&format!("{set}-"))?
        .parse()
        .ok()
}

fn revision_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(HASH_LABEL))
        .map(String::as_str)
}

/// A StatefulSet as its controller reads it in one round.
struct Set<'a> {
    sts: &'a StatefulSet,
    name: String,
    namespace: String,
    replicas: usize,
    /// The revision the template asks for.
    revision: String,
    /// `Parallel` pod management: no waiting on the Pods before.
    parallel: bool,
    /// Its live Pods by ordinal.
    by_ordinal: BTreeMap<usize, &'a Pod>,
}

impl Set<'_> {
    fn delete(&self, p: &Pod, out: &mut Vec<Action>) {
        out.push(Action::DeletePod {
            namespace: self.namespace.clone(),
            name: name(&p.metadata),
        });
    }
}

/// Every write `sts`'s controller would make now.
pub fn plan(sts: &StatefulSet, pods: &[Pod], out: &mut Vec<Action>) {
    let Some(spec) = sts.spec.as_ref() else {
        return;
    };
    let set = name(&sts.metadata);
    let mut by_ordinal: BTreeMap<usize, &Pod> = BTreeMap::new();
    for p in pods
        .iter()
        .filter(|p| live(p) && owned_by(&p.metadata, &sts.metadata))
    {
        if let Some(i) = ordinal(&set, p) {
            by_ordinal.insert(i, p);
        }
    }
    let set = Set {
        sts,
        namespace: ns(&sts.metadata),
        replicas: usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0),
        revision: format!("{set}-{}", template_hash(&spec.template)),
        parallel: spec.pod_management_policy.as_deref() == Some("Parallel"),
        name: set,
        by_ordinal,
    };
    create_missing(&set, out);
    let wanted: Vec<&Pod> = set
        .by_ordinal
        .range(..set.replicas)
        .map(|(_, p)| *p)
        .collect();
    let all_ready = wanted.len() == set.replicas && wanted.iter().all(|p| ready(p));
    let condemned = scale_down(&set, &wanted, out);
    if all_ready && condemned == 0 {
        roll(&set, spec, out);
    }
    let status = status(&set);
    if sts.status.as_ref() != Some(&status) {
        out.push(Action::StatefulSetStatus {
            namespace: set.namespace,
            name: set.name,
            status,
        });
    }
}

/// Creates the missing Pods below `replicas` in order: ordered, only up
/// to the first Pod not Ready (or just created); parallel, all.
fn create_missing(set: &Set<'_>, out: &mut Vec<Action>) {
    let mut blocked = false;
    for i in 0..set.replicas {
        match set.by_ordinal.get(&i) {
            None if !blocked => {
                out.push(Action::CreatePod(stateful_pod(set.sts, &set.revision, i)));
                blocked = !set.parallel;
            }
            None => {}
            Some(p) => blocked |= !set.parallel && !ready(p),
        }
    }
}

/// Removes the Pods at or above `replicas` (the condemned) from the
/// highest ordinal down: ordered, one while the `wanted` are all Ready;
/// parallel, all. Returns how many are condemned.
fn scale_down(set: &Set<'_>, wanted: &[&Pod], out: &mut Vec<Action>) -> usize {
    let condemned: Vec<&Pod> = set
        .by_ordinal
        .range(set.replicas..)
        .rev()
        .map(|(_, p)| *p)
        .collect();
    if set.parallel {
        condemned.iter().for_each(|p| set.delete(p, out));
    } else if let Some(p) = condemned.first()
        && wanted.iter().all(|p| ready(p))
    {
        set.delete(p, out);
    }
    condemned.len()
}

/// Rolls a changed template out (`RollingUpdate`): deletes the highest
/// outdated Pod at or above `partition`, to be created again at the new
/// revision. Called only while every wanted Pod is Ready and none is
/// condemned.
fn roll(set: &Set<'_>, spec: &StatefulSetSpec, out: &mut Vec<Action>) {
    let strategy = spec.update_strategy.as_ref();
    let rolling = strategy
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate");
    let partition = strategy
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .and_then(|p| usize::try_from(p).ok())
        .unwrap_or(0);
    if !rolling {
        return;
    }
    let outdated = (partition..set.replicas)
        .rev()
        .filter_map(|i| set.by_ordinal.get(&i))
        .find(|p| revision_of(p) != Some(set.revision.as_str()));
    if let Some(p) = outdated {
        set.delete(p, out);
    }
}

/// The status the set should have: counts of its Pods by readiness and
/// revision, and the current revision, which becomes the update revision
/// once every Pod runs it.
fn status(set: &Set<'_>) -> StatefulSetStatus {
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let mine: Vec<&Pod> = set.by_ordinal.values().copied().collect();
    let ready_count = count(mine.iter().filter(|p| ready(p)).count());
    let updated = mine
        .iter()
        .filter(|p| revision_of(p) == Some(set.revision.as_str()))
        .count();
    let previous = set
        .sts
        .status
        .as_ref()
        .and_then(|s| s.current_revision.clone());
    let current_revision = if updated == set.replicas && mine.len() == set.replicas {
        set.revision.clone()
    } else {
        previous.unwrap_or_else(|| set.revision.clone())
    };
    let current = mine
        .iter()
        .filter(|p| revision_of(p) == Some(current_revision.as_str()))
        .count();
    StatefulSetStatus {
        observed_generation: set.sts.metadata.generation,
        replicas: count(mine.len()),
        ready_replicas: Some(ready_count),
        available_replicas: Some(ready_count),
        current_replicas: Some(count(current)),
        updated_replicas: Some(count(updated)),
        current_revision: Some(current_revision),
        update_revision: Some(set.revision.clone()),
        collision_count: Some(0),
        conditions: None,
    }
}
