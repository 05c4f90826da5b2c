//! `cargo xtask bench <target>`: benchmarks that print their figures next
//! to a baseline measured in the same run (never asserted: numbers vary by
//! machine; tests check behaviour).
//!
//! The lab benchmarks run on a lab of their own ("bench", removed
//! afterwards, also on Ctrl-C) made from release binaries, so figures are
//! those of what users run.

use crate::flags::{BenchArgs, BenchTarget};
use crate::tools;
use anyhow::Result;
use devenv::cluster::Protocol;
use devenv::lab::cluster::{LabCluster, LabSpec};
use std::path::Path;

/// The lab the benchmarks bring up and remove.
const LAB: &str = "bench";

/// Runs the chosen benchmark.
pub fn run(args: &BenchArgs) -> Result<()> {
    match args.target {
        // The benchmark lives beside the allocator (metallb-rs/benches) and
        // runs with the optimised bench profile.
        BenchTarget::Allocator => tools::cargo(&[
            "bench",
            "--quiet",
            "-p",
            "metallb-rs",
            "--bench",
            "allocator",
        ]),
        BenchTarget::Arp => on_bench_lab(Protocol::Layer2, |lab, _| {
            lab_bench::arp::run(lab, args.rounds, args.burst).map(drop)
        }),
        BenchTarget::Scale => on_bench_lab(Protocol::Layer2, |lab, _| {
            lab_bench::scale::run(lab, &args.services, &args.nodes).map(drop)
        }),
        BenchTarget::Failover => on_bench_lab(Protocol::Layer2, |lab, _| {
            lab_bench::failover::run(lab, args.runs.unwrap_or(10)).map(drop)
        }),
        BenchTarget::Bgp => on_bench_lab(Protocol::Bgp, |lab, bin_dir| {
            // Throughput first, in namespaces of its own, while the lab
            // has no BGP configuration yet and idles.
            lab_bench::bgp::throughput(bin_dir, args.runs.unwrap_or(3), args.prefixes)?;
            lab_bench::bgp::latency(lab, args.runs.unwrap_or(10)).map(drop)
        }),
    }
}

/// Builds release binaries, brings up lab "bench" with `protocol`, runs
/// `f` with it and the binaries' directory, removes the lab (and the bgp
/// benchmark's namespaces), whether `f` fails or the run is interrupted.
fn on_bench_lab(
    protocol: Protocol,
    f: impl FnOnce(&LabCluster, &Path) -> Result<()>,
) -> Result<()> {
    devenv::lab::netns::require_privileges()?;
    let bin_dir = crate::dev_env::build_lab_binaries(crate::dev_env::Profile::Release)?;
    lab_bench::on_interrupt(|| {
        for removed in cleanup() {
            eprintln!("removed {removed}");
        }
    })?;
    let mut spec = LabSpec::new(&bin_dir);
    spec.name = LAB.into();
    spec.api_port = devenv::lab::cluster::api_port(LAB);
    spec.log_level = "warn".into();
    spec.protocol = protocol;
    // A Ctrl-C during the bring-up waits for it, then removes the lab.
    let lab = {
        let _guard = lab_bench::cleanup_lock();
        devenv::lab::cluster::up(&spec)
    };
    let result = lab.and_then(|lab| f(&lab, &bin_dir));
    // After Ctrl-C the handler cleans up and exits (an error from the
    // interrupted run is no news); a signal from here on waits for this.
    let guard = lab_bench::cleanup_lock();
    let leftovers = lab_bench::bgp::Testbed::destroy();
    let cleanup = devenv::lab::cluster::down(LAB);
    drop(guard);
    result?;
    leftovers?;
    cleanup?;
    Ok(())
}

/// Everything a benchmark may have left: the bgp testbed and the lab.
fn cleanup() -> Vec<String> {
    let mut removed = Vec::new();
    match lab_bench::bgp::Testbed::destroy() {
        Ok(r) => removed.extend(r),
        Err(e) => eprintln!("removing the bgp testbed: {e:#}"),
    }
    match devenv::lab::cluster::down(LAB) {
        Ok(r) => removed.extend(r),
        Err(e) => eprintln!("removing lab {LAB}: {e:#}"),
    }
    removed
}
