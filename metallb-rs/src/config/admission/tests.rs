//! One row per admission rule: the objects in the cluster, one write, the
//! verdict as one line (`allowed`, `allowed; warning: ...`, `denied: ...`).
//! Each row builds its own state.

use super::*;
use rstest::rstest;

const NS: &str = "metallb-system";

fn pool(name: &str, addresses: &str) -> String {
    format!(
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: {name}, namespace: {NS}}}\nspec: {{addresses: [{addresses}]}}"
    )
}

fn peer(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {{name: {name}, namespace: {NS}}}\nspec: {{myASN: 64500, peerASN: 64501, {spec}}}"
    )
}

fn adv(spec: &str) -> String {
    format!(
        "apiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: adv, namespace: {NS}}}\nspec: {{{spec}}}"
    )
}

fn community(name: &str, alias: &str, value: &str) -> String {
    format!(
        "apiVersion: metallb.io/v1beta1\nkind: Community\nmetadata: {{name: {name}, namespace: {NS}}}\nspec: {{communities: [{{name: {alias}, value: '{value}'}}]}}"
    )
}

fn bfd(name: &str) -> String {
    bfd_spec(name, "")
}

fn bfd_spec(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: metallb.io/v1beta1\nkind: BFDProfile\nmetadata: {{name: {name}, namespace: {NS}}}\nspec: {{{spec}}}"
    )
}

fn node(name: &str, zone: &str) -> String {
    format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{zone: {zone}}}}}")
}

fn docs(text: &str) -> Vec<serde_json::Value> {
    text.split("\n---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml::from_str(d).expect("test YAML"))
        .collect()
}

fn object(doc: serde_json::Value) -> Object {
    let kind = doc["kind"].as_str().expect("kind").to_owned();
    Object::from_json(&kind, doc).expect("a MetalLB object")
}

fn resources(text: &str) -> Resources {
    let mut res = Resources::default();
    for doc in docs(text) {
        if doc["kind"] == "Node" {
            res.nodes.push(serde_json::from_value(doc).expect("node"));
            continue;
        }
        match object(doc) {
            Object::Pool(o) => res.pools.push(o),
            Object::L2(o) => res.l2_advertisements.push(o),
            Object::BgpAd(o) => res.bgp_advertisements.push(o),
            Object::Peer(o) => res.peers.push(o),
            Object::Bfd(o) => res.bfd_profiles.push(o),
            Object::Community(o) => res.communities.push(o),
        }
    }
    res
}

/// The verdict on `operation` of `proposed` (one YAML document) in a
/// cluster holding `current` (YAML documents), as one line.
fn check(current: &str, operation: Operation, proposed: &str, expected: &str) {
    let mut object = object(docs(proposed).remove(0));
    object.default_namespace(NS);
    let proposal = Proposal { operation, object };
    let verdict = review(&proposal, &resources(current), &Options::default());
    let (head, warnings) = match verdict {
        Verdict::Allowed { warnings } => ("allowed".to_owned(), warnings),
        Verdict::Denied { message, warnings } => (
            format!("denied: {}", message.replace('\n', " | ")),
            warnings,
        ),
    };
    let got = std::iter::once(head)
        .chain(warnings.iter().map(|w| format!("warning: {w}")))
        .collect::<Vec<_>>()
        .join("; ");
    assert_eq!(got, expected);
}

use Operation::{Create, Delete, Update};

#[rstest]
// IPAddressPool
#[case::pool_ok("", Create, &pool("a", "10.0.0.0/24"), "allowed")]
#[case::pool_overlap_names_both(&pool("a", "10.0.0.0/24"), Create, &pool("b", "10.0.0.128/25"),
    r#"denied: ipaddresspool "metallb-system/b": spec.addresses[0] "10.0.0.128/25": overlaps with "10.0.0.0/24" (spec.addresses[0] of ipaddresspool "a"): an address may belong to one pool only"#)]
#[case::pool_update_replaces_itself(&pool("a", "10.0.0.0/24"), Update, &pool("a", "10.0.0.0/23"), "allowed")]
#[case::pool_bad_cidr("", Create, &pool("a", "10.0.0.0/33"),
    r#"denied: ipaddresspool "metallb-system/a": spec.addresses[0] "10.0.0.0/33": invalid CIDR: invalid prefix length (IPv4 allows 0-32)"#)]
#[case::pool_other_namespace("", Create, "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: a, namespace: default}\nspec: {addresses: [10.0.0.0/24]}",
    r#"denied: ipaddresspool "default/a": metadata.namespace: MetalLB only reads objects in namespace "metallb-system": move it there (or run with --namespace default)"#)]
#[case::pool_other_namespace_update("", Update, "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: a, namespace: default}\nspec: {addresses: [10.0.0.0/24]}",
    r#"allowed; warning: MetalLB only reads objects in namespace "metallb-system": this one in "default" has no effect"#)]
#[case::pool_fix_of_a_preexisting_overlap(&format!("{}\n---\n{}", pool("a", "10.0.0.0/24"), pool("b", "10.0.0.0/25")),
    Update, &pool("b", "10.0.1.0/24"), "allowed")]
