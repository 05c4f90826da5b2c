//! Deployments as a user drives them with the real kubectl (`create
//! deployment`, `get deploy`, `scale`, `set image`, `rollout restart`,
//! `rollout status`, `delete`), against the server with the lab's
//! scheduler and workload controllers (from `devenv`) running beside it
//! and a stand-in kubelet that reports every bound Pod Ready (a Job's
//! Pod Succeeded); StatefulSets and Jobs through `apply`, `rollout
//! status`, `scale`, `wait` and `delete`.

mod common;

use common::{kubectl_async, kubectl_or_skip, start};
use devenv::wait::eventually_async;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

async fn ready_node(client: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = serde_json::from_value(json!({ "metadata": { "name": name } })).expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node created");
    let status = json!({ "status": { "conditions": [{ "type": "Ready", "status": "True" }] } });
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("node ready");
}

/// Marks every bound Pod Running and Ready, as the lab's node agent does.
async fn kubelet(client: kube::Client) {
    let pods: Api<Pod> = Api::all(client.clone());
    loop {
        if let Ok(Ok(list)) =
            tokio::time::timeout(Duration::from_secs(5), pods.list(&ListParams::default())).await
        {
            for p in list.items {
                let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                let done = matches!(phase, Some("Running" | "Succeeded"));
                if bound && !done {
                    let ns = p.metadata.namespace.clone().unwrap_or_default();
                    // A Job's Pod completes at once, as the lab backend plays it.
                    let status = if devenv::lab::played::runs_to_completion(&p) {
                        json!({ "status": { "phase": "Succeeded",
                            "conditions": [{ "type": "Ready", "status": "False", "reason": "PodCompleted" }] } })
                    } else {
                        json!({ "status": { "phase": "Running", "podIP": "10.0.0.1",
                            "conditions": [{ "type": "Ready", "status": "True" }] } })
                    };
                    let _ = Api::<Pod>::namespaced(client.clone(), &ns)
                        .patch_status(
                            p.metadata.name.as_deref().unwrap_or_default(),
                            &PatchParams::default(),
                            &Patch::Merge(status),
                        )
                        .await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn run(kc: &Path, args: &[&str]) -> String {
    let mut all = vec!["--request-timeout=20s"];
    all.extend_from_slice(args);
    let (ok, out) = kubectl_async(kc, &all, None).await;
    assert!(ok, "kubectl {}: {out}", args.join(" "));
    out
}

/// The nodes of the Deployment `web`'s Pods, and how many there are.
async fn pods_of_web(client: &kube::Client) -> (usize, BTreeSet<String>) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let nodes = list
        .iter()
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    (list.len(), nodes)
}

/// A server with `nodes` Ready, the lab's scheduler and workload
/// controllers and the stand-in kubelet running beside it, and a
/// kubeconfig for kubectl in a directory of its own; the tasks stop when
/// it drops. `None`, the test skipped, without kubectl.
struct Lab {
    _server: lab_apiserver::ApiServer,
    client: kube::Client,
    dir: tempfile::TempDir,
    kc: PathBuf,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.tasks.iter().for_each(tokio::task::JoinHandle::abort);
    }
}

async fn lab(nodes: &[&str]) -> Option<Lab> {
    if !kubectl_or_skip() {
        return None;
    }
    let (server, client) = start().await;
    let dir = tempfile::tempdir().expect("tmp");
    let kc = dir.path().join("kubeconfig");
    server.write_kubeconfig("lab", &kc).expect("kubeconfig");
    for n in nodes {
        ready_node(&client, n).await;
    }
    let stop = || std::future::pending::<()>();
    let tasks = vec![
        tokio::spawn(devenv::lab::scheduler::run(client.clone(), stop())),
        tokio::spawn(devenv::lab::workloads::run(client.clone(), stop())),
        tokio::spawn(kubelet(client.clone())),
    ];
    Some(Lab {
        _server: server,
        client,
        dir,
        kc,
        tasks,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_a_deployment_through_scale_rollouts_and_delete() {
    let Some(lab) = lab(&["n1", "n2", "n3"]).await else {
        return;
    };
    let (client, kc) = (lab.client.clone(), lab.kc.clone());

    run(
        &kc,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ],
    )
    .await;
    let out = run(
        &kc,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    )
    .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let (count, nodes) = pods_of_web(&client).await;
    assert_eq!((count, nodes.len()), (2, 2), "2 pods on 2 nodes: {nodes:?}");
    let out = run(&kc, &["get", "deploy", "web"]).await;
    let row: Vec<&str> = out
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row.get(..4), Some(&["web", "2/2", "2", "2"][..]), "{out}");

    run(&kc, &["scale", "deployment", "web", "--replicas=3"]).await;
    run(
        &kc,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    )
    .await;
    let (count, nodes) = pods_of_web(&client).await;
    assert_eq!((count, nodes.len()), (3, 3), "{nodes:?}");

    run(&kc, &["set", "image", "deployment/web", "nginx=nginx:2"]).await;
    let out = run(
        &kc,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    )
    .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    run(&kc, &["rollout", "restart", "deployment/web"]).await;
    run(
        &kc,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    )
    .await;
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let rs = replicasets
        .list(&ListParams::default())
        .await
        .expect("list")
        .items;
    let sizes: Vec<(i32, String)> = rs
        .iter()
        .map(|r| {
            let image = r
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .and_then(|t| t.spec.as_ref())
                .map(|s| s.containers[0].image.clone().unwrap_or_default())
                .unwrap_or_default();
            (
                r.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1),
                image,
            )
        })
        .collect();
    assert_eq!(
        sizes.iter().filter(|(n, _)| *n == 3).count(),
        1,
        "one live replica set: {sizes:?}"
    );
    assert_eq!(rs.len(), 3, "three revisions: {sizes:?}");
    let (count, _) = pods_of_web(&client).await;
    assert_eq!(count, 3);

    run(&kc, &["delete", "deployment", "web"]).await;
    eventually_async(
        Duration::from_secs(30),
        "the deployment's pods and replica sets gone",
        || async {
            let (pods, _) = pods_of_web(&client).await;
            let rs = replicasets.list(&ListParams::default()).await?.items.len();
            anyhow::ensure!(pods == 0 && rs == 0, "{pods} pods, {rs} replica sets left");
            Ok(Some(()))
        },
    )
    .await
    .expect("garbage collected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unschedulable_pod_says_why() {
    let (_server, client) = start().await;
    ready_node(&client, "n1").await;
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "unschedulable": true } })),
        )
        .await
        .expect("cordoned");
    let task = tokio::spawn(devenv::lab::scheduler::run(
        client.clone(),
        std::future::pending(),
    ));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = serde_json::from_value(json!({ "metadata": { "name": "p" },
        "spec": { "containers": [{ "name": "c", "image": "nginx" }] } }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    eventually_async(
        Duration::from_secs(20),
        "PodScheduled=False and a FailedScheduling event",
        || async {
            let p = pods.get("p").await?;
            let condition = p
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "PodScheduled");
            let message = condition
                .as_ref()
                .and_then(|c| c.message.clone())
                .unwrap_or_default();
            anyhow::ensure!(
                condition.as_ref().map(|c| c.status.as_str()) == Some("False")
                    && message == "0/1 nodes are available: 1 node(s) were unschedulable.",
                "condition {condition:?}"
            );
            let list = events.list(&ListParams::default()).await?.items;
            anyhow::ensure!(
                list.iter()
                    .any(|e| e.reason.as_deref() == Some("FailedScheduling")
                        && e.note.as_deref() == Some(message.as_str())),
                "events {list:?}"
            );
            Ok(Some(()))
        },
    )
    .await
    .expect("reported");
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "unschedulable": false } })),
        )
        .await
        .expect("uncordoned");
    eventually_async(
        Duration::from_secs(20),
        "the pod bound once the node is back",
        || async {
            let p = pods.get("p").await?;
            let node = p.spec.and_then(|s| s.node_name);
            anyhow::ensure!(node.as_deref() == Some("n1"), "node {node:?}");
            Ok(Some(()))
        },
    )
    .await
    .expect("bound");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rolls_out_a_daemonset_on_every_node() {
    if !kubectl_or_skip() {
        return;
    }
    let (server, client) = start().await;
    let dir = tempfile::tempdir().expect("tmp");
    let kc = dir.path().join("kubeconfig");
    server.write_kubeconfig("lab", &kc).expect("kubeconfig");
    for n in ["n1", "n2", "n3"] {
        ready_node(&client, n).await;
    }
    let tasks = [
        tokio::spawn(devenv::lab::workloads::run(
            client.clone(),
            std::future::pending(),
        )),
        tokio::spawn(kubelet(client.clone())),
    ];
    let manifest = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: nginx, image: nginx}]}\n";
    let (ok, out) = kubectl_async(&kc, &["apply", "-f", "-"], Some(manifest)).await;
    assert!(ok, "{out}");
    let out = run(
        &kc,
        &["rollout", "status", "daemonset/web", "--timeout=60s"],
    )
    .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let (count, nodes) = pods_of_web(&client).await;
    assert_eq!((count, nodes.len()), (3, 3), "{nodes:?}");
    let out = run(&kc, &["get", "ds", "web"]).await;
    let row: Vec<&str> = out
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        row.get(..6),
        Some(&["web", "3", "3", "3", "3", "3"][..]),
        "{out}"
    );

    run(&kc, &["set", "image", "daemonset/web", "nginx=nginx:2"]).await;
    let out = run(
        &kc,
        &["rollout", "status", "daemonset/web", "--timeout=60s"],
    )
    .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let images: Vec<String> = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("list")
        .items
        .iter()
        .filter_map(|p| p.spec.as_ref()?.containers[0].image.clone())
        .collect();
    assert_eq!(images, ["nginx:2", "nginx:2", "nginx:2"]);

    run(&kc, &["delete", "daemonset", "web"]).await;
    eventually_async(Duration::from_secs(30), "the daemon pods gone", || async {
        let (pods, _) = pods_of_web(&client).await;
        anyhow::ensure!(pods == 0, "{pods} pods left");
        Ok(Some(()))
    })
    .await
    .expect("garbage collected");
    tasks.iter().for_each(tokio::task::JoinHandle::abort);
}

