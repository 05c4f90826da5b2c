//! The faults of a Node's life rather than of its speaker's: power off,
//! a stopped kubelet (NotReady [`NOT_READY_AFTER`] later), deletion, the
//! out-of-service taint - and the API server's watch expiry and 403
//! answers. A change of the Node objects reaches every speaker (each
//! judges anew, as a node watch event makes it) and the checker (the
//! ranking it expects follows the Nodes that exist).

use super::{World, addresses, election_order};
use crate::clock::{Event, NodeId};
use crate::faults::Kind;
use crate::lifecycle::NOT_READY_AFTER;
use crate::node::Process;

impl World {
    /// Starts fault `i` if it is one of these; whether it was.
    ///
    /// A stopped kubelet, the Node of a dead speaker deleted or tainted
    /// and a watch expiry are no fault transitions for the checker: none
    /// may move an address, so the settled-cluster checks stay on
    /// through them.
    pub(super) fn lifecycle_start(&mut self, i: usize) -> bool {
        let f = self.schedule[i];
        let now = self.now();
        match (f.kind, f.node) {
            (Kind::PowerOff, Some(node)) => {
                self.transition(Some(node), true);
                self.net.cut_node(node, true, true, true);
                self.api.cut(node, true);
                let n = &mut self.nodes[node];
                n.exit();
                n.link_up = false;
                self.sync_answers(node);
                self.kubelet_stops(node);
                // Never restarted: as a SIGKILL for good, counted as
                // over at once (the others' failover is what follows).
                self.transition(Some(node), false);
            }
            (Kind::KubeletStop { for_ }, Some(node)) => {
                self.kubelet_stops(node);
                self.clock.after(for_, Event::FaultEnd(i));
            }
            (Kind::Delete | Kind::OutOfService, Some(node)) => {
                // Of a node whose speaker still runs (an admin's mistake,
                // or a test), a fault: its addresses move.
                let live = self.nodes[node].speaker.is_some();
                if live {
                    self.transition(Some(node), true);
                }
                let changed = match f.kind {
                    Kind::Delete => self.objects.delete(node),
                    _ => self.objects.taint(node),
                };
                if changed {
                    self.checker.removed(node, now);
                    self.nodes_changed();
                }
                if live {
                    self.transition(Some(node), false);
                }
            }
            (Kind::WatchExpire { list }, Some(node)) => self.api.expire(node, now, list),
            (Kind::Forbidden { for_ }, node) => {
                self.transition(node, true);
                self.forbid(node, true);
                self.clock.after(for_, Event::FaultEnd(i));
            }
            _ => return false,
        }
        true
    }

    /// Ends fault `i` if it is one of these; whether it was.
    pub(super) fn lifecycle_end(&mut self, i: usize) -> bool {
        let f = self.schedule[i];
        match (f.kind, f.node) {
            (Kind::KubeletStop { .. }, Some(node)) => {
                if self.objects.kubelet_start(node) {
                    self.checker.not_ready(node, false, false);
                    self.nodes_changed();
                }
            }
            (Kind::Forbidden { .. }, node) => {
                self.forbid(node, false);
                self.transition(node, false);
            }
            _ => return false,
        }
        true
    }

    /// RBAC denies (or allows again) `node`'s writes, or every node's.
    fn forbid(&mut self, node: Option<NodeId>, on: bool) {
        let all = 0..self.nodes.len();
        for n in all.filter(|n| node.is_none_or(|x| x == *n)) {
            self.api.forbid(n, on);
        }
    }

    /// `node`'s kubelet stops heartbeating: the node controller looks
    /// [`NOT_READY_AFTER`] later.
    fn kubelet_stops(&mut self, node: NodeId) {
        let stop = self.objects.kubelet_stop(node);
        self.clock
            .after(NOT_READY_AFTER, Event::NotReady { node, stop });
    }

    /// The node controller's look at `node` for its kubelet's stop `stop`.
    pub(super) fn not_ready(&mut self, node: NodeId, stop: u32) {
        if !self.objects.not_ready(node, stop) {
            return;
        }
        self.note(|| format!("node-{node} NotReady"));
        let running = self.nodes[node].process == Process::Running;
        self.checker.not_ready(node, true, running);
        self.nodes_changed();
    }

    /// The Node objects changed: the speakers list them anew and judge
    /// again after their watch delay (a node watch event starts a full
    /// pass: the last one's memo no longer stands), and the checker
    /// expects the ranking of the Nodes that exist.
    fn nodes_changed(&mut self) {
        let now = self.now();
        self.infos = self.objects.visible();
        // The ranking of the rest keeps its order (each node's place
        // comes from a hash of its own name and the address).
        if let Ok(order) = election_order(&self.infos, &addresses(self.cfg.nodes)) {
            self.order = order;
            self.checker.reorder(self.order.clone());
        }
        for node in 0..self.nodes.len() {
            let n = &mut self.nodes[node];
            let run = n.run;
            let Some(sp) = n.speaker.as_mut() else {
                continue;
            };
            sp.memo = None;
            let shown = self.api.watch_delay(node, now);
            self.clock.after(
                shown,
                Event::Assess {
                    node,
                    run,
                    periodic: false,
                },
            );
        }
    }
}
