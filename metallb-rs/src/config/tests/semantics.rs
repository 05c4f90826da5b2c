//! Upstream's configuration semantics, one table per upstream function
//! (internal/config/config.go and validation.go): what is rejected, what
//! is skipped with a warning, and what is accepted. Each row builds its
//! own objects.

use crate::config::load::{Loaded, Schemas};
use crate::config::{Config, Options, timers};
use rstest::rstest;
use std::path::Path;
use std::time::Duration;

const NS: &str = "namespace: metallb-system";

fn pool(name: &str, addresses: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: {name}, {NS}, labels: {{pool: {name}}}}}\nspec: {{addresses: [{addresses}]{extra}}}\n"
    )
}

/// The pools most rows use: `dual` (IPv4 and IPv6) and `v4`.
fn pools() -> String {
    format!(
        "{}{}",
        pool("dual", "10.0.0.0/24, 'fc00::/120'", ""),
        pool("v4", "10.1.0.0/24", "")
    )
}

fn object(kind: &str, version: &str, name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: metallb.io/{version}\nkind: {kind}\nmetadata: {{name: {name}, {NS}}}\nspec: {{{spec}}}\n"
    )
}

fn l2(name: &str, spec: &str) -> String {
    object("L2Advertisement", "v1beta1", name, spec)
}

fn bgp(name: &str, spec: &str) -> String {
    object("BGPAdvertisement", "v1beta1", name, spec)
}

fn peer(name: &str, spec: &str) -> String {
    object("BGPPeer", "v1beta2", name, spec)
}

/// Builds `docs` in a cluster with `nodes` (name, label key, label value;
/// a node named twice gets both labels) and returns the errors, or the
/// warnings of the valid configuration, as displayed.
fn outcome(docs: &str, nodes: &[(&str, &str, &str)]) -> Result<Vec<String>, Vec<String>> {
    let mut loaded = Loaded::default();
    loaded.add_text(Path::new("t.yaml"), docs, &Schemas::compile());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let mut labels: std::collections::BTreeMap<&str, serde_json::Map<String, serde_json::Value>> =
        Default::default();
    for (n, k, v) in nodes {
        labels
            .entry(n)
            .or_default()
            .insert((*k).into(), (*v).into());
    }
    for (name, l) in labels {
        loaded.resources.nodes.push(
            serde_json::from_value(
                serde_json::json!({ "metadata": { "name": name, "labels": l } }),
            )
            .expect("node"),
        );
    }
    match Config::build(&loaded.resources, &Options::default()) {
        Ok(c) => Ok(c.warnings.iter().map(ToString::to_string).collect()),
        Err(e) => Err(e.0.iter().map(ToString::to_string).collect()),
    }
}

/// `expected`: `valid`, `warning: TEXT` or `error: TEXT` (TEXT a part of
/// one message).
fn check_in(docs: &str, nodes: &[(&str, &str, &str)], expected: &str) {
    let got = outcome(docs, nodes);
    let ok = match (&got, expected) {
        (Ok(w), "valid") => w.is_empty(),
        (Ok(w), e) if e.starts_with("warning: ") => w.iter().any(|w| w.contains(&e[9..])),
        (Err(errs), e) if e.starts_with("error: ") => errs.iter().any(|x| x.contains(&e[7..])),
        _ => false,
    };
    assert!(ok, "want {expected}\ngot {got:#?}");
}

fn check(docs: &str, expected: &str) {
    check_in(docs, &[], expected);
}

/// Upstream's `setL2AdvertisementsToPools` / `setBGPAdvertisementsToPools`:
/// a pool name no pool has is skipped; the configuration stays valid.
#[rstest]
#[case::l2_one_missing(&l2("l2", "ipAddressPools: [dual, nope]"),
    r#"warning: l2advertisement "metallb-system/l2": spec.ipAddressPools[1]: ipaddresspool "nope" does not exist and is ignored"#)]
#[case::l2_all_missing(&l2("l2", "ipAddressPools: [nope]"), r#"warning: ipaddresspool "nope" does not exist"#)]
#[case::bgp_missing(&bgp("adv", "ipAddressPools: [gone]"),
    r#"warning: bgpadvertisement "metallb-system/adv": spec.ipAddressPools[0]: ipaddresspool "gone" does not exist and is ignored"#)]
