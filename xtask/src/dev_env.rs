//! `dev-env` and `dev-env-cleanup`: thin wrappers over `devenv::lab` and
//! `devenv::kind`.

use crate::flags::{self, CleanupArgs, DevEnvArgs, IpFamily, LabArgs, LabCommand, Provider};
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
        "-p",
        "lab-apiserver",
        "--bins",
    ];
    if profile == Profile::Release {
        // The benchmarks also run `bgp-announce`.
        args.extend(["-p", "lab-bench", "--release"]);
    }
    tools::cargo(&args)?;
    Ok(tools::target_dir().join(match profile {
        Profile::Debug => "debug",
        Profile::Release => "release",
    }))
}

/// A Docker engine answers `docker info`.
pub fn docker_answers() -> bool {
    duct::cmd("docker", ["info"])
        .stdout_null()
        .stderr_null()
        .unchecked()
        .run()
        .is_ok_and(|o| o.status.success())
}

fn kind_available() -> bool {
    devenv::kind::cli::available() && docker_answers()
}

/// Picks the provider for `auto`, saying which and why.
pub fn resolve(provider: Provider) -> Result<Provider> {
    match provider {
        Provider::Auto if kind_available() => {
            println!("provider: kind (kind and a Docker engine answer)");
            Ok(Provider::Kind)
        }
        Provider::Auto => {
            println!("provider: lab (no working kind + Docker engine here)");
            Ok(Provider::Lab)
        }
        p => Ok(p),
    }
}

/// The cluster name: the flag, or the provider's default.
pub fn cluster_name(name: &Option<String>, provider: Provider) -> String {
    name.clone()
        .unwrap_or_else(|| flags::default_name(provider).to_owned())
}

/// The kind spec for these flags.
pub fn kind_spec(args: &DevEnvArgs) -> devenv::kind::KindSpec {
    use devenv::kind::config::IpFamily as KindFamily;
    devenv::kind::KindSpec {
        name: cluster_name(&args.name, Provider::Kind),
        ip_family: match args.ip_family {
            IpFamily::Ipv4 => KindFamily::Ipv4,
            IpFamily::Ipv6 => KindFamily::Ipv6,
            IpFamily::Dual => KindFamily::Dual,
        },
        protocol: protocol(args.protocol),
        node_image: args.node_image.clone(),
        build_images: !args.no_build_images,
        image: devenv::image::reference(&args.registry, &args.tag),
        log_level: args.log_level.clone(),
        workers: args.nodes.saturating_sub(1),
    }
}

/// The dev-env protocol for the flag.
pub fn protocol(p: flags::Protocol) -> devenv::cluster::Protocol {
    match p {
        flags::Protocol::Layer2 => devenv::cluster::Protocol::Layer2,
        flags::Protocol::Bgp => devenv::cluster::Protocol::Bgp,
    }
}

/// The lab spec for these flags.
pub fn lab_spec(args: &DevEnvArgs, bin_dir: PathBuf) -> LabSpec {
    let mut spec = LabSpec::new(&bin_dir);
    spec.name = cluster_name(&args.name, Provider::Lab);
    spec.api_port = devenv::lab::cluster::api_port(&spec.name);
    spec.nodes = args.nodes;
    spec.family = match args.ip_family {
        IpFamily::Ipv4 => Family::Ipv4,
        IpFamily::Ipv6 => Family::Ipv6,
        IpFamily::Dual => Family::Dual,
    };
    spec.log_level = args.log_level.clone();
    spec.protocol = protocol(args.protocol);
    spec.metallb = match args.metallb {
        flags::Metallb::Lab => devenv::lab::cluster::Metallb::Lab,
        flags::Metallb::Chart => devenv::lab::cluster::Metallb::Chart,
    };
    spec
}

/// Brings the lab up (idempotent) from already-built binaries.
pub fn lab_up(spec: &LabSpec) -> Result<LabCluster> {
    devenv::lab::cluster::up(spec)
}

/// `cargo xtask dev-env`.
pub fn run(args: &DevEnvArgs) -> Result<()> {
    let provider = resolve(args.provider)?;
    if provider == Provider::Kubeconfig {
        bail!("dev-env makes clusters: use --provider lab or kind (kubeconfig is for e2e)");
    }
    let chart = args.metallb == flags::Metallb::Chart;
    if chart && provider == Provider::Kind {
        bail!("--metallb chart is a lab option: on kind the dev-env applies the manifests");
    }
    let started = Instant::now();
    let cluster: Box<dyn Cluster> = if provider == Provider::Kind {
        Box::new(devenv::kind::up(&kind_spec(args))?)
    } else {
        let mut needs = devenv::prereq::LAB.to_vec();
        if chart {
            needs.push(devenv::prereq::Need::Helm);
        }
        crate::setup::ensure(&needs)?;
        let bin_dir = build_binaries()?;
        let lab = lab_up(&lab_spec(args, bin_dir))?;
        if chart {
            let release = devenv::helm::install_in_lab(lab.kubeconfig())?;
            println!(
                "helm release {} revision {} deployed (charts/metallb-rs, values: devenv::helm::lab_values)",
                devenv::helm::RELEASE,
                release["version"]
            );
        }
        lab_dev_env_config(&lab, args.protocol)?;
        Box::new(lab)
    };
    println!(
        "{provider:?} cluster {:?} ready in {:.1}s",
        cluster.name(),
        started.elapsed().as_secs_f64()
    );
    for node in cluster.nodes() {
        let addrs: Vec<String> = node.addresses.iter().map(ToString::to_string).collect();
        println!("  node {} {}", node.name, addrs.join(" "));
    }
    if provider == Provider::Lab {
        let dir = devenv::lab::cluster::lab_dir(cluster.name());
        println!("  logs      {}", dir.join("logs").display());
    }
    println!("  kubeconfig {}", cluster.kubeconfig().display());
    println!("export KUBECONFIG={}", cluster.kubeconfig().display());
    Ok(())
}

