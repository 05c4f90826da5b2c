//! Partition safety: which speakers a cut-off speaker weighs, and when
//! it counts itself in the minority and must stop answering.

use super::{Gone, View};
use std::collections::{BTreeMap, BTreeSet};

/// The nodes whose speaker is known to have departed, after judging
/// `gone` (this pass) with `prev` (the last pass's answer): while this
/// speaker reaches the API server, every node judged gone (their leases
/// were seen stopped or cleared, or the node is out of service); without
/// it, only what was already known plus what was stated through the API
/// (graceful leaves, link-down marks, out-of-service taints) - a member gossip lost during our own outage
/// may be the majority that cut us off. A node that counts again is no
/// longer departed.
pub fn departed(
    prev: &BTreeSet<String>,
    gone: &BTreeMap<String, Gone>,
    api_ok: bool,
) -> BTreeSet<String> {
    gone.iter()
        .filter(|(node, why)| {
            api_ok
                || prev.contains(*node)
                || matches!(why, Gone::Left | Gone::LinkDown | Gone::OutOfService)
        })
        .map(|(node, _)| node.clone())
        .collect()
}

/// The speakers partition safety weighs: of the `known` nodes (each a
/// Node whose speaker gossip or a presence lease shows), those not known
/// to have `departed`.
pub fn voters<'a>(
    known: impl IntoIterator<Item = &'a str>,
    departed: &BTreeSet<String>,
) -> BTreeSet<String> {
    known
        .into_iter()
        .filter(|n| !departed.contains(*n))
        .map(str::to_owned)
        .collect()
}

/// [`isolated`] among `voters`: only voters seen alive in gossip count
/// (a gossip member that is no Node, or departed, weighs nothing).
pub fn isolated_among(
    api_ok: bool,
    alive_in_gossip: &BTreeSet<String>,
    voters: &BTreeSet<String>,
) -> bool {
    let alive = voters.intersection(alive_in_gossip).count();
    isolated(api_ok, alive, voters.len())
}

/// Partition safety as gossip shows it: [`isolated_among`] `voters` when
/// known, else among every member gossip knows - or this speaker cannot
/// reach the API server and at most half of its recent probes were
/// answered (`View::reach`): the estimate that does not wait for members
/// to be declared down one probe period at a time (a speaker cut off from
/// a cluster of 100 would see half of it down only after some 15 s,
/// long after the others took its addresses over).
pub fn isolated_in(api_ok: bool, view: &View, voters: Option<&BTreeSet<String>>) -> bool {
    let (by_count, known) = match voters {
        Some(voters) => (isolated_among(api_ok, &view.alive, voters), voters.len()),
        None => {
            let known = view.alive.len() + view.down.len();
            (isolated(api_ok, view.alive.len(), known), known)
        }
    };
    by_count || (!api_ok && known > 1 && view.reach.at_most_half())
}

/// Partition safety: this speaker cannot reach the API server and sees at
/// most half of the `known` speakers (itself included) alive in gossip, so
/// the majority is taking its addresses over: it must stop answering.
/// Never with membership off (nothing to compare with) or alone.
pub fn isolated(api_ok: bool, alive_in_gossip: usize, known: usize) -> bool {
    !api_ok && known > 1 && alive_in_gossip * 2 <= known
}

/// Whether this speaker sees fewer than half of `voters` alive in gossip:
/// it cannot tell their death from its own cut. Strictly fewer: the last
/// two, one of them dead, still judge.
pub fn gossip_minority(alive_in_gossip: &BTreeSet<String>, voters: &BTreeSet<String>) -> bool {
    voters.intersection(alive_in_gossip).count() * 2 < voters.len()
}
