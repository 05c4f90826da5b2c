//! One simulated speaker: its process state, and the speaker's own pure
//! parts - the sans-IO gossip member (real foca inside), the renewal
//! scheduler, liveness judging - fed by what this node sees: its gossip
//! view, its lease watch (when it first saw each version, on its clock),
//! its own renewals. Decides which addresses it answers; the world
//! carries out what it asks (datagrams, writes) and keeps time.

use crate::api::Commit;
use crate::clock::{NodeId, Run};
use metallb_rs::speaker::election::NodeInfo;
use metallb_rs::speaker::liveness::{self, Assessment, Judging, LeaseState};
use metallb_rs::speaker::membership::{Gossip, Timing};
use metallb_rs::speaker::presence::{Mark, Mode};
use metallb_rs::speaker::renewal::Renewer;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The speaker process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    /// Running.
    Running,
    /// SIGSTOP: no timers, no datagram handled (the kernel queues them).
    Stopped,
    /// SIGTERM received: withdrawn, clearing its lease and leaving gossip.
    Terminating,
    /// Gone (SIGKILL, or after its shutdown).
    Dead,
}

/// A deliberately broken rule, to show the checker catches it. Lives
/// here, never in metallb-rs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Variant {
    /// The speaker as metallb-rs decides.
    #[default]
    Faithful,
    /// Partition safety off: a cut-off speaker keeps answering.
    NoIsolation,
    /// Every member gossip holds down counts as failed at once, whatever
    /// its lease says.
    DownIsFailed,
    /// Failed renewals are retried after 100 ms, without backoff.
    NoBackoff,
    /// A run's gossip number is the node's clock alone, not past the
    /// run its lease recorded.
    ClockRun,
    /// A NotReady node counts as without speaker, whatever its lease
    /// and gossip say.
    NotReadyIsGone,
    /// The out-of-service taint is ignored.
    IgnoreTaint,
    /// A member gossip says nothing of (a restarted speaker's join feed
    /// lists only members alive) counts as running while its lease is
    /// held and its node Ready, however long ago the lease was renewed.
    LeaseCountsWithoutGossip,
    /// Isolation weighs every node with a presence lease and every
    /// member gossip holds down, departed speakers included.
    EveryLeaseVotes,
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "faithful" => Ok(Variant::Faithful),
            "no-isolation" => Ok(Variant::NoIsolation),
            "down-is-failed" => Ok(Variant::DownIsFailed),
            "no-backoff" => Ok(Variant::NoBackoff),
            "clock-run" => Ok(Variant::ClockRun),
            "not-ready-is-gone" => Ok(Variant::NotReadyIsGone),
            "ignore-taint" => Ok(Variant::IgnoreTaint),
            "lease-counts-without-gossip" => Ok(Variant::LeaseCountsWithoutGossip),
            "every-lease-votes" => Ok(Variant::EveryLeaseVotes),
            other => Err(format!(
                "unknown variant {other:?}: faithful, no-isolation, down-is-failed, no-backoff, clock-run, not-ready-is-gone, ignore-taint, lease-counts-without-gossip or every-lease-votes"
            )),
        }
    }
}

/// A renewal waiting for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    /// The write's id.
    pub write: u64,
    /// The mode it writes.
    pub mode: Mode,
}

