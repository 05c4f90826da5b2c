//! Benchmarks that need a running lab (`cargo xtask bench
//! arp|scale|failover|bgp`). Each prints its figures next to a baseline
//! measured in the same run; nothing here asserts a time. Shared here:
//! MetalLB configuration and backends for a benchmark, removed afterwards,
//! and the cleanup on Ctrl-C.

pub mod arp;
pub mod bgp;
pub mod failover;
pub mod scale;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use std::time::{Duration, Instant};

/// The namespace benchmark services and pods live in.
pub const NAMESPACE: &str = "metallb-bench";

/// The label on the MetalLB objects a BGP benchmark creates
/// ([`setup_bgp`]); [`teardown`] deletes whatever carries it.
pub const LABEL: (&str, &str) = ("metallb-rs.dev/bench", "bench");

/// Creates the bench namespace, a pool `bench` with `addresses`, an
/// L2Advertisement, and a netexec backend labelled `app=bench` on every
/// node.
pub async fn setup(client: &kube::Client, addresses: &[&str], nodes: &[String]) -> Result<()> {
    teardown(client).await?;
    backends(client, nodes).await?;
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
    Ok(())
}

/// Creates the bench namespace and a netexec backend labelled `app=bench`
/// on every node.
async fn backends(client: &kube::Client, nodes: &[String]) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": NAMESPACE } }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .context("creating the bench namespace")?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    for node in nodes {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": format!("bench-{node}"), "labels": { "app": "bench" } },
            "spec": { "nodeName": node, "containers": [{
                "name": "netexec", "image": devenv::lab::backend::NETEXEC_IMAGE,
                "args": ["netexec", "--http-port=18080", "--udp-port=18081"],
            }] },
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    Ok(())
}

/// Creates the bench namespace, backends on every node (as [`setup`]) and
/// the dev-env's BGP configuration for `routers` ([`devenv::frr::objects`]:
/// a BGPPeer per router address, pool [`devenv::frr::POOL_NAME`] with the
/// [`devenv::frr::POOL`] CIDRs of those families, a BGPAdvertisement),
/// labelled [`LABEL`].
pub async fn setup_bgp(
    client: &kube::Client,
    routers: &[devenv::frr::BgpRouter],
    nodes: &[String],
) -> Result<()> {
    teardown(client).await?;
    backends(client, nodes).await?;
    let objects = devenv::frr::objects(metallb_rs::api::DEFAULT_NAMESPACE, routers, LABEL);
    devenv::kind::validate(&objects)?;
    devenv::kind::apply::create_or_replace_all(client, &objects, Duration::from_secs(10)).await?;
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
    cluster: &devenv::lab::cluster::LabCluster,
    addresses: &[&str],
    name: &str,
    measure: impl FnOnce(std::net::Ipv4Addr) -> Result<T>,
) -> Result<T> {
    use devenv::cluster::Cluster;
    let rt = devenv::runtime()?;
    let client = rt.block_on(devenv::lab::cluster::client(cluster.kubeconfig()))?;
    let nodes: Vec<String> = cluster.nodes().into_iter().map(|n| n.name).collect();
    rt.block_on(setup(&client, addresses, &nodes))?;
    let result = (|| {
        let svcs: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
        rt.block_on(svcs.create(&PostParams::default(), &service(name)?))?;
        let vip = rt.block_on(wait_for_ipv4(&svcs, name))?;
        measure(vip)
    })();
    wait_if_interrupted();
    rt.block_on(teardown(&client))?;
    result
}

/// The IPv4 address the controller gives service `name`, within 60 s.
pub async fn wait_for_ipv4(svcs: &Api<Service>, name: &str) -> Result<std::net::Ipv4Addr> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = svcs.get(name).await?;
        let ip = metallb_rs::service::ingress_ips(&s)
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
    devenv::kind::apply::delete_metallb_config(
        client,
        metallb,
        &format!("{}={}", LABEL.0, LABEL.1),
    )
    .await?;
    // Namespace deletion is immediate in the lab; give controllers a moment.
    let deadline = Instant::now() + Duration::from_secs(30);
    while ns_api.get_opt(NAMESPACE).await?.is_some() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Set once a signal arrived: [`on_interrupt`]'s cleanup runs.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`on_interrupt`]'s handler has taken over.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Held by whoever removes what a benchmark made: the benchmark's own
/// cleanup or [`on_interrupt`]'s handler, never both at once.
static CLEANUP: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Blocks for good once [`on_interrupt`]'s handler has taken over (it
/// cleans up and exits the process); returns at once otherwise. For the
/// benchmark's own cleanup paths, so that they do not race the handler's.
pub fn wait_if_interrupted() {
    while interrupted() {
        std::thread::park();
    }
}

/// For the benchmark's own removal of namespaces and processes: waits as
/// [`wait_if_interrupted`], then holds off the interrupt handler's cleanup
/// until the guard drops (a signal during the removal waits for it rather
/// than racing it or cutting it short).
pub fn cleanup_lock() -> std::sync::MutexGuard<'static, ()> {
    wait_if_interrupted();
    CLEANUP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// On SIGINT (Ctrl-C) or SIGTERM: says so, runs `cleanup` and exits with
/// 130 or 143; a second signal exits at once. Install once per process,
/// before the benchmark makes anything: lab processes run in process
/// groups of their own, so without this an interrupted run leaves them.
/// The benchmark's own cleanup calls [`wait_if_interrupted`] first, or
/// holds [`cleanup_lock`] while it removes things.
pub fn on_interrupt(cleanup: impl FnOnce() + Send + 'static) -> Result<()> {
    let rt = std::sync::Arc::new(devenv::runtime()?);
    devenv::interrupt::on_interrupt(rt, "bench", move || {
        INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
        let _guard = CLEANUP
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cleanup();
    })
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

/// CPU time (user + system) process `pid` has used, in seconds.
pub fn cpu_seconds(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may hold spaces: state is the
    // first, utime the 12th, stime the 13th.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // In USER_HZ, which the kernel fixes at 100 for /proc on every
    // architecture it runs containers on.
    Some(ticks as f64 / 100.0)
}

/// The sum of every sample of `metric` in Prometheus text `text` whose
/// line contains each of `labels` (0 when there is none).
pub fn metric_sum(text: &str, metric: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with(['{', ' ']))
        .filter(|l| labels.iter().all(|s| l.contains(s)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
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
    fn metric_sums_add_every_matching_series() {
        let text = "# TYPE d counter\nd{interface=\"eth0\",reason=\"R\"} 3\nd{interface=\"eth1\",reason=\"R\"} 4\nd{interface=\"eth0\",reason=\"X\"} 9\nd_total 100\n";
        assert_eq!(metric_sum(text, "d", &["reason=\"R\""]), 7.0);
        assert_eq!(metric_sum(text, "d", &["reason=\"none\""]), 0.0);
        assert_eq!(metric_sum(text, "d_total", &[]), 100.0);
    }

    #[test]
    fn percentiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(51));
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&v, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn cpu_of_this_process_grows_with_work() {
        let before = cpu_seconds(std::process::id() as i32).expect("stat");
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let after = cpu_seconds(std::process::id() as i32).expect("stat");
        assert!(after > before, "{before} -> {after}");
    }

    #[test]
    fn rss_of_this_process() {
        let kib = rss_kib(std::process::id() as i32).expect("VmRSS");
        assert!(kib > 0);
    }
}
