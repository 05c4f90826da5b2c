//! The create-only API objects that answer questions instead of being
//! stored: SelfSubjectAccessReview, SubjectAccessReview,
//! LocalSubjectAccessReview (`kubectl auth can-i`, metrics authorization),
//! TokenReview (metrics authentication), SelfSubjectReview (`kubectl auth
//! whoami`), and a ServiceAccount's `token` subresource (TokenRequest:
//! `kubectl create token`).

use crate::auth::User;
use crate::auth::rbac::Request;
use crate::auth::token::Claims;
use crate::error::ApiError;
use crate::gate;
use crate::state::State;
use serde_json::{Value, json};

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// The request a review's `spec` asks about.
fn asked(spec: &Value) -> Result<Request, ApiError> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    if let Some(r) = spec.get("resourceAttributes").filter(|r| r.is_object()) {
        return Ok(Request::Resource {
            verb: s(&r["verb"]),
            group: s(&r["group"]),
            resource: s(&r["resource"]),
            subresource: s(&r["subresource"]),
            namespace: s(&r["namespace"]),
            name: s(&r["name"]),
        });
    }
    if let Some(r) = spec.get("nonResourceAttributes").filter(|r| r.is_object()) {
        return Ok(Request::NonResource {
            verb: s(&r["verb"]),
            path: s(&r["path"]),
        });
    }
    Err(ApiError::invalid(
        "SubjectAccessReview",
        "",
        vec![(
            "spec.resourceAttributes".into(),
            "exactly one of resourceAttributes or nonResourceAttributes must be set".into(),
        )],
    ))
}

fn access_status(s: &State, user: &User, request: &Request) -> Value {
    match gate::authorize(s, user, request) {
        Ok(()) => json!({ "allowed": true, "reason": "allowed by RBAC" }),
        Err(_) => json!({ "allowed": false }),
    }
}

/// Answers a review created by `user` in `namespace`: the review with
/// its status.
pub fn answer(
    s: &State,
    user: &User,
    plural: &str,
    namespace: &str,
    mut body: Value,
) -> Result<Value, ApiError> {
    let spec = body["spec"].clone();
    let status = match plural {
        "selfsubjectaccessreviews" => access_status(s, user, &asked(&spec)?),
        "subjectaccessreviews" | "localsubjectaccessreviews" => {
            let request = asked(&spec)?;
            if plural == "localsubjectaccessreviews"
                && let Request::Resource {
                    namespace: asked_ns,
                    ..
                } = &request
                && asked_ns != namespace
            {
                return Err(ApiError::bad_request(format!(
                    "spec.resourceAttributes.namespace must be {namespace:?}, the namespace of the request"
                )));
            }
            let subject = User {
                name: spec["user"].as_str().unwrap_or_default().to_owned(),
                uid: spec["uid"].as_str().unwrap_or_default().to_owned(),
                groups: strings(&spec["groups"]),
            };
            access_status(s, &subject, &request)
        }
        "tokenreviews" => {
            let token = spec["token"].as_str().unwrap_or_default();
            let mut headers = axum::http::HeaderMap::new();
            let verified = axum::http::HeaderValue::from_str(&format!("Bearer {token}"))
                .ok()
                .map(|v| {
                    headers.insert(axum::http::header::AUTHORIZATION, v);
                    gate::authenticate(s, &headers)
                });
            match verified {
                Some(Ok(u)) if u.name != "system:anonymous" => json!({
                    "authenticated": true,
                    "user": { "username": u.name, "uid": u.uid, "groups": u.groups },
                    "audiences": spec["audiences"].as_array().cloned().unwrap_or_default(),
                }),
                _ => json!({ "authenticated": false, "error": "invalid bearer token" }),
            }
        }
        "selfsubjectreviews" => json!({
            "userInfo": { "username": user.name, "uid": user.uid, "groups": user.groups },
        }),
        other => return Err(ApiError::not_found("review", other)),
    };
    body["status"] = status;
    if body["metadata"].is_null() {
        body["metadata"] = json!({});
    }
    Ok(body)
}

/// A TokenRequest for ServiceAccount `namespace/name`.
pub fn token_request(
    s: &State,
    namespace: &str,
    name: &str,
    mut body: Value,
) -> Result<Value, ApiError> {
    let Some(account) = s
        .store
        .get(&(String::new(), "serviceaccounts".into()), namespace, name)
    else {
        return Err(ApiError::not_found("serviceaccounts", name));
    };
    let uid = account["metadata"]["uid"].as_str().map(str::to_owned);
    let seconds = body["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(3600)
        .max(600);
    let expires = jiff::Timestamp::now().as_second() + seconds;
    let token = s.signer.sign(&Claims::service_account(
        namespace,
        name,
        uid.as_deref(),
        Some(expires),
    ));
    let expiration = jiff::Timestamp::from_second(expires)
        .map(|t| t.to_string())
        .map_err(|e| ApiError::bad_request(format!("spec.expirationSeconds: {e}")))?;
    body["apiVersion"] = json!("authentication.k8s.io/v1");
    body["kind"] = json!("TokenRequest");
    body["metadata"] = json!({ "name": name, "namespace": namespace });
    body["spec"]["expirationSeconds"] = json!(seconds);
    body["status"] = json!({ "token": token, "expirationTimestamp": expiration });
    Ok(body)
}
