//! The liveness rules, table by table, and the assessment that composes them.

use super::*;
use crate::speaker::lease;
use rstest::rstest;

mod cut_off;
mod forgotten;
mod lag;
mod marks;

/// Our monotonic clock's origin in these tests.
static T0: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

/// The renewal period of the leases in these tests (an older
/// release's, or a fast one's plus a second).
const PERIOD: Duration = Duration::from_secs(2);

fn at(secs_after: f64) -> Instant {
    *T0 + Duration::from_secs_f64(secs_after)
}

/// No trouble marks.
static NO_MARKS: BTreeMap<String, Mark> = BTreeMap::new();

/// What speaker `me` assesses at `now` of `nodes` and `leases`: reaching
/// the API server, no gossip, no marks, no write of its own seen or sent.
/// A test states what differs with `Inputs { field, ..inputs(..) }`.
fn inputs<'a>(
    now: Instant,
    nodes: &'a [NodeInfo],
    leases: &'a BTreeMap<String, LeaseState>,
) -> Inputs<'a> {
    Inputs {
        now,
        me: "me",
        api_ok: true,
        api_latency: Duration::ZERO,
        view: None,
        nodes,
        leases,
        marks: &NO_MARKS,
        own_write_seen: None,
        last_write_sent: None,
    }
}

/// A lease held or cleared, seen changing `changed` seconds after T0.
fn lease(held: bool, changed: f64) -> Option<LeaseState> {
    Some(LeaseState {
        held,
        changed: at(changed),
        renewed: true,
        period: PERIOD,
        trouble: false,
        link_down: false,
    })
}

/// A Ready node `name`, as election sees it.
fn node(name: &str) -> NodeInfo {
    NodeInfo {
        name: name.to_owned(),
        labels: BTreeMap::new(),
        network_unavailable: false,
        ready: true,
        out_of_service: false,
    }
}

/// A held lease seen changing at `changed`, marked link-down.
fn link_down(changed: f64) -> Option<LeaseState> {
    lease(true, changed).map(|l| LeaseState {
        link_down: true,
        ..l
    })
}

fn down(since: f64, left: bool) -> Option<Gossip> {
    Some(Gossip::Down {
        since: *T0 + Duration::from_secs_f64(since),
        left,
    })
}

fn ev(ready: bool, oos: bool, lease: Option<LeaseState>, gossip: Option<Gossip>) -> Evidence {
    Evidence {
        ready,
        out_of_service: oos,
        lease,
        gossip,
        doubted_since: None,
        stopped_before: false,
        verdict_forgotten: false,
    }
}