/// What the speaker runs while its process lives.
pub struct Speaker {
    /// The gossip member.
    pub gossip: Gossip,
    /// Its run's number, which the renewals record on the lease.
    pub gossip_run: u64,
    /// The version of its own lease its watch shows.
    pub own_version: Option<u64>,
    /// The renewal scheduler.
    pub renewer: Renewer,
    /// What liveness judging remembers.
    pub judging: Judging,
    /// Each lease as this speaker's watch shows it.
    pub leases: BTreeMap<String, LeaseState>,
    /// The marks the leases carry, as its watch shows them.
    pub marks: BTreeMap<String, Mark>,
    /// How far into the API server's log its watch has read.
    pub cursor: usize,
    /// The last assessment.
    pub assessment: Option<Assessment>,
    /// What the last assessment was made of, while a pass on the same
    /// inputs would decide the same (`liveness::stands_until`).
    pub memo: Option<Memo>,
    /// [`Gossip::view_changes`] when last assessed.
    pub seen: u64,
    /// The gossip view when last assessed: debug builds check that the
    /// view never changes without [`Gossip::view_changes`] moving.
    #[cfg(debug_assertions)]
    pub view: metallb_rs::speaker::membership::View,
    /// The renewal waiting for its answer.
    pub in_flight: Option<InFlight>,
    /// Failed renewals in a row (for the backoff).
    pub failures: u32,
    /// While terminating: when its lease clear gives up, and its failed
    /// attempts so far.
    pub clearing: Option<(Instant, u32)>,
    /// The loop asked the renewal task to renew now.
    pub asked: bool,
    /// When the gossip timer is set for.
    pub gossip_wake: Option<Instant>,
    /// When the renewal task looks next.
    pub renew_wake: Option<Instant>,
    /// When its loop judges the gossip view's changes.
    pub passes: Passes,
}

/// What one pass of the speaker's loop costs per node of the cluster
/// (judging every member, then planning the answers), about what
/// `liveness::assess` took per member here.
pub const PASS_COST_PER_NODE: Duration = Duration::from_micros(2);

/// The loop learns of gossip view changes through a channel that keeps
/// only the latest: the changes that come while it is in a pass are
/// judged together once the pass ends. Without this, a thousand
/// speakers starting at once judged a full pass for every one of the
/// million join messages of their first milliseconds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Passes {
    /// Until when the loop is in its last pass.
    busy_until: Option<Instant>,
    /// A pass is queued for the end of the current one.
    queued: bool,
}

/// When the loop judges a view change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// At once: the loop is idle.
    Now,
    /// When the pass it is in ends (the caller wakes it then).
    At(Instant),
    /// In the pass already queued for a change before it.
    Queued,
}

impl Passes {
    /// A pass over `nodes` nodes starts at `now`.
    pub fn start(&mut self, now: Instant, nodes: usize) {
        let nodes = u32::try_from(nodes).unwrap_or(u32::MAX);
        self.busy_until = Some(now + PASS_COST_PER_NODE * nodes);
        self.queued = false;
    }

    /// The gossip view changed at `now`.
    pub fn changed(&mut self, now: Instant) -> Pass {
        match self.busy_until {
            Some(end) if end > now => {
                if std::mem::replace(&mut self.queued, true) {
                    Pass::Queued
                } else {
                    Pass::At(end)
                }
            }
            _ => Pass::Now,
        }
    }
}

/// The inputs of the last full assessment that are not the leases, and
/// until when it stands. A pass that finds them unchanged, no lease
/// change that matters (`liveness::lease_change_matters`) and its time
/// before `until` is skipped: it would decide the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memo {
    /// [`Gossip::view_changes`].
    pub changes: u64,
    /// `renewal::Record::api_ok`.
    pub api_ok: bool,
    /// `renewal::Record::latency`.
    pub latency: Duration,
    /// [`liveness::Inputs::own_write_seen`].
    pub own_write_seen: Option<Instant>,
    /// [`liveness::Inputs::last_write_sent`].
    pub last_write_sent: Option<Instant>,
    /// `liveness::stands_until`.
    pub until: Option<Instant>,
    /// A lease changed in a way that matters since.
    pub dirty: bool,
}

/// One node: the Node object and its speaker.
pub struct Node {
    /// Its index.
    pub id: NodeId,
    /// Its name.
    pub name: String,
    /// The speaker's incarnation (a restart makes a new one).
    pub run: Run,
    /// The process.
    pub process: Process,
    /// The speaker, while its process lives.
    pub speaker: Option<Speaker>,
    /// The addresses (indices) it answers for, as its last decision says.
    pub answers: BTreeSet<usize>,
    /// Datagrams that arrived while it was stopped (kernel buffer).
    pub queued: Vec<(NodeId, Vec<u8>)>,
    /// Answers to writes that arrived while it was stopped.
    pub deferred: Vec<(u64, bool)>,
    /// Its link to the clients (and everything else) is up.
    pub link_up: bool,
}

