//! Validating admission webhooks and CRD conversion webhooks, against a
//! small HTTPS webhook inside the test: the API server must call them as
//! kube-apiserver does, and refuse, let through or convert accordingly.

mod common;

use axum::extract::State;
use axum::http::Uri;
use base64::Engine as _;
use common::client_for;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use lab_apiserver::{ApiServer, Identity, Options};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The webhook's Service, as clientConfig names it.
const SVC_NS: &str = "webhooks";
const SVC: &str = "hook";

/// A CA and a serving certificate for `hook.webhooks.svc` and 127.0.0.1.
fn identity() -> Identity {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "webhook-ca");
    let ca_cert = ca.self_signed(&ca_key).expect("CA");
    let key = rcgen::KeyPair::generate().expect("key");
    let leaf =
        rcgen::CertificateParams::new(vec![format!("{SVC}.{SVC_NS}.svc"), "127.0.0.1".to_owned()])
            .expect("leaf params");
    let cert = leaf
        .signed_by(&key, &rcgen::Issuer::new(ca, ca_key))
        .expect("leaf");
    Identity {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

/// What the webhook received: (path, review).
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// An HTTPS webhook on a loopback port: `/validate` answers
/// AdmissionReviews as the object's `test/*` annotations say (deny with a
/// message and code, warn, sleep); `/convert` converts Widgets between
/// v1 (`spec.size`, a string) and v2 (`spec.count`, a number).
struct Hook {
    port: u16,
    ca_pem: String,
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hook {
    async fn start() -> Self {
        let id = identity();
        let acceptor = id.acceptor().expect("acceptor");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen: Seen = Arc::default();
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(seen.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
                });
            }
        });
        Self {
            port,
            ca_pem: id.ca_pem,
            seen,
            task,
        }
    }

    fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// The AdmissionReview requests received so far.
    fn reviews(&self) -> Vec<Value> {
        self.received("/validate")
    }

    fn received(&self, path: &str) -> Vec<Value> {
        self.seen
            .lock()
            .expect("seen")
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, r)| r["request"].clone())
            .collect()
    }
}

async fn answer(
    State(seen): State<Seen>,
    uri: Uri,
    axum::Json(review): axum::Json<Value>,
) -> axum::Json<Value> {
    seen.lock()
        .expect("seen")
        .push((uri.path().to_owned(), review.clone()));
    let req = &review["request"];
    if uri.path() == "/convert" {
        return axum::Json(convert(req));
    }
    let object = if req["object"].is_null() {
        &req["oldObject"]
    } else {
        &req["object"]
    };
    let ann = &object["metadata"]["annotations"];
    if let Some(secs) = ann["test/sleep"].as_str().and_then(|s| s.parse().ok()) {
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
    let mut response = json!({ "uid": req["uid"], "allowed": true });
    if let Some(w) = ann["test/warn"].as_str() {
        response["warnings"] = json!([w]);
    }
    if let Some(m) = ann["test/deny"].as_str() {
        response["allowed"] = json!(false);
        response["status"] = json!({ "message": m });
        if let Some(code) = ann["test/code"]
            .as_str()
            .and_then(|c| c.parse::<u16>().ok())
        {
            response["status"]["code"] = json!(code);
        }
    }
    axum::Json(
        json!({ "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response }),
    )
}

/// The Widget conversion: v1 `spec.size` "3" <-> v2 `spec.count` 3.
fn convert(req: &Value) -> Value {
    let desired = req["desiredAPIVersion"].as_str().unwrap_or_default();
    let mut converted = Vec::new();
    let mut result = json!({ "status": "Success" });
    for o in req["objects"].as_array().into_iter().flatten() {
        if o["metadata"]["annotations"]["test/fail-conversion"].is_string() {
            result = json!({ "status": "Failure", "message": format!("refusing to convert {}", o["metadata"]["name"].as_str().unwrap_or_default()) });
        }
        let mut c = o.clone();
        c["apiVersion"] = json!(desired);
        let spec = &o["spec"];
        c["spec"] = if desired.ends_with("/v2") {
            json!({ "count": spec["size"].as_str().and_then(|s| s.parse::<i64>().ok()) })
        } else {
            json!({ "size": spec["count"].as_i64().map(|n| n.to_string()) })
        };
        converted.push(c);
    }
    json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": { "uid": req["uid"], "convertedObjects": converted, "result": result } })
}

/// A server that reaches `webhooks/hook` at `addr` (when given).
async fn server(addr: Option<String>) -> (ApiServer, Client) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let mut options = Options::default();
    if let Some(addr) = addr {
        options
            .webhook_services
            .insert(format!("{SVC_NS}/{SVC}"), addr);
    }
    let server = ApiServer::start_with(listener, options)
        .await
        .expect("starts");
    let client = client_for(&server.kubeconfig("lab")).await;
    (server, client)
}

/// A server and a webhook it reaches through the Service override.
async fn setup() -> (ApiServer, Client, Hook) {
    let hook = Hook::start().await;
    let (server, client) = server(Some(format!("127.0.0.1:{}", hook.port))).await;
    namespace(&client, "t", json!({})).await;
    (server, client, hook)
}

async fn namespace(client: &Client, name: &str, labels: Value) {
    let ns: Namespace =
        serde_json::from_value(json!({ "metadata": { "name": name, "labels": labels } }))
            .expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
}

/// A webhook on ConfigMap creates and updates through the Service, with
/// `extra` merged in.
fn webhook(name: &str, ca_bundle: &str, extra: Value) -> Value {
    let mut w = json!({
        "name": name,
        "clientConfig": { "service": { "namespace": SVC_NS, "name": SVC, "path": "/validate" }, "caBundle": ca_bundle },
        "rules": [{ "operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"] }],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    if let (Some(w), Some(extra)) = (w.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            w.insert(k.clone(), v.clone());
        }
    }
    w
}

async fn configure(client: &Client, webhooks: Vec<Value>) {
    let config: ValidatingWebhookConfiguration =
        serde_json::from_value(json!({ "metadata": { "name": "test" }, "webhooks": webhooks }))
            .expect("configuration");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &config)
        .await
        .expect("configuration created");
}

fn cm(name: &str, annotations: Value, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({ "metadata": { "name": name, "annotations": annotations, "labels": labels }, "data": { "k": "v" } }))
        .expect("cm")
}

/// The API error of a call that must fail: (code, message).
fn refused<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

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
    drop(hook);
    let (code, message) = refused(v1.list(&ListParams::default()).await);
    assert_eq!(code, 500);
    assert!(message.starts_with("conversion webhook for example.com/v2, Kind=Widget failed: Post \"https://hook.webhooks.svc:443/convert?timeout=30s\": dial tcp 127.0.0.1:"), "{message}");
    assert!(
        message.ends_with("connect: connection refused"),
        "{message}"
    );
}
