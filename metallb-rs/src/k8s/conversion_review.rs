//! The ConversionReview wire format (apiextensions.k8s.io/v1; v1beta1 has
//! the same shape and is answered in kind), by hand as
//! [`super::admission_review`]: reads the API server's request, converts
//! each object with [`crate::api::conversion::convert`] and writes the
//! answer. Pure; the webhook server does the I/O.

use crate::api::conversion;
use serde_json::{Value, json};

/// The ConversionReview versions answered; the manifests ask for the first.
pub const API_VERSIONS: [&str; 2] = ["apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"];

/// A request with no uid to answer to (the server replies 400).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a ConversionReview request: {0}")]
pub struct Malformed(String);

/// The ConversionReview answering `body`: every object at the desired
/// version, or `result.status: Failure` with the first object that could
/// not be converted and why (the API server then fails the read or write
/// with that message, as it does upstream's).
pub fn answer(body: &[u8]) -> Result<Value, Malformed> {
    let review: Value =
        serde_json::from_slice(body).map_err(|e| Malformed(format!("invalid JSON: {e}")))?;
    let api_version = review["apiVersion"].as_str().unwrap_or_default();
    if !API_VERSIONS.contains(&api_version) || review["kind"] != "ConversionReview" {
        return Err(Malformed(format!(
            "apiVersion {} kind {}",
            review["apiVersion"], review["kind"]
        )));
    }
    let request = &review["request"];
    let uid = request["uid"]
        .as_str()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| Malformed("request.uid is missing".into()))?;
    let converted = convert_all(request);
    let response = match converted {
        Ok(objects) => json!({
            "uid": uid,
            "convertedObjects": objects,
            "result": {"status": "Success"},
        }),
        Err(message) => json!({
            "uid": uid,
            "result": {"status": "Failure", "message": message},
        }),
    };
    Ok(json!({"apiVersion": api_version, "kind": "ConversionReview", "response": response}))
}

fn convert_all(request: &Value) -> Result<Vec<Value>, String> {
    let desired = request["desiredAPIVersion"]
        .as_str()
        .ok_or("request.desiredAPIVersion is missing")?;
    let objects = request["objects"]
        .as_array()
        .ok_or("request.objects is missing")?;
    objects
        .iter()
        .map(|o| conversion::convert(o, desired).map_err(|e| e.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(api_version: &str, request: Value) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"apiVersion": api_version, "kind": "ConversionReview", "request": request}),
        )
        .expect("json")
    }

    fn peer(api_version: &str, name: &str, spec: Value) -> Value {
        json!({"apiVersion": api_version, "kind": "BGPPeer",
               "metadata": {"name": name, "namespace": "metallb-system"}, "spec": spec})
    }

    #[test]
    fn every_object_comes_back_at_the_desired_version_in_order() {
        let spec = json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1"});
        let body = review(
            "apiextensions.k8s.io/v1",
            json!({"uid": "u1", "desiredAPIVersion": "metallb.io/v1beta2",
                   "objects": [peer("metallb.io/v1beta1", "a", spec.clone()), peer("metallb.io/v1beta1", "b", spec.clone())]}),
        );
        assert_eq!(
            answer(&body),
            Ok(
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                      "response": {"uid": "u1", "result": {"status": "Success"},
                                   "convertedObjects": [peer("metallb.io/v1beta2", "a", spec.clone()),
                                                        peer("metallb.io/v1beta2", "b", spec)]}})
            )
        );
    }

    #[test]
    fn a_v1beta1_review_is_answered_as_v1beta1() {
        let body = review(
            "apiextensions.k8s.io/v1beta1",
            json!({"uid": "u", "desiredAPIVersion": "metallb.io/v1beta1", "objects": []}),
        );
        let answer = answer(&body).expect("answered");
        assert_eq!(answer["apiVersion"], "apiextensions.k8s.io/v1beta1");
        assert_eq!(answer["response"]["result"]["status"], "Success");
    }

    #[test]
    fn failures_name_the_object_and_the_problem() {
        let good = peer(
            "metallb.io/v1beta1",
            "good",
            json!({"myASN": 1, "peerASN": 2, "peerAddress": "10.0.0.1"}),
        );
        let bad = peer(
            "metallb.io/v1beta1",
            "bad",
            json!({"myASN": "one", "peerASN": 2, "peerAddress": "10.0.0.1"}),
        );
        let cases = [
            (
                json!({"uid": "u", "desiredAPIVersion": "metallb.io/v1beta2", "objects": [good.clone(), bad]}),
                "bgppeer \"metallb-system/bad\": not a valid metallb.io/v1beta1 BGPPeer: spec.myASN: invalid type: string \"one\", expected u32",
            ),
            (
                json!({"uid": "u", "desiredAPIVersion": "metallb.io/v9", "objects": [good.clone()]}),
                "desiredAPIVersion \"metallb.io/v9\" is not a BGPPeer version (metallb.io/v1beta1, metallb.io/v1beta2)",
            ),
            (
                json!({"uid": "u", "objects": [good.clone()]}),
                "request.desiredAPIVersion is missing",
            ),
            (
                json!({"uid": "u", "desiredAPIVersion": "metallb.io/v1beta2"}),
                "request.objects is missing",
            ),
        ];
        for (request, message) in cases {
            assert_eq!(
                answer(&review("apiextensions.k8s.io/v1", request)),
                Ok(
                    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                           "response": {"uid": "u", "result": {"status": "Failure", "message": message}}})
                )
            );
        }
    }

    #[test]
    fn malformed_requests_have_no_uid_to_answer() {
        for body in [
            b"not json".to_vec(),
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}})).expect("json"),
            review("apiextensions.k8s.io/v1", json!({"desiredAPIVersion": "metallb.io/v1beta2", "objects": []})),
        ] {
            assert!(answer(&body).is_err());
        }
    }
}
