//! Virtual time: one base `Instant` captured once per run, and a queue of
//! events ordered by (time, sequence number), so two events due at the
//! same instant run in the order they were scheduled. Nothing here reads
//! the wall clock after the base is taken; a run is a function of its seed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A node's index in the cluster (node `i` is named `node-i`).
pub type NodeId = usize;

/// A node's process incarnation: timers of an earlier run of the speaker
/// are ignored when they fire.
pub type Run = u32;

/// What can happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A gossip datagram reaches `to`.
    Deliver {
        /// Receiver.
        to: NodeId,
        /// Sender.
        from: NodeId,
        /// The frame the sender's `take_outgoing` produced.
        frame: Vec<u8>,
    },
    /// The gossip timer of `node` (its `next_wakeup`).
    GossipWake {
        /// The node.
        node: NodeId,
        /// Its run.
        run: Run,
    },
    /// The speaker's loop judges liveness (periodic, or `now: true` on a
    /// gossip view change).
    Assess {
        /// The node.
        node: NodeId,
        /// Its run.
        run: Run,
        /// Periodic: schedule the next one.
        periodic: bool,
    },
    /// The renewal task looks (periodically, and when its renewal is due).
    RenewLook {
        /// The node.
        node: NodeId,
        /// Its run.
        run: Run,
        /// Periodic: schedule the next one.
        periodic: bool,
    },
    /// The answer to (or timeout of) write `write` of `node`.
    WriteDone {
        /// The node.
        node: NodeId,
        /// Its run.
        run: Run,
        /// The write.
        write: u64,
        /// It succeeded.
        ok: bool,
    },
    /// The API server commits write `write`.
    Commit {
        /// The write.
        write: u64,
    },
    /// Step `step` of the fault schedule starts.
    FaultStart(usize),
    /// Step `step` of the fault schedule ends (heal, SIGCONT, restart).
    FaultEnd(usize),
    /// A terminating speaker moves on to its next shutdown step.
    Shutdown {
        /// The node.
        node: NodeId,
        /// Its run.
        run: Run,
        /// What comes next.
        step: ShutdownStep,
    },
    /// The node controller finds `node`'s kubelet silent since its stop
    /// number `stop` (`lifecycle::Objects::not_ready`).
    NotReady {
        /// The node.
        node: NodeId,
        /// Which stop of its kubelet.
        stop: u32,
    },
    /// The invariants are checked (every [`CHECK_PERIOD`]).
    Check,
}

/// The speaker's shutdown after SIGTERM: clear the lease, say goodbye in
/// gossip, exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownStep {
    /// A failed lease clear's retry is due.
    Clear,
    /// The lease clear answered or timed out: gossip leave.
    Leave,
    /// The goodbyes are done (or the grace period is over): exit.
    Exit,
}

/// How often the invariants are checked besides every answer change.
pub const CHECK_PERIOD: Duration = Duration::from_millis(100);

/// The virtual clock and its event queue.
pub struct Clock {
    base: Instant,
    now: Instant,
    seq: u64,
    queue: BTreeMap<(Instant, u64), Event>,
    /// Events handled so far.
    pub handled: u64,
}

impl Clock {
    /// A clock at `base` with nothing scheduled.
    pub fn new(base: Instant) -> Self {
        Self {
            base,
            now: base,
            seq: 0,
            queue: BTreeMap::new(),
            handled: 0,
        }
    }

    /// Now.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The run's time zero.
    pub fn base(&self) -> Instant {
        self.base
    }

    /// `at` as time since the start.
    pub fn since_start(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.base)
    }

    /// Schedules `event` at `at` (never before now).
    pub fn at(&mut self, at: Instant, event: Event) {
        let at = at.max(self.now);
        self.seq += 1;
        self.queue.insert((at, self.seq), event);
    }

    /// Schedules `event` after `delay`.
    pub fn after(&mut self, delay: Duration, event: Event) {
        self.at(self.now + delay, event);
    }

    /// The next event, up to `until`; advances now to its time.
    pub fn next(&mut self, until: Instant) -> Option<Event> {
        let entry = self.queue.first_entry()?;
        if entry.key().0 > until {
            return None;
        }
        let ((at, _), event) = entry.remove_entry();
        self.now = at;
        self.handled += 1;
        Some(event)
    }
}

/// Seconds with millisecond precision, for logs and reports.
pub fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_in_time_then_scheduling_order() {
        let base = Instant::now();
        let mut c = Clock::new(base);
        c.after(Duration::from_secs(2), Event::Check);
        c.after(Duration::from_secs(1), Event::FaultStart(1));
        c.after(Duration::from_secs(1), Event::FaultStart(2));
        assert_eq!(
            c.next(base + Duration::from_secs(5)),
            Some(Event::FaultStart(1))
        );
        assert_eq!(
            c.next(base + Duration::from_secs(5)),
            Some(Event::FaultStart(2))
        );
        assert_eq!(c.next(base + Duration::from_millis(1500)), None);
        assert_eq!(c.now(), base + Duration::from_secs(1));
        assert_eq!(c.next(base + Duration::from_secs(5)), Some(Event::Check));
        assert_eq!(c.since_start(c.now()), Duration::from_secs(2));
    }
}
