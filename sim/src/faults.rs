//! The fault schedule of a run, drawn from its seed: what happens to
//! which node when, and for how long. The baseline mix is one fault at a
//! time with settle time between; the other scenarios replay what the
//! lab found or what a cluster's life brings. Printed with every violation.

use crate::clock::NodeId;
use rand::RngExt;
use rand::rngs::StdRng;
use std::fmt;
use std::time::Duration;

mod lifecycle;

/// The cluster forms for this long before the first fault.
pub const WARMUP: Duration = Duration::from_secs(30);
/// After a fault ends, at least this long passes before the next.
pub const SETTLE: Duration = Duration::from_secs(35);

/// What happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SIGKILL the speaker; start it again after `restart_after` (never
    /// when None).
    Kill {
        /// Downtime.
        restart_after: Option<Duration>,
    },
    /// SIGTERM the speaker (it clears its lease, leaves gossip, exits);
    /// start it again `restart_after` after it exited.
    Term {
        /// Downtime.
        restart_after: Option<Duration>,
    },
    /// SIGSTOP the speaker for `for_`, then SIGCONT.
    Stop {
        /// How long.
        for_: Duration,
    },
    /// Cut the node's gossip, both ways or only what it sends.
    GossipCut {
        /// How long.
        for_: Duration,
        /// Only its outgoing datagrams are lost.
        one_way: bool,
    },
    /// Cut the node's path to the API server.
    ApiCut {
        /// How long.
        for_: Duration,
    },
    /// Cut both its gossip and its API path (its clients still reach it).
    GossipAndApiCut {
        /// How long.
        for_: Duration,
    },
    /// The node's link goes down: no gossip, no API, no clients.
    Unplug {
        /// How long.
        for_: Duration,
    },
    /// The node's wall clock steps back by `by` (as when NTP corrects a
    /// clock that ran ahead), and its speaker is killed and started again
    /// after `restart_after`: the new run must still win over the last.
    ClockBack {
        /// The step.
        by: Duration,
        /// Downtime.
        restart_after: Duration,
    },
    /// The node's lease watch falls behind, gaining `gain` of delay per
    /// second, for `for_`; then it relists.
    WatchLag {
        /// How long.
        for_: Duration,
        /// Delay gained per second.
        gain: Duration,
    },
    /// The machine powers off: its speaker dies, its link goes down, its
    /// kubelet stops heartbeating (NotReady
    /// [`crate::lifecycle::NOT_READY_AFTER`] later). For good.
    PowerOff,
    /// The node's kubelet stops heartbeating for `for_` (NotReady
    /// [`crate::lifecycle::NOT_READY_AFTER`] later, Ready again at the
    /// end) while its speaker runs on.
    KubeletStop {
        /// How long.
        for_: Duration,
    },
    /// The Node object is deleted (a scale-down's cleanup).
    Delete,
    /// An admin taints the node `node.kubernetes.io/out-of-service`.
    OutOfService,
    /// The API server closes the node's lease watch with 410 Gone: it
    /// relists, which takes `list`.
    WatchExpire {
        /// The list's latency.
        list: Duration,
    },
    /// RBAC denies the writes (403) of the node, or of every node, for
    /// `for_` (a rolling RBAC change).
    Forbidden {
        /// How long.
        for_: Duration,
    },
    /// Every API write takes `latency` (all nodes).
    ApiSlow {
        /// How long.
        for_: Duration,
        /// Every write's latency meanwhile.
        latency: Duration,
    },
}

impl Kind {
    /// How long the fault lasts, when that is known in advance.
    pub fn duration(&self) -> Option<Duration> {
        match *self {
            Kind::Kill { restart_after } => restart_after,
            Kind::ClockBack { restart_after, .. } => Some(restart_after),
            Kind::Term { restart_after } => restart_after.map(|d| d + Duration::from_secs(2)),
            Kind::Stop { for_ }
            | Kind::GossipCut { for_, .. }
            | Kind::ApiCut { for_ }
            | Kind::GossipAndApiCut { for_ }
            | Kind::Unplug { for_ }
            | Kind::WatchLag { for_, .. }
            | Kind::ApiSlow { for_, .. }
            | Kind::KubeletStop { for_ }
            | Kind::Forbidden { for_ } => Some(for_),
            Kind::WatchExpire { list } => Some(list),
            Kind::PowerOff | Kind::Delete | Kind::OutOfService => None,
        }
    }
}

