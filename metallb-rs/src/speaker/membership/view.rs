//! What gossip believes, as plain data: who is alive, suspect, down or
//! forgotten, and how much of the cluster this speaker reaches. Pure:
//! the gossip task publishes it, and deciding modules (`liveness`) read
//! it without importing the module that owns the socket.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// What this speaker currently believes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Members seen alive, this node included.
    pub alive: BTreeSet<String>,
    /// Members declared down (failed or left), until they come back or
    /// are forgotten
    /// ([`Timing::remove_down_after`](super::Timing::remove_down_after)).
    pub down: BTreeMap<String, Down>,
    /// Members of `alive` that are suspect: a probe went unanswered and
    /// they have
    /// [`Timing::suspect_to_down_after`](super::Timing::suspect_to_down_after)
    /// to refute it.
    pub suspect: BTreeSet<String>,
    /// Members of `suspect` this speaker suspected itself: its own probe
    /// (and the indirect probes it asked for) went unanswered, rather
    /// than it hearing of the suspicion. Trouble starts here, before
    /// anyone is declared down (see `liveness`): one speaker's evidence
    /// is enough to have the member renew fast, and a suspicion every
    /// member hears of must not make every member write its lease.
    pub unanswered: BTreeSet<String>,
    /// Members this speaker declared failed and then dropped the verdict
    /// of, starting gossip afresh (alone, it cannot tell its own cut from
    /// their death), until gossip sees them again. `liveness` judges them
    /// as members gossip does not know, doubted while their lease stands
    /// still.
    pub forgotten: BTreeSet<String>,
    /// How many of this speaker's recent probes were answered.
    pub reach: Reach,
}

/// How many of this speaker's last [`Reach::WINDOW`] probes (of random
/// members, directly or indirectly) were answered: the share of the
/// cluster it reaches, known at once at any size, where counting members
/// declared down takes a probe period each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reach {
    /// Probes whose outcome is known, at most [`Reach::WINDOW`].
    pub probed: u8,
    /// Of those, answered.
    pub answered: u8,
}

impl Reach {
    /// The probes the estimate covers.
    pub const WINDOW: u8 = 8;
    /// Fewest probes the estimate needs.
    pub const ENOUGH: u8 = 4;

    /// At most half of enough recent probes were answered: this speaker
    /// reaches at most about half of the cluster.
    pub fn at_most_half(&self) -> bool {
        self.probed >= Self::ENOUGH && u16::from(self.answered) * 2 <= u16::from(self.probed)
    }
}

/// A member declared down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Down {
    /// When this speaker declared it down (its monotonic clock).
    pub since: Instant,
    /// Whether it left gracefully (told us itself) rather than failed.
    pub left: bool,
}
