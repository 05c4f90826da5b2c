//! The speaker's watches and what each queues, and the per-service
//! index of the objects a pass reads.

use super::*;
use crate::speaker::election::{Endpoints, SliceEndpoints};
use crate::speaker::plan::Objects;
use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

/// Starts every watch the speaker runs, in the order they are waited
/// for, and returns their caches and indexes.
pub(super) fn start_watches(
    client: &kube::Client,
    opts: &Options,
    tasks: &mut Watches,
    tx: &Sender<Work>,
) -> Stores {
    let ns = opts.namespace.as_str();
    let services = watch_services(client, tasks, tx);
    let slices_by_service = Index::with_values(slice_key, SliceEndpoints::of);
    let statuses_by_service = Index::new(status_key::<ServiceL2Status>);
    let bgp_statuses_by_service = Index::new(status_key::<ServiceBGPStatus>);
    watch_slices(client, tasks, tx, &slices_by_service);
    let nodes = watch_nodes(client, tasks, tx);
    let config = ConfigStores::spawn(tasks, client, ns, tx);
    let configmaps = watch_exclusions(client, tasks, tx, ns);
    let statuses = tasks.spawn_trimmed(
        Api::<ServiceL2Status>::namespaced(client.clone(), ns),
        watcher::Config::default(),
        trim_status,
        status_trigger(tx.clone(), statuses_by_service.clone()),
    );
    let bgp_statuses = tasks.spawn_trimmed(
        Api::<ServiceBGPStatus>::namespaced(client.clone(), ns),
        watcher::Config::default(),
        trim_status,
        status_trigger(tx.clone(), bgp_statuses_by_service.clone()),
    );
    let leases = watch_leases(client, tasks, tx, ns);
    Stores {
        services,
        nodes,
        config,
        configmaps,
        statuses,
        bgp_statuses,
        leases,
        slices_by_service,
        statuses_by_service,
        bgp_statuses_by_service,
    }
}

/// Services, trimmed to what the speaker reads: a change looks at the
/// service again, the end of a (re)list at every service.
fn watch_services(client: &kube::Client, tasks: &mut Watches, tx: &Sender<Work>) -> Store<Service> {
    let tx = tx.clone();
    tasks.spawn_trimmed(
        Api::<Service>::all(client.clone()),
        watcher::Config::default(),
        svcs::trim_for_speaker,
        move |ev| match ev {
            watcher::Event::Apply(s) | watcher::Event::Delete(s) => {
                tx.push(Work::Service(svcs::key(s)))
            }
            watcher::Event::InitDone => tx.push(Work::All),
            _ => {}
        },
    )
}

/// EndpointSlices, into `index` only. Election reads a slice only as
/// the nodes of its serving endpoints: the index keeps that summary and
/// no cache keeps the slices.
fn watch_slices(
    client: &kube::Client,
    tasks: &mut Watches,
    tx: &Sender<Work>,
    index: &Index<ServiceKey, EndpointSlice, SliceEndpoints>,
) {
    let tx = tx.clone();
    let index = index.clone();
    tasks.spawn_uncached(
        Api::<EndpointSlice>::all(client.clone()),
        watcher::Config::default(),
        move |ev| {
            index.observe(ev);
            if let Some(key) = watch::object(ev).and_then(slice_key) {
                tx.push(Work::Service(key));
            }
        },
    );
}

/// Nodes, trimmed: any change after the initial list.
fn watch_nodes(client: &kube::Client, tasks: &mut Watches, tx: &Sender<Work>) -> Store<Node> {
    let tx = tx.clone();
    tasks.spawn_trimmed(
        Api::<Node>::all(client.clone()),
        watcher::Config::default(),
        trim_node,
        move |ev| {
            if !matches!(ev, watcher::Event::Init | watcher::Event::InitApply(_)) {
                tx.push(Work::Nodes);
            }
        },
    )
}

/// The interface exclusion ConfigMap: any change after the initial list
/// rescans the interfaces.
fn watch_exclusions(
    client: &kube::Client,
    tasks: &mut Watches,
    tx: &Sender<Work>,
    ns: &str,
) -> Store<ConfigMap> {
    let tx = tx.clone();
    tasks.spawn(
        Api::<ConfigMap>::namespaced(client.clone(), ns),
        watcher::Config::default().fields(&format!("metadata.name={EXCLUDE_CONFIGMAP}")),
        move |ev| {
            if !matches!(ev, watcher::Event::Init | watcher::Event::InitApply(_)) {
                tx.push(Work::Interfaces);
            }
        },
    )
}

