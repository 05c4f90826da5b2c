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
    DaemonSetStatus, Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
    ReplicaSetStatus, StatefulSetStatus,
};
use k8s_openapi::api::batch::v1::JobStatus;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

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

/// `value` (a count or a percentage of `total`), rounded up or down.
fn scaled(value: Option<&IntOrString>, total: i32, round_up: bool) -> i32 {
    match value {
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(25);
            let product = pct * i64::from(total);
            let v = if round_up {
                (product + 99) / 100
            } else {
                product / 100
            };
            i32::try_from(v).unwrap_or(i32::MAX)
        }
        None => scaled(Some(&IntOrString::String("25%".into())), total, round_up),
    }
}

/// `maxSurge` and `maxUnavailable` of a rolling update (both zero is
/// read as one unavailable, as kube-controller-manager does); a
/// `Recreate` Deployment has neither.
fn surge_and_unavailable(d: &Deployment, replicas: i32) -> (i32, i32) {
    let strategy = d.spec.as_ref().and_then(|s| s.strategy.as_ref());
    if strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate") {
        return (0, 0);
    }
    let ru = strategy.and_then(|s| s.rolling_update.as_ref());
    let surge = scaled(ru.and_then(|r| r.max_surge.as_ref()), replicas, true).max(0);
    let unavailable = scaled(ru.and_then(|r| r.max_unavailable.as_ref()), replicas, false).max(0);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

fn revision(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// One ReplicaSet of a Deployment as the rollout sees it.
struct Member<'a> {
    rs: Option<&'a ReplicaSet>,
    name: String,
    replicas: i32,
    available: i32,
    pods: i32,
    ready: i32,
}

/// What a Deployment's controller does: make sure a ReplicaSet for the
/// current template exists, scale it and the old ones, report status.
fn plan_deployment(
    d: &Deployment,
    replicasets: &[ReplicaSet],
    pods: &[Pod],
    now: Timestamp,
    out: &mut Vec<Action>,
) {
    let Some(spec) = d.spec.as_ref() else { return };
    let namespace = ns(&d.metadata);
    let dname = name(&d.metadata);
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let hash = template_hash(&spec.template);
    let mut owned: Vec<&ReplicaSet> = replicasets
        .iter()
        .filter(|rs| owned_by(&rs.metadata, &d.metadata))
        .collect();
    owned.sort_by_key(|rs| {
        (
            revision(rs),
            rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
        )
    });
    let member = |rs: &ReplicaSet| {
        let mine = pods_of(rs, pods);
        let ready = i32::try_from(mine.iter().filter(|p| ready(p)).count()).unwrap_or(i32::MAX);
        Member {
            rs: None,
            name: name(&rs.metadata),
            replicas: rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            available: ready,
            pods: i32::try_from(mine.len()).unwrap_or(i32::MAX),
            ready,
        }
    };
    let is_new = |rs: &&ReplicaSet| {
        rs.metadata.labels.as_ref().and_then(|l| l.get(HASH_LABEL)) == Some(&hash)
    };
    let mut olds: Vec<Member> = owned
        .iter()
        .filter(|rs| !is_new(rs))
        .map(|rs| Member {
            rs: Some(rs),
            ..member(rs)
        })
        .collect();
    let next_revision = owned.iter().map(|rs| revision(rs)).max().unwrap_or(0) + 1;
    let existing = owned.iter().copied().find(|rs| is_new(rs));
    let mut new = match existing {
        Some(rs) => Member {
            rs: Some(rs),
            ..member(rs)
        },
        None => Member {
            rs: None,
            name: format!("{dname}-{hash}"),
            replicas: 0,
            available: 0,
            pods: 0,
            ready: 0,
        },
    };
    let (surge, max_unavailable) = surge_and_unavailable(d, replicas);
    let paused = spec.paused == Some(true);
    let recreate = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
    let old_replicas: i32 = olds.iter().map(|o| o.replicas).sum();
    let before: Vec<i32> = olds.iter().map(|o| o.replicas).collect();
    let new_before = new.replicas;
    if paused {
        // Nothing moves while paused.
    } else if recreate {
        olds.iter_mut().for_each(|o| o.replicas = 0);
        let old_pods: i32 = olds.iter().map(|o| o.pods).sum();
        new.replicas = if old_pods == 0 {
            replicas
        } else {
            new.replicas
        };
    } else if old_replicas == 0 {
        new.replicas = replicas;
    } else {
        // Scale up within the surge.
        let total = new.replicas + old_replicas;
        let room = (replicas + surge - total).max(0);
        new.replicas = if new.replicas > replicas {
            replicas
        } else {
            (new.replicas + room).min(replicas)
        };
        // Scale down: first old Pods that are not available, then
        // available ones as long as enough stay available.
        let min_available = replicas - max_unavailable;
        let all: i32 = new.replicas + old_replicas;
        let new_unavailable = (new.replicas - new.available).max(0);
        let mut cleanup = (all - min_available - new_unavailable).max(0);
        for o in olds.iter_mut() {
            let unhealthy = (o.replicas - o.available).max(0);
            let down = unhealthy.min(cleanup);
            o.replicas -= down;
            cleanup -= down;
        }
        let available: i32 = new.available
            + olds
                .iter()
                .map(|o| o.available.min(o.replicas))
                .sum::<i32>();
        let mut down_budget = (available - min_available).max(0);
        for o in olds.iter_mut() {
            let down = o.replicas.min(down_budget);
            o.replicas -= down;
            down_budget -= down;
        }
    }
    match new.rs {
        None if !paused => {
            let mut labels = spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            labels.insert(HASH_LABEL.to_owned(), hash.clone());
            let mut template = spec.template.clone();
            template
                .metadata
                .get_or_insert_with(ObjectMeta::default)
                .labels = Some(labels.clone());
            let mut selector = spec.selector.clone();
            selector
                .match_labels
                .get_or_insert_with(BTreeMap::new)
                .insert(HASH_LABEL.to_owned(), hash.clone());
            out.push(Action::CreateReplicaSet(ReplicaSet {
                metadata: ObjectMeta {
                    name: Some(new.name.clone()),
                    namespace: Some(namespace.clone()),
                    labels: Some(labels),
                    annotations: Some(BTreeMap::from([(
                        REVISION.to_owned(),
                        next_revision.to_string(),
                    )])),
                    owner_references: Some(vec![owner_ref("Deployment", &d.metadata)]),
                    ..ObjectMeta::default()
                },
                spec: Some(ReplicaSetSpec {
                    replicas: Some(new.replicas),
                    selector,
                    template: Some(template),
                    min_ready_seconds: spec.min_ready_seconds,
                }),
                status: None,
            }));
        }
        None => {}
        Some(_) if new.replicas != new_before => out.push(Action::ScaleReplicaSet {
            namespace: namespace.clone(),
            name: new.name.clone(),
            deployment: dname.clone(),
            from: new_before,
            to: new.replicas,
        }),
        Some(_) => {}
    }
    for (o, from) in olds.iter().zip(before) {
        if o.replicas != from {
            out.push(Action::ScaleReplicaSet {
                namespace: namespace.clone(),
                name: o.name.clone(),
                deployment: dname.clone(),
                from,
                to: o.replicas,
            });
        }
    }
    // Old ReplicaSets scaled to zero and empty beyond the history limit.
    let limit = usize::try_from(spec.revision_history_limit.unwrap_or(10).max(0)).unwrap_or(0);
    let idle: Vec<&Member> = olds
        .iter()
        .filter(|o| o.replicas == 0 && o.pods == 0)
        .collect();
    for o in idle.iter().take(idle.len().saturating_sub(limit)) {
        out.push(Action::DeleteReplicaSet {
            namespace: namespace.clone(),
            name: o.name.clone(),
        });
    }
    let new_revision = new.rs.map_or(next_revision, revision);
    let annotated = d
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok());
    if !paused && annotated != Some(new_revision) {
        out.push(Action::DeploymentRevision {
            namespace: namespace.clone(),
            name: dname.clone(),
            revision: new_revision,
        });
    }
    let status = deployment_status(d, replicas, max_unavailable, &new, &olds, now);
    if d.status.as_ref() != Some(&status) {
        out.push(Action::DeploymentStatus {
            namespace,
            name: dname,
            status,
        });
    }
}

