//! `cargo xtask bench bgp`'s link-cut figure: from a node's link going
//! down (the lab's `link_down`: `eth0` down in the node's namespace, its
//! API path up) until the lab's first router has no path from that node
//! for a service's /32 - with BFD (the speaker's BFDProfile and the
//! router's profile both at [`INTERVAL_MS`] x [`MULTIPLIER`]) and, as the
//! baseline of the same run, without (the router waits for the BGP hold
//! time, [`HOLD_TIME`], the same BGPPeer in both). Each run cuts the next
//! node in turn; its link comes back and every path returns before the
//! next run.
//!
//! With BFD the figure is the detection time plus bfdd telling bgpd and
//! bgpd's best path; without, the hold time less the time since the last
//! keepalive. The router is polled through bgpd's vty socket, about a
//! millisecond a query. Nothing is asserted: the figures are printed.

use super::{max, nodes_with_path, p50, poll_routes, pool_route, ratio};
use crate::{LABEL, percentile, service, setup_bgp, teardown};
use anyhow::{Context, Result, bail};
use devenv::cluster::Cluster;
use devenv::frr::bfd::{self, BfdProfile};
use devenv::frr::{self, BgpRouter};
use devenv::lab::cluster::LabCluster;
use devenv::lab::frr::{LabRouter, Vty};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams, PostParams};
use metallb_rs::api::{DEFAULT_NAMESPACE, v1beta1, v1beta2};
use serde_json::json;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Both ends' BFD transmit and receive interval, ms.
pub const INTERVAL_MS: u32 = 100;
/// Both ends' BFD detect multiplier.
pub const MULTIPLIER: u8 = 3;
/// The BGPPeer's hold time in both halves (the lab's default, 90 s, would
/// make each run without BFD a minute and a half).
pub const HOLD_TIME: &str = "9s";
/// The speaker's BFDProfile and the router's profile.
const PROFILE: &str = "bench-fast";
/// The service whose /32 is watched.
const SERVICE: &str = "bgp-linkcut";
/// Longest a cut may take to show at the router: past the hold time.
const CUT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest the paths and sessions may take to return after a link does
/// (the speaker reconnects after its connect retry).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Pause between two polls of the router.
const POLL_PAUSE: Duration = Duration::from_millis(1);

/// What the link cuts measured, in run order.
#[derive(Debug, Clone, Default)]
pub struct LinkCut {
    /// Nodes of the lab (each run cuts the next).
    pub nodes: usize,
    /// Link down -> path gone, with BFD.
    pub with_bfd: Vec<Duration>,
    /// Link down -> path gone, without BFD (the hold timer).
    pub without_bfd: Vec<Duration>,
}

/// The lab as the runs see it: its first router over IPv4 and its nodes.
struct Bench<'a> {
    cluster: &'a LabCluster,
    router: LabRouter,
    asn: u32,
    names: Vec<String>,
    nodes: Vec<IpAddr>,
    pool: IpNet,
}

/// `runs` link cuts with BFD, then `runs` without, on `cluster` (a lab
/// with `--protocol bgp`); prints the figures.
pub fn link_cut(cluster: &LabCluster, runs: usize) -> Result<LinkCut> {
    let first: BgpRouter = cluster
        .bgp_routers()
        .into_iter()
        .next()
        .map(|mut r| {
            r.addresses.retain(IpAddr::is_ipv4);
            r
        })
        .filter(|r| !r.addresses.is_empty())
        .context("the bgp link cut needs the lab's first router with IPv4")?;
    let (names, nodes) = super::nodes_v4(cluster, "the bgp link cut")?;
    let bench = Bench {
        cluster,
        router: cluster.bgp_router()?,
        asn: first.asn,
        names,
        nodes,
        pool: frr::POOL[0].parse()?,
    };
    let peer = format!("{}-v4", first.name);
    let rt = devenv::runtime()?;
    let client = rt.block_on(devenv::lab::cluster::client(cluster.kubeconfig()))?;
    rt.block_on(setup_bgp(&client, &[first], &bench.names))?;
    let result = (|| -> Result<LinkCut> {
        rt.block_on(create_profile(&client))?;
        let svcs: Api<Service> = Api::namespaced(client.clone(), crate::NAMESPACE);
        rt.block_on(svcs.create(&PostParams::default(), &service(SERVICE)?))?;
        let mut vty = bench.router.bgpd_vty()?;
        let profile = BfdProfile::new(PROFILE).with_timers(INTERVAL_MS, MULTIPLIER);
        bench
            .router
            .vtysh(&bfd::enable_commands(&profile, bench.asn, &bench.nodes)?)?;
        rt.block_on(set_peer(&client, &peer, Some(PROFILE)))?;
        let with_bfd = phase(&bench, &mut vty, runs, true);
        bench
            .router
            .vtysh(&bfd::disable_commands(PROFILE, bench.asn, &bench.nodes))?;
        let with_bfd = with_bfd?;
        rt.block_on(set_peer(&client, &peer, None))?;
        let without_bfd = phase(&bench, &mut vty, runs, false)?;
        Ok(LinkCut {
            nodes: bench.nodes.len(),
            with_bfd,
            without_bfd,
        })
    })();
    crate::wait_if_interrupted();
    // Already done unless a step failed in between; an error then is FRR
    // saying there is nothing to remove.
    let _ = bench
        .router
        .vtysh(&bfd::disable_commands(PROFILE, bench.asn, &bench.nodes));
    rt.block_on(teardown(&client))?;
    let out = result?;
    print(&out);
    Ok(out)
}

