//! The scheduled faults of a speaker or of its node's network: what
//! each does when it starts and undoes when it ends.

use super::World;
use crate::clock::{Event, NodeId};
use crate::faults::Kind;
use crate::node::Process;
use std::time::Duration;

impl World {
    pub(super) fn fault_start(&mut self, i: usize) {
        let f = self.schedule[i];
        self.note(|| format!("fault: {f}"));
        if self.lifecycle_start(i) {
            return;
        }
        // The transition first: what the fault does at once is its doing.
        self.transition(f.node, true);
        let Some(node) = f.node else {
            if let Kind::ApiSlow { for_, latency } = f.kind {
                self.api.spike = Some(latency);
                self.clock.after(for_, Event::FaultEnd(i));
            }
            return;
        };
        match f.kind {
            Kind::ClockBack { by, restart_after } => {
                self.clock_behind[node] += u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
                self.nodes[node].exit();
                self.sync_answers(node);
                self.clock.after(restart_after, Event::FaultEnd(i));
            }
            Kind::Kill { restart_after } => {
                self.nodes[node].exit();
                self.sync_answers(node);
                match restart_after {
                    Some(d) => self.clock.after(d, Event::FaultEnd(i)),
                    None => self.transition(Some(node), false),
                }
            }
            Kind::Term { restart_after } => {
                self.restart_after_exit[node] = Some((i, restart_after));
                self.terminate(node);
            }
            Kind::Stop { for_ } => {
                self.nodes[node].process = Process::Stopped;
                self.sync_answers(node);
                self.clock.after(for_, Event::FaultEnd(i));
            }
            Kind::GossipCut { for_, one_way } => {
                self.net.cut_node(node, true, !one_way, true);
                self.clock.after(for_, Event::FaultEnd(i));
            }
            Kind::ApiCut { for_ } => {
                self.api.cut(node, true);
                self.clock.after(for_, Event::FaultEnd(i));
            }
            Kind::WatchLag { for_, gain } => {
                let now = self.now();
                self.api.lag(node, Some((now, gain)));
                self.clock.after(for_, Event::FaultEnd(i));
            }
            Kind::GossipAndApiCut { for_ } | Kind::Unplug { for_ } => {
                self.net.cut_node(node, true, true, true);
                self.api.cut(node, true);
                if matches!(f.kind, Kind::Unplug { .. }) {
                    self.nodes[node].link_up = false;
                    self.sync_answers(node);
                }
                self.clock.after(for_, Event::FaultEnd(i));
            }
            Kind::ApiSlow { .. }
            | Kind::PowerOff
            | Kind::KubeletStop { .. }
            | Kind::Delete
            | Kind::OutOfService
            | Kind::WatchExpire { .. }
            | Kind::Forbidden { .. } => {}
        }
    }

    pub(super) fn fault_end(&mut self, i: usize) -> anyhow::Result<()> {
        let f = self.schedule[i];
        self.note(|| format!("fault ends: {f}"));
        if self.lifecycle_end(i) {
            return Ok(());
        }
        let Some(node) = f.node else {
            self.api.spike = None;
            self.transition(None, false);
            return Ok(());
        };
        // Marked before its effects, counted running after them.
        self.checker.mark(node, self.now());
        match f.kind {
            Kind::Kill { .. } | Kind::Term { .. } | Kind::ClockBack { .. } => self.start(node)?,
            Kind::Stop { .. } => self.resume(node),
            Kind::GossipCut { one_way, .. } => self.net.cut_node(node, true, !one_way, false),
            Kind::ApiCut { .. } => self.api.cut(node, false),
            Kind::WatchLag { .. } => self.api.lag(node, None),
            Kind::GossipAndApiCut { .. } | Kind::Unplug { .. } => {
                self.net.cut_node(node, true, true, false);
                self.api.cut(node, false);
                self.nodes[node].link_up = true;
                self.sync_answers(node);
            }
            Kind::ApiSlow { .. }
            | Kind::PowerOff
            | Kind::KubeletStop { .. }
            | Kind::Delete
            | Kind::OutOfService
            | Kind::WatchExpire { .. }
            | Kind::Forbidden { .. } => {}
        }
        self.transition(Some(node), false);
        Ok(())
    }

    /// SIGCONT: queued datagrams and answers are handled, overdue timers
    /// fire, and the stale answers are back until the loop judges again.
    pub(super) fn resume(&mut self, i: NodeId) {
        let now = self.now();
        let n = &mut self.nodes[i];
        n.process = Process::Running;
        let run = n.run;
        let queued = std::mem::take(&mut n.queued);
        let deferred = std::mem::take(&mut n.deferred);
        self.sync_answers(i);
        for (from, frame) in queued {
            self.deliver(i, from, frame);
        }
        for (write, ok) in deferred {
            self.clock.after(
                Duration::ZERO,
                Event::WriteDone {
                    node: i,
                    run,
                    write,
                    ok,
                },
            );
        }
        if let Some(sp) = self.nodes[i].speaker.as_mut() {
            sp.gossip_wake = None;
            sp.renew_wake = None;
            sp.gossip.tick(now);
        }
        self.after_gossip(i);
        self.clock.after(
            Duration::ZERO,
            Event::Assess {
                node: i,
                run,
                periodic: true,
            },
        );
        self.look_at(i, now);
    }
}
