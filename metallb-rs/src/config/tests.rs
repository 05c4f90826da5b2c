//! Every configuration error, one table row each: a small set of objects
//! in, the error (with its object and field path) out. Each row builds
//! its own state.

use super::load::{Loaded, Schemas};
use super::{Config, Options};
use rstest::rstest;
use std::path::Path;

const POOL: &str = "
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pool, namespace: metallb-system, labels: {tier: prod}}
spec: {addresses: [10.0.0.0/24, 'fc00::/120']}
";

fn peer(spec: &str) -> String {
    format!(
        "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {{name: peer, namespace: metallb-system}}\nspec: {{myASN: 64500, {spec}}}\n"
    )
}

/// Builds the config from `docs` (YAML documents, `---`-separated) and
/// returns every error as displayed to users.
fn errors(docs: &str) -> Vec<String> {
    let mut loaded = Loaded::default();
    loaded.add_text(Path::new("test.yaml"), docs, &Schemas::compile());
    let mut out: Vec<String> = loaded.errors.iter().map(|(_, e)| e.to_string()).collect();
    if let Err(e) = Config::build(&loaded.resources, &Options::default()) {
        out.extend(e.0.iter().map(ToString::to_string));
    }
    out
}

#[rstest]
// IPAddressPool
#[case::bad_prefix("apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: [10.0.0.0/33]}",
    r#"ipaddresspool "metallb-system/p": spec.addresses[0] "10.0.0.0/33": invalid CIDR: invalid prefix length"#)]
#[case::bad_ip(
    "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: [10.0.300.0/24]}",
    r#"spec.addresses[0] "10.0.300.0/24": invalid CIDR: invalid IP address"#
)]
#[case::range_reversed(
    "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: [10.0.0.9-10.0.0.1]}",
    r#"spec.addresses[0] "10.0.0.9-10.0.0.1": invalid range: start 10.0.0.9 is after end 10.0.0.1"#
)]
#[case::range_families(
    "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: ['10.0.0.1-fc00::1']}",
    "different IP families"
)]
#[case::empty_addresses(
    "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: []}",
    r#"ipaddresspool "metallb-system/p": spec.addresses: no addresses"#
)]
#[case::overlap_within("apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: [10.0.0.0/24, 10.0.0.128-10.0.0.130]}",
    r#"spec.addresses[1] "10.0.0.128-10.0.0.130": overlaps with "10.0.0.0/24" (spec.addresses[0] of the same pool)"#)]
#[case::overlap_across(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: q, namespace: metallb-system}}\nspec: {{addresses: ['fc00::80/121']}}"),
    r#"ipaddresspool "metallb-system/q": spec.addresses[0] "fc00::80/121": overlaps with "fc00::/120" (spec.addresses[1] of ipaddresspool "pool")"#)]
#[case::namespace_selector(
    "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: [10.0.0.0/24], serviceAllocation: {namespaceSelectors: [{matchExpressions: [{key: team, operator: Is, values: [a]}]}]}}",
    "spec.serviceAllocation.namespaceSelectors[0].matchExpressions[0].operator: unknown operator \"Is\""
)]
#[case::service_selector_label(
    "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: [10.0.0.0/24], serviceAllocation: {serviceSelectors: [{matchLabels: {'bad key!': x}}]}}",
    "spec.serviceAllocation.serviceSelectors[0].matchLabels[\"bad key!\"]: invalid label key"
)]
#[case::wrong_namespace("apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: default}\nspec: {addresses: [10.0.0.0/24]}",
    r#"ipaddresspool "default/p": metadata.namespace: MetalLB only reads objects in namespace "metallb-system""#)]
// L2Advertisement
#[case::l2_bad_pool_selector(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2, namespace: metallb-system}}\nspec: {{ipAddressPoolSelectors: [{{matchExpressions: [{{key: tier, operator: In}}]}}]}}"),
    "spec.ipAddressPoolSelectors[0].matchExpressions[0].values: operator In needs at least one value")]
