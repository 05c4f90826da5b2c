//! The `--report` table: per node count and latency class, failover time
//! and dual-answer window (p50/p99/max over every seed's events), renewal
//! writes per node per second in settled stretches and otherwise, and
//! what the runs cost.

use crate::api::Latency;
use crate::invariants::Stats;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// What one group of runs gathered.
#[derive(Debug, Clone, Default)]
pub struct Group {
    /// Runs.
    pub runs: usize,
    /// Runs that broke an invariant.
    pub failed: usize,
    /// Every failover.
    pub failovers: Vec<Duration>,
    /// Every dual answer.
    pub duals: Vec<Duration>,
    /// Settled writes and node-seconds.
    pub steady: (u64, f64),
    /// Other writes and node-seconds.
    pub trouble: (u64, f64),
    /// Virtual time simulated.
    pub simulated: Duration,
    /// Wall time it took.
    pub wall: Duration,
}

impl Group {
    /// Adds one run.
    pub fn add(&mut self, stats: &Stats, failed: bool, simulated: Duration, wall: Duration) {
        self.runs += 1;
        self.failed += usize::from(failed);
        self.failovers.extend(&stats.failovers);
        self.duals.extend(&stats.duals);
        self.steady.0 += stats.steady.0;
        self.steady.1 += stats.steady.1;
        self.trouble.0 += stats.trouble.0;
        self.trouble.1 += stats.trouble.1;
        self.simulated += simulated;
        self.wall += wall;
    }
}

/// The `q` quantile (0..=1) of `v`, by nearest rank.
pub fn quantile(v: &[Duration], q: f64) -> Option<Duration> {
    let mut v = v.to_vec();
    v.sort();
    let last = v.len().checked_sub(1)?;
    let rank = ((q * v.len() as f64).ceil() as usize)
        .saturating_sub(1)
        .min(last);
    Some(v[rank])
}

fn spread(v: &[Duration]) -> String {
    let s = |q| quantile(v, q).map_or("-".into(), |d| format!("{:.2}", d.as_secs_f64()));
    format!("{}/{}/{} ({})", s(0.5), s(0.99), s(1.0), v.len())
}

fn rate((writes, secs): (u64, f64)) -> String {
    if secs > 0.0 {
        format!("{:.3}", writes as f64 / secs)
    } else {
        "-".into()
    }
}

/// The table of `groups`, keyed by (nodes, latency).
pub fn table(groups: &BTreeMap<(usize, Latency), Group>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>5} {:>7} {:>5} {:>6}  {:<26} {:<26} {:>8} {:>8} {:>9} {:>8}",
        "nodes",
        "latency",
        "runs",
        "failed",
        "failover s p50/p99/max (n)",
        "dual s p50/p99/max (n)",
        "w/node/s",
        "trouble",
        "simulated",
        "wall"
    );
    for ((nodes, latency), g) in groups {
        let _ = writeln!(
            out,
            "{nodes:>5} {:>7} {:>5} {:>6}  {:<26} {:<26} {:>8} {:>8} {:>8.0}s {:>7.2}s",
            latency.to_string(),
            g.runs,
            g.failed,
            spread(&g.failovers),
            spread(&g.duals),
            rate(g.steady),
            rate(g.trouble),
            g.simulated.as_secs_f64(),
            g.wall.as_secs_f64(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&v, 0.5), Some(Duration::from_millis(50)));
        assert_eq!(quantile(&v, 0.99), Some(Duration::from_millis(99)));
        assert_eq!(quantile(&v, 1.0), Some(Duration::from_millis(100)));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