/// Most datagrams a stopped process's socket buffer holds.
pub const QUEUE_LIMIT: usize = 1024;

impl Node {
    /// Node `id`, not started.
    pub fn new(id: NodeId) -> Self {
        Self {
            id,
            name: name_of(id),
            run: 0,
            process: Process::Dead,
            speaker: None,
            answers: BTreeSet::new(),
            queued: Vec::new(),
            deferred: Vec::new(),
            link_up: true,
        }
    }

    /// Starts a new run of the speaker, gossip run `bump`
    /// (`membership::next_run`): a new gossip member seeded with `seed`,
    /// joining `seeds`; fresh judging and renewal; its watch lists from
    /// the start.
    pub fn start(
        &mut self,
        addr: SocketAddr,
        timing: &Timing,
        (seed, bump): (u64, u64),
        seeds: Vec<(String, SocketAddr)>,
        now: Instant,
    ) -> anyhow::Result<()> {
        let mut gossip = Gossip::new(self.name.clone(), addr, timing, seed, bump, now)
            .map_err(|e| anyhow::anyhow!("{}: starting gossip: {e}", self.name))?;
        gossip.join(seeds, now);
        #[cfg(debug_assertions)]
        let view = gossip.view().clone();
        let seen = gossip.view_changes();
        self.run += 1;
        self.process = Process::Running;
        self.queued.clear();
        self.deferred.clear();
        let mut judging = Judging::default();
        judging.gossip_started(now);
        self.speaker = Some(Speaker {
            gossip,
            gossip_run: bump,
            own_version: None,
            renewer: Renewer::new(now),
            judging,
            leases: BTreeMap::new(),
            marks: BTreeMap::new(),
            cursor: 0,
            assessment: None,
            memo: None,
            seen,
            #[cfg(debug_assertions)]
            view,
            in_flight: None,
            failures: 0,
            clearing: None,
            asked: false,
            gossip_wake: None,
            renew_wake: None,
            passes: Passes::default(),
        });
        Ok(())
    }

    /// The process ends (SIGKILL, or the end of its shutdown).
    pub fn exit(&mut self) {
        self.process = Process::Dead;
        self.speaker = None;
        self.answers.clear();
        self.queued.clear();
        self.deferred.clear();
    }

    /// Whether its answers reach the clients now.
    pub fn answering(&self) -> bool {
        self.process == Process::Running && self.link_up
    }
}

/// Node `i`'s name.
pub fn name_of(i: NodeId) -> String {
    format!("node-{i}")
}

/// The node named `name` ([`name_of`]), if it is one.
pub fn id_of(name: &str) -> Option<NodeId> {
    name.strip_prefix("node-")?.parse().ok()
}

impl Speaker {
    /// The gossip view changed since the last assessment.
    pub fn view_moved(&self) -> bool {
        let moved = self.gossip.view_changes() != self.seen;
        #[cfg(debug_assertions)]
        assert!(
            moved || self.gossip.view() == &self.view,
            "the gossip view changed without view_changes moving"
        );
        moved
    }

    /// Takes in what the watch shows: a lease first seen now counts as
    /// renewed now but not seen renewing; one seen before in another
    /// version is seen renewing (`presence::states`). Only the latest
    /// version of each lease counts, as a relist shows it.
    pub fn observe(&mut self, me: NodeId, commits: &[Commit], names: &[String], now: Instant) {
        let mut latest: BTreeMap<NodeId, &Commit> = BTreeMap::new();
        for c in commits {
            latest.insert(c.node, c);
        }
        for (node, c) in latest {
            if node == me {
                self.own_version = Some(c.version);
            }
            let name = &names[node];
            let old = self.leases.get(name).copied();
            let new = LeaseState {
                held: c.value.held,
                changed: now,
                renewed: old.is_some(),
                period: c.value.mode.period(),
                trouble: c.value.mode == Mode::Trouble,
                link_down: false,
            };
            if let Some(memo) = self.memo.as_mut()
                && !memo.dirty
            {
                memo.dirty = liveness::lease_change_matters(
                    &self.judging,
                    Some(self.gossip.view()),
                    &names[me],
                    name,
                    old.as_ref(),
                    Some(&new),
                );
            }
            self.leases.insert(name.clone(), new);
            match c
                .value
                .mark
                .as_ref()
                .filter(|_| c.value.mode == Mode::Trouble)
            {
                Some(m) => {
                    self.marks.insert(name.clone(), m.clone());
                }
                None => {
                    self.marks.remove(name);
                }
            }
        }
    }

