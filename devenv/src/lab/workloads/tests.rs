//! Table tests of [`plan::plan`]: each row lists fresh objects and
//! expects one line per write.

use super::plan::{self, Action, HASH_LABEL, REVISION};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use rstest::rstest;
use serde_json::{Value, json};

const NOW: &str = "2026-01-01T00:10:00Z";

fn template(image: &str) -> Value {
    json!({ "metadata": { "labels": { "app": "web" } },
            "spec": { "containers": [{ "name": "web", "image": image }] } })
}

fn hash(image: &str) -> String {
    plan::template_hash(&serde_json::from_value(template(image)).expect("template"))
}

/// Deployment `web` (uid `d`) running `image`.
fn deploy(replicas: i32, image: &str) -> Value {
    json!({
        "metadata": { "name": "web", "namespace": "default", "uid": "d", "generation": 1 },
        "spec": { "replicas": replicas, "selector": { "matchLabels": { "app": "web" } },
                  "template": template(image) },
    })
}

/// ReplicaSet of `web` for `image` at `revision`, wanting `replicas`.
fn rs(image: &str, revision: i64, replicas: i32) -> Value {
    let h = hash(image);
    json!({
        "metadata": { "name": format!("web-{h}"), "namespace": "default", "uid": format!("rs-{image}"),
                      "creationTimestamp": format!("2026-01-01T00:0{revision}:00Z"),
                      "labels": { "app": "web", HASH_LABEL: h },
                      "annotations": { REVISION: revision.to_string() },
                      "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                            "uid": "d", "controller": true }] },
        "spec": { "replicas": replicas, "selector": { "matchLabels": { "app": "web", HASH_LABEL: h } },
                  "template": template(image) },
    })
}

/// A Pod of the ReplicaSet for `image`, on a node when `node` is not
/// empty, Ready when `ready`.
fn pod(image: &str, name: &str, node: &str, ready: bool, at: u32) -> Value {
    let mut p = json!({
        "metadata": { "name": name, "namespace": "default",
                      "creationTimestamp": format!("2026-01-01T00:00:{at:02}Z"),
                      "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet",
                                            "name": "x", "uid": format!("rs-{image}"), "controller": true }] },
        "spec": { "containers": [{ "name": "web", "image": image }] },
        "status": { "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] },
    });
    if !node.is_empty() {
        p["spec"]["nodeName"] = json!(node);
    }
    p
}

fn set(mut v: Value, path: &[&str], value: Value) -> Value {
    let mut at = &mut v;
    for key in path {
        at = &mut at[*key];
    }
    *at = value;
    v
}

fn show(a: &Action) -> String {
    let short = |name: &str| {
        name.replace(&hash("nginx:1"), "H1")
            .replace(&hash("nginx:2"), "H2")
    };
    match a {
        Action::CreatePod(p) => format!(
            "create pod {}* labels {:?}",
            short(p.metadata.generate_name.as_deref().unwrap_or_default()),
            p.metadata.labels.clone().unwrap_or_default()
        ),
        Action::DeletePod { name, .. } => format!("delete pod {name}"),
        Action::CreateReplicaSet(rs) => format!(
            "create rs {} replicas {} revision {}",
            short(rs.metadata.name.as_deref().unwrap_or_default()),
            rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1),
            rs.metadata
                .annotations
                .as_ref()
                .map(|a| a[REVISION].clone())
                .unwrap_or_default()
        ),
        Action::ScaleReplicaSet { name, from, to, .. } => {
            format!("scale rs {} {from} -> {to}", short(name))
        }
        Action::DeleteReplicaSet { name, .. } => format!("delete rs {}", short(name)),
        Action::ReplicaSetStatus { name, status, .. } => format!(
            "status rs {}: {} pods, {} ready",
            short(name),
            status.replicas,
            status.ready_replicas.unwrap_or(0)
        ),
        Action::DeploymentRevision { revision, .. } => format!("revision {revision}"),
        Action::DaemonSetStatus { name, .. } => format!("status ds {name}"),
        Action::StatefulSetStatus { name, .. } => format!("status sts {name}"),
        Action::JobStatus { name, .. } => format!("status job {name}"),
        Action::DeploymentStatus { status, .. } => {
            let conditions: Vec<String> = status
                .conditions
                .iter()
                .flatten()
                .map(|c| {
                    format!(
                        "{}={}/{}",
                        c.type_,
                        c.status,
                        c.reason.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            format!(
                "status deploy: replicas {} updated {} ready {} available {} unavailable {} {}",
                status.replicas.unwrap_or(0),
                status.updated_replicas.unwrap_or(0),
                status.ready_replicas.unwrap_or(0),
                status.available_replicas.unwrap_or(0),
                status.unavailable_replicas.unwrap_or(0),
                conditions.join(" ")
            )
        }
    }
}

fn check(deployments: Vec<Value>, replicasets: Vec<Value>, pods: Vec<Value>, expected: &[&str]) {
    let ds: Vec<Deployment> = deployments
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("deployment"))
        .collect();
    let rss: Vec<ReplicaSet> = replicasets
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("replicaset"))
        .collect();
    let ps: Vec<Pod> = pods
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("pod"))
        .collect();
    let got: Vec<String> = plan::plan(&ds, &rss, &ps, NOW.parse().expect("now"))
        .iter()
        .map(show)
        .collect();
    assert_eq!(got, expected);
}

