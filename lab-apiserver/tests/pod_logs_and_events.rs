//! What the node side writes and clients read back: Pod logs from the
//! agents' files, and events.k8s.io Events listed as core/v1 Events of
//! their object.

mod common;

use common::objects::status_code;
use common::start;
use kube::Api;
use kube::api::{ListParams, PostParams};
use lab_apiserver::ApiServer;
use serde_json::json;

#[tokio::test]
async fn pod_logs_are_read_from_the_agents_files() {
    let dir = std::env::temp_dir().join(format!("lab-pod-logs-{}", std::process::id()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let options = lab_apiserver::Options {
        pod_logs: Some(dir.clone()),
        ..Default::default()
    };
    let server = ApiServer::start_with(listener, options)
        .await
        .expect("starts");
    let client = common::client_for(&server.kubeconfig("lab")).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, "default");
    let pod = serde_json::from_value(json!({ "metadata": { "name": "web-0" }, "spec": {
        "containers": [{ "name": "nginx", "image": "nginx" }, { "name": "side", "image": "x" }] } }))
    .expect("pod");
    let pod = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let uid = pod.metadata.uid.expect("uid");
    let lp = kube::api::LogParams::default();
    assert_eq!(pods.logs("web-0", &lp).await.expect("empty log"), "");
    let file = lab_apiserver::podlog::path(&dir, "default", "web-0", &uid, "nginx");
    let mut ring = lab_apiserver::podlog::Ring::create(file).expect("ring");
    for line in ["played", "GET / 200", "GET /x 200"] {
        ring.push(line).expect("push");
    }
    assert_eq!(
        pods.logs("web-0", &lp).await.expect("log"),
        "played\nGET / 200\nGET /x 200\n"
    );
    let tail = kube::api::LogParams {
        tail_lines: Some(1),
        ..Default::default()
    };
    assert_eq!(
        pods.logs("web-0", &tail).await.expect("tail"),
        "GET /x 200\n"
    );
    let other = kube::api::LogParams {
        container: Some("side".into()),
        ..Default::default()
    };
    assert_eq!(pods.logs("web-0", &other).await.expect("side"), "");
    let wrong = kube::api::LogParams {
        container: Some("nope".into()),
        ..Default::default()
    };
    assert_eq!(
        status_code(
            pods.logs("web-0", &wrong)
                .await
                .expect_err("no such container")
        ),
        400
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn new_events_are_listed_as_core_events_of_their_object() {
    let (_server, client) = start().await;
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    for (name, pod) in [("a.1", "web-0"), ("b.1", "web-1")] {
        let ev = serde_json::from_value(json!({
            "metadata": { "name": name },
            "regarding": { "kind": "Pod", "namespace": "default", "name": pod, "uid": pod },
            "reason": "PlayedByLabBackend", "note": format!("{pod} played"), "type": "Normal",
            "action": "Play", "eventTime": "2026-12-06T15:00:00.000000Z",
            "reportingController": "kubelet", "reportingInstance": "lab-worker",
        }))
        .expect("event");
        events
            .create(&PostParams::default(), &ev)
            .await
            .expect("created");
    }
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client, "default");
    // What `kubectl describe pod web-1` lists.
    let lp = ListParams::default().fields(
        "involvedObject.name=web-1,involvedObject.namespace=default,involvedObject.kind=Pod,involvedObject.uid=web-1",
    );
    let listed = core.list(&lp).await.expect("listed").items;
    let shown: Vec<_> = listed
        .iter()
        .map(|e| {
            (
                e.reason.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default(),
                e.source.as_ref().and_then(|s| s.component.clone()),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [(
            "PlayedByLabBackend".to_owned(),
            "web-1 played".to_owned(),
            Some("kubelet".to_owned())
        )]
    );
}
