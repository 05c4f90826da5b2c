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

pub mod sim;

use super::{cpu_seconds, metric_sum, rss_kib, service, setup, status_kib, teardown};
use anyhow::{Context, Result};
use devenv::cluster::Cluster;
use devenv::lab::cluster::LabCluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use metallb_rs::api::v1beta1::ServiceL2Status;
use metallb_rs::k8s::watch::Watches;
use metallb_rs::speaker::election::{self, Endpoints, NodeInfo};
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

/// The speakers' user at the lab API server.
const SPEAKER_USER: &str = "user=\"system:serviceaccount:metallb-system:speaker\"";

/// How long steady state is observed: three slow renewal periods, so a
/// speaker's renewals are counted whole.
const STEADY_WINDOW: Duration =
    Duration::from_secs(3 * metallb_rs::speaker::presence::SLOW_RENEW.as_secs());

/// Steady state starts once the speakers write less than this per second
/// each (a speaker still draining its queued events writes tens).
const SETTLED_WRITES: f64 = 1.0;
/// Over windows of this length.
const SETTLE_STEP: Duration = Duration::from_secs(5);
/// At most this long.
const SETTLE_MAX: Duration = Duration::from_secs(300);

/// The verbs that write.
const WRITE_VERBS: [&str; 4] = [
    "verb=\"create\"",
    "verb=\"update\"",
    "verb=\"patch\"",
    "verb=\"delete\"",
];

/// Single-service changes measured per size.
const CHANGES: usize = 100;

/// The window the speakers' idle CPU rate is measured over, right before
/// a measurement it is subtracted from.
const IDLE_WINDOW: Duration = Duration::from_secs(5);

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
            let result = rt.block_on(one(cluster, &client, size));
            super::wait_if_interrupted();
            let cleanup = rt.block_on(async {
                teardown(&client).await?;
                sim::remove(&client, metallb_rs::api::DEFAULT_NAMESPACE).await
            });
            let report = result?;
            cleanup?;
            print(&report);
            reports.push(report);
        }
    }
    Ok(reports)
}

/// Pids of the real speakers, by node.
fn speakers(cluster: &LabCluster) -> BTreeMap<String, i32> {
    cluster
        .nodes()
        .into_iter()
        .filter_map(|n| {
            Some((
                n.name.clone(),
                cluster.pid_of(&format!("speaker-{}", n.name))?,
            ))
        })
        .collect()
}

/// The speakers' CPU seconds, summed.
fn speakers_cpu(pids: &BTreeMap<String, i32>) -> f64 {
    pids.values().filter_map(|p| cpu_seconds(*p)).sum()
}

