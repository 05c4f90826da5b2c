//! Winners remembered between passes, so that a change of a few nodes
//! costs a few hashes per service rather than one per node: with 1,000
//! nodes and 10,000 services a full pass would otherwise hash 10^7 times.
//! Pure bookkeeping: the runner advances it with each batch's nodes and
//! alive set, election asks it, the runner stores what election returns.
//!
//! The rule that makes it exact: a service's winner is the best-ranked
//! candidate. When the service's own inputs are unchanged and its winner's
//! facts (labels, conditions, liveness) are unchanged, every other
//! unchanged node still ranks below the winner, so the new winner is the
//! best of the old winner and the nodes whose facts changed. When the
//! winner itself changed, or the service's inputs did, or the change log
//! no longer reaches back to when the service was decided, election
//! ranks every node again.

use super::{Input, L2Advertisement, NodeInfo, Rank, best_of, winner};
use crate::service::ServiceKey;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

/// What election looks at of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Facts {
    labels: BTreeMap<String, String>,
    network_unavailable: bool,
    alive: bool,
}

/// Node changes kept, as a multiple of the node count: enough for the
/// services not decided for a while; older ones force a full ranking.
const LOG_PER_NODE: usize = 4;

/// The nodes as last seen, what changed when, and each service's winner.
#[derive(Debug, Default)]
pub struct Memo {
    epoch: u64,
    facts: HashMap<String, Facts>,
    /// Epoch -> the nodes whose facts changed then (appeared and
    /// vanished ones included).
    log: BTreeMap<u64, Vec<String>>,
    logged: usize,
    /// Changes before this epoch are forgotten.
    horizon: u64,
    winners: HashMap<ServiceKey, Remembered>,
}

/// What is remembered of one service's election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    /// The service's own inputs (see [`inputs`]).
    inputs: u64,
    /// When it was decided.
    epoch: u64,
    /// The winner and its rank, if any node qualified.
    winner: Option<(Rank, String)>,
}

/// A digest of what election reads of the service itself; the
/// advertisements are the configuration's, which [`Memo::clear`] covers.
fn inputs(input: &Input<'_>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    input.service_labels.hash(&mut h);
    input.shared.hash(&mut h);
    input.local.hash(&mut h);
    input.first_ip.hash(&mut h);
    input.pool.hash(&mut h);
    input.ignore_exclude_lb.hash(&mut h);
    input.endpoints.any_serving.hash(&mut h);
    if input.local {
        input.endpoints.nodes.hash(&mut h);
    }
    input.alive.is_some().hash(&mut h);
    h.finish()
}

impl Memo {
    /// An empty memo.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes in the nodes and the alive set of the coming batch, logging
    /// the nodes whose facts changed.
    pub fn advance(&mut self, nodes: &[NodeInfo], alive: &BTreeSet<String>) {
        let mut changed = Vec::new();
        let mut seen = BTreeSet::new();
        for n in nodes {
            seen.insert(n.name.as_str());
            let is_alive = alive.contains(&n.name);
            // Compared in place: a batch where nothing changed copies nothing.
            let same = self.facts.get(&n.name).is_some_and(|f| {
                f.alive == is_alive
                    && f.network_unavailable == n.network_unavailable
                    && f.labels == n.labels
            });
            if !same {
                changed.push(n.name.clone());
                let facts = Facts {
                    labels: n.labels.clone(),
                    network_unavailable: n.network_unavailable,
                    alive: is_alive,
                };
                self.facts.insert(n.name.clone(), facts);
            }
        }
        let vanished: Vec<String> = self
            .facts
            .keys()
            .filter(|k| !seen.contains(k.as_str()))
            .cloned()
            .collect();
        for name in vanished {
            self.facts.remove(&name);
            changed.push(name);
        }
        if changed.is_empty() {
            return;
        }
        self.epoch += 1;
        self.logged += changed.len();
        self.log.insert(self.epoch, changed);
        let bound = LOG_PER_NODE * nodes.len().max(16);
        while self.logged > bound {
            let Some((epoch, names)) = self.log.pop_first() else {
                break;
            };
            self.logged -= names.len();
            self.horizon = epoch;
        }
    }

    /// Forgets every winner (the configuration changed).
    pub fn clear(&mut self) {
        self.winners.clear();
    }

    /// Stores what [`super::decide_remembering`] returned for `key`.
    pub fn remember(&mut self, key: &ServiceKey, r: Option<Remembered>) {
        match r {
            Some(r) => {
                self.winners.insert(key.clone(), r);
            }
            None => {
                self.winners.remove(key);
            }
        }
    }

    /// Forgets the services not in `keep` (they vanished).
    pub fn retain(&mut self, keep: &BTreeSet<ServiceKey>) {
        self.winners.retain(|k, _| keep.contains(k));
    }

    /// The nodes changed after `epoch`, or None when the log no longer
    /// reaches back that far.
    fn changed_since(&self, epoch: u64) -> Option<BTreeSet<&str>> {
        if epoch < self.horizon {
            return None;
        }
        Some(
            self.log
                .range(epoch + 1..)
                .flat_map(|(_, names)| names.iter().map(String::as_str))
                .collect(),
        )
    }

    /// The winner of `key`'s election among `input`'s nodes, and what to
    /// remember of it.
    pub fn elect<'a>(
        &self,
        key: &ServiceKey,
        input: &Input<'a>,
        ads: &[&L2Advertisement],
    ) -> (Option<&'a NodeInfo>, Remembered) {
        let digest = inputs(input);
        let found = self
            .winners
            .get(key)
            .filter(|r| r.inputs == digest)
            .and_then(|r| Some((r, self.changed_since(r.epoch)?)))
            .and_then(|(r, changed)| {
                if r.winner
                    .as_ref()
                    .is_some_and(|(_, w)| changed.contains(w.as_str()))
                {
                    return None;
                }
                let start = match &r.winner {
                    Some((rank, name)) => {
                        Some((*rank, input.nodes.iter().find(|n| &n.name == name)?))
                    }
                    None => None,
                };
                let changed_nodes = input
                    .nodes
                    .iter()
                    .filter(|n| changed.contains(n.name.as_str()));
                Some(best_of(input, ads, changed_nodes, start))
            })
            .unwrap_or_else(|| winner(input, ads));
        let remembered = Remembered {
            inputs: digest,
            epoch: self.epoch,
            winner: found.map(|(rank, n)| (rank, n.name.clone())),
        };
        (found.map(|(_, n)| n), remembered)
    }
}

#[cfg(test)]
mod tests;