#[case::l2_bad_node_selector(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2, namespace: metallb-system}}\nspec: {{nodeSelectors: [{{matchExpressions: [{{key: zone, operator: Exists, values: [a]}}]}}]}}"),
    "spec.nodeSelectors[0].matchExpressions[0].values: operator Exists takes no values")]
#[case::l2_bad_interface(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2, namespace: metallb-system}}\nspec: {{interfaces: [eth0, averyveryverylongname]}}"),
    r#"spec.interfaces[1]: invalid interface name "averyveryverylongname""#)]
#[case::l2_bad_preference(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2, namespace: metallb-system}}\nspec: {{preferredNodeSelectors: [{{weight: 5, preference: {{matchLabels: {{'-x': y}}}}}}]}}"),
    "spec.preferredNodeSelectors[0].preference.matchLabels[\"-x\"]: invalid label key")]
#[case::l2_bad_service_selector(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2, namespace: metallb-system}}\nspec: {{serviceSelectors: [{{matchLabels: {{app: 'a b'}}}}]}}"),
    "spec.serviceSelectors[0].matchLabels[\"app\"]: invalid label value")]
// BGPAdvertisement and communities
#[case::bgp_aggregation_too_long(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: adv, namespace: metallb-system}}\nspec: {{aggregationLength: 33}}"),
    "spec.aggregationLength: invalid aggregation length 33: must be between 1 and 32")]
#[case::bgp_aggregation_v6_too_long(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: adv, namespace: metallb-system}}\nspec: {{aggregationLengthV6: 129}}"),
    "spec.aggregationLengthV6: invalid aggregation length 129: must be at most 128")]
#[case::bgp_aggregation_less_specific_than_pool(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: adv, namespace: metallb-system}}\nspec: {{aggregationLength: 16}}"),
    r#"spec.aggregationLength: invalid aggregation length 16: ipaddresspool "pool" has a /24 prefix"#)]
#[case::bgp_aggregation_v6_less_specific(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: adv, namespace: metallb-system}}\nspec: {{aggregationLengthV6: 64}}"),
    r#"spec.aggregationLengthV6: invalid aggregation length 64: ipaddresspool "pool" has a /120 prefix"#)]
#[case::bgp_selectors_with_aggregation(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: adv, namespace: metallb-system}}\nspec: {{aggregationLength: 28, serviceSelectors: [{{matchLabels: {{app: a}}}}]}}"),
    r#"spec: Invalid value: "object": serviceSelectors and aggregationLength are mutually exclusive"#)]
#[case::bgp_bad_community(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: adv, namespace: metallb-system}}\nspec: {{communities: ['65536:1']}}"),
    r#"spec.communities[0]: invalid community "65536:1": expected <0-65535>:<0-65535>"#)]
#[case::bgp_bad_large_community(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: adv, namespace: metallb-system}}\nspec: {{communities: ['large:1:2']}}"),
    r#"spec.communities[0]: invalid large community "large:1:2""#)]
#[case::bgp_unknown_alias(&format!("{POOL}---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: adv, namespace: metallb-system}}\nspec: {{communities: [no-export]}}"),
    r#"spec.communities[0]: unknown community alias "no-export": define it in a Community object"#)]
#[case::alias_bad_value(
    "apiVersion: metallb.io/v1beta1\nkind: Community\nmetadata: {name: c, namespace: metallb-system}\nspec: {communities: [{name: x, value: 'abc'}]}",
    r#"community "metallb-system/c": spec.communities[0].value: invalid community "abc""#
)]
#[case::alias_duplicate("apiVersion: metallb.io/v1beta1\nkind: Community\nmetadata: {name: a, namespace: metallb-system}\nspec: {communities: [{name: x, value: '1:1'}]}\n---\napiVersion: metallb.io/v1beta1\nkind: Community\nmetadata: {name: b, namespace: metallb-system}\nspec: {communities: [{name: x, value: '1:2'}]}",
    r#"community "metallb-system/b": spec.communities[0].name: duplicate definition of community alias "x""#)]
// BGPPeer
#[case::peer_both_asns(&peer("peerASN: 1, dynamicASN: external, peerAddress: 10.1.0.1"),
    r#"bgppeer "metallb-system/peer": spec.dynamicASN: peerASN and dynamicASN are mutually exclusive"#)]
