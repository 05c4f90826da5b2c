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
                since: SystemTime::UNIX_EPOCH,
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
