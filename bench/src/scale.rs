//! `cargo xtask bench scale`: S LoadBalancer services created at once in
//! a lab whose three real nodes run real speakers, beside N simulated
//! nodes ([`sim`]: Node objects that heartbeat and speaker presence
//! leases that renew, so every speaker's election, liveness and watches
//! carry a cluster of N + 3 nodes). For each size it prints:
//!
//! - time until every service had its IP, and until every service a real
//!   node won was announced with its ServiceL2Status, beside the time the
//!   API server alone took to accept the creations (the baseline);
//! - a speaker's CPU seconds for one full pass and for one single-service
//!   change (the idle rate of the same speaker subtracted);
//! - the controller's and each speaker's resident memory;
//! - in steady state, API requests per second per speaker and watch
//!   events per second received per speaker, counted by the lab API
//!   server, beside the kubelet's node-lease rate (0.1 writes/s per node);
//! - after SIGKILL of a real speaker, the time until the other real
//!   nodes announce the services they win next.

mod cpu;
mod print;
pub mod sim;
mod traffic;
mod winners;

use super::{rss_kib, service, setup, status_kib, teardown};
use anyhow::{Context, Result};
use devenv::cluster::Cluster;
use devenv::lab::cluster::LabCluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use metallb_rs::api::v1beta1::ServiceL2Status;
use metallb_rs::k8s::watch::Watches;
use metallb_rs::speaker::election::NodeInfo;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_util::task::AbortOnDropHandle;

/// RSS target per component: 20 MiB up to 1,000 services, 40 MiB at
/// 10,000 (interpolated linearly between, held beyond).
pub fn rss_target_mib(services: usize) -> f64 {
    let s = services.clamp(1_000, 10_000) as f64;
    20.0 + 20.0 * (s - 1_000.0) / 9_000.0
}

/// The kubelet's node-lease renewal rate: the API load per node a cluster
/// is built to carry (one write every 10 s).
pub const KUBELET_WRITES_PER_NODE: f64 = 0.1;

/// A failover measured.
#[derive(Debug, Clone, Copy)]
pub struct Failover {
    /// Services the other real nodes take over.
    pub services: usize,
    /// Those announced by their new node by the end.
    pub moved: usize,
    /// Until all were (None: not by the deadline).
    pub took: Option<Duration>,
    /// How long the bench waited.
    pub waited: Duration,
}

/// One benchmark size.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    /// Simulated nodes.
    pub nodes: usize,
    /// Services.
    pub services: usize,
}

/// What was measured for one size.
#[derive(Debug, Clone)]
pub struct Report {
    /// The size.
    pub size: Size,
    /// Time the API server took to accept all creations (baseline).
    pub created: Duration,
    /// Time until every service had an IP.
    pub assigned: Duration,
    /// Time until every service a real node won had its ServiceL2Status.
    pub announced: Duration,
    /// Services a real node won.
    pub won_by_real: usize,
    /// A speaker's CPU seconds for one full pass (mean of the speakers).
    pub pass_cpu: f64,
    /// A speaker's CPU seconds per single-service change.
    pub change_cpu: f64,
    /// (process, RSS KiB, of which anonymous memory (heap, stacks and
    /// the pages relocations dirtied) KiB).
    pub rss: Vec<(String, u64, u64)>,
    /// API requests per second per speaker in steady state.
    pub requests_per_speaker: f64,
    /// Of which writes.
    pub writes_per_speaker: f64,
    /// Writes per second per speaker by resource, where not negligible.
    pub writes_by_resource: Vec<(String, f64)>,
    /// How long after convergence the speakers' writes took to settle.
    pub settled: Duration,
    /// Watch events per second received per speaker in steady state.
    pub watch_events_per_speaker: f64,
    /// Rounds of simulated renewals that took longer than a period, of
    /// all rounds (the simulation not keeping up).
    pub late_rounds: (u64, u64),
    /// SIGKILL of a real speaker, when it has services the other real
    /// nodes take over.
    pub failover: Option<Failover>,
}

/// Runs every size in turn (services x nodes) on `cluster`, printing each
/// report as it completes.
pub fn run(cluster: &LabCluster, services: &[usize], nodes: &[usize]) -> Result<Vec<Report>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let client = rt.block_on(devenv::lab::cluster::client(cluster.kubeconfig()))?;
    let mut reports = Vec::new();
    for &n in nodes {
        for &s in services {
            let size = Size {
                nodes: n,
                services: s,
            };
            let result = rt.block_on(measure_size(cluster, &client, size));
            super::wait_if_interrupted();
            let cleanup = rt.block_on(async {
                teardown(&client).await?;
                sim::remove(&client, metallb_rs::api::DEFAULT_NAMESPACE).await
            });
            let report = result?;
            cleanup?;
            print::print(&report);
            reports.push(report);
        }
    }
    Ok(reports)
}

