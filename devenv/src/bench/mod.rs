//! Benchmarks that need a running lab (`cargo xtask bench arp|scale`).
//! Each prints its figures next to a baseline measured in the same run;
//! nothing here asserts a time. Shared here: MetalLB configuration and
//! backends for a benchmark, removed afterwards.

pub mod arp;
pub mod failover;
pub mod scale;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use std::time::{Duration, Instant};

/// The namespace benchmark services and pods live in.
pub const NAMESPACE: &str = "metallb-bench";

/// Creates the bench namespace, a pool `bench` with `addresses`, an
/// L2Advertisement, and a netexec backend labelled `app=bench` on every
/// node.
pub async fn setup(client: &kube::Client, addresses: &[&str], nodes: &[String]) -> Result<()> {
    teardown(client).await?;
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": NAMESPACE } }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .context("creating the bench namespace")?;
    let pools: Api<metallb_rs::api::v1beta1::IPAddressPool> =
        Api::namespaced(client.clone(), metallb_rs::api::DEFAULT_NAMESPACE);
    pools
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                "metadata": { "name": "bench" }, "spec": { "addresses": addresses },
            }))?,
        )
        .await
        .context("creating pool bench (another pool overlapping it? use a fresh lab)")?;
    let ads: Api<metallb_rs::api::v1beta1::L2Advertisement> =
        Api::namespaced(client.clone(), metallb_rs::api::DEFAULT_NAMESPACE);
    ads.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
            "metadata": { "name": "bench" }, "spec": {},
        }))?,
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    for node in nodes {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": format!("bench-{node}"), "labels": { "app": "bench" } },
            "spec": { "nodeName": node, "containers": [{
                "name": "netexec", "image": crate::lab::backend::NETEXEC_IMAGE,
                "args": ["netexec", "--http-port=18080", "--udp-port=18081"],
            }] },
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    Ok(())
}

/// A LoadBalancer service `name` selecting the bench backends.
pub fn service(name: &str) -> Result<Service> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "type": "LoadBalancer", "selector": { "app": "bench" }, "ports": [{ "port": 18080, "protocol": "TCP" }] },
    }))?)
}

/// Sets up the bench config with `addresses`, creates service `name` and
/// waits for its IPv4 address, runs `measure` with it, then removes
/// everything whatever the outcome.
pub fn with_service<T>(
    cluster: &crate::lab::cluster::LabCluster,
    addresses: &[&str],
    name: &str,
    measure: impl FnOnce(std::net::Ipv4Addr) -> Result<T>,
) -> Result<T> {
    use crate::cluster::Cluster;
    let rt = crate::runtime()?;
    let client = rt.block_on(crate::lab::cluster::client(cluster.kubeconfig()))?;
    let nodes: Vec<String> = cluster.nodes().into_iter().map(|n| n.name).collect();
    rt.block_on(setup(&client, addresses, &nodes))?;
    let result = (|| {
        let svcs: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
        rt.block_on(svcs.create(&PostParams::default(), &service(name)?))?;
        let vip = rt.block_on(wait_for_ipv4(&svcs, name))?;
        measure(vip)
    })();
    rt.block_on(teardown(&client))?;
    result
}

/// The IPv4 address the controller gives service `name`, within 60 s.
pub async fn wait_for_ipv4(svcs: &Api<Service>, name: &str) -> Result<std::net::Ipv4Addr> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = svcs.get(name).await?;
        let ip = metallb_rs::controller::service::ingress_ips(&s)
            .unwrap_or_default()
            .into_iter()
            .next();
        if let Some(std::net::IpAddr::V4(v4)) = ip {
            return Ok(v4);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "service {name} got no IPv4 address within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Removes everything [`setup`] made (also leftovers of an interrupted run).
pub async fn teardown(client: &kube::Client) -> Result<()> {
    let ns_api: Api<Namespace> = Api::all(client.clone());
    if ns_api.get_opt(NAMESPACE).await?.is_some() {
        ns_api.delete(NAMESPACE, &DeleteParams::default()).await?;
    }
    let metallb = metallb_rs::api::DEFAULT_NAMESPACE;
    let pools: Api<metallb_rs::api::v1beta1::IPAddressPool> =
        Api::namespaced(client.clone(), metallb);
    let ads: Api<metallb_rs::api::v1beta1::L2Advertisement> =
        Api::namespaced(client.clone(), metallb);
    if pools.get_opt("bench").await?.is_some() {
        pools.delete("bench", &DeleteParams::default()).await?;
    }
    if ads.get_opt("bench").await?.is_some() {
        ads.delete("bench", &DeleteParams::default()).await?;
    }
    // Namespace deletion is immediate in the lab; give controllers a moment.
    let deadline = Instant::now() + Duration::from_secs(30);
    while ns_api.get_opt(NAMESPACE).await?.is_some() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Resident memory of process `pid` in KiB (VmRSS).
pub fn rss_kib(pid: i32) -> Option<u64> {
    status_kib(pid, "VmRSS")
}

/// A `/proc/<pid>/status` figure in KiB (`VmRSS`, `RssAnon`, `RssFile`).
pub fn status_kib(pid: i32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// p-th percentile (0-100) of sorted `samples`.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(51));
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&v, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn rss_of_this_process() {
        let kib = rss_kib(std::process::id() as i32).expect("VmRSS");
        assert!(kib > 0);
    }
}