#[rstest]
#[case::new_deployment_gets_a_replicaset(
    vec![deploy(2, "nginx:1")], vec![], vec![],
    &["create rs web-H1 replicas 2 revision 1", "revision 1",
      "status deploy: replicas 0 updated 0 ready 0 available 0 unavailable 2 Available=False/MinimumReplicasUnavailable Progressing=True/NewReplicaSetCreated"])]
#[case::replicaset_creates_its_pods(
    vec![], vec![rs("nginx:1", 1, 2)], vec![],
    &["create pod web-H1-* labels {\"app\": \"web\"}", "create pod web-H1-* labels {\"app\": \"web\"}",
      "status rs web-H1: 0 pods, 0 ready"])]
#[case::scale_down_takes_unscheduled_then_unready_then_newest(
    vec![], vec![rs("nginx:1", 1, 1)],
    vec![pod("nginx:1", "old", "n1", true, 1), pod("nginx:1", "new", "n2", true, 5),
         pod("nginx:1", "unready", "n3", false, 2), pod("nginx:1", "pending", "", false, 0)],
    &["delete pod pending", "delete pod unready", "delete pod new", "status rs web-H1: 4 pods, 2 ready"])]
#[case::terminating_pods_do_not_count(
    vec![], vec![rs("nginx:1", 1, 1)],
    vec![set(pod("nginx:1", "going", "n1", true, 1), &["metadata", "deletionTimestamp"], json!(NOW))],
    &["create pod web-H1-* labels {\"app\": \"web\"}", "status rs web-H1: 0 pods, 0 ready"])]
#[case::scale_up(
    vec![deploy(3, "nginx:1")], vec![rs("nginx:1", 1, 2)],
    vec![pod("nginx:1", "a", "n1", true, 1), pod("nginx:1", "b", "n2", true, 2)],
    &["scale rs web-H1 2 -> 3", "revision 1",
      "status deploy: replicas 2 updated 2 ready 2 available 2 unavailable 1 Available=False/MinimumReplicasUnavailable Progressing=True/ReplicaSetUpdated",
      "create pod web-H1-* labels {\"app\": \"web\"}", "status rs web-H1: 2 pods, 2 ready"])]
#[case::rollout_starts_with_one_surge_pod(
    vec![deploy(2, "nginx:2")], vec![rs("nginx:1", 1, 2)],
    vec![pod("nginx:1", "a", "n1", true, 1), pod("nginx:1", "b", "n2", true, 2)],
    &["create rs web-H2 replicas 1 revision 2", "revision 2",
      "status deploy: replicas 2 updated 0 ready 2 available 2 unavailable 1 Available=True/MinimumReplicasAvailable Progressing=True/NewReplicaSetCreated",
      "status rs web-H1: 2 pods, 2 ready"])]