async fn one(cluster: &LabCluster, client: &kube::Client, size: Size) -> Result<Report> {
    let real: Vec<String> = cluster.nodes().into_iter().map(|n| n.name).collect();
    let pids = speakers(cluster);
    // /16: room for 10,000 services and more.
    setup(client, &["10.200.0.0/16"], &real).await?;
    let ns = metallb_rs::api::DEFAULT_NAMESPACE;
    // Simulated nodes an interrupted run left behind would collide.
    sim::remove(client, ns).await?;
    sim::create(client, size.nodes, ns).await?;
    let late = Arc::new(AtomicU64::new(0));
    let heartbeats = AbortOnDropHandle::new(tokio::spawn(sim::heartbeat(
        client.clone(),
        size.nodes,
        ns.to_owned(),
        late.clone(),
    )));
    let sim_started = Instant::now();
    // Every speaker sees every simulated node alive before services come.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let svcs: Api<Service> = Api::namespaced(client.clone(), super::NAMESPACE);
    // Watched, not listed in a loop: at 10,000 services listing them five
    // times a second is what the API server would spend its time on.
    // The components' own reflectors; dropping `watches` ends them.
    let mut watches = Watches::new();
    let services_seen = watches.spawn(svcs.clone(), watcher::Config::default(), |_| {});
    let statuses_seen = watches.spawn(
        Api::<ServiceL2Status>::namespaced(client.clone(), ns),
        watcher::Config::default().labels(&format!(
            "metallb.io/service-namespace={}",
            super::NAMESPACE
        )),
        |_| {},
    );
    tokio::time::timeout(Duration::from_secs(60), watches.wait_until_listed())
        .await
        .context("the bench's watches did not list within 60 s")??;
    let start = Instant::now();
    let creations = futures::stream::iter(0..size.services)
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
    let created = start.elapsed();

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
    let config = bench_config()?;
    let real_set: BTreeSet<&str> = real.iter().map(String::as_str).collect();
    let deadline = start + Duration::from_secs(900);
    let (mut assigned, mut announced) = (None, None);
    let mut winners: BTreeMap<String, (IpAddr, String)> = BTreeMap::new();
    while announced.is_none() {
        anyhow::ensure!(Instant::now() < deadline, "not converged within 15 minutes");
        if assigned.is_none() {
            let with_ip: Vec<(String, IpAddr)> = services_seen
                .state()
                .iter()
                .filter_map(|s| {
                    let ip = *metallb_rs::service::ingress_ips(s).ok()?.first()?;
                    Some((s.metadata.name.clone()?, ip))
                })
                .collect();
            if with_ip.len() == size.services {
                assigned = Some(start.elapsed());
                winners = with_ip
                    .into_iter()
                    .filter_map(|(name, ip)| {
                        let w = winner(&config, &all_nodes, None, ip)?;
                        Some((name, (ip, w)))
                    })
                    .filter(|(_, (_, w))| real_set.contains(w.as_str()))
                    .collect();
            }
        }
        if assigned.is_some() {
            let announcing = announced_by(&statuses_seen);
            if winners
                .iter()
                .all(|(svc, (_, w))| announcing.get(svc) == Some(w))
            {
                announced = Some(start.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Steady state: requests and watch events per speaker, once the
    // convergence's tail (status writes, the events queued for every
    // service announced) has drained.
    let settled = writes_settle(client, pids.len()).await?;
    let (traffic0, t0) = (api_metrics(client).await?, Instant::now());
    tokio::time::sleep(STEADY_WINDOW).await;
    let traffic1 = api_metrics(client).await?;
    let secs = t0.elapsed().as_secs_f64();
    let per_speaker = |metric: &str| {
        (metric_sum(&traffic1, metric, &[SPEAKER_USER])
            - metric_sum(&traffic0, metric, &[SPEAKER_USER]))
            / secs
            / pids.len().max(1) as f64
    };
    let requests_per_speaker = per_speaker("apiserver_request_total");
    let writes_per_speaker = (speaker_writes(&traffic1, None) - speaker_writes(&traffic0, None))
        / secs
        / pids.len().max(1) as f64;
    let watch_events_per_speaker = per_speaker("apiserver_watch_events_total");
    let writes_by_resource =
        writes_by_resource(&traffic0, &traffic1, secs * pids.len().max(1) as f64);

    // A full pass: a node's labels change, every speaker looks at every
    // service again.
    let idle = idle_rate(&pids).await;
    let nodes_api: Api<Node> = Api::all(client.clone());
    let marked = real.first().context("the lab has no node")?;
    let before = speakers_cpu(&pids);
    let t = Instant::now();
    nodes_api
        .patch(
            marked,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": { "metallb-rs.dev/bench-pass": format!("{}", size.services) } } })),
        )
        .await?;
    let spent = settle(&pids, idle).await;
    let pass_cpu =
        (spent - before - idle * t.elapsed().as_secs_f64()).max(0.0) / pids.len().max(1) as f64;

    // Single-service changes: a label on one service at a time, against
    // the idle rate of the moments just before.
    let idle = idle_rate(&pids).await;
    let before = speakers_cpu(&pids);
    let t = Instant::now();
    for i in 0..CHANGES {
        let name = format!("s{:05}", i * size.services / CHANGES);
        svcs.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": { "metallb-rs.dev/bench-change": "1" } } })),
        )
        .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let spent = settle(&pids, idle).await;
    let change_cpu = (spent - before - idle * t.elapsed().as_secs_f64()).max(0.0)
        / pids.len().max(1) as f64
        / CHANGES as f64;

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

    let failover = failover(
        cluster,
        &config,
        &all_nodes,
        &real_set,
        &services_seen,
        &statuses_seen,
    )
    .await?;
    drop(heartbeats);
    let rounds = sim_started.elapsed().as_secs() / sim::PERIOD.as_secs().max(1);
    Ok(Report {
        late_rounds: (late.load(Ordering::Relaxed), rounds),
        size,
        created,
        assigned: assigned.unwrap_or_default(),
        announced: announced.unwrap_or_default(),
        won_by_real: winners.len(),
        pass_cpu,
        change_cpu,
        rss,
        requests_per_speaker,
        writes_per_speaker,
        writes_by_resource,
        settled,
        watch_events_per_speaker,
        failover,
    })
}

/// The speakers' CPU seconds per second over [`IDLE_WINDOW`], summed.
async fn idle_rate(pids: &BTreeMap<String, i32>) -> f64 {
    let (before, t) = (speakers_cpu(pids), Instant::now());
    tokio::time::sleep(IDLE_WINDOW).await;
    (speakers_cpu(pids) - before) / t.elapsed().as_secs_f64()
}

/// Waits until the speakers' CPU rate is back near `idle` for a second
/// (at most a minute); their CPU seconds then.
async fn settle(pids: &BTreeMap<String, i32>, idle: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = speakers_cpu(pids);
    let mut quiet = 0;
    while quiet < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = speakers_cpu(pids);
        // A clock tick is 10 ms: allow two above the idle rate.
        if now - last <= idle * 0.25 + 0.02 {
            quiet += 1;
        } else {
            quiet = 0;
        }
        last = now;
    }
    last
}

/// The lab API server's request and watch counters.
async fn api_metrics(client: &kube::Client) -> Result<String> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(client.request_text(request).await?)
}

/// The configuration the bench applies (pool `bench`, one
/// L2Advertisement for every node), as the speakers build it.
fn bench_config() -> Result<metallb_rs::config::Config> {
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
fn winner(
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

/// Waits until the speakers write less than [`SETTLED_WRITES`] per second
/// each over [`SETTLE_STEP`], at most [`SETTLE_MAX`]; how long it took.
async fn writes_settle(client: &kube::Client, speakers: usize) -> Result<Duration> {
    let start = Instant::now();
    let writes = |text: &str| speaker_writes(text, None);
    let mut before = writes(&api_metrics(client).await?);
    while start.elapsed() < SETTLE_MAX {
        tokio::time::sleep(SETTLE_STEP).await;
        let now = writes(&api_metrics(client).await?);
        let rate = (now - before) / SETTLE_STEP.as_secs_f64() / speakers.max(1) as f64;
        before = now;
        if rate < SETTLED_WRITES {
            break;
        }
    }
    Ok(start.elapsed())
}

/// The speakers' writes per second (over `speaker_secs`, the window times
/// the speakers) by resource, between two `/metrics` texts; those over
/// 0.001/s.
fn writes_by_resource(before: &str, after: &str, speaker_secs: f64) -> Vec<(String, f64)> {
    let resources: BTreeSet<String> = after
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains(SPEAKER_USER))
        .filter_map(|l| {
            let rest = l.split("resource=\"").nth(1)?;
            Some(rest.split('"').next()?.to_owned())
        })
        .collect();
    resources
        .into_iter()
        .filter_map(|resource| {
            let rate = (speaker_writes(after, Some(&resource))
                - speaker_writes(before, Some(&resource)))
                / speaker_secs.max(f64::MIN_POSITIVE);
            (rate > 0.001).then_some((resource, rate))
        })
        .collect()
}

/// The speakers' writes counted in `/metrics` text `text`, of one
/// resource or of all.
fn speaker_writes(text: &str, resource: Option<&str>) -> f64 {
    let resource = resource.map(|r| format!("resource=\"{r}\""));
    WRITE_VERBS
        .iter()
        .map(|v| {
            let labels: Vec<&str> = [SPEAKER_USER, v]
                .into_iter()
                .chain(resource.as_deref())
                .collect();
            metric_sum(text, "apiserver_request_total", &labels)
        })
        .sum()
}

/// Which node's ServiceL2Status each bench service has.
fn announced_by(statuses: &Store<ServiceL2Status>) -> BTreeMap<String, String> {
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
async fn failover(
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

fn print(r: &Report) {
    let Size { nodes, services } = r.size;
    println!(
        "scale: {services} services, {} nodes ({} real with speakers, {nodes} simulated)",
        nodes + r.rss.len().saturating_sub(1),
        r.rss.len().saturating_sub(1)
    );
    println!(
        "  API server accepted all (baseline)       {:>9.2}s",
        r.created.as_secs_f64()
    );
    println!(
        "  every service had its IP                 {:>9.2}s  ({:.2}x)",
        r.assigned.as_secs_f64(),
        r.assigned.as_secs_f64() / r.created.as_secs_f64().max(1e-9)
    );
    println!(
        "  the {:>5} won by real nodes announced   {:>9.2}s  ({:.2}x)",
        r.won_by_real,
        r.announced.as_secs_f64(),
        r.announced.as_secs_f64() / r.created.as_secs_f64().max(1e-9)
    );
    println!(
        "  speaker CPU per full pass                {:>9.3}s",
        r.pass_cpu
    );
    println!(
        "  speaker CPU per single-service change    {:>9.4}s",
        r.change_cpu
    );
    println!(
        "  writes settled after convergence          {:>8.1}s  (under {SETTLED_WRITES}/s per speaker; then {:?} measured)",
        r.settled.as_secs_f64(),
        STEADY_WINDOW
    );
    println!(
        "  API requests/s per speaker (steady)      {:>9.3}   ({:.2}x the kubelet's {KUBELET_WRITES_PER_NODE} writes/s per node)",
        r.requests_per_speaker,
        r.requests_per_speaker / KUBELET_WRITES_PER_NODE
    );
    println!(
        "    of which writes                        {:>9.3}   ({:.2}x)",
        r.writes_per_speaker,
        r.writes_per_speaker / KUBELET_WRITES_PER_NODE
    );
    for (resource, rate) in &r.writes_by_resource {
        println!("      {resource:<36} {rate:>9.3}");
    }
    println!(
        "  watch events/s per speaker (steady)      {:>9.1}",
        r.watch_events_per_speaker
    );
    if r.size.nodes > 0 {
        println!(
            "  simulated renewal rounds late (the simulation not keeping up): {} of {}",
            r.late_rounds.0, r.late_rounds.1
        );
    }
    match r.failover {
        Some(Failover {
            services,
            took: Some(t),
            ..
        }) => println!(
            "  failover (SIGKILL): its {services} services taken over by the other real nodes in {:.2}s",
            t.as_secs_f64()
        ),
        Some(Failover {
            services,
            moved,
            took: None,
            waited,
        }) => println!(
            "  failover (SIGKILL): only {moved} of its {services} services taken over by the other real nodes after {:.0}s",
            waited.as_secs_f64()
        ),
        None => println!(
            "  failover: no real node wins a service whose next winner is real (the simulated ones answer nothing)"
        ),
    }
    let target = rss_target_mib(r.size.services);
    println!(
        "  resident memory (target {target:.0} MiB each at {} services):",
        r.size.services
    );
    for (name, kib, anon) in &r.rss {
        let mib = *kib as f64 / 1024.0;
        println!(
            "    {name:<28} {mib:>7.1} MiB  ({:.2}x of target; anonymous {:.1} MiB, file-backed (binary, libraries) {:.1} MiB)",
            mib / target,
            *anon as f64 / 1024.0,
            kib.saturating_sub(*anon) as f64 / 1024.0
        );
    }
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
