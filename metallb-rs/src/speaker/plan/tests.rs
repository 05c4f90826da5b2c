//! The speaker's per-service decisions as a table, one row per layer 2
//! and BGP scenario the e2e suites run: a configuration (MetalLB objects
//! as YAML), the world in one line, the service as YAML merged over a
//! LoadBalancer holding 10.0.0.1, and the plan as text.
//!
//! World words: `me=N` (default n1), `nodes=A,B` (default n1), `alive=A,B`
//! (default every node), `endpoints=A,B` (serving endpoints; default one
//! per node), `notready=A` (an endpoint there, neither ready nor
//! serving), `isolated`, `unavailable=N` (NetworkUnavailable),
//! `excluded=N` (exclude-from-external-load-balancers),
//! `label=N:K=V`, `lbclass=C`, `ignore-exclude-lb`, `ifaces=A,B` (this
//! node's eligible interfaces; default eth0,eth1).

use super::*;
use crate::config::load::{Loaded, Schemas};
use crate::config::{Options, for_node};
use crate::speaker::election::memo::Memo;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use rstest::rstest;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

const POOL: &str = "
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: default}
spec: {addresses: [10.0.0.0/24, 'fc00::/120']}
";

const L2: &str = "
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: l2}
";

const BGP: &str = "
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router}
spec: {myASN: 64512, peerASN: 64513, peerAddress: 192.0.2.1}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: bgp}
";

fn schemas() -> &'static Schemas {
    static S: OnceLock<Schemas> = OnceLock::new();
    S.get_or_init(Schemas::compile)
}

fn node(name: &str, words: &[&str]) -> NodeInfo {
    let mut labels = BTreeMap::new();
    for w in words {
        if let Some(rest) = w.strip_prefix("label=")
            && let Some((n, kv)) = rest.split_once(':')
            && n == name
        {
            let (k, v) = kv.split_once('=').expect("label K=V");
            labels.insert(k.to_owned(), v.to_owned());
        }
        if *w == format!("excluded={name}") {
            labels.insert(
                "node.kubernetes.io/exclude-from-external-load-balancers".into(),
                String::new(),
            );
        }
    }
    NodeInfo {
        name: name.to_owned(),
        labels,
        network_unavailable: words.contains(&format!("unavailable={name}").as_str()),
        ready: true,
        out_of_service: false,
    }
}

fn list<'a>(words: &[&'a str], key: &str) -> Option<Vec<&'a str>> {
    words
        .iter()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .map(|v| v.split(',').filter(|s| !s.is_empty()).collect())
}

fn slice(nodes: &[&str], ready: bool) -> Arc<EndpointSlice> {
    let endpoints: Vec<serde_json::Value> = nodes
        .iter()
        .map(|n| {
            serde_json::json!({
                "addresses": ["10.244.0.1"],
                "nodeName": n,
                "conditions": { "ready": ready, "serving": ready },
            })
        })
        .collect();
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "s-x", "namespace": "default" },
            "addressType": "IPv4",
            "endpoints": endpoints,
        }))
        .expect("slice"),
    )
}

fn service(extra: &str) -> Service {
    let mut base = serde_json::json!({
        "metadata": { "name": "s", "namespace": "default" },
        "spec": { "type": "LoadBalancer", "clusterIPs": ["10.96.0.1"], "ports": [{ "port": 80, "protocol": "TCP" }] },
        "status": { "loadBalancer": { "ingress": [{ "ip": "10.0.0.1" }] } },
    });
    if !extra.is_empty() {
        let patch: serde_json::Value = serde_yaml::from_str(extra).expect("service yaml");
        json_patch::merge(&mut base, &patch);
    }
    serde_json::from_value(base).expect("service")
}

