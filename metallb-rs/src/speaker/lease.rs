//! A presence Lease as the rules read it: its state (when it last
//! changed on our clock, its period, its marks), the renewal modes and
//! the trouble marks that move a speaker between them. Pure: `presence`
//! reads and writes the leases, `liveness` judges by what this says.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Renewal period while gossip agrees: 0.067 writes/s per node, below the
/// kubelet's node lease (every 10 s).
pub const SLOW_RENEW: Duration = Duration::from_secs(15);
/// Renewal period while some speaker sees trouble: a missed renewal is how
/// the others tell a dead speaker from one only cut off from them.
pub const FAST_RENEW: Duration = Duration::from_secs(1);

/// How a speaker renews its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Gossip agrees: every [`SLOW_RENEW`].
    Slow,
    /// Another speaker sees trouble: every [`FAST_RENEW`].
    Follow,
    /// This speaker sees trouble: every [`FAST_RENEW`], lease marked.
    Trouble,
}

impl Mode {
    /// The renewal period.
    pub fn period(self) -> Duration {
        match self {
            Mode::Slow => SLOW_RENEW,
            Mode::Follow | Mode::Trouble => FAST_RENEW,
        }
    }
}

/// Most names a mark carries: past it a speaker names the first of its
/// doubts (by name) and judges the rest by their own renewal periods. A
/// node cut off from everyone's gossip doubts every member; it must not
/// make a cluster of 1,000 renew fast.
pub const MARK_NAMES_MAX: usize = 32;

/// Whom a trouble mark asks to renew fast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// Every speaker: what a mark of an older release (value `true`), or
    /// one that names no node, asks.
    Everyone,
    /// These members (at most [`MARK_NAMES_MAX`]).
    Names(BTreeSet<String>),
}

impl Mark {
    /// The mark naming `doubted` (the first [`MARK_NAMES_MAX`] of them),
    /// `None` when it is empty.
    pub fn naming(doubted: &BTreeSet<String>) -> Option<Mark> {
        (!doubted.is_empty())
            .then(|| Mark::Names(doubted.iter().take(MARK_NAMES_MAX).cloned().collect()))
    }

    /// The annotation's value: the names, comma-separated.
    pub fn value(&self) -> String {
        match self {
            Mark::Everyone => "true".to_owned(),
            Mark::Names(names) => names
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// Reads an annotation's value: node names, comma-separated (a node
    /// name never holds a comma); anything else - an older release's
    /// `true`, nothing, a value with no name in it - asks everyone.
    pub fn parse(value: &str) -> Mark {
        let names: BTreeSet<String> = value
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty() && *n != "true")
            .take(MARK_NAMES_MAX)
            .map(str::to_owned)
            .collect();
        if names.is_empty() {
            Mark::Everyone
        } else {
            Mark::Names(names)
        }
    }

    /// Whether it asks `node`'s speaker to renew fast.
    pub fn names(&self, node: &str) -> bool {
        match self {
            Mark::Everyone => true,
            Mark::Names(names) => names.contains(node),
        }
    }
}

/// A lease renewal this much later than due is overdue: the margin covers
/// a renewal in flight and its way to us through the watch (both on our
/// monotonic clock: no other node's clock is involved).
pub const OVERDUE_MARGIN: Duration = Duration::from_millis(500);

/// What the presence lease of a node says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseState {
    /// A holder is set (cleared on graceful leave).
    pub held: bool,
    /// When we first saw its current version (our monotonic clock; see
    /// `presence::states`).
    pub changed: Instant,
    /// We have seen it change since we first saw it: its speaker renewed
    /// while we watched (a restarted speaker has seen no renewal yet).
    pub renewed: bool,
    /// How often its speaker says it renews (`leaseDurationSeconds` / 3,
    /// held to our own periods).
    pub period: Duration,
    /// Its speaker sees trouble in gossip (the lease carries
    /// `presence::TROUBLE_ANNOTATION`).
    pub trouble: bool,
    /// Its node's data-plane link is down, as its speaker says (the lease
    /// carries `presence::LINK_DOWN_ANNOTATION`).
    pub link_down: bool,
}

impl LeaseState {
    /// When its next renewal is overdue: one renewal period (its own)
    /// and the margin after it last changed.
    pub fn deadline(&self) -> Instant {
        self.changed + self.period + OVERDUE_MARGIN
    }

    /// When it counts as stopped: its own deadline or, while a fresh mark
    /// names it (seen since `doubted_since`), a fast period and the
    /// margin after the later of the mark showing and its last renewal -
    /// whichever comes first.
    /// `slack` widens both by how long writes to the API server take
    /// (`liveness::Context::api_latency`): renewals commit that much apart from
    /// their period, and a live speaker behind a slow API server must not
    /// look stopped between two of them.
    pub fn stop_deadline(&self, doubted_since: Option<Instant>, slack: Duration) -> Instant {
        let own = self.deadline() + slack;
        match doubted_since {
            Some(since) => own.min(self.changed.max(since) + FAST_RENEW + OVERDUE_MARGIN + slack),
            None => own,
        }
    }

    /// The next renewal is overdue at `now`.
    pub fn overdue(&self, now: Instant) -> bool {
        now > self.deadline()
    }
}

/// The marks that count at `now`: on a held lease still renewed (a mark
/// left by a speaker that died goes stale within its period and stops
/// counting), with the node each belongs to.
pub fn fresh_marks<'a>(
    leases: &'a BTreeMap<String, LeaseState>,
    marks: &'a BTreeMap<String, Mark>,
    now: Instant,
) -> impl Iterator<Item = (&'a str, &'a Mark)> {
    marks.iter().filter_map(move |(node, mark)| {
        leases
            .get(node)
            .is_some_and(|l| l.held && l.trouble && !l.overdue(now))
            .then_some((node.as_str(), mark))
    })
}

/// How to renew: marked while this speaker doubts members itself
/// (`own_trouble`), fast while another node's fresh mark names this
/// one, slow otherwise.
pub fn mode(
    own_trouble: bool,
    leases: &BTreeMap<String, LeaseState>,
    marks: &BTreeMap<String, Mark>,
    me: &str,
    now: Instant,
) -> Mode {
    if own_trouble {
        Mode::Trouble
    } else if fresh_marks(leases, marks, now).any(|(node, m)| node != me && m.names(me)) {
        Mode::Follow
    } else {
        Mode::Slow
    }
}
