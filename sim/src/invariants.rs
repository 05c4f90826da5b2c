//! What must hold at every step, each named with the README sentence it
//! checks: every address answered (but right after a fault of the node
//! that answered it or of one that ranks before it), never by two nodes
//! for long, owners kept in a settled cluster, slow renewals in a
//! settled cluster, failed renewals backing off, NotReady nodes whose
//! speaker runs keeping their addresses, deleted or out-of-service nodes
//! answering for nothing. Also gathers what the
//! report shows (failover times, dual-answer windows, writes per node).

use crate::clock::NodeId;
use crate::node::name_of;
use metallb_rs::speaker::presence::Mode;
use metallb_rs::speaker::renewal::retry_base;
use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Longest an address may go unanswered after a fault of its owner,
/// behind an API server whose writes are instant; each write takes
/// [`Checker`]'s `latency` more three times over (the trouble mark's
/// write, the margin a slow renewal is given, and the judge's own write
/// that shows its lease watch current past the deadline: docs/src/differences-full.md,
/// "Behind a slow API server"). The README's "about 2-2.5 s" is the lab's p50 to max; over
/// hundreds of seeds the first probe of a dead member comes up to about
/// a second late (probes go round the members in random order), and the
/// tail reaches 3.2 s: the bound is 3.5 s.
pub const FAILOVER_BOUND: Duration = Duration::from_millis(3500);
/// The chance per dead member that its first probe comes later than the
/// failover bound allows for: each survivor probes every member once per
/// round, in its own shuffled order, so on a large cluster the first
/// probe of a dead member is close to a Poisson arrival (one a probe
/// period on average) and has no hard limit. One in a million per death
/// keeps a 2,000-seed sweep clear of it.
pub const PROBE_TAIL_CHANCE: f64 = 1e-6;
/// [`FAILOVER_BOUND`] was measured up to this many nodes, and holds the
/// probe tail of clusters up to this size.
pub const BOUND_MEASURED_UP_TO: usize = 10;

/// How many probe periods may pass after a member dies before any of the
/// `n - 1` survivors probes it, but with [`PROBE_TAIL_CHANCE`]: each
/// survivor's next probe of it lies uniformly in its round of `n - 1`
/// periods, so none comes within `m` periods with chance
/// `(1 - m / (n - 1))^(n - 1)`.
pub fn first_probe_periods(n: usize) -> f64 {
    let k = n.saturating_sub(1).max(1) as f64;
    k * (1.0 - PROBE_TAIL_CHANCE.powf(1.0 / k))
}

/// [`FAILOVER_BOUND`] for a cluster of `n`: on clusters larger than it
/// was measured on, the first probe of a dead member may come later
/// (10 nodes: 7.1 periods at [`PROBE_TAIL_CHANCE`]; 100: 12.9; 1,000:
/// 13.7), and the bound grows by the difference.
pub fn failover_bound(n: usize, probe_period: Duration) -> Duration {
    let extra = first_probe_periods(n) - first_probe_periods(BOUND_MEASURED_UP_TO);
    FAILOVER_BOUND + probe_period.mul_f64(extra.max(0.0))
}
/// Longest two nodes may answer one address after a fault, behind an API
/// server whose writes are instant; a cut-off speaker counts its 4 s
/// without the API server from its last write's answer, so each write's
/// latency widens it once.
pub const DUAL_WINDOW: Duration = Duration::from_secs(2);
/// A gap or a dual answer must start within this long of a fault
/// transition (start or end), or while a node involved is faulty:
/// what a fault sets off shows within gossip's rejoin period (5 s: a
/// restored node is readmitted by then) and a failure detection.
pub const AFTERMATH: Duration = Duration::from_secs(8);
/// A cluster with no fault transition for this long is settled.
pub const STEADY_AFTER: Duration = Duration::from_secs(30);
/// Most renewals per node per second in a settled cluster.
pub const STEADY_WRITES_PER_S: f64 = 0.1;
/// Renewals a settled stretch allows a node besides its rate and its
/// doubt episodes: the one in flight at the stretch's start, one more
/// where the stretch's length rounds down, and one renewal the loop
/// asks for at once (to settle a member it judges by its lease).
pub const STEADY_EXTRA_WRITES: usize = 3;
/// Renewals one doubt episode costs a node: a datagram lost makes a
/// probe go unanswered now and then; the prober marks its lease and
/// clears the mark once the member refutes (two writes), and the member
/// the mark names renews fast while it sees the mark - from the mark's
/// commit to its clear's, a write latency or two behind 1 s writes - and
/// slow again after (up to three).
pub const EPISODE_WRITES: usize = 3;
/// Doubt episodes a settled stretch excuses per node: one, and one more
/// for every this long - loss-driven doubt is rare; a speaker whose
/// doubt comes and goes all the time is the flapping this catches.
pub const EPISODE_EVERY: Duration = Duration::from_secs(20);
/// The cluster forms (gossip joins, first leases) before checks start.
pub const START_GRACE: Duration = Duration::from_secs(10);

