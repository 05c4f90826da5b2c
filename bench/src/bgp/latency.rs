//! Latency on a lab brought up with `--protocol bgp`: from creating a
//! LoadBalancer service until the lab's FRR router holds its /32 with a
//! path from every node, and from deleting it until the /32 is gone.

use super::{POLL_PAUSE, max, nodes_v4, p50, poll_routes, pool_route};
use crate::{service, setup_bgp, teardown};
use anyhow::{Context, Result, bail};
use devenv::cluster::Cluster;
use devenv::frr::{self, NeighborStatus};
use devenv::lab::cluster::LabCluster;
use devenv::lab::frr::Vty;
use ipnet::{IpNet, Ipv4Net};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

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

/// Whether `slice` has a ready endpoint.
fn ready(slice: &EndpointSlice) -> bool {
    slice
        .endpoints
        .iter()
        .any(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
}

/// The IPv4 address service `name` shows in its status, if any yet.
fn ipv4_of(
    rt: &tokio::runtime::Runtime,
    svcs: &Api<Service>,
    name: &str,
) -> Result<Option<Ipv4Addr>> {
    let s = rt.block_on(svcs.get(name))?;
    Ok(metallb_rs::service::ingress_ips(&s)
        .unwrap_or_default()
        .into_iter()
        .find_map(|a| match a {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        }))
}

/// One round: creates service `name`, times it until it is assigned,
/// has a ready endpoint and is in the router from a first and from every
/// node, then deletes it and times the withdrawal.
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
    let slices: Api<EndpointSlice> = Api::namespaced(svcs.clone().into_client(), crate::NAMESPACE);
    let of_service = ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
    let (prefix, announced) = loop {
        if assigned.is_none() {
            let ip = ipv4_of(rt, svcs, name)?;
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
            let ip = ipv4_of(rt, svcs, name)?
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
        let svcs: Api<Service> = Api::namespaced(client.clone(), crate::NAMESPACE);
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
    crate::wait_if_interrupted();
    rt.block_on(teardown(&client))?;
    let out = result?;
    print_latency(&out);
    Ok(out)
}

/// Prints `l`: the median and the worst round of each step.
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
