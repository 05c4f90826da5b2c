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

use super::liveness::LeaseState;
use crate::k8s::observed::{self, Observation, Version};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::collections::{BTreeMap, BTreeSet};
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
/// Renewal period while gossip agrees: 0.067 writes/s per node, below the
/// kubelet's node lease (every 10 s).
pub const SLOW_RENEW: Duration = Duration::from_secs(15);
/// Renewal period while some speaker sees trouble: a missed renewal is how
/// the others tell a dead speaker from one only cut off from them.
pub const FAST_RENEW: Duration = Duration::from_secs(1);
/// A lease's `leaseDurationSeconds` is this many renewal periods; a lease
/// without one (or of an older release) is read as renewed every 2 s.
const DURATION_PERIODS: i32 = 3;
const DEFAULT_PERIOD: Duration = Duration::from_secs(2);

/// How a speaker renews its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Gossip agrees: every [`SLOW_RENEW`].
    Slow,
    /// Another speaker sees trouble: every [`FAST_RENEW`].
    Follow,
    /// This speaker sees trouble: every [`FAST_RENEW`], lease marked.
    Trouble,
}

impl Mode {
    /// The renewal period.
    pub fn period(self) -> Duration {
        match self {
            Mode::Slow => SLOW_RENEW,
            Mode::Follow | Mode::Trouble => FAST_RENEW,
        }
    }
}

/// Most names a mark carries: past it a speaker names the first of its
/// doubts (by name) and judges the rest by their own renewal periods. A
/// node cut off from everyone's gossip doubts every member; it must not
/// make a cluster of 1,000 renew fast.
pub const MARK_NAMES_MAX: usize = 32;

/// Whom a trouble mark asks to renew fast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// Every speaker: what a mark of an older release (value `true`), or
    /// one that names no node, asks.
    Everyone,
    /// These members (at most [`MARK_NAMES_MAX`]).
    Names(BTreeSet<String>),
}

impl Mark {
    /// The mark naming `doubted` (the first [`MARK_NAMES_MAX`] of them),
    /// `None` when it is empty.
    pub fn naming(doubted: &BTreeSet<String>) -> Option<Mark> {
        (!doubted.is_empty())
            .then(|| Mark::Names(doubted.iter().take(MARK_NAMES_MAX).cloned().collect()))
    }

    /// The annotation's value: the names, comma-separated.
    pub fn value(&self) -> String {
        match self {
            Mark::Everyone => "true".to_owned(),
            Mark::Names(names) => names
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// Reads an annotation's value: node names, comma-separated (a node
    /// name never holds a comma); anything else - an older release's
    /// `true`, nothing, a value with no name in it - asks everyone.
    pub fn parse(value: &str) -> Mark {
        let names: BTreeSet<String> = value
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty() && *n != "true")
            .take(MARK_NAMES_MAX)
            .map(str::to_owned)
            .collect();
        if names.is_empty() {
            Mark::Everyone
        } else {
            Mark::Names(names)
        }
    }

    /// Whether it asks `node`'s speaker to renew fast.
    pub fn names(&self, node: &str) -> bool {
        match self {
            Mark::Everyone => true,
            Mark::Names(names) => names.contains(node),
        }
    }
}

/// The marks the presence leases carry, by node.
pub fn marks<'a>(leases: impl IntoIterator<Item = &'a Lease>) -> BTreeMap<String, Mark> {
    leases
        .into_iter()
        .filter_map(|l| {
            let node = l.metadata.name.as_deref()?.strip_prefix(LEASE_PREFIX)?;
            let value = l.metadata.annotations.as_ref()?.get(TROUBLE_ANNOTATION)?;
            Some((node.to_owned(), Mark::parse(value)))
        })
        .collect()
}

/// The marks that count at `now`: on a held lease still renewed (a mark
/// left by a speaker that died goes stale within its period and stops
/// counting), with the node each belongs to.
pub fn fresh_marks<'a>(
    leases: &'a BTreeMap<String, LeaseState>,
    marks: &'a BTreeMap<String, Mark>,
    now: Instant,
) -> impl Iterator<Item = (&'a str, &'a Mark)> {
    marks.iter().filter_map(move |(node, mark)| {
        leases
            .get(node)
            .is_some_and(|l| l.held && l.trouble && !l.overdue(now))
            .then_some((node.as_str(), mark))
    })
}

