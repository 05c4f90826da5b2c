//! What the lab's Deployment controller decides, without I/O: read a
//! Deployment's ReplicaSets as one rollout, scale the new and the old
//! ones within `maxSurge` and `maxUnavailable` (or `Recreate`), write
//! what changed, prune the history and report status. The ReplicaSets
//! then create and delete the Pods ([`super::plan`]).

use super::{
    Action, HASH_LABEL, REVISION, name, ns, owned_by, owner_ref, pods_of, ready, template_hash,
};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentSpec, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

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
    /// Its `spec.replicas` as listed (0 for one not created yet).
    listed: i32,
    /// Its `spec.replicas` as the rollout wants it.
    replicas: i32,
    available: i32,
    pods: i32,
    ready: i32,
}

impl<'a> Member<'a> {
    /// `rs` with its live Pods among `pods`.
    fn of(rs: &'a ReplicaSet, pods: &[Pod]) -> Member<'a> {
        let mine = pods_of(rs, pods);
        let ready = i32::try_from(mine.iter().filter(|p| ready(p)).count()).unwrap_or(i32::MAX);
        let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        Member {
            rs: Some(rs),
            name: name(&rs.metadata),
            listed: replicas,
            replicas,
            available: ready,
            pods: i32::try_from(mine.len()).unwrap_or(i32::MAX),
            ready,
        }
    }
}

/// A Deployment's ReplicaSets as its rollout reads them: the one for the
/// current template (`new`, perhaps not created yet) and the old ones,
/// oldest first.
struct Rollout<'a> {
    new: Member<'a>,
    olds: Vec<Member<'a>>,
    /// The revision a new ReplicaSet gets: one past the newest.
    next_revision: i64,
}

impl<'a> Rollout<'a> {
    /// The ReplicaSets among `replicasets` that `d` owns; the new one is
    /// the one labelled with `hash`, the current template's.
    fn read(d: &Deployment, hash: &str, replicasets: &'a [ReplicaSet], pods: &[Pod]) -> Self {
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
        let is_new = |rs: &&ReplicaSet| {
            rs.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(HASH_LABEL))
                .map(String::as_str)
                == Some(hash)
        };
        let new = match owned.iter().copied().find(|rs| is_new(rs)) {
            Some(rs) => Member::of(rs, pods),
            None => Member {
                rs: None,
                name: format!("{}-{hash}", name(&d.metadata)),
                listed: 0,
                replicas: 0,
                available: 0,
                pods: 0,
                ready: 0,
            },
        };
        Rollout {
            new,
            olds: owned
                .iter()
                .filter(|rs| !is_new(rs))
                .map(|rs| Member::of(rs, pods))
                .collect(),
            next_revision: owned.iter().map(|rs| revision(rs)).max().unwrap_or(0) + 1,
        }
    }

    /// `Recreate`: the old ReplicaSets go to zero, and the new one up to
    /// `replicas` only once every old Pod is gone.
    fn recreate(&mut self, replicas: i32) {
        self.olds.iter_mut().for_each(|o| o.replicas = 0);
        let old_pods: i32 = self.olds.iter().map(|o| o.pods).sum();
        if old_pods == 0 {
            self.new.replicas = replicas;
        }
    }

    /// `RollingUpdate`: the new ReplicaSet up within `surge` over
    /// `replicas`, then the old ones down while no more than
    /// `max_unavailable` are unavailable.
    fn roll(&mut self, replicas: i32, surge: i32, max_unavailable: i32) {
        let old_replicas: i32 = self.olds.iter().map(|o| o.replicas).sum();
        if old_replicas == 0 {
            self.new.replicas = replicas;
            return;
        }
        let new = &mut self.new;
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
        for o in self.olds.iter_mut() {
            let unhealthy = (o.replicas - o.available).max(0);
            let down = unhealthy.min(cleanup);
            o.replicas -= down;
            cleanup -= down;
        }
        let available: i32 = new.available
            + self
                .olds
                .iter()
                .map(|o| o.available.min(o.replicas))
                .sum::<i32>();
        let mut down_budget = (available - min_available).max(0);
        for o in self.olds.iter_mut() {
            let down = o.replicas.min(down_budget);
            o.replicas -= down;
            down_budget -= down;
        }
    }

    /// The revision of the new ReplicaSet, made or to be made.
    fn new_revision(&self) -> i64 {
        self.new.rs.map_or(self.next_revision, revision)
    }
}

