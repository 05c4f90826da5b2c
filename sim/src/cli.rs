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

/// Flags (`cargo xtask sim` passes its own through).
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "metallb-sim", version)]
pub struct Args {
    /// Seeds to run (0..N), spread over the sizes
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
    /// Force a scenario (mix, scale-down, hung-beside-restart) instead of the seed's
    #[arg(long)]
    pub scenario: Option<Scenario>,
    /// A deliberately broken rule (no-isolation, down-is-failed, no-backoff), to see it caught
    #[arg(long, default_value = "faithful")]
    pub variant: Variant,
    /// Print every answer change and fault of failing runs (of every run with --seed)
    #[arg(long)]
    pub trace: bool,
}

/// The latency class of `seed` among `classes`.
pub fn latency_of(seed: u64, classes: &[Latency]) -> Latency {
    let i = (world::mix(seed, 0x1a7) % classes.len().max(1) as u64) as usize;
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
        None => (0..args.seeds)
            .map(|k| (args.nodes[(k % args.nodes.len() as u64) as usize], k))
            .collect(),
    };
    let mut groups: BTreeMap<(usize, Latency), Group> = BTreeMap::new();
    let mut failures = 0;
    for (nodes, seed) in runs {
        let mut cfg = Config::new(nodes, seed);
        cfg.latency = latency_of(seed, &args.latency);
        cfg.faults = args.faults;
        cfg.variant = args.variant;
        if let Some(s) = args.scenario {
            cfg.scenario = s;
        }
        cfg.trace = args.trace;
        let started = Instant::now();
        let outcome = World::new(cfg.clone())?.run()?;
        let wall = started.elapsed();
        let group = groups.entry((nodes, cfg.latency)).or_default();
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
            continue;
        };
        failures += 1;
        println!(
            "VIOLATION seed {seed}, {nodes} nodes, latency {}, scenario {}{}",
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
            "cargo xtask sim --nodes {nodes} --latency {} --seed {seed}",
            cfg.latency
        );
        if args.faults != 3 {
            rerun += &format!(" --faults {}", args.faults);
        }
        if let Some(s) = args.scenario {
            rerun += &format!(" --scenario {s}");
        }
        println!("re-run: {rerun} --trace\n");
    }
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
