//! One assessment pass: [`assess`] and its steps, in the order they run.
//! Each step reads what the ones before it left in [`Judging`], so the
//! order is part of the rules: the marks are dated before the evidence
//! is gathered, the verdicts of a cut-off speaker distrusted before
//! gossip is read, the departed weighed only after judging.

use super::{
    Assessment, Context, Evidence, GOSSIP_SETTLE, Gone, Gossip, Inputs, Judging, LeaseState, Named,
    View, alive, awaits_evidence, departed, doubted, gossip_minority, isolated_in, voters,
};
use crate::speaker::election::NodeInfo;
use crate::speaker::lease::{self, Mark};
use std::collections::{BTreeMap, BTreeSet};

/// The nodes whose speaker gossip or a presence lease shows.
fn known_speakers<'a>(
    nodes: &'a [NodeInfo],
    view: &'a View,
    leases: &'a BTreeMap<String, LeaseState>,
) -> impl Iterator<Item = &'a str> {
    nodes
        .iter()
        .filter(|n| {
            view.alive.contains(&n.name)
                || view.down.contains_key(&n.name)
                || leases.contains_key(&n.name)
        })
        .map(|n| n.name.as_str())
}

/// Gossip sees `node` alive and nobody suspects it.
fn answers_in(view: Option<&View>, node: &str) -> bool {
    view.is_some_and(|v| v.alive.contains(node) && !v.suspect.contains(node))
}

/// The fresh marks, each with the node whose lease carries it.
type Fresh<'a> = [(&'a str, &'a Mark)];

/// One assessment of who counts as alive and whether this speaker is cut
/// off, from `input`, remembering what later passes need in `judging`:
/// the one composition of the rules of `liveness` that the speaker's
/// loop and the simulator both run.
pub fn assess(judging: &mut Judging, input: &Inputs<'_>) -> Assessment {
    judging.watch_current = judging.watch_current.max(input.own_write_seen);
    let fresh: Vec<(&str, &Mark)> =
        lease::fresh_marks(input.leases, input.marks, input.now).collect();
    // The speakers weighed as the last pass left the departed.
    let weighed = input.view.map(|v| judging.weigh(input, v));
    let discount_own = judging.discount_own_mark(input, weighed.as_ref());
    judging.doubted_since = judging.named_since(input, &fresh, discount_own);
    if let Some(v) = input.view {
        judging.note_verdicts(input, v, weighed.as_ref());
    }
    let ctx = judging.context(input);
    let evidence = judging.evidence(input);
    let doubts = judging.own_doubts(input, &fresh, &evidence, &ctx);
    judging.marked = doubts.clone();
    let renew_now = renew_now(input, &evidence, &ctx);
    judging.note_stopped(&evidence, &ctx);
    let (alive, gone) = alive(evidence, &ctx);
    let voters = judging.weigh_departed(input, &gone, weighed);
    let isolated = input
        .view
        .is_some_and(|v| isolated_in(input.api_ok, v, voters.as_ref()));
    Assessment {
        alive,
        gone,
        isolated,
        voters,
        doubts,
        renew_now,
    }
}

/// Whether a renewal of our own lease now would settle a member
/// ([`awaits_evidence`]), not again while a write sent after the deadline
/// is on its way back.
fn renew_now(input: &Inputs<'_>, evidence: &[(&str, Evidence)], ctx: &Context) -> bool {
    let sent_after = |e: &Evidence| {
        e.lease
            .zip(input.last_write_sent)
            .is_some_and(|(l, sent)| sent > l.stop_deadline(e.doubted_since, ctx.api_latency))
    };
    evidence
        .iter()
        .any(|(_, e)| awaits_evidence(e, ctx) && !sent_after(e))
}

impl Judging {
    /// The speakers partition safety weighs ([`voters`]) of those gossip
    /// or a lease shows, less the departed as this memory holds them.
    fn weigh(&self, input: &Inputs<'_>, view: &View) -> BTreeSet<String> {
        voters(
            known_speakers(input.nodes, view, input.leases),
            &self.departed,
        )
    }

    /// Whether this speaker's own mark shortens no deadline this pass.
    ///
    /// Cut off in the gossip minority, this speaker's own mark shortens no
    /// deadline: the member may be alive and cut from it alone, with a
    /// lease watch too far behind to show the mark (it would then renew
    /// slowly and be taken for stopped). The others' marks still count.
    ///
    /// Alone in gossip is either of two things: this speaker is cut off
    /// from live members, or most members died at once (a rack). Live
    /// members answer a mark with fast renewals; the dead renew nothing.
    /// Until one named member has renewed since a mark named it, its own
    /// mark counts as in the majority: otherwise the last survivors of a
    /// rack wait out the dead speakers' own 15 s period.
    fn discount_own_mark(
        &mut self,
        input: &Inputs<'_>,
        weighed: Option<&BTreeSet<String>>,
    ) -> bool {
        let alone = input
            .view
            .zip(weighed)
            .is_some_and(|(v, w)| gossip_minority(&v.alive, w));
        self.marks_answered = alone
            && (self.marks_answered
                || self.doubted_since.iter().any(|(n, named)| {
                    n != input.me && input.leases.get(n).is_some_and(|l| l.changed > named.since)
                }));
        alone && self.marks_answered
    }