/// One fault of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// When it starts (since the run's start).
    pub at: Duration,
    /// Its node (None: the whole cluster).
    pub node: Option<NodeId>,
    /// What.
    pub kind: Kind,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |d: Duration| format!("{:.1}s", d.as_secs_f64());
        let who = self.node.map_or("cluster".to_owned(), crate::node::name_of);
        write!(f, "{} {who}: ", s(self.at))?;
        match self.kind {
            Kind::Kill { restart_after } => match restart_after {
                Some(d) => write!(f, "SIGKILL, restart after {}", s(d)),
                None => write!(f, "SIGKILL"),
            },
            Kind::Term { restart_after } => match restart_after {
                Some(d) => write!(f, "SIGTERM, restart {} after exit", s(d)),
                None => write!(f, "SIGTERM"),
            },
            Kind::ClockBack { by, restart_after } => write!(
                f,
                "clock stepped back {}, SIGKILL, restart after {}",
                s(by),
                s(restart_after)
            ),
            Kind::Stop { for_ } => write!(f, "SIGSTOP for {}", s(for_)),
            Kind::WatchLag { for_, gain } => write!(
                f,
                "lease watch falls behind {} per second for {}",
                s(gain),
                s(for_)
            ),
            Kind::GossipCut { for_, one_way } => write!(
                f,
                "gossip cut{} for {}",
                if one_way { " (outgoing only)" } else { "" },
                s(for_)
            ),
            Kind::ApiCut { for_ } => write!(f, "API cut for {}", s(for_)),
            Kind::GossipAndApiCut { for_ } => write!(f, "gossip and API cut for {}", s(for_)),
            Kind::Unplug { for_ } => write!(f, "link down for {}", s(for_)),
            Kind::ApiSlow { for_, latency } => {
                write!(f, "API writes take {} for {}", s(latency), s(for_))
            }
            Kind::PowerOff => write!(f, "powered off"),
            Kind::KubeletStop { for_ } => write!(f, "kubelet stopped for {}", s(for_)),
            Kind::Delete => write!(f, "Node deleted"),
            Kind::OutOfService => write!(f, "tainted out-of-service"),
            Kind::WatchExpire { list } => {
                write!(
                    f,
                    "lease watch expired (410 Gone), relist takes {}",
                    s(list)
                )
            }
            Kind::Forbidden { for_ } => write!(f, "writes forbidden (403) for {}", s(for_)),
        }
    }
}

/// Which schedule a run gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// One random fault at a time, settle time between.
    Mix,
    /// SIGTERM every speaker but one, then cut the last one's API path
    /// for 20 s: it must keep answering.
    ScaleDown,
    /// SIGSTOP A (for 40 s); 12 s later B restarts beside it.
    HungBesideRestart,
    /// One speaker crash-loops as the kubelet restarts it: it crashes
    /// (SIGKILL) a few seconds after each start, restarted after 10 s,
    /// 20 s, then 40 s (CrashLoopBackOff doubling), and then stays up.
    CrashLoop,
    /// A node's clock steps back (a minute to two hours) and its speaker
    /// restarts; later another speaker is killed, which the restarted one
    /// must help detect.
    ClockStep,
    /// A speaker's gossip is cut while another's lease watch falls
    /// behind (0.3 to 1 s per second): the lagging judge must not take
    /// the cut-off speaker's renewals, stuck in its backlog, for a stop.
    WatchLag,
    /// Nodes power off (one to half of them), go NotReady, are deleted
    /// or tainted out-of-service; then a survivor's API path is cut, another
    /// survivor's kubelet stops while its speaker runs, watches expire
    /// and writes are forbidden ([`crate::lifecycle::schedule`]). Only
    /// on request: the seed's draw keeps its scenarios as they were.
    NodeLifecycle,
}

/// The kubelet's first CrashLoopBackOff delay; each next one doubles.
pub const CRASH_BACKOFF: Duration = Duration::from_secs(10);
/// Crashes of a crash loop.
pub const CRASHES: u32 = 3;

impl Scenario {
    /// The scenario a seed gets when none is asked for: mostly the mix.
    pub fn of_seed(seed: u64) -> Self {
        match crate::seed::mix(seed, 0x5ce0) % 10 {
            0 => Scenario::ScaleDown,
            1 => Scenario::HungBesideRestart,
            2 => Scenario::CrashLoop,
            3 => Scenario::ClockStep,
            4 => Scenario::WatchLag,
            _ => Scenario::Mix,
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scenario::Mix => "mix",
            Scenario::ScaleDown => "scale-down",
            Scenario::HungBesideRestart => "hung-beside-restart",
            Scenario::CrashLoop => "crash-loop",
            Scenario::ClockStep => "clock-step",
            Scenario::WatchLag => "watch-lag",
            Scenario::NodeLifecycle => "node-lifecycle",
        })
    }
}

