//! The speaker process: watches, the per-service loop (elect, announce or
//! withdraw, ServiceL2Status, events, metrics), interface rescans every
//! 10 s, unsolicited announcements, graceful leave on SIGTERM.
//!
//! It keeps announcing what it last decided when the API server goes
//! away (watches retry with backoff; the caches stay), and resyncs when
//! it comes back.
//!
//! No valid configuration, no change: until one has loaded, the speaker
//! announces nothing, writes no status object and does not count itself
//! as running (no presence lease, no gossip), so the other speakers keep
//! serving the addresses it would have been elected for. Once loaded, an
//! invalid change keeps the last valid one in force.

use super::announcer::Announcer;
use super::bgp::{self, advertise};
use super::election::{self, Decision, Endpoints, Interfaces, NodeInfo};
use super::membership::Membership;
use super::status::StatusObject;
use super::{events, liveness, presence, status};
use crate::api::v1beta1::{
    BFDProfile, BGPAdvertisement, Community, IPAddressPool, L2Advertisement, ServiceBGPStatus,
    ServiceL2Status,
};
use crate::api::v1beta2::BGPPeer;
use crate::config::{Config, Options as ConfigOptions, Resources};
use crate::k8s::events::Recorder;
use crate::service as svcs;
use crate::k8s::memberlist::SECRET_KEY;
use crate::k8s::watch;
use crate::metrics::{self, BgpMetrics, Health, K8sClientMetrics, Layer2Metrics, SpeakerMetrics};
use crate::net::iface::{self, Exclusions};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// How the speaker runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The MetalLB namespace.
    pub namespace: String,
    /// This node.
    pub node: String,
    /// `--lb-class`.
    pub lb_class: Option<String>,
    /// `--ignore-exclude-lb`.
    pub ignore_exclude_lb: bool,
    /// `/metrics` address.
    pub metrics_addr: Option<SocketAddr>,
    /// `/healthz`, `/readyz` address.
    pub health_addr: Option<SocketAddr>,
    /// The speaker's Pod name, when it runs in one (owner of its status objects).
    pub pod_name: Option<String>,
    /// Time between interface rescans.
    pub rescan: Duration,
    /// Gossip membership (`--ml-bindaddr`); off when None.
    pub membership: Option<MembershipOptions>,
}

/// How the speaker joins the gossip membership.
#[derive(Debug, Clone)]
pub struct MembershipOptions {
    /// Address and port to gossip on (the node's address, 7946).
    pub bind: SocketAddr,
    /// File holding the shared secret (the mounted `memberlist` Secret);
    /// read from the API when None.
    pub secret_path: Option<std::path::PathBuf>,
    /// The Secret holding it (key `secretkey`).
    pub secret_name: String,
    /// Detection timings.
    pub timing: super::membership::Timing,
}

/// Reads the gossip secret: the mounted file, or the Secret through the
/// API; the error says which and what to do.
async fn membership_secret(
    client: &kube::Client,
    namespace: &str,
    ml: &MembershipOptions,
) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context as _;
    if let Some(path) = &ml.secret_path {
        return std::fs::read(path).with_context(|| {
            format!(
                "reading the memberlist secret from {} (--ml-secret-key-path): mount Secret {}",
                path.display(),
                ml.secret_name
            )
        });
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets.get_opt(&ml.secret_name).await?.with_context(|| {
        format!(
            "Secret {namespace}/{} does not exist yet: the controller creates it; or create it with a random `{SECRET_KEY}`",
            ml.secret_name
        )
    })?;
    let data = secret
        .data
        .and_then(|mut d| d.remove(SECRET_KEY))
        .filter(|v| !v.0.is_empty())
        .with_context(|| {
            format!(
                "Secret {namespace}/{} has no `{SECRET_KEY}`",
                ml.secret_name
            )
        })?;
    Ok(data.0)
}

/// Where each other node's speaker gossips: its InternalIP of the bind
/// address's family, on the bind port (speakers use the host network).
fn seeds(nodes: &[Arc<Node>], me: &str, bind: SocketAddr) -> Vec<(String, SocketAddr)> {
    nodes
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.clone()?;
            if name == me {
                return None;
            }
            let ip = n
                .status
                .as_ref()?
                .addresses
                .as_ref()?
                .iter()
                .filter(|a| a.type_ == "InternalIP")
                .filter_map(|a| a.address.parse::<IpAddr>().ok())
                .find(|ip| ip.is_ipv6() == bind.is_ipv6())?;
            Some((name, SocketAddr::new(ip, bind.port())))
        })
        .collect()
}

/// How long one status object call may take.
const STATUS_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// When a failed status update is tried again.
const STATUS_RETRY: Duration = Duration::from_secs(2);

/// The ConfigMap listing interfaces never to announce from.
pub const EXCLUDE_CONFIGMAP: &str = "metallb-excludel2";
/// Its key.
pub const EXCLUDE_KEY: &str = "excludel2.yaml";

#[derive(Debug)]
enum Trigger {
    Service(String),
    All,
    /// Node objects changed (most changes are heartbeats: checked first).
    Nodes,
    Config,
    Interfaces,
    /// Presence leases or the gossip view changed, or time passed: who
    /// counts as alive may have changed.
    Liveness,
}

struct Stores {
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    nodes: Store<Node>,
    pools: Store<IPAddressPool>,
    l2: Store<L2Advertisement>,
    bgp: Store<BGPAdvertisement>,
    peers: Store<BGPPeer>,
    bfd: Store<BFDProfile>,
    communities: Store<Community>,
    secrets: Store<Secret>,
    configmaps: Store<ConfigMap>,
    statuses: Store<ServiceL2Status>,
    bgp_statuses: Store<ServiceBGPStatus>,
    leases: Store<Lease>,
}

/// What this speaker announces for one service.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Announced {
    ips: Vec<IpAddr>,
    /// Interfaces actually used, or None for "all".
    interfaces: Option<Vec<String>>,
}

