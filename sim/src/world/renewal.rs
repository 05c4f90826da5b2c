//! A speaker's renewal task: when it looks at the leases, the renewals
//! it writes and what their answers do.

use super::World;
use crate::api::LeaseValue;
use crate::clock::{Event, NodeId, ShutdownStep};
use crate::node::{InFlight, Process, Variant};
// How often the renewal task looks at the leases: the speaker's own.
use metallb_rs::speaker::renewal::{LOOK, RENEW_TIMEOUT, retry_base};
use rand::RngExt;
use std::time::{Duration, Instant};

impl World {
    /// Sets node `i`'s renewal task to look at `at` (if earlier than set).
    pub(super) fn look_at(&mut self, i: NodeId, at: Instant) {
        let at = at.max(self.now());
        let n = &mut self.nodes[i];
        let run = n.run;
        if let Some(sp) = n.speaker.as_mut()
            && sp.renew_wake.is_none_or(|w| at < w)
        {
            sp.renew_wake = Some(at);
            self.clock.at(
                at,
                Event::RenewLook {
                    node: i,
                    run,
                    periodic: false,
                },
            );
        }
    }

    /// Sends node `i`'s (run `run`) write of `value`, its writer waiting
    /// `timeout` for the answer: its commit and its answer come as the
    /// API server's fate for it has them. The write's number.
    pub(super) fn send_write(
        &mut self,
        i: NodeId,
        run: u32,
        value: LeaseValue,
        timeout: Duration,
    ) -> u64 {
        let fate = self.api.send(i, timeout, &mut self.rng);
        let write = self.next_write;
        self.next_write += 1;
        self.writes.insert(write, (i, run, value));
        if let Some(c) = fate.commit_in {
            self.clock.after(c, Event::Commit { write });
        }
        self.clock.after(
            fate.done_in,
            Event::WriteDone {
                node: i,
                run,
                write,
                ok: fate.ok,
            },
        );
        write
    }

    /// Node `i`'s renewal task looks: writes if due, then sleeps until its
    /// renewal is due or [`LOOK`].
    pub(super) fn renew(&mut self, i: NodeId) {
        let now = self.now();
        let n = &mut self.nodes[i];
        let run = n.run;
        let Some(sp) = n.speaker.as_mut() else {
            return;
        };
        if sp.in_flight.is_some() {
            return;
        }
        let commits = self.api.watch(i, &mut sp.cursor, now);
        sp.observe(i, &commits, &self.names, now);
        if let Some(mode) = sp.renew_due(&n.name, now) {
            let value = LeaseValue {
                held: true,
                mode,
                mark: sp.renewer.write_says_mark().cloned(),
                run: Some(sp.gossip_run),
            };
            let write = self.send_write(i, run, value, RENEW_TIMEOUT);
            let Some(sp) = self.nodes[i].speaker.as_mut() else {
                return;
            };
            sp.in_flight = Some(InFlight { write, mode });
            self.checker.write_started(i, now, Some(mode));
            if self.cfg.trace {
                self.note(|| format!("node-{i} renews ({mode:?})"));
            }
            return;
        }
        let next = sp.renewer.next_wakeup().min(now + LOOK);
        self.look_at(i, next);
    }

    pub(super) fn write_done(&mut self, i: NodeId, run: u32, write: u64, ok: bool) {
        let now = self.now();
        let variant = self.cfg.variant;
        let n = &mut self.nodes[i];
        if n.run != run || n.speaker.is_none() {
            return;
        }
        if n.process == Process::Stopped {
            n.deferred.push((write, ok));
            return;
        }
        let Some(sp) = n.speaker.as_mut() else {
            return;
        };
        if sp.in_flight.is_none_or(|f| f.write != write) {
            // The lease clear of a terminating speaker: retried with the
            // renewals' backoff while its time lasts, as `run` does.
            let (until, failed) = sp.clearing.unwrap_or((now, 0));
            let base = retry_base(failed + 1);
            let retry = base + base.mul_f64(self.rng.random_range(0.0..1.0));
            let again = !ok && now + retry < until;
            if !ok {
                sp.clearing = Some((until, failed + 1));
            }
            if self.cfg.trace {
                let how = if ok { "cleared" } else { "failed to clear" };
                self.note(|| format!("node-{i} {how} its lease"));
            }
            let (after, step) = if again {
                (retry, ShutdownStep::Clear)
            } else {
                (Duration::ZERO, ShutdownStep::Leave)
            };
            self.clock
                .after(after, Event::Shutdown { node: i, run, step });
            return;
        }
        let base = retry_base(sp.failures + 1);
        let retry = match variant {
            Variant::NoBackoff => Duration::from_millis(50),
            _ => base + base.mul_f64(self.rng.random_range(0.0..1.0)),
        };
        let version = self.committed.remove(&write).filter(|_| ok);
        sp.renewed(now, ok, retry, version);
        // The isolation guard wakes on the renewals' record changing and
        // at the instant it stops counting the API server as reachable.
        let lost = sp.renewer.record().api_lost_at().max(now);
        self.checker.write_done(i, now, ok);
        self.renew(i);
        // The renewal task tells the loop a write went through
        // (`Renewal::written`): it judges again.
        if ok && self.nodes[i].process == Process::Running {
            self.assess(i);
        }
        let run = self.nodes[i].run;
        self.clock.at(
            lost,
            Event::Assess {
                node: i,
                run,
                periodic: false,
            },
        );
    }
}
