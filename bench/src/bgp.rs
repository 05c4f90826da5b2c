//! `cargo xtask bench bgp`, two measurements:
//!
//! - **Latency** on a lab brought up with `--protocol bgp`: from creating a
//!   LoadBalancer service until the lab's FRR router holds its /32 with a
//!   path from every node, and from deleting it until the /32 is gone.
//! - **UPDATE throughput**: [`Testbed`] is two network namespaces of its
//!   own joined by a veth, a router bgpd in one, and in the other an
//!   announcer of `--prefixes` /32s: the metallb-rs session
//!   (`bgp-announce`, [`announce_table`]) or, as the baseline of the same
//!   run, a bgpd with one `network` statement per prefix (FRR's defaults,
//!   and again with `coalesce-time 0`, which drops the one second FRR
//!   waits before its first UPDATE). Per run: from the router seeing the
//!   session Established, and from the announcer's start, until the
//!   router has accepted every prefix.
//!
//! The router is polled through bgpd's vty socket ([`devenv::lab::frr::Vty`],
//! well under a millisecond per query where a vtysh process takes tens),
//! so the figures resolve to about a millisecond. The throughput router
//! runs without zebra (`-Z`) and without logging: without zebra, bgpd logs
//! an error for every next hop it cannot register, which would slow it
//! down more than the announcers differ.

pub mod bfd;

use super::{percentile, service, setup_bgp, teardown};
use anyhow::{Context, Result, bail};
use devenv::cluster::Cluster;
use devenv::frr::{self, AddressFamily, BgpPath, BgpRoutes, NeighborStatus};
use devenv::lab::cluster::LabCluster;
use devenv::lab::frr::Vty;
use devenv::lab::netns;
use devenv::lab::process::{Processes, alive, log_tail};
use ipnet::{IpNet, Ipv4Net};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use metallb_rs::speaker::bgp::advertise::RouteAttrs;
use metallb_rs::speaker::bgp::session::Table;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The router's namespace. Lab names have no `_`, so no lab's namespace
/// (`<name>-...`) can be this one, and no lab's `down` removes it.
pub const ROUTER_NS: &str = "mlbbench_router";
/// The announcer's namespace.
pub const ANNOUNCER_NS: &str = "mlbbench_announce";
/// The router's address on the veth (TEST-NET-1: only inside these two
/// namespaces).
pub const ROUTER_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The announcer's address on the veth.
pub const ANNOUNCER_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// The first announced /32; the rest follow it.
pub const FIRST_PREFIX: Ipv4Addr = Ipv4Addr::new(10, 64, 0, 0);
/// The announcer's binary among the lab binaries.
pub const ANNOUNCE_BIN: &str = "bgp-announce";
/// Process name of the router bgpd under [`Processes`].
const ROUTER: &str = "router";
/// Process name of the announcer under [`Processes`].
const ANNOUNCER: &str = "announcer";
/// How long the router may take to answer after its start.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between two polls of the router.
const POLL_PAUSE: Duration = Duration::from_millis(1);

/// Where the throughput testbed keeps configs, pid files and logs.
pub fn state_dir() -> PathBuf {
    std::env::temp_dir().join("metallb-rs-bench-bgp")
}

// ---------------------------------------------------------------------------
// Pure parts.

/// `count` consecutive /32s from `first`; an error when they would run past
/// 255.255.255.255 or `count` is 0.
pub fn prefixes(first: Ipv4Addr, count: usize) -> Result<Vec<Ipv4Net>> {
    let start = u64::from(u32::from(first));
    let count64 = u64::try_from(count)?;
    if count == 0 || start + count64 - 1 > u64::from(u32::MAX) {
        bail!("{count} /32s from {first} do not fit in IPv4: choose fewer prefixes");
    }
    (0..count64)
        .map(|i| {
            let a = Ipv4Addr::from(u32::try_from(start + i)?);
            Ok(Ipv4Net::new(a, 32)?)
        })
        .collect()
}

/// The table `bgp-announce` hands its session: [`prefixes`] without
/// attributes.
pub fn announce_table(first: Ipv4Addr, count: usize) -> Result<Table> {
    Ok(prefixes(first, count)?
        .into_iter()
        .map(|p| (IpNet::V4(p), RouteAttrs::default()))
        .collect())
}

