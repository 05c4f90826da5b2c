//! A speaker's SIGTERM: withdraw, clear the lease (retried while its
//! time lasts), leave gossip, exit - SIGKILL after the grace period.

use super::{CLEAR_TIMEOUT, GRACE, World};
use crate::api::LeaseValue;
use crate::clock::{Event, NodeId, ShutdownStep};
use crate::node::Process;
use metallb_rs::speaker::presence::Mode;

impl World {
    /// SIGTERM: withdraw at once, clear the lease, then leave gossip and
    /// exit (the renewal task runs until the process exits).
    pub(super) fn terminate(&mut self, i: NodeId) {
        let now = self.now();
        let n = &mut self.nodes[i];
        if n.speaker.is_none() {
            return;
        }
        n.process = Process::Terminating;
        let run = n.run;
        if let Some(sp) = n.speaker.as_mut() {
            sp.clearing = Some((now + CLEAR_TIMEOUT, 0));
        }
        self.sync_answers(i);
        self.clear_lease(i, run);
        self.clock.after(
            GRACE,
            Event::Shutdown {
                node: i,
                run,
                step: ShutdownStep::Exit,
            },
        );
    }

    /// Sends (again) the lease clear of terminating node `i`, waiting for
    /// it until the clear's time is up.
    pub(super) fn clear_lease(&mut self, i: NodeId, run: u32) {
        let now = self.now();
        let Some((until, _)) = self.nodes[i].speaker.as_ref().and_then(|sp| sp.clearing) else {
            return;
        };
        let value = LeaseValue {
            held: false,
            mode: Mode::Slow,
            mark: None,
            run: None,
        };
        self.send_write(i, run, value, until.saturating_duration_since(now));
        self.checker.write_started(i, now, None);
    }

    pub(super) fn shutdown(&mut self, i: NodeId, run: u32, step: ShutdownStep) {
        let now = self.now();
        let leave_timeout = self.cfg.timing.leave_timeout;
        let n = &mut self.nodes[i];
        if n.run != run || n.process != Process::Terminating {
            return;
        }
        match step {
            ShutdownStep::Clear => self.clear_lease(i, run),
            ShutdownStep::Leave => {
                if let Some(sp) = n.speaker.as_mut() {
                    sp.gossip.leave(now);
                }
                self.after_gossip(i);
                self.clock.after(
                    leave_timeout,
                    Event::Shutdown {
                        node: i,
                        run,
                        step: ShutdownStep::Exit,
                    },
                );
            }
            ShutdownStep::Exit => {
                n.exit();
                self.checker.mark(i, now);
                self.sync_answers(i);
                self.note(|| format!("node-{i} exits"));
                match self.restart_after_exit[i].take() {
                    Some((fault, Some(d))) => {
                        self.transition(Some(i), true);
                        self.transition(Some(i), false);
                        self.clock.after(d, Event::FaultEnd(fault));
                    }
                    _ => self.transition(Some(i), false),
                }
            }
        }
    }
}
