//! The AdmissionReview (admission.k8s.io/v1) a validating webhook gets,
//! how its answer is read, and the errors kube-apiserver turns a denial or
//! a failed call into. Pure.

use super::rules::{Operation, Request};
use crate::auth::User;
use crate::error::ApiError;
use serde_json::{Value, json};

/// The resource and kind a webhook is told about (its matched version, or
/// the request's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned<'a> {
    /// API group.
    pub group: &'a str,
    /// Version.
    pub version: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Plural.
    pub resource: &'a str,
}

impl Versioned<'_> {
    fn kind_json(&self) -> Value {
        json!({ "group": self.group, "version": self.version, "kind": self.kind })
    }
    fn resource_json(&self) -> Value {
        json!({ "group": self.group, "version": self.version, "resource": self.resource })
    }
}

/// Everything in a review besides the rules' view of the request.
pub struct Call<'a> {
    /// The request's uid (one per webhook call).
    pub uid: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// Who asks.
    pub user: &'a User,
    /// `?dryRun=All`.
    pub dry_run: bool,
    /// As the webhook sees it (its matched version).
    pub matched: Versioned<'a>,
    /// As the client asked.
    pub requested: Versioned<'a>,
}

/// The AdmissionReview sent to a webhook; `object` and `old_object` are
/// already at the matched version.
pub fn admission_review(
    call: &Call<'_>,
    request: &Request<'_>,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Value {
    let options_kind = match request.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let mut options = json!({ "apiVersion": "meta.k8s.io/v1", "kind": options_kind });
    if call.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    let mut r = json!({
        "uid": call.uid,
        "kind": call.matched.kind_json(),
        "resource": call.matched.resource_json(),
        "requestKind": call.requested.kind_json(),
        "requestResource": call.requested.resource_json(),
        "name": call.name,
        "operation": request.operation.as_str(),
        "userInfo": { "username": call.user.name, "uid": call.user.uid, "groups": call.user.groups },
        "object": object.cloned().unwrap_or(Value::Null),
        "oldObject": old_object.cloned().unwrap_or(Value::Null),
        "dryRun": call.dry_run,
        "options": options,
    });
    if !request.namespace.is_empty() {
        r["namespace"] = json!(request.namespace);
    }
    if !request.subresource.is_empty() {
        r["subResource"] = json!(request.subresource);
        r["requestSubResource"] = json!(request.subresource);
    }
    json!({ "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": r })
}

/// A webhook's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// `response.allowed`.
    pub allowed: bool,
    /// `response.status` (why it denied).
    pub status: Value,
    /// `response.warnings`.
    pub warnings: Vec<String>,
}

/// Reads a webhook's AdmissionReview answer to the request `uid`; the
/// error says why the answer is not one (kube-apiserver's wording).
pub fn verdict(uid: &str, body: &Value) -> Result<Verdict, String> {
    if body["apiVersion"] != "admission.k8s.io/v1" || body["kind"] != "AdmissionReview" {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            body["apiVersion"].as_str().unwrap_or_default(),
            body["kind"].as_str().unwrap_or_default()
        ));
    }
    let response = &body["response"];
    if !response.is_object() {
        return Err("webhook response was absent".into());
    }
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    Ok(Verdict {
        allowed: response["allowed"] == json!(true),
        status: response["status"].clone(),
        warnings: response["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_owned))
            .collect(),
    })
}

/// A denial: 400 unless the webhook's status says another code of 400 or
/// more, with the webhook's reason and its message after kube-apiserver's
/// prefix.
pub fn denied(webhook: &str, status: &Value) -> ApiError {
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    let message = status["message"].as_str().unwrap_or_default();
    let reason = status["reason"].as_str().unwrap_or_default();
    let text = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    ApiError::custom(code, reason, text)
}

/// A webhook that could not be called (or answered nonsense) under
/// failurePolicy Fail: `reason` is what went wrong.
pub fn call_failed(webhook: &str, reason: &str) -> ApiError {
    ApiError::internal(format!("failed calling webhook {webhook:?}: {reason}"))
}

/// A dry run that would reach a webhook with side effects.
pub fn dry_run_unsupported(webhook: &str) -> ApiError {
    ApiError::bad_request(format!(
        "admission webhook {webhook:?} does not support dry run"
    ))
}