#[case::pool_unrelated_write_beside_a_preexisting_overlap(&format!("{}\n---\n{}", pool("a", "10.0.0.0/24"), pool("b", "10.0.0.0/25")),
    Create, &pool("c", "10.0.2.0/24"), "allowed")]
#[case::pool_delete(&format!("{}\n---\nkind: L2Advertisement\napiVersion: metallb.io/v1beta1\nmetadata: {{name: l2, namespace: {NS}}}\nspec: {{ipAddressPools: [a]}}", pool("a", "10.0.0.0/24")),
    Delete, &pool("a", "10.0.0.0/24"), "allowed")]
// L2Advertisement
#[case::l2_missing_pool_warns("", Create, &format!("apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {{name: l2, namespace: {NS}}}\nspec: {{ipAddressPools: [nope]}}"),
    r#"allowed; warning: l2advertisement "metallb-system/l2": spec.ipAddressPools[0]: ipaddresspool "nope" does not exist and is ignored: create it or fix the name"#)]
// BGPAdvertisement
#[case::bgp_aggregation_shorter_than_pool(&pool("a", "10.0.0.0/28"), Create, &adv("aggregationLength: 26"),
    r#"denied: bgpadvertisement "metallb-system/adv": spec.aggregationLength: invalid aggregation length 26: ipaddresspool "a" has a /28 prefix, more specific than the aggregation length (which would announce addresses outside the pool); use at least 28"#)]
#[case::bgp_undefined_alias_warns(&pool("a", "10.0.0.0/24"), Create, &adv("communities: [no-export]"),
    r#"allowed; warning: bgpadvertisement "metallb-system/adv": spec.communities[0]: community alias "no-export" is not defined yet: define it in a Community object or write the value (1234:1234 or large:1:2:3)"#)]
#[case::bgp_defined_alias(&format!("{}\n---\n{}", pool("a", "10.0.0.0/24"), community("c", "no-export", "65535:65281")), Create, &adv("communities: [no-export]"), "allowed")]
#[case::bgp_bad_literal(&pool("a", "10.0.0.0/24"), Create, &adv("communities: ['99999999:1']"),
    r#"denied: bgpadvertisement "metallb-system/adv": spec.communities[0]: invalid community "99999999:1": expected <0-65535>:<0-65535>"#)]
// Community
#[case::community_duplicate_alias(&community("a", "x", "1:1"), Create, &community("b", "x", "1:2"),
    r#"denied: community "metallb-system/b": spec.communities[0].name: duplicate definition of community alias "x" (already defined in community "a")"#)]
#[case::community_bad_value("", Create, &community("c", "x", "abc"),
    r#"denied: community "metallb-system/c": spec.communities[0].value: invalid community "abc""#)]
// BGPPeer
#[case::peer_bad_address("", Create, &peer("p", "peerAddress: 10.1.0.300"),
    r#"denied: bgppeer "metallb-system/p": spec.peerAddress: invalid IP address "10.1.0.300""#)]
#[case::peer_duplicate_on_common_nodes(&peer("p", "peerAddress: 10.1.0.1"), Create, &peer("q", "peerAddress: 10.1.0.1"),
    r#"denied: bgppeer "metallb-system/q": spec.peerAddress: duplicate peer: bgppeer "p" already peers with 10.1.0.1:179 from the same nodes"#)]
#[case::peer_duplicate_on_disjoint_nodes(
    &format!("{}\n---\n{}\n---\n{}", node("n1", "a"), node("n2", "b"), peer("p", "peerAddress: 10.1.0.1, nodeSelectors: [{matchLabels: {zone: a}}]")),
    Create, &peer("q", "peerAddress: 10.1.0.1, nodeSelectors: [{matchLabels: {zone: b}}]"), "allowed")]