#[case::old_scaled_down_once_the_new_pod_is_ready(
    vec![deploy(2, "nginx:2")], vec![rs("nginx:1", 1, 2), rs("nginx:2", 2, 1)],
    vec![pod("nginx:1", "a", "n1", true, 1), pod("nginx:1", "b", "n2", true, 2), pod("nginx:2", "c", "n3", true, 3)],
    &["scale rs web-H1 2 -> 1", "revision 2",
      "status deploy: replicas 3 updated 1 ready 3 available 3 unavailable 0 Available=True/MinimumReplicasAvailable Progressing=True/ReplicaSetUpdated",
      "delete pod b", "status rs web-H1: 2 pods, 2 ready", "status rs web-H2: 1 pods, 1 ready"])]
#[case::old_kept_while_the_new_pod_is_not_ready(
    vec![deploy(2, "nginx:2")], vec![rs("nginx:1", 1, 2), rs("nginx:2", 2, 1)],
    vec![pod("nginx:1", "a", "n1", true, 1), pod("nginx:1", "b", "n2", true, 2), pod("nginx:2", "c", "n3", false, 3)],
    &["revision 2",
      "status deploy: replicas 3 updated 1 ready 2 available 2 unavailable 1 Available=True/MinimumReplicasAvailable Progressing=True/ReplicaSetUpdated",
      "status rs web-H1: 2 pods, 2 ready", "status rs web-H2: 1 pods, 0 ready"])]
#[case::rollout_complete(
    vec![set(deploy(2, "nginx:2"), &["metadata", "annotations"], json!({ REVISION: "2" }))],
    vec![rs("nginx:1", 1, 0), rs("nginx:2", 2, 2)],
    vec![pod("nginx:2", "c", "n1", true, 3), pod("nginx:2", "d", "n2", true, 4)],
    &["status deploy: replicas 2 updated 2 ready 2 available 2 unavailable 0 Available=True/MinimumReplicasAvailable Progressing=True/NewReplicaSetAvailable",
      "status rs web-H1: 0 pods, 0 ready", "status rs web-H2: 2 pods, 2 ready"])]
#[case::recreate_waits_for_old_pods(
    vec![set(deploy(2, "nginx:2"), &["spec", "strategy"], json!({ "type": "Recreate" }))],
    vec![rs("nginx:1", 1, 2)],
    vec![pod("nginx:1", "a", "n1", true, 1)],
    &["create rs web-H2 replicas 0 revision 2", "scale rs web-H1 2 -> 0", "revision 2",
      "status deploy: replicas 1 updated 0 ready 1 available 1 unavailable 0 Available=False/MinimumReplicasUnavailable Progressing=True/NewReplicaSetCreated",
      "delete pod a", "status rs web-H1: 1 pods, 1 ready"])]
#[case::history_limit(
    vec![set(set(deploy(1, "nginx:2"), &["spec", "revisionHistoryLimit"], json!(0)),
             &["metadata", "annotations"], json!({ REVISION: "2" }))],
    vec![rs("nginx:1", 1, 0), rs("nginx:2", 2, 1)],
    vec![pod("nginx:2", "c", "n1", true, 3)],
    &["delete rs web-H1",
      "status deploy: replicas 1 updated 1 ready 1 available 1 unavailable 0 Available=True/MinimumReplicasAvailable Progressing=True/NewReplicaSetAvailable",
      "status rs web-H1: 0 pods, 0 ready", "status rs web-H2: 1 pods, 1 ready"])]
fn workloads(
    #[case] deployments: Vec<Value>,
    #[case] replicasets: Vec<Value>,
    #[case] pods: Vec<Value>,
    #[case] expected: &[&str],
) {
    check(deployments, replicasets, pods, expected);
}

#[test]
fn the_template_hash_follows_the_template() {
    assert_eq!(hash("nginx:1"), hash("nginx:1"));
    assert_ne!(hash("nginx:1"), hash("nginx:2"));
    assert!(
        hash("nginx:1")
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
    );
}