/// `now` is 10 s after T0; renewals are due every PERIOD (2 s)
/// and overdue one margin (0.5 s) later, so a lease renewed at 7.5 is
/// fresh, one renewed at 6.9 is overdue.
#[rstest]
#[case::alive_in_gossip(ev(true, false, lease(true, 9.0), Some(Gossip::Alive)), true, true, Ok(()))]
#[case::out_of_service_beats_everything(
    ev(true, true, lease(true, 9.0), Some(Gossip::Alive)),
    true,
    true,
    Err(Gone::OutOfService)
)]
#[case::left_by_lease(
    ev(true, false, lease(false, 9.0), Some(Gossip::Alive)),
    true,
    true,
    Err(Gone::Left)
)]
#[case::left_in_gossip_lease_still_held_counts_alive(
    ev(true, false, lease(true, 9.5), down(9.6, true)),
    true,
    true,
    Ok(())
)]
#[case::left_in_gossip_and_lease_cleared(
    ev(true, false, lease(false, 9.7), down(9.6, true)),
    true,
    true,
    Err(Gone::Left)
)]
#[case::left_in_gossip_lease_overdue(
    ev(true, false, lease(true, 6.9), down(9.6, true)),
    true,
    true,
    Err(Gone::Left)
)]
#[case::left_in_gossip_without_lease(
    ev(true, false, None, down(9.6, true)),
    true,
    true,
    Err(Gone::Left)
)]
#[case::left_in_gossip_and_we_lost_the_api_trust_gossip(
    ev(true, false, lease(true, 9.5), down(9.6, true)),
    false,
    true,
    Err(Gone::Left)
)]
#[case::failed_and_lease_overdue(
    ev(true, false, lease(true, 6.9), down(9.0, false)),
    true,
    true,
    Err(Gone::Failed)
)]
#[case::failed_but_still_renewing_is_a_partition(ev(true, false, lease(true, 9.5), down(9.0, false)), true, true, Ok(()))]
#[case::failed_lease_not_yet_overdue_waits(ev(true, false, lease(true, 7.5), down(9.0, false)), true, true, Ok(()))]
#[case::failed_and_we_lost_the_api_trust_gossip(
    ev(true, false, lease(true, 9.5), down(9.0, false)),
    false,
    true,
    Err(Gone::Failed)
)]
#[case::failed_without_lease(
    ev(true, false, None, down(9.0, false)),
    true,
    true,
    Err(Gone::Failed)
)]
#[case::unseen_with_fresh_lease(ev(true, false, lease(true, 9.0), None), true, true, Ok(()))]
#[case::unseen_without_lease_membership_on(
    ev(true, false, None, None),
    true,
    true,
    Err(Gone::NoSpeaker)
)]
#[case::no_lease_membership_off_like_upstream(ev(true, false, None, None), true, false, Ok(()))]
#[case::not_ready_and_lease_overdue(
    ev(false, false, lease(true, 3.0), None),
    true,
    false,
    Err(Gone::NotReadyWithoutSpeaker)
)]
#[case::not_ready_without_lease(
    ev(false, false, None, None),
    true,
    false,
    Err(Gone::NotReadyWithoutSpeaker)
)]
#[case::not_ready_but_speaker_renewing(ev(false, false, lease(true, 9.0), None), true, false, Ok(()))]
#[case::ready_with_overdue_lease_is_kept(ev(true, false, lease(true, 3.0), None), true, false, Ok(()))]
// A node whose data-plane link failed while its API path works: gossip
// lost it, its lease renews (rule 4 alone would keep its addresses,
// unanswered), but the lease says the link is down.
#[case::link_down_while_renewing_and_down_in_gossip(
    ev(true, false, link_down(9.5), down(9.0, false)),
    true,
    true,
    Err(Gone::LinkDown)
)]
#[case::link_down_while_still_alive_in_gossip(
    ev(true, false, link_down(9.5), Some(Gossip::Alive)),
    true,
    true,
    Err(Gone::LinkDown)
)]
#[case::link_down_seen_without_the_api(
    ev(true, false, link_down(9.5), down(9.0, false)),
    false,
    true,
    Err(Gone::LinkDown)
)]
#[case::link_down_membership_off(
    ev(true, false, link_down(9.5), None),
    true,
    false,
    Err(Gone::LinkDown)
)]
#[case::cleared_lease_with_a_link_down_mark_left(
    ev(true, false, lease(false, 9.5).map(|l| LeaseState { link_down: true, ..l }), None),
    true,
    false,
    Err(Gone::Left)
)]
#[case::not_ready_alive_in_gossip(ev(false, false, lease(true, 3.0), Some(Gossip::Alive)), true, true, Ok(()))]
fn judging(
    #[case] e: Evidence,
    #[case] api_ok: bool,
    #[case] membership: bool,
    #[case] want: Result<(), Gone>,
) {
    let ctx = Context {
        now: at(10.0),
        api_ok,
        membership,
        gossip_settled: false,
        // The watch is live: it just showed a renewal.
        leases_seen: Some(at(10.0)),
        api_latency: Duration::ZERO,
    };
    assert_eq!(judge(&e, &ctx), want);
}

