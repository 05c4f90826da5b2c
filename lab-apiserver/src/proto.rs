//! The protobuf bodies real clients send without a JSON fallback
//! (`kubectl auth can-i`, `kubectl create token`, `kubectl auth whoami`,
//! `kubectl create deployment`, Helm's release Secrets and Namespaces):
//! the Kubernetes envelope (`k8s\0` + `runtime.Unknown`), the few review
//! messages, the Deployment ([`workload`]) and the core kinds
//! ([`core`]), decoded to the JSON this server works with. Every other
//! protobuf body still gets 415 ([`decodes`] says which are decoded).

mod core;
mod meta;
mod workload;

use prost::Message;
use serde_json::{Value, json};

#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", tag = "2")]
    raw: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, tag = "1")]
    api_version: String,
    #[prost(string, tag = "2")]
    kind: String,
}

#[derive(Clone, PartialEq, Message)]
struct ResourceAttributes {
    #[prost(string, tag = "1")]
    namespace: String,
    #[prost(string, tag = "2")]
    verb: String,
    #[prost(string, tag = "3")]
    group: String,
    #[prost(string, tag = "4")]
    version: String,
    #[prost(string, tag = "5")]
    resource: String,
    #[prost(string, tag = "6")]
    subresource: String,
    #[prost(string, tag = "7")]
    name: String,
}

#[derive(Clone, PartialEq, Message)]
struct NonResourceAttributes {
    #[prost(string, tag = "1")]
    path: String,
    #[prost(string, tag = "2")]
    verb: String,
}

/// SelfSubjectAccessReviewSpec and SubjectAccessReviewSpec share their
/// first two fields.
#[derive(Clone, PartialEq, Message)]
struct AccessReviewSpec {
    #[prost(message, optional, tag = "1")]
    resource_attributes: Option<ResourceAttributes>,
    #[prost(message, optional, tag = "2")]
    non_resource_attributes: Option<NonResourceAttributes>,
    #[prost(string, tag = "3")]
    user: String,
    #[prost(string, repeated, tag = "4")]
    groups: Vec<String>,
    #[prost(string, tag = "6")]
    uid: String,
}

#[derive(Clone, PartialEq, Message)]
struct AccessReview {
    #[prost(message, optional, tag = "2")]
    spec: Option<AccessReviewSpec>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenRequestSpec {
    #[prost(string, repeated, tag = "1")]
    audiences: Vec<String>,
    #[prost(int64, optional, tag = "4")]
    expiration_seconds: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenRequest {
    #[prost(message, optional, tag = "2")]
    spec: Option<TokenRequestSpec>,
}

const MAGIC: &[u8] = b"k8s\0";

/// Whether [`decode`] reads a protobuf body of `method` on
/// `group`/`plural`: creates and replaces of the kinds above, and the
/// DeleteOptions of any delete.
pub fn decodes(method: &axum::http::Method, group: &str, plural: &str) -> bool {
    match *method {
        axum::http::Method::POST | axum::http::Method::PUT => matches!(
            (group, plural),
            ("apps", "deployments") | ("", "secrets") | ("", "namespaces")
        ),
        axum::http::Method::DELETE => true,
        _ => false,
    }
}

/// The JSON form of a protobuf body, for the kinds listed above.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let unknown = body
        .strip_prefix(MAGIC)
        .ok_or("not a Kubernetes protobuf body (no k8s\\0 prefix)")
        .and_then(|b| Unknown::decode(b).map_err(|_| "malformed protobuf envelope"))?;
    let meta = unknown.type_meta.unwrap_or_default();
    let raw = unknown.raw.as_slice();
    let bad = |e: prost::DecodeError| format!("malformed {}: {e}", meta.kind);
    let spec = match meta.kind.as_str() {
        "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let spec = AccessReview::decode(raw)
                .map_err(bad)?
                .spec
                .unwrap_or_default();
            let mut out = json!({});
            if let Some(r) = spec.resource_attributes {
                out["resourceAttributes"] = json!({ "namespace": r.namespace, "verb": r.verb, "group": r.group,
                    "version": r.version, "resource": r.resource, "subresource": r.subresource, "name": r.name });
            }
            if let Some(n) = spec.non_resource_attributes {
                out["nonResourceAttributes"] = json!({ "path": n.path, "verb": n.verb });
            }
            if meta.kind != "SelfSubjectAccessReview" {
                out["user"] = json!(spec.user);
                out["groups"] = json!(spec.groups);
                out["uid"] = json!(spec.uid);
            }
            out
        }
        "TokenRequest" => {
            let spec = TokenRequest::decode(raw)
                .map_err(bad)?
                .spec
                .unwrap_or_default();
            json!({ "audiences": spec.audiences, "expirationSeconds": spec.expiration_seconds })
        }
        "SelfSubjectReview" => json!({}),
        "Deployment" | "Secret" | "Namespace" | "DeleteOptions" => {
            let mut d = match meta.kind.as_str() {
                "Deployment" => workload::deployment(raw),
                "Secret" => core::secret(raw),
                "Namespace" => core::namespace(raw),
                _ => meta::delete_options(raw),
            }
            .map_err(bad)?;
            d["apiVersion"] = json!(meta.api_version);
            d["kind"] = json!(meta.kind);
            return Ok(d);
        }
        other => return Err(format!("{other} bodies must be JSON here")),
    };
    Ok(json!({ "apiVersion": meta.api_version, "kind": meta.kind, "metadata": {}, "spec": spec }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_self_subject_access_review() {
        let review = AccessReview {
            spec: Some(AccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: "metallb-system".into(),
                    verb: "delete".into(),
                    group: "metallb.io".into(),
                    resource: "ipaddresspools".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        };
        let envelope = Unknown {
            type_meta: Some(TypeMeta {
                api_version: "authorization.k8s.io/v1".into(),
                kind: "SelfSubjectAccessReview".into(),
            }),
            raw: review.encode_to_vec(),
        };
        let mut body = MAGIC.to_vec();
        body.extend(envelope.encode_to_vec());
        let v = decode(&body).expect("decodes");
        assert_eq!(v["kind"], "SelfSubjectAccessReview");
        assert_eq!(v["spec"]["resourceAttributes"]["verb"], "delete");
        assert_eq!(v["spec"]["resourceAttributes"]["group"], "metallb.io");
        assert!(v["spec"].get("user").is_none());
        assert!(decode(b"{}").is_err());
    }
}