#[test]
fn a_second_round_on_written_status_writes_nothing() {
    let d: Deployment = serde_json::from_value(deploy(1, "nginx:1")).expect("d");
    let r: ReplicaSet = serde_json::from_value(rs("nginx:1", 1, 1)).expect("rs");
    let p: Pod = serde_json::from_value(pod("nginx:1", "a", "n1", true, 1)).expect("pod");
    let now = NOW.parse().expect("now");
    let (mut d, mut r) = (d, r);
    for action in plan::plan(&[d.clone()], &[r.clone()], std::slice::from_ref(&p), now) {
        match action {
            Action::DeploymentStatus { status, .. } => d.status = Some(status),
            Action::ReplicaSetStatus { status, .. } => r.status = Some(status),
            Action::DeploymentRevision { revision, .. } => {
                d.metadata.annotations = Some([(REVISION.to_owned(), revision.to_string())].into());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let later = "2026-01-01T00:20:00Z".parse().expect("later");
    assert_eq!(plan::plan(&[d], &[r], &[p], later), []);
}

mod daemonsets {
    //! Table tests of [`crate::lab::workloads::daemonset::plan`].

    use super::*;
    use crate::lab::workloads::daemonset::{self, HASH_LABEL as DS_HASH};
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::core::v1::Node;

    fn ds(image: &str, strategy: Value) -> Value {
        json!({
            "metadata": { "name": "agent", "namespace": "default", "uid": "ds", "generation": 1 },
            "spec": { "selector": { "matchLabels": { "app": "web" } }, "template": template(image),
                      "updateStrategy": strategy },
        })
    }

    fn node(name: &str) -> Value {
        json!({ "metadata": { "name": name },
                "status": { "conditions": [{ "type": "Ready", "status": "True" }] } })
    }

    /// A daemon Pod for `image` on `node`.
    fn dpod(image: &str, name: &str, node: &str, ready: bool) -> Value {
        json!({
            "metadata": { "name": name, "namespace": "default",
                          "labels": { "app": "web", DS_HASH: hash(image) },
                          "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "DaemonSet",
                                                "name": "agent", "uid": "ds", "controller": true }] },
            "spec": { "nodeName": node, "containers": [{ "name": "web", "image": image }] },
            "status": { "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] },
        })
    }

    fn show(a: &Action) -> String {
        match a {
            Action::CreatePod(p) => format!(
                "create pod on {} tolerating {}",
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                p.spec
                    .as_ref()
                    .and_then(|s| s.tolerations.as_ref())
                    .map_or(0, Vec::len)
            ),
            Action::DeletePod { name, .. } => format!("delete pod {name}"),
            Action::DaemonSetStatus { status, .. } => format!(
                "status: desired {} current {} ready {} updated {} misscheduled {}",
                status.desired_number_scheduled,
                status.current_number_scheduled,
                status.number_ready,
                status.updated_number_scheduled.unwrap_or(0),
                status.number_misscheduled
            ),
            other => format!("{other:?}"),
        }
    }

    fn check(d: Value, nodes: Vec<Value>, pods: Vec<Value>, expected: &[&str]) {
        let d: DaemonSet = serde_json::from_value(d).expect("daemonset");
        let nodes: Vec<Node> = nodes
            .into_iter()
            .map(|n| serde_json::from_value(n).expect("node"))
            .collect();
        let pods: Vec<Pod> = pods
            .into_iter()
            .map(|p| serde_json::from_value(p).expect("pod"))
            .collect();
        let mut out = Vec::new();
        daemonset::plan(&d, &nodes, &pods, &mut out);
        let got: Vec<String> = out.iter().map(show).collect();
        assert_eq!(got, expected);
    }

    #[rstest]
    #[case::one_pod_per_node(
        ds("nginx:1", json!({})), vec![node("a"), node("b")], vec![dpod("nginx:1", "x", "a", true)],
        &["create pod on b tolerating 6", "status: desired 2 current 1 ready 1 updated 1 misscheduled 0"])]
    #[case::tainted_and_unselected_nodes_are_skipped(
        set(ds("nginx:1", json!({})), &["spec", "template", "spec", "nodeSelector"], json!({ "role": "edge" })),
        vec![set(node("a"), &["metadata", "labels"], json!({ "role": "edge" })),
             set(set(node("b"), &["metadata", "labels"], json!({ "role": "edge" })),
                 &["spec", "taints"], json!([{ "key": "dedicated", "effect": "NoSchedule" }])),
             node("c")],
        vec![dpod("nginx:1", "x", "c", true)],
        &["delete pod x", "create pod on a tolerating 6",
          "status: desired 1 current 0 ready 0 updated 0 misscheduled 1"])]
    #[case::not_ready_nodes_get_no_new_pod(
        ds("nginx:1", json!({})),
        vec![set(node("a"), &["status", "conditions"], json!([{ "type": "Ready", "status": "Unknown" }]))],
        vec![],
        &["status: desired 0 current 0 ready 0 updated 0 misscheduled 0"])]
    #[case::a_pod_stays_on_a_node_that_went_not_ready(
        ds("nginx:1", json!({})),
        vec![set(node("a"), &["status", "conditions"], json!([{ "type": "Ready", "status": "Unknown" }]))],
        vec![dpod("nginx:1", "x", "a", true)],
        &["status: desired 1 current 1 ready 1 updated 1 misscheduled 0"])]
    #[case::rolling_update_one_node_at_a_time(
        ds("nginx:2", json!({})), vec![node("a"), node("b")],
        vec![dpod("nginx:1", "x", "a", true), dpod("nginx:1", "y", "b", true)],
        &["delete pod x", "status: desired 2 current 2 ready 2 updated 0 misscheduled 0"])]
    #[case::rolling_update_waits_for_the_new_pod(
        ds("nginx:2", json!({})), vec![node("a"), node("b")],
        vec![dpod("nginx:2", "x2", "a", false), dpod("nginx:1", "y", "b", true)],
        &["status: desired 2 current 2 ready 1 updated 1 misscheduled 0"])]
    #[case::on_delete_leaves_old_pods(
        ds("nginx:2", json!({ "type": "OnDelete" })), vec![node("a")],
        vec![dpod("nginx:1", "x", "a", true)],
        &["status: desired 1 current 1 ready 1 updated 0 misscheduled 0"])]
    fn daemonset_plan(
        #[case] d: Value,
        #[case] nodes: Vec<Value>,
        #[case] pods: Vec<Value>,
        #[case] expected: &[&str],
    ) {
        check(d, nodes, pods, expected);
    }
}

