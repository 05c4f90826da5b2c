//! CRD conversion webhooks, against the test webhook's `/convert`
//! (`common::webhook`): objects stored in the storage version, served at
//! every version through the webhook, in reads, writes, lists, watches
//! and the reviews validating webhooks get.

mod common;

use common::webhook::{SVC, SVC_NS, configure, refused, setup};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use serde_json::{Value, json};
use std::time::Duration;

fn widget_crd(ca_bundle: &str) -> CustomResourceDefinition {
    let schema = |spec: Value| json!({ "openAPIV3Schema": { "type": "object", "properties": { "spec": { "type": "object", "properties": spec } } } });
    serde_json::from_value(json!({
        "metadata": { "name": "widgets.example.com" },
        "spec": {
            "group": "example.com",
            "names": { "kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList" },
            "scope": "Namespaced",
            "versions": [
                { "name": "v1", "served": true, "storage": false, "schema": schema(json!({ "size": { "type": "string" } })) },
                { "name": "v2", "served": true, "storage": true, "schema": schema(json!({ "count": { "type": "integer" } })) },
            ],
            "conversion": { "strategy": "Webhook", "webhook": { "conversionReviewVersions": ["v1"],
                "clientConfig": { "service": { "namespace": SVC_NS, "name": SVC, "path": "/convert" }, "caBundle": ca_bundle } } },
        },
    }))
    .expect("CRD")
}

fn widgets(client: &Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", version, "Widget");
    Api::namespaced_with(
        client.clone(),
        "t",
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    )
}

fn widget(name: &str, version: &str, spec: Value, annotations: Value) -> DynamicObject {
    serde_json::from_value(
        json!({ "apiVersion": format!("example.com/{version}"), "kind": "Widget",
        "metadata": { "name": name, "annotations": annotations }, "spec": spec }),
    )
    .expect("widget")
}

#[tokio::test]
async fn conversion_webhook_serves_every_version_from_the_storage_version() {
    let (_server, client, hook) = setup().await;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &widget_crd(&hook.ca_bundle()))
        .await
        .expect("CRD");
    let (v1, v2) = (widgets(&client, "v1"), widgets(&client, "v2"));
    let created = v1
        .create(
            &PostParams::default(),
            &widget("a", "v1", json!({ "size": "3" }), json!({})),
        )
        .await
        .expect("created at v1");
    assert_eq!(
        created.data["spec"],
        json!({ "size": "3" }),
        "answered at v1"
    );
    let stored_as = hook.received("/convert")[0]["desiredAPIVersion"].clone();
    assert_eq!(stored_as, "example.com/v2", "stored in the storage version");
    assert_eq!(
        v2.get("a").await.expect("v2").data["spec"],
        json!({ "count": 3 })
    );
    v2.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "count": 5 } })),
    )
    .await
    .expect("patched at v2");
    assert_eq!(
        v1.get("a").await.expect("v1").data["spec"],
        json!({ "size": "5" })
    );

    let mut events = v1
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    v2.create(
        &PostParams::default(),
        &widget("b", "v2", json!({ "count": 7 }), json!({})),
    )
    .await
    .expect("created at v2");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .expect("event in time")
            .expect("event")
            .expect("stream open");
        if let WatchEvent::Added(o) = event {
            assert_eq!(
                o.types.as_ref().map(|t| t.api_version.as_str()),
                Some("example.com/v1")
            );
            seen.push((o.metadata.name.unwrap_or_default(), o.data["spec"].clone()));
        }
    }
    assert_eq!(
        seen,
        [
            ("a".to_owned(), json!({ "size": "5" })),
            ("b".to_owned(), json!({ "size": "7" }))
        ]
    );
    let listed: Vec<Value> = v1
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|o| o.data["spec"].clone())
        .collect();
    assert_eq!(listed, [json!({ "size": "5" }), json!({ "size": "7" })]);
}

#[tokio::test]
async fn a_failing_conversion_webhook_fails_the_request() {
    let (_server, client, hook) = setup().await;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &widget_crd(&hook.ca_bundle()))
        .await
        .expect("CRD");
    let (v1, v2) = (widgets(&client, "v1"), widgets(&client, "v2"));
    v2.create(
        &PostParams::default(),
        &widget(
            "bad",
            "v2",
            json!({ "count": 1 }),
            json!({ "test/fail-conversion": "yes" }),
        ),
    )
    .await
    .expect("at the storage version nothing is converted");
    let (code, message) = refused(v1.get("bad").await);
    assert_eq!(
        (code, message.as_str()),
        (
            500,
            "conversion webhook for example.com/v2, Kind=Widget failed: refusing to convert bad"
        )
    );
    let (code, message) = refused(
        v1.create(
            &PostParams::default(),
            &widget(
                "worse",
                "v1",
                json!({ "size": "1" }),
                json!({ "test/fail-conversion": "yes" }),
            ),
        )
        .await,
    );
    assert_eq!(
        (code, message.as_str()),
        (
            500,
            "Internal error occurred: conversion webhook for example.com/v1, Kind=Widget failed: refusing to convert worse"
        )
    );
    assert!(v2.get_opt("worse").await.expect("get").is_none());
    // A watch whose backlog cannot be converted gets the error and ends.
    let mut events = v1
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    match events.try_next().await {
        Ok(Some(WatchEvent::Error(e))) => assert_eq!(
            (e.code, e.message.as_str()),
            (
                500,
                "conversion webhook for example.com/v2, Kind=Widget failed: refusing to convert bad"
            )
        ),
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    let after = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .expect("the watch ended");
    assert!(matches!(after, Ok(None)), "{after:?}");
    drop(hook);
    let (code, message) = refused(v1.list(&ListParams::default()).await);
    assert_eq!(code, 500);
    assert!(message.starts_with("conversion webhook for example.com/v2, Kind=Widget failed: Post \"https://hook.webhooks.svc:443/convert?timeout=30s\": dial tcp 127.0.0.1:"), "{message}");
    assert!(
        message.ends_with("connect: connection refused"),
        "{message}"
    );
}

#[tokio::test]
async fn validating_webhooks_get_their_own_version_of_the_object() {
    let (_server, client, hook) = setup().await;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &widget_crd(&hook.ca_bundle()))
        .await
        .expect("CRD");
    let mut w = common::webhook::webhook("widgets.test.io", &hook.ca_bundle(), json!({}));
    w["rules"] = json!([{ "operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v2"], "resources": ["widgets"] }]);
    configure(&client, vec![w]).await;
    widgets(&client, "v1")
        .create(
            &PostParams::default(),
            &widget("a", "v1", json!({ "size": "4" }), json!({})),
        )
        .await
        .expect("created at v1");
    let review = &hook.reviews()[0];
    assert_eq!(review["kind"]["version"], "v2", "matchPolicy Equivalent");
    assert_eq!(review["requestKind"]["version"], "v1");
    assert_eq!(review["object"]["apiVersion"], "example.com/v2");
    assert_eq!(review["object"]["spec"], json!({ "count": 4 }));
}
