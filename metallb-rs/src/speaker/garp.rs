//! When to send unsolicited announcements (gratuitous ARP, unsolicited
//! NA), upstream's schedule (`spamLoop`): at once when an address starts
//! being announced, then every 1100 ms until 5 s after the last trigger;
//! a trigger while it is still being announced only extends the window.
//! The speaker triggers on every successful announcement of a service,
//! as upstream's `SetBalancer` does. Pure: the caller passes the time, so
//! tests use a fake clock.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Time between repeated announcements.
pub const INTERVAL: Duration = Duration::from_millis(1100);
/// How long after the last trigger announcements continue.
pub const WINDOW: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    next: Instant,
    until: Instant,
}

/// The pending announcements.
#[derive(Debug, Default, Clone)]
pub struct Schedule {
    entries: BTreeMap<IpAddr, Entry>,
}

impl Schedule {
    /// An empty schedule.
    pub fn new() -> Self {
        Self::default()
    }

    /// `ip` was announced at `now`: send at once (unless already being
    /// sent) and keep sending until `now` + [`WINDOW`].
    pub fn trigger(&mut self, ip: IpAddr, now: Instant) {
        self.entries
            .entry(ip)
            .and_modify(|e| e.until = now + WINDOW)
            .or_insert(Entry {
                next: now,
                until: now + WINDOW,
            });
    }

    /// `ip` is withdrawn: stop.
    pub fn remove(&mut self, ip: IpAddr) {
        self.entries.remove(&ip);
    }

    /// The addresses to announce at `now`; advances them and forgets those
    /// whose window has passed.
    pub fn due(&mut self, now: Instant) -> Vec<IpAddr> {
        let mut out = Vec::new();
        self.entries.retain(|ip, e| {
            if now > e.until {
                return false;
            }
            if e.next <= now {
                out.push(*ip);
                e.next = now + INTERVAL;
            }
            true
        });
        out
    }

    /// When [`Schedule::due`] next has something (None: nothing pending).
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.entries.values().map(|e| e.next).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    /// Drives the schedule in 100 ms steps for `secs` and returns the
    /// offsets (ms) at which `which` was announced.
    fn sends(s: &mut Schedule, t0: Instant, from_ms: u64, to_ms: u64, which: IpAddr) -> Vec<u64> {
        (from_ms..=to_ms)
            .step_by(100)
            .filter(|ms| s.due(t0 + Duration::from_millis(*ms)).contains(&which))
            .collect()
    }

    #[test]
    fn at_once_then_every_1100ms_for_5s() {
        let t0 = Instant::now();
        let mut s = Schedule::new();
        s.trigger(ip("10.0.0.1"), t0);
        assert_eq!(
            sends(&mut s, t0, 0, 8000, ip("10.0.0.1")),
            [0, 1100, 2200, 3300, 4400]
        );
        assert_eq!(s.next_wakeup(), None, "window passed: forgotten");
    }

    /// Upstream's `spamLoop`: a trigger inside the window extends it
    /// without an extra send; one after it starts over at once.
    #[test]
    fn spam_loop_retrigger_extends_the_window() {
        let t0 = Instant::now();
        let mut s = Schedule::new();
        s.trigger(ip("10.0.0.1"), t0);
        assert_eq!(sends(&mut s, t0, 0, 2000, ip("10.0.0.1")), [0, 1100]);
        s.trigger(ip("10.0.0.1"), t0 + Duration::from_millis(2000));
        assert_eq!(
            sends(&mut s, t0, 2000, 9000, ip("10.0.0.1")),
            [2200, 3300, 4400, 5500, 6600]
        );
        s.trigger(ip("10.0.0.1"), t0 + Duration::from_millis(9000));
        assert_eq!(sends(&mut s, t0, 9000, 9500, ip("10.0.0.1")), [9000]);
    }

    #[test]
    fn withdrawn_addresses_stop_and_others_continue() {
        let t0 = Instant::now();
        let mut s = Schedule::new();
        s.trigger(ip("10.0.0.1"), t0);
        s.trigger(ip("fc00::1"), t0 + Duration::from_millis(500));
        assert_eq!(s.next_wakeup(), Some(t0));
        assert_eq!(s.due(t0), [ip("10.0.0.1")]);
        s.remove(ip("10.0.0.1"));
        assert_eq!(s.next_wakeup(), Some(t0 + Duration::from_millis(500)));
        assert_eq!(s.due(t0 + Duration::from_millis(500)), [ip("fc00::1")]);
    }
}