/// Measures one size: `size.nodes` simulated nodes beside the real ones
/// and `size.services` services created at once; then how long until
/// they were assigned and announced, the speakers' steady-state API
/// traffic, their CPU per full pass and per change, every component's
/// memory, and a failover.
async fn measure_size(cluster: &LabCluster, client: &kube::Client, size: Size) -> Result<Report> {
    let real: Vec<String> = cluster.nodes().into_iter().map(|n| n.name).collect();
    let pids = cpu::speakers(cluster);
    // /16: room for 10,000 services and more.
    setup(client, &["10.200.0.0/16"], &real).await?;
    let simulation = Simulation::start(client, size.nodes).await?;
    let svcs: Api<Service> = Api::namespaced(client.clone(), super::NAMESPACE);
    // Kept until the end: dropping the watches ends them.
    let (_watches, seen) = watch_outcomes(client, &svcs).await?;
    let (start, created) = create_services(&svcs, size.services).await?;

    // Who wins each service, as every speaker decides it with every node
    // alive: the bench's advertisement covers every node, the backends
    // run on the real nodes, the policy is Cluster.
    let all_nodes: Vec<NodeInfo> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(NodeInfo::from_node)
        .collect();
    let config = winners::bench_config()?;
    let real_set: BTreeSet<&str> = real.iter().map(String::as_str).collect();
    let winning = Winning {
        config: &config,
        nodes: &all_nodes,
        real: &real_set,
    };
    let converged = wait_converged(start, size.services, &seen, &winning).await?;

    let steady = traffic::steady_state(client, pids.len()).await?;
    let pass_cpu = cpu::full_pass(client, &pids, &real, size.services).await?;
    let change_cpu = cpu::single_changes(&svcs, &pids, size.services).await?;
    let rss = memory(cluster, &real);
    let failover = winners::failover(
        cluster,
        &config,
        &all_nodes,
        &real_set,
        &seen.services,
        &seen.statuses,
    )
    .await?;
    Ok(Report {
        late_rounds: simulation.stop(),
        size,
        created,
        assigned: converged.assigned,
        announced: converged.announced,
        won_by_real: converged.won_by_real,
        pass_cpu,
        change_cpu,
        rss,
        requests_per_speaker: steady.requests_per_speaker,
        writes_per_speaker: steady.writes_per_speaker,
        writes_by_resource: steady.writes_by_resource,
        settled: steady.settled,
        watch_events_per_speaker: steady.watch_events_per_speaker,
        failover,
    })
}

/// The simulated nodes of one size, heartbeating until stopped.
struct Simulation {
    heartbeats: AbortOnDropHandle<()>,
    /// Rounds of renewals that took longer than a period.
    late: Arc<AtomicU64>,
    started: Instant,
}

impl Simulation {
    /// Creates `nodes` simulated nodes and starts their heartbeats, then
    /// gives every speaker time to see them alive before services come.
    async fn start(client: &kube::Client, nodes: usize) -> Result<Simulation> {
        let ns = metallb_rs::api::DEFAULT_NAMESPACE;
        // Simulated nodes an interrupted run left behind would collide.
        sim::remove(client, ns).await?;
        sim::create(client, nodes, ns).await?;
        let late = Arc::new(AtomicU64::new(0));
        let heartbeats = AbortOnDropHandle::new(tokio::spawn(sim::heartbeat(
            client.clone(),
            nodes,
            ns.to_owned(),
            late.clone(),
        )));
        let started = Instant::now();
        tokio::time::sleep(Duration::from_secs(3)).await;
        Ok(Simulation {
            heartbeats,
            late,
            started,
        })
    }

    /// Stops the heartbeats; the rounds that ran late, of all rounds.
    fn stop(self) -> (u64, u64) {
        drop(self.heartbeats);
        let rounds = self.started.elapsed().as_secs() / sim::PERIOD.as_secs().max(1);
        (self.late.load(Ordering::Relaxed), rounds)
    }
}

/// What the bench watches to see the outcome: its services (their IPs)
/// and the ServiceL2Statuses of them (who announces).
struct Seen {
    services: Store<Service>,
    statuses: Store<ServiceL2Status>,
}

