//! One run: the nodes, the network, the API server and the fault
//! schedule on one virtual clock, everything drawn from one seed. Handles
//! each event, tells the checker what changed, and stops at the first
//! violation.

use crate::api::{Api, Latency, LeaseValue};
use crate::clock::{CHECK_PERIOD, Clock, Event, NodeId, Run};
use crate::faults::{self, Fault, Scenario};
use crate::invariants::{Checker, Stats, Violation};
use crate::lifecycle::Objects;
use crate::net::Net;
use crate::node::{self, Node, Process, Variant};
use metallb_rs::speaker::election::NodeInfo;
use metallb_rs::speaker::membership::{Timing, next_run};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

mod inject;
mod nodes;
mod ranking;
mod renewal;
mod shutdown;
use crate::seed::mix;
pub use ranking::{addresses, election_order};

/// How often the speaker's loop judges liveness (besides on every gossip
/// view change): the isolation guard's period.
pub const ASSESS_PERIOD: Duration = Duration::from_millis(100);
// How long shutdown waits to clear the lease: the speaker's own.
use metallb_rs::speaker::run::LEAVE_TIMEOUT as CLEAR_TIMEOUT;
/// Every node's wall clock at time zero (milliseconds since 1970, late
/// 2026), less any step back.
const WALL_AT_START_MS: u64 = 1_796_000_000_000;
/// The manifests' termination grace period: SIGKILL after it.
const GRACE: Duration = Duration::from_secs(metallb_rs::manifests::SPEAKER_GRACE_SECONDS as u64);

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Nodes.
    pub nodes: usize,
    /// The seed everything is drawn from.
    pub seed: u64,
    /// The API write latency class.
    pub latency: Latency,
    /// The fault schedule's kind.
    pub scenario: Scenario,
    /// Faults in the mix.
    pub faults: usize,
    /// A deliberately broken rule, if any.
    pub variant: Variant,
    /// Gossip datagram loss probability.
    pub loss: f64,
    /// API write 429/5xx probability.
    pub error_rate: f64,
    /// Gossip timings.
    pub timing: Timing,
    /// Record every answer change in the trace.
    pub trace: bool,
    /// A schedule and run length of one's own instead of the scenario's.
    pub schedule: Option<(Vec<Fault>, Duration)>,
}