/// The doubt episodes among `writes` (one node's, in order) that begin
/// from `from` on: a fast renewal (marked, or following a mark) after a
/// slow one.
fn episodes(writes: &[(Instant, Option<Mode>)], from: Instant) -> usize {
    let fast = |m: Option<Mode>| matches!(m, Some(Mode::Trouble | Mode::Follow));
    writes
        .windows(2)
        .filter(|w| w[1].0 >= from && fast(w[1].1) && !fast(w[0].1))
        .count()
        + usize::from(writes.first().is_some_and(|w| w.0 >= from && fast(w.1)))
}

/// The invariants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Invariant {
    /// (a) Every address is answered.
    Answered,
    /// (b) At most one node answers an address.
    OneAnswer,
    /// (c) A settled cluster keeps its owners.
    SteadyOwners,
    /// (d) Renewals are slow in a settled cluster.
    SteadyWrites,
    /// (e) Failed renewals back off.
    Backoff,
    /// (f) A NotReady node whose speaker runs keeps its addresses.
    NotReadyKeeps,
    /// (g) A deleted or out-of-service node answers for nothing.
    RemovedAnswersNothing,
}

impl Invariant {
    /// The README's promise it checks.
    pub fn sentence(self) -> &'static str {
        match self {
            Invariant::Answered => {
                "(a) every address is answered: a SIGKILLed speaker or a node whose link went down fails over in about 2-2.5 s; SIGTERM moves them at once"
            }
            Invariant::OneAnswer => {
                "(b) two nodes answer one address for at most about 2 s when speakers lose sight of each other: a speaker cut off from the API server and from most speakers stops answering 4 s after its last successful renewal, and the others take its addresses about 2 s after the cut"
            }
            Invariant::SteadyOwners => {
                "(c) in a settled cluster no address changes owner: election is a pure function every speaker evaluates alone on the same inputs"
            }
            Invariant::SteadyWrites => {
                "(d) leases are renewed every 15 s while gossip agrees (0.067 writes/s per node, below the kubelet's node lease at 0.1)"
            }
            Invariant::Backoff => {
                "(e) a failed renewal is retried with exponential backoff and jitter: 100 ms, then doubling to 2 s, each plus up to as much again"
            }
            Invariant::NotReadyKeeps => {
                "(f) a node loses its addresses when NotReady only while its speaker stopped renewing its lease: a NotReady node whose speaker runs keeps them"
            }
            Invariant::RemovedAnswersNothing => {
                "(g) a node tainted node.kubernetes.io/out-of-service loses its addresses, and a deleted Node is no candidate: neither answers for any address"
            }
        }
    }
}

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which.
    pub invariant: Invariant,
    /// When (since the start).
    pub at: Duration,
    /// The address, if it is about one.
    pub address: Option<IpAddr>,
    /// The node, if it is about one.
    pub node: Option<NodeId>,
    /// What happened, with the times.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "at {:.3}s: {}",
            self.at.as_secs_f64(),
            self.invariant.sentence()
        )?;
        if let Some(a) = self.address {
            write!(f, "\n  address {a}")?;
        }
        if let Some(n) = self.node {
            write!(f, "\n  node {}", name_of(n))?;
        }
        write!(f, "\n  {}", self.detail)
    }
}

