//! The simulated API server, as far as presence leases go: one lease per
//! node (`metallb-speaker-<node>`) whose every committed write gets the
//! next resourceVersion; writes that take a latency drawn from the run's
//! class, fail with 429/5xx at some probability, are refused at once
//! (403) while RBAC denies a node, time out, and never get through for a
//! node whose API path is cut; and a watch per node that shows each
//! commit after that node's watch delay, stalls while its API path is
//! cut (a relist when it comes back shows the latest of each), and when
//! the server closes it with 410 Gone shows nothing for a list's latency,
//! then the latest of each lease only.

use crate::clock::NodeId;
use metallb_rs::speaker::presence::{Mark, Mode};
use rand::RngExt;
use rand::rngs::StdRng;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

/// How long API writes take (the scenario's latency class).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Latency {
    /// 1-5 ms.
    Fast,
    /// 50-150 ms.
    Ms100,
    /// 0.5-1.5 s.
    S1,
}

impl Latency {
    /// Every class, in order.
    pub const ALL: [Latency; 3] = [Latency::Fast, Latency::Ms100, Latency::S1];

    /// The longest write of this class.
    pub fn max(self) -> Duration {
        Duration::from_millis(match self {
            Latency::Fast => 5,
            Latency::Ms100 => 150,
            Latency::S1 => 1500,
        })
    }

    /// A write's latency in this class.
    pub fn draw(self, rng: &mut StdRng) -> Duration {
        let ms = match self {
            Latency::Fast => rng.random_range(1.0..5.0),
            Latency::Ms100 => rng.random_range(50.0..150.0),
            Latency::S1 => rng.random_range(500.0..1500.0),
        };
        Duration::from_secs_f64(ms / 1000.0)
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Latency::Fast => "0",
            Latency::Ms100 => "100ms",
            Latency::S1 => "1s",
        })
    }
}

impl std::str::FromStr for Latency {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "0" | "0ms" => Ok(Latency::Fast),
            "100ms" => Ok(Latency::Ms100),
            "1s" => Ok(Latency::S1),
            other => Err(format!(
                "unknown latency class {other:?}: use 0, 100ms or 1s"
            )),
        }
    }
}

/// What a write sets on the lease (a merge patch of the whole spec and
/// the trouble mark, as `presence::join`/`leave` write it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseValue {
    /// A holder is set (cleared on graceful leave).
    pub held: bool,
    /// The renewal mode written: its period and whether it marks trouble.
    pub mode: Mode,
    /// Whom the trouble mark names (in [`Mode::Trouble`]).
    pub mark: Option<Mark>,
    /// The gossip run a renewal records (a leave leaves it as it was).
    pub run: Option<u64>,
}

/// One committed write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// When the API server committed it.
    pub at: Instant,
    /// Whose lease.
    pub node: NodeId,
    /// The lease after it.
    pub value: LeaseValue,
    /// Its resourceVersion.
    pub version: u64,
}

/// What became of a write when it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fate {
    /// After how long the API server commits it (it may commit after the
    /// caller timed out), if ever.
    pub commit_in: Option<Duration>,
    /// After how long the caller learns the outcome.
    pub done_in: Duration,
    /// The outcome the caller sees.
    pub ok: bool,
}

/// The API server.
pub struct Api {
    /// The run's latency class.
    pub class: Latency,
    /// Probability a write is answered 429/5xx.
    pub error_rate: f64,
    /// While set, every write takes this long (a latency spike).
    pub spike: Option<Duration>,
    cut: Vec<u32>,
    watch_delay: Vec<Duration>,
    /// A watch falling behind: since when, and how much delay it gains
    /// per second.
    lag: Vec<Option<(Instant, Duration)>>,
    /// A watch closed with 410 Gone: its relist answers at this time.
    relist: Vec<Option<Instant>>,
    /// RBAC denies the node's writes (403); denials nest.
    forbidden: Vec<u32>,
    log: Vec<Commit>,
    version: u64,
}

impl Api {
    /// An API server for `n` nodes, each watch delay drawn from `rng`.
    pub fn new(n: usize, class: Latency, error_rate: f64, rng: &mut StdRng) -> Self {
        Self {
            class,
            error_rate,
            spike: None,
            cut: vec![0; n],
            watch_delay: (0..n)
                .map(|_| Duration::from_millis(rng.random_range(5..=50)))
                .collect(),
            lag: vec![None; n],
            relist: vec![None; n],
            forbidden: vec![0; n],
            log: Vec::new(),
            version: 0,
        }
    }

    /// Cuts (or restores) `node`'s path to the API server. Cuts nest.
    pub fn cut(&mut self, node: NodeId, on: bool) {
        if on {
            self.cut[node] += 1;
        } else {
            self.cut[node] = self.cut[node].saturating_sub(1);
        }
    }