/// Starts the bench's watches and waits until they have listed (a
/// minute at most). Watched, not listed in a loop: at 10,000 services
/// listing them five times a second is what the API server would spend
/// its time on.
async fn watch_outcomes(client: &kube::Client, svcs: &Api<Service>) -> Result<(Watches, Seen)> {
    // The components' own reflectors; dropping `watches` ends them.
    let mut watches = Watches::new();
    let services = watches.spawn(svcs.clone(), watcher::Config::default(), |_| {});
    let statuses = watches.spawn(
        Api::<ServiceL2Status>::namespaced(client.clone(), metallb_rs::api::DEFAULT_NAMESPACE),
        watcher::Config::default().labels(&format!(
            "metallb.io/service-namespace={}",
            super::NAMESPACE
        )),
        |_| {},
    );
    tokio::time::timeout(Duration::from_secs(60), watches.wait_until_listed())
        .await
        .context("the bench's watches did not list within 60 s")??;
    Ok((watches, Seen { services, statuses }))
}

/// Creates `count` services, 32 requests in flight; when it started, and
/// how long the API server took to accept them all (the baseline).
async fn create_services(svcs: &Api<Service>, count: usize) -> Result<(Instant, Duration)> {
    let start = Instant::now();
    let creations = futures::stream::iter(0..count)
        .map(|i| {
            let svcs = svcs.clone();
            async move {
                svcs.create(&PostParams::default(), &service(&format!("s{i:05}"))?)
                    .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    creations.into_iter().collect::<Result<Vec<_>>>()?;
    Ok((start, start.elapsed()))
}

/// What the election is run over: the bench's configuration, every
/// node, and which of them are real.
struct Winning<'a> {
    config: &'a metallb_rs::config::Config,
    nodes: &'a [NodeInfo],
    real: &'a BTreeSet<&'a str>,
}

/// How the services converged, from the creations' start.
struct Converged {
    /// Until every service had an IP.
    assigned: Duration,
    /// Until every service a real node won had its ServiceL2Status.
    announced: Duration,
    /// Services a real node won.
    won_by_real: usize,
}

/// Waits (15 minutes at most) until every one of `services` has its IP,
/// then until each one a real node wins shows that node in its
/// ServiceL2Status.
async fn wait_converged(
    start: Instant,
    services: usize,
    seen: &Seen,
    winning: &Winning<'_>,
) -> Result<Converged> {
    let deadline = start + Duration::from_secs(900);
    let (mut assigned, mut announced) = (None, None);
    let mut winners: BTreeMap<String, (IpAddr, String)> = BTreeMap::new();
    while announced.is_none() {
        anyhow::ensure!(Instant::now() < deadline, "not converged within 15 minutes");
        if assigned.is_none() {
            let with_ip: Vec<(String, IpAddr)> = seen
                .services
                .state()
                .iter()
                .filter_map(|s| {
                    let ip = *metallb_rs::service::ingress_ips(s).ok()?.first()?;
                    Some((s.metadata.name.clone()?, ip))
                })
                .collect();
            if with_ip.len() == services {
                assigned = Some(start.elapsed());
                winners = with_ip
                    .into_iter()
                    .filter_map(|(name, ip)| {
                        let w = winners::winner(winning.config, winning.nodes, None, ip)?;
                        Some((name, (ip, w)))
                    })
                    .filter(|(_, (_, w))| winning.real.contains(w.as_str()))
                    .collect();
            }
        }
        if assigned.is_some() {
            let announcing = winners::announced_by(&seen.statuses);
            if winners
                .iter()
                .all(|(svc, (_, w))| announcing.get(svc) == Some(w))
            {
                announced = Some(start.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(Converged {
        assigned: assigned.unwrap_or_default(),
        announced: announced.unwrap_or_default(),
        won_by_real: winners.len(),
    })
}

/// The controller's and each real speaker's resident memory: (process,
/// RSS KiB, anonymous KiB).
fn memory(cluster: &LabCluster, real: &[String]) -> Vec<(String, u64, u64)> {
    let mut rss = Vec::new();
    let mut names = vec!["controller".to_owned()];
    names.extend(real.iter().map(|n| format!("speaker-{n}")));
    for name in names {
        let pid = cluster.pid_of(&name);
        if let Some(kib) = pid.and_then(rss_kib) {
            let anon = pid.and_then(|p| status_kib(p, "RssAnon")).unwrap_or(0);
            rss.push((name, kib, anon));
        }
    }
    rss
}

#[cfg(test)]
mod tests {
    use super::rss_target_mib;

    #[test]
    fn the_rss_target_is_20_mib_at_1k_services_and_40_at_10k() {
        assert_eq!(rss_target_mib(100), 20.0);
        assert_eq!(rss_target_mib(1_000), 20.0);
        assert_eq!(rss_target_mib(10_000), 40.0);
        assert_eq!(rss_target_mib(100_000), 40.0);
        assert!((rss_target_mib(5_500) - 30.0).abs() < 1e-9);
    }
}
