//! Election tables. Expected hash orders were computed independently
//! (Python's hashlib over "node#ip"):
//! 10.0.0.1: b, a, c; 10.0.0.2: b, c, a; 10.0.0.3: c, a, b; fc00::1: b, c, a.

use super::*;
use crate::config::{Config, Options, Resources};
use rstest::rstest;

/// L2Advertisements for pool "p" from YAML specs (through the config builder).
pub(crate) fn ads(specs: &[&str]) -> Vec<L2Advertisement> {
    let mut res = Resources::default();
    res.pools.push(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": { "name": "p", "namespace": "metallb-system" },
            "spec": { "addresses": ["10.0.0.0/24", "fc00::/120"] },
        }))
        .expect("pool"),
    );
    for (i, spec) in specs.iter().enumerate() {
        let spec: serde_json::Value = serde_yaml::from_str(spec).expect("ad yaml");
        res.l2_advertisements.push(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
                "metadata": { "name": format!("ad{i}"), "namespace": "metallb-system" },
                "spec": spec,
            }))
            .expect("ad"),
        );
    }
    Config::build(&res, &Options::default())
        .expect("valid")
        .l2_advertisements
}

/// A Ready node with `labels` (also used by the BGP advertisement tests).
pub(crate) fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        network_unavailable: false,
        ready: true,
        out_of_service: false,
    }
}

fn three() -> Vec<NodeInfo> {
    vec![
        node("node-a", &[("zone", "x")]),
        node("node-b", &[("zone", "y")]),
        node("node-c", &[("zone", "y"), ("gpu", "true")]),
    ]
}

fn everywhere() -> Endpoints {
    Endpoints {
        any_serving: true,
        nodes: ["node-a", "node-b", "node-c"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
    }
}

struct Case {
    ads: Vec<L2Advertisement>,
    nodes: Vec<NodeInfo>,
    endpoints: Endpoints,
    ip: &'static str,
    local: bool,
    shared: bool,
    labels: BTreeMap<String, String>,
    alive: Option<BTreeSet<String>>,
}

impl Case {
    fn new(ad_specs: &[&str]) -> Self {
        Self {
            ads: ads(ad_specs),
            nodes: three(),
            endpoints: everywhere(),
            ip: "10.0.0.1",
            local: false,
            shared: false,
            labels: BTreeMap::new(),
            alive: None,
        }
    }

    fn input(&self) -> Input<'_> {
        Input {
            service_labels: &self.labels,
            shared: self.shared,
            local: self.local,
            first_ip: self.ip.parse().expect("ip"),
            pool: "p",
            advertisements: &self.ads,
            nodes: &self.nodes,
            alive: self.alive.as_ref(),
            endpoints: &self.endpoints,
            ignore_exclude_lb: false,
        }
    }

    /// The election order, or the reason nobody announces.
    fn order(&self) -> String {
        match ranking(&self.input()) {
            Ok((order, _)) => order
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
            Err(e) => e.to_string(),
        }
    }
}

#[rstest]
#[case::hash_order_v4_1("10.0.0.1", "node-b,node-a,node-c")]
#[case::hash_order_v4_2("10.0.0.2", "node-b,node-c,node-a")]
#[case::hash_order_v4_3("10.0.0.3", "node-c,node-a,node-b")]
#[case::hash_order_v6("fc00::1", "node-b,node-c,node-a")]
fn upstream_hash_order(#[case] ip: &'static str, #[case] expected: &str) {
    let mut c = Case::new(&["{}"]);
    c.ip = ip;
    assert_eq!(c.order(), expected);
}

#[test]
fn no_endpoints_no_announcement() {
    let mut c = Case::new(&["{}"]);
    c.endpoints = Endpoints::default();
    assert_eq!(c.order(), "noServingEndpoints");
}

#[test]
fn serving_endpoints_from_slices() {
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "s" }, "addressType": "IPv4",
        "endpoints": [
            { "addresses": ["10.1.0.1"], "nodeName": "node-a", "conditions": { "ready": false, "serving": true } },
            { "addresses": ["10.1.0.2"], "nodeName": "node-b", "conditions": { "ready": false } },
            { "addresses": ["10.1.0.3"], "nodeName": "node-c" },
        ],
    }))
    .expect("slice");
    let e = Endpoints::from_slices([&slice]);
    assert!(e.any_serving);
    assert_eq!(
        e.nodes.iter().map(String::as_str).collect::<Vec<_>>(),
        ["node-a", "node-c"]
    );
}