/// `bgp-announce`'s command line in `namespace`: one session to `peer` in
/// AS `asn` (iBGP) announcing `count` /32s from `first`.
pub fn announce_argv(
    bin: &Path,
    namespace: &str,
    peer: Ipv4Addr,
    asn: u32,
    count: usize,
    first: Ipv4Addr,
) -> Vec<String> {
    [
        "ip",
        "netns",
        "exec",
        namespace,
        &bin.display().to_string(),
        "--peer",
        &peer.to_string(),
        "--asn",
        &asn.to_string(),
        "--count",
        &count.to_string(),
        "--first",
        &first.to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// A bgpd without zebra (`-Z`) as root (`-S`) in `namespace`, every path
/// in `dir` (`frr.conf`, `bgpd.pid`, `bgpd.vty`), no TCP vty; logging to
/// standard output when `log`.
pub fn bgpd_argv(bgpd: &Path, namespace: &str, dir: &Path, log: bool) -> Vec<String> {
    let d = |f: &str| dir.join(f).display().to_string();
    let mut argv: Vec<String> = [
        "ip",
        "netns",
        "exec",
        namespace,
        &bgpd.display().to_string(),
        "-Z",
        "-S",
        "-f",
        &d("frr.conf"),
        "-i",
        &d("bgpd.pid"),
        "--vty_socket",
        &dir.display().to_string(),
        "-P",
        "0",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if log {
        argv.extend(["--log".into(), "stdout".into()]);
    }
    argv
}

/// The router's `frr.conf`: AS [`frr::ASN`], one passive iBGP neighbor
/// `announcer` (the announcer connects, as the speaker does), IPv4 unicast.
pub fn router_conf(router_id: Ipv4Addr, announcer: Ipv4Addr) -> String {
    let asn = frr::ASN;
    format!(
        "frr defaults traditional\nhostname mlbbench-router\n!\nrouter bgp {asn}\n \
         bgp router-id {router_id}\n no bgp default ipv4-unicast\n \
         neighbor {announcer} remote-as {asn}\n neighbor {announcer} passive\n \
         address-family ipv4 unicast\n  neighbor {announcer} activate\n exit-address-family\n\
         exit\n!\n"
    )
}

/// The baseline announcer's `frr.conf`: a `network` statement for each of
/// `prefixes` (announced without being in a RIB: `no bgp network
/// import-check`), one neighbor `router`; with `coalesce_ms`, the update
/// groups' `coalesce-time` (FRR waits 1000 ms by default).
pub fn announcer_conf(
    router_id: Ipv4Addr,
    router: Ipv4Addr,
    prefixes: &[Ipv4Net],
    coalesce_ms: Option<u32>,
) -> String {
    use std::fmt::Write;
    let asn = frr::ASN;
    let mut conf = format!(
        "frr defaults traditional\nhostname mlbbench-announcer\nlog stdout informational\n!\n\
         router bgp {asn}\n bgp router-id {router_id}\n no bgp default ipv4-unicast\n \
         no bgp network import-check\n"
    );
    if let Some(ms) = coalesce_ms {
        let _ = writeln!(conf, " coalesce-time {ms}");
    }
    let _ = write!(
        conf,
        " neighbor {router} remote-as {asn}\n address-family ipv4 unicast\n"
    );
    for p in prefixes {
        let _ = writeln!(conf, "  network {p}");
    }
    let _ = write!(
        conf,
        "  neighbor {router} activate\n exit-address-family\nexit\n!\n"
    );
    conf
}

/// Who announces in a throughput run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Announcer {
    /// The metallb-rs session (`bgp-announce`).
    MetallbRs,
    /// bgpd with `network` statements, FRR's defaults.
    Frr,
    /// The same with `coalesce-time 0`.
    FrrNoCoalesce,
}

impl Announcer {
    /// Every announcer, in the order a round runs them.
    pub const ALL: [Announcer; 3] = [
        Announcer::MetallbRs,
        Announcer::Frr,
        Announcer::FrrNoCoalesce,
    ];

    /// How the report names it.
    pub fn label(self) -> &'static str {
        match self {
            Announcer::MetallbRs => "metallb-rs session (bgp-announce)",
            Announcer::Frr => "FRR bgpd, network statements",
            Announcer::FrrNoCoalesce => "FRR bgpd, same + coalesce-time 0",
        }
    }
}

/// The order of `runs` rounds: each announcer once per round, so a change
/// in the machine's load touches all of them alike.
pub fn schedule(runs: usize) -> Vec<Announcer> {
    (0..runs).flat_map(|_| Announcer::ALL).collect()
}

/// Median of `samples` (any order).
pub fn p50(samples: &[Duration]) -> Duration {
    let mut v = samples.to_vec();
    v.sort();
    percentile(&v, 50.0)
}

/// Largest of `samples`.
pub fn max(samples: &[Duration]) -> Duration {
    samples.iter().copied().max().unwrap_or_default()
}

/// `a / b`, 0 when `b` is 0.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        0.0
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}

/// `count` per second over `d` (0 when `d` is 0).
pub fn rate(count: usize, d: Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        count as f64 / d.as_secs_f64()
    }
}

/// How many of `nodes` `paths` hold a valid path from (by the peer it came
/// from, or its next hop).
pub fn nodes_with_path(paths: &[BgpPath], nodes: &[IpAddr]) -> usize {
    nodes
        .iter()
        .filter(|n| {
            paths
                .iter()
                .any(|p| p.valid && (p.peer == Some(**n) || p.nexthops.contains(n)))
        })
        .count()
}