#[case::peer_no_asn(&peer("peerAddress: 10.1.0.1"), "spec.peerASN: missing peerASN: set peerASN or dynamicASN")]
#[case::peer_no_address(&peer("peerASN: 1"), "spec.peerAddress: missing peerAddress")]
#[case::peer_bad_address(&peer("peerASN: 1, peerAddress: 10.1.0.300"), r#"spec.peerAddress: invalid IP address "10.1.0.300""#)]
#[case::peer_bad_source(&peer("peerASN: 1, peerAddress: 10.1.0.1, sourceAddress: 'fc00::1'"), "spec.sourceAddress: fc00::1 is not of the same IP family as peerAddress")]
#[case::peer_bad_hold_time(&peer("peerASN: 1, peerAddress: 10.1.0.1, holdTime: 1s"), "spec.holdTime: invalid hold time 1s: must be 0 or at least 3s")]
#[case::peer_unparsable_hold_time(&peer("peerASN: 1, peerAddress: 10.1.0.1, holdTime: soon"), r#"spec.holdTime: invalid duration "soon""#)]
#[case::peer_keepalive_above_hold(&peer("peerASN: 1, peerAddress: 10.1.0.1, holdTime: 30s, keepaliveTime: 60s"), "spec.keepaliveTime: keepalive time 60s must not exceed hold time 30s")]
#[case::peer_connect_fraction(&peer("peerASN: 1, peerAddress: 10.1.0.1, connectTime: 1500ms"), r#"spec.connectTime: Invalid value: "string": connect time should contain a whole number of seconds"#)]
#[case::peer_connect_range(&peer("peerASN: 1, peerAddress: 10.1.0.1, connectTime: 20h"), r#"spec.connectTime: Invalid value: "string": connect time should be between 1 seconds to 65535"#)]
#[case::peer_bad_router_id(&peer("peerASN: 1, peerAddress: 10.1.0.1, routerID: 'fc00::1'"), r#"spec.routerID: invalid router ID "fc00::1": must be an IPv4 address"#)]
#[case::peer_bad_node_selector(&peer("peerASN: 1, peerAddress: 10.1.0.1, nodeSelectors: [{matchExpressions: [{key: a, operator: Near}]}]"), "spec.nodeSelectors[0].matchExpressions[0].operator: unknown operator")]
#[case::peer_password_too_long(&peer(&format!("peerASN: 1, peerAddress: 10.1.0.1, password: {}", "x".repeat(81))), "spec.password: the password is 81 bytes; TCP MD5 keys are at most 80 bytes")]
#[case::peer_password_and_secret(&peer("peerASN: 1, peerAddress: 10.1.0.1, password: x, passwordSecret: {name: s}"), "spec.passwordSecret: password and passwordSecret are mutually exclusive")]
#[case::peer_secret_missing(&peer("peerASN: 1, peerAddress: 10.1.0.1, passwordSecret: {name: s}"), r#"spec.passwordSecret: secret "s" not found in namespace "metallb-system""#)]
#[case::peer_secret_wrong_type(&format!("{}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: s, namespace: metallb-system}}\nstringData: {{password: x}}", peer("peerASN: 1, peerAddress: 10.1.0.1, passwordSecret: {name: s}")),
    r#"spec.passwordSecret: secret "s" must be of type kubernetes.io/basic-auth"#)]
#[case::peer_secret_no_key(&format!("{}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: s, namespace: metallb-system}}\ntype: kubernetes.io/basic-auth\nstringData: {{username: x}}", peer("peerASN: 1, peerAddress: 10.1.0.1, passwordSecret: {name: s}")),
    r#"spec.passwordSecret: secret "s" has no key "password""#)]
#[case::peer_secret_other_namespace(&peer("peerASN: 1, peerAddress: 10.1.0.1, passwordSecret: {name: s, namespace: kube-system}"), "spec.passwordSecret: secret kube-system/s: the secret must be in the MetalLB namespace")]
#[case::peer_bfd_missing(&peer("peerASN: 1, peerAddress: 10.1.0.1, bfdProfile: slow"),
    r#"bgppeer "metallb-system/peer": spec.bfdProfile: bfdprofile "slow" does not exist: create it or remove spec.bfdProfile"#)]
