//! The AdmissionReview v1 wire format, by hand (kube's `admission` feature
//! would rebuild kube-core for two small JSON shapes): reads a review
//! request into a [`Proposal`] for [`crate::config::admission::review`] and
//! writes its [`Verdict`] back. Pure; the webhook server does the I/O.

use crate::config::admission::{Object, Operation, Proposal, Verdict, Webhook};
use serde_json::{Value, json};

/// `apiVersion` of the reviews the controller reads and writes.
pub const API_VERSION: &str = "admission.k8s.io/v1";

/// A review request, read.
#[derive(Debug)]
pub struct Request {
    /// The request's uid, echoed in the response.
    pub uid: String,
    /// The write under review.
    pub proposal: Proposal,
}

/// Why a review request could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReviewError {
    /// Not an AdmissionReview v1 with a request uid: nothing to answer to
    /// (the server replies 400).
    #[error("not an {API_VERSION} AdmissionReview request: {0}")]
    Malformed(String),
    /// A review the server answers with a refusal naming the problem.
    #[error("{message}")]
    Unreadable {
        /// The request's uid.
        uid: String,
        /// What is wrong with the request.
        message: String,
    },
}

/// Reads `body`, sent to `hook`'s path, into a request.
pub fn parse(hook: &Webhook, body: &[u8]) -> Result<Request, ReviewError> {
    let review: Value = serde_json::from_slice(body)
        .map_err(|e| ReviewError::Malformed(format!("invalid JSON: {e}")))?;
    if review["apiVersion"] != API_VERSION || review["kind"] != "AdmissionReview" {
        return Err(ReviewError::Malformed(format!(
            "apiVersion {} kind {}",
            review["apiVersion"], review["kind"]
        )));
    }
    let request = &review["request"];
    let uid = request["uid"]
        .as_str()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| ReviewError::Malformed("request.uid is missing".into()))?
        .to_owned();
    let unreadable = |message: String| ReviewError::Unreadable {
        uid: uid.clone(),
        message,
    };
    let op = request["operation"].as_str().unwrap_or_default();
    let operation = Operation::parse(op)
        .ok_or_else(|| unreadable(format!("operation {op:?} is not reviewed by MetalLB")))?;
    let kind = &request["kind"];
    if kind["group"] != crate::api::GROUP || kind["kind"] != hook.kind {
        return Err(unreadable(format!(
            "{} reviews {}.{}, not {}.{}: fix the webhook's rules",
            hook.path,
            hook.kind,
            crate::api::GROUP,
            kind["kind"].as_str().unwrap_or_default(),
            kind["group"].as_str().unwrap_or_default(),
        )));
    }
    // On delete the object is gone and oldObject is what is deleted.
    let field = if operation == Operation::Delete {
        "oldObject"
    } else {
        "object"
    };
    let raw = request
        .get(field)
        .filter(|o| o.is_object())
        .cloned()
        .ok_or_else(|| unreadable(format!("request.{field} is missing")))?;
    let mut object = Object::from_json(hook.kind, raw)
        .map_err(|e| unreadable(format!("request.{field}: {e}")))?;
    object.default_namespace(request["namespace"].as_str().unwrap_or_default());
    Ok(Request {
        uid,
        proposal: Proposal { operation, object },
    })
}

