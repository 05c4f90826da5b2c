//! BGPPeer's conversion as tables: one row per field of each version,
//! each checked both ways on a whole object; the rows are held to cover
//! both CRD schemas, so a new field must be placed.

use super::*;
use serde_json::json;
use std::collections::BTreeSet;

const V1BETA1: &str = "metallb.io/v1beta1";
const V1BETA2: &str = "metallb.io/v1beta2";

/// A BGPPeer at `api_version` whose spec is the required fields with
/// `fragment` merged in (a `null` removes a field).
fn peer(api_version: &str, fragment: Value) -> Value {
    let mut spec = json!({"myASN": 64512, "peerASN": 64513, "peerAddress": "10.0.0.1"});
    json_patch::merge(&mut spec, &fragment);
    json!({
        "apiVersion": api_version, "kind": "BGPPeer",
        "metadata": {"name": "p", "namespace": "metallb-system"},
        "spec": spec,
    })
}

/// Every v1beta1 spec field, one row each: the field in v1beta1 and what
/// it is in v1beta2. Both directions are checked on each row.
fn shared_rows() -> Vec<(&'static str, Value, Value)> {
    let selector = json!([{
        "matchLabels": {"kubernetes.io/hostname": "node-a"},
        "matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1", "r2"]}],
    }]);
    vec![
        (
            "myASN",
            json!({"myASN": 4294967295u32}),
            json!({"myASN": 4294967295u32}),
        ),
        (
            "peerASN",
            json!({"peerASN": 65000}),
            json!({"peerASN": 65000}),
        ),
        (
            "peerAddress",
            json!({"peerAddress": "2001:db8::1"}),
            json!({"peerAddress": "2001:db8::1"}),
        ),
        (
            "sourceAddress",
            json!({"sourceAddress": "10.0.0.2"}),
            json!({"sourceAddress": "10.0.0.2"}),
        ),
        (
            "peerPort",
            json!({"peerPort": 1179}),
            json!({"peerPort": 1179}),
        ),
        (
            "holdTime",
            json!({"holdTime": "90s"}),
            json!({"holdTime": "90s"}),
        ),
        (
            "keepaliveTime",
            json!({"keepaliveTime": "30s"}),
            json!({"keepaliveTime": "30s"}),
        ),
        (
            "routerID",
            json!({"routerID": "10.10.10.10"}),
            json!({"routerID": "10.10.10.10"}),
        ),
        (
            "nodeSelectors",
            json!({"nodeSelectors": selector}),
            json!({"nodeSelectors": selector}),
        ),
        (
            "password",
            json!({"password": "s3cret"}),
            json!({"password": "s3cret"}),
        ),
        (
            "bfdProfile",
            json!({"bfdProfile": "fast"}),
            json!({"bfdProfile": "fast"}),
        ),
        (
            "ebgpMultiHop",
            json!({"ebgpMultiHop": true}),
            json!({"ebgpMultiHop": true}),
        ),
    ]
}

/// Every v1beta2-only spec field, one row each: the field in v1beta2 and
/// the v1beta1 spec it reads as (upstream's ConvertFrom: dropped, and a
/// missing peerASN or peerAddress is the zero value).
fn dropped_rows() -> Vec<(&'static str, Value, Value)> {
    vec![
        (
            "dynamicASN",
            json!({"peerASN": null, "dynamicASN": "external"}),
            json!({"peerASN": 0}),
        ),
        ("localASN", json!({"localASN": 64600}), json!({})),
        (
            "interface",
            json!({"peerAddress": null, "interface": "eth1"}),
            json!({"peerAddress": ""}),
        ),
        ("connectTime", json!({"connectTime": "5s"}), json!({})),
        (
            "passwordSecret",
            json!({"passwordSecret": {"name": "bgp", "namespace": "metallb-system"}}),
            json!({}),
        ),
        (
            "enableGracefulRestart",
            json!({"enableGracefulRestart": true}),
            json!({}),
        ),
        ("vrf", json!({"vrf": "red"}), json!({})),
        ("disableMP", json!({"disableMP": true}), json!({})),
        (
            "dualStackAddressFamily",
            json!({"dualStackAddressFamily": true}),
            json!({}),
        ),
    ]
}

fn spec_fields(version: &str) -> BTreeSet<String> {
    let schema = crate::api::schema_for("bgppeers", version).expect("bgppeers schema");
    schema["properties"]["spec"]["properties"]
        .as_object()
        .expect("spec properties")
        .keys()
        .cloned()
        .collect()
}

#[test]
fn the_rows_cover_every_field_of_both_versions() {
    let shared: BTreeSet<String> = shared_rows().iter().map(|r| r.0.to_owned()).collect();
    assert_eq!(shared, spec_fields("v1beta1"));
    let dropped: BTreeSet<String> = dropped_rows().iter().map(|r| r.0.to_owned()).collect();
    assert_eq!(
        dropped,
        V1BETA2_ONLY.iter().map(|f| f.to_string()).collect()
    );
    assert_eq!(
        &shared | &dropped,
        spec_fields("v1beta2"),
        "a v1beta2 field neither converted nor listed in V1BETA2_ONLY"
    );
}

