//! `cargo xtask bench <target>`: benchmarks that print their figures next
//! to a baseline measured in the same run (never asserted: numbers vary by
//! machine; tests check behaviour).
//!
//! The lab benchmarks run on a lab of their own ("bench", removed
//! afterwards) made from release binaries, so figures are those of what
//! users run.

use crate::flags::{BenchArgs, BenchTarget};
use crate::tools;
use anyhow::Result;
use devenv::lab::cluster::{LabCluster, LabSpec};

/// Runs the chosen benchmark.
pub fn run(args: &BenchArgs) -> Result<()> {
    match args.target {
        // The benchmark lives beside the allocator (metallb-rs/benches) and
        // runs with the optimised bench profile.
        BenchTarget::Allocator => tools::run(
            "cargo",
            &[
                "bench",
                "--quiet",
                "-p",
                "metallb-rs",
                "--bench",
                "allocator",
            ],
        ),
        BenchTarget::Arp => {
            on_bench_lab(|lab| devenv::bench::arp::run(lab, args.rounds, args.burst).map(drop))
        }
        BenchTarget::Scale => {
            on_bench_lab(|lab| devenv::bench::scale::run(lab, args.services).map(drop))
        }
        BenchTarget::Failover => {
            on_bench_lab(|lab| devenv::bench::failover::run(lab, args.runs).map(drop))
        }
    }
}

/// Builds release binaries, brings up lab "bench", runs `f`, removes the lab.
fn on_bench_lab(f: impl FnOnce(&LabCluster) -> Result<()>) -> Result<()> {
    devenv::lab::netns::require_privileges()?;
    let bin_dir = crate::dev_env::build_lab_binaries(crate::dev_env::Profile::Release)?;
    let mut spec = LabSpec::new(&bin_dir);
    spec.name = "bench".into();
    spec.api_port = devenv::lab::cluster::api_port("bench");
    spec.log_level = "warn".into();
    let lab = devenv::lab::cluster::up(&spec);
    let result = lab.and_then(|lab| f(&lab));
    let cleanup = devenv::lab::cluster::down("bench");
    result?;
    cleanup?;
    Ok(())
}