/// A service this speaker considers, with what both modes read.
struct Subject {
    svc: Arc<Service>,
    ips: Vec<IpAddr>,
    pool: String,
    endpoints: Endpoints,
}

impl Subject {
    /// ExternalTrafficPolicy Local.
    fn local(&self) -> bool {
        self.svc
            .spec
            .as_ref()
            .and_then(|s| s.external_traffic_policy.as_deref())
            .is_some_and(|p| p == "Local")
    }
}

struct Metrics {
    k8s: K8sClientMetrics,
    speaker: SpeakerMetrics,
}

/// Runs the speaker until `shutdown` resolves; then withdraws everything
/// and leaves.
pub async fn run(
    client: kube::Client,
    opts: Options,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let registry = prometheus::Registry::new();
    let metrics = Metrics {
        k8s: K8sClientMetrics::new(&registry),
        speaker: SpeakerMetrics::new(&registry),
    };
    let l2_metrics = Layer2Metrics::new(&registry);
    let bgp_metrics = BgpMetrics::new(&registry);
    let health = Arc::new(Health::default());
    let (tx, mut rx) = mpsc::unbounded_channel::<Trigger>();
    let mut tasks = watch::Watches::new();
    let stores = start_watches(&client, &opts, &mut tasks, &tx);
    let leases_api: Api<Lease> = Api::namespaced(client.clone(), &opts.namespace);
    let reporter = crate::k8s::config_state::Reporter::new(
        client.clone(),
        &opts.namespace,
        &format!("speaker-{}", opts.node),
        json!({ "metallb.io/component-type": "speaker", "metallb.io/node-name": opts.node }),
        "configReconcilerValid",
        metrics.k8s.clone(),
    );
    let mut runner = Runner {
        retry: tx.downgrade(),
        client: client.clone(),
        recorder: Recorder::new(client.clone(), "metallb-speaker", &opts.node),
        opts: opts.clone(),
        stores,
        metrics,
        config: None,
        config_state: reporter,
        announcer: Announcer::new(l2_metrics),
        announced: BTreeMap::new(),
        bgp: bgp::Speaker::new(bgp_metrics),
        bgp_announced: BTreeMap::new(),
        failed: BTreeMap::new(),
        exclusions: (Vec::new(), Exclusions::defaults()),
        owner: None,
        node_view: Vec::new(),
        created: BTreeMap::new(),
        alive: BTreeSet::new(),
        isolated: false,
        membership: None,
        last_api_ok: Arc::new(std::sync::Mutex::new(std::time::Instant::now())),
    };
    let work = async {
        runner.wait_for_caches().await?;
        runner.reload_config().await;
        if runner.config.is_some() {
            if let Err(e) = presence::join(&leases_api, &opts.node).await {
                tracing::warn!(error = %e, "could not record this speaker's presence (graceful leave will not be seen)");
            }
            runner.start_membership().await;
        } else {
            tracing::warn!(
                "no valid configuration: not joining the speakers until one loads, so the others keep this node's addresses"
            );
        }
        runner.owner = runner.owner_reference().await;
        runner.rescan_interfaces().await;
        runner.full_pass().await;
        health.set_ready(true);
        tracing::info!(announced = runner.announced.len(), "initial sync done");
        let mut trimmer = crate::memory::Trimmer::new(Duration::from_secs(5));
        trimmer.maybe_trim();
        let mut rescan = tokio::time::interval(opts.rescan);
        let mut renew = tokio::time::interval(Duration::from_secs(presence::RENEW_SECONDS as u64));
        // Renewals become overdue with time alone: look again often.
        let mut liveness_tick = tokio::time::interval(Duration::from_millis(250));
        let mut view_changes = runner.membership.as_ref().map(|m| m.subscribe());
        let mut membership_wanted = opts.membership.is_some() && runner.membership.is_none();
        let mut renewal: Option<tokio::task::JoinHandle<()>> = None;
        loop {
            let garp_at = runner.announcer.next_wakeup();
            let garp = async {
                match garp_at {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                t = rx.recv() => {
                    let Some(first) = t else { anyhow::bail!("every watch stopped") };
                    let mut batch = vec![first];
                    while let Ok(t) = rx.try_recv() {
                        batch.push(t);
                    }
                    runner.process(batch).await;
                    trimmer.maybe_trim();
                }
                () = garp => runner.announcer.send_due(std::time::Instant::now()).await,
                _ = rescan.tick() => {
                    if runner.rescan_interfaces().await {
                        runner.full_pass().await;
                    }
                }
                _ = renew.tick() => {
                    // Renewals run beside the loop: a call hanging on a cut
                    // off API server must not stop the liveness checks.
                    let joined = runner.config.is_some();
                    if joined && renewal.as_ref().is_none_or(|r| r.is_finished()) {
                        let (api, node, ok) = (leases_api.clone(), opts.node.clone(), runner.last_api_ok.clone());
                        renewal = Some(tokio::spawn(async move {
                            let timeout = Duration::from_secs(presence::RENEW_SECONDS as u64);
                            match tokio::time::timeout(timeout, presence::join(&api, &node)).await {
                                Ok(Ok(())) => {
                                    if let Ok(mut t) = ok.lock() {
                                        *t = std::time::Instant::now();
                                    }
                                }
                                Ok(Err(e)) => tracing::debug!(error = %e, "could not renew the presence lease"),
                                Err(_) => tracing::debug!("renewing the presence lease timed out"),
                            }
                        }));
                    }
                    if let (Some(m), Some(ml)) = (&runner.membership, &opts.membership) {
                        m.join(seeds(&runner.stores.nodes.state(), &opts.node, ml.bind));
                    }
                    if membership_wanted && joined {
                        runner.start_membership().await;
                        if let Some(m) = &runner.membership {
                            view_changes = Some(m.subscribe());
                            membership_wanted = false;
                        }
                    }
                }
                _ = liveness_tick.tick() => {
                    if runner.refresh_liveness() {
                        runner.full_pass().await;
                    }
                }
                Ok(()) = async {
                    match view_changes.as_mut() {
                        Some(rx) => rx.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if runner.refresh_liveness() {
                        runner.full_pass().await;
                    }
                }
            }
        }
    };
    let result: anyhow::Result<()> = tokio::select! {
        r = work => r,
        () = shutdown => Ok(()),
        // Serves until the process stops; returns only on a server error.
        r = metrics::serve(opts.metrics_addr, opts.health_addr, registry, health.clone()) => r,
    };
    // Withdraw at once (stop answering, close the BGP sessions so routers
    // drop our routes now rather than after the hold time), then tell the
    // others, best effort.
    runner.announcer.shutdown();
    runner.bgp.shutdown().await;
    if let Some(m) = runner.membership.take() {
        m.leave().await;
    }
    let cleanup = async {
        if let Err(e) = presence::leave(&leases_api, &opts.node).await {
            tracing::warn!(error = %e, "could not record this speaker's departure");
        }
        runner.delete_own_statuses().await;
    };
    if tokio::time::timeout(Duration::from_secs(2), cleanup)
        .await
        .is_err()
    {
        tracing::warn!("cleanup on shutdown timed out");
    }
    tracing::info!("withdrew every announcement");
    result
}

fn start_watches(
    client: &kube::Client,
    opts: &Options,
    tasks: &mut watch::Watches,
    tx: &mpsc::UnboundedSender<Trigger>,
) -> Stores {
    let ns = opts.namespace.as_str();
    let send = |t: Trigger, tx: &mpsc::UnboundedSender<Trigger>| {
        let _ = tx.send(t);
    };
    let cfg = watcher::Config::default;
    let services = {
        let tx = tx.clone();
        tasks.spawn(Api::<Service>::all(client.clone()),
            cfg(),
            move |ev| match ev {
                watcher::Event::Apply(s) | watcher::Event::Delete(s) => {
                    send(Trigger::Service(svcs::key(s).to_string()), &tx)
                }
                watcher::Event::InitDone => send(Trigger::All, &tx),
                _ => {}
            },
        )
    };
    let slices = {
        let tx = tx.clone();
        // Election reads only each endpoint's node and conditions.
        let trim = |s: &mut EndpointSlice| {
            s.ports = None;
            for ep in &mut s.endpoints {
                ep.addresses.clear();
                ep.target_ref = None;
                ep.hints = None;
                ep.deprecated_topology = None;
                ep.hostname = None;
                ep.zone = None;
            }
        };
        tasks.spawn_trimmed(Api::<EndpointSlice>::all(client.clone()),
            cfg(),
            trim,
            move |ev| {
                if let Some(s) = watch::object(ev)
                    && let Some(name) = s.labels().get("kubernetes.io/service-name")
                {
                    send(
                        Trigger::Service(format!("{}/{name}", s.namespace().unwrap_or_default())),
                        &tx,
                    );
                }
            },
        )
    };
    let nodes = {
        let tx = tx.clone();
        tasks.spawn(Api::<Node>::all(client.clone()), cfg(), move |ev| {
            if !matches!(ev, watcher::Event::Init | watcher::Event::InitApply(_)) {
                send(Trigger::Nodes, &tx);
            }
        })
    };
    let pools = tasks.spawn(Api::<IPAddressPool>::namespaced(client.clone(), ns),
        cfg(),
        config_trigger(tx.clone()),
    );
    let l2 = tasks.spawn(Api::<L2Advertisement>::namespaced(client.clone(), ns),
        cfg(),
        config_trigger(tx.clone()),
    );
    let bgp = tasks.spawn(Api::<BGPAdvertisement>::namespaced(client.clone(), ns),
        cfg(),
        config_trigger(tx.clone()),
    );
    let peers = tasks.spawn(Api::<BGPPeer>::namespaced(client.clone(), ns),
        cfg(),
        config_trigger(tx.clone()),
    );
    let bfd = tasks.spawn(Api::<BFDProfile>::namespaced(client.clone(), ns),
        cfg(),
        config_trigger(tx.clone()),
    );
    let communities = tasks.spawn(Api::<Community>::namespaced(client.clone(), ns),
        cfg(),
        config_trigger(tx.clone()),
    );
    let secrets = tasks.spawn(Api::<Secret>::namespaced(client.clone(), ns),
        cfg(),
        config_trigger(tx.clone()),
    );
    let configmaps = {
        let tx = tx.clone();
        tasks.spawn(Api::<ConfigMap>::namespaced(client.clone(), ns),
            watcher::Config::default().fields(&format!("metadata.name={EXCLUDE_CONFIGMAP}")),
            move |ev| {
                if !matches!(ev, watcher::Event::Init | watcher::Event::InitApply(_)) {
                    send(Trigger::Interfaces, &tx);
                }
            },
        )
    };
    let statuses = tasks.spawn(Api::<ServiceL2Status>::namespaced(client.clone(), ns),
        cfg(),
        status_trigger(tx.clone()),
    );
    let bgp_statuses = tasks.spawn(Api::<ServiceBGPStatus>::namespaced(client.clone(), ns),
        cfg(),
        status_trigger(tx.clone()),
    );
    let leases = {
        let tx = tx.clone();
        tasks.spawn(Api::<Lease>::namespaced(client.clone(), ns),
            watcher::Config::default().labels(&format!("{}=speaker", presence::COMPONENT_LABEL)),
            move |ev| {
                // Renewals arrive every few seconds per node: only a change
                // of who counts as alive makes a full pass.
                if matches!(
                    ev,
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone
                ) {
                    send(Trigger::Liveness, &tx);
                }
            },
        )
    };
    Stores {
        services,
        slices,
        nodes,
        pools,
        l2,
        bgp,
        peers,
        bfd,
        communities,
        secrets,
        configmaps,
        statuses,
        bgp_statuses,
        leases,
    }
}

/// A status object changed: look at its service again.
fn status_trigger<K: kube::Resource>(
    tx: mpsc::UnboundedSender<Trigger>,
) -> impl FnMut(&watcher::Event<K>) + Send + 'static {
    move |ev| {
        if let Some(o) = watch::object(ev) {
            let l = o.labels();
            if let (Some(ns), Some(name)) = (
                l.get(status::SERVICE_NAMESPACE_LABEL),
                l.get(status::SERVICE_NAME_LABEL),
            ) {
                let _ = tx.send(Trigger::Service(format!("{ns}/{name}")));
            }
        }
    }
}

/// Any change of a configuration kind (after the initial list) reloads
/// the configuration.
fn config_trigger<K>(
    tx: mpsc::UnboundedSender<Trigger>,
) -> impl FnMut(&watcher::Event<K>) + Send + 'static {
    move |ev| {
        if !matches!(ev, watcher::Event::Init | watcher::Event::InitApply(_)) {
            let _ = tx.send(Trigger::Config);
        }
    }
}