/// The names of the Pods labelled `app=<app>`.
async fn pod_names(client: &kube::Client, app: &str) -> BTreeSet<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect()
}

const STATEFULSET: &str = r#"{"apiVersion": "apps/v1", "kind": "StatefulSet",
  "metadata": {"name": "db"},
  "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
           "template": {"metadata": {"labels": {"app": "db"}},
                        "spec": {"containers": [{"name": "db", "image": "redis"}]}}}}"#;

const JOB: &str = r#"{"apiVersion": "batch/v1", "kind": "Job",
  "metadata": {"name": "pi"},
  "spec": {"completions": 2, "template": {"metadata": {"labels": {"app": "pi"}},
           "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "pi", "image": "perl", "command": ["perl", "-e", "print 1"]}]}}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_a_statefulset_and_a_job() {
    let Some(lab) = lab(&["n1", "n2"]).await else {
        return;
    };
    let (client, kc) = (lab.client.clone(), lab.kc.clone());
    let dir = &lab.dir;

    let sts = dir.path().join("sts.json");
    std::fs::write(&sts, STATEFULSET).expect("write");
    run(&kc, &["apply", "-f", &sts.display().to_string()]).await;
    let out = run(&kc, &["rollout", "status", "sts/db", "--timeout=60s"]).await;
    // What kube-apiserver's defaulted `partition: 0` makes kubectl say.
    assert!(
        out.contains("partitioned roll out complete: 3 new pods have been updated"),
        "{out}"
    );
    let names: BTreeSet<String> = ["db-0", "db-1", "db-2"].map(String::from).into();
    assert_eq!(pod_names(&client, "db").await, names);
    let out = run(&kc, &["get", "sts", "db"]).await;
    let row: Vec<&str> = out
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row.get(..2), Some(&["db", "3/3"][..]), "{out}");
    run(&kc, &["scale", "sts", "db", "--replicas=1"]).await;
    let one: BTreeSet<String> = ["db-0".to_owned()].into();
    eventually_async(Duration::from_secs(30), "db scaled to db-0", || async {
        Ok((pod_names(&client, "db").await == one).then_some(()))
    })
    .await
    .expect("scaled down");
    run(&kc, &["delete", "sts", "db"]).await;
    eventually_async(Duration::from_secs(30), "db's pods collected", || async {
        Ok(pod_names(&client, "db").await.is_empty().then_some(()))
    })
    .await
    .expect("collected");

    let job = dir.path().join("job.json");
    std::fs::write(&job, JOB).expect("write");
    run(&kc, &["apply", "-f", &job.display().to_string()]).await;
    let out = run(
        &kc,
        &[
            "wait",
            "--for=condition=complete",
            "job/pi",
            "--timeout=60s",
        ],
    )
    .await;
    assert!(out.contains("job.batch/pi condition met"), "{out}");
    assert_eq!(pod_names(&client, "pi").await.len(), 2, "two completions");
    let out = run(&kc, &["get", "job", "pi"]).await;
    let row: Vec<&str> = out
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row.get(..3), Some(&["pi", "Complete", "2/2"][..]), "{out}");
    run(&kc, &["delete", "job", "pi"]).await;
    eventually_async(Duration::from_secs(30), "pi's pods collected", || async {
        Ok(pod_names(&client, "pi").await.is_empty().then_some(()))
    })
    .await
    .expect("collected");
}
