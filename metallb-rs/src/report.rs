//! `metallb-rs status`: for each LoadBalancer service, its addresses,
//! pool, and which node(s) announce it from which interfaces - read from
//! the API (Services, ServiceL2Status, events), the question users
//! otherwise answer by hand with arping. [`rows`] and [`render`] are pure;
//! [`fetch`] reads the cluster.

use crate::api::v1beta1::{
    BGPAdvertisement, ConfigurationResult, ConfigurationState, IPAddressPool, L2Advertisement,
    LabelSelector, ServiceBGPStatus, ServiceL2Status,
};
use crate::config::Selector;
use crate::service::{self as svcs, annotation};
use crate::speaker::status as l2;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `namespace/name`.
    pub service: svcs::ServiceKey,
    /// Addresses, or `<pending>`.
    pub ips: String,
    /// Pool (the allocated-from annotation), or `-`.
    pub pool: String,
    /// `layer2`, `bgp`, both, or `-`.
    pub protocol: String,
    /// Announcing nodes, or `-`.
    pub nodes: String,
    /// Interfaces (`all` when not restricted), or `-`.
    pub interfaces: String,
    /// Why it is not served, from the latest Warning event, if any.
    pub note: String,
}

/// What else the report reads to say why an address nobody announces is
/// not announced.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    /// Every EndpointSlice of the services reported.
    pub slices: &'a [EndpointSlice],
    /// The address pools.
    pub pools: &'a [IPAddressPool],
    /// The layer 2 advertisements.
    pub l2: &'a [L2Advertisement],
    /// The BGP advertisements.
    pub bgp: &'a [BGPAdvertisement],
    /// The Nodes (empty when they could not be read: no node reason).
    pub nodes: &'a [Node],
    /// The components' ConfigurationStates.
    pub states: &'a [ConfigurationState],
}

/// Whether an advertisement naming `names` and `selectors` takes `pool`
/// (neither: every pool).
fn advertises(
    names: Option<&Vec<String>>,
    selectors: Option<&Vec<LabelSelector>>,
    pool: &IPAddressPool,
) -> bool {
    let (names, selectors) = (
        names.filter(|n| !n.is_empty()),
        selectors.filter(|s| !s.is_empty()),
    );
    if names.is_none() && selectors.is_none() {
        return true;
    }
    let name = pool.name_any();
    names.is_some_and(|n| n.contains(&name))
        || selectors
            .into_iter()
            .flatten()
            .any(|s| Selector::parse(s).is_ok_and(|s| s.matches(pool.labels())))
}

/// What the report reads of an advertisement, layer 2 or BGP alike: the
/// pools it takes and the nodes it announces from.
trait Advertisement {
    fn pools(&self) -> Option<&Vec<String>>;
    fn pool_selectors(&self) -> Option<&Vec<LabelSelector>>;
    fn node_selectors(&self) -> Option<&Vec<LabelSelector>>;
}

/// Both kinds name those fields alike.
macro_rules! advertisement {
    ($($kind:ty),*) => {$(
        impl Advertisement for $kind {
            fn pools(&self) -> Option<&Vec<String>> {
                self.spec.ip_address_pools.as_ref()
            }
            fn pool_selectors(&self) -> Option<&Vec<LabelSelector>> {
                self.spec.ip_address_pool_selectors.as_ref()
            }
            fn node_selectors(&self) -> Option<&Vec<LabelSelector>> {
                self.spec.node_selectors.as_ref()
            }
        }
    )*};
}

advertisement!(L2Advertisement, BGPAdvertisement);

/// The advertisements of `ads` that take `pool`.
fn taking<'a, A: Advertisement>(ads: &'a [A], pool: &IPAddressPool) -> Vec<&'a A> {
    ads.iter()
        .filter(|a| advertises(a.pools(), a.pool_selectors(), pool))
        .collect()
}

/// Whether any of `ads` announces from `node`.
fn any_selects<A: Advertisement>(ads: &[&A], node: &Node) -> bool {
    ads.iter().any(|a| selects(a.node_selectors(), node))
}

/// Whether `node` is one an advertisement with `selectors` announces
/// from (none: every node).
fn selects(selectors: Option<&Vec<LabelSelector>>, node: &Node) -> bool {
    selectors.filter(|s| !s.is_empty()).is_none_or(|v| {
        v.iter()
            .any(|s| Selector::parse(s).is_ok_and(|s| s.matches(node.labels())))
    })
}