/// What the report shows of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Failovers: time from the owner's loss of the address to the first
    /// answer by another node.
    pub failovers: Vec<Duration>,
    /// How long two nodes answered one address, each time.
    pub duals: Vec<Duration>,
    /// Renewals started in settled stretches, and the node-seconds of them.
    pub steady: (u64, f64),
    /// Renewals started otherwise, and the node-seconds of that.
    pub trouble: (u64, f64),
}

struct Stretch {
    since: Instant,
    /// Already reported as too long.
    reported: bool,
    /// The node that answered before (gap) or the answerers (dual).
    cause: Vec<NodeId>,
}

/// The checker.
pub struct Checker {
    base: Instant,
    addrs: Vec<IpAddr>,
    order: Vec<Vec<NodeId>>,
    answerers: Vec<BTreeSet<NodeId>>,
    last_answerer: Vec<Option<NodeId>>,
    gaps: Vec<Option<Stretch>>,
    duals: Vec<Option<Stretch>>,
    faulty: Vec<u32>,
    transition: Vec<Instant>,
    last_any: Instant,
    segment_running: usize,
    segment_writes: Vec<Vec<(Instant, Option<Mode>)>>,
    /// The last renewal failure of each node, and how many in a row.
    last_failed: Vec<Option<(Instant, u32)>>,
    started: bool,
    /// NotReady nodes whose speaker ran when they went NotReady.
    not_ready: Vec<bool>,
    /// Deleted or out-of-service nodes, since when, and whether one was
    /// reported still answering.
    removed: Vec<Option<(Instant, bool)>>,
    /// [`DUAL_WINDOW`] widened by the API's write latency.
    dual_window: Duration,
    /// [`failover_bound`] for the cluster's size, widened by the API's
    /// write latency.
    failover_bound: Duration,
    /// What broke, in order.
    pub violations: Vec<Violation>,
    /// The figures.
    pub stats: Stats,
}

impl Checker {
    /// A checker for `addrs`, each with `order` (every node, in
    /// election order), over `n` nodes, all running from `base`.
    /// `latency` is the longest API write of the run; `probe_period`
    /// gossip's.
    pub fn new(
        base: Instant,
        addrs: Vec<IpAddr>,
        order: Vec<Vec<NodeId>>,
        n: usize,
        latency: Duration,
        probe_period: Duration,
    ) -> Self {
        let a = addrs.len();
        let grace = base + START_GRACE;
        Self {
            base,
            addrs,
            order,
            answerers: vec![BTreeSet::new(); a],
            last_answerer: vec![None; a],
            gaps: (0..a).map(|_| None).collect(),
            duals: (0..a).map(|_| None).collect(),
            faulty: vec![0; n],
            transition: vec![grace; n],
            last_any: grace,
            segment_running: n,
            segment_writes: vec![Vec::new(); n],
            last_failed: vec![None; n],
            started: false,
            not_ready: vec![false; n],
            removed: vec![None; n],
            failover_bound: failover_bound(n, probe_period) + latency * 3,
            dual_window: DUAL_WINDOW + latency,
            violations: Vec::new(),
            stats: Stats::default(),
        }
    }