#[case::peer_vrf_unsupported(&peer("peerASN: 1, peerAddress: 10.1.0.1, vrf: red"), "spec.vrf: VRF peering is not supported by the metallb-rs native BGP speaker")]
#[case::peer_interface_and_address(&peer("peerASN: 1, peerAddress: 10.1.0.1, interface: eth0"), "spec.interface: peerAddress and interface are mutually exclusive: set one of them")]
#[case::peer_interface_bad_name(&peer("peerASN: 1, interface: 'eth 0'"), r#"spec.interface: invalid interface name "eth 0""#)]
#[case::peer_interface_bfd(&peer("peerASN: 1, interface: eth0, bfdProfile: slow"), "spec.bfdProfile: spec.bfdProfile is not supported with spec.interface (unnumbered peers)")]
#[case::peer_interface_source(&peer("peerASN: 1, interface: eth0, sourceAddress: 10.0.0.1"), "spec.sourceAddress: spec.sourceAddress is not supported with spec.interface (unnumbered peers)")]
#[case::peer_interface_duplicate(&format!("{}---\n{}", peer("peerASN: 1, interface: eth1"), peer("peerASN: 2, interface: eth1").replace("name: peer", "name: peer2")),
    r#"bgppeer "metallb-system/peer2": spec.interface: duplicate peer: bgppeer "peer" already peers with interface eth1:179 from the same nodes"#)]
#[case::peer_local_asn_is_my_asn(&peer("peerASN: 1, peerAddress: 10.1.0.1, localASN: 64500"), "spec.localASN: localASN 64500 equals myASN: remove localASN or set it to another AS")]
#[case::peer_duplicate(&format!("{}---\n{}", peer("peerASN: 1, peerAddress: 10.1.0.1"), peer("peerASN: 2, peerAddress: 10.1.0.1").replace("name: peer", "name: peer2")),
    r#"bgppeer "metallb-system/peer2": spec.peerAddress: duplicate peer: bgppeer "peer" already peers with 10.1.0.1:179 from the same nodes"#)]
#[case::peer_v1beta1_checked_too(
    "apiVersion: metallb.io/v1beta1\nkind: BGPPeer\nmetadata: {name: old, namespace: metallb-system}\nspec: {myASN: 1, peerASN: 2, peerAddress: nowhere}",
    r#"bgppeer "metallb-system/old": spec.peerAddress: invalid IP address "nowhere""#
)]
// BFDProfile (objects read from the API skip our schema check)
#[case::bfd_profile_echo_mode_refused(&format!("{}---\napiVersion: metallb.io/v1beta1\nkind: BFDProfile\nmetadata: {{name: fast, namespace: metallb-system}}\nspec: {{echoMode: true}}", peer("peerASN: 1, peerAddress: 10.1.0.1, bfdProfile: fast")),
    r#"bfdprofile "metallb-system/fast": spec.echoMode: echoMode is not supported by the metallb-rs native BFD: set echoMode false (echo packets are looped back"#)]
#[case::bfd_profile_range_from_config(&format!("{}---\napiVersion: metallb.io/v1beta1\nkind: BFDProfile\nmetadata: {{name: b, namespace: metallb-system}}\nspec: {{detectMultiplier: 1}}", POOL),
    "spec.detectMultiplier")]
// Files
#[case::yaml_syntax("apiVersion: [", r#"file "test.yaml": document 1: invalid YAML"#)]
#[case::unknown_metallb_kind(
    "apiVersion: metallb.io/v1beta1\nkind: AddressPool\nmetadata: {name: old}",
    r#"addresspool "old": kind: "AddressPool" is not a metallb.io kind"#
)]
fn config_errors_name_object_and_field(#[case] docs: &str, #[case] expected: &str) {
    let errs = errors(docs);
    assert!(
        errs.iter().any(|e| e.contains(expected)),
        "expected an error containing\n  {expected}\ngot\n  {}",
        errs.join("\n  ")
    );
}

