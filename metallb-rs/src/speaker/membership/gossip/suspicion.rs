//! Suspicions nobody settles: SWIM lets only the prober declare a
//! member down, so a suspicion can outlive every message that would end
//! it. And suspicions refuted in time: foca must not tell the member it
//! is down all the same.

use super::Gossip;
use crate::speaker::membership::wire::Identity;
use foca::{Codec as _, Member, Message, PostcardCodec};
use std::collections::BTreeMap;
use std::time::Instant;

impl Gossip {
    /// Keeps when each member foca holds suspect (`suspect`, with its
    /// incarnation) turned suspect, and forgets the others.
    pub(super) fn note_suspects(
        &mut self,
        suspect: &BTreeMap<String, foca::Incarnation>,
        now: Instant,
    ) {
        self.suspected
            .retain(|n, (_, at)| suspect.get(n.as_str()) == Some(at));
        for (n, at) in suspect {
            self.suspected.entry(n.clone()).or_insert((now, *at));
        }
    }

    /// Declares down every member foca has held suspect, at one
    /// incarnation, for a suspicion's time to refute and a rejoin period
    /// more: in SWIM only the prober declares a member down, so a
    /// suspicion heard second-hand, or our own whose timer foca dropped
    /// when it took a new identity (rejoining after the others declared
    /// us down), stays until a verdict or a refutation reaches us, which
    /// either can miss. A live member held suspect is named in our
    /// trouble mark and renews every second while it is: after a 16 s
    /// cut at 100 nodes, one did so for 40 s. Declared down, it hears
    /// so when it next talks to us and rejoins as a new run; a dead one
    /// is down as its prober would have made it.
    pub(super) fn settle_stale_suspicions(&mut self, now: Instant) {
        let limit = self.timing.suspect_to_down_after + self.timing.rejoin_period;
        // Runs on every tick: scan foca's members only when a suspicion
        // we keep is old enough (almost never in a settled cluster).
        if !self
            .suspected
            .values()
            .any(|(since, _)| now.saturating_duration_since(*since) >= limit)
        {
            return;
        }
        let stale: Vec<Member<Identity>> = self
            .foca
            .iter_membership_state()
            .filter(|m| m.state() == foca::State::Suspect)
            .filter(|m| {
                self.suspected
                    .get(&*m.id().node)
                    .is_some_and(|(since, at)| {
                        *at == m.incarnation() && now.saturating_duration_since(*since) >= limit
                    })
            })
            .map(|m| Member::new(m.id().clone(), m.incarnation(), foca::State::Down))
            .collect();
        if stale.is_empty() {
            return;
        }
        for m in &stale {
            tracing::info!(member = %m.id().node, "a suspicion nobody settled: declared down");
        }
        if let Err(e) = self
            .foca
            .apply_many(stale.into_iter(), true, &mut self.runtime)
        {
            tracing::debug!(error = %e, "could not settle a suspicion");
        }
        self.drain(now);
    }

    /// Whether foca holds `id` (that very identity) down.
    pub(super) fn holds_down(&self, id: &Identity) -> bool {
        self.foca
            .iter_membership_state()
            .any(|m| m.id() == id && m.state() == foca::State::Down)
    }

    /// Whether `packet` to `to` is foca's "you are down" notice to a
    /// member whose suspicion was refuted before its timer fired: foca
    /// sends it whenever the timer finds the member, refuted or not (its
    /// `apply_existing_if` reports a failed condition as `Some`). A
    /// member told so takes a new identity and, until someone answers
    /// the new one, neither probes nor gossips: with two survivors, one
    /// lost datagram then left it silent until the other declared it
    /// down and took its addresses while it still answered.
    pub(super) fn withheld(&self, to: &Identity, packet: &[u8]) -> bool {
        self.withheld_notice.as_ref() == Some(to)
            && PostcardCodec
                .decode_header(packet)
                .is_ok_and(|h: foca::Header<Identity>| h.message == Message::TurnUndead)
    }
}