/// A member gossip declares failed, its lease last seen changing at
/// 6.9 (overdue from 9.4), judged at 10 while the API still looks
/// reachable, by how far the lease watch is known to be current: a
/// stalled watch (this speaker is being cut off) proves nothing, so
/// the member keeps its addresses until isolation silences this
/// speaker; a watch that showed any change after 9.4 proves the lease
/// stopped.
#[rstest]
#[case::watch_stalled_before_the_deadline(Some(8.9), Ok(()))]
#[case::watch_stalled_at_the_deadline(Some(9.4), Ok(()))]
#[case::never_saw_a_change(None, Ok(()))]
#[case::watch_showed_a_later_renewal(Some(9.5), Err(Gone::Failed))]
fn overdue_leases_count_only_as_far_as_the_watch_is_current(
    #[case] leases_seen: Option<f64>,
    #[case] want: Result<(), Gone>,
) {
    let ctx = Context {
        now: at(10.0),
        api_ok: true,
        membership: true,
        gossip_settled: false,
        leases_seen: leases_seen.map(at),
        api_latency: Duration::ZERO,
    };
    let e = ev(true, false, lease(true, 6.9), down(9.0, false));
    assert_eq!(judge(&e, &ctx), want);
}

#[test]
fn overdue_uses_the_renewal_period_and_margin() {
    let l = LeaseState {
        held: true,
        changed: at(1.0),
        renewed: true,
        period: PERIOD,
        trouble: false,
        link_down: false,
    };
    let period = PERIOD.as_secs_f64();
    assert!(!l.overdue(at(1.0 + period)));
    assert!(!l.overdue(at(1.0 + period + 0.4)));
    assert!(l.overdue(at(1.0 + period + 0.6)));
    // Seen changing after `now` (a tick that raced the watch): fresh.
    assert!(!l.overdue(at(0.5)));
}

/// A renewal of our own is worth sending exactly while it would
/// settle a member gossip declared down.
#[rstest]
#[case::overdue_but_watch_not_past_the_deadline(
    lease(true, 6.9),
    down(9.0, false),
    true,
    Some(8.0),
    true
)]
#[case::already_settled(lease(true, 6.9), down(9.0, false), true, Some(9.5), false)]
#[case::lease_not_overdue(lease(true, 9.0), down(9.0, false), true, Some(9.5), false)]
#[case::alive_in_gossip(lease(true, 6.9), Some(Gossip::Alive), true, Some(8.0), false)]
#[case::suspect_in_gossip(lease(true, 6.9), Some(Gossip::Suspect), true, Some(8.0), false)]
#[case::no_api_gossip_decides(lease(true, 6.9), down(9.0, false), false, Some(8.0), false)]
fn renewing_at_once_when_it_settles_a_suspect(
    #[case] lease: Option<LeaseState>,
    #[case] gossip: Option<Gossip>,
    #[case] api_ok: bool,
    #[case] leases_seen: Option<f64>,
    #[case] want: bool,
) {
    let ctx = Context {
        now: at(10.0),
        api_ok,
        membership: true,
        gossip_settled: false,
        leases_seen: leases_seen.map(at),
        api_latency: Duration::ZERO,
    };
    assert_eq!(awaits_evidence(&ev(true, false, lease, gossip), &ctx), want);
}

