//! `dev-env` and `dev-env-cleanup`: thin wrappers over `devenv::lab`
//! (kind arrives with issue #6).

use crate::flags::{CleanupArgs, DevEnvArgs, IpFamily, Provider};
use crate::tools;
use anyhow::{Result, bail};
use devenv::cluster::Cluster;
use devenv::lab::cluster::{LabCluster, LabSpec};
use devenv::lab::netns::Family;
use std::path::PathBuf;
use std::time::Instant;

/// Builds the binaries the lab runs and returns their directory.
pub fn build_binaries() -> Result<PathBuf> {
    build_lab_binaries(Profile::Debug)
}

/// Which cargo profile the lab binaries are built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Fast to build (dev-env, e2e).
    Debug,
    /// What users run (benchmarks).
    Release,
}

/// Builds metallb-rs and the lab's binaries with `profile`; their directory.
pub fn build_lab_binaries(profile: Profile) -> Result<PathBuf> {
    let mut args = vec![
        "build",
        "--quiet",
        "-p",
        "metallb-rs",
        "-p",
        "devenv",
        "--bins",
    ];
    if profile == Profile::Release {
        args.push("--release");
    }
    tools::run("cargo", &args)?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| tools::project_root().join("target"));
    Ok(target.join(match profile {
        Profile::Debug => "debug",
        Profile::Release => "release",
    }))
}

fn kind_available() -> bool {
    let ok = |p: &str, a: &[&str]| {
        duct::cmd(p, a)
            .stdout_null()
            .stderr_null()
            .unchecked()
            .run()
            .is_ok_and(|o| o.status.success())
    };
    ok("kind", &["version"]) && ok("docker", &["info"])
}

/// Picks the provider for `auto`, saying which and why.
pub fn resolve(provider: Provider) -> Result<Provider> {
    match provider {
        Provider::Auto if kind_available() => {
            println!(
                "provider: kind and a Docker engine were found, but the kind provider lands with issue #6; using the lab"
            );
            Ok(Provider::Lab)
        }
        Provider::Auto => {
            println!("provider: lab (no working kind + Docker engine here)");
            Ok(Provider::Lab)
        }
        Provider::Kind => {
            bail!("the kind provider is not implemented yet (issue #6): use --provider lab")
        }
        p => Ok(p),
    }
}

/// The lab spec for these flags.
pub fn lab_spec(args: &DevEnvArgs, bin_dir: PathBuf) -> LabSpec {
    let mut spec = LabSpec::new(&bin_dir);
    spec.name = args.name.clone();
    spec.api_port = devenv::lab::cluster::api_port(&args.name);
    spec.nodes = args.nodes;
    spec.family = match args.ip_family {
        IpFamily::Ipv4 => Family::Ipv4,
        IpFamily::Ipv6 => Family::Ipv6,
        IpFamily::Dual => Family::Dual,
    };
    spec.log_level = args.log_level.clone();
    spec
}

/// Brings the lab up (idempotent) from already-built binaries.
pub fn lab_up(spec: &LabSpec) -> Result<LabCluster> {
    devenv::lab::cluster::up(spec)
}

/// `cargo xtask dev-env`.
pub fn run(args: &DevEnvArgs) -> Result<()> {
    resolve(args.provider)?;
    let bin_dir = build_binaries()?;
    let started = Instant::now();
    let cluster = lab_up(&lab_spec(args, bin_dir))?;
    println!(
        "lab {:?} ready in {:.1}s",
        cluster.name(),
        started.elapsed().as_secs_f64()
    );
    for node in cluster.nodes() {
        let addrs: Vec<String> = node.addresses.iter().map(ToString::to_string).collect();
        println!("  node {} {}", node.name, addrs.join(" "));
    }
    println!("  logs      {}", cluster.dir().join("logs").display());
    println!("  kubeconfig {}", cluster.kubeconfig().display());
    println!("export KUBECONFIG={}", cluster.kubeconfig().display());
    Ok(())
}

/// `cargo xtask dev-env-cleanup`.
pub fn cleanup(args: &CleanupArgs) -> Result<()> {
    if args.provider == Provider::Kind {
        bail!("the kind provider is not implemented yet (issue #6)");
    }
    let removed = devenv::lab::cluster::down(&args.name)?;
    if removed.is_empty() {
        println!("lab {:?}: nothing to remove", args.name);
    }
    for r in removed {
        println!("removed {r}");
    }
    Ok(())
}