impl std::str::FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mix" => Ok(Scenario::Mix),
            "scale-down" => Ok(Scenario::ScaleDown),
            "hung-beside-restart" => Ok(Scenario::HungBesideRestart),
            "crash-loop" => Ok(Scenario::CrashLoop),
            "clock-step" => Ok(Scenario::ClockStep),
            "watch-lag" => Ok(Scenario::WatchLag),
            "node-lifecycle" => Ok(Scenario::NodeLifecycle),
            other => Err(format!(
                "unknown scenario {other:?}: mix, scale-down, hung-beside-restart, crash-loop, clock-step, watch-lag or node-lifecycle"
            )),
        }
    }
}

fn secs(rng: &mut StdRng, lo: f64, hi: f64) -> Duration {
    Duration::from_secs_f64((rng.random_range(lo..hi) * 10.0).round() / 10.0)
}

/// The schedule of `scenario` for `n` nodes with `faults` faults (mix),
/// and when the run ends.
pub fn schedule(
    scenario: Scenario,
    n: usize,
    faults: usize,
    rng: &mut StdRng,
) -> (Vec<Fault>, Duration) {
    match scenario {
        Scenario::Mix => mix(n, faults, rng),
        Scenario::ScaleDown => scale_down(n, rng),
        Scenario::HungBesideRestart => hung_beside_restart(n, rng),
        Scenario::CrashLoop => crash_loop(n, rng),
        Scenario::ClockStep => clock_step(n, rng),
        Scenario::WatchLag => watch_lag(n, rng),
        Scenario::NodeLifecycle => lifecycle::schedule(n, rng),
    }
}

/// [`Scenario::Mix`]: `faults` faults, each on a random node (an API
/// slowdown on all of them), one at a time with settle time between.
fn mix(n: usize, faults: usize, rng: &mut StdRng) -> (Vec<Fault>, Duration) {
    let mut out = Vec::new();
    let mut t = WARMUP;
    for _ in 0..faults {
        let node = rng.random_range(0..n);
        let kind = match rng.random_range(0..9) {
            0 => Kind::Kill {
                restart_after: Some(secs(rng, 1.0, 10.0)),
            },
            1 => Kind::Term {
                restart_after: Some(secs(rng, 1.0, 10.0)),
            },
            2 => Kind::Stop {
                for_: secs(rng, 2.0, 20.0),
            },
            3 => Kind::GossipCut {
                for_: secs(rng, 2.0, 20.0),
                one_way: false,
            },
            4 => Kind::GossipCut {
                for_: secs(rng, 2.0, 20.0),
                one_way: true,
            },
            5 => Kind::ApiCut {
                for_: secs(rng, 2.0, 20.0),
            },
            6 => Kind::GossipAndApiCut {
                for_: secs(rng, 2.0, 20.0),
            },
            7 => Kind::Unplug {
                for_: secs(rng, 2.0, 20.0),
            },
            _ => Kind::ApiSlow {
                for_: secs(rng, 5.0, 20.0),
                latency: secs(rng, 1.5, 3.0),
            },
        };
        let cluster_wide = matches!(kind, Kind::ApiSlow { .. });
        out.push(Fault {
            at: t,
            node: (!cluster_wide).then_some(node),
            kind,
        });
        t += kind.duration().unwrap_or_default() + SETTLE + secs(rng, 0.0, 10.0);
    }
    (out, t)
}

/// [`Scenario::ScaleDown`]: every speaker but one SIGTERMed for good,
/// then the last one cut from the API server.
fn scale_down(n: usize, rng: &mut StdRng) -> (Vec<Fault>, Duration) {
    let mut out = Vec::new();
    let mut t = WARMUP;
    let last = rng.random_range(0..n);
    for node in (0..n).filter(|i| *i != last) {
        out.push(Fault {
            at: t,
            node: Some(node),
            kind: Kind::Term {
                restart_after: None,
            },
        });
        t += secs(rng, 0.5, 3.0);
    }
    t += Duration::from_secs(10);
    let for_ = Duration::from_secs(20);
    out.push(Fault {
        at: t,
        node: Some(last),
        kind: Kind::ApiCut { for_ },
    });
    t += for_ + SETTLE;
    (out, t)
}

/// [`Scenario::HungBesideRestart`]: one speaker hung (SIGSTOP) for 40 s,
/// another restarted meanwhile.
fn hung_beside_restart(n: usize, rng: &mut StdRng) -> (Vec<Fault>, Duration) {
    let mut out = Vec::new();
    let mut t = WARMUP;
    let a = rng.random_range(0..n);
    let b = (a + rng.random_range(1..n.max(2))) % n;
    let for_ = Duration::from_secs(40);
    out.push(Fault {
        at: t,
        node: Some(a),
        kind: Kind::Stop { for_ },
    });
    let restart_after = Some(secs(rng, 0.5, 2.0));
    let kind = if rng.random_bool(0.5) {
        Kind::Kill { restart_after }
    } else {
        Kind::Term { restart_after }
    };
    out.push(Fault {
        at: t + Duration::from_secs(12),
        node: Some(b),
        kind,
    });
    t += for_ + SETTLE;
    (out, t)
}