/// The speakers' presence leases. Renewals arrive every few seconds per
/// node: only a change of who counts as alive makes a full pass.
fn watch_leases(
    client: &kube::Client,
    tasks: &mut Watches,
    tx: &Sender<Work>,
    ns: &str,
) -> Store<Lease> {
    let tx = tx.clone();
    tasks.spawn(
        Api::<Lease>::namespaced(client.clone(), ns),
        watcher::Config::default().labels(&format!("{}=speaker", presence::COMPONENT_LABEL)),
        move |ev| {
            if matches!(
                ev,
                watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone
            ) {
                tx.push(Work::Liveness);
            }
        },
    )
}

/// Keeps of a status object (every node's, for every service) its name,
/// labels and status: the owner reference (the speaker Pod) and
/// annotations are never read.
fn trim_status<K: kube::Resource>(o: &mut K) {
    let meta = o.meta_mut();
    meta.owner_references = None;
    meta.annotations = None;
}

/// Keeps of a Node what the speaker reads: labels (selectors, election),
/// taints (out-of-service), condition types and states (Ready,
/// NetworkUnavailable) and addresses (gossip seeds, BGP next hops). A
/// kubelet's Node also lists every image and the machine's capacity,
/// kilobytes per node that a big cluster would make the speaker hold.
fn trim_node(n: &mut Node) {
    n.metadata.annotations = None;
    n.metadata.owner_references = None;
    if let Some(spec) = n.spec.as_mut() {
        *spec = NodeSpec {
            taints: spec.taints.take(),
            ..NodeSpec::default()
        };
    }
    if let Some(status) = n.status.as_mut() {
        let conditions = status.conditions.take().map(|cs| {
            cs.into_iter()
                .map(|c| NodeCondition {
                    type_: c.type_,
                    status: c.status,
                    ..NodeCondition::default()
                })
                .collect()
        });
        *status = NodeStatus {
            conditions,
            addresses: status.addresses.take(),
            ..NodeStatus::default()
        };
    }
}

/// The label naming an EndpointSlice's service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The service an EndpointSlice belongs to.
fn slice_key(s: &EndpointSlice) -> Option<ServiceKey> {
    let name = s.labels().get(SERVICE_NAME_LABEL)?;
    Some(ServiceKey::new(s.namespace().unwrap_or_default(), name))
}

/// The service a status object is about, from its labels.
pub(super) fn status_key<K: kube::Resource>(o: &K) -> Option<ServiceKey> {
    let l = o.labels();
    Some(ServiceKey::new(
        l.get(status::SERVICE_NAMESPACE_LABEL)?,
        l.get(status::SERVICE_NAME_LABEL)?,
    ))
}