#[case::selector_matching_nothing_is_fine(&l2("l2", "ipAddressPoolSelectors: [{matchLabels: {pool: none}}]"), "valid")]
#[case::all_present(&l2("l2", "ipAddressPools: [dual, v4]"), "valid")]
fn set_advertisements_to_pools_missing_pool(#[case] objects: &str, #[case] expected: &str) {
    check(&format!("{}{objects}", pools()), expected);
}

#[test]
fn set_advertisements_to_pools_skips_missing_names() {
    let docs = format!(
        "{}{}{}",
        pools(),
        l2("some", "ipAddressPools: [nope, v4]"),
        l2("none", "ipAddressPools: [nope]")
    );
    let mut loaded = Loaded::default();
    loaded.add_text(Path::new("t.yaml"), &docs, &Schemas::compile());
    let c = Config::build(&loaded.resources, &Options::default()).expect("valid");
    let pools_of = |n: &str| {
        c.l2_advertisements
            .iter()
            .find(|a| a.name == n)
            .map(|a| a.pools.iter().cloned().collect::<Vec<_>>())
            .expect("ad")
    };
    assert_eq!(pools_of("some"), ["v4"]);
    assert!(
        pools_of("none").is_empty(),
        "naming only missing pools is not 'every pool'"
    );
    assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
}

/// Upstream's `validateDuplicate` and `validateLabelSelectorDuplicate`,
/// wherever upstream calls them.
#[rstest]
#[case::pool_namespaces(&pool("p", "10.2.0.0/24", ", serviceAllocation: {namespaces: [a, b, a]}"),
    r#"error: ipaddresspool "metallb-system/p": spec.serviceAllocation.namespaces[2]: duplicate definition of namespace "a""#)]
#[case::pool_namespace_selectors(&pool("p", "10.2.0.0/24", ", serviceAllocation: {namespaceSelectors: [{matchLabels: {t: a}}, {matchLabels: {t: a}}]}"),
    "error: spec.serviceAllocation.namespaceSelectors[1]: duplicate definition of label selector")]
#[case::pool_service_selectors(&pool("p", "10.2.0.0/24", ", serviceAllocation: {serviceSelectors: [{matchExpressions: [{key: a, operator: In, values: [x, y]}]}, {matchExpressions: [{key: a, operator: In, values: [y, x]}]}]}"),
    "error: spec.serviceAllocation.serviceSelectors[1]: duplicate definition of label selector")]
#[case::l2_pools(&l2("l2", "ipAddressPools: [v4, v4]"), r#"error: spec.ipAddressPools[1]: duplicate definition of ipaddresspool "v4""#)]
#[case::l2_pool_selectors(&l2("l2", "ipAddressPoolSelectors: [{matchLabels: {pool: v4}}, {matchLabels: {pool: v4}}]"),
    "error: spec.ipAddressPoolSelectors[1]: duplicate definition of label selector")]
#[case::l2_node_selectors(&l2("l2", "nodeSelectors: [{matchLabels: {a: b}}, {matchLabels: {a: b}}]"), "error: spec.nodeSelectors[1]: duplicate")]
#[case::l2_service_selectors(&l2("l2", "serviceSelectors: [{matchLabels: {a: b}}, {matchLabels: {a: b}}]"), "error: spec.serviceSelectors[1]: duplicate")]
#[case::l2_interfaces_not_checked(&l2("l2", "interfaces: [eth0, eth0]"), "valid")]
#[case::bgp_pools(&bgp("adv", "ipAddressPools: [v4, dual, v4]"), "error: spec.ipAddressPools[2]: duplicate")]
#[case::bgp_communities(&bgp("adv", "communities: ['1:1', '1:1']"), r#"error: spec.communities[1]: duplicate definition of community "1:1""#)]
#[case::bgp_peers(&bgp("adv", "peers: [p, q, p]"), r#"error: spec.peers[2]: duplicate definition of peer "p""#)]
#[case::bgp_node_selectors(&bgp("adv", "nodeSelectors: [{matchLabels: {a: b}}, {matchLabels: {a: b}}]"), "error: spec.nodeSelectors[1]: duplicate")]
#[case::bgp_service_selectors(&bgp("adv", "serviceSelectors: [{matchLabels: {a: b}}, {matchLabels: {a: b}}]"), "error: spec.serviceSelectors[1]: duplicate")]
#[case::peer_node_selectors(&peer("p", "myASN: 1, peerASN: 2, peerAddress: 10.9.0.1, nodeSelectors: [{matchLabels: {a: b}}, {matchLabels: {a: b}}]"),
    r#"error: bgppeer "metallb-system/p": spec.nodeSelectors[1]: duplicate"#)]
