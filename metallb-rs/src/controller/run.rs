//! The controller process: leader election, watches, the work queue, and
//! the writes [`super::converge`] asks for. One task owns the allocator
//! and decides one service at a time, as upstream's single-worker loop
//! does; the writes a batch decided go out together.
//!
//! Order of work: nothing is assigned until every watch has listed; then a
//! full pass converges services that already hold addresses first (so a
//! restart never moves one), then the rest; afterwards single services as
//! they change, and a full pass whenever something was freed or the
//! configuration changed.
//!
//! No valid configuration, no writes: until one has loaded in this
//! leadership term (first start, every takeover) the controller only
//! reports the errors. Without pools every held address would look
//! foreign and be cleared, so a typo followed by a restart would take
//! every service's address away (upstream's `SetBalancer` waits the same
//! way). Once loaded, an invalid change keeps the last valid one in force.

use super::converge::{self, Decision, Write};
use crate::allocator::Allocator;
use crate::api::v1beta1::{Community, IPAddressPool, IPAddressPoolStatus};
use crate::config::{Config, Options as ConfigOptions, Pool, Resources};
use crate::k8s::call::API_CALL_TIMEOUT;
use crate::k8s::call::{CallError, call, classify};
use crate::k8s::events::Recorder;
use crate::k8s::leader::{Acting, LeaseLock, Timings};
use crate::k8s::queue::{Backoff, PendingWrites, Queue, Sender, behind_our_write};
use crate::k8s::watch::{self, Watches};
use crate::metrics::{self, AllocatorMetrics, Health, K8sClientMetrics};
use crate::service::{self, ServiceKey};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::task::AbortOnDropHandle;

mod webhooks;
mod writes;
use writes::{Planned, WRITES_IN_FLIGHT};

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The MetalLB namespace (pools, ConfigurationState, lease).
    pub namespace: String,
    /// `--lb-class`.
    pub lb_class: Option<String>,
    /// Elect one active replica through a Lease.
    pub leader_elect: bool,
    /// This replica's identity (lease holder, event instance).
    pub identity: String,
    /// Lease timings.
    pub lease: Timings,
    /// Where and how `/metrics`, `/healthz` and `/readyz` are served
    /// (the TLS policy also governs every other HTTPS server).
    pub serving: metrics::Serving,
    /// The speakers' gossip Secret, created when missing (None: not managed).
    pub memberlist_secret: Option<String>,
    /// Whether this replica serves the validating webhooks.
    pub webhooks: Webhooks,
}

/// `--webhook-mode`, with what serving needs.
#[derive(Debug, Clone)]
pub enum Webhooks {
    /// No webhook server (`disabled`).
    Disabled,
    /// Webhooks beside the controller's work (`enabled`).
    Enabled(crate::k8s::webhook::Options),
    /// Webhooks and their certificate only: no services, no pools
    /// (`onlywebhook`).
    Only(crate::k8s::webhook::Options),
}

/// The Lease replicas compete for.
pub const LEASE_NAME: &str = "metallb-controller";
/// The ConfigurationState object the controller writes.
pub const CONFIG_STATE_NAME: &str = "controller";
/// How often an idle loop beats `/healthz`'s heartbeat.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// Retries of failed service writes.
const RETRY: Backoff = Backoff {
    first: Duration::from_millis(500),
    max: Duration::from_secs(32),
};

/// The controller's units of work.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Work {
    /// The pools changed: reload the configuration.
    Pools,
    /// Every service (the services watch listed again).
    AllServices,
    /// A namespace changed: its services, when its labels did.
    Namespace(String),
    /// One service.
    Service(ServiceKey),
}