/// A slow lease (15 s) last seen changing at `changed`, of a member
/// gossip declared down at 9.0, judged at 10 with the watch current:
/// while our trouble mark is out (since `since`), a member that has
/// not renewed within a fast period and the margin of the later of
/// the mark and its last renewal has stopped; before the mark shows
/// (or without it), only its own period counts.
#[rstest]
#[case::no_mark_yet_slow_lease_waits(1.0, None, Ok(()))]
#[case::mark_out_long_enough_and_no_renewal(1.0, Some(8.0), Err(Gone::Failed))]
#[case::mark_out_but_not_yet_a_fast_period(1.0, Some(8.6), Ok(()))]
#[case::renewed_fast_after_the_mark(9.2, Some(8.0), Ok(()))]
#[case::renewed_after_the_mark_then_stopped(8.4, Some(8.0), Err(Gone::Failed))]
#[case::slow_lease_overdue_by_its_own_period(-6.0, None, Err(Gone::Failed))]
fn a_trouble_mark_shortens_the_wait_to_a_fast_period(
    #[case] changed: f64,
    #[case] since: Option<f64>,
    #[case] want: Result<(), Gone>,
) {
    let slow = Some(LeaseState {
        held: true,
        renewed: true,
        changed: if changed < 0.0 {
            T0.checked_sub(Duration::from_secs_f64(-changed))
                .unwrap_or(*T0)
        } else {
            at(changed)
        },
        period: lease::SLOW_RENEW,
        trouble: false,
        link_down: false,
    });
    let ctx = Context {
        now: at(10.0),
        api_ok: true,
        membership: true,
        gossip_settled: false,
        leases_seen: Some(at(10.0)),
        api_latency: Duration::ZERO,
    };
    let e = Evidence {
        doubted_since: since.map(at),
        stopped_before: false,
        verdict_forgotten: false,
        ..ev(true, false, slow, down(9.0, false))
    };
    assert_eq!(judge(&e, &ctx), want);
}

/// Trouble: what makes a speaker mark its lease, judged at 10 with a
/// 2 s period (a lease changed at 9 is within it, one at 3 is not).
#[rstest]
#[case::all_alive(ev(true, false, lease(true, 3.0), Some(Gossip::Alive)), false)]
#[case::a_suspect_we_heard_of_is_the_probers_to_mark(
    ev(true, false, lease(true, 9.0), Some(Gossip::Suspect)),
    false
)]
#[case::our_probe_went_unanswered(
    ev(true, false, lease(true, 9.0), Some(Gossip::Unanswered)),
    true
)]
#[case::down_with_a_live_lease(ev(true, false, lease(true, 9.0), down(9.5, false)), true)]
#[case::down_and_its_lease_stopped_is_settled(
    ev(true, false, lease(true, 3.0), down(9.5, false)),
    false
)]
#[case::down_and_left(ev(true, false, lease(false, 9.0), down(9.5, true)), false)]
#[case::down_without_lease(ev(true, false, None, down(9.5, false)), false)]
#[case::no_gossip(ev(true, false, lease(true, 9.0), None), false)]
#[case::down_with_a_live_lease_marked_link_down_is_settled(
    ev(true, false, link_down(9.0), down(9.5, false)),
    false
)]
fn trouble(#[case] e: Evidence, #[case] want: bool) {
    assert_eq!(troubled([&e], &settled(true, Some(10.0))), want);
}

/// A context at 10 s with membership on and the API reachable, gossip
/// settled or not, the lease watch current up to `leases_seen`.
fn settled(gossip_settled: bool, leases_seen: Option<f64>) -> Context {
    Context {
        now: at(10.0),
        api_ok: true,
        membership: true,
        gossip_settled,
        leases_seen: leases_seen.map(at),
        api_latency: Duration::ZERO,
    }
}

/// A held lease first seen at `changed` and never seen renewing
/// since (what a restarted speaker sees of every lease at first).
fn unrenewed(changed: f64) -> Option<LeaseState> {
    lease(true, changed).map(|l| LeaseState {
        renewed: false,
        ..l
    })
}