#[case::expression_twice(&l2("l2", "nodeSelectors: [{matchExpressions: [{key: a, operator: Exists}, {key: a, operator: Exists}]}]"),
    "error: spec.nodeSelectors[0].matchExpressions[1]: duplicate definition of match expression")]
#[case::value_twice(&l2("l2", "nodeSelectors: [{matchExpressions: [{key: a, operator: In, values: [x, x]}]}]"),
    r#"error: spec.nodeSelectors[0].matchExpressions[0].values: duplicate definition of match expression value "x""#)]
#[case::different_selectors(&l2("l2", "nodeSelectors: [{matchLabels: {a: b}}, {matchLabels: {a: c}}]"), "valid")]
#[case::expression_order_matters(&l2("l2", "nodeSelectors: [{matchExpressions: [{key: a, operator: Exists}, {key: b, operator: Exists}]}, {matchExpressions: [{key: b, operator: Exists}, {key: a, operator: Exists}]}]"), "valid")]
#[case::alias_and_its_value_are_one_community(&format!("{}{}", object("Community", "v1beta1", "c", "communities: [{name: ne, value: '65535:65281'}]"), bgp("adv", "communities: ['65535:65281', ne]")), "valid")]
fn validate_duplicate(#[case] objects: &str, #[case] expected: &str) {
    check(&format!("{}{objects}", pools()), expected);
}

/// Upstream's `validateBGPAdvPerPool` with
/// `BGPAdvertisementsHaveCompatibleLocalPref`: two advertisements of one
/// pool that would send the same prefixes to the same peers from the same
/// nodes must agree on LOCAL_PREF.
#[rstest]
#[case::conflict(bgp("a1", "ipAddressPools: [dual], localPref: 100"), bgp("a2", "ipAddressPools: [dual], localPref: 200"), &[],
    r#"error: bgpadvertisement "metallb-system/a2": spec.localPref: invalid local preference 200: bgpadvertisement "a1" already sets 100"#)]
#[case::equal(bgp("a1", "ipAddressPools: [dual], localPref: 100"), bgp("a2", "ipAddressPools: [dual], localPref: 100"), &[], "valid")]
#[case::unset_is_zero(bgp("a1", "ipAddressPools: [dual], localPref: 0"), bgp("a2", "ipAddressPools: [dual]"), &[], "valid")]
#[case::all_pools_conflict(bgp("a1", "localPref: 100"), bgp("a2", "ipAddressPools: [v4], localPref: 200"), &[], "error: spec.localPref")]
#[case::other_pool(bgp("a1", "ipAddressPools: [dual], localPref: 100"), bgp("a2", "ipAddressPools: [v4], localPref: 200"), &[], "valid")]
#[case::both_lengths_differ(bgp("a1", "ipAddressPools: [dual], localPref: 100"), bgp("a2", "ipAddressPools: [dual], localPref: 200, aggregationLength: 24, aggregationLengthV6: 120"), &[], "valid")]
#[case::one_length_differs_on_dual_pool(bgp("a1", "ipAddressPools: [dual], localPref: 100"), bgp("a2", "ipAddressPools: [dual], localPref: 200, aggregationLength: 24"), &[], "error: spec.localPref")]
#[case::v4_length_differs_on_v4_pool(bgp("a1", "ipAddressPools: [v4], localPref: 100"), bgp("a2", "ipAddressPools: [v4], localPref: 200, aggregationLength: 24"), &[], "valid")]
#[case::v6_length_differs_on_v4_pool(bgp("a1", "ipAddressPools: [v4], localPref: 100"), bgp("a2", "ipAddressPools: [v4], localPref: 200, aggregationLengthV6: 64"), &[], "error: spec.localPref")]
#[case::disjoint_peers(bgp("a1", "ipAddressPools: [dual], localPref: 100, peers: [p1]"), bgp("a2", "ipAddressPools: [dual], localPref: 200, peers: [p2]"), &[], "valid")]
#[case::common_peer(bgp("a1", "ipAddressPools: [dual], localPref: 100, peers: [p1, p2]"), bgp("a2", "ipAddressPools: [dual], localPref: 200, peers: [p2]"), &[], "error: spec.localPref")]
#[case::every_peer_vs_some(bgp("a1", "ipAddressPools: [dual], localPref: 100"), bgp("a2", "ipAddressPools: [dual], localPref: 200, peers: [p1]"), &[], "error: spec.localPref")]
#[case::disjoint_nodes(bgp("a1", "ipAddressPools: [dual], localPref: 100, nodeSelectors: [{matchLabels: {rack: a}}]"), bgp("a2", "ipAddressPools: [dual], localPref: 200, nodeSelectors: [{matchLabels: {rack: b}}]"),
    &[("n1", "rack", "a"), ("n2", "rack", "b")], "valid")]