/// How to renew: marked while this speaker doubts members itself
/// (`own_trouble`), fast while another node's fresh mark names this
/// one, slow otherwise.
pub fn mode(
    own_trouble: bool,
    leases: &BTreeMap<String, LeaseState>,
    marks: &BTreeMap<String, Mark>,
    me: &str,
    now: Instant,
) -> Mode {
    if own_trouble {
        Mode::Trouble
    } else if fresh_marks(leases, marks, now).any(|(node, m)| node != me && m.names(me)) {
        Mode::Follow
    } else {
        Mode::Slow
    }
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
/// as `mode` says, unmarked, its link not marked down.
pub async fn join(api: &Api<Lease>, node: &str, mode: Mode) -> Result<(), kube::Error> {
    set(api, node, Some(node), mode, None, None).await
}

/// What one renewal writes besides the holder and the period.
#[derive(Debug, Clone, Copy, Default)]
pub struct Marks<'a> {
    /// The trouble mark ([`TROUBLE_ANNOTATION`]); only in
    /// [`Mode::Trouble`].
    pub trouble: Option<&'a Mark>,
    /// The interface whose link is down ([`LINK_DOWN_ANNOTATION`]).
    pub link_down: Option<&'a str>,
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
) -> Result<(), kube::Error> {
    if renew_if_held(api, node, mode, marks).await? {
        return Ok(());
    }
    let trouble = trouble_value(mode, marks);
    set(
        api,
        node,
        Some(node),
        mode,
        trouble.as_deref(),
        marks.link_down,
    )
    .await
}

/// Renews `node`'s lease only while this speaker holds it: a JSON patch
/// that tests the holder first (false, nothing written, when it is not
/// held by `node` or gone). A renewal sent just before SIGTERM that
/// reaches a slow API server after the lease was cleared must not take
/// it back: the others would count a speaker that has left as running,
/// and nobody would answer its addresses.
pub async fn renew_if_held(
    api: &Api<Lease>,
    node: &str,
    mode: Mode,
    marks: Marks<'_>,
) -> Result<bool, kube::Error> {
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
            "value": annotations(trouble.as_deref(), marks.link_down),
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
        Ok(_) => Ok(true),
        // Gone (404), or the test failed (422): not ours.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 422 => Ok(false),
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
    set(api, node, None, Mode::Slow, None, None).await
}

