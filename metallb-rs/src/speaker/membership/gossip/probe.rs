//! The probe in flight: which member it went to and whether that member
//! answered. Foca turns a member suspect when a probe of it goes
//! unanswered, but a member already suspect (we heard of the suspicion
//! from another member first) stays suspect without a change we could
//! see, so our own failed probe of it would never count as our own
//! doubt. With three members, the second survivor of a crash then
//! doubted the dead member only when the first one's verdict reached it
//! seconds later, and failover waited for that.

use super::Gossip;
use crate::speaker::membership::Reach;
use foca::Message;
use std::time::Instant;

use crate::speaker::membership::wire::Identity;

/// What this member knows of its probe in flight.
#[derive(Debug, Default)]
pub(super) struct Probe {
    /// When it started (the probe timer that started it).
    started: Option<Instant>,
    /// The member probed: foca names it when its indirect stage is due,
    /// half a probe period in, whether the direct ping was answered or
    /// not.
    target: Option<String>,
    /// An indirect ack from the target came in through another member.
    forwarded: bool,
}

impl Probe {
    /// A new probe starts at `now`; the member it goes to is not known
    /// yet.
    pub(super) fn start(&mut self, now: Instant) {
        *self = Probe {
            started: Some(now),
            ..Probe::default()
        };
    }

    /// Foca's indirect stage of the probe of `target` is due.
    pub(super) fn indirect_stage(&mut self, target: &str) {
        if self.target.as_deref() != Some(target) {
            self.target = Some(target.to_owned());
            self.forwarded = false;
        }
    }

    /// A frame of `message` came in: an indirect ack forwarded from the
    /// target answers the probe.
    pub(super) fn on_message(&mut self, message: &Message<Identity>) {
        if let Message::ForwardedAck { origin, .. } = message
            && self.target.as_deref() == Some(&*origin.node)
        {
            self.forwarded = true;
        }
    }

    /// The member the probe went to, if it answered nothing since the
    /// probe started: no packet of its own came in (`heard` says when
    /// its last did) and no indirect ack was forwarded.
    pub(super) fn unanswered(&self, heard: impl Fn(&str) -> Option<Instant>) -> Option<&str> {
        let (started, target) = (self.started?, self.target.as_deref()?);
        let answered = self.forwarded || heard(target).is_some_and(|at| at >= started);
        (!answered).then_some(target)
    }
}

impl Gossip {
    /// One probe's outcome into [`View::reach`], the last
    /// [`Reach::WINDOW`] kept.
    pub(super) fn record_probe(&mut self, answered: bool) {
        if self.outcomes.len() >= usize::from(Reach::WINDOW) {
            self.outcomes.pop_front();
        }
        self.outcomes.push_back(answered);
        let count = |f: &dyn Fn(&bool) -> bool| {
            u8::try_from(self.outcomes.iter().filter(|a| f(a)).count()).unwrap_or(u8::MAX)
        };
        let reach = Reach {
            probed: count(&|_| true),
            answered: count(&|a| *a),
        };
        self.changes += u64::from(reach != self.view.reach);
        self.view.reach = reach;
    }

    /// The member our probe that ends now went to, if it went
    /// unanswered.
    pub(super) fn probe_unanswered(&self) -> Option<String> {
        self.probe
            .unanswered(|n| self.heard.get(n).copied())
            .map(str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::time::Duration;

    fn identity(node: &str) -> Identity {
        Identity::new(node.into(), SocketAddr::from(([10, 0, 0, 1], 7946)), 1)
    }

    /// A probe is unanswered only when its target is known and nothing
    /// of the target's came back since the probe started.
    #[rstest::rstest]
    #[case::target_not_known_yet(false, None, false, None)]
    #[case::silent(true, None, false, Some("n1"))]
    #[case::heard_before_the_probe(true, Some(-1), false, Some("n1"))]
    #[case::heard_during_the_probe(true, Some(1), false, None)]
    #[case::answered_through_another_member(true, None, true, None)]
    fn a_probe_is_unanswered_when_nothing_of_its_target_came_back(
        #[case] indirect: bool,
        #[case] heard_ms: Option<i64>,
        #[case] forwarded: bool,
        #[case] want: Option<&str>,
    ) {
        let start = Instant::now() + Duration::from_secs(10);
        let mut probe = Probe::default();
        probe.start(start);
        if indirect {
            probe.indirect_stage("n1");
        }
        if forwarded {
            probe.on_message(&Message::ForwardedAck {
                origin: identity("n1"),
                probe_number: 1,
            });
        }
        probe.on_message(&Message::ForwardedAck {
            origin: identity("n2"),
            probe_number: 1,
        });
        let heard = heard_ms.map(|ms| {
            if ms < 0 {
                start - Duration::from_millis(ms.unsigned_abs())
            } else {
                start + Duration::from_millis(ms.unsigned_abs())
            }
        });
        let got = probe.unanswered(|n| (n == "n1").then_some(heard).flatten());
        assert_eq!(got, want);
    }
}