/// A status object changed: index it, look at its service again.
fn status_trigger<K>(
    tx: Sender<Work>,
    index: Index<ServiceKey, K>,
) -> impl FnMut(&watcher::Event<K>) + Send + 'static
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    move |ev| {
        index.observe(ev);
        if let Some(key) = watch::object(ev).and_then(status_key) {
            tx.push(Work::Service(key));
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

/// Every status object by the service its labels name.
fn by_service<K: StatusObject>(store: &Store<K>) -> BTreeMap<ServiceKey, Vec<Arc<K>>> {
    let mut out: BTreeMap<ServiceKey, Vec<Arc<K>>> = BTreeMap::new();
    for o in store.state() {
        if let Some(key) = status_key(&*o) {
            out.entry(key).or_default().push(o);
        }
    }
    out
}

/// The objects of the services `only` (None: every service) the plans of
/// one batch read: through the per-service indexes for a few services,
/// in one scan of each cache for all of them.
pub(super) fn objects(stores: &Stores, only: Option<&BTreeSet<ServiceKey>>) -> Objects {
    let mut objects = Objects::default();
    let Some(keys) = only else {
        for svc in stores.services.state() {
            objects.services.insert(svcs::key(&svc), svc);
        }
        stores.slices_by_service.each(|key, slices| {
            objects
                .endpoints
                .insert(key.clone(), Endpoints::merge(slices));
        });
        objects.statuses = by_service(&stores.statuses);
        objects.bgp_statuses = by_service(&stores.bgp_statuses);
        return objects;
    };
    for key in keys {
        if let Some(svc) = stores.services.get(&key.object_ref()) {
            objects.services.insert(key.clone(), svc);
        }
        let endpoints = stores.slices_by_service.with(key, Endpoints::merge);
        if endpoints != Endpoints::default() {
            objects.endpoints.insert(key.clone(), endpoints);
        }
        let statuses = stores.statuses_by_service.get(&stores.statuses, key);
        if !statuses.is_empty() {
            objects.statuses.insert(key.clone(), statuses);
        }
        let bgp = stores
            .bgp_statuses_by_service
            .get(&stores.bgp_statuses, key);
        if !bgp.is_empty() {
            objects.bgp_statuses.insert(key.clone(), bgp);
        }
    }
    objects
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trimmed_node_reads_the_same() {
        let full: Node = serde_yaml::from_str(
            "metadata: {name: n1, labels: {zone: a}, annotations: {big: x}}
spec: {podCIDR: 10.244.0.0/24, providerID: p, taints: [{key: node.kubernetes.io/out-of-service, effect: NoExecute}]}
status:
  conditions: [{type: Ready, status: 'True', reason: KubeletReady, message: ok, lastHeartbeatTime: '2026-01-01T00:00:00Z'},
               {type: NetworkUnavailable, status: 'False'}]
  addresses: [{type: InternalIP, address: 10.0.0.1}, {type: Hostname, address: n1}]
  images: [{names: [registry/image:1], sizeBytes: 1000}]
  capacity: {cpu: '2'}
  nodeInfo: {architecture: amd64, bootID: b, containerRuntimeVersion: c, kernelVersion: k, kubeProxyVersion: k, kubeletVersion: k, machineID: m, operatingSystem: linux, osImage: o, systemUUID: u}",
        )
        .expect("node yaml");
        let mut trimmed = full.clone();
        trim_node(&mut trimmed);
        assert_eq!(NodeInfo::from_node(&trimmed), NodeInfo::from_node(&full));
        let status = trimmed.status.as_ref().expect("status");
        assert_eq!(
            status.addresses,
            full.status.as_ref().expect("status").addresses
        );
        assert!(status.images.is_none() && status.node_info.is_none() && status.capacity.is_none());
        assert!(trimmed.metadata.annotations.is_none());
        assert!(trimmed.spec.as_ref().expect("spec").pod_cidr.is_none());
    }

    #[test]
    fn a_trimmed_status_object_reads_the_same() {
        let full: ServiceL2Status = serde_yaml::from_str(
            "metadata: {name: l2-abc, namespace: metallb-system, annotations: {a: b},
  labels: {metallb.io/node: n1, metallb.io/service-name: s, metallb.io/service-namespace: ns},
  ownerReferences: [{apiVersion: v1, kind: Pod, name: speaker-xyz, uid: u}]}
status: {node: n1, serviceName: s, serviceNamespace: ns}",
        )
        .expect("status yaml");
        let mut trimmed = full.clone();
        trim_status(&mut trimmed);
        assert_eq!(status_key(&trimmed), Some(ServiceKey::new("ns", "s")));
        assert_eq!(trimmed.labels(), full.labels());
        assert_eq!(trimmed.name_any(), "l2-abc");
        assert_eq!(trimmed.status, full.status);
        assert!(trimmed.metadata.owner_references.is_none());
    }

    #[test]
    fn a_slice_is_indexed_by_its_service_as_its_serving_nodes() {
        let slice: EndpointSlice = serde_yaml::from_str(
            "metadata: {name: s-abc, namespace: ns, labels: {kubernetes.io/service-name: s}}
addressType: IPv4
endpoints:
- {addresses: [10.1.0.1], nodeName: n1, conditions: {ready: false, serving: true}}
- {addresses: [10.1.0.2], nodeName: n2, conditions: {ready: false, serving: false}}",
        )
        .expect("slice yaml");
        let index = Index::with_values(slice_key, SliceEndpoints::of);
        index.observe(&watcher::Event::Apply(slice));
        let key = ServiceKey::new("ns", "s");
        let got = index.with(&key, Endpoints::merge);
        assert!(got.any_serving);
        assert_eq!(got.nodes, BTreeSet::from(["n1".to_owned()]));
    }
}