    /// `node`'s watch falls behind from `since`, gaining `gain` of delay
    /// per second (an API server whose watch cache lags under load), or
    /// (None) catches up at once, as a relist does.
    pub fn lag(&mut self, node: NodeId, lag: Option<(Instant, Duration)>) {
        self.lag[node] = lag;
    }

    /// The API server closes `node`'s lease watch with 410 Gone (its
    /// resourceVersion was compacted away): the watcher relists, which
    /// answers after `list`. Meanwhile it sees no lease change; then the
    /// latest of each lease at once, the commits between collapsed.
    pub fn expire(&mut self, node: NodeId, now: Instant, list: Duration) {
        let until = now + list;
        self.relist[node] = Some(self.relist[node].map_or(until, |u| u.max(until)));
    }

    /// RBAC starts (or stops) denying `node`'s writes: each is answered
    /// 403 at once, as fast as a write of the run's class, and commits
    /// nothing. Denials nest.
    pub fn forbid(&mut self, node: NodeId, on: bool) {
        if on {
            self.forbidden[node] += 1;
        } else {
            self.forbidden[node] = self.forbidden[node].saturating_sub(1);
        }
    }

    /// How long after a commit `node`'s watch shows it, for a commit now.
    pub fn watch_delay(&self, node: NodeId, now: Instant) -> Duration {
        let lagged = self.lag[node].map_or(Duration::ZERO, |(since, gain)| {
            gain.mul_f64(now.saturating_duration_since(since).as_secs_f64())
        });
        self.watch_delay[node] + lagged
    }

    /// Whether `node`'s path to the API server is cut.
    pub fn is_cut(&self, node: NodeId) -> bool {
        self.cut[node] > 0
    }

    /// Whether `node`'s lease is held, as the last committed write left
    /// it (not held before any).
    pub fn held(&self, node: NodeId) -> bool {
        self.log
            .iter()
            .rev()
            .find(|c| c.node == node)
            .is_some_and(|c| c.value.held)
    }

    /// The gossip run `node`'s lease records (`presence::last_run`).
    pub fn last_run(&self, node: NodeId) -> Option<u64> {
        self.log
            .iter()
            .rev()
            .filter(|c| c.node == node)
            .find_map(|c| c.value.run)
    }

    /// The fate of a write `node` sends now, which it waits `timeout` for.
    pub fn send(&self, node: NodeId, timeout: Duration, rng: &mut StdRng) -> Fate {
        // Every draw is made whatever the outcome (see `net::fate`).
        let failed = rng.random_bool(self.error_rate);
        let latency = self.spike.unwrap_or_else(|| self.class.draw(rng));
        if self.cut[node] > 0 {
            return Fate {
                commit_in: None,
                done_in: timeout,
                ok: false,
            };
        }
        // A 403 comes back as fast as any answer: the request was
        // authorized and refused, nothing was written.
        if failed || self.forbidden[node] > 0 {
            return Fate {
                commit_in: None,
                done_in: latency.min(timeout),
                ok: false,
            };
        }
        // The request reaches the server halfway through the round trip,
        // whether or not the caller still waits for the answer.
        Fate {
            commit_in: Some(latency / 2),
            done_in: latency.min(timeout),
            ok: latency <= timeout,
        }
    }

    /// Commits `value` to `node`'s lease now.
    pub fn commit(&mut self, node: NodeId, value: LeaseValue, now: Instant) -> Commit {
        self.version += 1;
        let c = Commit {
            at: now,
            node,
            value,
            version: self.version,
        };
        self.log.push(c.clone());
        c
    }

