//! The API server driven by kube's own client and kube-runtime's watcher:
//! the clients metallb-rs uses in production.

mod common;

use common::{install_metallb_crds, start};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use lab_apiserver::ApiServer;
use serde_json::json;
use std::time::Duration;

async fn namespace(client: &Client, name: &str) {
    let ns: Namespace =
        serde_json::from_value(json!({ "metadata": { "name": name } })).expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
}

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(
        json!({ "metadata": { "name": name, "labels": labels }, "data": { "k": "v" } }),
    )
    .expect("cm")
}

fn status_code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test]
async fn crud_selectors_conflicts_and_patches() {
    let (_server, client) = start().await;
    namespace(&client, "t").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    let a = cms
        .create(&PostParams::default(), &cm("a", json!({ "app": "web" })))
        .await
        .expect("created");
    cms.create(&PostParams::default(), &cm("b", json!({ "app": "db" })))
        .await
        .expect("created");
    assert_eq!(
        status_code(
            cms.create(&PostParams::default(), &cm("a", json!({})))
                .await
                .expect_err("exists")
        ),
        409
    );
    assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());

    let web = cms
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("list");
    assert_eq!(web.items.len(), 1);
    let not_web = cms
        .list(&ListParams::default().labels("app!=web"))
        .await
        .expect("list");
    assert_eq!(not_web.items[0].metadata.name.as_deref(), Some("b"));
    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .expect("list");
    assert_eq!(by_name.items.len(), 1);

    // Optimistic concurrency: an update with a stale resourceVersion fails.
    let mut stale = a.clone();
    let mut fresh = cms.get("a").await.expect("get");
    fresh.data = Some([("k".to_owned(), "v2".to_owned())].into());
    cms.replace("a", &PostParams::default(), &fresh)
        .await
        .expect("replaced");
    stale.data = Some([("k".to_owned(), "v3".to_owned())].into());
    assert_eq!(
        status_code(
            cms.replace("a", &PostParams::default(), &stale)
                .await
                .expect_err("stale")
        ),
        409
    );

    let merged = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "extra": "1" } } })),
        )
        .await
        .expect("merge");
    assert_eq!(
        merged
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("extra"))
            .map(String::as_str),
        Some("1")
    );
    let patch: json_patch::Patch =
        serde_json::from_value(json!([{ "op": "replace", "path": "/data/k", "value": "jp" }]))
            .expect("patch");
    let jp = cms
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect("json patch");
    assert_eq!(
        jp.data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("jp")
    );
    let ssa = cms
        .patch(
            "a",
            &PatchParams::apply("test"),
            &Patch::Apply(
                json!({ "apiVersion": "v1", "kind": "ConfigMap", "data": { "s": "ssa" } }),
            ),
        )
        .await
        .expect("server-side apply");
    let managers: Vec<_> = ssa
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|e| (e.manager.clone(), e.operation.clone()))
        .collect();
    assert!(
        managers.contains(&(Some("test".into()), Some("Apply".into()))),
        "{managers:?}"
    );

    cms.delete("a", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(status_code(cms.get("a").await.expect_err("gone")), 404);
    let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    assert_eq!(
        status_code(
            missing
                .create(&PostParams::default(), &cm("x", json!({})))
                .await
                .expect_err("no ns")
        ),
        404
    );
}

#[tokio::test]
async fn services_get_cluster_ips_and_a_status_subresource() {
    let (_server, client) = start().await;
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "generateName": "web-" },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80 }], "selector": { "app": "web" } },
    }))
    .expect("svc");
    let created = svcs
        .create(&PostParams::default(), &svc)
        .await
        .expect("created");
    let name = created.metadata.name.clone().expect("generated name");
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    let spec = created.spec.clone().expect("spec");
    assert!(
        spec.cluster_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("10.96."))
    );
    assert!(spec.ports.as_ref().expect("ports")[0].node_port.is_some());

    let status = json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "172.30.0.100" }] } } });
    let patched = svcs
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("status");
    let ingress = |s: &Service| {
        s.status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|l| l.ingress.clone())
            .unwrap_or_default()
    };
    assert_eq!(ingress(&patched)[0].ip.as_deref(), Some("172.30.0.100"));
    // A write to the main resource leaves status alone.
    let mut changed = patched.clone();
    changed.status = None;
    changed.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
    let replaced = svcs
        .replace(&name, &PostParams::default(), &changed)
        .await
        .expect("replaced");
    assert_eq!(ingress(&replaced).len(), 1, "status kept");
    assert_eq!(
        replaced
            .spec
            .as_ref()
            .and_then(|s| s.health_check_node_port),
        None,
        "no health check port with the Cluster policy"
    );
}