/// A member gossip does not know (a restarted speaker's view of a
/// hung one; everyone's view an hour after it was forgotten): before
/// gossip settles its held lease counts; after, only while it is not
/// seen stopped - and a frozen watch (our own API outage) proves
/// nothing. On the old rule every row counted.
#[rstest]
#[case::not_settled_counts_the_lease(false, lease(true, 3.0), Some(10.0), Ok(()))]
#[case::settled_lease_renewing(true, lease(true, 9.0), Some(10.0), Ok(()))]
#[case::settled_lease_stopped(true, lease(true, 3.0), Some(10.0), Err(Gone::Unknown))]
#[case::settled_lease_stopped_but_watch_frozen(true, lease(true, 3.0), Some(5.4), Ok(()))]
#[case::settled_never_renewed_and_stopped(true, unrenewed(3.0), Some(10.0), Err(Gone::Unknown))]
#[case::settled_no_lease(true, None, Some(10.0), Err(Gone::NoSpeaker))]
#[case::settled_cleared_lease(true, lease(false, 9.0), Some(10.0), Err(Gone::Left))]
fn a_member_gossip_does_not_know(
    #[case] gossip_settled: bool,
    #[case] lease: Option<LeaseState>,
    #[case] leases_seen: Option<f64>,
    #[case] want: Result<(), Gone>,
) {
    let e = ev(true, false, lease, None);
    assert_eq!(judge(&e, &settled(gossip_settled, leases_seen)), want);
}

/// A restarted speaker marks trouble for a member gossip does not know
/// whose held lease it has not seen renewed, so everyone renews fast
/// and a hung speaker is told from a slow renewer within a fast
/// period; not before gossip settles, not once the lease renewed or
/// stopped by its own period.
#[rstest]
#[case::unknown_and_not_yet_renewed(true, unrenewed(9.0), true)]
#[case::not_settled_yet_marks_at_once(false, unrenewed(9.0), true)]
#[case::seen_renewing(true, lease(true, 9.0), false)]
#[case::stopped_by_its_own_period(true, unrenewed(3.0), false)]
#[case::cleared(true, lease(false, 9.0).map(|l| LeaseState { renewed: false, ..l }), false)]
#[case::no_lease(true, None, false)]
fn trouble_for_members_gossip_does_not_know(
    #[case] gossip_settled: bool,
    #[case] lease: Option<LeaseState>,
    #[case] want: bool,
) {
    let e = ev(true, false, lease, None);
    assert_eq!(troubled([&e], &settled(gossip_settled, Some(10.0))), want);
}

/// The whole story of a restarted speaker beside a hung one: gossip
/// does not know the hung member; its lease, first seen at 10, never
/// renews. The members named renew fast once this speaker marks (its
/// mark seen back at 10.2), and the hung member is gone a fast period and
/// the margin later - not after its own slow period - while a live
/// member unknown to gossip that renews at 10.6 stays.
#[test]
fn a_restarted_speaker_drops_a_hung_member_within_a_fast_period() {
    let hung = Some(LeaseState {
        held: true,
        changed: at(10.0),
        renewed: false,
        period: lease::SLOW_RENEW,
        trouble: false,
        link_down: false,
    });
    let live = Some(LeaseState {
        held: true,
        changed: at(10.6),
        renewed: true,
        period: lease::FAST_RENEW,
        trouble: false,
        link_down: false,
    });
    let ctx = |now: f64| Context {
        now: at(now),
        api_ok: true,
        membership: true,
        gossip_settled: true,
        leases_seen: Some(at(now)),
        api_latency: Duration::ZERO,
    };
    let named = |lease| Evidence {
        doubted_since: Some(at(10.2)),
        stopped_before: false,
        verdict_forgotten: false,
        ..ev(true, false, lease, None)
    };
    assert!(troubled([&ev(true, false, hung, None)], &ctx(10.1)));
    assert_eq!(judge(&named(hung), &ctx(11.5)), Ok(()));
    assert_eq!(judge(&named(hung), &ctx(11.8)), Err(Gone::Unknown));
    assert_eq!(judge(&named(live), &ctx(11.8)), Ok(()));
    // Not named by any mark: its own slow period rules.
    assert_eq!(judge(&ev(true, false, hung, None), &ctx(11.8)), Ok(()));
}

