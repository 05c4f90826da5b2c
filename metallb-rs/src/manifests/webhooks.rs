//! The webhooks' objects: the ValidatingWebhookConfiguration (from
//! [`WEBHOOKS`], the table the server routes by), BGPPeer's conversion
//! webhook in its CRD, their Service, and the Secret the controller fills
//! with the serving certificate.
//!
//! Choices, against upstream's failure threads ("failed calling webhook
//! ... context deadline exceeded / connection refused / x509"):
//! - `failurePolicy: Fail`, as upstream: refusing an invalid object at
//!   apply time is the contract. Safety never depends on it (the
//!   controller keeps the last valid configuration), so failing closed
//!   costs only configuration writes while no replica is Ready, and a
//!   replica is Ready only once it serves with its CA in place (the
//!   Service then has endpoints: no "connection refused" or "x509").
//! - `timeoutSeconds: 5` (upstream leaves the default 10): the server
//!   answers within `k8s::webhook::REVIEW_BUDGET` (3 s), with a refusal
//!   saying why when the API is slow, so 5 s bounds only an answer lost
//!   on the network, and a `kubectl apply` of many objects waits 5 s per
//!   object at worst instead of 10.
//! - No deadlock: the rules cover the six configuration kinds only;
//!   nothing the controller writes to start (its Secret, Lease,
//!   ConfigurationState, this configuration's caBundle, Service status,
//!   pool status) passes through them. Escape hatch when no replica can
//!   run: delete this configuration.
//! - The conversion webhook has no failure policy: with no replica Ready,
//!   reading or writing a BGPPeer at v1beta1 fails. The controller reads
//!   and watches BGPPeers at v1beta2, the storage version, so it never
//!   needs its own conversion to start. Escape hatch: set the CRD's
//!   `spec.conversion.strategy` to `None`.

use crate::config::admission::WEBHOOKS;
use crate::k8s::webhook::{CONFIGURATION, CONVERSION_CRD, CONVERT_PATH, PORT, SECRET, SERVICE};
use serde_json::{Value, json};

/// The API server's wait for one answer (see the module doc).
pub const TIMEOUT_SECONDS: u8 = 5;

/// The Secret, empty: the controller fills it (and `kubectl delete -f`
/// removes it with the rest).
pub fn secret(namespace: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": SECRET, "namespace": namespace, "labels": { "app": "metallb" } },
        "type": "Opaque",
    })
}

/// The Service the API server dials: 443 to the controller's webhook port.
pub fn service(namespace: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": SERVICE, "namespace": namespace, "labels": { "app": "metallb" } },
        "spec": {
            "selector": super::labels("controller"),
            "ports": [{ "name": "webhook", "port": 443, "targetPort": "webhook-server" }],
        },
    })
}

/// The configuration, without a caBundle: the controller sets it.
pub fn configuration(namespace: &str) -> Value {
    let webhooks: Vec<Value> = WEBHOOKS
        .iter()
        .map(|w| {
            json!({
                "name": w.name,
                "admissionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": { "name": SERVICE, "namespace": namespace, "path": w.path },
                },
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "timeoutSeconds": TIMEOUT_SECONDS,
                "rules": [{
                    "apiGroups": [crate::api::GROUP],
                    "apiVersions": [w.version],
                    "operations": w.operations.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
                    "resources": [w.plural],
                }],
            })
        })
        .collect();
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": { "name": CONFIGURATION, "labels": { "app": "metallb" } },
        "webhooks": webhooks,
    })
}

/// Adds BGPPeer's conversion webhook to its CRD (the
/// `spec.conversion` upstream's kustomize patch adds to
/// `metallb-native.yaml`; the CRD files under `manifests/crds` stay
/// without it, as upstream's bases, so applying them alone needs no
/// controller to read a BGPPeer at v1beta1), without a caBundle: the
/// controller sets it. Other objects are left alone. Only ConversionReview
/// v1 is asked for (upstream lists its API versions there; kube-apiserver
/// skips what it does not know and takes v1beta1).
pub fn add_conversion(crd: &mut Value, namespace: &str) {
    if crd["kind"] == "CustomResourceDefinition" && crd["metadata"]["name"] == CONVERSION_CRD {
        crd["spec"]["conversion"] = json!({
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": { "name": SERVICE, "namespace": namespace, "path": CONVERT_PATH },
                },
            },
        });
    }
}

/// The controller container's webhook port.
pub fn container_port() -> Value {
    json!({ "name": "webhook-server", "containerPort": PORT })
}