#[case::peer_bfd_profile_allowed(&bfd("fast"), Create, &peer("p", "peerAddress: 10.1.0.1, bfdProfile: fast"), "allowed")]
#[case::peer_bfd_profile_not_yet_created("", Create, &peer("p", "peerAddress: 10.1.0.1, bfdProfile: slow"),
    r#"allowed; warning: bgppeer "metallb-system/p": spec.bfdProfile: bfdprofile "slow" does not exist yet: create it, or the peer's configuration stays invalid"#)]
#[case::peer_bfd_profile_kept_on_an_unrelated_edit(&format!("{}\n---\n{}", bfd("fast"), peer("p", "peerAddress: 10.1.0.1, bfdProfile: fast")), Create, &pool("extra", "10.9.0.0/24"), "allowed")]
#[case::peer_password_secret_unseen("", Create, &peer("p", "peerAddress: 10.1.0.1, passwordSecret: {name: s}"), "allowed")]
#[case::peer_password_and_secret("", Create, &peer("p", "peerAddress: 10.1.0.1, password: x, passwordSecret: {name: s}"),
    r#"denied: bgppeer "metallb-system/p": spec.passwordSecret: password and passwordSecret are mutually exclusive: set one of them"#)]
#[case::peer_disable_mp_warns_and_still_validates("", Create, &peer("p", "peerAddress: 10.1.0.300, disableMP: true"),
    r#"denied: bgppeer "metallb-system/p": spec.peerAddress: invalid IP address "10.1.0.300"; warning: bgppeer "metallb-system/p": spec.disableMP: deprecated and has no effect: remove it"#)]
// BFDProfile
#[case::bfd_create("", Create, &bfd("fast"), "allowed")]
#[case::bfd_create_with_values("", Create, &bfd_spec("fast", "receiveInterval: 150, transmitInterval: 200, detectMultiplier: 5, echoMode: false, passiveMode: true, minimumTtl: 10"), "allowed")]
#[case::bfd_echo_mode_denied("", Create, &bfd_spec("echo", "echoMode: true"),
    &format!(r#"denied: bfdprofile "metallb-system/echo": spec.echoMode: {}"#, crate::config::ECHO_MODE_REFUSAL))]
#[case::bfd_delete_in_use(&format!("{}\n---\n{}", bfd("fast"), peer("p", "peerAddress: 10.1.0.1, bfdProfile: fast")), Delete, &bfd("fast"),
    r#"denied: bfdprofile "metallb-system/fast": cannot delete: used by bgppeer "p" (spec.bfdProfile): remove the reference first"#)]
#[case::bfd_delete_unused(&format!("{}\n---\n{}", bfd("fast"), peer("p", "peerAddress: 10.1.0.1")), Delete, &bfd("fast"), "allowed")]
fn admission(
    #[case] current: &str,
    #[case] operation: Operation,
    #[case] proposed: &str,
    #[case] expected: &str,
) {
    check(current, operation, proposed, expected);
}

#[test]
fn every_webhook_has_a_unique_name_and_path_and_is_found_by_its_path() {
    for w in &WEBHOOKS {
        assert_eq!(webhook_for_path(w.path), Some(w));
        assert_eq!(
            w.path,
            format!(
                "/validate-metallb-io-{}-{}",
                w.version,
                w.kind.to_lowercase()
            )
        );
        assert!(w.name.ends_with(".metallb.io"), "{}", w.name);
        assert_eq!(WEBHOOKS.iter().filter(|o| o.name == w.name).count(), 1);
    }
    assert_eq!(webhook_for_path("/convert"), None);
}

#[test]
fn every_webhook_reads_its_own_kind() {
    for w in &WEBHOOKS {
        let doc = serde_json::json!({
            "apiVersion": format!("metallb.io/{}", w.version),
            "kind": w.kind,
            "metadata": {"name": "x", "namespace": NS},
            "spec": {},
        });
        // An empty spec may not parse (required fields); the kind must.
        if let Err(e) = Object::from_json(w.kind, doc) {
            assert!(!e.contains("is not reviewed"), "{}: {e}", w.kind);
        }
    }
    assert!(Object::from_json("Service", serde_json::json!({})).is_err());
}
