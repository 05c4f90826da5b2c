//! The speaker process: watches, the per-service loop (elect, announce or
//! withdraw, ServiceL2Status, events, metrics), interface rescans every
//! 10 s and at once when the uplink's link state changes (`uplink`),
//! unsolicited announcements, graceful leave on SIGTERM.
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
use super::election::{self, NodeInfo};
use super::events::Protocol;
use super::membership::Membership;
use super::renewal::{self, Record, Renewal};
use super::status::StatusObject;
use super::{liveness, presence, status};
use crate::api::v1beta1::{
    BFDProfile, BGPAdvertisement, Community, IPAddressPool, L2Advertisement, ServiceBGPStatus,
    ServiceL2Status,
};
use crate::api::v1beta2::BGPPeer;
use crate::config::{Config, Options as ConfigOptions, Resources};
use crate::k8s::call::{CallError, call, classify};
use crate::k8s::events::Recorder;
use crate::k8s::index::Index;
use crate::k8s::memberlist::SECRET_KEY;
use crate::k8s::queue::{Backoff, PendingWrites, Queue, Retry, Sender};
use crate::k8s::watch::{self, Watches};
use crate::metrics::{self, BgpMetrics, Health, K8sClientMetrics, Layer2Metrics, SpeakerMetrics};
use crate::net::iface::{self, Exclusions};
use crate::service::{self as svcs, ServiceKey};
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
use std::time::Duration;

mod alive;
mod announce;
mod config;
mod guard;
mod parts;
mod uplink;
mod watches;
mod writes;

use alive::seeds;
use watches::start_watches;

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
    /// Where and how `/metrics`, `/healthz` and `/readyz` are served.
    pub serving: metrics::Serving,
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

/// Retries of failed status object writes.
const RETRY: Backoff = Backoff {
    first: Duration::from_secs(1),
    max: Duration::from_secs(8),
};

/// How often the loop retries what may have failed or changed without an
/// event: joining the gossip seeds, the gossip keys, membership start.
const HOUSEKEEPING: Duration = Duration::from_secs(2);

/// The ConfigMap listing interfaces never to announce from.
pub const EXCLUDE_CONFIGMAP: &str = "metallb-excludel2";
/// Its key.
pub const EXCLUDE_KEY: &str = "excludel2.yaml";

/// The speaker's units of work.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Work {
    /// One service.
    Service(ServiceKey),
    /// Every service (the services watch listed again).
    All,
    /// Node objects changed (most changes are heartbeats: checked first).
    Nodes,
    /// A configuration kind changed: reload the configuration.
    Config,
    /// The interface exclusion list changed: rescan the interfaces.
    Interfaces,
    /// Presence leases or the gossip view changed, or time passed: who
    /// counts as alive may have changed.
    Liveness,
}

struct Stores {
    services: Store<Service>,
    nodes: Store<Node>,
    config: watches::ConfigStores,
    configmaps: Store<ConfigMap>,
    statuses: Store<ServiceL2Status>,
    bgp_statuses: Store<ServiceBGPStatus>,
    leases: Store<Lease>,
    /// The three kinds a service's plan reads besides the service, by
    /// service: a batch of a few services reads only theirs.
    /// EndpointSlices as their serving nodes (no cache keeps them whole).
    slices_by_service: Index<ServiceKey, EndpointSlice, election::SliceEndpoints>,
    statuses_by_service: Index<ServiceKey, ServiceL2Status>,
    bgp_statuses_by_service: Index<ServiceKey, ServiceBGPStatus>,
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
    let registry = metrics::registry();
    let metrics = Metrics {
        k8s: K8sClientMetrics::new(&registry),
        speaker: SpeakerMetrics::new(&registry),
    };
    let l2_metrics = Layer2Metrics::new(&registry);
    let bgp_metrics = BgpMetrics::new(&registry);
    let health = Arc::new(Health::default());
    let (queue, tx) = Queue::new(RETRY);
    let mut watches = Watches::new();
    let stores = start_watches(&client, &opts, &mut watches, &tx);
    // Only the watches queue work: the loop ends when all have stopped.
    drop(tx);
    let leases_api: Api<Lease> = Api::namespaced(client.clone(), &opts.namespace);
    let mut runner = Runner::new(parts::Parts {
        client: &client,
        opts: &opts,
        queue,
        stores,
        metrics,
        l2_metrics,
        bgp_metrics,
        registry: &registry,
        health: &health,
    });
    let work = async {
        runner.start(&mut watches, &leases_api).await?;
        runner.serve(&leases_api).await
    };
    let result: anyhow::Result<()> = tokio::select! {
        r = work => r,
        () = shutdown => Ok(()),
        // Serves until the process stops; returns only on a server error.
        r = crate::k8s::metrics_auth::serve(
            opts.serving.clone(),
            registry,
            health.clone(),
            client.clone(),
        ) => r,
    };
    runner.shut_down(&leases_api).await;
    result
}