/// [`Scenario::CrashLoop`]: one speaker killed again and again, started
/// after the kubelet's growing backoff.
fn crash_loop(n: usize, rng: &mut StdRng) -> (Vec<Fault>, Duration) {
    let mut out = Vec::new();
    let mut t = WARMUP;
    let node = Some(rng.random_range(0..n));
    for k in 0..CRASHES {
        let restart_after = CRASH_BACKOFF * 2u32.pow(k);
        out.push(Fault {
            at: t,
            node,
            kind: Kind::Kill {
                restart_after: Some(restart_after),
            },
        });
        // Up for a moment: before or after it joined and renewed.
        t += restart_after + secs(rng, 0.5, 5.0);
    }
    t += SETTLE;
    (out, t)
}

/// [`Scenario::ClockStep`]: one node's wall clock stepped back across a
/// restart, then another speaker killed.
fn clock_step(n: usize, rng: &mut StdRng) -> (Vec<Fault>, Duration) {
    let mut out = Vec::new();
    let mut t = WARMUP;
    let node = rng.random_range(0..n);
    let kind = Kind::ClockBack {
        by: secs(rng, 60.0, 7200.0),
        restart_after: secs(rng, 1.0, 10.0),
    };
    out.push(Fault {
        at: t,
        node: Some(node),
        kind,
    });
    t += kind.duration().unwrap_or_default() + SETTLE;
    let other = (node + rng.random_range(1..n.max(2))) % n;
    let kind = Kind::Kill {
        restart_after: Some(secs(rng, 1.0, 10.0)),
    };
    out.push(Fault {
        at: t,
        node: Some(other),
        kind,
    });
    t += kind.duration().unwrap_or_default() + SETTLE;
    (out, t)
}

/// [`Scenario::WatchLag`]: one speaker's lease watch falls behind while
/// another is cut from gossip.
fn watch_lag(n: usize, rng: &mut StdRng) -> (Vec<Fault>, Duration) {
    let mut out = Vec::new();
    let mut t = WARMUP;
    let cut = rng.random_range(0..n);
    let judge = (cut + rng.random_range(1..n.max(2))) % n;
    let for_ = secs(rng, 5.0, 20.0);
    let gain = Duration::from_millis(rng.random_range(300..=1000));
    out.push(Fault {
        at: t,
        node: Some(judge),
        kind: Kind::WatchLag { for_, gain },
    });
    out.push(Fault {
        at: t + secs(rng, 0.0, 3.0),
        node: Some(cut),
        kind: Kind::GossipCut {
            for_,
            one_way: false,
        },
    });
    t += for_ + Duration::from_secs(3) + SETTLE;
    (out, t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn schedules_are_seeded_and_one_fault_at_a_time() {
        let draw = |seed| schedule(Scenario::Mix, 3, 4, &mut StdRng::seed_from_u64(seed));
        assert_eq!(draw(3), draw(3));
        let (faults, end) = draw(3);
        assert_eq!(faults.len(), 4);
        for w in faults.windows(2) {
            let ends = w[0].at + w[0].kind.duration().unwrap_or_default();
            assert!(w[1].at >= ends + SETTLE, "{} then {}", w[0], w[1]);
        }
        assert!(end > faults[3].at);
        let (scale, _) = schedule(Scenario::ScaleDown, 3, 0, &mut StdRng::seed_from_u64(1));
        assert_eq!(scale.len(), 3, "two SIGTERMs and the API cut");
        let (crashes, end) = schedule(Scenario::CrashLoop, 3, 0, &mut StdRng::seed_from_u64(1));
        assert_eq!(crashes.len(), CRASHES as usize);
        let backoffs: Vec<Option<Duration>> = crashes
            .iter()
            .map(|f| match f.kind {
                Kind::Kill { restart_after } => restart_after,
                _ => None,
            })
            .collect();
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(backoffs, [secs(10), secs(20), secs(40)]);
        assert!(crashes.iter().all(|f| f.node == crashes[0].node));
        for w in crashes.windows(2) {
            assert!(w[1].at > w[0].at + w[0].kind.duration().unwrap_or_default());
        }
        assert!(end >= crashes[2].at + Duration::from_secs(40) + SETTLE);
    }
}