/// One write per renewal: a merge patch of the spec and the mark (the
/// lease is this speaker's alone, so there is nothing to read first and
/// nothing to conflict with), a create when the lease does not exist yet.
async fn set(
    api: &Api<Lease>,
    node: &str,
    holder: Option<&str>,
    mode: Mode,
    trouble: Option<&str>,
    link_down: Option<&str>,
) -> Result<(), kube::Error> {
    let name = lease_name(node);
    let periods = i32::try_from(mode.period().as_secs()).unwrap_or(i32::MAX);
    let spec = LeaseSpec {
        holder_identity: holder.map(str::to_owned),
        lease_duration_seconds: Some(DURATION_PERIODS.saturating_mul(periods)),
        renew_time: Some(MicroTime(crate::clock::wall_now())),
        ..LeaseSpec::default()
    };
    // A null (cleared holder, no mark) is deleted by a merge patch.
    let patch = serde_json::json!({
        "metadata": { "annotations": {
            TROUBLE_ANNOTATION: trouble,
            LINK_DOWN_ANNOTATION: link_down,
        } },
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
                    annotations: Some(annotations(trouble, link_down))
                        .filter(|a: &BTreeMap<String, String>| !a.is_empty()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            api.create(&PostParams::default(), &lease).await?;
        }
        other => {
            other?;
        }
    }
    Ok(())
}

/// The marks a created lease carries.
fn annotations(trouble: Option<&str>, link_down: Option<&str>) -> BTreeMap<String, String> {
    [
        (TROUBLE_ANNOTATION, trouble),
        (LINK_DOWN_ANNOTATION, link_down),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speaker::liveness::{self, Context, Evidence, Gone, Gossip};
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    use rstest::rstest;
    use std::time::{Duration, SystemTime};

    fn lease(node: &str, holder: Option<&str>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(lease_name(node)),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn states_say_held_or_cleared_and_when_seen_changing() {
        let t0 = Instant::now();
        let mut seen = BTreeMap::new();
        let leases = [
            lease("a", Some("a")),
            lease("b", None),
            lease("c", Some("")),
        ];
        let first = states(&leases, &mut seen, t0);
        assert_eq!(
            first.get("a"),
            Some(&LeaseState {
                held: true,
                changed: t0,
                renewed: false,
                period: DEFAULT_PERIOD,
                trouble: false,
                link_down: false,
            })
        );
        assert!(!first["b"].held && !first["c"].held);
        // Unchanged: still the time it was first seen.
        let later = t0 + Duration::from_secs(3);
        assert_eq!(states(&leases, &mut seen, later)["a"].changed, t0);
        // Renewed: seen changing now.
        let mut renewed = lease("a", Some("a"));
        renewed.metadata.resource_version = Some("2".into());
        let now = states([&renewed], &mut seen, later);
        assert_eq!(now["a"].changed, later);
        assert!(now["a"].renewed, "seen renewing");
        assert_eq!(seen.len(), 1, "vanished leases are forgotten");
        let other = Lease {
            metadata: ObjectMeta {
                name: Some("metallb-controller".into()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        assert!(super::states([&other], &mut seen, later).is_empty());
    }

    /// What a lease's declared duration makes its period: our own
    /// renewals' durations read back exactly, anything else is held to
    /// the periods a speaker of ours uses.
    #[rstest]
    #[case::missing(None, DEFAULT_PERIOD)]
    #[case::slow(Some(45), SLOW_RENEW)]
    #[case::fast(Some(3), FAST_RENEW)]
    #[case::older_release(Some(6), Duration::from_secs(2))]
    #[case::a_forged_day(Some(86_400), SLOW_RENEW)]
    #[case::forged_max(Some(i32::MAX), SLOW_RENEW)]
    #[case::under_one_period(Some(1), DEFAULT_PERIOD)]
    #[case::negative(Some(-30), DEFAULT_PERIOD)]
    fn declared_durations_are_held_to_our_periods(
        #[case] seconds: Option<i32>,
        #[case] want: Duration,
    ) {
        assert_eq!(period_of(seconds), want);
    }

    fn state(held: bool, trouble: bool, changed: Instant) -> LeaseState {
        LeaseState {
            held,
            changed,
            renewed: true,
            period: FAST_RENEW,
            trouble,
            link_down: false,
        }
    }

    /// Judged at 10 s; leases of the fast period (1 s) seen changing at
    /// 9.5 are fresh, at 8 stale.
    #[rstest]
    #[case::nobody_in_trouble(false, &[("a", true, false, 9.5)], Mode::Slow)]
    #[case::own_trouble_marks(true, &[], Mode::Trouble)]
    #[case::own_trouble_beats_following(true, &[("a", true, true, 9.5)], Mode::Trouble)]
    #[case::another_marked_and_renewing(false, &[("a", true, true, 9.5)], Mode::Follow)]
    #[case::a_stale_mark_of_a_dead_speaker(false, &[("a", true, true, 8.0)], Mode::Slow)]
    #[case::a_mark_on_a_cleared_lease(false, &[("a", false, true, 9.5)], Mode::Slow)]
    #[case::our_own_mark_left_over(false, &[("me", true, true, 9.5)], Mode::Slow)]
    fn renewal_mode(
        #[case] own: bool,
        #[case] leases: &[(&str, bool, bool, f64)],
        #[case] want: Mode,
    ) {
        let t0 = Instant::now();
        let marks = leases
            .iter()
            .filter(|(_, _, trouble, _)| *trouble)
            .map(|(n, ..)| ((*n).to_owned(), Mark::parse("me,x")))
            .collect();
        let leases = leases
            .iter()
            .map(|(n, held, trouble, changed)| {
                (
                    (*n).to_owned(),
                    state(*held, *trouble, t0 + Duration::from_secs_f64(*changed)),
                )
            })
            .collect();
        let now = t0 + Duration::from_secs(10);
        assert_eq!(mode(own, &leases, &marks, "me", now), want);
    }

    /// A mark's value names nodes, comma-separated; an older release's
    /// `true` (or a value naming nobody) asks everyone; a speaker names
    /// at most `MARK_NAMES_MAX` and a reader takes no more.
    #[rstest]
    #[case::names("b,a", Some(&["a", "b"][..]))]
    #[case::spaces(" a , b ", Some(&["a", "b"][..]))]
    #[case::an_older_release("true", None)]
    #[case::empty("", None)]
    #[case::commas_only(",,", None)]
    fn mark_values(#[case] value: &str, #[case] want: Option<&[&str]>) {
        let got = Mark::parse(value);
        match want {
            Some(names) => {
                let names: BTreeSet<String> = names.iter().map(|n| (*n).to_owned()).collect();
                assert_eq!(got, Mark::Names(names.clone()));
                assert_eq!(Mark::parse(&got.value()), got, "round trip");
                assert!(got.names("a") && !got.names("c"));
            }
            None => assert_eq!(got, Mark::Everyone),
        }
    }

    #[test]
    fn marks_are_capped() {
        let many: BTreeSet<String> = (0..100).map(|i| format!("node-{i:03}")).collect();
        let Some(Mark::Names(named)) = Mark::naming(&many) else {
            panic!("a mark");
        };
        assert_eq!(named.len(), MARK_NAMES_MAX);
        assert_eq!(named.first().map(String::as_str), Some("node-000"));
        let value = many.iter().cloned().collect::<Vec<_>>().join(",");
        let Mark::Names(read) = Mark::parse(&value) else {
            panic!("names");
        };
        assert_eq!(read.len(), MARK_NAMES_MAX);
        assert_eq!(Mark::naming(&BTreeSet::new()), None);
    }

    #[test]
    fn states_read_the_period_and_the_mark() {
        let mut l = lease("a", Some("a"));
        if let Some(s) = l.spec.as_mut() {
            s.lease_duration_seconds = Some(45);
        }
        let mut marked = lease("b", Some("b"));
        marked.metadata.annotations =
            Some([(TROUBLE_ANNOTATION.to_owned(), "true".to_owned())].into());
        if let Some(s) = marked.spec.as_mut() {
            s.lease_duration_seconds = Some(3);
        }
        let mut cut = lease("c", Some("c"));
        cut.metadata.annotations =
            Some([(LINK_DOWN_ANNOTATION.to_owned(), "eth0".to_owned())].into());
        let got = states([&l, &marked, &cut], &mut BTreeMap::new(), Instant::now());
        assert_eq!((got["a"].period, got["a"].trouble), (SLOW_RENEW, false));
        assert_eq!((got["b"].period, got["b"].trouble), (FAST_RENEW, true));
        assert!(!got["a"].link_down && !got["b"].link_down && got["c"].link_down);
        assert_eq!(
            annotations(Some("true"), Some("eth0")),
            BTreeMap::from([
                (TROUBLE_ANNOTATION.to_owned(), "true".to_owned()),
                (LINK_DOWN_ANNOTATION.to_owned(), "eth0".to_owned()),
            ])
        );
        assert!(annotations(None, None).is_empty());
        assert_eq!(Mode::Slow.period(), SLOW_RENEW);
        assert_eq!(Mode::Trouble.period(), FAST_RENEW);
    }

    /// The renewals node `x` writes, every 2 s of our time from
    /// 0 up to `last` seconds, stamped by its clock: ours plus `skew`
    /// seconds. What we make of them `at` seconds, with gossip saying
    /// `x` failed (so the lease decides: a partition keeps the
    /// addresses, a dead speaker loses them).
    fn judged_with_skew(skew: i64, last: u64, at: u64) -> Result<(), Gone> {
        let t0 = Instant::now();
        let wall0 = Timestamp::from_second(1_700_000_000).expect("timestamp");
        let mut seen = BTreeMap::new();
        let mut view = BTreeMap::new();
        let period = DEFAULT_PERIOD.as_secs();
        let renewal = |n: u64| {
            let mut l = lease("x", Some("x"));
            l.metadata.resource_version = Some(n.to_string());
            let stamp = wall0 + SignedDuration::from_secs(skew + (n * period) as i64);
            if let Some(s) = l.spec.as_mut() {
                s.renew_time = Some(MicroTime(stamp));
            }
            l
        };
        // Observed on every liveness tick (every second here).
        let mut current = renewal(0);
        for now in 0..=at {
            if now % period == 0 && now <= last {
                current = renewal(now / period);
            }
            view = states([&current], &mut seen, t0 + Duration::from_secs(now));
        }
        let e = Evidence {
            ready: true,
            out_of_service: false,
            lease: view.get("x").copied(),
            gossip: Some(Gossip::Down {
                since: SystemTime::UNIX_EPOCH,
                left: false,
            }),
            doubted_since: None,
        };
        let ctx = Context {
            now: t0 + Duration::from_secs(at),
            api_ok: true,
            membership: true,
            gossip_settled: false,
            // Our own renewals keep the watch visibly current.
            leases_seen: Some(t0 + Duration::from_secs(at)),
            api_latency: Duration::ZERO,
        };
        liveness::judge(&e, &ctx)
    }

    #[rstest]
    #[case::in_step_renewing(0, 20, 21, Ok(()))]
    #[case::ahead_renewing_keeps(30, 20, 21, Ok(()))]
    #[case::behind_renewing_keeps(-30, 20, 21, Ok(()))]
    #[case::in_step_stopped(0, 10, 21, Err(Gone::Failed))]
    #[case::ahead_stopped_loses(30, 10, 21, Err(Gone::Failed))]
    #[case::behind_stopped_loses(-30, 10, 21, Err(Gone::Failed))]
    #[case::ahead_just_stopped_not_yet(30, 20, 22, Ok(()))]
    #[case::behind_just_stopped_not_yet(-30, 20, 22, Ok(()))]
    #[case::ahead_stopped_one_period_and_margin_ago(30, 20, 23, Err(Gone::Failed))]
    fn skewed_clocks_neither_lose_nor_keep_addresses_wrongly(
        #[case] skew: i64,
        #[case] last: u64,
        #[case] at: u64,
        #[case] want: Result<(), Gone>,
    ) {
        assert_eq!(judged_with_skew(skew, last, at), want);
    }
}
