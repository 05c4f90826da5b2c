//! Validating admission webhooks, against a small HTTPS webhook inside
//! the test (`common::webhook`): the API server must call them as
//! kube-apiserver does, and refuse or let through accordingly.

mod common;

use common::webhook::{
    Hook, SVC, SVC_NS, cm, configure, namespace, refused, server, setup, webhook,
};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test]
async fn allowed_and_denied_writes_with_the_review_kube_apiserver_sends() {
    let (_server, client, hook) = setup().await;
    configure(
        &client,
        vec![webhook("cm.test.io", &hook.ca_bundle(), json!({}))],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    cms.create(&PostParams::default(), &cm("ok", json!({}), json!({})))
        .await
        .expect("allowed");
    let (code, message) = refused(
        cms.create(
            &PostParams::default(),
            &cm(
                "no",
                json!({ "test/deny": "no such thing allowed" }),
                json!({}),
            ),
        )
        .await,
    );
    assert_eq!(code, 400);
    assert_eq!(
        message,
        "admission webhook \"cm.test.io\" denied the request: no such thing allowed"
    );
    assert!(
        cms.get_opt("no").await.expect("get").is_none(),
        "a denied create stores nothing"
    );
    let (code, _) = refused(
        cms.create(
            &PostParams::default(),
            &cm(
                "forbidden",
                json!({ "test/deny": "m", "test/code": "403" }),
                json!({}),
            ),
        )
        .await,
    );
    assert_eq!(code, 403, "the webhook's status code is kept");

    let (code, message) = refused(
        cms.patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "annotations": { "test/deny": "frozen" } } })),
        )
        .await,
    );
    assert_eq!(
        (code, message.as_str()),
        (
            400,
            "admission webhook \"cm.test.io\" denied the request: frozen"
        )
    );
    let ok = cms.get("ok").await.expect("get");
    assert!(
        !ok.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("test/deny"),
        "a denied patch changes nothing"
    );

    let reviews = hook.reviews();
    let create = &reviews[0];
    assert_eq!(create["operation"], "CREATE");
    assert_eq!(
        create["kind"],
        json!({ "group": "", "version": "v1", "kind": "ConfigMap" })
    );
    assert_eq!(
        create["resource"],
        json!({ "group": "", "version": "v1", "resource": "configmaps" })
    );
    assert_eq!(create["requestKind"], create["kind"]);
    assert_eq!(create["name"], "ok");
    assert_eq!(create["namespace"], "t");
    assert_eq!(create["userInfo"]["username"], lab_apiserver::ADMIN);
    assert_eq!(create["object"]["data"], json!({ "k": "v" }));
    assert!(
        create["object"]["metadata"]["uid"].is_string(),
        "the object as it will be stored"
    );
    assert_eq!(create["oldObject"], Value::Null);
    assert_eq!(create["dryRun"], false);
    assert_eq!(create["options"]["kind"], "CreateOptions");
    let update = reviews.last().expect("the patch");
    assert_eq!(update["operation"], "UPDATE");
    assert_eq!(update["oldObject"]["metadata"]["name"], "ok");
    assert_eq!(
        update["object"]["metadata"]["annotations"]["test/deny"],
        "frozen"
    );
    let uids: std::collections::BTreeSet<&str> =
        reviews.iter().filter_map(|r| r["uid"].as_str()).collect();
    assert_eq!(uids.len(), reviews.len(), "every call has its own uid");
}

#[tokio::test]
async fn rules_and_selectors_choose_what_is_sent() {
    let (_server, client, hook) = setup().await;
    namespace(&client, "watched", json!({ "team": "a" })).await;
    configure(
        &client,
        vec![
            webhook("labelled.test.io", &hook.ca_bundle(), json!({ "objectSelector": { "matchLabels": { "check": "yes" } } })),
            webhook("team.test.io", &hook.ca_bundle(), json!({ "namespaceSelector": { "matchLabels": { "team": "a" } } })),
            webhook("svc.test.io", &hook.ca_bundle(), json!({ "rules": [{ "operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["services"] }] })),
        ],
    )
    .await;
    let deny = json!({ "test/deny": "sent" });
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    // Not selected by either: the denial is never asked for.
    cms.create(
        &PostParams::default(),
        &cm("plain", deny.clone(), json!({})),
    )
    .await
    .expect("not sent");
    let (_, message) = refused(
        cms.create(
            &PostParams::default(),
            &cm("checked", deny.clone(), json!({ "check": "yes" })),
        )
        .await,
    );
    assert!(message.contains("\"labelled.test.io\""), "{message}");
    let watched: Api<ConfigMap> = Api::namespaced(client.clone(), "watched");
    let (_, message) = refused(
        watched
            .create(
                &PostParams::default(),
                &cm("in-team", deny.clone(), json!({})),
            )
            .await,
    );
    assert!(message.contains("\"team.test.io\""), "{message}");
    // Operations and resources not in the rules are not sent either.
    cms.delete("plain", &DeleteParams::default())
        .await
        .expect("DELETE is not in the rules");
    // A status write is sent only to rules that list the subresource.
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), "t");
    let svc = serde_json::from_value(json!({ "metadata": { "name": "web", "annotations": deny }, "spec": { "ports": [{ "port": 80 }] } }))
        .expect("svc");
    services
        .create(&PostParams::default(), &svc)
        .await
        .expect("CREATE of services is not in the rules");
    services
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "192.0.2.1" }] } } }),
            ),
        )
        .await
        .expect("services/status is not in the rules");
    let (_, message) = refused(
        services
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "labels": { "x": "1" } } })),
            )
            .await,
    );
    assert!(message.contains("\"svc.test.io\""), "{message}");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), "watched");
    let secret =
        serde_json::from_value(json!({ "metadata": { "name": "s", "annotations": deny } }))
            .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secrets are not in the rules");
    let sent: Vec<String> = hook
        .reviews()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["operation"].as_str().unwrap_or_default(),
                r["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(sent, ["CREATE checked", "CREATE in-team", "UPDATE web"]);
}