    /// Judges liveness now (`liveness::assess`), with `variant`'s broken
    /// rule if any - unless the last assessment stands ([`Memo`]).
    /// Whether what it answers may have changed: it judged anew, and the
    /// speakers it counts or its isolation moved.
    pub fn assess(&mut self, me: &str, nodes: &[NodeInfo], now: Instant, variant: Variant) -> bool {
        let record = self.renewer.record();
        let memo = Memo {
            changes: self.gossip.view_changes(),
            api_ok: record.api_ok(now),
            latency: record.latency,
            own_write_seen: self
                .own_version
                .and_then(|v| record.sent_of(&v.to_string())),
            last_write_sent: record.witnesses[0].map(|(_, sent)| sent),
            until: None,
            dirty: false,
        };
        let stands = self.memo.as_ref().is_some_and(|m| {
            !m.dirty
                && m.until.is_none_or(|u| now < u)
                && Memo {
                    until: m.until,
                    ..memo.clone()
                } == *m
        }) && self.assessment.as_ref().is_some_and(|a| !a.renew_now);
        if stands {
            #[cfg(debug_assertions)]
            {
                let mut judging = self.judging.clone();
                let a = self.judge(&mut judging, me, nodes, &memo, now, variant);
                assert_eq!(
                    Some(&a),
                    self.assessment.as_ref(),
                    "{me}: a skipped pass would judge differently"
                );
                assert_eq!(
                    judging, self.judging,
                    "{me}: a skipped pass would change what judging remembers"
                );
            }
            return false;
        }
        let mut judging = std::mem::take(&mut self.judging);
        let a = self.judge(&mut judging, me, nodes, &memo, now, variant);
        let until = liveness::stands_until(&judging, &self.inputs(me, nodes, &memo, now));
        self.judging = judging;
        self.memo = Some(Memo { until, ..memo });
        if a.renew_now {
            self.asked = true;
        }
        self.seen = self.gossip.view_changes();
        #[cfg(debug_assertions)]
        {
            self.view = self.gossip.view().clone();
        }
        let moved = self
            .assessment
            .as_ref()
            .is_none_or(|p| p.alive != a.alive || p.isolated != a.isolated);
        self.assessment = Some(a);
        moved
    }

