//! `cargo xtask bench <target>`: benchmarks that print their figures next
//! to a baseline measured in the same run (never asserted: numbers vary by
//! machine; tests check behaviour).
//!
//! The lab benchmarks run on a lab of their own ("bench", removed
//! afterwards, also on Ctrl-C) made from release binaries, so figures are
//! those of what users run: metallb-rs is the static binary the images
//! carry (its resident memory includes the libc it links, not shared
//! libraries a `FROM scratch` container never has).

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
            lab_bench::bgp::latency(lab, args.runs.unwrap_or(10))?;
            // Last: it takes nodes' links down, and each run without BFD
            // waits out a hold time.
            lab_bench::bgp::bfd::link_cut(lab, args.runs.unwrap_or(5)).map(drop)
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
    let release = crate::dev_env::build_lab_binaries(crate::dev_env::Profile::Release)?;
    let image_binary = devenv::image::build_static_binary(&tools::project_root())?;
    let bin_dir = with_metallb_binary(&release, &image_binary, &release.join("bench-bin"))?;
    let bin_dir = bin_dir.as_path();
    lab_bench::on_interrupt(|| {
        for removed in cleanup() {
            eprintln!("removed {removed}");
        }
    })?;
    let mut spec = LabSpec::new(bin_dir);
    spec.name = LAB.into();
    spec.api_port = devenv::lab::cluster::api_port(LAB);
    spec.log_level = "warn".into();
    spec.protocol = protocol;
    // A Ctrl-C during the bring-up waits for it, then removes the lab.
    let lab = {
        let _guard = lab_bench::cleanup_lock();
        devenv::lab::cluster::up(&spec)
    };
    let result = lab.and_then(|lab| f(&lab, bin_dir));
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

/// Makes `dir` hold links to every program in `release` (the lab's own
/// binaries), with `metallb-rs` linking to `metallb` instead; returns it.
fn with_metallb_binary(release: &Path, metallb: &Path, dir: &Path) -> Result<std::path::PathBuf> {
    use anyhow::Context;
    use std::os::unix::fs::PermissionsExt;
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for entry in
        std::fs::read_dir(release).with_context(|| format!("listing {}", release.display()))?
    {
        let entry = entry?;
        let meta = entry.metadata()?;
        let program = meta.is_file() && meta.permissions().mode() & 0o111 != 0;
        if program && entry.file_name() != "metallb-rs" {
            std::os::unix::fs::symlink(entry.path(), dir.join(entry.file_name()))?;
        }
    }
    std::os::unix::fs::symlink(metallb, dir.join("metallb-rs"))?;
    Ok(dir.to_owned())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_bench_directory_runs_the_image_binary_beside_the_lab_programs() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let release = tmp.path().join("release");
        std::fs::create_dir_all(release.join("deps")).expect("mkdir");
        for (name, mode) in [
            ("metallb-rs", 0o755),
            ("lab-apiserver", 0o755),
            ("x.d", 0o644),
        ] {
            let path = release.join(name);
            std::fs::write(&path, name).expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        let image = tmp.path().join("static-metallb-rs");
        std::fs::write(&image, "static").expect("write");
        let dir = release.join("bench-bin");
        for _ in 0..2 {
            // Twice: a second run replaces the first's links.
            let got = with_metallb_binary(&release, &image, &dir).expect("links");
            let mut names: Vec<_> = std::fs::read_dir(&got)
                .expect("list")
                .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
                .collect();
            names.sort();
            assert_eq!(names, ["lab-apiserver", "metallb-rs"]);
            assert_eq!(
                std::fs::read_to_string(got.join("metallb-rs")).expect("read"),
                "static"
            );
            assert_eq!(
                std::fs::read_to_string(got.join("lab-apiserver")).expect("read"),
                "lab-apiserver"
            );
        }
    }
}