fn show(p: &ServicePlan) -> String {
    let mut out = Vec::new();
    for n in &p.notes {
        match n {
            Note::NoPool(ips) => out.push(format!("ignored: {ips:?} in no pool")),
            Note::Layer2(r) => out.push(format!("layer2 no: {r}")),
            Note::NoInterface(names) => out.push(format!("layer2 no interface of {names:?}")),
            Note::Bgp(r) => out.push(format!("bgp no: {r}")),
        }
    }
    if p.ips.is_empty() {
        if out.is_empty() {
            out.push("ignored".into());
        }
        return out.join("\n");
    }
    match &p.layer2 {
        Some(Interfaces::All) => out.insert(0, "layer2 all interfaces".into()),
        Some(Interfaces::Named(names)) => out.insert(
            0,
            format!(
                "layer2 {}",
                names.iter().cloned().collect::<Vec<_>>().join(",")
            ),
        ),
        None => {}
    }
    for (peer, routes) in &p.bgp {
        for (prefix, attrs) in routes {
            let mut line = format!("bgp {peer} {prefix}");
            if let Some(lp) = attrs.local_pref {
                line.push_str(&format!(" localPref={lp}"));
            }
            for c in &attrs.communities {
                line.push_str(&format!(" {c}"));
            }
            out.push(line);
        }
    }
    if out.is_empty() {
        out.push("nothing".into());
    }
    out.join("\n")
}

/// The plan for `svc` in `world` under `config`.
fn plan_for(config: &str, world: &str, svc: &str) -> ServicePlan {
    let words: Vec<&str> = world.split_whitespace().collect();
    let me = list(&words, "me").map_or("n1", |v| v[0]);
    let names = list(&words, "nodes").unwrap_or_else(|| vec!["n1"]);
    let nodes: Vec<NodeInfo> = names.iter().map(|n| node(n, &words)).collect();
    let alive: BTreeSet<String> = list(&words, "alive")
        .unwrap_or_else(|| names.clone())
        .into_iter()
        .map(str::to_owned)
        .collect();
    let interfaces: Vec<String> = list(&words, "ifaces")
        .unwrap_or_else(|| vec!["eth0", "eth1"])
        .into_iter()
        .map(str::to_owned)
        .collect();
    let mut loaded = Loaded::default();
    loaded.add_text(Path::new("fixture"), config, schemas());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let me_labels = nodes
        .iter()
        .find(|n| n.name == me)
        .map(|n| n.labels.clone())
        .unwrap_or_default();
    let config = Config::build(
        &for_node(&loaded.resources, &me_labels),
        &Options::default(),
    )
    .expect("valid configuration");
    let key = ServiceKey::new("default", "s");
    let mut slices = vec![slice(
        &list(&words, "endpoints").unwrap_or_else(|| names.clone()),
        true,
    )];
    if let Some(n) = list(&words, "notready") {
        slices.push(slice(&n, false));
    }
    let mut objects = Objects::default();
    objects.services.insert(key.clone(), Arc::new(service(svc)));
    objects.endpoints.insert(
        key.clone(),
        Endpoints::from_slices(slices.iter().map(|s| &**s)),
    );
    let mut memo = Memo::new();
    memo.advance(&nodes, &alive);
    let world = World {
        node: me,
        config: &config,
        nodes: &nodes,
        alive: &alive,
        isolated: words.contains(&"isolated"),
        interfaces: &interfaces,
        lb_class: list(&words, "lbclass").map(|v| v[0]),
        ignore_exclude_lb: words.contains(&"ignore-exclude-lb"),
        objects: &objects,
        elected: &memo,
    };
    let plan = plan(&world, &key);
    // The same decision again, from what the memo remembers of it.
    let mut memo = Memo::new();
    memo.advance(&nodes, &alive);
    memo.remember(&key, plan.elected.clone());
    memo.advance(&nodes, &alive);
    let again = super::plan(
        &World {
            elected: &memo,
            ..world
        },
        &key,
    );
    assert_eq!(again, plan, "remembered");
    // Every plan keeps the rules the runner relies on: a status object
    // exactly where something is announced, and an event for it.
    assert_eq!(plan.l2_status.is_some(), plan.layer2.is_some(), "{plan:?}");
    let peers = plan.bgp.values().any(|r| !r.is_empty());
    assert_eq!(plan.bgp_status.is_some(), peers, "{plan:?}");
    plan
}

fn check(config: &str, world: &str, svc: &str, expected: &str) {
    assert_eq!(show(&plan_for(config, world, svc)), expected.trim());
}