#[test]
fn every_v1beta1_field_converts_to_v1beta2_and_back() {
    for (field, old, new) in shared_rows() {
        let (old, new) = (peer(V1BETA1, old), peer(V1BETA2, new));
        assert_eq!(
            convert(&old, V1BETA2),
            Ok(new.clone()),
            "{field}: v1beta1 -> v1beta2"
        );
        assert_eq!(
            convert(&new, V1BETA1),
            Ok(old),
            "{field}: v1beta2 -> v1beta1"
        );
    }
}

#[test]
fn v1beta2_only_fields_are_dropped_on_the_way_to_v1beta1() {
    for (field, new, old) in dropped_rows() {
        let (new, old) = (peer(V1BETA2, new), peer(V1BETA1, old));
        assert_eq!(convert(&new, V1BETA1), Ok(old), "{field}");
    }
}

#[test]
fn a_full_v1beta1_peer_survives_the_round_trip_unchanged() {
    let mut spec = json!({});
    for (_, old, _) in shared_rows() {
        json_patch::merge(&mut spec, &old);
    }
    let original = json!({
        "apiVersion": V1BETA1, "kind": "BGPPeer",
        "metadata": {
            "name": "p", "namespace": "metallb-system", "uid": "6b1f0e4c-0000-4000-8000-000000000001",
            "resourceVersion": "42", "generation": 3, "creationTimestamp": "2026-01-02T03:04:05Z",
            "labels": {"team": "net"}, "annotations": {"note": "kept"},
            "finalizers": ["example.com/keep"],
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": V1BETA1,
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": spec,
        "status": {},
    });
    let there = convert(&original, V1BETA2).expect("to v1beta2");
    assert_eq!(there["apiVersion"], V1BETA2);
    assert_eq!(there["metadata"], original["metadata"]);
    assert_eq!(there["spec"].as_object().expect("spec").len(), 12);
    assert_eq!(convert(&there, V1BETA1), Ok(original));
}

#[test]
fn typed_round_trip_is_the_identity() {
    let original: v1beta1::BGPPeer = serde_json::from_value(peer(
        V1BETA1,
        json!({"holdTime": "3s", "nodeSelectors": [{}, {"matchExpressions": [{"key": "k", "operator": "Exists", "values": []}]}]}),
    ))
    .expect("v1beta1");
    let back = v1beta1::BGPPeer::from(v1beta2::BGPPeer::from(original.clone()));
    assert_eq!(back, original);
}

#[test]
fn an_expression_without_values_reads_as_an_empty_list_in_v1beta1() {
    let new = peer(
        V1BETA2,
        json!({"nodeSelectors": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}),
    );
    let old = convert(&new, V1BETA1).expect("converts");
    assert_eq!(
        old["spec"]["nodeSelectors"],
        json!([{"matchExpressions": [{"key": "k", "operator": "Exists", "values": []}]}])
    );
}

#[test]
fn the_same_version_is_returned_as_it_came() {
    let odd = json!({"apiVersion": V1BETA2, "kind": "BGPPeer", "metadata": {"name": "p"},
                     "spec": {"myASN": 1, "unknownField": 1}});
    assert_eq!(convert(&odd, V1BETA2), Ok(odd));
}

#[test]
fn what_cannot_be_converted_names_the_object_and_the_problem() {
    let pool = json!({"apiVersion": V1BETA1, "kind": "IPAddressPool",
                      "metadata": {"name": "a", "namespace": "metallb-system"}});
    let alpha =
        json!({"apiVersion": "metallb.io/v1alpha1", "kind": "BGPPeer", "metadata": {"name": "a"}});
    let bad_asn = peer(V1BETA1, json!({"peerASN": "x"}));
    let bad_selector = peer(V1BETA2, json!({"nodeSelectors": [{"matchLabels": ["a"]}]}));
    let cases = [
        (
            &bad_asn,
            "metallb.io/v1",
            "desiredAPIVersion \"metallb.io/v1\" is not a BGPPeer version (metallb.io/v1beta1, metallb.io/v1beta2)",
        ),
        (
            &pool,
            V1BETA2,
            "ipaddresspool \"metallb-system/a\": kind \"IPAddressPool\" is not converted by MetalLB (only BGPPeer metallb.io/v1beta1, metallb.io/v1beta2)",
        ),
        (
            &alpha,
            V1BETA2,
            "bgppeer \"a\": apiVersion \"metallb.io/v1alpha1\" is not converted by MetalLB (only BGPPeer metallb.io/v1beta1, metallb.io/v1beta2)",
        ),
        (
            &bad_asn,
            V1BETA2,
            "bgppeer \"metallb-system/p\": not a valid metallb.io/v1beta1 BGPPeer: spec.peerASN: invalid type: string \"x\", expected u32",
        ),
        (
            &bad_selector,
            V1BETA1,
            "bgppeer \"metallb-system/p\": not a valid metallb.io/v1beta2 BGPPeer: spec.nodeSelectors[0].matchLabels: invalid type: sequence, expected a map",
        ),
    ];
    for (object, desired, message) in cases {
        assert_eq!(
            convert(object, desired).map_err(|e| e.to_string()),
            Err(message.to_owned())
        );
    }
}