/// The route inside `pool` with a valid path from the most of `nodes`, and
/// how many (at least one).
pub fn pool_route(routes: &BgpRoutes, pool: &IpNet, nodes: &[IpAddr]) -> Option<(IpNet, usize)> {
    routes
        .iter()
        .filter(|(net, _)| pool.contains(*net))
        .map(|(net, paths)| (*net, nodes_with_path(paths, nodes)))
        .filter(|(_, n)| *n > 0)
        .max_by_key(|(_, n)| *n)
}

// ---------------------------------------------------------------------------
// Latency on the lab.

/// What the latency rounds measured (each in round order).
#[derive(Debug, Clone, Default)]
pub struct Latency {
    /// Nodes that had to announce.
    pub nodes: usize,
    /// Service created -> IPv4 address in its status.
    pub assigned: Vec<Duration>,
    /// Service created -> an EndpointSlice of it with a ready endpoint (the
    /// speakers announce nothing before; the lab makes slices by polling
    /// every 300 ms).
    pub endpoints: Vec<Duration>,
    /// Service created -> its /32 in the router from a first node.
    pub first_path: Vec<Duration>,
    /// Service created -> its /32 in the router with a path from every node.
    pub announced: Vec<Duration>,
    /// Service deleted -> no path left for its /32.
    pub withdrawn: Vec<Duration>,
}

/// One round's timings.
struct Round {
    assigned: Duration,
    endpoints: Duration,
    first_path: Duration,
    announced: Duration,
    withdrawn: Duration,
}

fn poll_routes(vty: &mut Vty) -> Result<BgpRoutes> {
    frr::parse_routes(&vty.command(&format!(
        "show bgp {} unicast json",
        AddressFamily::Ipv4.name()
    ))?)
}

