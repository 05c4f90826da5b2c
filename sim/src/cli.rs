//! The command line (`metallb-sim`, run by `cargo xtask sim`): which
//! seeds on which sizes, the per-failure printout with the line that
//! reruns it, the timings per size and the `--report` table.

use crate::api::Latency;
use crate::faults::Scenario;
use crate::node::Variant;
use crate::report::{self, Group};
use crate::world::{self, Config, World};
use std::collections::BTreeMap;
use std::time::Instant;

/// Flags (`cargo xtask sim` passes them on as given).
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "metallb-sim", version)]
pub struct Args {
    /// Seeds to run (0..N), spread over the sizes in inverse proportion to size (at least 1% each)
    #[arg(long, default_value_t = 20)]
    pub seeds: u64,
    /// Cluster sizes, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "3,10")]
    pub nodes: Vec<usize>,
    /// API write latency classes, comma-separated; each seed gets one
    #[arg(long, value_delimiter = ',', default_value = "0,100ms,1s")]
    pub latency: Vec<Latency>,
    /// Run only this seed (on every size given)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print failover, dual-answer and write figures per size and latency
    #[arg(long)]
    pub report: bool,
    /// Faults per run in the mix
    #[arg(long, default_value_t = 3)]
    pub faults: usize,
    /// Force a scenario (mix, scale-down, hung-beside-restart, crash-loop, clock-step, watch-lag, node-lifecycle) instead of the seed's
    #[arg(long)]
    pub scenario: Option<Scenario>,
    /// A deliberately broken rule (no-isolation, down-is-failed, no-backoff, clock-run, not-ready-is-gone, ignore-taint, lease-counts-without-gossip, every-lease-votes), to see it caught
    #[arg(long, default_value = "faithful")]
    pub variant: Variant,
    /// Print every answer change and fault of failing runs (of every run with --seed)
    #[arg(long)]
    pub trace: bool,
    /// Runs at once (default: one per core); every run is alone on its
    /// seed, so the output is the same whatever the number
    #[arg(long)]
    pub jobs: Option<usize>,
}

/// The size each of `seeds` seeds (0, 1, ...) runs at: a share of the
/// seeds per size in inverse proportion to it (a run costs about the
/// square of its size), at least [`SMALLEST_SHARE`] of them and one, the
/// sizes interleaved so that any prefix of the seeds has about its
/// share of each.
pub fn spread(seeds: u64, sizes: &[usize]) -> Vec<usize> {
    let inverse: Vec<f64> = sizes.iter().map(|n| 1.0 / (*n).max(1) as f64).collect();
    let total: f64 = inverse.iter().sum();
    let shares: Vec<f64> = inverse
        .iter()
        .map(|w| (w / total).max(SMALLEST_SHARE))
        .collect();
    let sum: f64 = shares.iter().sum();
    let mut credit = vec![0.0; sizes.len()];
    let mut out = Vec::with_capacity(usize::try_from(seeds).unwrap_or(0));
    for _ in 0..seeds {
        for (c, share) in credit.iter_mut().zip(&shares) {
            *c += share / sum;
        }
        let Some((i, _)) = credit
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))
        else {
            break;
        };
        credit[i] -= 1.0;
        out.push(sizes[i]);
    }
    out
}

/// The smallest share of the seeds a size gets ([`spread`]).
pub const SMALLEST_SHARE: f64 = 0.01;

/// The latency class of `seed` among `classes`.
pub fn latency_of(seed: u64, classes: &[Latency]) -> Latency {
    let i = (crate::seed::mix(seed, 0x1a7) % classes.len().max(1) as u64) as usize;
    classes.get(i).copied().unwrap_or(Latency::Fast)
}