fn deployment_status(
    d: &Deployment,
    replicas: i32,
    max_unavailable: i32,
    new: &Member,
    olds: &[Member],
    now: Timestamp,
) -> DeploymentStatus {
    let pods = new.pods + olds.iter().map(|o| o.pods).sum::<i32>();
    let ready = new.ready + olds.iter().map(|o| o.ready).sum::<i32>();
    let available = new.available + olds.iter().map(|o| o.available).sum::<i32>();
    let spec_total = new.replicas + olds.iter().map(|o| o.replicas).sum::<i32>();
    let complete = new.pods == replicas && pods == replicas && new.available == replicas;
    let previous = |type_: &str| {
        d.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
    };
    let condition = |type_: &str, status: &str, reason: &str, message: String| {
        let old = previous(type_);
        let same = old.is_some_and(|c| {
            c.status == status
                && c.reason.as_deref() == Some(reason)
                && c.message.as_deref() == Some(message.as_str())
        });
        let transition = old
            .filter(|c| c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or(Time(now));
        let update = if same {
            old.and_then(|c| c.last_update_time.clone())
                .unwrap_or(Time(now))
        } else {
            Time(now)
        };
        DeploymentCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message),
            last_transition_time: Some(transition),
            last_update_time: Some(update),
        }
    };
    let available_condition = if available >= replicas - max_unavailable {
        condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
        )
    } else {
        condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
        )
    };
    let progressing = if d.spec.as_ref().and_then(|s| s.paused) == Some(true) {
        condition(
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused".into(),
        )
    } else if complete {
        condition(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{}\" has successfully progressed.", new.name),
        )
    } else if new.rs.is_none() {
        condition(
            "Progressing",
            "True",
            "NewReplicaSetCreated",
            format!("Created new replica set \"{}\"", new.name),
        )
    } else {
        condition(
            "Progressing",
            "True",
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{}\" is progressing.", new.name),
        )
    };
    DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(pods),
        updated_replicas: Some(new.pods),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        unavailable_replicas: Some((spec_total - available).max(0)),
        conditions: Some(vec![available_condition, progressing]),
        collision_count: None,
        terminating_replicas: None,
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
        plan_deployment(d, replicasets, pods, now, &mut out);
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