    /// Since when each member is named, as the watch shows the marks:
    /// from then on it renews fast if it lives.
    fn named_since(
        &self,
        input: &Inputs<'_>,
        fresh: &Fresh<'_>,
        discount_own: bool,
    ) -> BTreeMap<String, Named> {
        let mut doubted_since = BTreeMap::new();
        for n in input.nodes {
            let first = fresh
                .iter()
                .filter(|(marker, m)| m.names(&n.name) && !(discount_own && *marker == input.me))
                .filter_map(|(marker, _)| input.leases.get(*marker).map(|l| l.changed))
                .min();
            let version = input.leases.get(&n.name).map(|l| l.changed);
            let before = self.doubted_since.get(&n.name).copied();
            let named = match (first, before) {
                (Some(t), before) => {
                    Some(before.map_or(Named { since: t, version }, |b| Named { version, ..b }))
                }
                // No fresh mark names it now - its marker's write failed or is
                // late, or the marker saw its lease run out and cleared the
                // mark - yet it has not renewed since one did, nor has gossip
                // seen it answer: its deadline must not move back without
                // new evidence.
                // (Cut off, not even that: the mark may have been its own,
                // also one it made in the majority, before it saw itself
                // cut off: a member with a lagging watch would then be taken
                // for stopped while the majority sees it renew.)
                (None, Some(b))
                    if !discount_own
                        && b.version == version
                        && !answers_in(input.view, &n.name) =>
                {
                    Some(b)
                }
                (None, _) => None,
            };
            if let Some(named) = named {
                doubted_since.insert(n.name.clone(), named);
            }
        }
        doubted_since
    }

    /// Remembers gossip's failed members, distrusting the verdicts that
    /// came while this speaker was cut off as last known (the departed
    /// of the last pass): those are its isolation, not the members'
    /// death. Then the members whose verdicts gossip dropped.
    fn note_verdicts(&mut self, input: &Inputs<'_>, v: &View, weighed: Option<&BTreeSet<String>>) {
        let cut_off = isolated_in(input.api_ok, v, weighed);
        let failed = v.down.iter().filter(|(_, d)| !d.left).map(|(n, _)| n);
        // Most passes find the same failed members as the last: nothing
        // to remember anew then.
        if !failed.clone().eq(self.down.iter()) {
            let failed: BTreeSet<String> = failed.cloned().collect();
            if cut_off {
                let new: Vec<String> = failed.difference(&self.down).cloned().collect();
                self.distrusted.extend(new);
            }
            self.distrusted.retain(|n| failed.contains(n));
            self.down = failed;
        }
        self.track_forgotten(v, input.leases);
    }

    /// What this speaker knows besides the per-node evidence.
    fn context(&self, input: &Inputs<'_>) -> Context {
        let now = input.now;
        Context {
            now,
            api_ok: input.api_ok,
            membership: input.view.is_some(),
            gossip_settled: self
                .gossip_since
                .is_some_and(|t| now.saturating_duration_since(t) >= GOSSIP_SETTLE),
            leases_seen: self.watch_current,
            api_latency: input.api_latency,
        }
    }

    /// What gossip says of `node`; a distrusted verdict says nothing.
    fn gossip_of(&self, view: Option<&View>, node: &str) -> Option<Gossip> {
        let view = view?;
        if view.unanswered.contains(node) {
            return Some(Gossip::Unanswered);
        }
        if view.suspect.contains(node) {
            return Some(Gossip::Suspect);
        }
        if view.alive.contains(node) {
            return Some(Gossip::Alive);
        }
        if self.distrusted.contains(node) {
            return None;
        }
        view.down.get(node).map(|d| Gossip::Down {
            since: d.since,
            left: d.left,
        })
    }

    /// The evidence about each node, in the order of `input.nodes`.
    fn evidence<'a>(&self, input: &Inputs<'a>) -> Vec<(&'a str, Evidence)> {
        input
            .nodes
            .iter()
            .map(|n| {
                (
                    n.name.as_str(),
                    Evidence {
                        ready: n.ready,
                        out_of_service: n.out_of_service,
                        lease: input.leases.get(&n.name).copied(),
                        gossip: self.gossip_of(input.view, &n.name),
                        doubted_since: self.doubted_since.get(&n.name).map(|d| d.since),
                        stopped_before: self.stopped_before(&n.name, input.leases.get(&n.name)),
                        verdict_forgotten: self
                            .verdict_forgotten(&n.name, input.leases.get(&n.name)),
                    },
                )
            })
            .collect()
    }

    /// The members this speaker's mark names ([`Assessment::doubts`]).
    fn own_doubts(
        &self,
        input: &Inputs<'_>,
        fresh: &Fresh<'_>,
        evidence: &[(&str, Evidence)],
        ctx: &Context,
    ) -> BTreeSet<String> {
        let named_by_others = |node: &str| {
            fresh
                .iter()
                .any(|(marker, m)| *marker != input.me && m.names(node))
        };
        evidence
            .iter()
            .filter(|(node, e)| *node != input.me && doubted(e, ctx))
            .map(|(node, _)| *node)
            .filter(|node| self.marked.contains(*node) || !named_by_others(node))
            .take(lease::MARK_NAMES_MAX)
            .map(str::to_owned)
            .collect()
    }

    /// Notes the departed after judging `gone`, and the speakers weighed
    /// with them: anew only when the departed changed, as the known
    /// speakers are the same as at the start of this pass.
    fn weigh_departed(
        &mut self,
        input: &Inputs<'_>,
        gone: &BTreeMap<String, Gone>,
        weighed: Option<BTreeSet<String>>,
    ) -> Option<BTreeSet<String>> {
        let departed = departed(&self.departed, gone, input.api_ok);
        if departed == self.departed {
            weighed
        } else {
            self.departed = departed;
            input.view.map(|v| self.weigh(input, v))
        }
    }
}