struct Runner {
    /// Re-queues a service whose status update failed (weak: the loop
    /// still ends when every watch has stopped).
    retry: mpsc::WeakUnboundedSender<Trigger>,
    client: kube::Client,
    recorder: Recorder,
    opts: Options,
    stores: Stores,
    metrics: Metrics,
    config: Option<Config>,
    config_state: crate::k8s::config_state::Reporter,
    announcer: Announcer,
    announced: BTreeMap<String, Announced>,
    /// BGP sessions and routes.
    bgp: bgp::Speaker,
    /// What this speaker announces over BGP, per service.
    bgp_announced: BTreeMap<String, Vec<IpAddr>>,
    /// Services whose interfaces do not exist here, with the message sent.
    failed: BTreeMap<String, String>,
    /// The exclusion patterns in force (source list, compiled).
    exclusions: (Vec<String>, Exclusions),
    owner: Option<OwnerReference>,
    /// What election last saw of the nodes (heartbeats do not change it).
    node_view: Vec<NodeInfo>,
    /// Status objects we created and the watch has not shown yet: no
    /// second one is created meanwhile.
    created: BTreeMap<String, std::time::Instant>,
    /// Nodes whose speaker counts (see `liveness`).
    alive: BTreeSet<String>,
    /// Cut off from the API server and most speakers: announce nothing.
    isolated: bool,
    /// Gossip membership, when on.
    membership: Option<Membership>,
    /// When this speaker last renewed its presence lease (written by the
    /// renewal task).
    last_api_ok: Arc<std::sync::Mutex<std::time::Instant>>,
}

