//! The ruleset per kind of Service and endpoint set: each row names the
//! lines the script must hold and those it must not.

use super::*;
use rstest::rstest;
use serde_json::{Value, json};

const NODE: &str = "n1";

fn node_ips() -> Vec<IpAddr> {
    vec![
        "172.30.0.10".parse().expect("ip"),
        "fc00::10".parse().expect("ip"),
    ]
}

/// Service `t/web`: ClusterIP 10.96.0.5, port `http` 80 -> 8080, with
/// `extra` merged into the whole object.
fn svc(extra: Value) -> Service {
    let mut base = json!({
        "metadata": { "name": "web", "namespace": "t" },
        "spec": { "type": "ClusterIP", "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"],
                  "ports": [{ "name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP" }] },
    });
    merge(&mut base, &extra);
    serde_json::from_value(base).expect("service")
}

fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p.clone(),
    }
}

fn lb(policy: &str) -> Service {
    svc(json!({
        "spec": { "type": "LoadBalancer", "externalTrafficPolicy": policy,
                  "ports": [{ "name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080 }] },
        "status": { "loadBalancer": { "ingress": [{ "ip": "192.0.2.1" }] } },
    }))
}

/// An endpoint on `node` at `ip`.
fn ep(node: &str, ip: &str, ready: bool) -> Value {
    json!({ "addresses": [ip], "nodeName": node, "conditions": { "ready": ready } })
}

fn slice_with(family: &str, ports: Value, endpoints: Vec<Value>) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": { "name": format!("web-{}", family.to_lowercase()), "namespace": "t",
                      "labels": { SERVICE_NAME_LABEL: "web" } },
        "addressType": family,
        "endpoints": endpoints,
        "ports": ports,
    }))
    .expect("slice")
}

fn slice(endpoints: Vec<Value>) -> EndpointSlice {
    slice_with(
        "IPv4",
        json!([{ "name": "http", "port": 8080, "protocol": "TCP" }]),
        endpoints,
    )
}

const EP_LOCAL: &str = "endpoint-t/web/tcp/http/v4/172.30.0.10";
const EP_OTHER: &str = "endpoint-t/web/tcp/http/v4/172.30.0.11";

#[rstest]
#[case::cluster_ip_port_to_target_port(
    svc(json!({})), vec![slice(vec![ep("n2", "172.30.0.11", true)])],
    &["ip daddr { 10.96.0.5 } tcp dport 80 goto cluster-t/web/tcp/http/v4",
      "meta l4proto tcp dnat ip to 172.30.0.11:8080"],
    &["tcp dport 8080 goto"])]
#[case::named_target_port_through_the_slice(
    svc(json!({ "spec": { "ports": [{ "name": "http", "port": 80, "targetPort": "web", "protocol": "TCP" }] } })),
    vec![slice_with("IPv4", json!([{ "name": "http", "port": 9090, "protocol": "TCP" }]),
                    vec![ep("n2", "172.30.0.11", true)])],
    &["dnat ip to 172.30.0.11:9090"], &[])]
#[case::random_spread_over_ready_endpoints(
    svc(json!({})),
    vec![slice(vec![ep("n1", "172.30.0.10", true), ep("n2", "172.30.0.11", true),
                    ep("n3", "172.30.0.12", false)])],
    &[&*format!("numgen random mod 2 vmap {{ 0 : goto {EP_LOCAL}, 1 : goto {EP_OTHER} }}")],
    &["172.30.0.12"])]
#[case::load_balancer_cluster_policy_masquerades(
    lb("Cluster"), vec![slice(vec![ep("n2", "172.30.0.11", true)])],
    &["ip daddr { 192.0.2.1 } tcp dport 80 goto external-t/web/tcp/http/v4",
      "chain external-t/web/tcp/http/v4 {\n\t\tmeta mark set meta mark | 0x4000\n\t\tgoto cluster-t/web/tcp/http/v4\n\t}",
      "meta mark & 0x4000 == 0x4000 masquerade"],
    &["fib saddr"])]
#[case::node_port_on_the_node_addresses(
    lb("Cluster"), vec![slice(vec![ep("n2", "172.30.0.11", true)])],
    &["ip daddr { 172.30.0.10 } tcp dport 30080 goto external-t/web/tcp/http/v4"],
    &["ip6 daddr { fc00::10 }"])]