#[rstest]
#[case::network_unavailable(|c: &mut Case| c.nodes[1].network_unavailable = true, "node-a,node-c")]
#[case::excluded_label(|c: &mut Case| { c.nodes[1].labels.insert(EXCLUDE_LB_LABEL.into(), String::new()); }, "node-a,node-c")]
#[case::etp_local(|c: &mut Case| { c.local = true; c.endpoints.nodes.remove("node-b"); }, "node-a,node-c")]
#[case::membership(|c: &mut Case| c.alive = Some(["node-a".to_owned()].into()), "node-a")]
#[case::node_selector(|c: &mut Case| c.ads = ads(&["{nodeSelectors: [{matchLabels: {zone: y}}]}"]), "node-b,node-c")]
#[case::node_selectors_or_across_ads(|c: &mut Case| c.ads = ads(&["{nodeSelectors: [{matchLabels: {zone: x}}]}", "{nodeSelectors: [{matchLabels: {gpu: 'true'}}]}"]), "node-a,node-c")]
#[case::no_node_left(|c: &mut Case| c.ads = ads(&["{nodeSelectors: [{matchLabels: {zone: z}}]}"]), "")]
#[case::other_pool_only(|c: &mut Case| c.ads.clear(), "noL2Advertisement")]
#[case::service_selector_miss(|c: &mut Case| c.ads = ads(&["{serviceSelectors: [{matchLabels: {app: web}}]}"]), "noL2Advertisement")]
#[case::service_selector_hit(|c: &mut Case| { c.ads = ads(&["{serviceSelectors: [{matchLabels: {app: web}}]}"]); c.labels.insert("app".into(), "web".into()); }, "node-b,node-a,node-c")]
#[case::shared_with_service_selector(|c: &mut Case| { c.ads = ads(&["{serviceSelectors: [{matchLabels: {app: web}}]}"]); c.labels.insert("app".into(), "web".into()); c.shared = true; }, "sharedIPWithServiceSelector")]
#[case::preferred_beats_hash(|c: &mut Case| c.ads = ads(&["{preferredNodeSelectors: [{weight: 10, preference: {matchLabels: {gpu: 'true'}}}]}"]), "node-c,node-b,node-a")]
#[case::weights_add_up_within_an_ad(|c: &mut Case| c.ads = ads(&["{preferredNodeSelectors: [{weight: 60, preference: {matchLabels: {zone: y}}}, {weight: 50, preference: {matchLabels: {gpu: 'true'}}}, {weight: 100, preference: {matchLabels: {zone: x}}}]}"]), "node-c,node-a,node-b")]
#[case::weights_sum_across_ads(|c: &mut Case| c.ads = ads(&["{preferredNodeSelectors: [{weight: 70, preference: {matchLabels: {zone: x}}}]}", "{preferredNodeSelectors: [{weight: 80, preference: {matchLabels: {zone: y}}}]}"]), "node-b,node-c,node-a")]
#[case::equal_weights_tie_by_hash(|c: &mut Case| c.ads = ads(&["{preferredNodeSelectors: [{weight: 50, preference: {matchLabels: {zone: y}}}]}"]), "node-b,node-c,node-a")]
#[case::preference_only_within_own_nodes(|c: &mut Case| c.ads = ads(&["{nodeSelectors: [{matchLabels: {zone: x}}]}", "{nodeSelectors: [{matchLabels: {gpu: 'true'}}], preferredNodeSelectors: [{weight: 100, preference: {matchLabels: {zone: x}}}]}"]), "node-a,node-c")]
#[case::preferred_node_unavailable_falls_back(|c: &mut Case| { c.ads = ads(&["{preferredNodeSelectors: [{weight: 100, preference: {matchLabels: {gpu: 'true'}}}]}"]); c.nodes[2].network_unavailable = true; }, "node-b,node-a")]
fn candidates_and_order(#[case] tweak: fn(&mut Case), #[case] expected: &str) {
    let mut c = Case::new(&["{}"]);
    tweak(&mut c);
    assert_eq!(c.order(), expected);
}

#[test]
fn decisions_per_node_and_interfaces() {
    let c = Case::new(&[
        "{interfaces: [eth1]}",
        "{nodeSelectors: [{matchLabels: {zone: y}}], interfaces: [eth2]}",
    ]);
    let input = c.input();
    // node-b wins 10.0.0.1; both ads cover it: union of interfaces.
    assert_eq!(
        decide(&input, "node-b"),
        Decision::Announce(Interfaces::Named(
            ["eth1".to_owned(), "eth2".to_owned()].into()
        ))
    );
    assert_eq!(
        decide(&input, "node-a"),
        Decision::NotOwner(NotOwner::NotElected {
            winner: Some("node-b".into())
        })
    );
    let all = Case::new(&["{interfaces: [eth1]}", "{}"]);
    assert_eq!(
        decide(&all.input(), "node-b"),
        Decision::Announce(Interfaces::All),
        "an ad without interfaces means all"
    );
    let outside = Case::new(&["{nodeSelectors: [{matchLabels: {zone: y}}]}"]);
    assert_eq!(
        decide(&outside.input(), "node-a"),
        Decision::NotOwner(NotOwner::NoMatchingAdvertisement)
    );
    assert_eq!(
        decide(&outside.input(), "unknown-node"),
        Decision::NotOwner(NotOwner::NoMatchingAdvertisement)
    );
}

