//! Table tests of [`plan`]: each row builds fresh nodes and Pods and
//! expects one line per decision.

use super::*;
use rstest::rstest;
use serde_json::{Value, json};

fn node(name: &str) -> Value {
    json!({
        "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
        "spec": {},
        "status": { "conditions": [{ "type": "Ready", "status": "True" }] },
    })
}

fn tainted(mut n: Value, key: &str, effect: &str) -> Value {
    n["spec"]["taints"] = json!([{ "key": key, "effect": effect }]);
    n
}

fn labelled(mut n: Value, key: &str, value: &str) -> Value {
    n["metadata"]["labels"][key] = json!(value);
    n
}

fn not_ready(mut n: Value) -> Value {
    n["status"]["conditions"][0]["status"] = json!("Unknown");
    n
}

fn cordoned(mut n: Value) -> Value {
    n["spec"]["unschedulable"] = json!(true);
    n
}

/// A Pod owned by `owner`, created at second `at`, without a node.
fn pod(name: &str, owner: &str, at: u32) -> Value {
    json!({
        "metadata": { "name": name, "namespace": "default", "resourceVersion": "1",
                      "creationTimestamp": format!("2026-01-01T00:00:{at:02}Z"),
                      "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet",
                                            "name": owner, "uid": owner, "controller": true }] },
        "spec": { "containers": [{ "name": "c", "image": "nginx" }] },
    })
}

fn on(mut p: Value, node: &str) -> Value {
    p["spec"]["nodeName"] = json!(node);
    p
}

fn host_port(mut p: Value, number: u16) -> Value {
    p["spec"]["containers"][0]["ports"] = json!([{ "containerPort": 80, "hostPort": number }]);
    p
}

fn with(mut p: Value, field: &str, value: Value) -> Value {
    p["spec"][field] = value;
    p
}

fn show(d: &Decision) -> String {
    match d {
        Decision::Bind { pod, node } => format!("{} -> {node}", pod.name),
        Decision::Unschedulable { pod, message } => format!("{}: {message}", pod.name),
    }
}

fn check(nodes: Vec<Value>, pods: Vec<Value>, expected: &[&str]) {
    let nodes: Vec<Node> = nodes
        .into_iter()
        .map(|n| serde_json::from_value(n).expect("node"))
        .collect();
    let pods: Vec<Pod> = pods
        .into_iter()
        .map(|p| serde_json::from_value(p).expect("pod"))
        .collect();
    let got: Vec<String> = plan(&pods, &nodes).iter().map(show).collect();
    assert_eq!(got, expected);
}

#[rstest]
#[case::replicas_spread_over_nodes(
    vec![node("a"), node("b"), node("c")],
    vec![pod("w1", "rs", 1), pod("w2", "rs", 2)],
    &["w1 -> a", "w2 -> b"])]
#[case::same_owner_counts_before_total(
    vec![node("a"), node("b")],
    vec![on(pod("x1", "other", 0), "b"), on(pod("x2", "other", 0), "b"),
         on(pod("w0", "rs", 0), "a"), pod("w1", "rs", 1)],
    &["w1 -> b"])]
#[case::fewest_pods_when_owners_tie(
    vec![node("a"), node("b")],
    vec![on(pod("x1", "other", 0), "a"), pod("w1", "rs", 1)],
    &["w1 -> b"])]
#[case::bound_and_terminating_pods_are_left_alone(
    vec![node("a")],
    vec![on(pod("w1", "rs", 1), "a"),
         { let mut p = pod("w2", "rs", 2); p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:01:00Z"); p }],
    &[])]
#[case::other_schedulers_pods_are_left_alone(
    vec![node("a")],
    vec![with(pod("w1", "rs", 1), "schedulerName", json!("my-scheduler"))],
    &[])]
#[case::taints_need_tolerations(
    vec![tainted(node("cp"), "node-role.kubernetes.io/control-plane", "NoSchedule"), node("a")],
    vec![pod("w1", "rs", 1)],
    &["w1 -> a"])]