#[case::common_node(bgp("a1", "ipAddressPools: [dual], localPref: 100, nodeSelectors: [{matchLabels: {rack: a}}]"), bgp("a2", "ipAddressPools: [dual], localPref: 200, nodeSelectors: [{matchLabels: {zone: z}}]"),
    &[("n1", "rack", "a"), ("n1", "zone", "z")], "error: spec.localPref")]
#[case::selectors_matching_no_node(bgp("a1", "ipAddressPools: [dual], localPref: 100, nodeSelectors: [{matchLabels: {rack: x}}]"), bgp("a2", "ipAddressPools: [dual], localPref: 200"),
    &[("n1", "rack", "a")], "valid")]
#[case::nodes_unknown_different_selectors(bgp("a1", "ipAddressPools: [dual], localPref: 100, nodeSelectors: [{matchLabels: {rack: a}}]"), bgp("a2", "ipAddressPools: [dual], localPref: 200, nodeSelectors: [{matchLabels: {rack: b}}]"), &[], "valid")]
#[case::nodes_unknown_one_selects_all(bgp("a1", "ipAddressPools: [dual], localPref: 100"), bgp("a2", "ipAddressPools: [dual], localPref: 200, nodeSelectors: [{matchLabels: {rack: b}}]"), &[], "error: spec.localPref")]
#[case::service_selectors_not_compared(bgp("a1", "ipAddressPools: [dual], localPref: 100"), bgp("a2", "ipAddressPools: [dual], localPref: 200, serviceSelectors: [{matchLabels: {app: x}}]"), &[], "valid")]
#[case::v6_length_zero_without_v6(bgp("a1", "ipAddressPools: [v4], aggregationLengthV6: 0"), String::new(), &[], "valid")]
#[case::v6_length_zero_with_v6(bgp("a1", "ipAddressPools: [dual], aggregationLengthV6: 0"), String::new(), &[],
    r#"error: spec.aggregationLengthV6: invalid aggregation length 0: ipaddresspool "dual" has a /120 prefix"#)]
fn validate_bgp_adv_per_pool(
    #[case] first: String,
    #[case] second: String,
    #[case] nodes: &[(&str, &str, &str)],
    #[case] expected: &str,
) {
    check_in(&format!("{}{first}{second}", pools()), nodes, expected);
}

/// Upstream's `checkFRRPeersCompatible` applies to its FRR backends only:
/// native sessions on one node may differ in myASN and routerID. Two
/// peers dialling the same address and port from one node are still
/// rejected (upstream's native mode would open two colliding sessions;
/// its FRR modes reject them).
#[rstest]
#[case::different_my_asn(peer("a", "myASN: 64500, peerASN: 1, peerAddress: 10.9.0.1"), peer("b", "myASN: 64511, peerASN: 1, peerAddress: 10.9.0.2"), &[], "valid")]
#[case::different_router_id(peer("a", "myASN: 64500, peerASN: 1, peerAddress: 10.9.0.1, routerID: 1.1.1.1"), peer("b", "myASN: 64500, peerASN: 1, peerAddress: 10.9.0.2, routerID: 2.2.2.2"), &[], "valid")]
#[case::same_address(peer("a", "myASN: 64500, peerASN: 1, peerAddress: 10.9.0.1"), peer("b", "myASN: 64500, peerASN: 2, peerAddress: 10.9.0.1"), &[],
    r#"error: bgppeer "metallb-system/b": spec.peerAddress: duplicate peer: bgppeer "a" already peers with 10.9.0.1:179"#)]