/// The objects of one service, looked up once per pass instead of per
/// service (a full pass over n services would otherwise cost n^2).
#[derive(Default)]
struct Index {
    slices: BTreeMap<String, Vec<Arc<EndpointSlice>>>,
    statuses: BTreeMap<String, Vec<Arc<ServiceL2Status>>>,
    bgp_statuses: BTreeMap<String, Vec<Arc<ServiceBGPStatus>>>,
}

/// Status objects by the service their labels name.
fn by_service<K: StatusObject>(
    store: &Store<K>,
    only: Option<&str>,
) -> BTreeMap<String, Vec<Arc<K>>> {
    let mut out: BTreeMap<String, Vec<Arc<K>>> = BTreeMap::new();
    for o in store.state() {
        let l = o.labels();
        if let (Some(ns), Some(name)) = (
            l.get(status::SERVICE_NAMESPACE_LABEL),
            l.get(status::SERVICE_NAME_LABEL),
        ) {
            let key = format!("{ns}/{name}");
            if only.is_none_or(|o| o == key) {
                out.entry(key).or_default().push(o);
            }
        }
    }
    out
}

impl Index {
    fn build(stores: &Stores, only: Option<&str>) -> Self {
        let mut index = Index::default();
        for s in stores.slices.state() {
            if let Some(name) = s.labels().get("kubernetes.io/service-name") {
                let key = format!("{}/{name}", s.namespace().unwrap_or_default());
                if only.is_none_or(|o| o == key) {
                    index.slices.entry(key).or_default().push(s);
                }
            }
        }
        index.statuses = by_service(&stores.statuses, only);
        index.bgp_statuses = by_service(&stores.bgp_statuses, only);
        index
    }
}

fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

impl Runner {
    async fn wait_for_caches(&self) -> anyhow::Result<()> {
        let s = &self.stores;
        let ready = [
            ("services", s.services.wait_until_ready().await.is_ok()),
            ("endpointslices", s.slices.wait_until_ready().await.is_ok()),
            ("nodes", s.nodes.wait_until_ready().await.is_ok()),
            ("ipaddresspools", s.pools.wait_until_ready().await.is_ok()),
            ("l2advertisements", s.l2.wait_until_ready().await.is_ok()),
            ("bgpadvertisements", s.bgp.wait_until_ready().await.is_ok()),
            ("bgppeers", s.peers.wait_until_ready().await.is_ok()),
            ("bfdprofiles", s.bfd.wait_until_ready().await.is_ok()),
            (
                "communities",
                s.communities.wait_until_ready().await.is_ok(),
            ),
            ("secrets", s.secrets.wait_until_ready().await.is_ok()),
            ("configmaps", s.configmaps.wait_until_ready().await.is_ok()),
            (
                "servicel2statuses",
                s.statuses.wait_until_ready().await.is_ok(),
            ),
            (
                "servicebgpstatuses",
                s.bgp_statuses.wait_until_ready().await.is_ok(),
            ),
            ("leases", s.leases.wait_until_ready().await.is_ok()),
        ];
        for (what, ok) in ready {
            anyhow::ensure!(ok, "the {what} watch stopped before listing");
        }
        Ok(())
    }