/// The lab's dev-env MetalLB objects: for bgp the router's peers, pool and
/// advertisement (FRR already runs: `up` started it); for layer2 the pool
/// `dev-env-l2` and an L2Advertisement (a BGP configuration left from an
/// earlier run is deleted first).
/// The command line `cargo xtask lab` runs: `command` on lab `name`'s
/// external host (its network namespace).
fn lab_argv(name: &str, command: &LabCommand) -> Vec<String> {
    let ns = devenv::lab::netns::external_namespace(name);
    let mut argv: Vec<String> = ["ip", "netns", "exec", &ns].map(str::to_owned).to_vec();
    match command {
        LabCommand::Curl { url } => {
            argv.extend(["curl", "-sS", "-m", "5", "--globoff"].map(str::to_owned));
            argv.push(url.clone());
        }
        LabCommand::Exec { cmd } => argv.extend(cmd.iter().cloned()),
    }
    argv
}

/// `cargo xtask lab`: runs the command on the external host and exits
/// with its status.
pub fn lab(args: &LabArgs) -> Result<()> {
    let ns = devenv::lab::netns::external_namespace(&args.name);
    let listed = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()?;
    let known = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|l| l.split_whitespace().next() == Some(ns.as_str()));
    if !known {
        bail!(
            "no lab named {:?} here (no network namespace {ns}): `cargo xtask dev-env` makes one, `--name` picks another",
            args.name
        );
    }
    let argv = lab_argv(&args.name, &args.command);
    let status = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .status()?;
    std::process::exit(status.code().unwrap_or(1));
}

fn lab_dev_env_config(lab: &LabCluster, protocol: flags::Protocol) -> Result<()> {
    if protocol == flags::Protocol::Layer2 {
        let (done, ranges) = lab.apply_l2_dev_env()?;
        println!(
            "layer2 pool dev-env-l2 ({}) with an L2Advertisement: LoadBalancer services get an address from it",
            ranges.join(", ")
        );
        for line in done {
            println!("  {line}");
        }
        return Ok(());
    }
    lab.bgp_router()?;
    let peers: Vec<String> = lab
        .nodes()
        .iter()
        .flat_map(|n| n.addresses.iter().map(ToString::to_string))
        .collect();
    println!(
        "FRR routers (zebra + bgpd each) peering with {}:",
        peers.join(" ")
    );
    for r in lab.bgp_routers() {
        let addresses: Vec<String> = r.addresses.iter().map(ToString::to_string).collect();
        let daemons = lab.bgp_router_named(&r.name)?;
        println!(
            "  {:<16} AS {:<10} port {} at {} in {}{}; vtysh --vty_socket {} -c 'show bgp summary'",
            r.name,
            r.asn,
            r.port,
            addresses.join(" "),
            daemons.namespace(),
            if r.multi_hop {
                " (one routed hop away)"
            } else {
                ""
            },
            daemons.dir().display()
        );
    }
    for line in lab.apply_bgp_dev_env()? {
        println!("  {line}");
    }
    Ok(())
}

/// `cargo xtask dev-env-cleanup`.
pub fn cleanup(args: &CleanupArgs) -> Result<()> {
    let provider = resolve(args.provider)?;
    let name = cluster_name(&args.name, provider);
    let removed = match provider {
        Provider::Kind => devenv::kind::down(&name)?,
        Provider::Lab => devenv::lab::cluster::down(&name)?,
        other => bail!("dev-env-cleanup removes lab or kind clusters, not {other:?}"),
    };
    if removed.is_empty() {
        println!("{provider:?} {name:?}: nothing to remove");
    }
    for r in removed {
        println!("removed {r}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_commands_run_in_the_external_namespace() {
        let curl = LabCommand::Curl {
            url: "http://172.30.0.200/".into(),
        };
        assert_eq!(
            lab_argv("lab", &curl).join(" "),
            "ip netns exec lab-external curl -sS -m 5 --globoff http://172.30.0.200/"
        );
        let exec = LabCommand::Exec {
            cmd: vec!["ping".into(), "-c1".into(), "172.30.0.200".into()],
        };
        assert_eq!(
            lab_argv("mine", &exec).join(" "),
            "ip netns exec mine-external ping -c1 172.30.0.200"
        );
    }
}
