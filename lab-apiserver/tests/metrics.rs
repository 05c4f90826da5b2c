//! The server's own `/metrics`: requests and watch events counted per
//! user.

mod common;

use common::objects::{cm, namespace};
use common::start;
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::watcher;
use serde_json::json;
use std::time::Duration;

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