#[tokio::test]
async fn local_load_balancers_get_a_health_check_node_port_while_local() {
    let (_server, client) = start().await;
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{ "port": 80 }] },
    }))
    .expect("svc");
    let created = svcs
        .create(&PostParams::default(), &svc)
        .await
        .expect("created");
    let spec = created.spec.clone().expect("spec");
    let port = spec.health_check_node_port.expect("healthCheckNodePort");
    assert!((30000..=32767).contains(&port), "{port}");
    assert_ne!(Some(port), spec.ports.expect("ports")[0].node_port);
    // Kept by an update that leaves it out (as clusterIP is), gone with
    // the Local policy.
    let mut without = created.clone();
    if let Some(spec) = without.spec.as_mut() {
        spec.health_check_node_port = None;
    }
    let labelled = svcs
        .replace("web", &PostParams::default(), &without)
        .await
        .expect("replaced");
    assert_eq!(
        labelled
            .spec
            .as_ref()
            .and_then(|s| s.health_check_node_port),
        Some(port)
    );
    let cluster = svcs
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "externalTrafficPolicy": "Cluster" } })),
        )
        .await
        .expect("cluster");
    assert_eq!(
        cluster.spec.as_ref().and_then(|s| s.health_check_node_port),
        None
    );
}

#[tokio::test]
async fn watcher_sees_create_update_delete_in_order() {
    let (_server, client) = start().await;
    namespace(&client, "w").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "w");
    let events = watcher(
        cms.clone(),
        watcher::Config::default().labels("watched=yes"),
    );
    let mut events = Box::pin(events);
    // Initial list (empty).
    loop {
        match tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .expect("in time")
            .expect("ok")
        {
            Some(watcher::Event::InitDone) => break,
            Some(_) => {}
            None => panic!("stream ended"),
        }
    }
    cms.create(
        &PostParams::default(),
        &cm("x", json!({ "watched": "yes" })),
    )
    .await
    .expect("create");
    cms.create(
        &PostParams::default(),
        &cm("ignored", json!({ "watched": "no" })),
    )
    .await
    .expect("create");
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "k": "changed" } })),
    )
    .await
    .expect("patch");
    cms.delete("x", &DeleteParams::default())
        .await
        .expect("delete");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .expect("in time")
            .expect("item")
            .expect("ok");
        match ev {
            watcher::Event::Apply(o) => seen.push(format!(
                "apply {} {}",
                o.metadata.name.unwrap_or_default(),
                o.data.and_then(|d| d.get("k").cloned()).unwrap_or_default()
            )),
            watcher::Event::Delete(o) => {
                seen.push(format!("delete {}", o.metadata.name.unwrap_or_default()))
            }
            _ => {}
        }
    }
    assert_eq!(seen, ["apply x v", "apply x changed", "delete x"]);
}

