//! `cargo xtask sim`: the layer 2 failover simulator (crate
//! `metallb-sim`), built in release and run with the flags given. The
//! simulator lives in its own crate; this only passes the flags on.

use crate::flags::SimArgs;
use crate::tools;
use anyhow::Result;

/// Builds and runs `metallb-sim` with `args`.
pub fn run(args: &SimArgs) -> Result<()> {
    let seeds = args.seeds.to_string();
    let faults = args.faults.to_string();
    let seed = args.seed.map(|s| s.to_string());
    let mut argv: Vec<&str> = vec!["run", "--quiet", "-p", "metallb-sim"];
    if !args.debug {
        argv.push("--release");
    }
    argv.extend([
        "--",
        "--seeds",
        &seeds,
        "--nodes",
        &args.nodes,
        "--latency",
        &args.latency,
        "--faults",
        &faults,
    ]);
    if let Some(seed) = &seed {
        argv.extend(["--seed", seed]);
    }
    if let Some(scenario) = &args.scenario {
        argv.extend(["--scenario", scenario]);
    }
    if let Some(variant) = &args.variant {
        argv.extend(["--variant", variant]);
    }
    if args.report {
        argv.push("--report");
    }
    if args.trace {
        argv.push("--trace");
    }
    tools::cargo(&argv)
}