/// Why an address of `svc` from `pool` that no node announces is not
/// announced, when the API shows it, in the order a user would look: a
/// component's configuration is invalid (the speakers keep what they
/// announced and take nothing new), the pool is in no advertisement,
/// its advertisements select no node, nothing serves the service
/// (speakers announce only services with a ready endpoint), or, with
/// externalTrafficPolicy Local, no selected node has one.
fn unannounced(svc: &Service, pool: &str, ctx: &Context<'_>) -> Option<String> {
    if let Some(reason) = invalid_configuration(ctx) {
        return Some(reason);
    }
    let eligible = match eligible_nodes(pool, ctx) {
        Ok(eligible) => eligible,
        Err(reason) => return Some(reason),
    };
    let ready = ready_endpoints(svc, ctx);
    if ready.is_empty() {
        return Some(
            "no ready endpoints: speakers announce a service only while a pod serves it".to_owned(),
        );
    }
    let local = svc
        .spec
        .as_ref()
        .and_then(|s| s.external_traffic_policy.as_deref())
        == Some("Local");
    let hosts: Vec<&str> = ready
        .iter()
        .filter_map(|e| e.node_name.as_deref())
        .collect();
    match eligible {
        Some(nodes)
            if local
                && !hosts.is_empty()
                && !nodes.iter().any(|n| hosts.contains(&n.name_any().as_str())) =>
        {
            Some(format!(
                "no eligible node: externalTrafficPolicy is Local and no node the advertisements of pool {pool} select has a ready endpoint (they are on {})",
                hosts.join(", ")
            ))
        }
        _ => None,
    }
}

/// The first component whose ConfigurationState is Invalid, said as the
/// reason: its speakers or controller take nothing new until it is fixed.
fn invalid_configuration(ctx: &Context<'_>) -> Option<String> {
    let state = ctx.states.iter().find(|s| {
        s.status.as_ref().and_then(|st| st.result) == Some(ConfigurationResult::Invalid)
    })?;
    let summary = state
        .status
        .as_ref()
        .and_then(|st| st.error_summary.clone())
        .unwrap_or_default();
    Some(format!(
        "waiting for a valid configuration: ConfigurationState {} is Invalid: {summary}",
        state.name_any()
    ))
}

/// The nodes the advertisements of `pool` select (`None`: unknown, the
/// pool or the Nodes unread), or why there are none: the pool is in no
/// advertisement, or their nodeSelectors match no node.
fn eligible_nodes<'a>(pool: &str, ctx: &Context<'a>) -> Result<Option<Vec<&'a Node>>, String> {
    let Some(p) = ctx.pools.iter().find(|p| p.name_any() == pool) else {
        return Ok(None);
    };
    let l2 = taking(ctx.l2, p);
    let bgp = taking(ctx.bgp, p);
    if l2.is_empty() && bgp.is_empty() {
        return Err(format!(
            "pool {pool} is in no L2Advertisement or BGPAdvertisement: nothing announces its addresses"
        ));
    }
    if ctx.nodes.is_empty() {
        return Ok(None);
    }
    let nodes: Vec<&Node> = ctx
        .nodes
        .iter()
        .filter(|n| any_selects(&l2, n) || any_selects(&bgp, n))
        .collect();
    if nodes.is_empty() {
        return Err(format!(
            "no eligible node: the nodeSelectors of the advertisements of pool {pool} match no node"
        ));
    }
    Ok(Some(nodes))
}

/// The endpoints of `svc`'s EndpointSlices not marked unready.
fn ready_endpoints<'a>(svc: &Service, ctx: &Context<'a>) -> Vec<&'a Endpoint> {
    let name = svc.name_any();
    let ns = svc.namespace().unwrap_or_default();
    ctx.slices
        .iter()
        .filter(|s| {
            s.namespace().as_deref() == Some(ns.as_str())
                && s.labels().get("kubernetes.io/service-name") == Some(&name)
        })
        .flat_map(|s| &s.endpoints)
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .collect()
}