mod statefulsets {
    //! Table tests of [`crate::lab::workloads::statefulset::plan`].

    use super::*;
    use crate::lab::workloads::daemonset::HASH_LABEL as REV;
    use crate::lab::workloads::statefulset;
    use k8s_openapi::api::apps::v1::StatefulSet;

    fn sts(replicas: i32, image: &str, extra: Value) -> Value {
        let mut v = json!({
            "metadata": { "name": "db", "namespace": "default", "uid": "sts", "generation": 2 },
            "spec": { "replicas": replicas, "serviceName": "db",
                      "selector": { "matchLabels": { "app": "web" } }, "template": template(image) },
        });
        if let (Some(spec), Some(extra)) = (v["spec"].as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        v
    }

    /// Pod `db-<ordinal>` at the revision of `image`.
    fn spod(ordinal: u32, image: &str, ready: bool) -> Value {
        json!({
            "metadata": { "name": format!("db-{ordinal}"), "namespace": "default",
                          "labels": { "app": "web", REV: format!("db-{}", hash(image)) },
                          "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "StatefulSet",
                                                "name": "db", "uid": "sts", "controller": true }] },
            "spec": { "nodeName": "n1", "containers": [{ "name": "web", "image": image }] },
            "status": { "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] },
        })
    }

    fn show(a: &Action) -> String {
        let short = |s: &str| {
            s.replace(&hash("nginx:1"), "H1")
                .replace(&hash("nginx:2"), "H2")
        };
        match a {
            Action::CreatePod(p) => {
                let labels = p.metadata.labels.clone().unwrap_or_default();
                let spec = p.spec.clone().unwrap_or_default();
                format!(
                    "create pod {} rev {} hostname {} subdomain {}",
                    p.metadata.name.as_deref().unwrap_or_default(),
                    short(&labels[REV]),
                    spec.hostname.unwrap_or_default(),
                    spec.subdomain.unwrap_or_default()
                )
            }
            Action::DeletePod { name, .. } => format!("delete pod {name}"),
            Action::StatefulSetStatus { status, .. } => format!(
                "status: replicas {} ready {} current {} updated {} revisions {} -> {} generation {}",
                status.replicas,
                status.ready_replicas.unwrap_or(0),
                status.current_replicas.unwrap_or(0),
                status.updated_replicas.unwrap_or(0),
                short(status.current_revision.as_deref().unwrap_or_default()),
                short(status.update_revision.as_deref().unwrap_or_default()),
                status.observed_generation.unwrap_or(0)
            ),
            other => format!("{other:?}"),
        }
    }