#[tokio::test]
async fn applied_crds_serve_custom_objects_with_schema_defaults_and_422s() {
    let (_server, client) = start().await;
    install_metallb_crds(&client).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pools = common::pools(&client, "metallb-system");
    let pool: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": { "name": "p" }, "spec": { "addresses": ["172.30.0.100-172.30.0.120"], "unknownField": 1 },
    }))
    .expect("pool");
    let created = pools
        .create(&PostParams::default(), &pool)
        .await
        .expect("created");
    assert_eq!(
        created.data["spec"]["autoAssign"],
        json!(true),
        "schema default applied"
    );
    assert_eq!(created.data["spec"]["avoidBuggyIPs"], json!(false));
    assert!(created.data["spec"].get("unknownField").is_none(), "pruned");

    // Raw JSON, as kubectl would send it: addresses is not a list.
    let raw = pools.clone();
    let bad: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": { "name": "bad" }, "spec": { "addresses": "172.30.0.1/32", "autoAssign": "yes" },
    }))
    .expect("object");
    match raw
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("invalid")
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message.contains("spec.addresses: ") && s.message.contains("spec.autoAssign: "),
                "{}",
                s.message
            );
        }
        other => panic!("{other}"),
    }
    // Replacing a custom object that never had a status (as dev-env does
    // with its BGP objects) keeps it without one.
    let current = raw.get("p").await.expect("p");
    let mut replacement: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": { "name": "p", "resourceVersion": current.metadata.resource_version },
        "spec": { "addresses": ["172.30.0.100-172.30.0.110"] },
    }))
    .expect("object");
    replacement.metadata.namespace = None;
    let replaced = raw
        .replace("p", &PostParams::default(), &replacement)
        .await
        .expect("replaced");
    assert_eq!(
        replaced.data["spec"]["addresses"],
        json!(["172.30.0.100-172.30.0.110"])
    );
    assert!(replaced.data.get("status").is_none_or(|s| !s.is_null()));
    // Deleting the CRD removes its objects and stops serving it.
    crds.delete("ipaddresspools.metallb.io", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(
        status_code(pools.get("p").await.expect_err("not served")),
        404
    );
}

#[tokio::test]
async fn owner_references_are_garbage_collected() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .expect("owner");
    let mut child = cm("child", json!({}));
    child.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.metadata.uid.clone().expect("uid"),
            ..Default::default()
        },
    ]);
    cms.create(&PostParams::default(), &child)
        .await
        .expect("child");
    cms.delete("owner", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(
        status_code(cms.get("child").await.expect_err("collected")),
        404
    );
}