    /// The commits `node`'s watch shows by `now`, from `cursor` on
    /// (advanced past them): none while its API path is cut or its relist
    /// is under way; when the relist answers, the latest commit of each
    /// lease up to now, in commit order.
    pub fn watch(&mut self, node: NodeId, cursor: &mut usize, now: Instant) -> Cow<'_, [Commit]> {
        if self.cut[node] > 0 {
            return Cow::Borrowed(&[]);
        }
        let from = (*cursor).min(self.log.len());
        if let Some(until) = self.relist[node] {
            if now < until {
                return Cow::Borrowed(&[]);
            }
            self.relist[node] = None;
            let listed = &self.log[from..];
            let n = listed.iter().take_while(|c| c.at <= now).count();
            *cursor = from + n;
            let mut latest: BTreeMap<NodeId, &Commit> = BTreeMap::new();
            for c in &listed[..n] {
                latest.insert(c.node, c);
            }
            let mut out: Vec<Commit> = latest.into_values().cloned().collect();
            out.sort_by_key(|c| c.version);
            return Cow::Owned(out);
        }
        let delay = self.watch_delay(node, now);
        let n = self.log[from..]
            .iter()
            .take_while(|c| c.at + delay <= now)
            .count();
        *cursor = from + n;
        Cow::Borrowed(&self.log[from..from + n])
    }

    /// Every committed write so far.
    pub fn log(&self) -> &[Commit] {
        &self.log
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn cut_writes_time_out_and_watches_stall() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut api = Api::new(2, Latency::Fast, 0.0, &mut rng);
        let t0 = Instant::now();
        let timeout = Duration::from_secs(2);
        let f = api.send(0, timeout, &mut rng);
        assert!(f.ok && f.commit_in.is_some() && f.done_in < Duration::from_millis(5));
        let v = LeaseValue {
            held: true,
            mode: Mode::Slow,
            mark: None,
            run: Some(9),
        };
        api.commit(0, v.clone(), t0);
        api.cut(1, true);
        let f = api.send(1, timeout, &mut rng);
        assert_eq!((f.ok, f.commit_in, f.done_in), (false, None, timeout));
        let mut cursor = 0;
        let later = t0 + Duration::from_secs(1);
        assert!(api.watch(1, &mut cursor, later).is_empty(), "stalled");
        api.cut(1, false);
        assert_eq!(api.watch(1, &mut cursor, later).len(), 1);
        assert!(api.watch(1, &mut cursor, later).is_empty(), "seen once");
        api.spike = Some(Duration::from_secs(3));
        let f = api.send(0, timeout, &mut rng);
        assert!(!f.ok, "timed out");
        assert_eq!(
            f.commit_in,
            Some(Duration::from_millis(1500)),
            "yet commits"
        );
        let cleared = LeaseValue {
            held: false,
            run: None,
            ..v.clone()
        };
        api.commit(0, cleared, t0);
        assert_eq!(api.last_run(0), Some(9), "a leave keeps the run");
        assert_eq!(api.last_run(1), None);
    }

    fn lease(run: u64) -> LeaseValue {
        LeaseValue {
            held: true,
            mode: Mode::Slow,
            mark: None,
            run: Some(run),
        }
    }

    #[test]
    fn an_expired_watch_sees_nothing_while_it_relists_then_the_latest_of_each() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut api = Api::new(3, Latency::Fast, 0.0, &mut rng);
        let t0 = Instant::now();
        let s = Duration::from_secs;
        api.commit(0, lease(1), t0);
        let mut cursor = 0;
        assert_eq!(api.watch(2, &mut cursor, t0 + s(1)).len(), 1);
        api.expire(2, t0 + s(1), s(3));
        // Three renewals of node 0 and one of node 1 while it relists.
        api.commit(0, lease(2), t0 + s(2));
        api.commit(1, lease(9), t0 + s(2));
        api.commit(0, lease(3), t0 + s(3));
        api.commit(0, lease(4), t0 + s(4));
        assert!(api.watch(2, &mut cursor, t0 + s(3)).is_empty(), "listing");
        let other = &mut 1;
        assert_eq!(api.watch(1, other, t0 + s(3)).len(), 2, "others watch on");
        let listed: Vec<(NodeId, Option<u64>)> = api
            .watch(2, &mut cursor, t0 + s(4))
            .iter()
            .map(|c| (c.node, c.value.run))
            .collect();
        assert_eq!(
            listed,
            [(1, Some(9)), (0, Some(4))],
            "latest of each, in commit order"
        );
        assert!(
            api.watch(2, &mut cursor, t0 + s(5)).is_empty(),
            "listed once"
        );
        api.commit(1, lease(10), t0 + s(5));
        assert_eq!(
            api.watch(2, &mut cursor, t0 + s(6)).len(),
            1,
            "watching again"
        );
    }

    #[test]
    fn forbidden_writes_fail_fast_and_commit_nothing() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut api = Api::new(2, Latency::Ms100, 0.0, &mut rng);
        let timeout = Duration::from_secs(2);
        api.forbid(0, true);
        api.forbid(0, true);
        let f = api.send(0, timeout, &mut rng);
        assert!(!f.ok && f.commit_in.is_none(), "{f:?}");
        assert!(
            f.done_in <= Latency::Ms100.max(),
            "answered, not timed out: {f:?}"
        );
        assert!(
            api.send(1, timeout, &mut rng).ok,
            "another node still writes"
        );
        api.forbid(0, false);
        assert!(!api.send(0, timeout, &mut rng).ok, "denials nest");
        api.forbid(0, false);
        assert!(api.send(0, timeout, &mut rng).ok);
    }
}