    fn check(s: Value, pods: Vec<Value>, expected: &[&str]) {
        let s: StatefulSet = serde_json::from_value(s).expect("statefulset");
        let pods: Vec<Pod> = pods
            .into_iter()
            .map(|p| serde_json::from_value(p).expect("pod"))
            .collect();
        let mut out = Vec::new();
        statefulset::plan(&s, &pods, &mut out);
        let got: Vec<String> = out.iter().map(show).collect();
        assert_eq!(got, expected);
    }

    #[rstest]
    #[case::the_first_pod_first(
        sts(3, "nginx:1", json!({})), vec![],
        &["create pod db-0 rev db-H1 hostname db-0 subdomain db",
          "status: replicas 0 ready 0 current 0 updated 0 revisions db-H1 -> db-H1 generation 2"])]
    #[case::the_next_once_the_one_before_is_ready(
        sts(3, "nginx:1", json!({})), vec![spod(0, "nginx:1", true), spod(1, "nginx:1", false)],
        &["status: replicas 2 ready 1 current 2 updated 2 revisions db-H1 -> db-H1 generation 2"])]
    #[case::parallel_creates_all(
        sts(3, "nginx:1", json!({ "podManagementPolicy": "Parallel" })), vec![spod(1, "nginx:1", false)],
        &["create pod db-0 rev db-H1 hostname db-0 subdomain db",
          "create pod db-2 rev db-H1 hostname db-2 subdomain db",
          "status: replicas 1 ready 0 current 1 updated 1 revisions db-H1 -> db-H1 generation 2"])]
    #[case::scale_down_from_the_highest(
        sts(1, "nginx:1", json!({})),
        vec![spod(0, "nginx:1", true), spod(1, "nginx:1", true), spod(2, "nginx:1", true)],
        &["delete pod db-2",
          "status: replicas 3 ready 3 current 3 updated 3 revisions db-H1 -> db-H1 generation 2"])]
    #[case::rolling_update_from_the_highest(
        set(sts(2, "nginx:2", json!({})), &["status"], json!({ "currentRevision": format!("db-{}", hash("nginx:1")) })),
        vec![spod(0, "nginx:1", true), spod(1, "nginx:1", true)],
        &["delete pod db-1",
          "status: replicas 2 ready 2 current 2 updated 0 revisions db-H1 -> db-H2 generation 2"])]
    #[case::rolling_update_waits_for_ready(
        set(sts(2, "nginx:2", json!({})), &["status"], json!({ "currentRevision": format!("db-{}", hash("nginx:1")) })),
        vec![spod(0, "nginx:1", true), spod(1, "nginx:2", false)],
        &["status: replicas 2 ready 1 current 1 updated 1 revisions db-H1 -> db-H2 generation 2"])]
    #[case::partition_keeps_lower_ordinals(
        set(sts(2, "nginx:2", json!({ "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": { "partition": 1 } } })),
            &["status"], json!({ "currentRevision": format!("db-{}", hash("nginx:1")) })),
        vec![spod(0, "nginx:1", true), spod(1, "nginx:2", true)],
        &["status: replicas 2 ready 2 current 1 updated 1 revisions db-H1 -> db-H2 generation 2"])]
    #[case::rollout_done(
        set(sts(2, "nginx:2", json!({})), &["status"], json!({ "currentRevision": format!("db-{}", hash("nginx:1")) })),
        vec![spod(0, "nginx:2", true), spod(1, "nginx:2", true)],
        &["status: replicas 2 ready 2 current 2 updated 2 revisions db-H2 -> db-H2 generation 2"])]
    fn statefulset_plan(#[case] s: Value, #[case] pods: Vec<Value>, #[case] expected: &[&str]) {
        check(s, pods, expected);
    }
}

mod jobs {
    //! Table tests of [`crate::lab::workloads::job::plan`].

    use super::*;
    use crate::lab::workloads::job;
    use k8s_openapi::api::batch::v1::Job;

    fn job(completions: i32, parallelism: i32) -> Value {
        json!({
            "metadata": { "name": "pi", "namespace": "default", "uid": "job" },
            "spec": { "completions": completions, "parallelism": parallelism, "backoffLimit": 1,
                      "template": template("busybox") },
        })
    }