#[tokio::test]
async fn watch_from_a_compacted_version_is_gone_and_a_fresh_one_resumes() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let server = ApiServer::start_with_history(listener, 3)
        .await
        .expect("starts");
    let client = common::client_for(&server.kubeconfig("lab")).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = cms
        .create(&PostParams::default(), &cm("c0", json!({})))
        .await
        .expect("create");
    let first_rv = first.metadata.resource_version.clone().expect("rv");
    let mut last_rv = first_rv.clone();
    for i in 1..6 {
        let o = cms
            .create(&PostParams::default(), &cm(&format!("c{i}"), json!({})))
            .await
            .expect("create");
        if i == 4 {
            last_rv = o.metadata.resource_version.clone().expect("rv");
        }
    }
    let mut old = Box::pin(
        cms.watch(&kube::api::WatchParams::default(), &first_rv)
            .await
            .expect("watch starts"),
    );
    match tokio::time::timeout(Duration::from_secs(5), old.try_next())
        .await
        .expect("in time")
        .expect("ok")
    {
        Some(kube::api::WatchEvent::Error(e)) => assert_eq!(e.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    // Resuming from a retained version replays exactly what came after it.
    let mut recent = Box::pin(
        cms.watch(&kube::api::WatchParams::default(), &last_rv)
            .await
            .expect("watch starts"),
    );
    match tokio::time::timeout(Duration::from_secs(5), recent.try_next())
        .await
        .expect("in time")
        .expect("ok")
    {
        Some(kube::api::WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("c5")),
        other => panic!("expected c5, got {other:?}"),
    }
    // Bookmarks arrive when asked for.
    let mut marks = Box::pin(
        cms.watch(
            &kube::api::WatchParams {
                bookmarks: true,
                ..Default::default()
            },
            &last_rv,
        )
        .await
        .expect("watch starts"),
    );
    let mut saw_bookmark = false;
    for _ in 0..3 {
        if let Ok(Ok(Some(kube::api::WatchEvent::Bookmark(_)))) =
            tokio::time::timeout(Duration::from_secs(7), marks.try_next()).await
        {
            saw_bookmark = true;
            break;
        }
    }
    assert!(saw_bookmark, "no bookmark within the interval");
}

/// The value of `metric`'s sample whose line holds every one of `labels`.
fn sample(text: &str, metric: &str, labels: &[&str]) -> Option<u64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .find(|l| labels.iter().all(|s| l.contains(s)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn metrics_count_requests_and_watch_events_per_user() {
    let (_server, client) = start().await;
    namespace(&client, "m").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "m");
    for name in ["a", "b", "c"] {
        cms.create(&PostParams::default(), &cm(name, json!({})))
            .await
            .expect("create");
    }
    let mut events = Box::pin(watcher(cms.clone(), watcher::Config::default()));
    let mut applied = 0;
    while applied < 4 {
        let ev = tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .expect("in time")
            .expect("ok")
            .expect("item");
        match ev {
            watcher::Event::InitDone => {
                cms.create(&PostParams::default(), &cm("d", json!({})))
                    .await
                    .expect("create");
            }
            watcher::Event::Apply(_) | watcher::Event::InitApply(_) => applied += 1,
            _ => {}
        }
    }
    let request = axum::http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    let text = client.request_text(request).await.expect("metrics");
    // A namespace and four ConfigMaps created, by the one admin user,
    // counted per resource.
    assert_eq!(
        sample(
            &text,
            "apiserver_request_total",
            &["verb=\"create\"", "resource=\"configmaps\""]
        ),
        Some(4),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "apiserver_request_total",
            &["verb=\"create\"", "resource=\"namespaces\""]
        ),
        Some(1),
        "{text}"
    );
    assert!(
        sample(&text, "apiserver_request_total", &["verb=\"watch\""]).is_some_and(|n| n >= 1),
        "{text}"
    );
    // The watch's initial list comes from a list call; the new object
    // from the watch.
    assert!(
        sample(&text, "apiserver_watch_events_total", &[]).is_some_and(|n| n >= 1),
        "{text}"
    );
}

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

/// `limit` and `continue`: kube's client pages through a list in key
/// order, and kube-runtime's watcher, which lists in pages of 500, sees
/// every object of a longer list.
#[tokio::test]
async fn lists_page_with_limit_and_continue() {
    let (_server, client) = start().await;
    namespace(&client, "paged").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "paged");
    let want: Vec<String> = (0..503).map(|i| format!("cm-{i:03}")).collect();
    for name in want.iter().rev() {
        cms.create(&PostParams::default(), &cm(name, json!({})))
            .await
            .expect("created");
    }
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut params = ListParams::default().limit(200);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = cms.list(&params).await.expect("page");
        pages += 1;
        assert!(page.items.len() <= 200);
        seen.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!((pages, &seen), (3, &want));
    let watched: Vec<ConfigMap> = watcher(cms.clone(), watcher::Config::default())
        .take_while(|e| futures::future::ready(!matches!(e, Ok(watcher::Event::InitDone))))
        .try_filter_map(|e| async move {
            Ok(match e {
                watcher::Event::InitApply(o) => Some(o),
                _ => None,
            })
        })
        .try_collect()
        .await
        .expect("watcher lists");
    assert_eq!(watched.len(), 503);
    let refused = cms
        .list(&ListParams::default().limit(1).continue_token("forged"))
        .await
        .expect_err("a forged token");
    assert_eq!(status_code(refused), 400);
}

/// A Secret's stringData is folded into data and never stored, on create
/// and update, as kube-apiserver does.
#[tokio::test]
async fn secret_string_data_is_folded_into_data() {
    use k8s_openapi::api::core::v1::Secret;
    let (_server, client) = start().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "bgp-password" },
        "type": "kubernetes.io/basic-auth",
        "data": { "username": "YWRtaW4=", "password": "b2xk" },
        "stringData": { "password": "s3cret" },
    }))
    .expect("secret");
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("created");
    let stored = secrets.get("bgp-password").await.expect("stored");
    for s in [&created, &stored] {
        assert!(s.string_data.is_none(), "stringData stored: {s:?}");
        let data = s.data.clone().expect("data");
        assert_eq!(data["password"].0, b"s3cret");
        assert_eq!(data["username"].0, b"admin");
    }
    let patched = secrets
        .patch(
            "bgp-password",
            &PatchParams::default(),
            &Patch::Merge(json!({ "stringData": { "extra": "x" } })),
        )
        .await
        .expect("patched");
    assert!(patched.string_data.is_none());
    assert_eq!(patched.data.expect("data")["extra"].0, b"x");
}