struct Metrics {
    k8s: K8sClientMetrics,
    allocator: AllocatorMetrics,
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    opts: Options,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let registry = metrics::registry();
    let metrics = Arc::new(Metrics {
        k8s: K8sClientMetrics::new(&registry),
        allocator: AllocatorMetrics::new(&registry),
    });
    let health = Arc::new(Health::default());
    // Serving only the webhooks, a replica never leads.
    let elects = opts.leader_elect && !matches!(opts.webhooks, Webhooks::Only(_));
    let lock = elects.then(|| {
        LeaseLock::new(
            client.clone(),
            &opts.namespace,
            LEASE_NAME,
            &opts.identity,
            opts.lease,
        )
    });
    // Every replica serves (a standby too), before it competes for the
    // lease: the webhook's availability never waits for an election.
    let mut webhooks = match &opts.webhooks {
        Webhooks::Disabled => None,
        Webhooks::Enabled(w) | Webhooks::Only(w) => {
            Some(webhooks::start(&client, w, &opts.serving.tls, &health).await?)
        }
    };
    let work = act(&client, &opts, lock.as_ref(), &metrics, &health);
    let result = {
        let webhooks_stopped = async {
            match webhooks.as_mut() {
                Some(w) => w.stopped().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = work => r,
            () = shutdown => Ok(()),
            e = webhooks_stopped => Err(e),
            // Serves until the process stops; returns only on a server error.
            r = crate::k8s::metrics_auth::serve(
                opts.serving.clone(),
                registry,
                health.clone(),
                client.clone(),
            ) => r,
        }
    };
    step_down(lock.as_ref(), webhooks.take()).await;
    result
}

/// This replica's work while it runs: nothing past the webhooks when it
/// serves only those, every leadership term it wins when it competes for
/// the lease, or one term without end when it does not.
async fn act(
    client: &kube::Client,
    opts: &Options,
    lock: Option<&LeaseLock>,
    metrics: &Arc<Metrics>,
    health: &Arc<Health>,
) -> anyhow::Result<()> {
    match lock {
        _ if matches!(opts.webhooks, Webhooks::Only(_)) => {
            health.set_ready(true);
            std::future::pending().await
        }
        None => {
            let (_tx, rx) = tokio::sync::watch::channel(Acting::Always);
            lead(client, opts, metrics, health, rx).await
        }
        Some(lock) => lead_when_elected(client, opts, lock, metrics, health).await,
    }
}

/// Competes for the lease and leads each term it wins; waiting as a
/// standby counts as alive.
async fn lead_when_elected(
    client: &kube::Client,
    opts: &Options,
    lock: &LeaseLock,
    metrics: &Arc<Metrics>,
    health: &Arc<Health>,
) -> anyhow::Result<()> {
    let (mut leading, election) = lock.clone().run();
    // Ready means "up and able to take over", not "leading": a rolling
    // update needs the new replica Ready while the old one still holds
    // the lease.
    health.set_ready(true);
    let _election = AbortOnDropHandle::new(election);
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    loop {
        while !leading
            .borrow_and_update()
            .leading(tokio::time::Instant::now())
        {
            // A standby is alive too: it waits to take over.
            health.beat();
            tokio::select! {
                changed = leading.changed() => changed?,
                _ = heartbeat.tick() => {}
            }
        }
        lead(client, opts, metrics, health, leading.clone()).await?;
        tracing::warn!("no longer the leader: stopped acting, waiting to lead again");
    }
}

/// Side by side, within the manifests' 5 s grace period: hands the lease
/// over at once instead of making the next leader wait it out, and lets
/// the reviews in flight finish.
async fn step_down(lock: Option<&LeaseLock>, webhooks: Option<webhooks::Running>) {
    let release = async {
        if let Some(lock) = lock {
            match tokio::time::timeout(Duration::from_secs(2), lock.release()).await {
                Ok(Ok(())) => tracing::info!("released the leader lease"),
                Ok(Err(e)) => tracing::warn!(error = %e, "could not release the leader lease"),
                Err(_) => tracing::warn!("releasing the leader lease timed out"),
            }
        }
    };
    let drain = async {
        if let Some(w) = webhooks {
            w.drain().await;
        }
    };
    tokio::join!(release, drain);
}

/// One leadership term: watches, initial full pass, then the queue, until
/// `leading` says it no longer leads (or the watches end).
async fn lead(
    client: &kube::Client,
    opts: &Options,
    metrics: &Arc<Metrics>,
    health: &Arc<Health>,
    mut leading: tokio::sync::watch::Receiver<Acting>,
) -> anyhow::Result<()> {
    if let Some(name) = &opts.memberlist_secret {
        ensure_memberlist_secret(client, &opts.namespace, name).await;
    }
    let (queue, tx): (_, Sender<Work>) = Queue::new(RETRY);
    // Kept for the term: dropping them stops the watches.
    let (mut watches, stores) = start_watches(client, &opts.namespace, tx);
    watches.wait_until_listed().await?;
    let mut runner = Runner::new(client, opts, metrics, health, &leading, queue, stores);
    runner.reload_config().await;
    runner.full_pass().await;
    runner.sync_pools().await;
    health.set_ready(true);
    tracing::info!(
        services = runner.alloc.services().len(),
        "initial sync done"
    );
    runner.serve_queue(&mut leading).await
}

/// Creates the speakers' gossip Secret when it is missing; a failure is
/// only logged (the speakers with membership wait for it).
async fn ensure_memberlist_secret(client: &kube::Client, namespace: &str, name: &str) {
    match crate::k8s::memberlist::ensure(client, namespace, name).await {
        Ok(true) => tracing::info!(secret = %name, "created the speakers' gossip secret"),
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(secret = %name, error = %e, "could not create the speakers' gossip secret; speakers with membership wait for it")
        }
    }
}

