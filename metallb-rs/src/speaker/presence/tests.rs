//! Presence leases: states, marks, modes and the renewal patch, table by table.

use super::*;
use crate::speaker::liveness::{self, Context, Evidence, Gone, Gossip};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use rstest::rstest;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

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
fn renewal_mode(#[case] own: bool, #[case] leases: &[(&str, bool, bool, f64)], #[case] want: Mode) {
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

/// Only leases of existing nodes mark: a lease written for a node
/// that does not exist names no one.
#[test]
fn marks_come_from_leases_of_nodes() {
    let marked = |node: &str, value: &str| {
        let mut l = Lease::default();
        l.metadata.name = Some(lease_name(node));
        l.metadata.annotations = Some(BTreeMap::from([(
            TROUBLE_ANNOTATION.to_owned(),
            value.to_owned(),
        )]));
        l
    };
    let leases = [marked("a", "b"), marked("ghost", "true")];
    let all = marks(&leases, |_| true);
    assert_eq!(all.len(), 2);
    let nodes = marks(&leases, |n| n != "ghost");
    assert_eq!(nodes.keys().collect::<Vec<_>>(), ["a"]);
    assert!(nodes["a"].names("b") && !nodes["a"].names("c"));
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
    marked.metadata.annotations = Some([(TROUBLE_ANNOTATION.to_owned(), "true".to_owned())].into());
    if let Some(s) = marked.spec.as_mut() {
        s.lease_duration_seconds = Some(3);
    }
    let mut cut = lease("c", Some("c"));
    cut.metadata.annotations = Some([(LINK_DOWN_ANNOTATION.to_owned(), "eth0".to_owned())].into());
    let got = states([&l, &marked, &cut], &mut BTreeMap::new(), Instant::now());
    assert_eq!((got["a"].period, got["a"].trouble), (SLOW_RENEW, false));
    assert_eq!((got["b"].period, got["b"].trouble), (FAST_RENEW, true));
    assert!(!got["a"].link_down && !got["b"].link_down && got["c"].link_down);
    assert_eq!(
        annotations(Some("true"), Some("eth0"), Some(12)),
        BTreeMap::from([
            (TROUBLE_ANNOTATION.to_owned(), "true".to_owned()),
            (LINK_DOWN_ANNOTATION.to_owned(), "eth0".to_owned()),
            (RUN_ANNOTATION.to_owned(), "12".to_owned()),
        ])
    );
    assert!(annotations(None, None, None).is_empty());
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
            since: Instant::now(),
            left: false,
        }),
        doubted_since: None,
        stopped_before: false,
        verdict_forgotten: false,
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
