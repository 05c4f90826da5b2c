//! Presence: each speaker holds a Lease `metallb-speaker-<node>`, renews
//! it and clears its holder on SIGTERM. Other speakers drop a node whose
//! speaker left from their candidates at once, so a stopped speaker's
//! addresses move immediately - without waiting for its Node or
//! endpoints to change (upstream without memberlist never moves them).
//! The renewals tell a crashed speaker from one that is only cut off from
//! the others; `liveness` weighs them with gossip.
//!
//! Renewals are slow ([`SLOW_RENEW`], below the kubelet's node-lease
//! rate) while gossip agrees, and fast ([`FAST_RENEW`]) while in doubt.
//! A speaker that doubts members - its own probe of one went unanswered,
//! or one is down while its lease still says otherwise - marks its lease
//! with their names ([`TROUBLE_ANNOTATION`], a [`Mark`]); a speaker named
//! by a fresh mark renews fast ([`mode`]). So whoever judges a member
//! that gossip lost has it renewing fast from the moment a mark naming it
//! showed, and a member that missed one fast renewal since then has
//! stopped (`liveness`). Only the doubted renew fast: a suspicion in a
//! cluster of 1,000 nodes costs a few writes, not a few thousand, and
//! one speaker's mark serves every judge (a member already named by
//! someone else's mark is not named again). Only renewals are written;
//! nobody reads a lease but through the watch.
//!
//! A renewal counts when we see the lease change, on our monotonic clock
//! ([`crate::k8s::observed`]): another node's renewTime is never compared
//! with ours, so a node whose wall clock is off neither loses its
//! addresses while it renews nor keeps them once it stops.

pub use super::lease::{
    FAST_RENEW, LeaseState, MARK_NAMES_MAX, Mark, Mode, SLOW_RENEW, fresh_marks, mode,
};
use crate::k8s::observed::{self, Observation, Version};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Lease name prefix.
pub const LEASE_PREFIX: &str = "metallb-speaker-";
/// Label on the leases (the speaker watches only these).
pub const COMPONENT_LABEL: &str = "metallb.io/component";
/// On the lease of a speaker that sees trouble in gossip: every speaker
/// renews fast while a fresh lease carries it.
pub const TROUBLE_ANNOTATION: &str = "metallb.io/gossip-trouble";
/// On the lease of a speaker whose node's data-plane link is down while
/// its API path works (value: the interface): every speaker counts it
/// gone (`liveness` rule 3), itself included.
pub const LINK_DOWN_ANNOTATION: &str = "metallb.io/link-down";
/// On every speaker's lease: its gossip run (the identity's number, see
/// `membership::next_run`), so that the next run on the node takes a
/// larger one even when the node's clock was stepped back meanwhile.
pub const RUN_ANNOTATION: &str = "metallb.io/gossip-run";
/// A lease's `leaseDurationSeconds` is this many renewal periods; a lease
/// without one (or of an older release) is read as renewed every 2 s.
const DURATION_PERIODS: i32 = 3;
const DEFAULT_PERIOD: Duration = Duration::from_secs(2);

/// The marks the presence leases of nodes (`is_node`) carry, by node. A
/// lease whose node does not exist is anyone's who can write a Lease, or
/// a deleted node's: its mark must not pin the cluster to fast renewals.
pub fn marks<'a>(
    leases: impl IntoIterator<Item = &'a Lease>,
    is_node: impl Fn(&str) -> bool,
) -> BTreeMap<String, Mark> {
    leases
        .into_iter()
        .filter_map(|l| {
            let node = l.metadata.name.as_deref()?.strip_prefix(LEASE_PREFIX)?;
            if !is_node(node) {
                return None;
            }
            let value = l.metadata.annotations.as_ref()?.get(TROUBLE_ANNOTATION)?;
            Some((node.to_owned(), Mark::parse(value)))
        })
        .collect()
}

fn lease_name(node: &str) -> String {
    format!("{LEASE_PREFIX}{node}")
}

