//! The Node objects over a run's life, as every speaker's node watch
//! shows them: Ready until the kubelet has stopped heartbeating for
//! [`NOT_READY_AFTER`], tainted `node.kubernetes.io/out-of-service` by an
//! admin, or deleted after a scale-down. The `node-lifecycle`
//! scenario's schedule is `faults::lifecycle`'s.
//!
//! Every speaker sees a Node change at once: its node watch delay (tens
//! of milliseconds) is small beside the 40 s before NotReady, and the
//! scenario cuts a survivor off the API server only once the changes
//! have settled, so a node watch stalled by a cut is not modelled.

use crate::clock::NodeId;
use metallb_rs::speaker::election::NodeInfo;
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