impl Config {
    /// The defaults for `nodes` and `seed`: the latency class and the
    /// scenario come from the seed.
    pub fn new(nodes: usize, seed: u64) -> Self {
        Self {
            nodes,
            seed,
            latency: Latency::ALL[(mix(seed, 0x1a7) % 3) as usize],
            scenario: Scenario::of_seed(seed),
            faults: 3,
            variant: Variant::Faithful,
            loss: 0.01,
            error_rate: 0.01,
            timing: Timing::default(),
            trace: false,
            schedule: None,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The schedule.
    pub schedule: Vec<Fault>,
    /// How long it ran (virtual).
    pub ran: Duration,
    /// The first violation, if any (it ended the run).
    pub violation: Option<Violation>,
    /// The figures.
    pub stats: Stats,
    /// Answer changes and fault transitions, in order (with `trace`).
    pub trace: Vec<String>,
    /// A digest of every event handled.
    pub digest: u64,
    /// Events handled.
    pub events: u64,
}

/// The world of one run.
pub struct World {
    cfg: Config,
    clock: Clock,
    rng: StdRng,
    net: Net,
    api: Api,
    nodes: Vec<Node>,
    names: Vec<String>,
    /// The Node objects, and those that exist as the speakers list them.
    objects: Objects,
    infos: Vec<NodeInfo>,
    order: Vec<Vec<NodeId>>,
    shown: Vec<BTreeSet<usize>>,
    checker: Checker,
    schedule: Vec<Fault>,
    end: Instant,
    writes: BTreeMap<u64, (NodeId, Run, LeaseValue)>,
    next_write: u64,
    /// A node's SIGTERM restart, pending its exit: (fault, downtime).
    restart_after_exit: Vec<Option<(usize, Option<Duration>)>>,
    /// The lease version each committed write made, until its answer.
    committed: BTreeMap<u64, u64>,
    /// How far each node's wall clock is behind (ms): clock steps.
    clock_behind: Vec<u64>,
    trace: Vec<String>,
    digest: u64,
}

impl World {
    /// Builds the run of `cfg`.
    pub fn new(cfg: Config) -> anyhow::Result<Self> {
        let n = cfg.nodes;
        anyhow::ensure!(n >= 2, "the simulator needs at least 2 nodes, got {n}");
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let base = Instant::now();
        let names: Vec<String> = (0..n).map(node::name_of).collect();
        let objects = Objects::new(n);
        let infos = objects.visible();
        let addrs = addresses(n);
        let order = election_order(&infos, &addrs)?;
        let net = Net::new(n, cfg.loss, &mut rng);
        let api = Api::new(n, cfg.latency, cfg.error_rate, &mut rng);
        let (schedule, length) = match &cfg.schedule {
            Some(own) => own.clone(),
            None => faults::schedule(cfg.scenario, n, cfg.faults, &mut rng),
        };
        let checker = Checker::new(
            base,
            addrs,
            order.clone(),
            n,
            cfg.latency.max(),
            cfg.timing.probe_period,
        );
        Ok(Self {
            clock: Clock::new(base),
            rng,
            net,
            api,
            nodes: (0..n).map(Node::new).collect(),
            names,
            objects,
            infos,
            order,
            shown: vec![BTreeSet::new(); n],
            checker,
            schedule,
            end: base + length,
            writes: BTreeMap::new(),
            next_write: 0,
            restart_after_exit: vec![None; n],
            committed: BTreeMap::new(),
            clock_behind: vec![0; n],
            trace: Vec::new(),
            digest: 0xcbf2_9ce4_8422_2325,
            cfg,
        })
    }

    /// Runs to the end or the first violation.
    pub fn run(mut self) -> anyhow::Result<Outcome> {
        for i in 0..self.nodes.len() {
            self.start(i)?;
        }
        for (i, f) in self.schedule.iter().enumerate() {
            self.clock
                .at(self.clock.base() + f.at, Event::FaultStart(i));
        }
        self.clock.after(CHECK_PERIOD, Event::Check);
        while let Some(event) = self.clock.next(self.end) {
            self.fold(&event);
            self.handle(event)?;
            if !self.checker.violations.is_empty() {
                break;
            }
        }
        let now = self.clock.now();
        if self.checker.violations.is_empty() {
            self.checker.finish(now);
        }
        Ok(Outcome {
            schedule: self.schedule,
            ran: self.clock.since_start(now),
            violation: self.checker.violations.first().cloned(),
            stats: self.checker.stats,
            trace: self.trace,
            digest: self.digest,
            events: self.clock.handled,
        })
    }

    fn fold(&mut self, event: &Event) {
        let (tag, node) = match event {
            Event::Deliver { to, from, frame } => (1, to * 65_536 + from + frame.len()),
            Event::GossipWake { node, .. } => (2, *node),
            Event::Assess { node, .. } => (3, *node),
            Event::RenewLook { node, .. } => (4, *node),
            Event::WriteDone { node, ok, .. } => (5, node * 2 + usize::from(*ok)),
            Event::Commit { write } => (6, *write as usize),
            Event::FaultStart(i) => (7, *i),
            Event::FaultEnd(i) => (8, *i),
            Event::Shutdown { node, .. } => (9, *node),
            Event::Check => (10, 0),
            Event::NotReady { node, .. } => (11, *node),
        };
        let t = self.clock.since_start(self.clock.now()).as_nanos() as u64;
        for v in [t, tag, node as u64] {
            self.digest = (self.digest ^ v).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn note(&mut self, line: impl FnOnce() -> String) {
        if self.cfg.trace {
            let t = self.clock.since_start(self.now()).as_secs_f64();
            self.trace.push(format!("{t:9.4} {}", line()));
        }
    }

    fn running(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n.process, Process::Running | Process::Terminating))
            .count()
    }

    fn transition(&mut self, node: Option<NodeId>, start: bool) {
        let running = self.running();
        self.checker.transition(node, start, self.now(), running);
    }

    fn handle(&mut self, event: Event) -> anyhow::Result<()> {
        match event {
            Event::Deliver { to, from, frame } => self.deliver(to, from, frame),
            Event::GossipWake { node, run } => {
                let now = self.now();
                let n = &mut self.nodes[node];
                if n.run != run || !matches!(n.process, Process::Running | Process::Terminating) {
                    return Ok(());
                }
                let Some(sp) = n.speaker.as_mut() else {
                    return Ok(());
                };
                if sp.gossip_wake != Some(now) {
                    return Ok(());
                }
                sp.gossip_wake = None;
                sp.gossip.tick(now);
                self.after_gossip(node);
            }
            Event::Assess {
                node,
                run,
                periodic,
            } => {
                let n = &self.nodes[node];
                if n.run != run || n.process != Process::Running {
                    return Ok(());
                }
                self.assess(node);
                if periodic {
                    self.clock.after(
                        ASSESS_PERIOD,
                        Event::Assess {
                            node,
                            run,
                            periodic,
                        },
                    );
                }
            }
            Event::RenewLook { node, run, .. } => {
                let now = self.now();
                let n = &mut self.nodes[node];
                if n.run != run || !matches!(n.process, Process::Running | Process::Terminating) {
                    return Ok(());
                }
                let Some(sp) = n.speaker.as_mut() else {
                    return Ok(());
                };
                if sp.renew_wake != Some(now) {
                    return Ok(());
                }
                sp.renew_wake = None;
                self.renew(node);
            }
            Event::WriteDone {
                node,
                run,
                write,
                ok,
            } => self.write_done(node, run, write, ok),
            Event::Commit { write } => {
                if let Some((node, run, value)) = self.writes.remove(&write) {
                    // A renewal tests that its speaker still holds the
                    // lease (`presence::renew_if_held`) and, failing, takes
                    // it only if that speaker still runs to see the answer:
                    // one that reaches the API server after the lease was
                    // cleared on SIGTERM writes nothing.
                    let n = &self.nodes[node];
                    let gone = n.run != run || n.process != Process::Running;
                    if !(value.held && gone && !self.api.held(node)) {
                        let now = self.now();
                        let c = self.api.commit(node, value, now);
                        self.committed.insert(write, c.version);
                        // The writer's loop judges when its watch shows
                        // its own write (a watch event, in the speaker).
                        let shown = self.api.watch_delay(node, now);
                        self.clock.after(
                            shown,
                            Event::Assess {
                                node,
                                run: n.run,
                                periodic: false,
                            },
                        );
                    }
                }
            }
            Event::FaultStart(i) => self.fault_start(i),
            Event::FaultEnd(i) => self.fault_end(i)?,
            Event::Shutdown { node, run, step } => self.shutdown(node, run, step),
            Event::NotReady { node, stop } => self.not_ready(node, stop),
            Event::Check => {
                let now = self.now();
                self.checker.tick(now);
                self.clock.after(CHECK_PERIOD, Event::Check);
            }
        }
        Ok(())
    }

    /// Node `i`'s wall clock, in milliseconds since 1970.
    fn wall_ms(&self, i: NodeId) -> u64 {
        let elapsed = self.clock.since_start(self.now()).as_millis();
        (WALL_AT_START_MS + u64::try_from(elapsed).unwrap_or(u64::MAX))
            .saturating_sub(self.clock_behind[i])
    }

    /// Starts (or restarts) node `i`'s speaker.
    fn start(&mut self, i: NodeId) -> anyhow::Result<()> {
        let now = self.now();
        let seed = self.rng.random::<u64>();
        let last = match self.cfg.variant {
            Variant::ClockRun => None,
            _ => self.api.last_run(i),
        };
        let bump = next_run(self.wall_ms(i), last);
        let seeds: Vec<_> = (0..self.nodes.len())
            .filter(|j| *j != i)
            .map(|j| (self.names[j].clone(), self.net.addr(j)))
            .collect();
        let addr = self.net.addr(i);
        self.nodes[i].start(addr, &self.cfg.timing, (seed, bump), seeds, now)?;
        self.checker.restarted(i, now);
        let run = self.nodes[i].run;
        let phase = Duration::from_micros(self.rng.random_range(0..100_000));
        self.clock.after(
            phase,
            Event::Assess {
                node: i,
                run,
                periodic: true,
            },
        );
        self.note(|| format!("node-{i} speaker starts (run {run})"));
        self.look_at(i, now + phase);
        self.after_gossip(i);
        Ok(())
    }

    fn deliver(&mut self, to: NodeId, from: NodeId, frame: Vec<u8>) {
        let now = self.now();
        let addr = self.net.addr(from);
        let n = &mut self.nodes[to];
        match n.process {
            Process::Dead => {}
            Process::Stopped => {
                if n.queued.len() < node::QUEUE_LIMIT {
                    n.queued.push((from, frame));
                }
            }
            Process::Running | Process::Terminating => {
                if let Some(sp) = n.speaker.as_mut() {
                    // A frame the gossip refuses is dropped, as the task does.
                    let _ = sp.gossip.receive(&self.names[from], &frame, addr, now);
                    self.after_gossip(to);
                }
            }
        }
    }

    /// Sends what node `i`'s gossip queued, sets its timer, and judges
    /// again when its view changed.
    fn after_gossip(&mut self, i: NodeId) {
        let now = self.now();
        let n = &mut self.nodes[i];
        let run = n.run;
        let running = n.process == Process::Running;
        let Some(sp) = n.speaker.as_mut() else {
            return;
        };
        for (addr, frame) in sp.gossip.take_outgoing() {
            let Some(to) = self.net.node_at(addr) else {
                continue;
            };
            if let Some(delay) = self.net.fate(i, to, &mut self.rng) {
                self.clock
                    .after(delay, Event::Deliver { to, from: i, frame });
            }
        }
        // A timer the tick left due (it should not) fires a millisecond
        // later, never in a loop.
        let w = sp.gossip.next_wakeup().max(now + Duration::from_millis(1));
        if sp.gossip_wake.is_none_or(|s| w < s) {
            sp.gossip_wake = Some(w);
            self.clock.at(w, Event::GossipWake { node: i, run });
        }
        if running && sp.view_moved() {
            match sp.passes.changed(now) {
                node::Pass::Now => self.assess(i),
                node::Pass::At(end) => self.clock.at(
                    end,
                    Event::Assess {
                        node: i,
                        run,
                        periodic: false,
                    },
                ),
                node::Pass::Queued => {}
            }
        }
    }

    /// Node `i`'s loop judges liveness and decides what it answers.
    fn assess(&mut self, i: NodeId) {
        let now = self.now();
        let n = &mut self.nodes[i];
        let Some(sp) = n.speaker.as_mut() else {
            return;
        };
        sp.passes.start(now, self.names.len());
        let commits = self.api.watch(i, &mut sp.cursor, now);
        sp.observe(i, &commits, &self.names, now);
        let trouble_before = sp.assessment.as_ref().is_some_and(|a| a.trouble());
        let before = self.cfg.trace.then(|| {
            sp.assessment
                .as_ref()
                .map(|a| (a.trouble(), a.isolated, a.gone.clone()))
        });
        let moved = sp.assess(&n.name, &self.infos, now, self.cfg.variant);
        let Some(a) = sp.assessment.as_ref() else {
            return;
        };
        let wake = a.trouble() != trouble_before || sp.asked;
        if let Some(before) = before
            && before.as_ref() != Some(&(a.trouble(), a.isolated, a.gone.clone()))
        {
            let t = self.clock.since_start(now).as_secs_f64();
            let v = sp.gossip.view();
            self.trace.push(format!(
                "{t:9.4} node-{i} judges: gone {:?}, doubts {:?}, isolated {}, api_ok {}; gossip alive {:?} suspect {:?} down {:?}",
                a.gone,
                a.doubts,
                a.isolated,
                sp.renewer.record().api_ok(now),
                v.alive,
                v.suspect,
                v.down.keys().collect::<Vec<_>>()
            ));
        }
        // What it answers follows from whom it counts and its isolation
        // alone.
        if moved {
            let answers = node::answers(i, &self.names, &self.order, a);
            if answers != n.answers {
                n.answers = answers;
                self.sync_answers(i);
            }
        }
        if wake {
            self.look_at(i, now);
        }
    }

    /// Tells the checker what node `i` answers now.
    fn sync_answers(&mut self, i: NodeId) {
        let now = self.now();
        let n = &self.nodes[i];
        let effective = if n.answering() {
            n.answers.clone()
        } else {
            BTreeSet::new()
        };
        let old = std::mem::replace(&mut self.shown[i], effective.clone());
        for a in old.difference(&effective) {
            self.checker.answer(*a, i, false, now);
        }
        for a in effective.difference(&old) {
            self.checker.answer(*a, i, true, now);
        }
        if self.cfg.trace && old != effective {
            self.note(|| format!("node-{i} answers {effective:?}"));
        }
    }
}