#[case::local_policy_local_endpoints_only_no_masquerade(
    lb("Local"),
    vec![slice(vec![ep("n1", "172.30.0.10", true), ep("n2", "172.30.0.11", true)])],
    &[&*format!("chain external-t/web/tcp/http/v4 {{\n\t\tfib saddr type local meta mark set meta mark | 0x4000 goto cluster-t/web/tcp/http/v4\n\t\tnumgen random mod 1 vmap {{ 0 : goto {EP_LOCAL} }}\n\t}}")],
    &[])]
#[case::local_policy_without_local_endpoint_drops(
    lb("Local"), vec![slice(vec![ep("n2", "172.30.0.11", true)])],
    &["fib saddr type local meta mark set meta mark | 0x4000 goto cluster-t/web/tcp/http/v4\n\t\tdrop\n"],
    &[])]
#[case::no_endpoints_rejected(
    lb("Cluster"), vec![slice(vec![ep("n2", "172.30.0.11", false)])],
    &["ip daddr { 10.96.0.5 } tcp dport 80 reject",
      "ip daddr { 192.0.2.1 } tcp dport 80 reject",
      "ip daddr { 172.30.0.10 } tcp dport 30080 reject"],
    &["goto cluster-", "dnat ip"])]
#[case::udp(
    svc(json!({ "spec": { "ports": [{ "name": "dns", "port": 53, "targetPort": 8081, "protocol": "UDP" }] } })),
    vec![slice_with("IPv4", json!([{ "name": "dns", "port": 8081, "protocol": "UDP" }]),
                    vec![ep("n2", "172.30.0.11", true)])],
    &["ip daddr { 10.96.0.5 } udp dport 53 goto cluster-t/web/udp/dns/v4",
      "meta l4proto udp dnat ip to 172.30.0.11:8081"], &["tcp dport"])]
#[case::ipv6_endpoints_for_ipv6_addresses(
    svc(json!({ "spec": { "clusterIP": "fd00:10:96::5", "clusterIPs": ["fd00:10:96::5"] } })),
    vec![slice(vec![ep("n2", "172.30.0.11", true)]),
         slice_with("IPv6", json!([{ "name": "http", "port": 8080, "protocol": "TCP" }]),
                    vec![ep("n2", "fc00::11", true)])],
    &["ip6 daddr { fd00:10:96::5 } tcp dport 80 goto cluster-t/web/tcp/http/v6",
      "chain endpoint-t/web/tcp/http/v6/fc00__11 {\n\t\tmeta l4proto tcp dnat ip6 to [fc00::11]:8080"],
    &["172.30.0.11"])]
#[case::other_ports_of_service_ips_refused(
    lb("Cluster"), vec![slice(vec![ep("n2", "172.30.0.11", true)])],
    &["ct state new ip daddr { 10.96.0.5, 192.0.2.1 } meta l4proto { tcp, udp } reject"], &[])]
#[case::only_dnatted_traffic_forwarded(
    svc(json!({})), vec![],
    &["type filter hook forward priority -110; policy drop;\n\t\tct status dnat accept"], &[])]
#[case::headless_and_external_name_ignored(
    svc(json!({ "spec": { "clusterIP": "None", "clusterIPs": ["None"] } })),
    vec![slice(vec![ep("n2", "172.30.0.11", true)])],
    &[], &["dnat ip", "reject"])]
fn rules(
    #[case] service: Service,
    #[case] slices: Vec<EndpointSlice>,
    #[case] present: &[&str],
    #[case] absent: &[&str],
) {
    let text = ruleset(NODE, &node_ips(), &[service], &slices);
    assert!(
        text.starts_with(&format!(
            "table inet {TABLE}\ndelete table inet {TABLE}\ntable inet {TABLE} {{\n"
        )),
        "{text}"
    );
    for p in present {
        assert!(text.contains(p), "missing {p:?} in\n{text}");
    }
    for a in absent {
        assert!(!text.contains(a), "unexpected {a:?} in\n{text}");
    }
}

#[test]
fn same_input_same_text() {
    let services = [lb("Cluster"), lb("Local")];
    let slices = [slice(vec![ep("n2", "172.30.0.11", true)])];
    assert_eq!(
        ruleset(NODE, &node_ips(), &services, &slices),
        ruleset(NODE, &node_ips(), &services, &slices)
    );
}
