//! The handle every provider (lab, kind) gives the e2e suites, so suites
//! never know which provider runs them.

use crate::frr::{self, AddressFamily, BgpRoutes, KernelRoute, NeighborStatus};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::ops::Range;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

/// Runs `argv` on this machine and returns what it printed and how it
/// ended, unchecked: what the providers' `exec_on_*` run (directly, through
/// `ip netns exec` or `docker exec`), leaving the status to the caller.
pub fn output(argv: &[&str]) -> Result<Output> {
    let (program, args) = argv.split_first().context("empty command")?;
    std::process::Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {}", argv.join(" ")))
}

/// What the dev-env announces service addresses with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// ARP/NDP (kind: a pool from the kind network and an L2Advertisement).
    #[default]
    Layer2,
    /// BGP to an FRR router (lab: zebra + bgpd in the external namespace;
    /// kind: an FRR container on the kind network).
    Bgp,
}

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
    /// SIGSTOP: the process hangs where it is - it answers, renews and
    /// gossips nothing, while its node stays Ready - until
    /// [`Cluster::resume_speaker`].
    Pause,
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
    /// Takes the node's data-plane link (`eth0`) down while its path to
    /// the API server stays up: its speaker keeps renewing its lease but
    /// cannot answer on the network. Providers whose API path is that
    /// link cannot.
    fn link_down(&self, node: &str) -> Result<()> {
        let _ = node;
        bail!(
            "{}: taking a node's link down with its API path up is not available",
            self.name()
        )
    }
    /// Brings the link [`Cluster::link_down`] took down back up.
    fn link_up(&self, node: &str) -> Result<()> {
        let _ = node;
        bail!(
            "{}: bringing a node's link up is not available",
            self.name()
        )
    }
    /// Stops the speaker on `node`.
    fn stop_speaker(&self, node: &str, signal: StopSignal) -> Result<()>;
    /// Starts the speaker on `node` again.
    fn start_speaker(&self, node: &str) -> Result<()>;
    /// Lets the speaker on `node`, paused with [`StopSignal::Pause`], go on
    /// (SIGCONT); it has missed everything that happened meanwhile.
    fn resume_speaker(&self, node: &str) -> Result<()>;
    /// Starts the speaker on `node` with the wall-clock times it writes
    /// (lease renewTime, event timestamps) shifted by `offset_secs`, through
    /// the speaker's test hook `metallb_rs::clock::OFFSET_ENV`; false when
    /// this cluster cannot (its speakers run from manifests).
    fn start_speaker_with_clock_offset(&self, node: &str, offset_secs: i64) -> Result<bool> {
        let _ = (node, offset_secs);
        Ok(false)
    }
    /// Restarts the MetalLB controller (graceful stop, then start).
    fn restart_controller(&self) -> Result<()>;
    /// A standby controller replica takes over from the leader, which
    /// vanishes without handing over (as on a node loss); returns once the
    /// new leader has read the configuration.
    fn controller_takeover(&self) -> Result<()>;
    /// Cuts `node` off the API server (its link stays up) or reconnects it.
    fn set_api_reachable(&self, node: &str, reachable: bool) -> Result<()>;
    /// Makes every request `node` sends the API server (its speaker's,
    /// its agent's) wait a delay drawn uniformly from `latency` before it
    /// reaches the server, as behind a slow API server; answers and watch
    /// events are not delayed. `None` ends it. Takes effect for requests
    /// sent after it returns, also on connections already open; other
    /// nodes are not affected. Providers whose nodes reach the API server
    /// directly cannot.
    fn set_api_latency(&self, node: &str, latency: Option<Range<Duration>>) -> Result<()> {
        let _ = (node, latency);
        bail!(
            "{}: a node's API latency is not available with this provider",
            self.name()
        )
    }
    /// The controller's `/metrics` text.
    fn controller_metrics(&self) -> Result<String>;
    /// The `/metrics` text of the speaker on `node`. By default its plain
    /// metrics on the node's loopback (what the lab starts it with);
    /// providers running the manifests (HTTPS only) scrape with a token.
    fn speaker_metrics(&self, node: &str) -> Result<String> {
        let out = self.exec_on_node(
            node,
            &["curl", "-sS", "-m", "5", "http://127.0.0.1:9120/metrics"],
        )?;
        if !out.status.success() {
            bail!(
                "scraping the speaker on {node}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
    /// Ranges the suites' pools take addresses from.
    fn pool_ranges(&self) -> PoolRanges;
    /// The external host's interface on the network of the nodes'
    /// `node_iface` (`eth0`, `eth1`).
    fn external_interface(&self, node_iface: &str) -> Result<String>;
    /// The external host's network namespace, for sockets the suites open
    /// there themselves (the ARP/NDP prober): `Some(name)` as `ip netns`
    /// names it, `None` when the external host is this process's own
    /// namespace (kind, where it is this machine on the kind bridge).
    fn external_netns(&self) -> Result<Option<String>>;

    // The BGP router. Providers without one keep these defaults.

    /// The addresses of the external BGP router (FRR) that BGPPeers point
    /// at, one per address family, on the nodes' primary network; empty
    /// when the cluster runs no router (no `--protocol bgp`).
    fn router_addresses(&self) -> Vec<IpAddr> {
        Vec::new()
    }
    /// Every BGP router the speakers can peer with, the one of
    /// [`Cluster::router_addresses`] first (the lab runs upstream's four:
    /// iBGP and eBGP, single-hop and multi-hop); empty without a router.
    fn bgp_routers(&self) -> Vec<frr::BgpRouter> {
        let addresses = self.router_addresses();
        if addresses.is_empty() {
            return Vec::new();
        }
        vec![frr::BgpRouter::single("frr", &addresses)]
    }
    /// Runs `command` in the vtysh of router `router` (a name from
    /// [`Cluster::bgp_routers`]).
    fn vtysh_on(&self, router: &str, command: &str) -> Result<String> {
        match self.bgp_routers().first() {
            Some(first) if first.name == router => self.vtysh(command),
            _ => bail!("cluster {:?} runs no BGP router {router:?}", self.name()),
        }
    }
    /// Router `router`'s BGP neighbors, by address.
    fn bgp_neighbors_on(&self, router: &str) -> Result<BTreeMap<IpAddr, NeighborStatus>> {
        frr::parse_neighbors(&self.vtysh_on(router, frr::NEIGHBORS_COMMAND)?)
    }
    /// Router `router`'s BGP table of `family`.
    fn bgp_routes_on(&self, router: &str, family: AddressFamily) -> Result<BgpRoutes> {
        frr::parse_routes(&self.vtysh_on(router, &frr::routes_command(family))?)
    }
    /// Runs `command` in the router's vtysh and returns its standard
    /// output; fails when vtysh does. Several commands go in one call
    /// separated by `\n` (vtysh runs each line in order), e.g.
    /// `"configure terminal\nrouter bgp 64512\nneighbor 172.30.0.10 password s3cret"`.
    fn vtysh(&self, command: &str) -> Result<String> {
        let _ = command;
        bail!("cluster {:?} runs no BGP router", self.name())
    }
    /// Restarts the router (its sessions drop) and returns once it answers
    /// vtysh again, from its start-up configuration (changes made through
    /// [`Cluster::vtysh`] are gone).
    fn restart_router(&self) -> Result<()> {
        bail!("cluster {:?} runs no BGP router", self.name())
    }
    /// Runs `argv` where the router's routes are installed (lab: the
    /// external namespace; kind: the FRR container).
    fn exec_on_router(&self, argv: &[&str]) -> Result<Output> {
        let _ = argv;
        bail!("cluster {:?} runs no BGP router", self.name())
    }
    /// The router's network namespace as `ip netns` names it, where the
    /// suites capture what the router receives.
    fn router_netns(&self) -> Result<String> {
        bail!("cluster {:?} runs no BGP router", self.name())
    }
    /// The router's BGP neighbors (`show bgp neighbors json`), by address.
    fn bgp_neighbors(&self) -> Result<BTreeMap<IpAddr, NeighborStatus>> {
        frr::parse_neighbors(&self.vtysh(frr::NEIGHBORS_COMMAND)?)
    }
    /// The router's BGP table of `family` (`show bgp <family> unicast json
    /// detail`): prefix -> paths with next hops, LOCAL_PREF, communities.
    fn bgp_routes(&self, family: AddressFamily) -> Result<BgpRoutes> {
        frr::parse_routes(&self.vtysh(&frr::routes_command(family))?)
    }
    /// The BGP routes of both families that FRR installed into the
    /// router's kernel table (`ip -j route show proto bgp`).
    fn router_kernel_routes(&self) -> Result<Vec<KernelRoute>> {
        let mut routes = Vec::new();
        for family in [AddressFamily::Ipv4, AddressFamily::Ipv6] {
            let argv = frr::kernel_routes_argv(family);
            let out = self.exec_on_router(&argv)?;
            if !out.status.success() {
                bail!(
                    "`{}` on the router failed: {}",
                    argv.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            routes.extend(
                frr::parse_kernel_routes(&String::from_utf8_lossy(&out.stdout))
                    .with_context(|| argv.join(" "))?,
            );
        }
        Ok(routes)
    }
    /// A new cluster beside this one with nothing of metallb-rs in it but
    /// its namespace, whose nodes run the metallb-rs image's containers
    /// (for a spec that installs metallb-rs itself, through the Helm
    /// chart); removed when the handle is dropped. `None` where the
    /// provider cannot make one from here (only the lab can).
    fn fresh_for_chart(&self) -> Result<Option<FreshCluster>> {
        Ok(None)
    }
}

/// A cluster made for one spec ([`Cluster::fresh_for_chart`]): removed
/// by [`FreshCluster::remove`], or when dropped.
pub struct FreshCluster {
    cluster: std::sync::Arc<dyn Cluster>,
    remove: Option<Box<dyn FnOnce() -> Result<()> + Send>>,
}

impl FreshCluster {
    /// `cluster`, removed by `remove`.
    pub fn new(
        cluster: std::sync::Arc<dyn Cluster>,
        remove: impl FnOnce() -> Result<()> + Send + 'static,
    ) -> Self {
        Self {
            cluster,
            remove: Some(Box::new(remove)),
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &std::sync::Arc<dyn Cluster> {
        &self.cluster
    }

    /// Removes the cluster now, saying whether that worked.
    pub fn remove(mut self) -> Result<()> {
        self.remove.take().map_or(Ok(()), |remove| remove())
    }
}

impl Drop for FreshCluster {
    fn drop(&mut self) {
        if let Some(remove) = self.remove.take()
            && let Err(e) = remove()
        {
            eprintln!("removing the fresh cluster {}: {e:#}", self.cluster.name());
        }
    }
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
    fn resume_speaker(&self, _: &str) -> Result<()> {
        Err(unavailable("resuming speakers"))
    }
    fn restart_controller(&self) -> Result<()> {
        Err(unavailable("restarting the controller"))
    }
    fn controller_takeover(&self) -> Result<()> {
        Err(unavailable("a controller takeover"))
    }
    fn set_api_reachable(&self, _: &str, _: bool) -> Result<()> {
        Err(unavailable("cutting a node off the API"))
    }
    fn set_api_latency(&self, _: &str, _: Option<Range<Duration>>) -> Result<()> {
        Err(unavailable("a node's API latency"))
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
    fn external_netns(&self) -> Result<Option<String>> {
        Err(unavailable("the external host"))
    }
    fn vtysh(&self, _: &str) -> Result<String> {
        Err(unavailable("the BGP router"))
    }
    fn restart_router(&self) -> Result<()> {
        Err(unavailable("the BGP router"))
    }
    fn exec_on_router(&self, _: &[&str]) -> Result<Output> {
        Err(unavailable("the BGP router"))
    }
}
