//! A lease watch that falls behind: it shows the other leases' old
//! changes late, while the renewal that would keep a member is still
//! queued behind them. Only a write of this speaker's own, sent after a
//! member's deadline and seen back, shows the watch current past it.

use super::*;
use crate::speaker::membership::Down;

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
    let view = View {
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
    };
    let pass = |own_write_seen: Option<f64>| {
        assess(
            &mut Judging::default(),
            &Inputs {
                now: at(10.0),
                me: "me",
                api_ok: true,
                api_latency: Duration::ZERO,
                view: Some(&view),
                nodes: &nodes,
                leases: &leases,
                marks: &BTreeMap::new(),
                own_write_seen: own_write_seen.map(at),
                last_write_sent: None,
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

/// A speaker alone in gossip (it sees one of three alive) marked b, whose
/// lease watch may be too far behind to show the mark: its own mark
/// shortens no deadline, so b, renewing slowly, still counts; the same
/// mark from a speaker in the majority would make b overdue.
#[test]
fn a_mark_of_ours_counts_for_nothing_while_we_are_alone_in_gossip() {
    let nodes = [node("b"), node("c"), node("me")];
    let slow = |changed: f64| LeaseState {
        period: presence::SLOW_RENEW,
        ..lease(true, changed).expect("held")
    };
    let leases: BTreeMap<String, LeaseState> = [
        ("b", slow(1.0)),
        ("c", slow(1.0)),
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
    .collect();
    let marks = BTreeMap::from([("me".to_owned(), Mark::parse("b"))]);
    let pass = |alive: &[&str]| {
        let view = View {
            alive: alive.iter().map(|n| (*n).to_owned()).collect(),
            ..View::default()
        };
        let mut judging = Judging::default();
        judging.gossip_started(at(0.0));
        assess(
            &mut judging,
            &Inputs {
                now: at(10.0),
                me: "me",
                api_ok: true,
                api_latency: Duration::ZERO,
                view: Some(&view),
                nodes: &nodes,
                leases: &leases,
                marks: &marks,
                own_write_seen: Some(at(9.9)),
                last_write_sent: None,
            },
        )
    };
    let alone = pass(&["me"]);
    assert!(alone.alive.contains("b"), "{alone:?}");
    let in_the_majority = pass(&["me", "c"]);
    assert_eq!(
        in_the_majority.gone.get("b"),
        Some(&Gone::Unknown),
        "{in_the_majority:?}"
    );
}
