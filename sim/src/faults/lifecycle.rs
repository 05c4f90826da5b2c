//! The `node-lifecycle` scenario's schedule: nodes powered off, NotReady,
//! then deleted or tainted out-of-service, and faults on the survivors
//! (the Node objects' model is `crate::lifecycle`).

use super::{Fault, Kind, SETTLE, WARMUP, secs};
use crate::clock::NodeId;
use crate::lifecycle::NOT_READY_AFTER;
use rand::RngExt;
use rand::rngs::StdRng;
use std::time::Duration;

/// The `node-lifecycle` schedule for `n` nodes, and when the run ends:
/// one to half of the nodes (rounded up, one at least surviving) power
/// off, at once or 10-20 s apart (each NotReady 40 s later, as the model
/// does by itself), and 30-120 s after that each one's Node is deleted or
/// tainted out-of-service; then, on the survivors, one at a time with
/// settle time between: an API cut of 10-20 s (with as many speakers
/// departed as remain, a survivor that still weighed them would see
/// itself in the minority and fall silent), a 403 burst of 2-10 s on one
/// node or all, a kubelet stopped for 60-90 s while its speaker runs
/// (NotReady, it must keep its addresses), with one to three lease
/// watches expiring meanwhile (each relist 0.5-3 s).
pub fn schedule(n: usize, rng: &mut StdRng) -> (Vec<Fault>, Duration) {
    let mut out = Vec::new();
    let mut t = WARMUP;
    let mut order: Vec<NodeId> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let k = rng.random_range(1..=n.div_ceil(2).min(n - 1).max(1));
    let (dead, alive) = order.split_at(k);
    // A rack losing power takes its nodes at once; otherwise each dies
    // after the last one's addresses have failed over (deaths seconds
    // apart, each taking the next owner in line, chain failovers past
    // any bound).
    let rack = rng.random_bool(0.5);
    let mut gone = t;
    for node in dead {
        out.push(Fault {
            at: t,
            node: Some(*node),
            kind: Kind::PowerOff,
        });
        let kind = if rng.random_bool(0.5) {
            Kind::Delete
        } else {
            Kind::OutOfService
        };
        let at = t + NOT_READY_AFTER + secs(rng, 30.0, 120.0);
        out.push(Fault {
            at,
            node: Some(*node),
            kind,
        });
        gone = gone.max(at);
        if !rack {
            t += secs(rng, 10.0, 20.0);
        }
    }
    let survivor = |rng: &mut StdRng| Some(alive[rng.random_range(0..alive.len())]);
    t = gone + SETTLE;
    let for_ = secs(rng, 10.0, 20.0);
    out.push(Fault {
        at: t,
        node: survivor(rng),
        kind: Kind::ApiCut { for_ },
    });
    t += for_ + SETTLE;
    let for_ = secs(rng, 2.0, 10.0);
    let node = if rng.random_bool(0.5) {
        survivor(rng)
    } else {
        None
    };
    out.push(Fault {
        at: t,
        node,
        kind: Kind::Forbidden { for_ },
    });
    t += for_ + SETTLE;
    let for_ = secs(rng, 60.0, 90.0);
    out.push(Fault {
        at: t,
        node: survivor(rng),
        kind: Kind::KubeletStop { for_ },
    });
    let expiries = rng.random_range(1..=3);
    let mut at: Vec<Duration> = (0..expiries).map(|_| secs(rng, 5.0, 55.0)).collect();
    at.sort();
    for d in at {
        let list = secs(rng, 0.5, 3.0);
        out.push(Fault {
            at: t + d,
            node: survivor(rng),
            kind: Kind::WatchExpire { list },
        });
    }
    t += for_ + SETTLE;
    out.sort_by_key(|f| f.at);
    (out, t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_schedule_leaves_the_dead_nodes_alone_after_they_are_gone() {
        for (n, seed) in (0..60).map(|s| ([2, 3, 10][s % 3], s as u64)) {
            let (faults, end) = schedule(n, &mut StdRng::seed_from_u64(seed));
            let dead: Vec<Option<NodeId>> = faults
                .iter()
                .filter(|f| f.kind == Kind::PowerOff)
                .map(|f| f.node)
                .collect();
            assert!(!dead.is_empty() && dead.len() <= n.div_ceil(2).min(n - 1));
            for d in &dead {
                let mine: Vec<&Fault> = faults.iter().filter(|f| f.node == *d).collect();
                assert_eq!(mine.len(), 2, "{seed}: power off, then removal only");
                assert!(matches!(mine[1].kind, Kind::Delete | Kind::OutOfService));
                let removal = mine[1].at - mine[0].at;
                assert!(removal >= NOT_READY_AFTER + Duration::from_secs(30));
            }
            let removed = faults
                .iter()
                .filter(|f| matches!(f.kind, Kind::Delete | Kind::OutOfService));
            let last = removed.map(|f| f.at).max().unwrap_or_default();
            let after: Vec<&Fault> = faults.iter().filter(|f| f.at > last).collect();
            assert!(after.len() >= 4, "cut, 403, kubelet, expiries: {after:?}");
            assert!(after[0].at >= last + SETTLE);
            assert!(faults.windows(2).all(|w| w[0].at <= w[1].at));
            assert!(end > faults.last().map_or(Duration::ZERO, |f| f.at));
        }
    }
}
