//! `cargo xtask bench failover`: how long a service address is lost when
//! its announcing node's speaker is killed (SIGKILL), stopped (SIGTERM) or
//! its link goes down (with its API path, or alone) - from the disruption until the external host
//! resolves the address to another node's MAC, and until HTTP to it
//! succeeds. Measured from the external host with our own ARP prober;
//! printed beside the detection timings the speakers run with. Each round
//! starts on a settled cluster: the node the election prefers answers
//! again (a restored node is back within gossip's rejoin period).

use super::arp::Prober;
use super::{percentile, with_service};
use anyhow::{Context, Result, bail};
use devenv::cluster::{Cluster, StopSignal};
use devenv::lab::cluster::LabCluster;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// What takes the announcing node away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// SIGKILL of its speaker: nothing is said, detection decides.
    Kill,
    /// SIGTERM: the speaker leaves (lease cleared, gossip leave).
    Term,
    /// The node's link goes down (and its API access with it).
    LinkDown,
    /// The node's data-plane link goes down while its API path stays up:
    /// its speaker says so on its lease.
    DataLinkDown,
}

impl Scenario {
    fn label(self) -> &'static str {
        match self {
            Scenario::Kill => "speaker SIGKILL",
            Scenario::Term => "speaker SIGTERM",
            Scenario::LinkDown => "link down",
            Scenario::DataLinkDown => "data link down, API up",
        }
    }

    fn disrupt(self, cluster: &LabCluster, node: &str) -> Result<()> {
        match self {
            Scenario::Kill => cluster.stop_speaker(node, StopSignal::Kill),
            Scenario::Term => cluster.stop_speaker(node, StopSignal::Term),
            Scenario::LinkDown => cluster.node_down(node),
            Scenario::DataLinkDown => cluster.link_down(node),
        }
    }

    fn restore(self, cluster: &LabCluster, node: &str) -> Result<()> {
        match self {
            Scenario::Kill | Scenario::Term => cluster.start_speaker(node),
            Scenario::LinkDown => cluster.node_up(node),
            Scenario::DataLinkDown => cluster.link_up(node),
        }
    }
}

/// The figures of one scenario.
#[derive(Debug, Clone)]
pub struct Figures {
    /// Which disruption.
    pub scenario: Scenario,
    /// Until ARP names another node, per run, sorted.
    pub arp: Vec<Duration>,
    /// Until HTTP succeeds through it, per run, sorted.
    pub http: Vec<Duration>,
}