/// Builds the rows from what the API holds.
pub fn rows(
    services: &[Service],
    l2_statuses: &[ServiceL2Status],
    bgp_statuses: &[ServiceBGPStatus],
    events: &[Event],
    ctx: &Context<'_>,
) -> Vec<Row> {
    let mut out = Vec::new();
    for svc in services.iter().filter(|s| svcs::is_load_balancer(s)) {
        let key = svcs::key(svc);
        let (ns, name) = (key.namespace.clone(), key.name.clone());
        let ips = svcs::ingress_ips(svc).unwrap_or_default();
        let for_service = |labels: &BTreeMap<String, String>| {
            labels.get(l2::SERVICE_NAME_LABEL) == Some(&name)
                && labels.get(l2::SERVICE_NAMESPACE_LABEL) == Some(&ns)
        };
        let mut l2_nodes = Vec::new();
        let mut interfaces = Vec::new();
        for st in l2_statuses.iter().filter(|o| for_service(o.labels())) {
            let Some(status) = &st.status else { continue };
            l2_nodes.extend(status.node.clone());
            match &status.interfaces {
                Some(list) => interfaces.extend(list.iter().filter_map(|i| i.name.clone())),
                None => interfaces.push("all".to_owned()),
            }
        }
        let mut bgp_nodes = Vec::new();
        for st in bgp_statuses.iter().filter(|o| for_service(o.labels())) {
            if let Some(node) = st.status.as_ref().and_then(|s| s.node.clone()) {
                bgp_nodes.push(node);
            }
        }
        let protocol = match (l2_nodes.is_empty(), bgp_nodes.is_empty()) {
            (false, false) => "layer2+bgp",
            (false, true) => "layer2",
            (true, false) => "bgp",
            (true, true) => "-",
        };
        let mut nodes = l2_nodes;
        nodes.extend(bgp_nodes);
        nodes.sort();
        nodes.dedup();
        interfaces.sort();
        interfaces.dedup();
        let note = events
            .iter()
            .filter(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                    && e.regarding.as_ref().and_then(|r| r.namespace.as_deref())
                        == Some(ns.as_str())
            })
            .max_by_key(|e| e.event_time.as_ref().map(|t| t.0))
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.clone().unwrap_or_default(),
                    e.note.clone().unwrap_or_default()
                )
            })
            .unwrap_or_default();
        let pool = svc
            .annotations()
            .get(&annotation::current(annotation::IP_ALLOCATED_FROM_POOL))
            .cloned();
        let note = match &pool {
            Some(p) if note.is_empty() && nodes.is_empty() && !ips.is_empty() => {
                unannounced(svc, p, ctx).unwrap_or_default()
            }
            _ => note,
        };
        let dash = |v: Vec<String>| {
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.join(",")
            }
        };
        out.push(Row {
            service: key,
            ips: if ips.is_empty() {
                "<pending>".to_owned()
            } else {
                ips.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            },
            pool: pool.unwrap_or_else(|| "-".to_owned()),
            protocol: protocol.to_owned(),
            nodes: dash(nodes),
            interfaces: dash(interfaces),
            note,
        });
    }
    out.sort_by(|a, b| a.service.cmp(&b.service));
    out
}

