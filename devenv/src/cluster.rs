//! The handle every provider (lab, kind) gives the e2e suites, so suites
//! never know which provider runs them.

use anyhow::Result;
use std::net::IpAddr;
use std::path::Path;
use std::process::Output;

/// A node of the cluster as the suites see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Node name (also the Node object's name).
    pub name: String,
    /// Its InternalIP addresses (one per family).
    pub addresses: Vec<IpAddr>,
}

/// Address ranges the suites may put in their pools: free on the
/// cluster's networks and apart from any pool the dev-env made itself.
/// Each is `FIRST-LAST`; `None` where the cluster has no such network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolRanges {
    /// IPv4, on the nodes' primary network (their eth0).
    pub v4: Option<String>,
    /// IPv6, on the primary network.
    pub v6: Option<String>,
    /// IPv4, on the second network (the nodes' eth1).
    pub secondary_v4: Option<String>,
}

/// How to stop a speaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGTERM: graceful, the speaker withdraws.
    Term,
    /// SIGKILL: the process vanishes.
    Kill,
}

/// A running dev cluster.
pub trait Cluster: Send + Sync {
    /// The cluster's name.
    fn name(&self) -> &str;
    /// Path of a kubeconfig that reaches its API server from this process.
    fn kubeconfig(&self) -> &Path;
    /// Its nodes.
    fn nodes(&self) -> Vec<NodeInfo>;
    /// Runs `argv` on `node` (in the node's network namespace or container).
    fn exec_on_node(&self, node: &str, argv: &[&str]) -> Result<Output>;
    /// Runs `argv` on the external host (the client / BGP router side).
    fn exec_on_external(&self, argv: &[&str]) -> Result<Output>;
    /// Takes a node off the network (its link goes down).
    fn node_down(&self, node: &str) -> Result<()>;
    /// Brings a node back.
    fn node_up(&self, node: &str) -> Result<()>;
    /// Stops the speaker on `node`.
    fn stop_speaker(&self, node: &str, signal: StopSignal) -> Result<()>;
    /// Starts the speaker on `node` again.
    fn start_speaker(&self, node: &str) -> Result<()>;
    /// Restarts the MetalLB controller (graceful stop, then start).
    fn restart_controller(&self) -> Result<()>;
    /// Cuts `node` off the API server (its link stays up) or reconnects it.
    fn set_api_reachable(&self, node: &str, reachable: bool) -> Result<()>;
    /// The controller's `/metrics` text.
    fn controller_metrics(&self) -> Result<String>;
    /// Ranges the suites' pools take addresses from.
    fn pool_ranges(&self) -> PoolRanges;
    /// The external host's interface on the network of the nodes'
    /// `node_iface` (`eth0`, `eth1`).
    fn external_interface(&self, node_iface: &str) -> Result<String>;
}

/// A cluster known only by its kubeconfig (`--provider kubeconfig`): the
/// suites can use the API; running commands on nodes or the external host
/// is not available.
pub struct KubeconfigCluster {
    path: std::path::PathBuf,
}

impl KubeconfigCluster {
    /// The cluster `path` points at.
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
        }
    }
}

fn unavailable(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{what} is not available with --provider kubeconfig: use --provider lab or kind"
    )
}

impl Cluster for KubeconfigCluster {
    fn name(&self) -> &str {
        "kubeconfig"
    }
    fn kubeconfig(&self) -> &Path {
        &self.path
    }
    fn nodes(&self) -> Vec<NodeInfo> {
        Vec::new()
    }
    fn exec_on_node(&self, _: &str, _: &[&str]) -> Result<Output> {
        Err(unavailable("running commands on nodes"))
    }
    fn exec_on_external(&self, _: &[&str]) -> Result<Output> {
        Err(unavailable("the external host"))
    }
    fn node_down(&self, _: &str) -> Result<()> {
        Err(unavailable("taking nodes down"))
    }
    fn node_up(&self, _: &str) -> Result<()> {
        Err(unavailable("bringing nodes up"))
    }
    fn stop_speaker(&self, _: &str, _: StopSignal) -> Result<()> {
        Err(unavailable("stopping speakers"))
    }
    fn start_speaker(&self, _: &str) -> Result<()> {
        Err(unavailable("starting speakers"))
    }
    fn restart_controller(&self) -> Result<()> {
        Err(unavailable("restarting the controller"))
    }
    fn set_api_reachable(&self, _: &str, _: bool) -> Result<()> {
        Err(unavailable("cutting a node off the API"))
    }
    fn controller_metrics(&self) -> Result<String> {
        Err(unavailable("scraping the controller"))
    }
    fn pool_ranges(&self) -> PoolRanges {
        PoolRanges::default()
    }
    fn external_interface(&self, _: &str) -> Result<String> {
        Err(unavailable("the external host"))
    }
}