#[tokio::test]
async fn delete_sends_the_old_object_and_can_be_denied() {
    let (_server, client, hook) = setup().await;
    let mut w = webhook("cm.test.io", &hook.ca_bundle(), json!({}));
    w["rules"][0]["operations"] = json!(["DELETE"]);
    configure(&client, vec![w]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    cms.create(
        &PostParams::default(),
        &cm("keep", json!({ "test/deny": "keep me" }), json!({})),
    )
    .await
    .expect("CREATE is not in the rules");
    let (code, message) = refused(cms.delete("keep", &DeleteParams::default()).await);
    assert_eq!(
        (code, message.as_str()),
        (
            400,
            "admission webhook \"cm.test.io\" denied the request: keep me"
        )
    );
    assert!(cms.get_opt("keep").await.expect("get").is_some());
    let review = &hook.reviews()[0];
    assert_eq!(review["operation"], "DELETE");
    assert_eq!(review["object"], Value::Null);
    assert_eq!(review["oldObject"]["metadata"]["name"], "keep");
    assert_eq!(review["options"]["kind"], "DeleteOptions");
}

#[tokio::test]
async fn failure_policy_decides_when_the_webhook_cannot_be_called() {
    // A port nothing listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let hook = Hook::start().await;
    let (_server, client) = server(Some(format!("127.0.0.1:{port}"))).await;
    namespace(&client, "t", json!({})).await;
    let mut ignore = webhook(
        "ignore.test.io",
        &hook.ca_bundle(),
        json!({ "failurePolicy": "Ignore" }),
    );
    ignore["rules"][0]["operations"] = json!(["UPDATE"]);
    configure(
        &client,
        vec![
            webhook("fail.test.io", &hook.ca_bundle(), json!({})),
            ignore,
        ],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    let (code, message) = refused(
        cms.create(&PostParams::default(), &cm("a", json!({}), json!({})))
            .await,
    );
    assert_eq!(code, 500);
    assert_eq!(
        message,
        format!(
            "Internal error occurred: failed calling webhook \"fail.test.io\": failed to call webhook: Post \"https://hook.webhooks.svc:443/validate?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
    // Updates go only to the Ignore webhook: they go ahead.
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch(
            "test",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{ "op": "remove", "path": "/webhooks/0" }]))
                    .expect("patch"),
            ),
        )
        .await
        .expect("first webhook removed");
    cms.create(&PostParams::default(), &cm("a", json!({}), json!({})))
        .await
        .expect("created: no webhook on CREATE now");
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "k": "w" } })),
    )
    .await
    .expect("failurePolicy Ignore lets the update through");
}