/// Whether `slice` has a ready endpoint.
fn ready(slice: &EndpointSlice) -> bool {
    slice
        .endpoints
        .iter()
        .any(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
}

fn round(
    rt: &tokio::runtime::Runtime,
    svcs: &Api<Service>,
    vty: &mut Vty,
    name: &str,
    pool: &IpNet,
    nodes: &[IpAddr],
) -> Result<Round> {
    let timeout = Duration::from_secs(60);
    let t0 = Instant::now();
    rt.block_on(svcs.create(&PostParams::default(), &service(name)?))?;
    let mut assigned: Option<(Ipv4Addr, Duration)> = None;
    let mut endpoints = None;
    let mut first_path = None;
    let slices: Api<EndpointSlice> = Api::namespaced(svcs.clone().into_client(), super::NAMESPACE);
    let of_service = ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
    let (prefix, announced) = loop {
        if assigned.is_none() {
            let s = rt.block_on(svcs.get(name))?;
            let ip = metallb_rs::service::ingress_ips(&s)
                .unwrap_or_default()
                .into_iter()
                .find_map(|a| match a {
                    IpAddr::V4(v4) => Some(v4),
                    IpAddr::V6(_) => None,
                });
            assigned = ip.map(|ip| (ip, t0.elapsed()));
        }
        if endpoints.is_none()
            && rt
                .block_on(slices.list(&of_service))?
                .items
                .iter()
                .any(ready)
        {
            endpoints = Some(t0.elapsed());
        }
        let routes = poll_routes(vty)?;
        if let Some((net, from)) = pool_route(&routes, pool, nodes) {
            let now = t0.elapsed();
            first_path.get_or_insert(now);
            if from == nodes.len() {
                break (net, now);
            }
        }
        if t0.elapsed() > timeout {
            let paths = routes
                .iter()
                .filter(|(n, _)| pool.contains(*n))
                .map(|(n, p)| format!("{n}: {} path(s)", p.len()))
                .collect::<Vec<_>>();
            bail!(
                "service {name} ({}) not in the router with a path from each of {nodes:?} within {timeout:?}; pool routes there: {paths:?}",
                assigned.map_or("no IP yet".into(), |(ip, _)| ip.to_string())
            );
        }
        std::thread::sleep(POLL_PAUSE);
    };
    let (ip, assigned) = match assigned {
        Some(a) => a,
        // Announced before this loop read the status: read it now.
        None => {
            let s = rt.block_on(svcs.get(name))?;
            let ip = metallb_rs::service::ingress_ips(&s)
                .unwrap_or_default()
                .into_iter()
                .find_map(|a| match a {
                    IpAddr::V4(v4) => Some(v4),
                    IpAddr::V6(_) => None,
                })
                .with_context(|| format!("{prefix} is announced but {name} has no IPv4"))?;
            (ip, announced)
        }
    };
    if prefix != IpNet::V4(Ipv4Net::from(ip)) {
        bail!("the router got {prefix}, but service {name} has {ip}: another service in the pool?");
    }
    let t1 = Instant::now();
    rt.block_on(svcs.delete(name, &DeleteParams::default()))?;
    let withdrawn = loop {
        if !poll_routes(vty)?.contains_key(&prefix) {
            break t1.elapsed();
        }
        if t1.elapsed() > timeout {
            bail!("{prefix} still in the router {timeout:?} after deleting {name}");
        }
        std::thread::sleep(POLL_PAUSE);
    };
    Ok(Round {
        assigned,
        endpoints: endpoints.unwrap_or(announced),
        first_path: first_path.unwrap_or(announced),
        announced,
        withdrawn,
    })
}

/// Every node's name and IPv4 address, in the lab's order; an error
/// naming `what` unless every node has one.
pub(crate) fn nodes_v4(cluster: &LabCluster, what: &str) -> Result<(Vec<String>, Vec<IpAddr>)> {
    let node_list = cluster.nodes();
    let names: Vec<String> = node_list.iter().map(|n| n.name.clone()).collect();
    let nodes: Vec<IpAddr> = node_list
        .iter()
        .filter_map(|n| n.addresses.iter().copied().find(IpAddr::is_ipv4))
        .collect();
    if nodes.is_empty() || nodes.len() != names.len() {
        bail!("{what} needs IPv4 on every node");
    }
    Ok((names, nodes))
}

/// `rounds` services created and deleted one at a time on `cluster` (a lab
/// with `--protocol bgp`), after one warm-up round; prints the figures.
pub fn latency(cluster: &LabCluster, rounds: usize) -> Result<Latency> {
    let router = cluster.bgp_router()?;
    // The first router only (the one `router` queries), over IPv4.
    let routers: Vec<frr::BgpRouter> = cluster
        .bgp_routers()
        .into_iter()
        .take(1)
        .map(|mut r| {
            r.addresses.retain(IpAddr::is_ipv4);
            r
        })
        .filter(|r| !r.addresses.is_empty())
        .collect();
    if routers.is_empty() {
        bail!("the bgp latency needs IPv4 on the router");
    }
    let (names, nodes) = nodes_v4(cluster, "the bgp latency")?;
    let pool: IpNet = frr::POOL[0].parse()?;
    let rt = devenv::runtime()?;
    let client = rt.block_on(devenv::lab::cluster::client(cluster.kubeconfig()))?;
    rt.block_on(setup_bgp(&client, &routers, &names))?;
    let result = (|| {
        let mut vty = router.bgpd_vty()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let n = frr::parse_neighbors(&vty.command(frr::NEIGHBORS_COMMAND)?)?;
            if nodes
                .iter()
                .all(|a| n.get(a).is_some_and(NeighborStatus::established))
            {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "the nodes' sessions are not all Established within 60 s: {:?}",
                    frr::states(&n)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let svcs: Api<Service> = Api::namespaced(client.clone(), super::NAMESPACE);
        // Backends start and endpoints appear during the first service.
        round(&rt, &svcs, &mut vty, "bgp-warmup", &pool, &nodes).context("warm-up round")?;
        let mut out = Latency {
            nodes: nodes.len(),
            ..Latency::default()
        };
        for i in 0..rounds {
            // Rounds start at different phases of the lab's 300 ms
            // endpoint poller, not all at the same one.
            std::thread::sleep(Duration::from_millis((i as u64 * 97) % 300));
            let r = round(&rt, &svcs, &mut vty, &format!("bgp-{i}"), &pool, &nodes)
                .with_context(|| format!("round {}", i + 1))?;
            eprintln!(
                "bgp latency round {}: IP {:.1?}, endpoints {:.1?}, first path {:.1?}, every node {:.1?}, withdrawn {:.1?}",
                i + 1,
                r.assigned,
                r.endpoints,
                r.first_path,
                r.announced,
                r.withdrawn
            );
            out.assigned.push(r.assigned);
            out.endpoints.push(r.endpoints);
            out.first_path.push(r.first_path);
            out.announced.push(r.announced);
            out.withdrawn.push(r.withdrawn);
        }
        Ok(out)
    })();
    super::wait_if_interrupted();
    rt.block_on(teardown(&client))?;
    let out = result?;
    print_latency(&out);
    Ok(out)
}

fn print_latency(l: &Latency) {
    println!(
        "bgp: one LoadBalancer service at a time, lab with {} nodes and the FRR router ({} round(s)):",
        l.nodes,
        l.announced.len()
    );
    println!("  {:<46} {:>9} {:>9}", "", "p50", "max");
    // What the speakers and FRR add once there is something to announce.
    let speaker: Vec<Duration> = l
        .announced
        .iter()
        .zip(&l.endpoints)
        .map(|(a, e)| a.saturating_sub(*e))
        .collect();
    for (label, v) in [
        ("service created -> IP assigned", &l.assigned),
        ("service created -> EndpointSlice ready (lab)", &l.endpoints),
        ("service created -> /32 in FRR from a node", &l.first_path),
        (
            "service created -> /32 in FRR from every node",
            &l.announced,
        ),
        ("EndpointSlice ready -> /32 from every node", &speaker),
        ("service deleted -> /32 withdrawn from FRR", &l.withdrawn),
    ] {
        println!(
            "  {label:<46} {:>7.1}ms {:>7.1}ms",
            p50(v).as_secs_f64() * 1e3,
            max(v).as_secs_f64() * 1e3
        );
    }
}

// ---------------------------------------------------------------------------
// Throughput in two namespaces of our own.

/// One throughput run, as the router saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Announcer started -> session Established.
    pub start_to_established: Duration,
    /// Established -> every prefix accepted.
    pub established_to_all: Duration,
}

impl Run {
    /// Announcer started -> every prefix accepted.
    pub fn start_to_all(&self) -> Duration {
        self.start_to_established + self.established_to_all
    }
}

/// What the throughput runs measured.
#[derive(Debug, Clone, Default)]
pub struct Throughput {
    /// Prefixes per run.
    pub prefixes: usize,
    /// Runs per announcer, in run order.
    pub runs: BTreeMap<Announcer, Vec<Run>>,
    /// Mean time between two polls of the router.
    pub poll_interval: Duration,
}

/// The router and announcer namespaces, the veth between them and the
/// router bgpd; removed on drop (and by [`Testbed::destroy`] after a
/// crash or from a Ctrl-C handler).
pub struct Testbed {
    procs: Processes,
    dir: PathBuf,
    bgpd: PathBuf,
    vty: Vty,
    polls: u64,
    polling: Duration,
}

fn ip(args: &[&str]) -> Result<()> {
    netns::run("ip", args)?;
    Ok(())
}

impl Testbed {
    /// Removes what an earlier run left, then makes the namespaces and the
    /// veth, and starts the router; returns once it answers. Removes what
    /// it made when it fails; a Ctrl-C meanwhile waits for it.
    pub fn create() -> Result<Testbed> {
        netns::require_privileges()?;
        let _guard = super::cleanup_lock();
        Self::destroy()?;
        Self::make().inspect_err(|_| {
            if let Err(e) = Self::destroy() {
                eprintln!("removing the bgp testbed: {e:#}");
            }
        })
    }

    fn make() -> Result<Testbed> {
        let dir = state_dir();
        let bgpd = devenv::lab::frr::binaries()?.bgpd;
        for d in [dir.join(ROUTER), dir.join(ANNOUNCER)] {
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        }
        ip(&["netns", "add", ROUTER_NS])?;
        ip(&["netns", "add", ANNOUNCER_NS])?;
        // Made inside the router's namespace, its peer moved at once: the
        // root namespace never holds either end.
        ip(&[
            "-n",
            ROUTER_NS,
            "link",
            "add",
            "veth0",
            "type",
            "veth",
            "peer",
            "name",
            "veth0",
            "netns",
            ANNOUNCER_NS,
        ])?;
        for (ns, addr) in [(ROUTER_NS, ROUTER_ADDR), (ANNOUNCER_NS, ANNOUNCER_ADDR)] {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "veth0",
            ])?;
            ip(&["-n", ns, "link", "set", "veth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let router_dir = dir.join(ROUTER);
        std::fs::write(
            router_dir.join("frr.conf"),
            router_conf(ROUTER_ADDR, ANNOUNCER_ADDR),
        )?;
        let procs = Processes::new(&dir);
        let pid = procs.ensure(
            ROUTER,
            &bgpd_argv(&bgpd, ROUTER_NS, &router_dir, false),
            &[],
        )?;
        let deadline = Instant::now() + START_TIMEOUT;
        let vty = loop {
            if !alive(pid) {
                bail!(
                    "the router bgpd exited right after starting: {}",
                    log_tail(&procs.log_file(ROUTER), 10)
                );
            }
            if let Ok(mut vty) = Vty::connect(&router_dir.join("bgpd.vty"))
                && vty
                    .command(frr::NEIGHBORS_COMMAND)
                    .is_ok_and(|n| frr::parse_neighbors(&n).is_ok())
            {
                break vty;
            }
            if Instant::now() > deadline {
                bail!("the router bgpd did not answer within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(Testbed {
            procs,
            dir,
            bgpd,
            vty,
            polls: 0,
            polling: Duration::ZERO,
        })
    }

    /// The router's view of the announcer.
    fn neighbor(&mut self) -> Result<NeighborStatus> {
        let t = Instant::now();
        let text = self
            .vty
            .command(&format!("show bgp neighbors {ANNOUNCER_ADDR} json"))?;
        self.polls += 1;
        self.polling += t.elapsed();
        frr::parse_neighbors(&text)?
            .remove(&IpAddr::V4(ANNOUNCER_ADDR))
            .with_context(|| format!("the router has no neighbor {ANNOUNCER_ADDR}"))
    }

    /// Waits until the router listens for the announcer again (after a
    /// session ends FRR stays Idle for about a second) with no prefix.
    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let n = self.neighbor()?;
            if matches!(n.state.as_str(), "Active" | "Connect") && n.accepted_prefixes == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the router did not get ready for the next run within 180 s: {} with {} prefixes",
                    n.state,
                    n.accepted_prefixes
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One run of `who` announcing `prefixes`; `bin_dir` holds
    /// `bgp-announce`.
    pub fn run(&mut self, who: Announcer, bin_dir: &Path, prefixes: &[Ipv4Net]) -> Result<Run> {
        self.wait_ready()?;
        let dir = self.dir.join(ANNOUNCER);
        let argv = match who {
            Announcer::MetallbRs => announce_argv(
                &bin_dir.join(ANNOUNCE_BIN),
                ANNOUNCER_NS,
                ROUTER_ADDR,
                frr::ASN,
                prefixes.len(),
                prefixes.first().map_or(FIRST_PREFIX, Ipv4Net::addr),
            ),
            Announcer::Frr | Announcer::FrrNoCoalesce => {
                let coalesce = (who == Announcer::FrrNoCoalesce).then_some(0);
                std::fs::write(
                    dir.join("frr.conf"),
                    announcer_conf(ANNOUNCER_ADDR, ROUTER_ADDR, prefixes, coalesce),
                )?;
                bgpd_argv(&self.bgpd, ANNOUNCER_NS, &dir, true)
            }
        };
        let timeout = Duration::from_secs(60) + Duration::from_millis(prefixes.len() as u64);
        let t0 = Instant::now();
        let pid = self.procs.ensure(ANNOUNCER, &argv, &[])?;
        let measured = (|| {
            let mut established = None;
            loop {
                let n = self.neighbor()?;
                let now = t0.elapsed();
                if established.is_none() && n.established() {
                    established = Some(now);
                }
                if let Some(e) = established
                    && n.accepted_prefixes >= prefixes.len() as u64
                {
                    return Ok(Run {
                        start_to_established: e,
                        established_to_all: now - e,
                    });
                }
                if !alive(pid) {
                    bail!(
                        "the announcer exited: {}",
                        log_tail(&self.procs.log_file(ANNOUNCER), 10)
                    );
                }
                if now > timeout {
                    bail!(
                        "the router did not accept {} prefixes within {timeout:?}: {}, {} accepted",
                        prefixes.len(),
                        n.state,
                        n.accepted_prefixes
                    );
                }
                std::thread::sleep(POLL_PAUSE);
            }
        })();
        self.procs.stop(ANNOUNCER, Duration::from_secs(5));
        forget_crash_dir(pid);
        measured.with_context(|| format!("{} run", who.label()))
    }

    /// Mean time one poll of the router took (its reply, parsing included),
    /// plus the pause between polls.
    pub fn poll_interval(&self) -> Duration {
        if self.polls == 0 {
            return Duration::ZERO;
        }
        self.polling / u32::try_from(self.polls).unwrap_or(u32::MAX) + POLL_PAUSE
    }

    /// Stops the testbed's processes and removes its namespaces and state
    /// directory, whatever state a crash left; returns what it removed.
    pub fn destroy() -> Result<Vec<String>> {
        netns::require_privileges()?;
        let dir = state_dir();
        let procs = Processes::new(&dir);
        let mut removed = Vec::new();
        for name in [ANNOUNCER, ROUTER] {
            if let Some(pid) = procs.pid(name) {
                procs.stop(name, Duration::from_secs(5));
                forget_crash_dir(pid);
                removed.push(format!("process {name}"));
            }
        }
        let all = netns::list_namespaces()?;
        for ns in [ANNOUNCER_NS, ROUTER_NS] {
            if all.iter().any(|n| n == ns) {
                netns::kill_processes(ns, Duration::from_secs(2))?;
                ip(&["netns", "del", ns])?;
                removed.push(format!("namespace {ns}"));
            }
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
            removed.push(format!("directory {}", dir.display()));
        }
        Ok(removed)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // After Ctrl-C the interrupt handler removes it.
        let _guard = super::cleanup_lock();
        if let Err(e) = Self::destroy() {
            eprintln!("removing the bgp testbed: {e:#}");
        }
    }
}

/// FRR keeps a crash-log directory per daemon process in `/var/tmp/frr`;
/// removes the one of bgpd `pid` (nothing when it was no bgpd).
fn forget_crash_dir(pid: i32) {
    let _ = std::fs::remove_dir_all(format!("/var/tmp/frr/bgpd.{pid}"));
}

/// `runs` rounds of every [`Announcer`] announcing `count` /32s in a
/// [`Testbed`] (removed afterwards); `bin_dir` holds `bgp-announce`.
/// Prints the figures.
pub fn throughput(bin_dir: &Path, runs: usize, count: usize) -> Result<Throughput> {
    let list = prefixes(FIRST_PREFIX, count)?;
    let announce = bin_dir.join(ANNOUNCE_BIN);
    if !announce.is_file() {
        bail!(
            "{} is missing: build the devenv binaries",
            announce.display()
        );
    }
    let mut bed = Testbed::create()?;
    let mut out = Throughput {
        prefixes: count,
        ..Throughput::default()
    };
    for (i, who) in schedule(runs).into_iter().enumerate() {
        let r = bed.run(who, bin_dir, &list)?;
        eprintln!(
            "bgp throughput run {}/{}: {}: Established after {:.1?}, {count} prefixes {:.1?} later",
            i + 1,
            runs * Announcer::ALL.len(),
            who.label(),
            r.start_to_established,
            r.established_to_all
        );
        out.runs.entry(who).or_default().push(r);
    }
    out.poll_interval = bed.poll_interval();
    drop(bed);
    print_throughput(&out);
    Ok(out)
}

fn print_throughput(t: &Throughput) {
    let runs = t.runs.values().map(Vec::len).max().unwrap_or(0);
    println!(
        "bgp: {} /32s to an FRR 8.4 bgpd over a veth, iBGP ({runs} run(s) each, alternating; router polled every ~{:.1?}):",
        t.prefixes, t.poll_interval
    );
    println!(
        "  {:<36} {:>16} {:>16} {:>14}",
        "announcer", "Est.->all p50", "start->all p50", "prefixes/s"
    );
    let p = |who: Announcer| -> (Duration, Duration) {
        let v = t.runs.get(&who).map(Vec::as_slice).unwrap_or_default();
        let est: Vec<Duration> = v.iter().map(|r| r.established_to_all).collect();
        let start: Vec<Duration> = v.iter().map(Run::start_to_all).collect();
        (p50(&est), p50(&start))
    };
    for who in Announcer::ALL {
        let (est, start) = p(who);
        println!(
            "  {:<36} {:>14.1}ms {:>14.1}ms {:>14.0}",
            who.label(),
            est.as_secs_f64() * 1e3,
            start.as_secs_f64() * 1e3,
            rate(t.prefixes, est)
        );
    }
    let (ours_est, ours_start) = p(Announcer::MetallbRs);
    for base in [Announcer::Frr, Announcer::FrrNoCoalesce] {
        let (est, start) = p(base);
        println!(
            "  ratio ours/{}: Established->all {:.2}x, start->all {:.2}x",
            match base {
                Announcer::FrrNoCoalesce => "FRR coalesce-time 0",
                _ => "FRR",
            },
            ratio(ours_est, est),
            ratio(ours_start, start)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn prefixes_are_consecutive_host_routes_that_fit() {
        let p = prefixes(FIRST_PREFIX, 10_000).expect("fits");
        assert_eq!(p.len(), 10_000);
        assert_eq!(p[0].to_string(), "10.64.0.0/32");
        assert_eq!(p[255].to_string(), "10.64.0.255/32");
        assert_eq!(p[256].to_string(), "10.64.1.0/32");
        assert_eq!(p[9_999].to_string(), "10.64.39.15/32");
        let last = prefixes(Ipv4Addr::new(255, 255, 255, 254), 2).expect("fits exactly");
        assert_eq!(last[1].to_string(), "255.255.255.255/32");
        assert!(prefixes(Ipv4Addr::new(255, 255, 255, 254), 3).is_err());
        assert!(prefixes(FIRST_PREFIX, 0).is_err());
        let table = announce_table(FIRST_PREFIX, 3).expect("table");
        assert_eq!(
            table.keys().map(ToString::to_string).collect::<Vec<_>>(),
            ["10.64.0.0/32", "10.64.0.1/32", "10.64.0.2/32"]
        );
        assert!(table.values().all(|a| *a == RouteAttrs::default()));
    }

    #[test]
    fn the_announcer_and_bgpd_run_in_their_namespace_with_every_path_given() {
        let argv = announce_argv(
            Path::new("/t/release/bgp-announce"),
            ANNOUNCER_NS,
            ROUTER_ADDR,
            64512,
            10_000,
            FIRST_PREFIX,
        );
        assert_eq!(
            argv.join(" "),
            "ip netns exec mlbbench_announce /t/release/bgp-announce --peer 192.0.2.1 \
             --asn 64512 --count 10000 --first 10.64.0.0"
        );
        let dir = Path::new("/tmp/metallb-rs-bench-bgp/router");
        let quiet = bgpd_argv(Path::new("/usr/lib/frr/bgpd"), ROUTER_NS, dir, false);
        assert_eq!(
            quiet.join(" "),
            "ip netns exec mlbbench_router /usr/lib/frr/bgpd -Z -S \
             -f /tmp/metallb-rs-bench-bgp/router/frr.conf -i /tmp/metallb-rs-bench-bgp/router/bgpd.pid \
             --vty_socket /tmp/metallb-rs-bench-bgp/router -P 0"
        );
        let logged = bgpd_argv(Path::new("/usr/lib/frr/bgpd"), ROUTER_NS, dir, true);
        assert_eq!(logged[logged.len() - 2..], ["--log", "stdout"]);
        // No lab can own these namespaces: lab names have no '_'.
        for ns in [ROUTER_NS, ANNOUNCER_NS] {
            assert!(netns::validate_name(ns).is_err(), "{ns}");
        }
    }

    #[test]
    fn router_config_has_one_passive_ibgp_neighbor() {
        let conf = router_conf(ROUTER_ADDR, ANNOUNCER_ADDR);
        for line in [
            "router bgp 64512",
            " bgp router-id 192.0.2.1",
            " neighbor 192.0.2.2 remote-as 64512",
            " neighbor 192.0.2.2 passive",
            "  neighbor 192.0.2.2 activate",
        ] {
            assert!(conf.lines().any(|l| l == line), "{line:?} missing:\n{conf}");
        }
        assert!(!conf.contains("log "), "the router logs nothing: {conf}");
    }

    #[test]
    fn baseline_config_has_a_network_statement_per_prefix() {
        let list = prefixes(FIRST_PREFIX, 10_000).expect("fits");
        let conf = announcer_conf(ANNOUNCER_ADDR, ROUTER_ADDR, &list, None);
        let networks: Vec<&str> = conf
            .lines()
            .filter_map(|l| l.strip_prefix("  network "))
            .collect();
        assert_eq!(networks.len(), 10_000);
        assert_eq!(networks[0], "10.64.0.0/32");
        assert_eq!(networks[9_999], "10.64.39.15/32");
        for line in [
            " bgp router-id 192.0.2.2",
            " no bgp network import-check",
            " neighbor 192.0.2.1 remote-as 64512",
            "  neighbor 192.0.2.1 activate",
            " exit-address-family",
        ] {
            assert!(conf.lines().any(|l| l == line), "{line:?} missing");
        }
        // The statements sit inside the address family, before its end.
        let af = conf.find(" address-family ipv4 unicast").expect("af");
        let end = conf.find(" exit-address-family").expect("end");
        let first = conf.find("  network 10.64.0.0/32").expect("first");
        assert!(af < first && first < end);
        assert!(!conf.contains("coalesce-time"));
        let tuned = announcer_conf(ANNOUNCER_ADDR, ROUTER_ADDR, &list[..1], Some(0));
        assert!(tuned.lines().any(|l| l == " coalesce-time 0"), "{tuned}");
    }

    #[test]
    fn runs_alternate_and_statistics() {
        assert_eq!(
            schedule(2),
            [
                Announcer::MetallbRs,
                Announcer::Frr,
                Announcer::FrrNoCoalesce,
                Announcer::MetallbRs,
                Announcer::Frr,
                Announcer::FrrNoCoalesce
            ]
        );
        assert!(schedule(0).is_empty());
        assert_eq!(p50(&[d(30), d(10), d(20)]), d(20));
        assert_eq!(p50(&[]), Duration::ZERO);
        assert_eq!(max(&[d(30), d(10), d(20)]), d(30));
        assert_eq!(max(&[]), Duration::ZERO);
        assert!((ratio(d(50), d(200)) - 0.25).abs() < 1e-9);
        assert_eq!(ratio(d(50), Duration::ZERO), 0.0);
        assert!((rate(10_000, d(250)) - 40_000.0).abs() < 1e-6);
        assert_eq!(rate(1, Duration::ZERO), 0.0);
        let r = Run {
            start_to_established: d(5),
            established_to_all: d(20),
        };
        assert_eq!(r.start_to_all(), d(25));
    }

    fn path(peer: &str, valid: bool) -> BgpPath {
        let a: IpAddr = peer.parse().expect("ip");
        BgpPath {
            nexthops: vec![a],
            peer: Some(a),
            valid,
            ..BgpPath::default()
        }
    }

    #[test]
    fn a_pool_route_counts_the_nodes_with_a_valid_path() {
        let nodes: Vec<IpAddr> = ["172.30.0.10", "172.30.0.11"]
            .iter()
            .map(|a| a.parse().expect("ip"))
            .collect();
        let pool: IpNet = frr::POOL[0].parse().expect("pool");
        let vip: IpNet = "192.168.10.1/32".parse().expect("net");
        let outside: IpNet = "198.51.100.1/32".parse().expect("net");
        let mut routes = BgpRoutes::new();
        routes.insert(
            outside,
            vec![path("172.30.0.10", true), path("172.30.0.11", true)],
        );
        assert_eq!(pool_route(&routes, &pool, &nodes), None, "not in the pool");
        routes.insert(vip, vec![path("172.30.0.12", true)]);
        assert_eq!(pool_route(&routes, &pool, &nodes), None, "no node's path");
        routes.insert(vip, vec![path("172.30.0.10", true)]);
        assert_eq!(pool_route(&routes, &pool, &nodes), Some((vip, 1)));
        routes.insert(
            vip,
            vec![path("172.30.0.10", true), path("172.30.0.11", false)],
        );
        assert_eq!(
            pool_route(&routes, &pool, &nodes),
            Some((vip, 1)),
            "invalid path"
        );
        routes.insert(
            vip,
            vec![path("172.30.0.11", true), path("172.30.0.10", true)],
        );
        assert_eq!(pool_route(&routes, &pool, &nodes), Some((vip, 2)));
        // Read from FRR's own output: both nodes' paths of a recorded route.
        let recorded = frr::parse_routes(include_str!(
            "../../devenv/tests/fixtures/frr/routes-ipv4.json"
        ))
        .expect("recorded table");
        let any: IpNet = "0.0.0.0/0".parse().expect("net");
        assert_eq!(
            pool_route(&recorded, &any, &nodes),
            Some(("198.51.100.1/32".parse().expect("net"), 2))
        );
    }
}
