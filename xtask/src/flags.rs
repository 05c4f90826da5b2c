//! Every flag of every `cargo xtask` subcommand, in one place.

use clap::{Args, Parser, Subcommand};

/// Developer tasks for metallb-rs: code generation, tests, dev environments.
#[derive(Parser, Debug)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", version)]
pub struct Flags {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write manifests/crds/metallb.io_<plural>.yaml from the Rust API types
    GenCrds(CheckArgs),
    /// Write manifests/metallb-native.yaml (namespace, CRDs, RBAC, controller, speaker),
    /// manifests/prometheus/ (PodMonitors, alerts, the metrics reader),
    /// manifests/networkpolicies/ (the controller's NetworkPolicy) and the kustomizations
    GenManifests(CheckArgs),
    /// Build the documentation book (docs/, mdBook) into target/book, after checking its
    /// links, includes and generated field reference
    Docs,
    /// Run every check CI runs: fmt, clippy, unit and integration tests, drift checks, lab e2e
    Test(TestArgs),
    /// Create (or reuse) a dev cluster: the lab of network namespaces, or kind
    DevEnv(DevEnvArgs),
    /// Remove a dev cluster and everything it made
    DevEnvCleanup(CleanupArgs),
    /// Run a command on the lab's external host, a client outside the cluster (`lab curl URL`, `lab exec -- CMD`)
    Lab(LabArgs),
    /// Run the e2e suites (ginkgo-style --focus/--skip over full test names)
    E2e(E2eArgs),
    /// Run a benchmark; each prints its figures beside a baseline measured in the same run
    Bench(BenchArgs),
    /// Simulate layer 2 failover: seeded runs of N speakers in virtual time, faults injected, invariants checked
    Sim(SimArgs),
    /// Build the static metallb-rs binary and its FROM-scratch image through the Docker API
    BuildImages(BuildImagesArgs),
    /// Run the CI pipeline's steps that can run here (ci/github/workflows/ci.yaml), with a summary
    Ci(CiArgs),
}

/// Flags of `cargo xtask build-images`.
#[derive(Args, Debug, Clone)]
pub struct BuildImagesArgs {
    /// Image tag
    #[arg(long, default_value = "dev")]
    pub tag: String,
    /// Registry and organisation the image is named under
    #[arg(long, default_value = devenv::image::DEFAULT_REGISTRY)]
    pub registry: String,
    /// Also load the image into this kind cluster
    #[arg(long, value_name = "NAME")]
    pub load_kind: Option<String>,
}

/// Flags of `cargo xtask ci`.
#[derive(Args, Debug, Clone)]
pub struct CiArgs {
    /// Also run the kind e2e matrix (ipv4, ipv6, dual) when kind and Docker work
    #[arg(long)]
    pub kind: bool,
}

/// The benchmarks.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchTarget {
    /// Allocate/release 10k and 100k services (/16 IPv4, /112 IPv6) vs a naive linear scan
    Allocator,
    /// ARP reply latency and rate: speaker-answered VIP vs the node kernel's own address (lab, root)
    Arp,
    /// S services on 3 real + N simulated nodes: convergence, speaker CPU per pass and per change, API load, failover, memory (lab, root)
    Scale,
    /// Time until an address answers from another node after SIGKILL, SIGTERM or link loss (lab, root)
    Failover,
    /// BGP: service to route in FRR and back; UPDATE throughput of our session vs FRR's `network`s;
    /// a node's link cut to its path gone, with BFD vs the hold time (lab, root, FRR)
    Bgp,
}

/// Flags of `cargo xtask bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Which benchmark
    #[arg(value_enum)]
    pub target: BenchTarget,
    /// Services created at once; a comma-separated list runs each size (scale)
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    pub services: Vec<usize>,
    /// Simulated nodes beside the lab's three real ones; a comma-separated
    /// list runs each size (scale)
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub nodes: Vec<usize>,
    /// Sequential request/reply rounds per target (arp)
    #[arg(long, default_value_t = 1000)]
    pub rounds: usize,
    /// Back-to-back requests per target for the rate (arp)
    #[arg(long, default_value_t = 20000)]
    pub burst: usize,
    /// Runs per disruption (failover, default 10); announce/withdraw rounds (bgp, default 10),
    /// runs of each announcer (bgp, default 3) and link cuts with and without BFD (bgp, default 5)
    #[arg(long)]
    pub runs: Option<usize>,
    /// Prefixes each announcer sends (bgp)
    #[arg(long, default_value_t = 10_000)]
    pub prefixes: usize,
}

/// Flags of `cargo xtask sim` (passed on to the `metallb-sim` binary).
#[derive(Args, Debug, Clone)]
#[command(disable_help_flag = true)]
pub struct SimArgs {
    /// Build and run the simulator unoptimised (faster to build, about 10x slower to run); first if given
    #[arg(long)]
    pub debug: bool,
    /// The simulator's own flags, passed on as given (`cargo xtask sim --help` lists them):
    /// --seeds, --nodes, --latency, --seed, --faults, --scenario, --variant, --report, --trace, --jobs
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// Where a dev cluster comes from.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// kind when kind and a Docker engine work, otherwise the lab
    Auto,
    /// Network namespaces on this machine (needs root)
    Lab,
    /// A kind cluster (needs the kind CLI, a Docker engine and registry access)
    Kind,
    /// An existing cluster named by --kubeconfig (e2e only)
    Kubeconfig,
}

/// Address families of a dev cluster.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamily {
    /// IPv4 only
    Ipv4,
    /// IPv6 only
    Ipv6,
    /// Both
    Dual,
}