#[case::same_address_other_port(peer("a", "myASN: 64500, peerASN: 1, peerAddress: 10.9.0.1"), peer("b", "myASN: 64500, peerASN: 1, peerAddress: 10.9.0.1, peerPort: 1179"), &[], "valid")]
#[case::same_address_disjoint_nodes(peer("a", "myASN: 64500, peerASN: 1, peerAddress: 10.9.0.1, nodeSelectors: [{matchLabels: {rack: a}}]"), peer("b", "myASN: 64500, peerASN: 1, peerAddress: 10.9.0.1, nodeSelectors: [{matchLabels: {rack: b}}]"),
    &[("n1", "rack", "a"), ("n2", "rack", "b")], "valid")]
#[case::same_address_common_node(peer("a", "myASN: 64500, peerASN: 1, peerAddress: 10.9.0.1, nodeSelectors: [{matchLabels: {rack: a}}]"), peer("b", "myASN: 64500, peerASN: 1, peerAddress: 10.9.0.1, nodeSelectors: [{matchLabels: {zone: z}}]"),
    &[("n1", "rack", "a"), ("n1", "zone", "z")], "error: duplicate peer")]
fn check_frr_peers_compatible_native_scope(
    #[case] first: String,
    #[case] second: String,
    #[case] nodes: &[(&str, &str, &str)],
    #[case] expected: &str,
) {
    check_in(&format!("{first}{second}"), nodes, expected);
}

/// Upstream's `peerFromCR`.
#[rstest]
#[case::my_asn_zero(
    "myASN: 0, peerASN: 1, peerAddress: 10.9.0.1",
    "error: spec.myASN: missing myASN"
)]
#[case::peer_asn_zero(
    "myASN: 1, peerASN: 0, peerAddress: 10.9.0.1",
    "error: spec.peerASN: missing peerASN"
)]
#[case::peer_asn_zero_with_dynamic(
    "myASN: 1, peerASN: 0, dynamicASN: external, peerAddress: 10.9.0.1",
    "valid"
)]
#[case::multihop_ibgp(
    "myASN: 1, peerASN: 1, peerAddress: 10.9.0.1, ebgpMultiHop: true",
    "error: spec.ebgpMultiHop: ebgpMultiHop is set for an iBGP peer"
)]
#[case::multihop_ebgp(
    "myASN: 1, peerASN: 2, peerAddress: 10.9.0.1, ebgpMultiHop: true",
    "valid"
)]
#[case::multihop_dynamic_internal(
    "myASN: 1, dynamicASN: internal, peerAddress: 10.9.0.1, ebgpMultiHop: true",
    "valid"
)]
#[case::local_asn("myASN: 1, localASN: 7, peerASN: 2, peerAddress: 10.9.0.1", "valid")]
#[case::local_asn_with_dynamic_asn(
    "myASN: 1, localASN: 7, dynamicASN: internal, peerAddress: 10.9.0.1",
    "valid"
)]
#[case::local_asn_equal_to_my_asn(
    "myASN: 1, localASN: 1, peerASN: 2, peerAddress: 10.9.0.1",
    "error: spec.localASN: localASN 1 equals myASN"
)]
// iBGP or eBGP follows the AS the session uses, as FRR sorts a
// `local-as` neighbor.
#[case::multihop_ibgp_by_local_asn(
    "myASN: 1, localASN: 7, peerASN: 7, peerAddress: 10.9.0.1, ebgpMultiHop: true",
    "error: spec.ebgpMultiHop: ebgpMultiHop is set for an iBGP peer (peerASN equals localASN)"
)]
#[case::multihop_ebgp_by_local_asn(
    "myASN: 1, localASN: 7, peerASN: 1, peerAddress: 10.9.0.1, ebgpMultiHop: true",
    "valid"
)]
#[case::hold_time_below_a_second(
    "myASN: 1, peerASN: 2, peerAddress: 10.9.0.1, holdTime: 500ms",
    "valid"
)]
#[case::hold_time_one_second(
    "myASN: 1, peerASN: 2, peerAddress: 10.9.0.1, holdTime: 1s",
    "error: spec.holdTime: invalid hold time 1s"
)]
#[case::keepalive_alone_too_short(
    "myASN: 1, peerASN: 2, peerAddress: 10.9.0.1, keepaliveTime: 500ms",
    "error: spec.keepaliveTime: invalid hold time 1.5s"
)]
// The keepalive is the field at fault even when the hold time is given.
#[case::keepalive_above_hold(
    "myASN: 1, peerASN: 2, peerAddress: 10.9.0.1, holdTime: 30s, keepaliveTime: 60s",
    "error: spec.keepaliveTime: keepalive time 60s must not exceed hold time 30s"
)]
fn peer_from_cr(#[case] spec: &str, #[case] expected: &str) {
    check(&peer("p", spec), expected);
}