/// A 429 or 5xx answer is retried as renewals are, while time lasts:
/// an uncleared lease leaves our addresses to gossip and the lease's
/// own period.
async fn clear_presence(leases_api: &Api<Lease>, node: &str) {
    let mut delays = renewal::retries();
    loop {
        let Err(e) = presence::leave(leases_api, node).await else {
            return;
        };
        let e = CallError::Api(e);
        if classify(&e).retry() != Retry::Backoff {
            tracing::warn!(error = %e, "could not record this speaker's departure");
            return;
        }
        tracing::debug!(error = %e, "could not clear the presence lease; retrying");
        tokio::time::sleep(delays.next().unwrap_or(renewal::RETRY.max)).await;
    }
}

impl Runner {
    /// Once every watch has listed: loads the configuration, joins the
    /// speakers if it is valid, and makes the first full pass.
    async fn start(
        &mut self,
        watches: &mut Watches,
        leases_api: &Api<Lease>,
    ) -> anyhow::Result<()> {
        watches.wait_until_listed().await?;
        self.gossip_run = self.opts.membership.is_some().then(|| {
            let leases = self.stores.leases.state();
            let last = presence::last_run(leases.iter().map(|l| &**l), &self.opts.node);
            super::membership::next_run(super::membership::wall_millis(), last)
        });
        self.reload_config().await;
        if self.config.is_some() {
            self.join(leases_api).await;
        } else {
            tracing::warn!(
                "no valid configuration: not joining the speakers until one loads, so the others keep this node's addresses"
            );
        }
        self.owner = self.owner_reference().await;
        self.rescan_interfaces().await;
        self.full_pass().await;
        self.health.set_ready(true);
        tracing::info!(
            announced = self.announcer.services().count(),
            "initial sync done"
        );
        Ok(())
    }

