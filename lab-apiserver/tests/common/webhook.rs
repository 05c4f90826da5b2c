//! A small HTTPS webhook for the admission and conversion tests, and the
//! API server set-up around it.

use super::client_for;
use axum::extract::State;
use axum::http::Uri;
use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::PostParams;
use kube::{Api, Client};
use lab_apiserver::{ApiServer, Identity, Options};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The webhook's Service, as clientConfig names it.
pub const SVC_NS: &str = "webhooks";
pub const SVC: &str = "hook";

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
pub type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// An HTTPS webhook on a loopback port: `/validate` answers
/// AdmissionReviews as the object's `test/*` annotations say (deny with a
/// message and code, warn, sleep); `/convert` converts Widgets between
/// v1 (`spec.size`, a string) and v2 (`spec.count`, a number).
pub struct Hook {
    /// Its loopback port.
    pub port: u16,
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
    pub async fn start() -> Self {
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

    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// The AdmissionReview requests received so far.
    pub fn reviews(&self) -> Vec<Value> {
        self.received("/validate")
    }

    pub fn received(&self, path: &str) -> Vec<Value> {
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
pub async fn server(addr: Option<String>) -> (ApiServer, Client) {
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
pub async fn setup() -> (ApiServer, Client, Hook) {
    let hook = Hook::start().await;
    let (server, client) = server(Some(format!("127.0.0.1:{}", hook.port))).await;
    namespace(&client, "t", json!({})).await;
    (server, client, hook)
}

pub async fn namespace(client: &Client, name: &str, labels: Value) {
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
pub fn webhook(name: &str, ca_bundle: &str, extra: Value) -> Value {
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

pub async fn configure(client: &Client, webhooks: Vec<Value>) {
    let config: ValidatingWebhookConfiguration =
        serde_json::from_value(json!({ "metadata": { "name": "test" }, "webhooks": webhooks }))
            .expect("configuration");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &config)
        .await
        .expect("configuration created");
}

pub fn cm(name: &str, annotations: Value, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({ "metadata": { "name": name, "annotations": annotations, "labels": labels }, "data": { "k": "v" } }))
        .expect("cm")
}

/// The API error of a call that must fail: (code, message).
pub fn refused<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}