    fn t(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.base)
    }

    fn violate(
        &mut self,
        invariant: Invariant,
        at: Instant,
        address: Option<usize>,
        node: Option<NodeId>,
        detail: String,
    ) {
        let v = Violation {
            invariant,
            at: self.t(at),
            address: address.map(|a| self.addrs[a]),
            node,
            detail,
        };
        self.violations.push(v);
    }

    /// Whether `node` is faulty now or had a transition within `window`.
    fn recently_faulted(&self, node: NodeId, now: Instant, window: Duration) -> bool {
        self.faulty[node] > 0 || now.saturating_duration_since(self.transition[node]) <= window
    }

    /// Whether any fault transition happened within [`AFTERMATH`]: a
    /// healed partition spreads its side's verdicts through gossip, so
    /// what a fault sets off is not confined to its own node.
    fn anything_recent(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_any) <= AFTERMATH
    }

    /// A fault transition: `node`'s fault starts (`start`) or ends, or the
    /// whole cluster's (`node` None). `running` speakers live from now on.
    pub fn transition(&mut self, node: Option<NodeId>, start: bool, now: Instant, running: usize) {
        self.close_segment(now);
        if let Some(n) = node {
            self.transition[n] = now;
            if start {
                self.faulty[n] += 1;
            } else {
                self.faulty[n] = self.faulty[n].saturating_sub(1);
            }
        }
        self.last_any = now;
        self.segment_running = running;
    }

    /// A transition of `node` is under way (its effects come before
    /// [`Checker::transition`] says how many speakers run after it).
    pub fn mark(&mut self, node: NodeId, now: Instant) {
        self.transition[node] = now;
    }

    /// The Nodes changed: `order` is the ranking of those that exist, for
    /// each address.
    pub fn reorder(&mut self, order: Vec<Vec<NodeId>>) {
        self.order = order;
    }

    /// `node` went NotReady (`on`) while its speaker ran (`running`), or
    /// is Ready again.
    pub fn not_ready(&mut self, node: NodeId, on: bool, running: bool) {
        self.not_ready[node] = on && running;
    }

    /// `node`'s Node was deleted or tainted out-of-service at `now`: it
    /// must answer for nothing from then on (within the failover bound).
    pub fn removed(&mut self, node: NodeId, now: Instant) {
        self.removed[node].get_or_insert((now, false));
    }

    /// `node`'s speaker (re)started at `now`: its earlier failures are not
    /// its own, and the addresses it last answered that nobody answers get
    /// the failover bound again from now - a restarted speaker first
    /// settles its gossip and, beside a hung member, judges it by its
    /// lease (docs/src/differences-full.md, "A member gossip does not
    /// know": silent for about 5 s after the restart).
    pub fn restarted(&mut self, node: NodeId, now: Instant) {
        self.last_failed[node] = None;
        for gap in self.gaps.iter_mut().flatten() {
            if gap.cause.contains(&node) && !gap.reported {
                gap.since = now;
            }
        }
    }

    /// Accounts the writes of the stretch since the last transition: the
    /// part past [`STEADY_AFTER`] is settled.
    fn close_segment(&mut self, now: Instant) {
        let settled_from = self.last_any + STEADY_AFTER;
        let running = self.segment_running as f64;
        let total = now.saturating_duration_since(self.last_any).as_secs_f64();
        let steady = now.saturating_duration_since(settled_from).as_secs_f64();
        self.stats.steady.1 += running * steady;
        self.stats.trouble.1 += running * (total - steady);
        let rate = STEADY_EXTRA_WRITES + (STEADY_WRITES_PER_S * steady).floor() as usize;
        let excused = 1 + (steady / EPISODE_EVERY.as_secs_f64()).floor() as usize;
        let mut worst = None;
        for (node, writes) in self.segment_writes.iter_mut().enumerate() {
            let settled = writes.iter().filter(|w| w.0 >= settled_from).count();
            self.stats.steady.0 += settled as u64;
            self.stats.trouble.0 += (writes.len() - settled) as u64;
            let allowed = rate + EPISODE_WRITES * episodes(writes, settled_from).min(excused);
            if steady > 0.0 && settled > allowed && worst.is_none() {
                worst = Some((node, settled, allowed));
            }
            writes.clear();
        }
        if let Some((node, count, allowed)) = worst {
            let detail = format!(
                "{count} renewals between {:.3}s and {:.3}s ({steady:.1} s settled: at most {allowed})",
                self.t(settled_from).as_secs_f64(),
                self.t(now).as_secs_f64()
            );
            self.violate(Invariant::SteadyWrites, now, None, Some(node), detail);
        }
    }

    /// `node` starts a write: a renewal in `mode`, or (`None`) the lease
    /// clear at shutdown.
    pub fn write_started(&mut self, node: NodeId, now: Instant, mode: Option<Mode>) {
        self.segment_writes[node].push((now, mode));
        if mode.is_none() {
            return;
        }
        if let Some((failed, nth)) = self.last_failed[node]
            && now.saturating_duration_since(failed) < retry_base(nth)
        {
            let detail = format!(
                "renewal failure {nth} in a row at {:.3}s and the next write was sent at {:.3}s (at least {:?} later)",
                self.t(failed).as_secs_f64(),
                self.t(now).as_secs_f64(),
                retry_base(nth)
            );
            self.violate(Invariant::Backoff, now, None, Some(node), detail);
        }
    }

    /// `node`'s renewal ended.
    pub fn write_done(&mut self, node: NodeId, now: Instant, ok: bool) {
        let before = self.last_failed[node].map_or(0, |(_, nth)| nth);
        self.last_failed[node] = (!ok).then_some((now, before + 1));
    }

    /// Whether a gap at `a` after `last` answered it may start now: that
    /// node, or one ranking before it, was faulty lately.
    fn gap_excused(&self, a: usize, last: Option<NodeId>, now: Instant) -> bool {
        self.order[a]
            .iter()
            .take_while(|n| Some(**n) != last)
            .chain(last.iter())
            .any(|n| self.recently_faulted(*n, now, AFTERMATH))
            || self.anything_recent(now)
    }

    /// `node` starts (`on`) or stops answering address `a`.
    pub fn answer(&mut self, a: usize, node: NodeId, on: bool, now: Instant) {
        // Another node taking over from a NotReady one whose speaker runs
        // shows first (before the NotReady one lets go).
        // Looked for only when a node starts answering: at a thousand
        // nodes every speaker answers every address alone at its start,
        // and the answerers of each are many while they let go.
        let kept = || {
            self.answerers[a]
                .iter()
                .find(|n| **n != node && self.not_ready[**n] && self.faulty[**n] == 0)
                .copied()
        };
        if on
            && let Some(owner) = kept()
            && !self.anything_recent(now)
        {
            let detail = format!(
                "{} started answering at {:.3}s beside {}, NotReady with its speaker running; the last fault transition was at {:.3}s",
                name_of(node),
                self.t(now).as_secs_f64(),
                name_of(owner),
                self.t(self.last_any).as_secs_f64()
            );
            self.violate(Invariant::NotReadyKeeps, now, Some(a), Some(owner), detail);
        }
        let before = self.answerers[a].len();
        if on {
            self.answerers[a].insert(node);
        } else {
            self.answerers[a].remove(&node);
        }
        let after = self.answerers[a].len();
        if before == after {
            return;
        }
        if on && self.removed[node].is_some() {
            let detail = format!(
                "{} started answering at {:.3}s, its Node deleted or tainted out-of-service",
                name_of(node),
                self.t(now).as_secs_f64()
            );
            self.violate(
                Invariant::RemovedAnswersNothing,
                now,
                Some(a),
                Some(node),
                detail,
            );
        }
        // Its own fault, or one lately anywhere (a node ranking before it
        // back from a restart takes its address back), excuses a move.
        if !on && self.not_ready[node] && self.faulty[node] == 0 && !self.anything_recent(now) {
            let detail = format!(
                "{} NotReady, its speaker running, stopped answering at {:.3}s; the last fault transition was at {:.3}s",
                name_of(node),
                self.t(now).as_secs_f64(),
                self.t(self.last_any).as_secs_f64()
            );
            self.violate(Invariant::NotReadyKeeps, now, Some(a), Some(node), detail);
        }
        if self.started && now >= self.last_any + STEADY_AFTER {
            let detail = format!(
                "{} {} answering at {:.3}s; the last fault transition was at {:.3}s",
                name_of(node),
                if on { "started" } else { "stopped" },
                self.t(now).as_secs_f64(),
                self.t(self.last_any).as_secs_f64()
            );
            self.violate(Invariant::SteadyOwners, now, Some(a), Some(node), detail);
        }
        if after == 1 {
            self.last_answerer[a] = self.answerers[a].first().copied();
        }
        if self.started {
            self.stretches(a, now);
        }
    }

    /// Opens or closes the gap and dual stretches of `a` after a change.
    fn stretches(&mut self, a: usize, now: Instant) {
        let count = self.answerers[a].len();
        if count == 0 && self.gaps[a].is_none() {
            let last = self.last_answerer[a];
            if !self.gap_excused(a, last, now) {
                let detail = format!(
                    "{} stopped answering at {:.3}s and no node it ranks behind, nor itself, had a fault",
                    last.map_or("nobody".into(), name_of),
                    self.t(now).as_secs_f64()
                );
                self.violate(Invariant::Answered, now, Some(a), last, detail);
            }
            self.gaps[a] = Some(Stretch {
                since: now,
                reported: false,
                cause: last.into_iter().collect(),
            });
        } else if count > 0
            && let Some(gap) = self.gaps[a].take()
            && !gap.cause.is_empty()
            && !self.answerers[a].contains(&gap.cause[0])
        {
            self.stats
                .failovers
                .push(now.saturating_duration_since(gap.since));
        }
        if count > 1 && self.duals[a].is_none() {
            let cause: Vec<NodeId> = self.answerers[a].iter().copied().collect();
            if !self.anything_recent(now)
                && !cause
                    .iter()
                    .any(|n| self.recently_faulted(*n, now, AFTERMATH))
            {
                let names: Vec<String> = cause.iter().map(|n| name_of(*n)).collect();
                let detail = format!(
                    "{} answer at {:.3}s and none of them had a fault",
                    names.join(" and "),
                    self.t(now).as_secs_f64()
                );
                self.violate(Invariant::OneAnswer, now, Some(a), None, detail);
            }
            self.duals[a] = Some(Stretch {
                since: now,
                reported: false,
                cause,
            });
        } else if count <= 1
            && let Some(dual) = self.duals[a].take()
        {
            self.stats
                .duals
                .push(now.saturating_duration_since(dual.since));
        }
    }

    /// The periodic check: gaps and dual answers that outlast their bound.
    pub fn tick(&mut self, now: Instant) {
        if !self.started {
            if now < self.base + START_GRACE {
                return;
            }
            self.started = true;
            for a in 0..self.addrs.len() {
                self.stretches(a, now);
            }
        }
        for node in 0..self.removed.len() {
            if let Some((since, reported)) = &mut self.removed[node]
                && !*reported
                && now.saturating_duration_since(*since) > self.failover_bound
                && let Some(a) = self.answerers.iter().position(|s| s.contains(&node))
            {
                *reported = true;
                let since = *since;
                let detail = format!(
                    "{} still answers {:.3}s after its Node was deleted or tainted out-of-service at {:.3}s",
                    name_of(node),
                    self.t(now).as_secs_f64(),
                    self.t(since).as_secs_f64()
                );
                self.violate(
                    Invariant::RemovedAnswersNothing,
                    now,
                    Some(a),
                    Some(node),
                    detail,
                );
            }
        }
        for a in 0..self.addrs.len() {
            if let Some(gap) = &mut self.gaps[a]
                && !gap.reported
                && now.saturating_duration_since(gap.since) > self.failover_bound
            {
                gap.reported = true;
                let (since, node) = (gap.since, gap.cause.first().copied());
                let detail = format!(
                    "nobody answers since {:.3}s (last answered by {}); now {:.3}s",
                    self.t(since).as_secs_f64(),
                    node.map_or("nobody".into(), name_of),
                    self.t(now).as_secs_f64()
                );
                self.violate(Invariant::Answered, now, Some(a), node, detail);
            }
            if let Some(dual) = &mut self.duals[a]
                && !dual.reported
                && now.saturating_duration_since(dual.since) > self.dual_window
            {
                dual.reported = true;
                let since = dual.since;
                let names: Vec<String> = self.answerers[a].iter().map(|n| name_of(*n)).collect();
                let detail = format!(
                    "{} answer since {:.3}s; now {:.3}s",
                    names.join(" and "),
                    self.t(since).as_secs_f64(),
                    self.t(now).as_secs_f64()
                );
                self.violate(Invariant::OneAnswer, now, Some(a), None, detail);
            }
        }
    }

    /// The run ends now.
    pub fn finish(&mut self, now: Instant) {
        self.close_segment(now);
    }
}

#[cfg(test)]
mod tests;