#[test]
fn dual_stack_and_shared_ips_stay_together() {
    // Every speaker hashes the first address only: a dual-stack service's
    // IPv6 address and any service sharing the IPv4 address land on the
    // node that wins the IPv4 address.
    let mut a = Case::new(&["{}"]);
    a.ip = "10.0.0.2";
    let mut b = Case::new(&["{}"]);
    b.ip = "10.0.0.2";
    b.shared = true;
    b.labels.insert("app".into(), "other".into());
    assert_eq!(a.order(), b.order());
    for me in ["node-a", "node-b", "node-c"] {
        assert_eq!(decide(&a.input(), me), decide(&b.input(), me));
    }
}

#[test]
fn node_info_reads_conditions_and_the_out_of_service_taint() {
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "n1", "labels": { "zone": "x" } },
        "spec": { "taints": [{ "key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute" }] },
        "status": { "conditions": [
            { "type": "Ready", "status": "False" },
            { "type": "NetworkUnavailable", "status": "True" },
        ] },
    }))
    .expect("node");
    let info = NodeInfo::from_node(&node);
    assert!(info.out_of_service && info.network_unavailable && !info.ready);
    let plain: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "n2" },
        "status": { "conditions": [{ "type": "Ready", "status": "True" }] },
    }))
    .expect("node");
    let info = NodeInfo::from_node(&plain);
    assert!(info.ready && !info.out_of_service && !info.network_unavailable);
}

#[test]
fn hash_key_is_sha256_of_node_hash_ip() {
    // The longest address text still hashes whole.
    for ip in [
        "10.0.0.1",
        "fc00::1",
        "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255",
    ] {
        let ip: IpAddr = ip.parse().expect("ip");
        let expected: [u8; 32] = Sha256::digest(format!("node-a#{ip}").as_bytes()).into();
        assert_eq!(hash_key("node-a", ip), expected, "{ip}");
    }
}

proptest::proptest! {
    /// `decide` finds the winner in one pass; it must be the first of the
    /// full ranking whatever the nodes, weights, liveness and policy.
    #[test]
    fn the_one_pass_winner_is_the_rankings_first(
        nodes in proptest::collection::vec((0u8..4, 0u8..3, proptest::bool::ANY, proptest::bool::ANY, proptest::bool::ANY), 0..12),
        ad_set in 0usize..4,
        local in proptest::bool::ANY,
        last_octet in 1u8..255,
    ) {
        let ad_specs: &[&[&str]] = &[
            &["{}"],
            &["{preferredNodeSelectors: [{weight: 10, preference: {matchLabels: {zone: z1}}}]}"],
            &["{nodeSelectors: [{matchLabels: {zone: z0}}]}", "{preferredNodeSelectors: [{weight: 5, preference: {matchLabels: {gpu: 'g1'}}}, {weight: 5, preference: {matchLabels: {zone: z2}}}]}"],
            &["{nodeSelectors: [{matchLabels: {gpu: 'g0'}}], preferredNodeSelectors: [{weight: 7, preference: {matchLabels: {zone: z3}}}]}", "{preferredNodeSelectors: [{weight: 7, preference: {matchLabels: {gpu: 'g2'}}}]}"],
        ];
        let mut c = Case::new(ad_specs[ad_set]);
        let zone = ["z0", "z1", "z2", "z3"];
        let gpu = ["g0", "g1", "g2"];
        c.nodes = nodes
            .iter()
            .enumerate()
            .map(|(i, (z, g, unavailable, _, _))| {
                let mut n = node(&format!("n{i}"), &[("zone", zone[usize::from(*z)]), ("gpu", gpu[usize::from(*g)])]);
                n.network_unavailable = *unavailable;
                n
            })
            .collect();
        c.alive = Some(nodes.iter().enumerate().filter(|(_, n)| n.3).map(|(i, _)| format!("n{i}")).collect());
        c.endpoints.nodes = nodes.iter().enumerate().filter(|(_, n)| n.4).map(|(i, _)| format!("n{i}")).collect();
        c.local = local;
        let ip = format!("10.0.0.{last_octet}");
        c.ip = Box::leak(ip.into_boxed_str());
        let input = c.input();
        let first = ranking(&input).ok().and_then(|(order, _)| order.first().map(|n| n.name.clone()));
        for n in &c.nodes {
            let won = matches!(decide(&input, &n.name), Decision::Announce(_));
            proptest::prop_assert_eq!(won, first.as_deref() == Some(n.name.as_str()), "{}", n.name);
        }
    }
}
