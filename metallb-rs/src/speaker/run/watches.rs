//! The speaker's watches and what each queues, and the per-service
//! index of the objects a pass reads.

use super::*;
use crate::speaker::plan::Objects;

pub(super) fn start_watches(
    client: &kube::Client,
    opts: &Options,
    tasks: &mut Watches,
    tx: &Sender<Work>,
) -> Stores {
    let ns = opts.namespace.as_str();
    let send = |w: Work, tx: &Sender<Work>| tx.push(w);
    let cfg = watcher::Config::default;
    let services = {
        let tx = tx.clone();
        tasks.spawn(
            Api::<Service>::all(client.clone()),
            cfg(),
            move |ev| match ev {
                watcher::Event::Apply(s) | watcher::Event::Delete(s) => {
                    send(Work::Service(svcs::key(s)), &tx)
                }
                watcher::Event::InitDone => send(Work::All, &tx),
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
        tasks.spawn_trimmed(
            Api::<EndpointSlice>::all(client.clone()),
            cfg(),
            trim,
            move |ev| {
                if let Some(s) = watch::object(ev)
                    && let Some(name) = s.labels().get("kubernetes.io/service-name")
                {
                    send(
                        Work::Service(ServiceKey::new(s.namespace().unwrap_or_default(), name)),
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
                send(Work::Nodes, &tx);
            }
        })
    };
    let config = ConfigStores::spawn(tasks, client, ns, tx);
    let configmaps = {
        let tx = tx.clone();
        tasks.spawn(
            Api::<ConfigMap>::namespaced(client.clone(), ns),
            watcher::Config::default().fields(&format!("metadata.name={EXCLUDE_CONFIGMAP}")),
            move |ev| {
                if !matches!(ev, watcher::Event::Init | watcher::Event::InitApply(_)) {
                    send(Work::Interfaces, &tx);
                }
            },
        )
    };
    let statuses = tasks.spawn(
        Api::<ServiceL2Status>::namespaced(client.clone(), ns),
        cfg(),
        status_trigger(tx.clone()),
    );
    let bgp_statuses = tasks.spawn(
        Api::<ServiceBGPStatus>::namespaced(client.clone(), ns),
        cfg(),
        status_trigger(tx.clone()),
    );
    let leases = {
        let tx = tx.clone();
        tasks.spawn(
            Api::<Lease>::namespaced(client.clone(), ns),
            watcher::Config::default().labels(&format!("{}=speaker", presence::COMPONENT_LABEL)),
            move |ev| {
                // Renewals arrive every few seconds per node: only a change
                // of who counts as alive makes a full pass.
                if matches!(
                    ev,
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone
                ) {
                    send(Work::Liveness, &tx);
                }
            },
        )
    };
    Stores {
        services,
        slices,
        nodes,
        config,
        configmaps,
        statuses,
        bgp_statuses,
        leases,
    }
}

/// A status object changed: look at its service again.
pub(super) fn status_trigger<K: kube::Resource>(
    tx: Sender<Work>,
) -> impl FnMut(&watcher::Event<K>) + Send + 'static {
    move |ev| {
        if let Some(o) = watch::object(ev) {
            let l = o.labels();
            if let (Some(ns), Some(name)) = (
                l.get(status::SERVICE_NAMESPACE_LABEL),
                l.get(status::SERVICE_NAME_LABEL),
            ) {
                tx.push(Work::Service(ServiceKey::new(ns, name)));
            }
        }
    }
}

/// The configuration kinds, once: each is watched in the MetalLB
/// namespace (any change after the initial list reloads the
/// configuration), waited for with the other watches, and read into the
/// [`Resources`] field of the same name on reload.
macro_rules! config_kinds {
    ($($field:ident: $kind:ty),* $(,)?) => {
        /// The caches of the configuration kinds.
        pub(super) struct ConfigStores {
            $($field: Store<$kind>,)*
        }

        impl ConfigStores {
            fn spawn(
                tasks: &mut Watches,
                client: &kube::Client,
                ns: &str,
                tx: &Sender<Work>,
            ) -> Self {
                Self {
                    $($field: tasks.spawn(
                        Api::<$kind>::namespaced(client.clone(), ns),
                        watcher::Config::default(),
                        config_trigger(tx.clone()),
                    ),)*
                }
            }

            /// Every cached object, with `nodes` (node selectors are
            /// resolved against them).
            pub(super) fn resources(&self, nodes: Vec<Node>) -> Resources {
                Resources {
                    $($field: self.$field.state().iter().map(|o| (**o).clone()).collect(),)*
                    nodes,
                    namespaces: Vec::new(),
                }
            }
        }
    };
}

impl ConfigStores {
    /// The cached Secret `name` of the MetalLB namespace.
    pub(super) fn secret(&self, name: &str) -> Option<std::sync::Arc<Secret>> {
        self.secrets
            .state()
            .into_iter()
            .find(|s| s.metadata.name.as_deref() == Some(name))
    }
}

config_kinds! {
    pools: IPAddressPool,
    l2_advertisements: L2Advertisement,
    bgp_advertisements: BGPAdvertisement,
    peers: BGPPeer,
    bfd_profiles: BFDProfile,
    communities: Community,
    secrets: Secret,
}

/// Any change of a configuration kind (after the initial list) reloads
/// the configuration.
pub(super) fn config_trigger<K>(
    tx: Sender<Work>,
) -> impl FnMut(&watcher::Event<K>) + Send + 'static {
    move |ev| {
        if !matches!(ev, watcher::Event::Init | watcher::Event::InitApply(_)) {
            tx.push(Work::Config);
        }
    }
}

/// Status objects by the service their labels name (only `only`'s when
/// given).
fn by_service<K: StatusObject>(
    store: &Store<K>,
    only: Option<&BTreeSet<ServiceKey>>,
) -> BTreeMap<ServiceKey, Vec<Arc<K>>> {
    let mut out: BTreeMap<ServiceKey, Vec<Arc<K>>> = BTreeMap::new();
    for o in store.state() {
        let l = o.labels();
        if let (Some(ns), Some(name)) = (
            l.get(status::SERVICE_NAMESPACE_LABEL),
            l.get(status::SERVICE_NAME_LABEL),
        ) {
            let key = ServiceKey::new(ns, name);
            if only.is_none_or(|o| o.contains(&key)) {
                out.entry(key).or_default().push(o);
            }
        }
    }
    out
}

/// The objects of the services `only` (None: every service) the plans of
/// one batch read, in one scan of each cache.
pub(super) fn objects(stores: &Stores, only: Option<&BTreeSet<ServiceKey>>) -> Objects {
    let wanted = |key: &ServiceKey| only.is_none_or(|o| o.contains(key));
    let mut objects = Objects::default();
    match only {
        Some(keys) => {
            for key in keys {
                if let Some(svc) = stores.services.get(&key.object_ref()) {
                    objects.services.insert(key.clone(), svc);
                }
            }
        }
        None => {
            for svc in stores.services.state() {
                objects.services.insert(svcs::key(&svc), svc);
            }
        }
    }
    for s in stores.slices.state() {
        if let Some(name) = s.labels().get("kubernetes.io/service-name") {
            let key = ServiceKey::new(s.namespace().unwrap_or_default(), name);
            if wanted(&key) {
                objects.slices.entry(key).or_default().push(s);
            }
        }
    }
    objects.statuses = by_service(&stores.statuses, only);
    objects.bgp_statuses = by_service(&stores.bgp_statuses, only);
    objects
}