#[case::prefer_no_schedule_is_no_filter(
    vec![tainted(node("a"), "soft", "PreferNoSchedule")],
    vec![pod("w1", "rs", 1)],
    &["w1 -> a"])]
#[case::tolerated_taint(
    vec![tainted(node("cp"), "node-role.kubernetes.io/control-plane", "NoSchedule")],
    vec![with(pod("w1", "rs", 1), "tolerations",
              json!([{ "key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule" }]))],
    &["w1 -> cp"])]
#[case::tolerate_everything(
    vec![tainted(node("a"), "x", "NoExecute")],
    vec![with(pod("w1", "rs", 1), "tolerations", json!([{ "operator": "Exists" }]))],
    &["w1 -> a"])]
#[case::not_ready_and_cordoned_nodes(
    vec![not_ready(node("a")), cordoned(node("b")), node("c")],
    vec![pod("w1", "rs", 1)],
    &["w1 -> c"])]
#[case::node_selector(
    vec![node("a"), labelled(node("b"), "disk", "ssd")],
    vec![with(pod("w1", "rs", 1), "nodeSelector", json!({ "disk": "ssd" }))],
    &["w1 -> b"])]
#[case::required_node_affinity(
    vec![labelled(node("a"), "zone", "z1"), labelled(node("b"), "zone", "z2"), node("c")],
    vec![with(pod("w1", "rs", 1), "affinity", json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ "matchExpressions": [{ "key": "zone", "operator": "NotIn", "values": ["z1"] },
                                                     { "key": "zone", "operator": "Exists" }] }] } } }))],
    &["w1 -> b"])]
#[case::affinity_match_fields(
    vec![node("a"), node("b")],
    vec![with(pod("w1", "rs", 1), "affinity", json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ "matchFields": [{ "key": "metadata.name", "operator": "In", "values": ["b"] }] }] } } }))],
    &["w1 -> b"])]
#[case::container_ports_are_shared(
    vec![node("a"), node("b")],
    vec![pod("w1", "rs", 1), pod("w2", "rs", 2), pod("w3", "rs", 3)],
    &["w1 -> a", "w2 -> b", "w3 -> a"])]
#[case::host_ports_are_not(
    vec![node("a"), node("b")],
    vec![host_port(pod("w1", "rs", 1), 80), host_port(pod("w2", "rs", 2), 80),
         host_port(pod("w3", "rs", 3), 80), host_port(pod("w4", "rs", 4), 81)],
    &["w1 -> a", "w2 -> b",
      "w3: 0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports.",
      "w4 -> a"])]
#[case::reasons_counted_and_sorted(
    vec![tainted(node("cp"), "node-role.kubernetes.io/control-plane", "NoSchedule"),
         node("a"), node("b"), cordoned(node("c"))],
    vec![with(pod("w1", "rs", 1), "nodeSelector", json!({ "disk": "ssd" }))],
    &["w1: 0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't match Pod's node affinity/selector."])]
#[case::untolerated_taint_named(
    vec![tainted(node("cp"), "node-role.kubernetes.io/control-plane", "NoSchedule"), not_ready(node("a"))],
    vec![pod("w1", "rs", 1)],
    &["w1: 0/2 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }."])]
#[case::no_nodes(vec![], vec![pod("w1", "rs", 1)], &["w1: 0/0 nodes are available."])]
#[case::reported_once(
    vec![cordoned(node("a"))],
    vec![{ let mut p = pod("w1", "rs", 1);
           p["status"] = json!({ "conditions": [{ "type": "PodScheduled", "status": "False",
               "message": "0/1 nodes are available: 1 node(s) were unschedulable." }] }); p }],
    &[])]
#[case::oldest_first(
    vec![node("a")],
    vec![host_port(pod("late", "rs", 5), 80), host_port(pod("early", "rs", 1), 80)],
    &["early -> a",
      "late: 0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."])]
fn scheduling(#[case] nodes: Vec<Value>, #[case] pods: Vec<Value>, #[case] expected: &[&str]) {
    check(nodes, pods, expected);
}