/// The caches of the objects a term reads.
struct Stores {
    services: Store<Service>,
    namespaces: Store<Namespace>,
    pools: Store<IPAddressPool>,
    communities: Store<Community>,
}

/// The watches of one term, each turning its events into work on `tx`.
fn start_watches(client: &kube::Client, namespace: &str, tx: Sender<Work>) -> (Watches, Stores) {
    let mut watches = Watches::new();
    let services = {
        let tx = tx.clone();
        watches.spawn(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
            move |ev| match ev {
                watcher::Event::Apply(s) | watcher::Event::Delete(s) => {
                    tx.push(Work::Service(service::key(s)))
                }
                watcher::Event::InitDone => tx.push(Work::AllServices),
                _ => {}
            },
        )
    };
    let namespaces = {
        let tx = tx.clone();
        watches.spawn(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
            move |ev| {
                if let Some(ns) = watch::object(ev) {
                    tx.push(Work::Namespace(ns.name_any()));
                }
            },
        )
    };
    let pools = {
        let tx = tx.clone();
        watches.spawn(
            Api::<IPAddressPool>::namespaced(client.clone(), namespace),
            watcher::Config::default(),
            move |ev| {
                if !matches!(ev, watcher::Event::Init | watcher::Event::InitApply(_)) {
                    tx.push(Work::Pools);
                }
            },
        )
    };
    // Communities are part of what the pool side validates, as upstream's
    // pool reconciler reads them.
    let communities = watches.spawn(
        Api::<Community>::namespaced(client.clone(), namespace),
        watcher::Config::default(),
        move |ev| {
            if !matches!(ev, watcher::Event::Init | watcher::Event::InitApply(_)) {
                tx.push(Work::Pools);
            }
        },
    );
    let stores = Stores {
        services,
        namespaces,
        pools,
        communities,
    };
    (watches, stores)
}

struct Runner {
    client: kube::Client,
    opts: Options,
    recorder: Recorder,
    metrics: Arc<Metrics>,
    services: Store<Service>,
    namespaces: Store<Namespace>,
    pools: Store<IPAddressPool>,
    communities: Store<Community>,
    alloc: Allocator,
    /// The configuration in force (the last valid one).
    config: Option<BTreeMap<String, Pool>>,
    /// Pending work, and retries of failed writes.
    queue: Queue<Work>,
    /// Services we wrote whose write the watch has not shown yet, with
    /// the resourceVersion written.
    pending: PendingWrites<ServiceKey, Vec<String>>,
    namespace_labels: HashMap<String, BTreeMap<String, String>>,
    leading: tokio::sync::watch::Receiver<Acting>,
    config_state: crate::k8s::config_state::Reporter,
    /// `/healthz`'s heartbeat, bumped per service in long passes.
    health: Arc<Health>,
}

