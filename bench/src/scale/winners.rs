//! Which node announces what: the bench's configuration as the speakers
//! build it, the speakers' election run over it, the ServiceL2Statuses
//! that show who announces, and a failover measured against them.

use super::Failover;
use anyhow::Result;
use devenv::cluster::Cluster;
use devenv::lab::cluster::LabCluster;
use k8s_openapi::api::core::v1::Service;
use kube::runtime::reflector::Store;
use metallb_rs::api::v1beta1::ServiceL2Status;
use metallb_rs::speaker::election::{self, Endpoints, NodeInfo};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The configuration the bench applies (pool `bench`, one
/// L2Advertisement for every node), as the speakers build it.
pub(super) fn bench_config() -> Result<metallb_rs::config::Config> {
    let mut res = metallb_rs::config::Resources::default();
    res.pools.push(serde_json::from_value(serde_json::json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": { "name": "bench", "namespace": metallb_rs::api::DEFAULT_NAMESPACE },
        "spec": { "addresses": ["10.200.0.0/16"] },
    }))?);
    res.l2_advertisements
        .push(serde_json::from_value(serde_json::json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
            "metadata": { "name": "bench", "namespace": metallb_rs::api::DEFAULT_NAMESPACE },
            "spec": {},
        }))?);
    metallb_rs::config::Config::build(&res, &metallb_rs::config::Options::default())
        .map_err(|e| anyhow::anyhow!("the bench configuration: {e}"))
}

/// The node that announces `ip`, every node but `without` alive.
pub(super) fn winner(
    config: &metallb_rs::config::Config,
    nodes: &[NodeInfo],
    without: Option<&str>,
    ip: IpAddr,
) -> Option<String> {
    let alive: BTreeSet<String> = nodes
        .iter()
        .map(|n| n.name.clone())
        .filter(|n| Some(n.as_str()) != without)
        .collect();
    let labels = BTreeMap::new();
    let endpoints = Endpoints {
        any_serving: true,
        nodes: BTreeSet::new(),
    };
    let input = election::Input {
        service_labels: &labels,
        shared: false,
        local: false,
        first_ip: ip,
        pool: "bench",
        advertisements: &config.l2_advertisements,
        nodes,
        alive: Some(&alive),
        endpoints: &endpoints,
        ignore_exclude_lb: false,
    };
    let (order, _) = election::ranking(&input).ok()?;
    order.first().map(|n| n.name.clone())
}

/// Which node's ServiceL2Status each bench service has.
pub(super) fn announced_by(statuses: &Store<ServiceL2Status>) -> BTreeMap<String, String> {
    statuses
        .state()
        .iter()
        .filter_map(|o| {
            let s = o.status.as_ref()?;
            Some((s.service_name.clone()?, s.node.clone()?))
        })
        .collect()
}

/// SIGKILLs the real speaker whose services fall most to the other real
/// nodes (the simulated ones answer nothing, so only those can be seen
/// moving); the time until the others announce all of those. Starts it
/// again afterwards.
pub(super) async fn failover(
    cluster: &LabCluster,
    config: &metallb_rs::config::Config,
    nodes: &[NodeInfo],
    real: &BTreeSet<&str>,
    svcs: &Store<Service>,
    statuses: &Store<ServiceL2Status>,
) -> Result<Option<Failover>> {
    // Per real node: the services it wins whose next winner is real too.
    let mut takeovers: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for s in &svcs.state() {
        let (Some(name), Some(ip)) = (
            s.metadata.name.clone(),
            metallb_rs::service::ingress_ips(s)
                .ok()
                .and_then(|i| i.first().copied()),
        ) else {
            continue;
        };
        let Some(w) = winner(config, nodes, None, ip) else {
            continue;
        };
        if !real.contains(w.as_str()) {
            continue;
        }
        if let Some(next) = winner(config, nodes, Some(&w), ip)
            && real.contains(next.as_str())
        {
            takeovers.entry(w).or_default().push((name, next));
        }
    }
    let Some((node, services)) = takeovers.into_iter().max_by_key(|(_, v)| v.len()) else {
        return Ok(None);
    };
    let t = Instant::now();
    cluster.stop_speaker(&node, devenv::cluster::StopSignal::Kill)?;
    // A status object to write per service taken over.
    let deadline = t + Duration::from_secs(60) + Duration::from_millis(20) * services.len() as u32;
    let result = loop {
        let announcing = announced_by(statuses);
        let moved = services
            .iter()
            .filter(|(svc, next)| announcing.get(svc) == Some(next))
            .count();
        let done = moved == services.len();
        if done || Instant::now() > deadline {
            break Failover {
                services: services.len(),
                moved,
                took: done.then(|| t.elapsed()),
                waited: t.elapsed(),
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    cluster.start_speaker(&node)?;
    Ok(Some(result))
}