/// Departed speakers, from what this pass judged gone: with the API
/// every gone node; without it only those already known, graceful
/// leaves and out-of-service nodes - never a member gossip lost while
/// we are cut off. A node that counts again leaves the set.
#[rstest]
#[case::api_ok_every_gone_node(
    &[],
    &[("a", Gone::Failed), ("b", Gone::Left), ("c", Gone::Unknown)],
    true,
    &["a", "b", "c"]
)]
#[case::no_api_failed_members_may_be_the_majority(&[], &[("a", Gone::Failed), ("b", Gone::Unknown)], false, &[])]
#[case::no_api_keeps_what_was_known(&["a", "b"], &[("a", Gone::Failed)], false, &["a"])]
#[case::no_api_graceful_leaves_count(&[], &[("a", Gone::Left), ("b", Gone::OutOfService)], false, &["a", "b"])]
#[case::no_api_a_link_down_mark_counts(&[], &[("a", Gone::LinkDown)], false, &["a"])]
#[case::back_again(&["a"], &[], true, &[])]
fn departed_speakers(
    #[case] prev: &[&str],
    #[case] gone: &[(&str, Gone)],
    #[case] api_ok: bool,
    #[case] want: &[&str],
) {
    let prev = prev.iter().map(|n| (*n).to_owned()).collect();
    let gone = gone.iter().map(|(n, g)| ((*n).to_owned(), *g)).collect();
    let want: BTreeSet<String> = want.iter().map(|n| (*n).to_owned()).collect();
    assert_eq!(departed(&prev, &gone, api_ok), want);
}

/// Partition safety among voters: the last speaker after a
/// scale-down is alone, not a minority, when its API path blips
/// (silenced on the old count); a gossip member that is no voter
/// (no Node, or departed) adds nothing to the alive side.
#[rstest]
#[case::last_after_a_scale_down(&["me"], &["me", "b", "c"], &["b", "c"], false)]
#[case::minority_of_live_voters(&["me"], &["me", "b", "c"], &[], true)]
#[case::a_fake_member_is_no_vote(&["me", "ghost"], &["me", "b", "c"], &[], true)]
#[case::half_after_one_departed(&["me", "b"], &["me", "b", "c", "d"], &["d"], false)]
fn isolation_among_voters(
    #[case] alive: &[&str],
    #[case] known: &[&str],
    #[case] departed: &[&str],
    #[case] want: bool,
) {
    let set = |v: &[&str]| -> BTreeSet<String> { v.iter().map(|n| (*n).to_owned()).collect() };
    let voters = voters(known.iter().copied(), &set(departed));
    assert_eq!(isolated_among(false, &set(alive), &voters), want);
    assert!(
        !isolated_among(true, &set(alive), &voters),
        "the API keeps it answering"
    );
}

#[test]
fn a_suspect_counts_alive() {
    let ctx = Context {
        now: at(10.0),
        api_ok: false,
        membership: true,
        gossip_settled: false,
        leases_seen: None,
        api_latency: Duration::ZERO,
    };
    let e = ev(true, false, lease(true, 1.0), Some(Gossip::Suspect));
    assert_eq!(judge(&e, &ctx), Ok(()));
}

#[test]
fn alive_splits_nodes_and_says_why() {
    let ctx = Context {
        now: at(10.0),
        api_ok: true,
        membership: true,
        gossip_settled: false,
        leases_seen: Some(at(10.0)),
        api_latency: Duration::ZERO,
    };
    let (alive, gone) = alive(
        [
            ("a", ev(true, false, lease(true, 9.0), Some(Gossip::Alive))),
            ("b", ev(true, true, lease(true, 9.0), Some(Gossip::Alive))),
            ("c", ev(true, false, lease(true, 1.0), down(8.0, false))),
        ],
        &ctx,
    );
    assert_eq!(alive, BTreeSet::from(["a".to_owned()]));
    assert_eq!(gone.get("b"), Some(&Gone::OutOfService));
    assert_eq!(gone.get("c"), Some(&Gone::Failed));
    assert!(Gone::Failed.to_string().contains("gossip"));
    assert_eq!(
        Gone::LinkDown.to_string(),
        "its node's link is down (it said so through the API)"
    );
}