#[tokio::test]
async fn a_webhook_slower_than_its_timeout_fails_the_call() {
    let (_server, client, hook) = setup().await;
    configure(
        &client,
        vec![webhook(
            "slow.test.io",
            &hook.ca_bundle(),
            json!({ "timeoutSeconds": 1 }),
        )],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    // The webhook sleeps 20s; the API server gives up after its 1s, so the
    // call returns well inside this bound.
    let (pp, slow) = (
        PostParams::default(),
        cm("slow", json!({ "test/sleep": "20" }), json!({})),
    );
    let call = cms.create(&pp, &slow);
    let result = tokio::time::timeout(Duration::from_secs(15), call)
        .await
        .expect("the API server answered before the webhook did");
    let (code, message) = refused(result);
    assert_eq!(code, 500);
    assert_eq!(
        message,
        "Internal error occurred: failed calling webhook \"slow.test.io\": failed to call webhook: Post \"https://hook.webhooks.svc:443/validate?timeout=1s\": context deadline exceeded"
    );
}

#[tokio::test]
async fn the_ca_bundle_is_the_only_trusted_root() {
    let (_server, client, _hook) = setup().await;
    let stranger = Hook::start().await;
    configure(
        &client,
        vec![webhook("cm.test.io", &stranger.ca_bundle(), json!({}))],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    let (code, message) = refused(
        cms.create(&PostParams::default(), &cm("a", json!({}), json!({})))
            .await,
    );
    assert_eq!(code, 500);
    assert_eq!(
        message,
        "Internal error occurred: failed calling webhook \"cm.test.io\": failed to call webhook: Post \"https://hook.webhooks.svc:443/validate?timeout=10s\": tls: failed to verify certificate: x509: certificate signed by unknown authority"
    );
}

#[tokio::test]
async fn url_and_endpoint_slices_reach_the_webhook_too() {
    let hook = Hook::start().await;
    let (_server, client) = server(None).await;
    namespace(&client, "t", json!({})).await;
    namespace(&client, SVC_NS, json!({})).await;
    let mut by_url = webhook("url.test.io", &hook.ca_bundle(), json!({}));
    by_url["clientConfig"] = json!({ "url": format!("https://127.0.0.1:{}/validate", hook.port), "caBundle": hook.ca_bundle() });
    configure(
        &client,
        vec![by_url, webhook("svc.test.io", &hook.ca_bundle(), json!({}))],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    let (_, message) = refused(
        cms.create(&PostParams::default(), &cm("a", json!({}), json!({})))
            .await,
    );
    assert!(
        message.ends_with(": service \"hook\" not found"),
        "{message}"
    );
    let svc = serde_json::from_value(json!({ "metadata": { "name": SVC }, "spec": { "ports": [{ "name": "https", "port": 443, "targetPort": 9443 }] } })).expect("svc");
    Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), SVC_NS)
        .create(&PostParams::default(), &svc)
        .await
        .expect("service");
    let slice = serde_json::from_value(
        json!({ "metadata": { "name": "hook-1", "labels": { "kubernetes.io/service-name": SVC } },
        "addressType": "IPv4", "ports": [{ "name": "https", "port": hook.port }],
        "endpoints": [{ "addresses": ["127.0.0.1"], "conditions": { "ready": true } }] }),
    )
    .expect("slice");
    Api::<k8s_openapi::api::discovery::v1::EndpointSlice>::namespaced(client.clone(), SVC_NS)
        .create(&PostParams::default(), &slice)
        .await
        .expect("endpoint slice");
    cms.create(&PostParams::default(), &cm("a", json!({}), json!({})))
        .await
        .expect("both webhooks reached");
    let names: Vec<Value> = hook.reviews().iter().map(|r| r["name"].clone()).collect();
    // The first create reached the URL webhook (webhooks run side by
    // side), the second both.
    assert_eq!(names, ["a", "a", "a"]);
}

#[tokio::test]
async fn dry_run_reaches_only_webhooks_without_side_effects() {
    let (_server, client, hook) = setup().await;
    configure(
        &client,
        vec![webhook(
            "cm.test.io",
            &hook.ca_bundle(),
            json!({ "sideEffects": "NoneOnDryRun" }),
        )],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let created = cms
        .create(&dry, &cm("dry", json!({}), json!({})))
        .await
        .expect("dry run");
    assert_eq!(created.metadata.name.as_deref(), Some("dry"));
    assert!(
        cms.get_opt("dry").await.expect("get").is_none(),
        "a dry run stores nothing"
    );
    let review = &hook.reviews()[0];
    assert_eq!(review["dryRun"], true);
    assert_eq!(review["options"]["dryRun"], json!(["All"]));

    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch("test", &PatchParams::default(), &Patch::Json::<()>(serde_json::from_value(json!([{ "op": "replace", "path": "/webhooks/0/sideEffects", "value": "Some" }])).expect("patch")))
        .await
        .expect("sideEffects Some");
    let (code, message) = refused(cms.create(&dry, &cm("dry", json!({}), json!({}))).await);
    assert_eq!(
        (code, message.as_str()),
        (
            400,
            "admission webhook \"cm.test.io\" does not support dry run"
        )
    );
    assert_eq!(hook.reviews().len(), 1, "refused before calling");
    cms.create(&PostParams::default(), &cm("real", json!({}), json!({})))
        .await
        .expect("a real write still reaches it");
}

#[tokio::test]
async fn warnings_come_back_as_warning_headers() {
    let (_server, client, hook) = setup().await;
    configure(
        &client,
        vec![webhook("cm.test.io", &hook.ca_bundle(), json!({}))],
    )
    .await;
    let body = serde_json::to_vec(&cm(
        "w",
        json!({ "test/warn": "pool \"x\" is deprecated" }),
        json!({}),
    ))
    .expect("body");
    let request = axum::http::Request::post("/api/v1/namespaces/t/configmaps")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body))
        .expect("request");
    let response = client.send(request).await.expect("sent");
    assert_eq!(response.status(), 201);
    let warnings: Vec<&str> = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(warnings, ["299 - \"pool \\\"x\\\" is deprecated\""]);
}