/// The status objects and events of a plan, a line each.
fn show_writes(p: &ServicePlan) -> String {
    let mut out = Vec::new();
    if let Some(st) = &p.l2_status {
        let interfaces: Option<Vec<&str>> = st
            .interfaces
            .as_ref()
            .map(|l| l.iter().filter_map(|i| i.name.as_deref()).collect());
        out.push(format!(
            "l2 status {}/{} node={} interfaces={interfaces:?}",
            st.service_namespace.as_deref().unwrap_or_default(),
            st.service_name.as_deref().unwrap_or_default(),
            st.node.as_deref().unwrap_or_default(),
        ));
    }
    if let Some(st) = &p.bgp_status {
        out.push(format!(
            "bgp status node={} peers={:?}",
            st.node.as_deref().unwrap_or_default(),
            st.peers.as_deref().unwrap_or_default(),
        ));
    }
    for ev in &p.events {
        out.push(format!("event {} {}", ev.reason, ev.message));
    }
    if out.is_empty() {
        out.push("nothing".into());
    }
    out.join("\n")
}

fn l2() -> String {
    format!("{POOL}{L2}")
}

fn bgp() -> String {
    format!("{POOL}{BGP}")
}

fn both() -> String {
    format!("{POOL}{L2}{BGP}")
}

