//! The Node objects over a run's life, as every speaker's node watch
//! shows them: Ready until the kubelet has stopped heartbeating for
//! [`NOT_READY_AFTER`], tainted `node.kubernetes.io/out-of-service` by an
//! admin, or deleted after a scale-down. Also the `node-lifecycle`
//! scenario's schedule ([`schedule`]).
//!
//! Every speaker sees a Node change at once: its node watch delay (tens
//! of milliseconds) is small beside the 40 s before NotReady, and the
//! scenario cuts a survivor off the API server only once the changes
//! have settled, so a node watch stalled by a cut is not modelled.

use crate::clock::NodeId;
use crate::faults::{Fault, Kind, SETTLE, WARMUP};
use metallb_rs::speaker::election::NodeInfo;
use rand::RngExt;
use rand::rngs::StdRng;
use std::collections::BTreeMap;
use std::time::Duration;

/// A Node whose kubelet stopped heartbeating goes NotReady this much
/// later (the controller manager's node-monitor-grace-period).
pub const NOT_READY_AFTER: Duration = Duration::from_secs(40);

/// The Node objects.
#[derive(Debug, Clone)]
pub struct Objects {
    infos: Vec<NodeInfo>,
    deleted: Vec<bool>,
    /// Each kubelet's stops so far, and whether it is stopped now: a
    /// NotReady due for an earlier stop does not apply once it restarted.
    kubelet: Vec<(u32, bool)>,
}

impl Objects {
    /// `n` Ready, untainted Nodes named as [`crate::node::name_of`].
    pub fn new(n: usize) -> Self {
        Self {
            infos: (0..n)
                .map(|i| NodeInfo {
                    name: crate::node::name_of(i),
                    labels: BTreeMap::new(),
                    network_unavailable: false,
                    ready: true,
                    out_of_service: false,
                })
                .collect(),
            deleted: vec![false; n],
            kubelet: vec![(0, false); n],
        }
    }

    /// The Nodes that exist, as the speakers list them.
    pub fn visible(&self) -> Vec<NodeInfo> {
        self.infos
            .iter()
            .zip(&self.deleted)
            .filter(|(_, d)| !**d)
            .map(|(i, _)| i.clone())
            .collect()
    }

    /// `node`'s kubelet stops heartbeating: the stop's number, which
    /// [`Objects::not_ready`] takes [`NOT_READY_AFTER`] later.
    pub fn kubelet_stop(&mut self, node: NodeId) -> u32 {
        let k = &mut self.kubelet[node];
        *k = (k.0 + 1, true);
        k.0
    }

    /// The node controller's verdict on stop `stop` of `node`'s kubelet:
    /// NotReady if it is still stopped. Whether the Node changed.
    pub fn not_ready(&mut self, node: NodeId, stop: u32) -> bool {
        let still = self.kubelet[node] == (stop, true);
        let info = &mut self.infos[node];
        let changed = still && info.ready && !self.deleted[node];
        if changed {
            info.ready = false;
        }
        changed
    }

    /// `node`'s kubelet heartbeats again: Ready at its first heartbeat.
    /// Whether the Node changed.
    pub fn kubelet_start(&mut self, node: NodeId) -> bool {
        self.kubelet[node].1 = false;
        let info = &mut self.infos[node];
        let changed = !info.ready && !self.deleted[node];
        info.ready = true;
        changed
    }

    /// The Node is deleted. Whether it existed.
    pub fn delete(&mut self, node: NodeId) -> bool {
        !std::mem::replace(&mut self.deleted[node], true)
    }

    /// The Node is tainted out-of-service. Whether it changed.
    pub fn taint(&mut self, node: NodeId) -> bool {
        let info = &mut self.infos[node];
        let changed = !info.out_of_service && !self.deleted[node];
        info.out_of_service = true;
        changed
    }

    /// Whether `node` is NotReady.
    pub fn is_not_ready(&self, node: NodeId) -> bool {
        !self.infos[node].ready && !self.deleted[node]
    }
}

fn secs(rng: &mut StdRng, lo: f64, hi: f64) -> Duration {
    Duration::from_secs_f64((rng.random_range(lo..hi) * 10.0).round() / 10.0)
}

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
    fn not_ready_follows_a_kubelet_that_is_still_stopped() {
        let mut o = Objects::new(3);
        let first = o.kubelet_stop(1);
        assert!(!o.kubelet_start(1), "Ready all along");
        let second = o.kubelet_stop(1);
        assert!(!o.not_ready(1, first), "the earlier stop ended");
        assert!(o.not_ready(1, second));
        assert!(o.is_not_ready(1));
        assert!(!o.visible()[1].ready);
        assert!(o.kubelet_start(1));
        assert!(o.visible()[1].ready);
    }

    #[test]
    fn a_deleted_node_is_listed_no_more() {
        let mut o = Objects::new(3);
        assert!(o.taint(2) && !o.taint(2));
        assert!(o.delete(0) && !o.delete(0));
        let names: Vec<(String, bool)> = o
            .visible()
            .into_iter()
            .map(|i| (i.name, i.out_of_service))
            .collect();
        assert_eq!(
            names,
            [("node-1".to_owned(), false), ("node-2".to_owned(), true)]
        );
        let stop = o.kubelet_stop(0);
        assert!(!o.not_ready(0, stop), "a deleted Node has no condition");
    }

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