/// How the dev-env announces service IPs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// ARP/NDP: a pool from the node network and an L2Advertisement
    Layer2,
    /// BGP to an FRR router (lab: zebra + bgpd in the external namespace;
    /// kind: a container on the kind network)
    Bgp,
}

/// Who runs metallb-rs in the lab.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metallb {
    /// The lab starts the controller and a speaker per node itself
    Lab,
    /// The Helm chart is installed (helm-sdkpy) and the nodes run its Pods
    /// with the lab's metallb-rs binary
    Chart,
}

/// Flags of `cargo xtask dev-env`.
#[derive(Args, Debug, Clone)]
pub struct DevEnvArgs {
    /// Provider
    #[arg(long, value_enum, default_value = "lab")]
    pub provider: Provider,
    /// Cluster name [default: lab for the lab, kind for kind]
    #[arg(long)]
    pub name: Option<String>,
    /// Number of nodes, control plane included
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Address families of nodes and pools
    #[arg(long, value_enum, default_value = "dual")]
    pub ip_family: IpFamily,
    /// metallb-rs log level
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// layer2 or bgp (bgp: an FRR router peering with every node, with a BGP pool and peers)
    #[arg(long, value_enum, default_value = "layer2")]
    pub protocol: Protocol,
    /// Who runs metallb-rs (lab)
    #[arg(long, value_enum, default_value = "lab")]
    pub metallb: Metallb,
    /// kind node image, e.g. kindest/node:v1.31.0 (kind's default when absent)
    #[arg(long)]
    pub node_image: Option<String>,
    /// Do not build the image; load the one already in Docker (kind)
    #[arg(long)]
    pub no_build_images: bool,
    /// Tag of the image the cluster runs (kind)
    #[arg(long, default_value = "dev")]
    pub tag: String,
    /// Registry of the image the cluster runs (kind)
    #[arg(long, default_value = devenv::image::DEFAULT_REGISTRY)]
    pub registry: String,
}

impl Default for DevEnvArgs {
    fn default() -> Self {
        Self {
            provider: Provider::Lab,
            name: None,
            nodes: 3,
            ip_family: IpFamily::Dual,
            log_level: "info".into(),
            protocol: Protocol::Layer2,
            metallb: Metallb::Lab,
            node_image: None,
            no_build_images: false,
            tag: "dev".into(),
            registry: devenv::image::DEFAULT_REGISTRY.into(),
        }
    }
}

/// The default cluster name of each provider (upstream's kind default is
/// `kind`; the lab's namespaces start with its name).
pub fn default_name(provider: Provider) -> &'static str {
    match provider {
        Provider::Kind => "kind",
        _ => "lab",
    }
}

/// Flags of `cargo xtask dev-env-cleanup`.
#[derive(Args, Debug, Clone)]
pub struct CleanupArgs {
    /// Provider
    #[arg(long, value_enum, default_value = "lab")]
    pub provider: Provider,
    /// Cluster name [default: lab for the lab, kind for kind]
    #[arg(long)]
    pub name: Option<String>,
}

/// Flags of `cargo xtask lab`.
#[derive(Args, Debug, Clone)]
pub struct LabArgs {
    /// Lab name
    #[arg(long, default_value = "lab")]
    pub name: String,
    /// What to run
    #[command(subcommand)]
    pub command: LabCommand,
}

/// What `cargo xtask lab` runs on the external host.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum LabCommand {
    /// GET URL over HTTP (curl -sS -m 5), as a client outside the cluster would
    Curl {
        /// The URL (a LoadBalancer address, say http://172.30.0.200/)
        url: String,
    },
    /// Run CMD there (after `--`)
    Exec {
        /// The command and its arguments
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        cmd: Vec<String>,
    },
}

/// Flags of `cargo xtask e2e`.
#[derive(Args, Debug, Clone)]
pub struct E2eArgs {
    /// Cluster to test (the lab is created or reused; kind must have been made by dev-env)
    #[arg(long, value_enum, default_value = "lab")]
    pub provider: Provider,
    /// Cluster name [default: lab for the lab, kind for kind]
    #[arg(long)]
    pub name: Option<String>,
    /// Kubeconfig of an existing cluster (with --provider kubeconfig)
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Run only tests whose full name matches this regex
    #[arg(long)]
    pub focus: Option<String>,
    /// Skip tests whose full name matches this regex
    #[arg(long)]
    pub skip: Option<String>,
    /// List the selected tests without running them
    #[arg(long)]
    pub dry_run: bool,
    /// Same as --dry-run
    #[arg(long)]
    pub list: bool,
    /// Print which of our specs checks each of upstream's (MetalLB e2etest, native mode) and exit
    #[arg(long)]
    pub upstream_map: bool,
    /// Write a JUnit XML report here
    #[arg(long)]
    pub junit: Option<std::path::PathBuf>,
    /// Succeed even when --focus/--skip select no test (without it such a run fails, as a typo would)
    #[arg(long)]
    pub allow_empty: bool,
}

/// Flags shared by the generators.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Write nothing; exit non-zero and name every file that differs from the generated output
    #[arg(long)]
    pub check: bool,
}

/// Flags of `cargo xtask test`.
#[derive(Args, Debug)]
pub struct TestArgs {
    /// Skip `cargo fmt --check` and clippy (run the tests and drift checks only)
    #[arg(long)]
    pub no_lint: bool,
    /// Skip the lab e2e run
    #[arg(long)]
    pub no_e2e: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent_and_every_subcommand_has_help() {
        Flags::command().debug_assert();
        let cmd = Flags::command();
        for sub in cmd.get_subcommands() {
            let help = sub.clone().render_help().to_string();
            assert!(help.contains("--help"), "{}: {help}", sub.get_name());
            assert!(
                sub.get_about().is_some(),
                "{} has no description",
                sub.get_name()
            );
        }
    }
}