    fn jpod(name: &str, phase: &str) -> Value {
        json!({
            "metadata": { "name": name, "namespace": "default",
                          "ownerReferences": [{ "apiVersion": "batch/v1", "kind": "Job",
                                                "name": "pi", "uid": "job", "controller": true }] },
            "spec": { "containers": [{ "name": "web", "image": "busybox" }] },
            "status": { "phase": phase },
        })
    }

    fn show(a: &Action) -> String {
        match a {
            Action::CreatePod(p) => format!(
                "create pod {}* job-name {}",
                p.metadata.generate_name.as_deref().unwrap_or_default(),
                p.metadata.labels.clone().unwrap_or_default()["job-name"]
            ),
            Action::JobStatus { status, .. } => {
                let conditions: Vec<String> = status
                    .conditions
                    .iter()
                    .flatten()
                    .map(|c| format!("{}={}", c.type_, c.status))
                    .collect();
                format!(
                    "status: active {} succeeded {} failed {} completed {} [{}]",
                    status.active.unwrap_or(0),
                    status.succeeded.unwrap_or(0),
                    status.failed.unwrap_or(0),
                    status.completion_time.is_some(),
                    conditions.join(" ")
                )
            }
            other => format!("{other:?}"),
        }
    }

    fn check(j: Value, pods: Vec<Value>, expected: &[&str]) {
        let j: Job = serde_json::from_value(j).expect("job");
        let pods: Vec<Pod> = pods
            .into_iter()
            .map(|p| serde_json::from_value(p).expect("pod"))
            .collect();
        let mut out = Vec::new();
        job::plan(&j, &pods, NOW.parse().expect("now"), &mut out);
        let got: Vec<String> = out.iter().map(show).collect();
        assert_eq!(got, expected);
    }

    #[rstest]
    #[case::a_new_job_gets_a_pod(
        job(1, 1), vec![],
        &["create pod pi-* job-name pi", "status: active 0 succeeded 0 failed 0 completed false []"])]
    #[case::parallelism_bounds_the_active(
        job(3, 2), vec![jpod("a", "Running")],
        &["create pod pi-* job-name pi", "status: active 1 succeeded 0 failed 0 completed false []"])]
    #[case::no_more_than_the_completions_left(
        job(3, 3), vec![jpod("a", "Succeeded"), jpod("b", "Succeeded")],
        &["create pod pi-* job-name pi", "status: active 0 succeeded 2 failed 0 completed false []"])]
    #[case::complete_once_enough_succeeded(
        job(2, 1), vec![jpod("a", "Succeeded"), jpod("b", "Succeeded")],
        &["status: active 0 succeeded 2 failed 0 completed true [SuccessCriteriaMet=True Complete=True]"])]
    #[case::failed_past_the_backoff_limit(
        job(1, 1), vec![jpod("a", "Failed"), jpod("b", "Failed")],
        &["status: active 0 succeeded 0 failed 2 completed false [FailureTarget=True Failed=True]"])]
    #[case::a_failed_pod_is_replaced_within_the_limit(
        job(1, 1), vec![jpod("a", "Failed")],
        &["create pod pi-* job-name pi", "status: active 0 succeeded 0 failed 1 completed false []"])]
    fn job_plan(#[case] j: Value, #[case] pods: Vec<Value>, #[case] expected: &[&str]) {
        check(j, pods, expected);
    }

    #[test]
    fn a_complete_job_writes_nothing_more() {
        let j: Job = serde_json::from_value(job(1, 1)).expect("job");
        let pods: Vec<Pod> = vec![serde_json::from_value(jpod("a", "Succeeded")).expect("pod")];
        let mut out = Vec::new();
        job::plan(&j, &pods, NOW.parse().expect("now"), &mut out);
        let Some(Action::JobStatus { status, .. }) = out.pop() else {
            panic!("a status write expected");
        };
        let mut j = j;
        j.status = Some(status);
        let mut again = Vec::new();
        job::plan(
            &j,
            &pods,
            "2026-01-01T01:00:00Z".parse().expect("later"),
            &mut again,
        );
        assert_eq!(again, []);
    }
}
