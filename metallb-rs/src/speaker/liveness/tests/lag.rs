//! A lease watch that falls behind: it shows the other leases' old
//! changes late, while the renewal that would keep a member is still
//! queued behind them. Only a write of this speaker's own, sent after a
//! member's deadline and seen back, shows the watch current past it.

use super::*;
use crate::speaker::membership::Down;

/// c and this speaker alive in gossip, b declared down (failed).
fn b_failed() -> View {
    View {
        alive: ["c", "me"].map(str::to_owned).into(),
        down: [(
            "b".to_owned(),
            Down {
                since: Instant::now(),
                left: false,
            },
        )]
        .into(),
        ..View::default()
    }
}

/// b failed in gossip; its lease (2 s period) was last seen changing at
/// 6.9, so it is past its deadline (9.4) at 10. Another lease changed at
/// 9.9 as the watch shows it: without our own write seen back after
/// 9.4, that proves nothing, and b counts (and our renewal is wanted);
/// with it, b is gone.
#[test]
fn only_our_own_write_seen_back_shows_the_watch_current() {
    let nodes = [node("b"), node("c"), node("me")];
    let leases: BTreeMap<String, LeaseState> = [("b", 6.9), ("c", 9.9), ("me", 9.9)]
        .into_iter()
        .map(|(n, t)| (n.to_owned(), lease(true, t).expect("held")))
        .collect();
    let view = b_failed();
    let pass = |own_write_seen: Option<f64>| {
        assess(
            &mut Judging::default(),
            &Inputs {
                view: Some(&view),
                own_write_seen: own_write_seen.map(at),
                ..inputs(at(10.0), &nodes, &leases)
            },
        )
    };
    for lagging in [None, Some(9.0)] {
        let a = pass(lagging);
        assert!(
            a.alive.contains("b"),
            "own write sent at {lagging:?}: {a:?}"
        );
        assert!(a.renew_now, "a renewal of ours would settle it");
    }
    let current = pass(Some(9.5));
    assert_eq!(current.gone.get("b"), Some(&Gone::Failed), "{current:?}");
    assert!(!current.renew_now);
}

/// A member once seen stopped stays so until it renews: b (as above)
/// is gone at 10.0 with our write sent at 9.5 seen back. At 10.2 our
/// writes take 0.3 s, which moves b's deadline (with that slack) to
/// 9.7, past what our watch is known current to: judged afresh, b would
/// count as running again - and the speakers that took its addresses
/// would give them back to a dead one until our next write came back.
/// It stays gone; a renewal of its lease (10.1) brings it back.
#[test]
fn a_slower_write_of_ours_does_not_revive_a_member_seen_stopped() {
    let nodes = [node("b"), node("c"), node("me")];
    let leases_at = |b: f64| -> BTreeMap<String, LeaseState> {
        [("b", b), ("c", 9.9), ("me", 9.9)]
            .into_iter()
            .map(|(n, t)| (n.to_owned(), lease(true, t).expect("held")))
            .collect()
    };
    let view = b_failed();
    let pass = |judging: &mut Judging,
                now: f64,
                latency_ms: u64,
                leases: &BTreeMap<String, LeaseState>| {
        assess(
            judging,
            &Inputs {
                api_latency: Duration::from_millis(latency_ms),
                view: Some(&view),
                own_write_seen: Some(at(9.5)),
                ..inputs(at(now), &nodes, leases)
            },
        )
    };
    let stopped = leases_at(6.9);
    let mut judging = Judging::default();
    let first = pass(&mut judging, 10.0, 0, &stopped);
    assert_eq!(first.gone.get("b"), Some(&Gone::Failed), "{first:?}");
    let afresh = pass(&mut Judging::default(), 10.2, 300, &stopped);
    assert!(
        afresh.alive.contains("b"),
        "the slack alone moves the deadline: {afresh:?}"
    );
    let later = pass(&mut judging, 10.2, 300, &stopped);
    assert_eq!(later.gone.get("b"), Some(&Gone::Failed), "{later:?}");
    let renewed = pass(&mut judging, 10.3, 300, &leases_at(10.1));
    assert!(renewed.alive.contains("b"), "{renewed:?}");
}

/// A speaker alone in gossip (it sees one of three alive) marked b and
/// c at 2.0. c renewed at 5.0, after the mark showed: the others live and
/// this speaker is the one cut off, so b's lease watch may be too far
/// behind to show the mark, and its own mark shortens no deadline - b,
/// renewing slowly, still counts; the same mark from a speaker in the
/// majority makes b overdue. Had nobody renewed since the mark (most
/// members died at once: a rack), the mark counts alone too, or the last
/// survivor would wait out the dead speakers' own slow period.
#[rstest::rstest]
#[case::cut_off_from_live_members(&["me"], 5.0, None)]
#[case::in_the_majority(&["me", "c"], 5.0, Some(Gone::Unknown))]
#[case::last_survivor_of_a_rack(&["me"], 1.0, Some(Gone::Unknown))]
fn a_mark_of_ours_counts_alone_in_gossip_until_a_member_answers_it(
    #[case] alive: &[&str],
    #[case] c_renewed: f64,
    #[case] b_gone: Option<Gone>,
) {
    let nodes = [node("b"), node("c"), node("me")];
    let slow = |changed: f64| LeaseState {
        period: lease::SLOW_RENEW,
        ..lease(true, changed).expect("held")
    };
    let leases = |c: f64| -> BTreeMap<String, LeaseState> {
        [
            ("b", slow(1.0)),
            ("c", slow(c)),
            (
                "me",
                LeaseState {
                    trouble: true,
                    ..slow(2.0)
                },
            ),
        ]
        .into_iter()
        .map(|(n, l)| (n.to_owned(), l))
        .collect()
    };
    let marks = BTreeMap::from([("me".to_owned(), Mark::parse("b,c"))]);
    let view = View {
        alive: alive.iter().map(|n| (*n).to_owned()).collect(),
        ..View::default()
    };
    let mut judging = Judging::default();
    judging.gossip_started(at(0.0));
    let mut pass = |now: f64, leases: &BTreeMap<String, LeaseState>| {
        assess(
            &mut judging,
            &Inputs {
                view: Some(&view),
                marks: &marks,
                own_write_seen: Some(at(now - 0.1)),
                ..inputs(at(now), &nodes, leases)
            },
        )
    };
    let first = pass(2.5, &leases(1.0));
    assert!(first.alive.contains("b"), "{first:?}");
    let later = pass(10.0, &leases(c_renewed));
    assert_eq!(later.gone.get("b"), b_gone.as_ref(), "{later:?}");
    if b_gone.is_none() {
        assert!(later.alive.contains("b"), "{later:?}");
    }
}