    /// Records this speaker's presence and starts the renewals, the
    /// gossip membership and the guard.
    async fn join(&mut self, leases_api: &Api<Lease>) {
        match tokio::time::timeout(
            renewal::RENEW_TIMEOUT,
            presence::join(
                leases_api,
                &self.opts.node,
                presence::Mode::Slow,
                self.gossip_run,
            ),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not record this speaker's presence yet (the renewal task retries)")
            }
            Err(_) => tracing::warn!(
                "recording this speaker's presence timed out (the renewal task retries)"
            ),
        }
        self.start_renewal(leases_api);
        self.start_membership().await;
        self.start_guard();
    }

    /// The loop: work from the watches, unsolicited announcements,
    /// interface rescans, housekeeping and liveness, until every watch
    /// has stopped.
    async fn serve(&mut self, leases_api: &Api<Lease>) -> anyhow::Result<()> {
        let mut trimmer = crate::memory::Trimmer::new(Duration::from_secs(5));
        trimmer.maybe_trim();
        let mut rescan = tokio::time::interval(self.opts.rescan);
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING);
        // Renewals become overdue with time alone: look again often.
        let mut liveness_tick = tokio::time::interval(Duration::from_millis(250));
        let mut gossip = LoopGossip {
            view_changes: self.membership.as_ref().map(|m| m.subscribe()),
            wanted: self.opts.membership.is_some() && self.membership.is_none(),
        };
        loop {
            // Every branch below ends within a bounded time (API calls time
            // out); the liveness tick alone beats four times a second.
            self.health.beat();
            let written = self.renewal.as_ref().map(|r| r.written());
            let garp_at = self.announcer.next_wakeup();
            let garp = async {
                match garp_at {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                batch = self.queue.next() => {
                    let Some(batch) = batch else { anyhow::bail!("every watch stopped") };
                    self.process(batch).await;
                    trimmer.maybe_trim();
                }
                () = garp => self.announcer.send_due(std::time::Instant::now()).await,
                _ = rescan.tick() => {
                    if self.rescan_interfaces().await {
                        self.full_pass().await;
                    }
                }
                _ = housekeeping.tick() => self.housekeeping(leases_api, &mut gossip).await,
                _ = liveness_tick.tick() => {
                    // The uplink's flags changed: its responders go (or
                    // come back) now, not at the next rescan.
                    if self.look_at_uplink() {
                        self.rescan_interfaces().await;
                        self.full_pass().await;
                    } else if self.refresh_liveness() {
                        self.full_pass().await;
                    }
                }
                Ok(()) = async {
                    match gossip.view_changes.as_mut() {
                        Some(rx) => rx.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if self.refresh_liveness() {
                        self.full_pass().await;
                    }
                }
                // A write of ours went through: it may be the one the
                // lease watch was to show back for a verdict.
                () = async {
                    match &written {
                        Some(n) => n.notified().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if self.refresh_liveness() {
                        self.full_pass().await;
                    }
                }
            }
        }
    }

    /// What may have failed or changed without an event: the renewals,
    /// the gossip seeds and keys, and membership start.
    async fn housekeeping(&mut self, leases_api: &Api<Lease>, gossip: &mut LoopGossip) {
        // Renewals run in a task of their own (see `renewal`),
        // started once a valid configuration has loaded.
        let joined = self.config.is_some();
        if joined {
            self.start_renewal(leases_api);
        }
        if let (Some(m), Some(ml)) = (&self.membership, &self.opts.membership) {
            m.join(seeds(&self.stores.nodes.state(), &self.opts.node, ml.bind));
        }
        self.refresh_keyring();
        if gossip.wanted && joined {
            self.start_membership().await;
            self.start_guard();
            if let Some(m) = &self.membership {
                gossip.view_changes = Some(m.subscribe());
                gossip.wanted = false;
            }
        }
    }

    /// Withdraw at once (stop answering), then clear the lease before
    /// anything else: it is what makes the others take our addresses over
    /// at once, and the manifests' grace period (2 s) may end in SIGKILL
    /// before a slow BGP close or gossip leave is done. Then close the BGP
    /// sessions (routers drop our routes now rather than after the hold
    /// time) and say goodbye in gossip side by side, best effort.
    async fn shut_down(&mut self, leases_api: &Api<Lease>) {
        self.announcer.shutdown();
        // No renewal may land after the lease is cleared (it would mark this
        // speaker present again): the renewal task stops first.
        self.renewal = None;
        let clear = clear_presence(leases_api, &self.opts.node);
        if tokio::time::timeout(LEAVE_TIMEOUT, clear).await.is_err() {
            tracing::warn!("could not record this speaker's departure in time");
        }
        let membership = self.membership.take();
        let goodbyes = async {
            tokio::join!(self.bgp.shutdown(), async {
                if let Some(m) = membership {
                    m.leave().await;
                }
            });
            self.delete_own_statuses().await;
        };
        if tokio::time::timeout(Duration::from_secs(1), goodbyes)
            .await
            .is_err()
        {
            tracing::warn!("cleanup on shutdown timed out");
        }
        tracing::info!("withdrew every announcement");
    }
}

/// The loop's gossip state: the view to follow, and whether membership
/// is still to start (it waits for a valid configuration).
struct LoopGossip {
    view_changes: Option<tokio::sync::watch::Receiver<super::membership::View>>,
    wanted: bool,
}

/// How long shutdown waits to clear this speaker's lease: under half the
/// manifests' termination grace period, so the goodbyes after it still
/// have time.
pub const LEAVE_TIMEOUT: Duration = Duration::from_millis(800);

struct Runner {
    /// Pending work, and retries of failed status writes.
    queue: Queue<Work>,
    client: kube::Client,
    recorder: Recorder,
    opts: Options,
    stores: Stores,
    metrics: Metrics,
    config: Option<Config>,
    config_state: crate::k8s::config_state::Reporter,
    /// Layer 2: what this node answers for (the one record of it).
    announcer: Announcer,
    /// BGP sessions and routes (the one record of what is announced).
    bgp: bgp::Speaker,
    /// The exclusion patterns in force (source list, compiled).
    exclusions: (Vec<String>, Exclusions),
    owner: Option<OwnerReference>,
    /// What election last saw of the nodes (heartbeats do not change it).
    node_view: Vec<NodeInfo>,
    /// Status objects we created (kind, service) and the watch has not
    /// shown yet: no second one is created meanwhile.
    created: PendingWrites<(&'static str, ServiceKey)>,
    /// Nodes whose speaker counts (see `liveness`).
    alive: BTreeSet<String>,
    /// Cut off from the API server and most speakers: announce nothing.
    isolated: bool,
    /// Gossip membership, when on.
    membership: Option<Membership>,
    /// This run's gossip number (`membership::next_run`), chosen once the
    /// leases are listed; its lease records it for the next run.
    gossip_run: Option<u64>,
    /// The gossip keys last read from the `memberlist` Secret.
    keyring: Option<super::membership::Keyring>,
    /// Where the gossip metrics are registered once membership starts.
    registry: prometheus::Registry,
    /// What this speaker's lease renewals achieved (written by the
    /// renewal task, read by the loop and the guard).
    renewals: Arc<tokio::sync::watch::Sender<Record>>,
    /// The renewal task, once this speaker has joined.
    renewal: Option<Renewal>,
    /// What judging liveness remembers from one pass to the next.
    judging: alive::Judging,
    /// Silences the responders when cut off, beside the loop (see `guard`).
    guard: Option<tokio_util::task::AbortOnDropHandle<()>>,
    /// `/healthz`'s heartbeat, bumped per service in long passes.
    health: Arc<Health>,
    /// Layer 2 winners remembered between passes.
    elected: election::memo::Memo,
    /// The uplink's link state (see `uplink`).
    uplink: uplink::Tracker,
}

impl Runner {
    /// The speaker Pod as owner of its status objects, when it runs in one.
    async fn owner_reference(&self) -> Option<OwnerReference> {
        let name = self.opts.pod_name.as_deref()?;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        match call(pods.get_opt(name)).await {
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

    async fn process(&mut self, batch: Vec<Work>) {
        let mut all = false;
        let mut config = false;
        let mut interfaces = false;
        let mut keys = BTreeSet::new();
        for work in batch {
            match work {
                Work::Service(k) => {
                    keys.insert(k);
                }
                Work::All => all = true,
                Work::Nodes => {
                    let view = self.nodes();
                    if view != self.node_view {
                        self.node_view = view;
                        all = true;
                        // Node labels decide which peers and BGP
                        // advertisements this node validates.
                        config = true;
                    }
                }
                Work::Config => config = true,
                Work::Interfaces => interfaces = true,
                Work::Liveness => {}
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
        } else if self.config.is_some() {
            let objects = watches::objects(&self.stores, Some(&keys));
            self.process_services(keys, &objects).await;
        }
    }

    /// Every service with an address, plus what we announce for services
    /// that vanished.
    async fn full_pass(&mut self) {
        if self.config.is_none() {
            return;
        }
        let mut keys: BTreeSet<ServiceKey> = self
            .stores
            .services
            .state()
            .iter()
            .filter(|s| !svcs::ingress_ips(s).unwrap_or_default().is_empty())
            .map(|s| svcs::key(s))
            .collect();
        keys.extend(self.announcer.services().cloned());
        keys.extend(self.bgp.services().cloned());
        keys.extend(self.own_status_keys(&self.stores.statuses));
        keys.extend(self.own_status_keys(&self.stores.bgp_statuses));
        self.node_view = self.nodes();
        self.refresh_liveness();
        self.sync_peers().await;
        if self.isolated {
            // Stop answering everywhere first: the status work below talks
            // to an API server that may not answer for a long time.
            self.withdraw_layer2().await;
        }
        self.elected.retain(&keys);
        let objects = watches::objects(&self.stores, None);
        self.process_services(keys, &objects).await;
        // Every service has been seen: the BGP tables are whole, and
        // sessions with graceful restart may send theirs and End-of-RIB.
        self.bgp.first_pass_complete();
    }

    /// Runs a BGP session for each BGPPeer that selects this node.
    async fn sync_peers(&mut self) {
        let me = self.node_view.iter().find(|n| n.name == self.opts.node);
        let (sessions, bfd) = match (&self.config, me) {
            (Some(config), Some(me)) => {
                let addresses = self.node_addresses();
                let peers = advertise::peers_for_node(config, me);
                let sessions = peers
                    .iter()
                    .map(|p| bgp::session_config(p, addresses))
                    .collect();
                let bfd = peers
                    .iter()
                    .copied()
                    .filter_map(bgp::bfd_link::link_config)
                    .collect();
                (sessions, bfd)
            }
            _ => (Vec::new(), Vec::new()),
        };
        self.bgp.set_peers(sessions).await;
        self.bgp.set_bfd(bfd).await;
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

    fn own_status_keys<K: StatusObject>(&self, store: &Store<K>) -> Vec<ServiceKey> {
        store
            .state()
            .iter()
            .filter(|o| o.labels().get(status::NODE_LABEL) == Some(&self.opts.node))
            .filter_map(|o| watches::status_key(&**o))
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
}