/// Runs what `args` asks; false when an invariant broke.
pub fn run(args: &Args) -> anyhow::Result<bool> {
    anyhow::ensure!(!args.nodes.is_empty(), "--nodes needs at least one size");
    anyhow::ensure!(
        !args.latency.is_empty(),
        "--latency needs at least one class"
    );
    let runs: Vec<(usize, u64)> = match args.seed {
        Some(seed) => args.nodes.iter().map(|n| (*n, seed)).collect(),
        None => spread(args.seeds, &args.nodes)
            .into_iter()
            .zip(0..)
            .collect(),
    };
    let configs: Vec<Config> = runs
        .iter()
        .map(|&(nodes, seed)| {
            let mut cfg = Config::new(nodes, seed);
            cfg.latency = latency_of(seed, &args.latency);
            cfg.faults = args.faults;
            cfg.variant = args.variant;
            if let Some(s) = args.scenario {
                cfg.scenario = s;
            }
            cfg.trace = args.trace;
            cfg
        })
        .collect();
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .clamp(1, configs.len().max(1));
    let mut groups: BTreeMap<(usize, Latency), Group> = BTreeMap::new();
    let mut failures = 0;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (done, results) = std::sync::mpsc::channel();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        for _ in 0..jobs {
            let done = done.clone();
            let (next, configs) = (&next, &configs);
            scope.spawn(move || {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(cfg) = configs.get(k) else { break };
                    let started = Instant::now();
                    let outcome = World::new(cfg.clone()).and_then(World::run);
                    if done.send((k, outcome, started.elapsed())).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done);
        // Printed in seed order as they complete, whatever ran first.
        let mut ready = BTreeMap::new();
        let mut printed = 0;
        for (k, outcome, wall) in results {
            ready.insert(k, (outcome, wall));
            while let Some((outcome, wall)) = ready.remove(&printed) {
                let cfg = &configs[printed];
                printed += 1;
                failures += usize::from(show(args, cfg, outcome?, wall, &mut groups));
            }
        }
        Ok(())
    })?;
    let mut by_size: BTreeMap<usize, Group> = BTreeMap::new();
    for ((nodes, _), g) in &groups {
        let s = by_size.entry(*nodes).or_default();
        s.runs += g.runs;
        s.failed += g.failed;
        s.simulated += g.simulated;
        s.wall += g.wall;
    }
    for (nodes, g) in &by_size {
        println!(
            "{nodes} nodes: {} runs, {} failed; {:.0} s simulated in {:.2} s ({:.0}x)",
            g.runs,
            g.failed,
            g.simulated.as_secs_f64(),
            g.wall.as_secs_f64(),
            g.simulated.as_secs_f64() / g.wall.as_secs_f64().max(1e-9)
        );
    }
    if args.report {
        print!("{}", report::table(&groups));
    }
    Ok(failures == 0)
}

/// Adds one run to its group and prints what it must (its trace, its
/// violation with the schedule and the line that reruns it); true when
/// an invariant broke.
fn show(
    args: &Args,
    cfg: &Config,
    outcome: world::Outcome,
    wall: std::time::Duration,
    groups: &mut BTreeMap<(usize, Latency), Group>,
) -> bool {
    let group = groups.entry((cfg.nodes, cfg.latency)).or_default();
    group.add(
        &outcome.stats,
        outcome.violation.is_some(),
        outcome.ran,
        wall,
    );
    if args.trace && (args.seed.is_some() || outcome.violation.is_some()) {
        for line in &outcome.trace {
            println!("  {line}");
        }
    }
    let Some(v) = &outcome.violation else {
        return false;
    };
    println!(
        "VIOLATION seed {}, {} nodes, latency {}, scenario {}{}",
        cfg.seed,
        cfg.nodes,
        cfg.latency,
        cfg.scenario,
        if cfg.variant == Variant::Faithful {
            String::new()
        } else {
            format!(", variant {:?}", cfg.variant)
        }
    );
    println!("fault schedule:");
    for f in &outcome.schedule {
        println!("  {f}");
    }
    println!("{v}");
    let mut rerun = format!(
        "cargo xtask sim --nodes {} --latency {} --seed {}",
        cfg.nodes, cfg.latency, cfg.seed
    );
    if args.faults != 3 {
        rerun += &format!(" --faults {}", args.faults);
    }
    if let Some(s) = args.scenario {
        rerun += &format!(" --scenario {s}");
    }
    println!("re-run: {rerun} --trace\n");
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(spread: &[usize], size: usize) -> usize {
        spread.iter().filter(|n| **n == size).count()
    }

    #[test]
    fn seeds_spread_by_cost_with_a_floor() {
        let s = spread(2000, &[3, 10, 100, 1000]);
        assert_eq!(s.len(), 2000);
        assert_eq!(count(&s, 1000), 20, "the floor: 1% of the seeds");
        assert!((40..=50).contains(&count(&s, 100)), "{}", count(&s, 100));
        assert!(count(&s, 3) > 3 * count(&s, 10));
        // Any prefix has its share: the first 100 seeds reach 100 nodes.
        assert!(s[..100].contains(&100) && s[..100].contains(&1000));
        // One size takes every seed; two equal sizes alternate.
        assert_eq!(spread(5, &[10]), vec![10; 5]);
        assert_eq!(spread(4, &[3, 3]), vec![3, 3, 3, 3]);
        assert_eq!(count(&spread(4, &[3, 10]), 10), 1);
        assert!(spread(0, &[3]).is_empty());
    }
}