/// One run's timings: (ARP moved, HTTP answered), from the disruption.
fn measure_once(
    rt: &tokio::runtime::Runtime,
    prober: &Prober,
    vip: Ipv4Addr,
    old: &str,
    node_macs: &BTreeMap<String, String>,
    disrupt: impl FnOnce() -> Result<()>,
) -> Result<(Duration, Duration)> {
    let t0 = Instant::now();
    disrupt()?;
    let deadline = t0 + Duration::from_secs(60);
    let mut last = None;
    let arp = loop {
        if let Some(mac) = rt.block_on(prober.resolve(vip, Duration::from_millis(50)))? {
            let mac = mac.to_string();
            if mac != old && node_macs.values().any(|m| *m == mac) {
                break t0.elapsed();
            }
            last = Some(mac);
        }
        if Instant::now() > deadline {
            bail!(
                "no other node answered for {vip} within 60 s of the disruption (last answer: {})",
                last.as_deref().unwrap_or("none")
            );
        }
    };
    let http = loop {
        // The kernel's neighbour entry may still name the old node.
        let _ = std::process::Command::new("ip")
            .args(["neigh", "flush", "to", &vip.to_string()])
            .status();
        if http_ok(SocketAddr::new(IpAddr::V4(vip), 18080)) {
            break t0.elapsed();
        }
        if Instant::now() > deadline {
            bail!("HTTP to {vip} did not answer within 60 s of the disruption");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok((arp, http))
}

fn http_ok(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(300)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"GET /hostname HTTP/1.0\r\nHost: bench\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 16];
    s.read(&mut buf)
        .is_ok_and(|n| buf[..n].starts_with(b"HTTP/1."))
}

/// How long a round waits, after the restored node answers again, for
/// the node that stood in to withdraw.
const SETTLE_AFTER: Duration = Duration::from_secs(2);

/// Waits until `home` answers for `vip` steadily again; returns how long
/// that took. A restored node rejoins gossip within the rejoin period.
fn settle(
    rt: &tokio::runtime::Runtime,
    prober: &Prober,
    vip: Ipv4Addr,
    home: &str,
) -> Result<Duration> {
    let t0 = Instant::now();
    loop {
        if current_mac(rt, prober, vip)? == home {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > Duration::from_secs(60) {
            bail!("{vip} was not answered from {home} again within 60 s of the restore");
        }
    }
}

/// The MAC announcing `vip` now, once one node answers steadily.
fn current_mac(rt: &tokio::runtime::Runtime, prober: &Prober, vip: Ipv4Addr) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = rt.block_on(prober.resolve(vip, Duration::from_millis(300)))?;
        std::thread::sleep(Duration::from_millis(300));
        let b = rt.block_on(prober.resolve(vip, Duration::from_millis(300)))?;
        if let (Some(a), Some(b)) = (a, b)
            && a == b
        {
            return Ok(a.to_string());
        }
        if Instant::now() > deadline {
            bail!("{vip} is not answered steadily by one node (last two answers: {a:?}, {b:?})");
        }
    }
}

/// Runs `rounds` of each scenario on `cluster` and prints the results.
pub fn run(cluster: &LabCluster, rounds: usize) -> Result<Vec<Figures>> {
    let nodes: Vec<String> = cluster.nodes().into_iter().map(|n| n.name).collect();
    let mut node_macs = BTreeMap::new();
    for n in &nodes {
        let out = cluster.exec_on_node(n, &["cat", "/sys/class/net/eth0/address"])?;
        node_macs.insert(
            n.clone(),
            String::from_utf8_lossy(&out.stdout).trim().to_lowercase(),
        );
    }
    let figures = with_service(cluster, &["172.30.0.230-172.30.0.239"], "failover", |vip| {
        let ns = cluster.external_namespace().to_owned();
        devenv::lab::enter::in_netns(&ns, || -> Result<Vec<Figures>> {
            let rt = devenv::runtime()?;
            let prober = rt.block_on(async { Prober::on_eth0() })?;
            let mut all = Vec::new();
            // The node the election prefers: each round starts once it
            // answers again, so every round measures one failure of a
            // settled cluster, not a second failure while the first
            // node is still rejoining.
            let home = current_mac(&rt, &prober, vip)?;
            for scenario in [
                Scenario::Term,
                Scenario::Kill,
                Scenario::LinkDown,
                Scenario::DataLinkDown,
            ] {
                let (mut arp, mut http) = (Vec::new(), Vec::new());
                for round in 0..rounds {
                    let mac = current_mac(&rt, &prober, vip)?;
                    let old = node_macs
                        .iter()
                        .find(|(_, m)| **m == mac)
                        .map(|(n, _)| n.clone())
                        .with_context(|| format!("{mac} is no node's eth0"))?;
                    let timed = measure_once(&rt, &prober, vip, &mac, &node_macs, || {
                        scenario.disrupt(cluster, &old)
                    });
                    scenario.restore(cluster, &old)?;
                    let (a, h) = timed
                        .with_context(|| format!("{} round {}", scenario.label(), round + 1))?;
                    eprintln!(
                        "{} round {}: {old} -> ARP {a:.2?}, HTTP {h:.2?}",
                        scenario.label(),
                        round + 1
                    );
                    arp.push(a);
                    http.push(h);
                    let back = settle(&rt, &prober, vip, &home)?;
                    eprintln!(
                        "  {vip} answered from its preferred node again {back:.2?} after the restore"
                    );
                    // Let the node that stood in see it too and withdraw.
                    std::thread::sleep(SETTLE_AFTER);
                }
                arp.sort();
                http.sort();
                all.push(Figures {
                    scenario,
                    arp,
                    http,
                });
            }
            Ok(all)
        })?
    })?;
    print(&figures);
    Ok(figures)
}

fn print(figures: &[Figures]) {
    let timing = metallb_rs::speaker::membership::Timing::default();
    println!(
        "failover of one L2 address (lab, {} round(s) each):",
        figures.first().map_or(0, |f| f.arp.len())
    );
    println!(
        "  {:<16} {:>10} {:>10} {:>10} {:>10}",
        "disruption", "ARP p50", "ARP max", "HTTP p50", "HTTP max"
    );
    for f in figures {
        let max = |v: &[Duration]| v.last().copied().unwrap_or_default();
        println!(
            "  {:<16} {:>9.0}ms {:>9.0}ms {:>9.0}ms {:>9.0}ms",
            f.scenario.label(),
            percentile(&f.arp, 50.0).as_secs_f64() * 1e3,
            max(&f.arp).as_secs_f64() * 1e3,
            percentile(&f.http, 50.0).as_secs_f64() * 1e3,
            max(&f.http).as_secs_f64() * 1e3,
        );
    }
    println!(
        "  configured: gossip probe period {:?}, declared down after ~{:?} (expected detection); presence lease renewed every {:?} while gossip agrees, every {:?} while a speaker sees trouble (a suspect or a down member), missed {:?} later",
        timing.probe_period,
        timing.expected_detection(),
        metallb_rs::speaker::presence::SLOW_RENEW,
        metallb_rs::speaker::presence::FAST_RENEW,
        metallb_rs::speaker::liveness::OVERDUE_MARGIN,
    );
    println!(
        "  goal: SIGTERM < 1 s; SIGKILL and link down < 3 s. Upstream without memberlist never moves a killed speaker's address; with memberlist ~4 s + GARP."
    );
}