/// Upstream's `parseTimers`: (hold, keepalive) in, what the session uses
/// (or the error) out.
#[rstest]
#[case::none(None, None, "none/none")]
#[case::hold_only(Some(90_000), None, "90s/30s")]
#[case::zero(Some(0), None, "0ns/0ns")]
#[case::keepalive_gives_hold(None, Some(10_000), "30s/10s")]
#[case::both(Some(60_000), Some(5_000), "60s/5s")]
#[case::hold_three_seconds(Some(3_000), None, "3s/1s")]
#[case::hold_fraction_counts_whole_seconds(Some(2_900), None, "error: invalid hold time 2.9s")]
#[case::hold_under_a_second_is_zero(Some(500), None, "500ms/166.666666ms")]
#[case::hold_one_second(Some(1_000), None, "error: invalid hold time 1s")]
#[case::keepalive_above_hold(
    Some(30_000),
    Some(60_000),
    "error: keepalive time 60s must not exceed hold time 30s"
)]
fn parse_timers(
    #[case] hold_ms: Option<u64>,
    #[case] keepalive_ms: Option<u64>,
    #[case] expected: &str,
) {
    let d = |ms: Option<u64>| ms.map(Duration::from_millis);
    let show = |d: Option<Duration>| d.map_or("none".to_owned(), |d| format!("{d:?}"));
    let got = match timers(d(hold_ms), d(keepalive_ms)) {
        Ok((h, k)) => format!("{}/{}", show(h), show(k)),
        Err(e) => format!("error: {e}"),
    };
    assert!(got.starts_with(expected), "got {got}, want {expected}");
}

/// Upstream's `addressPoolServiceAllocationsFromCR`: negative priorities
/// are accepted; namespaceSelectors resolve against the cluster's
/// namespaces.
#[test]
fn address_pool_service_allocations_from_cr() {
    let docs = format!(
        "{}{}",
        pool(
            "neg",
            "10.2.0.0/24",
            ", serviceAllocation: {priority: -5, namespaceSelectors: [{matchLabels: {team: x}}]}"
        ),
        pool(
            "nobody",
            "10.3.0.0/24",
            ", serviceAllocation: {namespaceSelectors: [{matchLabels: {team: none}}]}"
        ),
    );
    let mut loaded = Loaded::default();
    loaded.add_text(Path::new("t.yaml"), &docs, &Schemas::compile());
    loaded.resources.namespaces.push(
        serde_json::from_value(
            serde_json::json!({ "metadata": { "name": "a", "labels": { "team": "x" } } }),
        )
        .expect("namespace"),
    );
    let c = Config::build(&loaded.resources, &Options::default()).expect("valid");
    let alloc = |p: &str| c.pools[p].allocation.clone().expect("allocation");
    assert_eq!(alloc("neg").priority, -5);
    assert!(alloc("neg").restricts_namespaces());
    assert!(
        !alloc("nobody").restricts_namespaces(),
        "selectors that select no namespace do not restrict"
    );
    assert!(!alloc("nobody").priority_only());
}