/// What a Deployment's controller does: make sure a ReplicaSet for the
/// current template exists, scale it and the old ones, report status.
pub(super) fn plan_deployment(
    d: &Deployment,
    replicasets: &[ReplicaSet],
    pods: &[Pod],
    now: Timestamp,
    out: &mut Vec<Action>,
) {
    let Some(spec) = d.spec.as_ref() else { return };
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let hash = template_hash(&spec.template);
    let mut rollout = Rollout::read(d, &hash, replicasets, pods);
    let (surge, max_unavailable) = surge_and_unavailable(d, replicas);
    let paused = spec.paused == Some(true);
    let recreate = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
    // Nothing moves while paused.
    if !paused {
        if recreate {
            rollout.recreate(replicas);
        } else {
            rollout.roll(replicas, surge, max_unavailable);
        }
    }
    match rollout.new.rs {
        None if !paused => out.push(Action::CreateReplicaSet(new_replicaset(
            d, spec, &hash, &rollout,
        ))),
        None => {}
        Some(_) => scale(d, &rollout.new, out),
    }
    rollout.olds.iter().for_each(|o| scale(d, o, out));
    prune(d, spec, &rollout.olds, out);
    let annotated = d
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok());
    if !paused && annotated != Some(rollout.new_revision()) {
        out.push(Action::DeploymentRevision {
            namespace: ns(&d.metadata),
            name: name(&d.metadata),
            revision: rollout.new_revision(),
        });
    }
    let status = deployment_status(d, replicas, max_unavailable, &rollout, now);
    if d.status.as_ref() != Some(&status) {
        out.push(Action::DeploymentStatus {
            namespace: ns(&d.metadata),
            name: name(&d.metadata),
            status,
        });
    }
}

/// The ReplicaSet for `d`'s current template (labelled and selected by
/// its `hash`), at the replicas the rollout gave it.
fn new_replicaset(
    d: &Deployment,
    spec: &DeploymentSpec,
    hash: &str,
    rollout: &Rollout<'_>,
) -> ReplicaSet {
    let mut labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(HASH_LABEL.to_owned(), hash.to_owned());
    let mut template = spec.template.clone();
    template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels = Some(labels.clone());
    let mut selector = spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(HASH_LABEL.to_owned(), hash.to_owned());
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(rollout.new.name.clone()),
            namespace: Some(ns(&d.metadata)),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                REVISION.to_owned(),
                rollout.next_revision.to_string(),
            )])),
            owner_references: Some(vec![owner_ref("Deployment", &d.metadata)]),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(rollout.new.replicas),
            selector,
            template: Some(template),
            min_ready_seconds: spec.min_ready_seconds,
        }),
        status: None,
    }
}

/// Scales an existing ReplicaSet of `d` to what the rollout wants, if
/// that is not what it has.
fn scale(d: &Deployment, m: &Member<'_>, out: &mut Vec<Action>) {
    if m.replicas != m.listed {
        out.push(Action::ScaleReplicaSet {
            namespace: ns(&d.metadata),
            name: m.name.clone(),
            deployment: name(&d.metadata),
            from: m.listed,
            to: m.replicas,
        });
    }
}

/// Deletes the old ReplicaSets scaled to zero and empty beyond the
/// history limit, oldest first.
fn prune(d: &Deployment, spec: &DeploymentSpec, olds: &[Member<'_>], out: &mut Vec<Action>) {
    let limit = usize::try_from(spec.revision_history_limit.unwrap_or(10).max(0)).unwrap_or(0);
    let idle: Vec<&Member> = olds
        .iter()
        .filter(|o| o.replicas == 0 && o.pods == 0)
        .collect();
    for o in idle.iter().take(idle.len().saturating_sub(limit)) {
        out.push(Action::DeleteReplicaSet {
            namespace: ns(&d.metadata),
            name: o.name.clone(),
        });
    }
}

/// The status `d` should have at `now`, from its ReplicaSets' counts.
fn deployment_status(
    d: &Deployment,
    replicas: i32,
    max_unavailable: i32,
    rollout: &Rollout<'_>,
    now: Timestamp,
) -> DeploymentStatus {
    let (new, olds) = (&rollout.new, &rollout.olds);
    let pods = new.pods + olds.iter().map(|o| o.pods).sum::<i32>();
    let ready = new.ready + olds.iter().map(|o| o.ready).sum::<i32>();
    let available = new.available + olds.iter().map(|o| o.available).sum::<i32>();
    let spec_total = new.replicas + olds.iter().map(|o| o.replicas).sum::<i32>();
    let complete = new.pods == replicas && pods == replicas && new.available == replicas;
    let condition = |type_: &str, status: &str, reason: &str, message: String| {
        deployment_condition(d, now, type_, status, reason, message)
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

/// A condition of `d` at `now`: its transition time kept while its
/// status stays, its update time while nothing about it changes.
fn deployment_condition(
    d: &Deployment,
    now: Timestamp,
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
) -> DeploymentCondition {
    let old = d
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_));
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
}