/// A `Warning` header's value (RFC 7234 warn-code 299, no agent).
pub fn warning_header(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    // Header values cannot carry control characters.
    let clean: String = escaped
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("299 - \"{clean}\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case(json!({ "message": "no overlap allowed" }), 400, "admission webhook \"pools.metallb.io\" denied the request: no overlap allowed")]
    #[case(json!({ "code": 403, "message": "m", "reason": "Forbidden" }), 403, "admission webhook \"pools.metallb.io\" denied the request: m")]
    #[case(json!({ "code": 200, "reason": "Because" }), 400, "admission webhook \"pools.metallb.io\" denied the request: Because")]
    #[case(json!(null), 400, "admission webhook \"pools.metallb.io\" denied the request without explanation")]
    fn denials(#[case] status: Value, #[case] code: u16, #[case] message: &str) {
        let e = denied("pools.metallb.io", &status);
        assert_eq!((e.code, e.message.as_str()), (code, message));
    }

    #[test]
    fn failed_calls_are_internal_errors() {
        let e = call_failed(
            "w",
            "failed to call webhook: Post \"https://s.ns.svc:443/v?timeout=10s\": context deadline exceeded",
        );
        assert_eq!(e.code, 500);
        assert_eq!(
            e.message,
            "Internal error occurred: failed calling webhook \"w\": failed to call webhook: Post \"https://s.ns.svc:443/v?timeout=10s\": context deadline exceeded"
        );
        assert_eq!(e.to_status()["reason"], "InternalError");
    }

    #[rstest]
    #[case(json!({ "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": { "uid": "u", "allowed": true, "warnings": ["careful"] } }), Ok(true))]
    #[case(json!({ "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": { "uid": "u" } }), Ok(false))]
    #[case(json!({ "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": { "uid": "other", "allowed": true } }), Err("expected response.uid=\"u\", got \"other\"".to_owned()))]
    #[case(json!({ "apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "response": { "uid": "u", "allowed": true } }), Err("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview".to_owned()))]
    #[case(json!({ "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview" }), Err("webhook response was absent".to_owned()))]
    fn answers(#[case] body: Value, #[case] expected: Result<bool, String>) {
        assert_eq!(verdict("u", &body).map(|v| v.allowed), expected);
    }

    #[test]
    fn review_carries_the_request() {
        let user = User {
            name: "alice".into(),
            uid: "1".into(),
            groups: vec!["system:authenticated".into()],
        };
        let old = json!({ "metadata": { "name": "p" } });
        let request = Request {
            operation: Operation::Delete,
            group: "metallb.io",
            version: "v1beta1",
            resource: "bgppeers",
            subresource: "",
            namespace: "metallb-system",
            object: None,
            old_object: Some(&old),
            namespace_object: None,
        };
        let v = |version| Versioned {
            group: "metallb.io",
            version,
            kind: "BGPPeer",
            resource: "bgppeers",
        };
        let call = Call {
            uid: "u",
            name: "p",
            user: &user,
            dry_run: true,
            matched: v("v1beta2"),
            requested: v("v1beta1"),
        };
        let review = admission_review(&call, &request, None, Some(&old));
        let r = &review["request"];
        assert_eq!(r["operation"], "DELETE");
        assert_eq!(r["kind"]["version"], "v1beta2");
        assert_eq!(r["requestKind"]["version"], "v1beta1");
        assert_eq!(r["resource"]["resource"], "bgppeers");
        assert_eq!(r["namespace"], "metallb-system");
        assert_eq!(r["object"], Value::Null);
        assert_eq!(r["oldObject"], old);
        assert_eq!(r["dryRun"], true);
        assert_eq!(r["options"]["kind"], "DeleteOptions");
        assert_eq!(r["options"]["dryRun"], json!(["All"]));
        assert_eq!(r["userInfo"]["username"], "alice");
        assert!(r.get("subResource").is_none());
    }

    #[rstest]
    #[case("plain", "299 - \"plain\"")]
    #[case("a \"quoted\" word", "299 - \"a \\\"quoted\\\" word\"")]
    #[case("two\nlines", "299 - \"two lines\"")]
    fn warnings(#[case] text: &str, #[case] header: &str) {
        assert_eq!(warning_header(text), header);
    }
}