    fn inputs<'a>(
        &'a self,
        me: &'a str,
        nodes: &'a [NodeInfo],
        memo: &Memo,
        now: Instant,
    ) -> liveness::Inputs<'a> {
        liveness::Inputs {
            now,
            me,
            api_ok: memo.api_ok,
            api_latency: memo.latency,
            view: Some(self.gossip.view()),
            nodes,
            leases: &self.leases,
            marks: &self.marks,
            own_write_seen: memo.own_write_seen,
            last_write_sent: memo.last_write_sent,
        }
    }

    /// One full pass on `judging`, `variant`'s broken rule applied.
    fn judge(
        &self,
        judging: &mut Judging,
        me: &str,
        nodes: &[NodeInfo],
        memo: &Memo,
        now: Instant,
        variant: Variant,
    ) -> Assessment {
        let mut a = liveness::assess(judging, &self.inputs(me, nodes, memo, now));
        let view = self.gossip.view();
        match variant {
            Variant::NoIsolation => a.isolated = false,
            Variant::DownIsFailed => a.alive.retain(|n| !view.down.contains_key(n)),
            Variant::NotReadyIsGone => {
                let ready = |n: &String| nodes.iter().any(|i| i.name == *n && i.ready);
                a.alive.retain(ready);
            }
            Variant::IgnoreTaint => {
                a.gone.retain(|n, why| {
                    let tainted = *why == liveness::Gone::OutOfService;
                    if tainted {
                        a.alive.insert(n.clone());
                    }
                    !tainted
                });
            }
            Variant::LeaseCountsWithoutGossip => {
                let unknown = |n: &str| !view.alive.contains(n) && !view.down.contains_key(n);
                for info in nodes.iter().filter(|i| i.ready && unknown(&i.name)) {
                    if self.leases.get(&info.name).is_some_and(|l| l.held) {
                        a.gone.remove(&info.name);
                        a.alive.insert(info.name.clone());
                    }
                }
            }
            Variant::EveryLeaseVotes => {
                let voters: BTreeSet<String> = self
                    .leases
                    .keys()
                    .chain(view.down.keys())
                    .chain(&view.alive)
                    .cloned()
                    .collect();
                a.isolated = liveness::isolated_in(memo.api_ok, view, Some(&voters));
            }
            Variant::Faithful | Variant::NoBackoff | Variant::ClockRun => {}
        }
        a
    }

    /// The renewal to write now, if any.
    pub fn renew_due(&mut self, me: &str, now: Instant) -> Option<Mode> {
        if self.in_flight.is_some() {
            return None;
        }
        let mark = self.assessment.as_ref().and_then(Assessment::mark);
        if std::mem::take(&mut self.asked) {
            self.renewer.ask();
        }
        self.renewer
            .poll(now, mark.as_ref(), &self.leases, &self.marks, me)
    }

    /// The renewal in flight ended at `now`: `ok`, making lease `version`
    /// (the caller learns it from the answer), or retried after `retry`.
    pub fn renewed(&mut self, now: Instant, ok: bool, retry: Duration, version: Option<u64>) {
        if let Some(f) = self.in_flight.take() {
            self.renewer.done(now, f.mode, ok, retry);
            if let Some(v) = version {
                self.renewer.wrote(&v.to_string());
            }
        }
        self.failures = if ok { 0 } else { self.failures + 1 };
    }
}

/// The addresses `me` answers for: those whose first node in `order`
/// (upstream's hash order of every node) among the alive set is `me`,
/// unless it is isolated.
pub fn answers(
    me: NodeId,
    names: &[String],
    order: &[Vec<NodeId>],
    a: &Assessment,
) -> BTreeSet<usize> {
    if a.isolated {
        return BTreeSet::new();
    }
    let mut alive = vec![false; names.len()];
    for id in a.alive.iter().filter_map(|n| id_of(n)) {
        if let Some(x) = alive.get_mut(id) {
            *x = true;
        }
    }
    order
        .iter()
        .enumerate()
        .filter(|(_, o)| o.iter().find(|n| alive[**n]).is_some_and(|n| *n == me))
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Changes while the loop is idle are judged at once; those during a
    /// pass once, when it ends; a pass that starts takes them all.
    #[test]
    fn view_changes_during_a_pass_are_judged_once_when_it_ends() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut p = Passes::default();
        assert_eq!(p.changed(t0), Pass::Now, "no pass yet");
        p.start(t0, 1000);
        let end = t0 + PASS_COST_PER_NODE * 1000;
        assert_eq!(end, ms(2), "a thousand nodes: 2 ms");
        assert_eq!(p.changed(t0), Pass::At(end));
        assert_eq!(p.changed(t0 + Duration::from_micros(1500)), Pass::Queued);
        assert_eq!(p.changed(end), Pass::Now, "the pass is over");
        p.start(end, 1000);
        assert_eq!(p.changed(ms(3)), Pass::At(ms(4)), "the queue was taken");
        p.start(ms(10), 3);
        assert_eq!(
            p.changed(ms(10)),
            Pass::At(t0 + Duration::from_micros(10_006))
        );
        assert_eq!(p.changed(t0 + Duration::from_micros(10_006)), Pass::Now);
    }
}