/// What each node's presence lease says: held or cleared, its renewal
/// period and mark, and when (our clock) we first saw its current
/// version. `seen` carries the observations from one call to the next
/// (updated here; leases that vanished are forgotten); a lease first seen
/// now counts as renewed now.
pub fn states<'a>(
    leases: impl IntoIterator<Item = &'a Lease>,
    seen: &mut BTreeMap<String, Observation>,
    now: Instant,
) -> BTreeMap<String, LeaseState> {
    let mut next = BTreeMap::new();
    let states = leases
        .into_iter()
        .filter_map(|l| {
            let node = l.metadata.name.as_deref()?.strip_prefix(LEASE_PREFIX)?;
            let spec = l.spec.as_ref();
            let held = spec
                .and_then(|s| s.holder_identity.as_deref())
                .is_some_and(|h| !h.is_empty());
            let period = period_of(spec.and_then(|s| s.lease_duration_seconds));
            let trouble = l
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(TROUBLE_ANNOTATION));
            let link_down = l
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(LINK_DOWN_ANNOTATION));
            let o = observed::observe(seen.get(node), Version::of(l), now);
            let (changed, renewed) = (o.since, o.renewed);
            next.insert(node.to_owned(), o);
            Some((
                node.to_owned(),
                LeaseState {
                    held,
                    changed,
                    renewed,
                    period,
                    trouble,
                    link_down,
                },
            ))
        })
        .collect();
    *seen = next;
    states
}

/// The renewal period a lease's `leaseDurationSeconds` declares, held
/// to what a speaker of ours ever writes ([`FAST_RENEW`] to
/// [`SLOW_RENEW`]): anyone who can write a Lease could otherwise make a
/// dead speaker count as renewing for hours, or make its lease look
/// overdue between two honest renewals.
fn period_of(duration_seconds: Option<i32>) -> Duration {
    duration_seconds
        .and_then(|d| u64::try_from(d / DURATION_PERIODS).ok())
        .filter(|p| *p > 0)
        .map_or(DEFAULT_PERIOD, Duration::from_secs)
        .clamp(FAST_RENEW, SLOW_RENEW)
}

/// Marks `node`'s speaker present (creates or takes its lease), renewing
/// as `mode` says, unmarked, its link not marked down, in gossip run
/// `run`.
pub async fn join(
    api: &Api<Lease>,
    node: &str,
    mode: Mode,
    run: Option<u64>,
) -> Result<(), kube::Error> {
    let marks = Marks {
        run,
        ..Marks::default()
    };
    set(api, node, Some(node), mode, marks).await.map(drop)
}

/// The gossip run `node`'s lease records ([`RUN_ANNOTATION`]): the last
/// run of its speaker that wrote it.
pub fn last_run<'a>(leases: impl IntoIterator<Item = &'a Lease>, node: &str) -> Option<u64> {
    lease_of(leases, node)?
        .metadata
        .annotations
        .as_ref()?
        .get(RUN_ANNOTATION)?
        .parse()
        .ok()
}

/// The resourceVersion of `node`'s lease among `leases`.
pub fn version_of<'a>(leases: impl IntoIterator<Item = &'a Lease>, node: &str) -> Option<&'a str> {
    lease_of(leases, node)?.metadata.resource_version.as_deref()
}

fn lease_of<'a>(leases: impl IntoIterator<Item = &'a Lease>, node: &str) -> Option<&'a Lease> {
    let name = lease_name(node);
    leases
        .into_iter()
        .find(|l| l.metadata.name.as_deref() == Some(name.as_str()))
}

/// A write of the lease that went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The lease's resourceVersion after it, when the answer says.
    pub version: Option<String>,
}

impl Written {
    fn of(lease: &Lease) -> Self {
        Self {
            version: lease.metadata.resource_version.clone(),
        }
    }
}

/// What one renewal writes besides the holder and the period.
#[derive(Debug, Clone, Copy, Default)]
pub struct Marks<'a> {
    /// The trouble mark ([`TROUBLE_ANNOTATION`]); only in
    /// [`Mode::Trouble`].
    pub trouble: Option<&'a Mark>,
    /// The interface whose link is down ([`LINK_DOWN_ANNOTATION`]).
    pub link_down: Option<&'a str>,
    /// This run's gossip number ([`RUN_ANNOTATION`]).
    pub run: Option<u64>,
}

/// Renews `node`'s lease with `marks`: [`renew_if_held`], or, should the
/// lease be gone or its holder cleared or someone else's while this
/// speaker runs (its previous run's leave landing after its join), takes
/// it as [`join`] does.
pub async fn renew(
    api: &Api<Lease>,
    node: &str,
    mode: Mode,
    marks: Marks<'_>,
) -> Result<Written, kube::Error> {
    if let Some(written) = renew_if_held(api, node, mode, marks).await? {
        return Ok(written);
    }
    set(api, node, Some(node), mode, marks).await
}