/// The rows as an aligned table.
pub fn render(rows: &[Row]) -> String {
    let header = [
        "SERVICE",
        "IPS",
        "POOL",
        "PROTOCOL",
        "NODES",
        "INTERFACES",
        "NOTE",
    ];
    let names: Vec<String> = rows.iter().map(|r| r.service.to_string()).collect();
    let cells: Vec<[&str; 7]> = rows
        .iter()
        .zip(&names)
        .map(|(r, name)| {
            [
                name.as_str(),
                &r.ips,
                &r.pool,
                &r.protocol,
                &r.nodes,
                &r.interfaces,
                &r.note,
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for c in &cells {
        for (w, v) in widths.iter_mut().zip(c) {
            *w = (*w).max(v.len());
        }
    }
    let mut out = String::new();
    for line in std::iter::once(header).chain(cells) {
        let parts: Vec<String> = line
            .iter()
            .zip(widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect();
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Reads services (of `namespace`, or all) and MetalLB's status objects
/// and events, and builds the report.
pub async fn fetch(
    client: &kube::Client,
    metallb_namespace: &str,
    namespace: Option<&str>,
) -> Result<Vec<Row>, kube::Error> {
    let services: Api<Service> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let events: Api<Event> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let lp = ListParams::default();
    let services = services.list(&lp).await?.items;
    let l2: Api<ServiceL2Status> = Api::namespaced(client.clone(), metallb_namespace);
    let bgp: Api<ServiceBGPStatus> = Api::namespaced(client.clone(), metallb_namespace);
    let l2 = l2.list(&lp).await?.items;
    // Clusters without the BGP status CRD still get a layer 2 report.
    let bgp = bgp.list(&lp).await.map(|l| l.items).unwrap_or_default();
    let events = events.list(&lp).await.map(|l| l.items).unwrap_or_default();
    // What explains an address nobody announces; a list that fails only
    // leaves that explanation out.
    let slices: Api<EndpointSlice> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let slices = slices.list(&lp).await.map(|l| l.items).unwrap_or_default();
    let pools = Api::<IPAddressPool>::namespaced(client.clone(), metallb_namespace)
        .list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let l2_ads = Api::<L2Advertisement>::namespaced(client.clone(), metallb_namespace)
        .list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let bgp_ads = Api::<BGPAdvertisement>::namespaced(client.clone(), metallb_namespace)
        .list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let nodes = Api::<Node>::all(client.clone())
        .list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let states = Api::<ConfigurationState>::namespaced(client.clone(), metallb_namespace)
        .list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let ctx = Context {
        slices: &slices,
        pools: &pools,
        l2: &l2_ads,
        bgp: &bgp_ads,
        nodes: &nodes,
        states: &states,
    };
    Ok(rows(&services, &l2, &bgp, &events, &ctx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("object")
    }

    #[test]
    fn report_shows_ips_pool_nodes_interfaces_and_why_pending() {
        let services: Vec<Service> = vec![
            from(
                json!({ "metadata": { "name": "web", "namespace": "shop", "annotations": { "metallb.io/ip-allocated-from-pool": "prod" } },
                "spec": { "type": "LoadBalancer" }, "status": { "loadBalancer": { "ingress": [{ "ip": "10.0.0.1" }, { "ip": "fc00::1" }] } } }),
            ),
            from(
                json!({ "metadata": { "name": "db", "namespace": "shop" }, "spec": { "type": "LoadBalancer" } }),
            ),
            from(
                json!({ "metadata": { "name": "internal", "namespace": "shop" }, "spec": { "type": "ClusterIP" } }),
            ),
        ];
        let status: ServiceL2Status = from(json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "ServiceL2Status",
            "metadata": { "name": "l2-x", "labels": { "metallb.io/node": "n1", "metallb.io/service-name": "web", "metallb.io/service-namespace": "shop" } },
            "status": { "node": "n1", "serviceName": "web", "serviceNamespace": "shop", "interfaces": [{ "name": "eth1" }] },
        }));
        let event: Event = from(
            json!({ "metadata": { "name": "e" }, "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Warning", "reason": "AllocationFailed",
            "note": "Failed to allocate IP for \"shop/db\": no available IPs", "regarding": { "name": "db", "namespace": "shop" } }),
        );
        let rows = rows(&services, &[status], &[], &[event], &Context::default());
        assert_eq!(rows.len(), 2, "only LoadBalancer services");
        assert_eq!(rows[1].service.to_string(), "shop/web");
        assert_eq!(
            (
                rows[1].ips.as_str(),
                rows[1].pool.as_str(),
                rows[1].protocol.as_str()
            ),
            ("10.0.0.1,fc00::1", "prod", "layer2")
        );
        assert_eq!(
            (rows[1].nodes.as_str(), rows[1].interfaces.as_str()),
            ("n1", "eth1")
        );
        assert_eq!(rows[0].ips, "<pending>");
        assert!(
            rows[0]
                .note
                .starts_with("AllocationFailed: Failed to allocate"),
            "{:?}",
            rows[0]
        );
        let table = render(&rows);
        assert!(table.starts_with("SERVICE "), "{table}");
        assert!(
            table
                .lines()
                .nth(2)
                .is_some_and(|l| l.contains("shop/web") && l.contains("eth1")),
            "{table}"
        );
    }

    /// An address nobody announces: the note says why, from what the API
    /// shows - a pool in no advertisement first, then a service nothing
    /// serves; nothing when it is served and advertised (the speakers'
    /// own events say the rest).
    #[test]
    fn an_unannounced_address_says_why() {
        let svc: Service = from(json!({
            "metadata": { "name": "web", "namespace": "shop", "annotations": { "metallb.io/ip-allocated-from-pool": "prod" } },
            "spec": { "type": "LoadBalancer" }, "status": { "loadBalancer": { "ingress": [{ "ip": "10.0.0.1" }] } } }));
        let pool: IPAddressPool = from(json!({
            "metadata": { "name": "prod", "namespace": "metallb-system", "labels": { "tier": "prod" } },
            "spec": { "addresses": ["10.0.0.0/24"] } }));
        let other: L2Advertisement = from(json!({
            "metadata": { "name": "other", "namespace": "metallb-system" },
            "spec": { "ipAddressPools": ["staging"] } }));
        let by_label: L2Advertisement = from(json!({
            "metadata": { "name": "by-label", "namespace": "metallb-system" },
            "spec": { "ipAddressPoolSelectors": [{ "matchLabels": { "tier": "prod" } }] } }));
        let slice = |ready: bool| -> EndpointSlice {
            from(json!({
                "metadata": { "name": "web-1", "namespace": "shop", "labels": { "kubernetes.io/service-name": "web" } },
                "addressType": "IPv4",
                "endpoints": [{ "addresses": ["10.1.0.5"], "conditions": { "ready": ready } }] }))
        };
        let note = |l2: &[L2Advertisement], slices: &[EndpointSlice]| {
            let ctx = Context {
                slices,
                pools: std::slice::from_ref(&pool),
                l2,
                ..Context::default()
            };
            rows(std::slice::from_ref(&svc), &[], &[], &[], &ctx)[0]
                .note
                .clone()
        };
        let not_advertised = note(std::slice::from_ref(&other), &[slice(true)]);
        assert!(
            not_advertised.starts_with("pool prod is in no L2Advertisement"),
            "{not_advertised}"
        );
        let unserved = note(&[other.clone(), by_label.clone()], &[slice(false)]);
        assert!(unserved.starts_with("no ready endpoints"), "{unserved}");
        assert_eq!(
            note(&[by_label], &[slice(true)]),
            "",
            "advertised and served"
        );
    }

    /// The node and configuration reasons: advertisements whose
    /// nodeSelectors match no node; with externalTrafficPolicy Local, no
    /// selected node with a ready endpoint; an invalid configuration
    /// before anything else.
    #[test]
    fn no_eligible_node_and_an_invalid_configuration_say_why() {
        let svc = |policy: &str| -> Service {
            from(json!({
                "metadata": { "name": "web", "namespace": "shop", "annotations": { "metallb.io/ip-allocated-from-pool": "prod" } },
                "spec": { "type": "LoadBalancer", "externalTrafficPolicy": policy },
                "status": { "loadBalancer": { "ingress": [{ "ip": "10.0.0.1" }] } } }))
        };
        let pool: IPAddressPool = from(json!({
            "metadata": { "name": "prod", "namespace": "metallb-system" },
            "spec": { "addresses": ["10.0.0.0/24"] } }));
        let ad = |zone: &str| -> L2Advertisement {
            from(json!({
                "metadata": { "name": "edge", "namespace": "metallb-system" },
                "spec": { "ipAddressPools": ["prod"], "nodeSelectors": [{ "matchLabels": { "zone": zone } }] } }))
        };
        let node = |name: &str, zone: &str| -> Node {
            from(json!({ "metadata": { "name": name, "labels": { "zone": zone } } }))
        };
        let nodes = [node("n1", "a"), node("n2", "b")];
        let slice: EndpointSlice = from(json!({
            "metadata": { "name": "web-1", "namespace": "shop", "labels": { "kubernetes.io/service-name": "web" } },
            "addressType": "IPv4",
            "endpoints": [{ "addresses": ["10.1.0.5"], "nodeName": "n2", "conditions": { "ready": true } }] }));
        let invalid: ConfigurationState = from(json!({
            "metadata": { "name": "speaker-n1", "namespace": "metallb-system" },
            "spec": {},
            "status": { "result": "Invalid", "errorSummary": "pool prod overlaps pool dev" } }));
        let note = |svc: &Service, ads: &[L2Advertisement], states: &[ConfigurationState]| {
            let ctx = Context {
                slices: std::slice::from_ref(&slice),
                pools: std::slice::from_ref(&pool),
                l2: ads,
                nodes: &nodes,
                states,
                ..Context::default()
            };
            rows(std::slice::from_ref(svc), &[], &[], &[], &ctx)[0]
                .note
                .clone()
        };
        let cluster = svc("Cluster");
        let local = svc("Local");
        let none = note(&cluster, &[ad("c")], &[]);
        assert!(
            none.starts_with("no eligible node: the nodeSelectors"),
            "{none}"
        );
        let elsewhere = note(&local, &[ad("a")], &[]);
        assert!(
            elsewhere.starts_with("no eligible node: externalTrafficPolicy is Local")
                && elsewhere.ends_with("(they are on n2)"),
            "{elsewhere}"
        );
        assert_eq!(
            note(&local, &[ad("b")], &[]),
            "",
            "n2 is selected and serves"
        );
        assert_eq!(
            note(&cluster, &[ad("a")], &[]),
            "",
            "Cluster: any node forwards"
        );
        let waiting = note(&cluster, &[ad("b")], std::slice::from_ref(&invalid));
        assert_eq!(
            waiting,
            "waiting for a valid configuration: ConfigurationState speaker-n1 is Invalid: pool prod overlaps pool dev"
        );
    }
}