    /// The speaker Pod as owner of its status objects, when it runs in one.
    async fn owner_reference(&self) -> Option<OwnerReference> {
        let name = self.opts.pod_name.as_deref()?;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        match pods.get_opt(name).await {
            Ok(Some(pod)) => pod.controller_owner_ref(&()).map(|mut o| {
                o.controller = Some(false);
                o.block_owner_deletion = None;
                o
            }),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(pod = name, error = %e, "could not read the speaker Pod; status objects get no owner");
                None
            }
        }
    }

    async fn process(&mut self, batch: Vec<Trigger>) {
        let mut all = false;
        let mut config = false;
        let mut interfaces = false;
        let mut keys = BTreeSet::new();
        for t in batch {
            match t {
                Trigger::Service(k) => {
                    keys.insert(k);
                }
                Trigger::All => all = true,
                Trigger::Nodes => {
                    let view = self.nodes();
                    if view != self.node_view {
                        self.node_view = view;
                        all = true;
                        // Node labels decide which peers and BGP
                        // advertisements this node validates.
                        config = true;
                    }
                }
                Trigger::Config => config = true,
                Trigger::Interfaces => interfaces = true,
                Trigger::Liveness => {}
            }
        }
        // Every batch may follow a change of leases, gossip or node
        // conditions, or simply time passing (a renewal became overdue).
        if self.refresh_liveness() {
            all = true;
        }
        if config && self.reload_config().await {
            all = true;
        }
        if interfaces && self.rescan_interfaces().await {
            all = true;
        }
        if all {
            self.full_pass().await;
        } else {
            for k in keys {
                let index = Index::build(&self.stores, Some(&k));
                self.process_service(&k, &index).await;
            }
        }
    }

    /// Every service with an address, plus what we announce for services
    /// that vanished.
    async fn full_pass(&mut self) {
        if self.config.is_none() {
            return;
        }
        let mut keys: BTreeSet<String> = self
            .stores
            .services
            .state()
            .iter()
            .filter(|s| !svcs::ingress_ips(s).unwrap_or_default().is_empty())
            .map(|s| svcs::key(s).to_string())
            .collect();
        keys.extend(self.announced.keys().cloned());
        keys.extend(self.bgp_announced.keys().cloned());
        keys.extend(self.own_status_keys(&self.stores.statuses));
        keys.extend(self.own_status_keys(&self.stores.bgp_statuses));
        self.node_view = self.nodes();
        self.refresh_liveness();
        self.sync_peers().await;
        if self.isolated {
            // Stop answering everywhere first: the status work below talks
            // to an API server that may not answer for a long time.
            let keys: Vec<String> = self.announced.keys().cloned().collect();
            for k in keys {
                self.withdraw(&k).await;
            }
        }
        let index = Index::build(&self.stores, None);
        for k in keys {
            self.process_service(&k, &index).await;
        }
    }

    /// Runs a BGP session for each BGPPeer that selects this node.
    async fn sync_peers(&mut self) {
        let me = self.node_view.iter().find(|n| n.name == self.opts.node);
        let wanted = match (&self.config, me) {
            (Some(config), Some(me)) => {
                let addresses = self.node_addresses();
                advertise::peers_for_node(config, me)
                    .into_iter()
                    .map(|p| bgp::session_config(p, addresses))
                    .collect()
            }
            _ => Vec::new(),
        };
        self.bgp.set_peers(wanted).await;
    }

    /// This node's InternalIPs: next hops for the family a session's own
    /// connection is not of.
    fn node_addresses(&self) -> bgp::NodeAddresses {
        let node = self.stores.nodes.get(&ObjectRef::new(&self.opts.node));
        bgp::node_addresses(
            node.iter()
                .filter_map(|n| n.status.as_ref()?.addresses.as_ref())
                .flatten()
                .filter(|a| a.type_ == "InternalIP")
                .filter_map(|a| a.address.parse().ok()),
        )
    }

    fn own_status_keys<K: StatusObject>(&self, store: &Store<K>) -> Vec<String> {
        store
            .state()
            .iter()
            .filter(|o| o.labels().get(status::NODE_LABEL) == Some(&self.opts.node))
            .filter_map(|o| {
                let l = o.labels();
                Some(format!(
                    "{}/{}",
                    l.get(status::SERVICE_NAMESPACE_LABEL)?,
                    l.get(status::SERVICE_NAME_LABEL)?
                ))
            })
            .collect()
    }

    fn nodes(&self) -> Vec<NodeInfo> {
        let mut v: Vec<NodeInfo> = self
            .stores
            .nodes
            .state()
            .iter()
            .map(|n| NodeInfo::from_node(n))
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Recomputes who counts as alive and whether this speaker is cut off
    /// (see `liveness`); true when either changed.
    fn refresh_liveness(&mut self) -> bool {
        let now = SystemTime::now();
        let leases = presence::states(self.stores.leases.state().iter().map(|l| &**l));
        let view = self.membership.as_ref().map(|m| m.view());
        let ctx = liveness::Context {
            now,
            api_ok: self.api_ok(),
            membership: view.is_some(),
        };
        let gossip = |node: &str| -> Option<liveness::Gossip> {
            let view = view.as_ref()?;
            if view.alive.contains(node) {
                return Some(liveness::Gossip::Alive);
            }
            view.down.get(node).map(|d| liveness::Gossip::Down {
                since: d.since,
                left: d.left,
            })
        };
        let (alive, gone) = liveness::alive(
            self.node_view.iter().map(|n| {
                (
                    n.name.as_str(),
                    liveness::Evidence {
                        ready: n.ready,
                        out_of_service: n.out_of_service,
                        lease: leases.get(&n.name).copied(),
                        gossip: gossip(&n.name),
                    },
                )
            }),
            &ctx,
        );
        let isolated = view.as_ref().is_some_and(|v| {
            let known = self
                .node_view
                .iter()
                .filter(|n| {
                    v.alive.contains(&n.name)
                        || v.down.contains_key(&n.name)
                        || leases.contains_key(&n.name)
                })
                .count();
            liveness::isolated(ctx.api_ok, v.alive.len(), known)
        });
        let changed = alive != self.alive || isolated != self.isolated;
        if changed {
            if !gone.is_empty() {
                tracing::info!(?gone, "speakers not counted");
            }
            if isolated != self.isolated {
                if isolated {
                    tracing::warn!(
                        "cut off from the API server and from most speakers: not answering for any address until either comes back"
                    );
                } else {
                    tracing::info!("no longer cut off: announcing again");
                }
            }
            self.alive = alive;
            self.isolated = isolated;
        }
        changed
    }

    /// Starts gossip membership when configured and its secret is
    /// readable; until then the speaker runs on leases alone (as upstream
    /// would wait for the Secret to be mounted) and retries on every lease
    /// renewal.
    async fn start_membership(&mut self) {
        let Some(ml) = self.opts.membership.clone() else {
            return;
        };
        let started = async {
            let secret = membership_secret(&self.client, &self.opts.namespace, &ml).await?;
            let membership = Membership::start(super::membership::Config {
                node: self.opts.node.clone(),
                bind: ml.bind,
                secret,
                timing: ml.timing.clone(),
            })
            .await?;
            anyhow::Ok(membership)
        };
        match started.await {
            Ok(m) => {
                m.join(seeds(&self.stores.nodes.state(), &self.opts.node, ml.bind));
                tracing::info!(bind = %ml.bind, "gossip membership started");
                self.membership = Some(m);
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "gossip membership not started yet; retrying");
            }
        }
    }

    /// This speaker renewed its presence lease recently.
    fn api_ok(&self) -> bool {
        self.last_api_ok
            .lock()
            .map(|t| t.elapsed() < liveness::API_TIMEOUT)
            // A poisoned lock: a renewal panicked; count the API as gone.
            .unwrap_or(false)
    }

    /// The service behind `key` when this speaker has to consider it: our
    /// class, a LoadBalancer, addresses from a pool.
    fn subject(&self, key: &str, index: &Index) -> Option<Subject> {
        let (ns, name) = split_key(key);
        let svc = self.stores.services.get(&ObjectRef::new(name).within(ns))?;
        if !svcs::class_matches(&svc, self.opts.lb_class.as_deref())
            || !svcs::is_load_balancer(&svc)
        {
            return None;
        }
        let ips = svcs::ingress_ips(&svc).ok().filter(|i| !i.is_empty())?;
        let config = self.config.as_ref()?;
        let Some(pool) = config.pool_for(&ips) else {
            tracing::debug!(service = key, ips = ?ips, "not announcing: the addresses are in no pool");
            return None;
        };
        let slices = index.slices.get(key).map(Vec::as_slice).unwrap_or_default();
        let endpoints = Endpoints::from_slices(slices.iter().map(|s| &**s));
        Some(Subject {
            pool: pool.name.clone(),
            svc,
            ips,
            endpoints,
        })
    }

    /// Whether this node announces `s` in layer 2, and from where.
    fn decide(&self, key: &str, s: &Subject) -> Option<Interfaces> {
        if self.isolated {
            return None;
        }
        let config = self.config.as_ref()?;
        let sharing = svcs::sharing_key(&s.svc);
        let input = election::Input {
            service_labels: s.svc.labels(),
            shared: !sharing.sharing.is_empty(),
            local: s.local(),
            first_ip: s.ips[0],
            pool: &s.pool,
            advertisements: &config.l2_advertisements,
            nodes: &self.node_view,
            alive: Some(&self.alive),
            endpoints: &s.endpoints,
            ignore_exclude_lb: self.opts.ignore_exclude_lb,
        };
        match election::decide(&input, &self.opts.node) {
            Decision::Announce(interfaces) => Some(interfaces),
            Decision::NotOwner(reason) => {
                tracing::debug!(service = key, %reason, "not announcing");
                None
            }
        }
    }

    /// What this node announces for `s` over BGP, per peer.
    fn decide_bgp(&self, key: &str, s: &Subject) -> advertise::PeerRoutes {
        let me = self.node_view.iter().find(|n| n.name == self.opts.node);
        let (Some(config), Some(me)) = (self.config.as_ref(), me) else {
            return advertise::PeerRoutes::new();
        };
        if self.isolated || config.bgp_advertisements.is_empty() {
            return advertise::PeerRoutes::new();
        }
        let svc = advertise::Service {
            labels: s.svc.labels(),
            local: s.local(),
            ips: &s.ips,
            pool: &s.pool,
            endpoints: &s.endpoints,
        };
        match advertise::routes(config, me, &svc, self.opts.ignore_exclude_lb) {
            Ok(r) => r,
            Err(reason) => {
                if reason.is_config_problem() {
                    tracing::warn!(service = key, %reason, "not announcing over BGP");
                } else {
                    tracing::debug!(service = key, %reason, "not announcing over BGP");
                }
                advertise::PeerRoutes::new()
            }
        }
    }

    async fn process_service(&mut self, key: &str, index: &Index) {
        if self.config.is_none() {
            tracing::debug!(
                service = key,
                "not processing: no valid configuration loaded yet"
            );
            return;
        }
        self.metrics.k8s.updates.inc();
        let subject = self.subject(key, index);
        let l2 = subject
            .as_ref()
            .and_then(|s| Some((s.svc.clone(), s.ips.clone(), self.decide(key, s)?)));
        let desired = match l2 {
            Some((svc, ips, interfaces)) => {
                match self.announcer.set(key, &ips, interfaces.clone()).await {
                    Ok(()) => {
                        self.failed.remove(key);
                        let now = Announced {
                            ips,
                            interfaces: status::reported_interfaces(&interfaces),
                        };
                        if self.announced.get(key) != Some(&now) {
                            self.set_announced_metrics(key, "layer2", false);
                            if !self.announced.contains_key(key) {
                                tracing::info!(service = key, ips = ?now.ips, interfaces = ?now.interfaces, "announcing");
                            }
                            self.announced.insert(key.to_owned(), now);
                            self.set_announced_metrics(key, "layer2", true);
                        }
                        let ev = events::node_assigned(&self.opts.node, events::Protocol::Layer2);
                        self.recorder
                            .publish(&Recorder::reference(svc.as_ref()), &ev)
                            .await;
                        let (ns, name) = split_key(key);
                        let interfaces = self.announced.get(key).and_then(|a| a.interfaces.clone());
                        Some(status::desired_status(
                            &self.opts.node,
                            ns,
                            name,
                            interfaces,
                        ))
                    }
                    Err(e) => {
                        let message = format!("{e} (node {})", self.opts.node);
                        if self.failed.get(key) != Some(&message) {
                            tracing::warn!(service = key, "{message}");
                            self.failed.insert(key.to_owned(), message);
                        }
                        for ev in events::announce_failed(&ips, &self.opts.node) {
                            self.recorder
                                .publish(&Recorder::reference(svc.as_ref()), &ev)
                                .await;
                        }
                        self.withdraw(key).await;
                        None
                    }
                }
            }
            None => {
                self.failed.remove(key);
                self.withdraw(key).await;
                None
            }
        };
        self.sync_status::<ServiceL2Status>(key, desired.as_ref(), index.statuses.get(key))
            .await;
        let bgp_desired = self.process_bgp(key, subject.as_ref()).await;
        self.sync_status::<ServiceBGPStatus>(
            key,
            bgp_desired.as_ref(),
            index.bgp_statuses.get(key),
        )
        .await;
    }

    /// Hands the service's routes to the BGP speaker; the status this
    /// node's ServiceBGPStatus should carry when it announces.
    async fn process_bgp(
        &mut self,
        key: &str,
        subject: Option<&Subject>,
    ) -> Option<crate::api::v1beta1::MetalLBServiceBGPStatus> {
        let routes = subject.map(|s| self.decide_bgp(key, s)).unwrap_or_default();
        // Reaches the sessions now, before the status objects below (API
        // calls that may be slow).
        self.bgp.set_service(key, routes);
        let peers = self.bgp.peers_of(key);
        let Some(s) = subject.filter(|_| !peers.is_empty()) else {
            if self.bgp_announced.contains_key(key) {
                tracing::info!(service = key, "withdrawing (bgp)");
                self.set_announced_metrics(key, "bgp", false);
                self.bgp_announced.remove(key);
            }
            return None;
        };
        if self.bgp_announced.get(key) != Some(&s.ips) {
            self.set_announced_metrics(key, "bgp", false);
            if !self.bgp_announced.contains_key(key) {
                tracing::info!(service = key, ips = ?s.ips, peers = ?peers, "announcing (bgp)");
            }
            self.bgp_announced.insert(key.to_owned(), s.ips.clone());
            self.set_announced_metrics(key, "bgp", true);
        }
        let ev = events::node_assigned(&self.opts.node, events::Protocol::Bgp);
        self.recorder
            .publish(&Recorder::reference(s.svc.as_ref()), &ev)
            .await;
        let (ns, name) = split_key(key);
        Some(status::desired_bgp_status(&self.opts.node, ns, name, peers))
    }

    /// Sets (or removes) `metallb_speaker_announced` for what `key`
    /// announces with `protocol`.
    fn set_announced_metrics(&self, key: &str, protocol: &str, on: bool) {
        let ips: &[IpAddr] = match protocol {
            "bgp" => self.bgp_announced.get(key).map(Vec::as_slice),
            _ => self.announced.get(key).map(|a| a.ips.as_slice()),
        }
        .unwrap_or_default();
        for ip in ips {
            let labels = [key, protocol, &self.opts.node, &ip.to_string()];
            if on {
                self.metrics
                    .speaker
                    .announced
                    .with_label_values(&labels)
                    .set(1);
            } else {
                let _ = self.metrics.speaker.announced.remove_label_values(&labels);
            }
        }
    }

    async fn withdraw(&mut self, key: &str) {
        if self.announced.contains_key(key) {
            tracing::info!(service = key, "withdrawing");
            self.set_announced_metrics(key, "layer2", false);
            self.announced.remove(key);
        }
        self.announcer.withdraw(key).await;
    }

    /// Brings the status objects of kind `K` for `key` to `desired`.
    async fn sync_status<K: StatusObject>(
        &mut self,
        key: &str,
        desired: Option<&K::Status>,
        existing: Option<&Vec<Arc<K>>>,
    ) {
        let (ns, name) = split_key(key);
        let refs: Vec<&K> = existing.into_iter().flatten().map(|o| &**o).collect();
        let created_key = format!("{}{key}", K::GENERATE_NAME);
        let mine_seen = refs
            .iter()
            .any(|o| o.labels().get(status::NODE_LABEL) == Some(&self.opts.node));
        if mine_seen {
            self.created.remove(&created_key);
        }
        let creating = self
            .created
            .get(&created_key)
            .is_some_and(|t| t.elapsed() < Duration::from_secs(10));
        let actions: Vec<status::Action<K::Status>> = status::plan(&self.opts.node, &refs, desired)
            .into_iter()
            .filter(|a| !(creating && matches!(a, status::Action::Create(_))))
            .collect();
        let api: Api<K> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        for action in actions {
            let call = async {
                match &action {
                    status::Action::Delete { name } => {
                        match api.delete(name, &DeleteParams::default()).await {
                            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                            other => other.map(|_| ()),
                        }
                    }
                    status::Action::PatchStatus { name, status } => api
                        .patch_status(
                            name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({ "status": status })),
                        )
                        .await
                        .map(|_| ()),
                    status::Action::Create(st) => self.create_status(&api, ns, name, st).await,
                }
            };
            // A call lost on a connection that went away (a node whose
            // link went down) must not hold the loop for the client's
            // own, much longer, timeouts.
            let result = match tokio::time::timeout(STATUS_CALL_TIMEOUT, call).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err(format!("no answer within {STATUS_CALL_TIMEOUT:?}")),
            };
            match result {
                Ok(()) => {
                    if matches!(action, status::Action::Create(_)) {
                        self.created
                            .insert(created_key.clone(), std::time::Instant::now());
                    }
                }
                Err(e) => {
                    self.metrics.k8s.update_errors.inc();
                    tracing::warn!(service = key, kind = %K::kind(&()), action = ?action, error = %e, "could not update the status object; retrying");
                    // Look at the service again shortly, whatever else
                    // happens meanwhile.
                    let (tx, key) = (self.retry.clone(), key.to_owned());
                    tokio::spawn(async move {
                        tokio::time::sleep(STATUS_RETRY).await;
                        if let Some(tx) = tx.upgrade() {
                            let _ = tx.send(Trigger::Service(key));
                        }
                    });
                    break;
                }
            }
        }
    }

    async fn create_status<K: StatusObject>(
        &self,
        api: &Api<K>,
        ns: &str,
        name: &str,
        st: &K::Status,
    ) -> Result<(), kube::Error> {
        let obj: K = serde_json::from_value(json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "metadata": {
                "generateName": K::GENERATE_NAME,
                "namespace": self.opts.namespace,
                "labels": {
                    status::NODE_LABEL: self.opts.node,
                    status::SERVICE_NAME_LABEL: name,
                    status::SERVICE_NAMESPACE_LABEL: ns,
                },
                "ownerReferences": self.owner.iter().collect::<Vec<_>>(),
            },
        }))
        .map_err(kube::Error::SerdeError)?;
        let created = api.create(&PostParams::default(), &obj).await?;
        api.patch_status(
            &created.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": st })),
        )
        .await?;
        Ok(())
    }

    async fn delete_own_statuses(&self) {
        self.delete_own::<ServiceL2Status>(&self.stores.statuses)
            .await;
        self.delete_own::<ServiceBGPStatus>(&self.stores.bgp_statuses)
            .await;
    }

    async fn delete_own<K: StatusObject>(&self, store: &Store<K>) {
        let api: Api<K> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        for o in store.state() {
            if o.labels().get(status::NODE_LABEL) == Some(&self.opts.node) {
                let _ = api.delete(&o.name_any(), &DeleteParams::default()).await;
            }
        }
    }

    /// Rebuilds the configuration; true when it changed and was applied.
    async fn reload_config(&mut self) -> bool {
        let s = &self.stores;
        let res = Resources {
            pools: s.pools.state().iter().map(|o| (**o).clone()).collect(),
            l2_advertisements: s.l2.state().iter().map(|o| (**o).clone()).collect(),
            bgp_advertisements: s.bgp.state().iter().map(|o| (**o).clone()).collect(),
            peers: s.peers.state().iter().map(|o| (**o).clone()).collect(),
            bfd_profiles: s.bfd.state().iter().map(|o| (**o).clone()).collect(),
            communities: s
                .communities
                .state()
                .iter()
                .map(|o| (**o).clone())
                .collect(),
            secrets: s.secrets.state().iter().map(|o| (**o).clone()).collect(),
            nodes: s.nodes.state().iter().map(|o| (**o).clone()).collect(),
            namespaces: Vec::new(),
        };
        let me = s.nodes.get(&ObjectRef::new(&self.opts.node));
        let mine =
            crate::config::for_node(&res, me.as_ref().map_or(&BTreeMap::new(), |n| n.labels()));
        match Config::build(
            &mine,
            &ConfigOptions {
                namespace: self.opts.namespace.clone(),
            },
        ) {
            Ok(cfg) => {
                self.config_state.valid(&cfg.warnings).await;
                if self.config.as_ref() == Some(&cfg) {
                    return false;
                }
                tracing::info!(
                    pools = cfg.pools.len(),
                    l2_advertisements = cfg.l2_advertisements.len(),
                    "configuration loaded"
                );
                self.config = Some(cfg);
                true
            }
            Err(errors) => {
                self.config_state.invalid(errors.to_string()).await;
                false
            }
        }
    }

    /// Reads the exclusion list and the interfaces; updates the
    /// responders. True when the eligible set changed.
    async fn rescan_interfaces(&mut self) -> bool {
        let patterns = self.exclusion_patterns();
        if patterns != self.exclusions.0 {
            match Exclusions::new(&patterns) {
                Ok(ex) => {
                    tracing::info!(patterns = ?patterns, "interface exclusions");
                    self.exclusions = (patterns, ex);
                }
                Err(e) => {
                    tracing::error!(configmap = EXCLUDE_CONFIGMAP, error = %e, "keeping the previous interface exclusions")
                }
            }
        }
        let listed = match iface::list() {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "could not list interfaces");
                return false;
            }
        };
        let eligible = iface::eligible(&listed, &self.exclusions.1);
        let before = self.announcer.interfaces().to_vec();
        let changes = self.announcer.update_interfaces(eligible).await;
        for c in &changes {
            tracing::info!("{c}");
        }
        self.announcer.interfaces() != before.as_slice()
    }

    /// The exclusion patterns: the ConfigMap's list, or upstream's defaults.
    fn exclusion_patterns(&self) -> Vec<String> {
        let cm = self
            .stores
            .configmaps
            .get(&ObjectRef::new(EXCLUDE_CONFIGMAP).within(&self.opts.namespace));
        let Some(text) = cm
            .as_ref()
            .and_then(|c| c.data.as_ref())
            .and_then(|d| d.get(EXCLUDE_KEY))
        else {
            return iface::DEFAULT_EXCLUDES
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
        };
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Excludes {
            announced_interfaces_to_exclude: Vec<String>,
        }
        match serde_yaml::from_str::<Excludes>(text) {
            Ok(e) => e.announced_interfaces_to_exclude,
            Err(e) => {
                tracing::error!(configmap = EXCLUDE_CONFIGMAP, error = %e, "invalid {EXCLUDE_KEY}: expected `announcedInterfacesToExclude: [regex, ...]`; keeping the previous list");
                self.exclusions.0.clone()
            }
        }
    }
}
