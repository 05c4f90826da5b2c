//! Watches through kube-runtime's watcher: events in order, and a watch
//! from a compacted resourceVersion answered 410 Gone while a fresh one
//! resumes.

mod common;

use common::objects::{cm, namespace};
use common::start;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use lab_apiserver::ApiServer;
use serde_json::json;
use std::time::Duration;

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