#[rstest]
// Layer 2.
#[case::l2_single_node(l2(), "", "", "layer2 all interfaces")]
#[case::l2_interfaces(format!("{POOL}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2}}\nspec: {{interfaces: [eth0, eth1]}}"), "", "", "layer2 eth0,eth1")]
#[case::l2_no_advertisement(POOL.to_owned(), "", "", "layer2 no: noL2Advertisement")]
#[case::l2_elected_elsewhere(
    l2(),
    "nodes=n1,n2,n3 alive=n2",
    "",
    "layer2 no: notOwner (elected: n2)"
)]
#[case::l2_elected_here_when_only_alive(
    l2(),
    "nodes=n1,n2,n3 alive=n1",
    "",
    "layer2 all interfaces"
)]
#[case::l2_no_serving_endpoints(
    l2(),
    "endpoints= notready=n1",
    "",
    "layer2 no: noServingEndpoints"
)]
#[case::l2_local_without_local_endpoint(
    l2(),
    "nodes=n1,n2 endpoints=n2",
    "{spec: {externalTrafficPolicy: Local}}",
    "layer2 no: notOwner (elected: n2)"
)]
#[case::l2_local_with_local_endpoint(
    l2(),
    "nodes=n1,n2 endpoints=n1",
    "{spec: {externalTrafficPolicy: Local}}",
    "layer2 all interfaces"
)]
#[case::l2_node_selector_elsewhere(format!("{POOL}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2}}\nspec: {{nodeSelectors: [{{matchLabels: {{zone: b}}}}]}}"), "nodes=n1,n2 label=n2:zone=b", "", "layer2 no: noMatchingAdvertisement")]
#[case::l2_node_selector_here(format!("{POOL}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2}}\nspec: {{nodeSelectors: [{{matchLabels: {{zone: b}}}}]}}"), "nodes=n1,n2 label=n1:zone=b", "", "layer2 all interfaces")]
#[case::l2_service_selector_miss(format!("{POOL}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2}}\nspec: {{serviceSelectors: [{{matchLabels: {{app: web}}}}]}}"), "", "", "layer2 no: noL2Advertisement")]
#[case::l2_service_selector_hit(format!("{POOL}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2}}\nspec: {{serviceSelectors: [{{matchLabels: {{app: web}}}}]}}"), "", "{metadata: {labels: {app: web}}}", "layer2 all interfaces")]
#[case::l2_excluded_node(l2(), "excluded=n1", "", "layer2 no: notOwner (no eligible node)")]
#[case::l2_excluded_node_ignored(
    l2(),
    "excluded=n1 ignore-exclude-lb",
    "",
    "layer2 all interfaces"
)]
#[case::l2_network_unavailable(
    l2(),
    "unavailable=n1",
    "",
    "layer2 no: notOwner (no eligible node)"
)]
#[case::l2_isolated(l2(), "isolated", "", "nothing")]
// Services this speaker leaves alone.
#[case::not_in_a_pool(
    l2(),
    "",
    "{status: {loadBalancer: {ingress: [{ip: 192.168.1.1}]}}}",
    "ignored: [192.168.1.1] in no pool"
)]
#[case::no_address(l2(), "", "{status: {loadBalancer: {ingress: null}}}", "ignored")]
#[case::not_a_load_balancer(l2(), "", "{spec: {type: ClusterIP}}", "ignored")]
#[case::other_class(l2(), "", "{spec: {loadBalancerClass: other}}", "ignored")]
#[case::our_class(
    l2(),
    "lbclass=ours",
    "{spec: {loadBalancerClass: ours}}",
    "layer2 all interfaces"
)]
// BGP.
#[case::bgp_one_peer(bgp(), "", "", "layer2 no: noL2Advertisement\nbgp router 10.0.0.1/32")]
#[case::bgp_dual_stack(
    bgp(),
    "",
    "{status: {loadBalancer: {ingress: [{ip: 10.0.0.1}, {ip: 'fc00::1'}]}}}",
    "layer2 no: noL2Advertisement\nbgp router 10.0.0.1/32\nbgp router fc00::1/128"
)]
#[case::bgp_aggregation(format!("{POOL}{BGP}spec: {{aggregationLength: 24}}"), "", "", "layer2 no: noL2Advertisement\nbgp router 10.0.0.0/24")]
#[case::bgp_local_pref_and_communities(format!("{POOL}{BGP}spec: {{localPref: 150, communities: ['64512:100']}}"), "", "", "layer2 no: noL2Advertisement\nbgp router 10.0.0.1/32 localPref=150 64512:100")]
#[case::bgp_named_peers_only(format!("{POOL}{BGP}spec: {{peers: [other]}}"), "", "", "layer2 no: noL2Advertisement")]
#[case::bgp_local_without_local_endpoint(
    bgp(),
    "nodes=n1,n2 endpoints=n2",
    "{spec: {externalTrafficPolicy: Local}}",
    "layer2 no: noL2Advertisement\nbgp no: noLocalEndpoints"
)]
#[case::bgp_local_with_local_endpoint(
    bgp(),
    "nodes=n1,n2 endpoints=n1,n2",
    "{spec: {externalTrafficPolicy: Local}}",
    "layer2 no: noL2Advertisement\nbgp router 10.0.0.1/32"
)]
#[case::bgp_every_node_announces(
    bgp(),
    "nodes=n1,n2 alive=n2",
    "",
    "layer2 no: noL2Advertisement\nbgp router 10.0.0.1/32"
)]
#[case::bgp_no_serving_endpoints(
    bgp(),
    "endpoints= notready=n1",
    "",
    "layer2 no: noServingEndpoints\nbgp no: noServingEndpoints"
)]
#[case::bgp_node_selector_elsewhere(format!("{POOL}{BGP}spec: {{nodeSelectors: [{{matchLabels: {{zone: b}}}}]}}"), "nodes=n1,n2 label=n2:zone=b", "", "layer2 no: noL2Advertisement")]
#[case::bgp_excluded_node(
    bgp(),
    "excluded=n1",
    "",
    "layer2 no: noL2Advertisement\nbgp no: nodeExcludedFromLoadBalancers"
)]
#[case::bgp_network_unavailable(
    bgp(),
    "unavailable=n1",
    "",
    "layer2 no: noL2Advertisement\nbgp no: networkUnavailable"
)]
#[case::bgp_isolated(bgp(), "isolated", "", "nothing")]
// Both.
#[case::both_modes(both(), "", "", "layer2 all interfaces\nbgp router 10.0.0.1/32")]
#[case::both_modes_l2_elsewhere(
    both(),
    "nodes=n1,n2 alive=n2",
    "",
    "layer2 no: notOwner (elected: n2)\nbgp router 10.0.0.1/32"
)]
fn plans(#[case] config: String, #[case] world: &str, #[case] svc: &str, #[case] expected: &str) {
    check(&config, world, svc, expected);
}