/// The speaker's BFDProfile [`PROFILE`], labelled for [`teardown`].
async fn create_profile(client: &kube::Client) -> Result<()> {
    let api: Api<v1beta1::BFDProfile> = Api::namespaced(client.clone(), DEFAULT_NAMESPACE);
    let profile: v1beta1::BFDProfile = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "BFDProfile",
        "metadata": { "name": PROFILE, "labels": { LABEL.0: LABEL.1 } },
        "spec": {
            "receiveInterval": INTERVAL_MS, "transmitInterval": INTERVAL_MS,
            "detectMultiplier": MULTIPLIER,
        },
    }))?;
    api.create(&PostParams::default(), &profile)
        .await
        .with_context(|| format!("creating BFDProfile {PROFILE}"))?;
    Ok(())
}

/// BGPPeer `peer` with [`HOLD_TIME`] and `profile` as its `bfdProfile`
/// (`None`: without one).
async fn set_peer(client: &kube::Client, peer: &str, profile: Option<&str>) -> Result<()> {
    let api: Api<v1beta2::BGPPeer> = Api::namespaced(client.clone(), DEFAULT_NAMESPACE);
    // A merge patch: `null` removes the field.
    let patch = json!({ "spec": { "holdTime": HOLD_TIME, "bfdProfile": profile } });
    api.patch(peer, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("setting bfdProfile {profile:?} on BGPPeer {peer}"))?;
    Ok(())
}

/// `runs` cuts, each of the next node; waits for the whole picture before
/// each and after the last.
fn phase(bench: &Bench<'_>, vty: &mut Vty, runs: usize, with_bfd: bool) -> Result<Vec<Duration>> {
    let what = if with_bfd { "with BFD" } else { "without BFD" };
    let mut out = Vec::new();
    for i in 0..runs {
        let k = i % bench.nodes.len();
        let prefix = settled(bench, vty, with_bfd)
            .with_context(|| format!("before link cut {} {what}", i + 1))?;
        let took = cut_once(bench, vty, prefix, k)
            .with_context(|| format!("link cut {} {what}", i + 1))?;
        eprintln!(
            "bgp link cut {what} {}: {} down -> its path gone {took:.1?}",
            i + 1,
            bench.names[k]
        );
        out.push(took);
    }
    settled(bench, vty, with_bfd).with_context(|| format!("after the link cuts {what}"))?;
    Ok(out)
}

/// Waits until the router holds the service's /32 with a path from every
/// node and, `with_bfd`, its BFD session with every node up; returns the
/// /32.
fn settled(bench: &Bench<'_>, vty: &mut Vty, with_bfd: bool) -> Result<IpNet> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        let routes = poll_routes(vty)?;
        let whole = pool_route(&routes, &bench.pool, &bench.nodes)
            .filter(|(_, from)| *from == bench.nodes.len());
        let bfd_up = !with_bfd || {
            let peers = bfd::parse_peers(&bench.router.vtysh(bfd::PEERS_COMMAND)?)?;
            bench
                .nodes
                .iter()
                .all(|n| peers.get(n).is_some_and(bfd::BfdPeer::up))
        };
        if let Some((prefix, _)) = whole
            && bfd_up
        {
            return Ok(prefix);
        }
        if Instant::now() > deadline {
            bail!(
                "no path from every node to {SERVICE}'s /32 (or a BFD session down) within \
                 {SETTLE_TIMEOUT:?}; pool route: {:?}",
                pool_route(&routes, &bench.pool, &bench.nodes)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Takes node `k`'s link down, times until the router has no path from
/// it for `prefix`, and brings the link back whatever happened.
fn cut_once(bench: &Bench<'_>, vty: &mut Vty, prefix: IpNet, k: usize) -> Result<Duration> {
    let (name, addr) = (&bench.names[k], bench.nodes[k]);
    bench.cluster.link_down(name)?;
    let t0 = Instant::now();
    let gone = (|| -> Result<Duration> {
        loop {
            let routes = poll_routes(vty)?;
            let paths = routes.get(&prefix).map_or(&[][..], Vec::as_slice);
            if nodes_with_path(paths, &[addr]) == 0 {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > CUT_TIMEOUT {
                bail!(
                    "{name}'s path for {prefix} still at the router {CUT_TIMEOUT:?} after its \
                     link went down"
                );
            }
            std::thread::sleep(POLL_PAUSE);
        }
    })();
    let restored = bench.cluster.link_up(name);
    let took = gone?;
    restored?;
    Ok(took)
}

fn print(l: &LinkCut) {
    println!(
        "bgp: a node's link cut -> its path gone at the router, lab with {} nodes ({} run(s) each):",
        l.nodes,
        l.with_bfd.len()
    );
    println!(
        "  {:<40} {:>9} {:>9} {:>9} {:>9}",
        "", "min", "p50", "p90", "max"
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (label, v) in [
        (
            format!("with BFD ({INTERVAL_MS} ms x {MULTIPLIER})"),
            &l.with_bfd,
        ),
        (
            format!("without BFD (hold time {HOLD_TIME})"),
            &l.without_bfd,
        ),
    ] {
        let mut sorted = v.clone();
        sorted.sort();
        println!(
            "  {label:<40} {:>7.1}ms {:>7.1}ms {:>7.1}ms {:>7.1}ms",
            ms(sorted.first().copied().unwrap_or_default()),
            ms(p50(v)),
            ms(percentile(&sorted, 90.0)),
            ms(max(v))
        );
    }
    println!(
        "  without / with BFD, p50: {:.1}x",
        ratio(p50(&l.without_bfd), p50(&l.with_bfd))
    );
}