/// Renews `node`'s lease only while this speaker holds it: a JSON patch
/// that tests the holder first (`None`, nothing written, when it is not
/// held by `node` or gone). A renewal sent just before SIGTERM that
/// reaches a slow API server after the lease was cleared must not take
/// it back: the others would count a speaker that has left as running,
/// and nobody would answer its addresses.
pub async fn renew_if_held(
    api: &Api<Lease>,
    node: &str,
    mode: Mode,
    marks: Marks<'_>,
) -> Result<Option<Written>, kube::Error> {
    let trouble = trouble_value(mode, marks);
    let periods = i32::try_from(mode.period().as_secs()).unwrap_or(i32::MAX);
    let ops = serde_json::json!([
        { "op": "test", "path": "/spec/holderIdentity", "value": node },
        {
            "op": "add",
            "path": "/spec/leaseDurationSeconds",
            "value": DURATION_PERIODS.saturating_mul(periods),
        },
        {
            "op": "add",
            "path": "/spec/renewTime",
            "value": MicroTime(crate::clock::wall_now()),
        },
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": annotations(trouble.as_deref(), marks.link_down, marks.run),
        },
    ]);
    let ops: json_patch::Patch = serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
    match api
        .patch(
            &lease_name(node),
            &PatchParams::default(),
            &Patch::Json::<()>(ops),
        )
        .await
    {
        Ok(lease) => Ok(Some(Written::of(&lease))),
        // Gone (404), or the test failed (422): not ours.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 422 => Ok(None),
        Err(e) => Err(e),
    }
}

/// The trouble mark's value a renewal in `mode` writes.
fn trouble_value(mode: Mode, marks: Marks<'_>) -> Option<String> {
    marks
        .trouble
        .filter(|_| mode == Mode::Trouble)
        .map(Mark::value)
}

/// Marks `node`'s speaker gone.
pub async fn leave(api: &Api<Lease>, node: &str) -> Result<(), kube::Error> {
    set(api, node, None, Mode::Slow, Marks::default())
        .await
        .map(drop)
}

/// One write per renewal: a merge patch of the spec and the mark (the
/// lease is this speaker's alone, so there is nothing to read first and
/// nothing to conflict with), a create when the lease does not exist yet.
async fn set(
    api: &Api<Lease>,
    node: &str,
    holder: Option<&str>,
    mode: Mode,
    marks: Marks<'_>,
) -> Result<Written, kube::Error> {
    let trouble = trouble_value(mode, marks);
    let (trouble, link_down) = (trouble.as_deref(), marks.link_down);
    let name = lease_name(node);
    let periods = i32::try_from(mode.period().as_secs()).unwrap_or(i32::MAX);
    let spec = LeaseSpec {
        holder_identity: holder.map(str::to_owned),
        lease_duration_seconds: Some(DURATION_PERIODS.saturating_mul(periods)),
        renew_time: Some(MicroTime(crate::clock::wall_now())),
        ..LeaseSpec::default()
    };
    // A null (cleared holder, no mark) is deleted by a merge patch; the
    // run stays when none is written (a leave), for the next run to read.
    let mut written = serde_json::json!({
        TROUBLE_ANNOTATION: trouble,
        LINK_DOWN_ANNOTATION: link_down,
    });
    if let Some(run) = marks.run {
        written[RUN_ANNOTATION] = run.to_string().into();
    }
    let patch = serde_json::json!({
        "metadata": { "annotations": written },
        "spec": {
            "holderIdentity": spec.holder_identity,
            "leaseDurationSeconds": spec.lease_duration_seconds,
            "renewTime": spec.renew_time,
        },
    });
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 404 => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name),
                    labels: Some([(COMPONENT_LABEL.to_owned(), "speaker".to_owned())].into()),
                    annotations: Some(annotations(trouble, link_down, marks.run))
                        .filter(|a: &BTreeMap<String, String>| !a.is_empty()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            Ok(Written::of(
                &api.create(&PostParams::default(), &lease).await?,
            ))
        }
        other => Ok(Written::of(&other?)),
    }
}

/// The annotations a created or renewed lease carries.
fn annotations(
    trouble: Option<&str>,
    link_down: Option<&str>,
    run: Option<u64>,
) -> BTreeMap<String, String> {
    let run = run.map(|r| r.to_string());
    [
        (TROUBLE_ANNOTATION, trouble),
        (LINK_DOWN_ANNOTATION, link_down),
        (RUN_ANNOTATION, run.as_deref()),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
    .collect()
}

#[cfg(test)]
mod tests;