const L2_NAMED: &str = "
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: l2}
spec: {interfaces: [eth1, eth9]}
";

/// The status objects and events each plan asks for.
#[rstest]
#[case::l2_all(
    l2(),
    "",
    "",
    r#"
l2 status default/s node=n1 interfaces=None
event nodeAssigned announcing from node "n1" with protocol "layer2"
"#
)]
#[case::l2_named_reports_configured_names(format!("{POOL}{L2_NAMED}"), "", "", r#"
l2 status default/s node=n1 interfaces=Some(["eth1", "eth9"])
event nodeAssigned announcing from node "n1" with protocol "layer2"
"#)]
#[case::l2_no_named_interface_here(format!("{POOL}{L2_NAMED}"), "ifaces=eth0", "{status: {loadBalancer: {ingress: [{ip: 10.0.0.1}, {ip: 'fc00::1'}]}}}", r#"
event announceFailed the interfaces specified by LB IP "10.0.0.1" doesn't exist in assigned node "n1" with protocol "layer2"
event announceFailed the interfaces specified by LB IP "fc00::1" doesn't exist in assigned node "n1" with protocol "layer2"
"#)]
#[case::l2_elsewhere(l2(), "nodes=n1,n2 alive=n2", "", "nothing")]
#[case::bgp(
    bgp(),
    "",
    "",
    r#"
bgp status node=n1 peers=["router"]
event nodeAssigned announcing from node "n1" with protocol "bgp"
"#
)]
#[case::both(
    both(),
    "me=n2 nodes=n1,n2",
    "",
    r#"
l2 status default/s node=n2 interfaces=None
bgp status node=n2 peers=["router"]
event nodeAssigned announcing from node "n2" with protocol "layer2"
event nodeAssigned announcing from node "n2" with protocol "bgp"
"#
)]
#[case::isolated(both(), "isolated", "", "nothing")]
#[case::gone_from_the_pool(
    both(),
    "",
    "{status: {loadBalancer: {ingress: [{ip: 192.168.1.1}]}}}",
    "nothing"
)]
fn writes(#[case] config: String, #[case] world: &str, #[case] svc: &str, #[case] expected: &str) {
    assert_eq!(show_writes(&plan_for(&config, world, svc)), expected.trim());
}

/// A service missing from the objects (deleted) plans nothing.
#[test]
fn a_vanished_service_plans_nothing() {
    let config = Config::build(&crate::config::Resources::default(), &Options::default())
        .expect("empty config");
    let (nodes, alive, objects) = (Vec::new(), BTreeSet::new(), Objects::default());
    let world = World {
        node: "n1",
        config: &config,
        nodes: &nodes,
        alive: &alive,
        isolated: false,
        interfaces: &[],
        lb_class: None,
        ignore_exclude_lb: false,
        objects: &objects,
        elected: &Memo::new(),
    };
    assert_eq!(
        plan(&world, &ServiceKey::new("default", "s")),
        ServicePlan::default()
    );
}

/// What applying a plan changed, from the addresses before and after.
#[rstest]
#[case::idle(None, None, Change::Idle)]
#[case::started(None, Some(&["10.0.0.1"][..]), Change::Started)]
#[case::same(Some(&["10.0.0.1"][..]), Some(&["10.0.0.1"][..]), Change::Same)]
#[case::changed(Some(&["10.0.0.1"][..]), Some(&["10.0.0.2"][..]), Change::Changed(vec!["10.0.0.1".parse().expect("ip")]))]
#[case::stopped(Some(&["10.0.0.1"][..]), None, Change::Stopped(vec!["10.0.0.1".parse().expect("ip")]))]
fn changes(
    #[case] before: Option<&[&str]>,
    #[case] now: Option<&[&str]>,
    #[case] expected: Change,
) {
    let ips = |l: &[&str]| -> Vec<IpAddr> { l.iter().map(|s| s.parse().expect("ip")).collect() };
    let now = now.map(ips);
    let change = Change::between(before.map(ips), now.as_deref());
    assert_eq!(change, expected);
    assert_eq!(
        change.sets_gauges(),
        matches!(expected, Change::Started | Change::Changed(_))
    );
}
