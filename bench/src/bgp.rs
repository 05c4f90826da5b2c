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
mod latency;
mod testbed;
mod throughput;

pub use latency::{Latency, latency};
pub use testbed::{Testbed, announce_argv, announcer_conf, bgpd_argv, router_conf, state_dir};
pub use throughput::{Throughput, throughput};

use super::percentile;
use anyhow::{Result, bail};
use devenv::cluster::Cluster;
use devenv::frr::{self, AddressFamily, BgpPath, BgpRoutes};
use devenv::lab::cluster::LabCluster;
use devenv::lab::frr::Vty;
use ipnet::{IpNet, Ipv4Net};
use metallb_rs::speaker::bgp::advertise::RouteAttrs;
use metallb_rs::speaker::bgp::session::Table;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

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
/// Pause between two polls of the router.
const POLL_PAUSE: Duration = Duration::from_millis(1);
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

/// The router's IPv4 unicast table, read through its vty.
fn poll_routes(vty: &mut Vty) -> Result<BgpRoutes> {
    frr::parse_routes(&vty.command(&format!(
        "show bgp {} unicast json",
        AddressFamily::Ipv4.name()
    ))?)
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

#[cfg(test)]
mod tests {
    use super::*;
    use devenv::lab::netns;
    use std::path::Path;

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