impl Runner {
    /// A term's runner over its watches' caches, holding nothing yet.
    fn new(
        client: &kube::Client,
        opts: &Options,
        metrics: &Arc<Metrics>,
        health: &Arc<Health>,
        leading: &tokio::sync::watch::Receiver<Acting>,
        queue: Queue<Work>,
        stores: Stores,
    ) -> Runner {
        let namespace_labels = stores
            .namespaces
            .state()
            .iter()
            .map(|ns| (ns.name_any(), ns.labels().clone()))
            .collect();
        Runner {
            client: client.clone(),
            opts: opts.clone(),
            recorder: Recorder::new(client.clone(), "metallb-controller", &opts.identity),
            metrics: metrics.clone(),
            services: stores.services,
            namespaces: stores.namespaces,
            pools: stores.pools,
            communities: stores.communities,
            alloc: Allocator::new(),
            config: None,
            queue,
            pending: PendingWrites::default(),
            namespace_labels,
            leading: leading.clone(),
            health: health.clone(),
            config_state: crate::k8s::config_state::Reporter::new(
                client.clone(),
                &opts.namespace,
                CONFIG_STATE_NAME,
                json!({ "metallb.io/component-type": "controller" }),
                "poolReconcilerValid",
                metrics.k8s.clone(),
            ),
        }
    }

    /// Takes batches of work off the queue until `leading` says this
    /// replica no longer leads (or every watch stopped), beating
    /// `/healthz` while idle.
    async fn serve_queue(
        &mut self,
        leading: &mut tokio::sync::watch::Receiver<Acting>,
    ) -> anyhow::Result<()> {
        let mut trimmer = crate::memory::Trimmer::new(Duration::from_secs(5));
        trimmer.maybe_trim();
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        loop {
            self.health.beat();
            let batch = tokio::select! {
                batch = self.queue.next() => batch,
                _ = heartbeat.tick() => continue,
                changed = leading.changed() => {
                    if changed.is_err() || !leading.borrow().leading(tokio::time::Instant::now()) {
                        return Ok(());
                    }
                    continue;
                }
            };
            let Some(batch) = batch else {
                anyhow::bail!("every watch stopped");
            };
            self.process(batch).await;
            trimmer.maybe_trim();
        }
    }

    fn may_act(&self) -> bool {
        self.leading.borrow().leading(tokio::time::Instant::now())
    }

    async fn process(&mut self, batch: Vec<Work>) {
        let mut all = false;
        let mut pools = false;
        let mut keys = BTreeSet::new();
        for work in batch {
            match work {
                Work::Service(k) => {
                    keys.insert(k);
                }
                Work::AllServices => all = true,
                Work::Pools => pools = true,
                Work::Namespace(ns) => {
                    let labels = self
                        .namespaces
                        .get(&ObjectRef::new(&ns))
                        .map(|n| n.labels().clone());
                    let Some(labels) = labels else {
                        // Gone: pools' namespaceSelectors may select one
                        // namespace fewer.
                        pools |= self.namespace_labels.remove(&ns).is_some();
                        continue;
                    };
                    if self.namespace_labels.get(&ns) != Some(&labels) {
                        // Pools resolve namespaceSelectors against the
                        // namespaces' labels.
                        pools = true;
                        self.namespace_labels.insert(ns.clone(), labels);
                        keys.extend(
                            self.services
                                .state()
                                .iter()
                                .filter(|s| s.namespace().as_deref() == Some(ns.as_str()))
                                .map(|s| service::key(s)),
                        );
                    }
                }
            }
        }
        if pools && self.reload_config().await {
            all = true;
        }
        if !all {
            let mut writes = Vec::new();
            for key in keys {
                all |= self.process_service(&key, &mut writes).await;
            }
            self.send(writes).await;
        }
        if all {
            self.full_pass().await;
        }
        self.sync_pools().await;
    }

    /// Converges every service, those holding addresses first; repeats
    /// while a pass frees something (bounded).
    async fn full_pass(&mut self) {
        if self.config.is_none() {
            tracing::info!("no valid configuration loaded yet: leaving every service as it is");
            return;
        }
        for round in 0..5 {
            if round > 0 {
                tracing::debug!(round, "reprocessing all services");
            }
            let mut list: Vec<(bool, ServiceKey)> = self
                .services
                .state()
                .iter()
                .map(|s| {
                    (
                        service::ingress_ips(s)
                            .map(|i| i.is_empty())
                            .unwrap_or(true),
                        service::key(s),
                    )
                })
                .collect();
            list.sort();
            // Allocations of services that vanished while we were not looking.
            let present: BTreeSet<&ServiceKey> = list.iter().map(|(_, k)| k).collect();
            let gone: Vec<ServiceKey> = self
                .alloc
                .services()
                .into_iter()
                .filter(|k| !present.contains(*k))
                .cloned()
                .collect();
            let mut again = false;
            for key in gone {
                again |= converge::deleted(&mut self.alloc, &key).reprocess_all;
            }
            let mut writes = Vec::new();
            for (_, key) in list {
                // A long pass is progress too: `/healthz` must not fail on it.
                self.health.beat();
                again |= self.process_service(&key, &mut writes).await;
                if writes.len() >= WRITES_IN_FLIGHT * 4 {
                    self.send(std::mem::take(&mut writes)).await;
                }
            }
            // The next round reads the pending table: every write of this
            // one has been answered by then.
            self.send(writes).await;
            if !again {
                return;
            }
        }
        tracing::warn!("services kept freeing addresses for 5 passes; continuing with the queue");
    }