#[rstest]
#[case::api_ok_never(true, 1, 3, false)]
#[case::minority_without_api(false, 1, 3, true)]
#[case::half_without_api(false, 2, 4, true)]
#[case::majority_without_api(false, 2, 3, false)]
#[case::alone_is_not_isolated(false, 1, 1, false)]
fn isolation(#[case] api_ok: bool, #[case] alive: usize, #[case] known: usize, #[case] want: bool) {
    assert_eq!(isolated(api_ok, alive, known), want);
}

/// A speaker whose own lease says its link is down does not count
/// itself: it stops electing itself, while the others count as before.
#[test]
fn a_speaker_whose_link_is_down_does_not_count_itself() {
    let nodes = [node("b"), node("me")];
    let assess_with = |mine: Option<LeaseState>| {
        let leases: BTreeMap<String, LeaseState> = [("b", lease(true, 9.5)), ("me", mine)]
            .into_iter()
            .filter_map(|(n, l)| Some((n.to_owned(), l?)))
            .collect();
        assess(
            &mut Judging::default(),
            &Inputs {
                own_write_seen: Some(at(9.5)),
                ..inputs(at(10.0), &nodes, &leases)
            },
        )
    };
    let up = assess_with(lease(true, 9.5));
    assert_eq!(up.alive, BTreeSet::from(["b".to_owned(), "me".to_owned()]));
    let down = assess_with(link_down(9.5));
    assert_eq!(down.alive, BTreeSet::from(["b".to_owned()]));
    assert_eq!(down.gone.get("me"), Some(&Gone::LinkDown));
}

/// A speaker that cannot reach the API server and whose recent probes
/// mostly went unanswered is cut off, however many members its view
/// still lists alive (a cut-off speaker declares them down one probe
/// period at a time: half of 100 nodes takes some 15 s).
#[rstest]
#[case::most_probes_unanswered(false, 8, 2, true)]
#[case::half_unanswered(false, 8, 4, true)]
#[case::most_answered(false, 8, 6, false)]
#[case::too_few_probes_to_tell(false, 3, 0, false)]
#[case::the_api_still_answers(true, 8, 0, false)]
fn isolation_by_reach(
    #[case] api_ok: bool,
    #[case] probed: u8,
    #[case] answered: u8,
    #[case] want: bool,
) {
    let names: BTreeSet<String> = (0..100).map(|i| format!("n{i}")).collect();
    let view = View {
        alive: names.clone(),
        reach: crate::speaker::membership::Reach { probed, answered },
        ..View::default()
    };
    assert_eq!(isolated_in(api_ok, &view, Some(&names)), want);
    assert_eq!(isolated_in(api_ok, &view, None), want);
}

/// A member gossip does not know, once gossip settled, is settled by a
/// renewal of our own as a member gossip has down is: past its stop
/// deadline, only a lease change after it is missing (a restarted
/// speaker beside a hung one need not wait for its next fast renewal).
#[rstest]
#[case::settled_past_the_deadline(true, true, Some(8.0), true)]
#[case::not_settled_yet(false, true, Some(8.0), false)]
#[case::already_seen(true, true, Some(9.5), false)]
#[case::membership_off(true, false, Some(8.0), false)]
fn renewing_at_once_for_a_member_gossip_does_not_know(
    #[case] gossip_settled: bool,
    #[case] membership: bool,
    #[case] leases_seen: Option<f64>,
    #[case] want: bool,
) {
    let ctx = Context {
        membership,
        ..settled(gossip_settled, leases_seen)
    };
    assert_eq!(
        awaits_evidence(&ev(true, false, lease(true, 6.9), None), &ctx),
        want
    );
}