/// The AdmissionReview answering request `uid` with `verdict`. A refusal
/// carries code 403, as upstream's (controller-runtime's `Denied`).
pub fn response(uid: &str, verdict: &Verdict) -> Value {
    let (allowed, message, warnings) = match verdict {
        Verdict::Allowed { warnings } => (true, None, warnings),
        Verdict::Denied { message, warnings } => (false, Some(message), warnings),
    };
    let mut response = json!({"uid": uid, "allowed": allowed});
    if let Some(message) = message {
        response["status"] = json!({"code": 403, "reason": "Forbidden", "message": message});
    }
    if !warnings.is_empty() {
        response["warnings"] = json!(warnings);
    }
    json!({"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::admission::WEBHOOKS;

    fn pool_hook() -> &'static Webhook {
        &WEBHOOKS[0]
    }

    fn review(request: Value) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"apiVersion": API_VERSION, "kind": "AdmissionReview", "request": request}),
        )
        .expect("json")
    }

    fn pool(name: &str) -> Value {
        json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
               "metadata": {"name": name}, "spec": {"addresses": ["10.0.0.0/24"]}})
    }

    fn kind(k: &str) -> Value {
        json!({"group": "metallb.io", "version": "v1beta1", "kind": k})
    }

    #[test]
    fn create_reads_the_object_and_takes_the_request_namespace() {
        let body = review(
            json!({"uid": "u1", "operation": "CREATE", "kind": kind("IPAddressPool"),
            "namespace": "metallb-system", "object": pool("a")}),
        );
        let req = parse(pool_hook(), &body).expect("readable");
        assert_eq!(req.uid, "u1");
        assert_eq!(req.proposal.operation, Operation::Create);
        let Object::Pool(p) = req.proposal.object else {
            panic!("not a pool")
        };
        assert_eq!(p.metadata.namespace.as_deref(), Some("metallb-system"));
        assert_eq!(p.metadata.name.as_deref(), Some("a"));
    }

    #[test]
    fn delete_reads_the_old_object() {
        let hook = WEBHOOKS
            .iter()
            .find(|w| w.kind == "BFDProfile")
            .expect("bfd");
        let body = review(
            json!({"uid": "u2", "operation": "DELETE", "kind": kind("BFDProfile"),
            "namespace": "metallb-system", "object": null,
            "oldObject": {"apiVersion": "metallb.io/v1beta1", "kind": "BFDProfile",
                          "metadata": {"name": "fast", "namespace": "metallb-system"}, "spec": {}}}),
        );
        let req = parse(hook, &body).expect("readable");
        assert_eq!(req.proposal.operation, Operation::Delete);
        assert!(
            matches!(req.proposal.object, Object::Bfd(ref b) if b.metadata.name.as_deref() == Some("fast"))
        );
    }

    #[test]
    fn unreadable_requests_name_the_problem() {
        let cases = [
            (
                review(
                    json!({"uid": "u", "operation": "CREATE", "kind": kind("Community"), "object": pool("a")}),
                ),
                "/validate-metallb-io-v1beta1-ipaddresspool reviews IPAddressPool.metallb.io, not Community.metallb.io: fix the webhook's rules",
            ),
            (
                review(json!({"uid": "u", "operation": "CONNECT", "kind": kind("IPAddressPool")})),
                "operation \"CONNECT\" is not reviewed by MetalLB",
            ),
            (
                review(json!({"uid": "u", "operation": "UPDATE", "kind": kind("IPAddressPool")})),
                "request.object is missing",
            ),
            (
                review(
                    json!({"uid": "u", "operation": "CREATE", "kind": kind("IPAddressPool"),
                    "object": {"metadata": {"name": "a"}, "spec": {"addresses": "10.0.0.0/24"}}}),
                ),
                "request.object: spec.addresses: invalid type: string \"10.0.0.0/24\", expected a sequence",
            ),
        ];
        for (body, message) in cases {
            assert_eq!(
                parse(pool_hook(), &body).expect_err("unreadable"),
                ReviewError::Unreadable {
                    uid: "u".into(),
                    message: message.into()
                }
            );
        }
    }

    #[test]
    fn malformed_requests_have_no_uid_to_answer() {
        for body in [
            b"not json".to_vec(),
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}})).expect("json"),
            review(json!({"operation": "CREATE"})),
        ] {
            assert!(matches!(
                parse(pool_hook(), &body),
                Err(ReviewError::Malformed(_))
            ));
        }
    }

    #[test]
    fn responses_echo_the_uid_and_carry_a_refusal_and_warnings() {
        let allowed = response("u1", &Verdict::Allowed { warnings: vec![] });
        assert_eq!(
            allowed,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "response": {"uid": "u1", "allowed": true}})
        );
        let denied = response(
            "u2",
            &Verdict::Denied {
                message: "no".into(),
                warnings: vec!["careful".into()],
            },
        );
        assert_eq!(
            denied,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "response": {"uid": "u2", "allowed": false, "warnings": ["careful"],
                                "status": {"code": 403, "reason": "Forbidden", "message": "no"}}})
        );
    }
}