    /// Converges one service, adding the write it needs to `writes`; true
    /// when all must be reprocessed.
    async fn process_service(&mut self, key: &ServiceKey, writes: &mut Vec<Planned>) -> bool {
        let Some(svc) = self.services.get(&key.object_ref()) else {
            self.pending.forget(key);
            return converge::deleted(&mut self.alloc, key).reprocess_all;
        };
        if !service::class_matches(&svc, self.opts.lb_class.as_deref()) {
            return converge::deleted(&mut self.alloc, key).reprocess_all;
        }
        if self.config.is_none() {
            tracing::debug!(service = %key, "not processing: no valid configuration loaded yet");
            return false;
        }
        let seen = svc.resource_version();
        if self
            .pending
            .in_flight(key, |before| !behind_our_write(before, seen.as_deref()))
        {
            // Our write is on its way back through the watch; acting on
            // the older copy would undo it.
            return false;
        }
        let Some(labels) = self.namespace_labels.get(&key.namespace).cloned() else {
            // Its namespace's watch event has not arrived yet; it will
            // queue this service.
            return false;
        };
        let decision: Decision = converge::set_balancer(&mut self.alloc, &svc, &labels);
        self.metrics.k8s.updates.inc();
        let reference = Recorder::reference(svc.as_ref());
        for ev in &decision.events {
            if ev.type_ == crate::event::EventType::Warning {
                tracing::warn!(service = %key, reason = %ev.reason, "{}", ev.message);
            } else {
                tracing::info!(service = %key, reason = %ev.reason, "{}", ev.message);
            }
            // Events are writes too: none from a replica that lost the lease.
            if self.may_act() {
                self.recorder.publish(&reference, ev).await;
            }
        }
        if let Some(write) = decision.write {
            if !self.may_act() {
                return false;
            }
            writes.push(Planned {
                key: key.clone(),
                svc,
                seen,
                write,
            });
        }
        decision.reprocess_all
    }

    /// Rebuilds the configuration from what upstream's pool reconciler
    /// reads (pools, communities, namespaces); true when it changed (and
    /// was applied). An invalid one is reported and ignored.
    async fn reload_config(&mut self) -> bool {
        let res = Resources {
            pools: self.pools.state().iter().map(|p| (**p).clone()).collect(),
            communities: self
                .communities
                .state()
                .iter()
                .map(|c| (**c).clone())
                .collect(),
            namespaces: self
                .namespaces
                .state()
                .iter()
                .map(|n| (**n).clone())
                .collect(),
            ..Resources::default()
        };
        let built = Config::build(
            &res,
            &ConfigOptions {
                namespace: self.opts.namespace.clone(),
            },
        );
        match built {
            Ok(cfg) => {
                if self.may_act() {
                    self.config_state.valid(&cfg.warnings).await;
                }
                if self.config.as_ref() == Some(&cfg.pools) {
                    return false;
                }
                let removed: Vec<String> = self
                    .config
                    .iter()
                    .flat_map(|c| c.keys())
                    .filter(|k| !cfg.pools.contains_key(*k))
                    .cloned()
                    .collect();
                let released = self.alloc.set_pools(&cfg.pools);
                tracing::info!(pools = ?cfg.pools.keys().collect::<Vec<_>>(), released = ?released, "configuration loaded");
                self.metrics.allocator.update(&self.alloc, &removed);
                self.config = Some(cfg.pools);
                true
            }
            Err(errors) => {
                if self.may_act() {
                    self.config_state.invalid(errors.to_string()).await;
                }
                false
            }
        }
    }
}