#[test]
fn a_valid_set_has_no_errors() {
    let docs = format!(
        "{POOL}---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2, namespace: metallb-system}}\nspec: {{ipAddressPools: [pool]}}\n---\n{}",
        peer("peerASN: 64501, peerAddress: 10.1.0.1, holdTime: 90s, keepaliveTime: 30s")
    );
    assert_eq!(errors(&docs), Vec::<String>::new());
}

#[test]
fn a_peer_carries_its_bfd_profile_values() {
    let docs = format!(
        "apiVersion: metallb.io/v1beta1\nkind: BFDProfile\nmetadata: {{name: fast, namespace: metallb-system}}\nspec: {{receiveInterval: 150, transmitInterval: 200, detectMultiplier: 5, echoMode: false, passiveMode: true, minimumTtl: 10}}\n---\n{}---\n{}",
        peer("peerASN: 64501, peerAddress: 10.1.0.1, bfdProfile: fast"),
        peer("peerASN: 64501, peerAddress: 10.1.0.2").replace("name: peer", "name: plain"),
    );
    let mut loaded = Loaded::default();
    loaded.add_text(Path::new("t.yaml"), &docs, &Schemas::compile());
    let config = Config::build(&loaded.resources, &Options::default()).expect("valid");
    let profile = |name: &str| {
        let peer = config.peers.iter().find(|p| p.name == name).expect("peer");
        peer.bfd_profile.clone()
    };
    let want = super::BfdProfile {
        name: "fast".into(),
        receive_interval: Some(150),
        transmit_interval: Some(200),
        detect_multiplier: Some(5),
        echo_interval: None,
        passive_mode: Some(true),
        minimum_ttl: Some(10),
    };
    assert_eq!(profile("peer"), Some(want.clone()));
    assert_eq!(profile("plain"), None);
    assert_eq!(config.bfd_profiles.get("fast"), Some(&want));
}

#[test]
fn a_peer_carries_graceful_restart() {
    let docs = format!(
        "{}---\n{}---\n{}",
        peer("peerASN: 64501, peerAddress: 10.1.0.1, enableGracefulRestart: true"),
        peer("peerASN: 64501, peerAddress: 10.1.0.2, enableGracefulRestart: false")
            .replace("name: peer", "name: off"),
        peer("peerASN: 64501, peerAddress: 10.1.0.3").replace("name: peer", "name: unset"),
    );
    let mut loaded = Loaded::default();
    loaded.add_text(Path::new("t.yaml"), &docs, &Schemas::compile());
    let config = Config::build(&loaded.resources, &Options::default()).expect("valid");
    let mut gr: Vec<(&str, bool)> = config
        .peers
        .iter()
        .map(|p| (p.name.as_str(), p.graceful_restart))
        .collect();
    gr.sort();
    assert_eq!(gr, [("off", false), ("peer", true), ("unset", false)]);
}

#[test]
fn every_error_is_reported_not_only_the_first() {
    let docs = "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: [10.0.0.0/33, nonsense, 10.0.0.9-10.0.0.1]}";
    assert_eq!(errors(docs).len(), 3, "{:?}", errors(docs));
}

#[test]
fn pools_resolve_for_advertisements() {
    let docs = format!(
        "{POOL}---\napiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: other, namespace: metallb-system}}\nspec: {{addresses: [10.9.0.0/24]}}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: all, namespace: metallb-system}}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: prod, namespace: metallb-system}}\nspec: {{ipAddressPoolSelectors: [{{matchLabels: {{tier: prod}}}}]}}"
    );
    let mut loaded = Loaded::default();
    loaded.add_text(Path::new("t.yaml"), &docs, &Schemas::compile());
    let config = Config::build(&loaded.resources, &Options::default()).expect("valid");
    let pools = |name: &str| {
        config
            .l2_advertisements
            .iter()
            .find(|a| a.name == name)
            .expect("ad")
            .pools
            .iter()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(pools("all"), ["other", "pool"]);
    assert_eq!(pools("prod"), ["pool"]);
    assert!(
        config.pools["pool"].auto_assign,
        "autoAssign defaults to true"
    );
}

mod semantics;
