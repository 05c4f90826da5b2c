//! CRD version conversion. Strategy `None` (the default): objects are
//! stored as written and only `apiVersion` is rewritten when served at
//! another version ([`crate::state::State::at_version`]). Strategy
//! `Webhook`: objects are stored in the CRD's storage version, and every
//! object read or written at another version goes through one
//! ConversionReview (apiextensions.k8s.io/v1) to the CRD's
//! `conversion.webhook.clientConfig`, outside the server's lock, with
//! kube-apiserver's 30 second bound and error wording.

use crate::client;
use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::registry::conversion::Webhook;
use crate::state::{Shared, lock};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// kube-apiserver's fixed bound on one conversion call.
const TIMEOUT: Duration = Duration::from_secs(30);

fn api_version(o: &Value) -> &str {
    o["apiVersion"].as_str().unwrap_or_default()
}

fn next_uid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let secs = jiff::Timestamp::now().as_second() as u32;
    format!("{secs:08x}-c0de-4000-8000-{n:012x}")
}

/// The ConversionReview asking for `objects` at `desired`.
pub fn conversion_review(uid: &str, desired: &str, objects: &[Value]) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": { "uid": uid, "desiredAPIVersion": desired, "objects": objects },
    })
}

/// The converted objects of a webhook's answer to request `uid` for
/// `originals`: at `desired`, same kind, metadata kept but for labels and
/// annotations (the only metadata a conversion may change).
pub fn converted_objects(
    uid: &str,
    desired: &str,
    answer: &Value,
    originals: &[Value],
) -> Result<Vec<Value>, String> {
    if answer["apiVersion"] != "apiextensions.k8s.io/v1" || answer["kind"] != "ConversionReview" {
        return Err(format!(
            "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {}, Kind={}",
            api_version(answer),
            answer["kind"].as_str().unwrap_or_default()
        ));
    }
    let response = &answer["response"];
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let result = &response["result"];
    if result["status"] != "Success" {
        return Err(match result["message"].as_str().filter(|m| !m.is_empty()) {
            Some(m) => m.to_owned(),
            None => format!(
                "response.result.status was '{}', not 'Success'",
                result["status"].as_str().unwrap_or_default()
            ),
        });
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != originals.len() {
        return Err(format!(
            "expected {} converted objects, got {}",
            originals.len(),
            converted.len()
        ));
    }
    let mut out = Vec::with_capacity(converted.len());
    for (i, (mut c, o)) in converted.into_iter().zip(originals).enumerate() {
        if api_version(&c) != desired {
            return Err(format!(
                "invalid converted object at index {i}: invalid apiVersion {:?}, expected {desired:?}",
                api_version(&c)
            ));
        }
        if c["kind"] != o["kind"] {
            return Err(format!(
                "invalid converted object at index {i}: invalid kind {}, expected {}",
                c["kind"], o["kind"]
            ));
        }
        let mut meta = o["metadata"].clone();
        for key in ["labels", "annotations"] {
            match c["metadata"].get(key) {
                Some(v) if !v.is_null() => meta[key] = v.clone(),
                _ => {
                    if let Some(m) = meta.as_object_mut() {
                        m.remove(key);
                    }
                }
            }
        }
        c["metadata"] = meta;
        out.push(c);
    }
    Ok(out)
}

/// `objects` at `desired` through `webhook`, in one ConversionReview for
/// those at another version; the error is kube-apiserver's message.
async fn convert(
    shared: &Shared,
    webhook: &Webhook,
    desired: &str,
    mut objects: Vec<Value>,
) -> Result<Vec<Value>, String> {
    let pending: Vec<usize> = (0..objects.len())
        .filter(|i| api_version(&objects[*i]) != desired)
        .collect();
    let Some(first) = pending.first().map(|i| &objects[*i]) else {
        return Ok(objects);
    };
    let gvk = format!(
        "{}, Kind={}",
        api_version(first),
        first["kind"].as_str().unwrap_or_default()
    );
    let fail = |cause: String| format!("conversion webhook for {gvk} failed: {cause}");
    let originals: Vec<Value> = pending.iter().map(|i| objects[*i].clone()).collect();
    let uid = next_uid();
    let review = conversion_review(&uid, desired, &originals);
    let target = client::target(&lock(shared), &webhook.client_config, TIMEOUT).map_err(fail)?;
    let answer = client::post(&target, &review, TIMEOUT)
        .await
        .map_err(fail)?;
    let converted = converted_objects(&uid, desired, &answer, &originals).map_err(fail)?;
    for (i, c) in pending.into_iter().zip(converted) {
        objects[i] = c;
    }
    Ok(objects)
}

/// Objects (as [`crate::state::State::at_version`] gave them) served at
/// `t`'s version; a failed conversion is a 500 whose message is the
/// conversion error, as kube-apiserver answers reads.
pub async fn served(
    shared: &Shared,
    t: &ResourceType,
    objects: Vec<Value>,
) -> Result<Vec<Value>, ApiError> {
    match &t.conversion {
        None => Ok(objects),
        Some(w) => convert(shared, w, &t.api_version(), objects)
            .await
            .map_err(|m| ApiError::custom(500, "", m)),
    }
}

/// One object at `t`'s version; the error is the conversion's message.
pub async fn at(shared: &Shared, t: &ResourceType, object: Value) -> Result<Value, String> {
    match &t.conversion {
        None => Ok(object),
        Some(w) => convert(shared, w, &t.api_version(), vec![object])
            .await
            .map(|mut v| v.remove(0)),
    }
}

/// One object at `t`'s version, for a write (a failure is an internal
/// error, as kube-apiserver answers writes).
pub async fn for_write(
    shared: &Shared,
    t: &ResourceType,
    object: Value,
) -> Result<Value, ApiError> {
    at(shared, t, object).await.map_err(ApiError::internal)
}

/// One object (at `t`'s version) as stored: in the storage version for
/// webhook conversion, as it is otherwise.
pub async fn to_storage(
    shared: &Shared,
    t: &ResourceType,
    object: Value,
) -> Result<Value, ApiError> {
    match &t.conversion {
        None => Ok(object),
        Some(w) => {
            let desired = format!("{}/{}", t.group, w.storage);
            convert(shared, w, &desired, vec![object])
                .await
                .map_err(ApiError::internal)
                .map(|mut v| v.remove(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn original() -> Value {
        json!({ "apiVersion": "example.com/v1", "kind": "Thing", "metadata": { "name": "a", "uid": "1", "labels": { "x": "1" } }, "spec": { "old": 1 } })
    }

    fn answer(status: &str, converted: Value) -> Value {
        json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": {
            "uid": "u", "result": { "status": status }, "convertedObjects": converted } })
    }

    #[test]
    fn converted_objects_keep_metadata_but_labels_and_annotations() {
        let converted = json!([{ "apiVersion": "example.com/v2", "kind": "Thing",
            "metadata": { "name": "changed", "labels": { "y": "2" } }, "spec": { "new": 1 } }]);
        let out = converted_objects(
            "u",
            "example.com/v2",
            &answer("Success", converted),
            &[original()],
        )
        .expect("converted");
        assert_eq!(
            out[0],
            json!({ "apiVersion": "example.com/v2", "kind": "Thing",
                "metadata": { "name": "a", "uid": "1", "labels": { "y": "2" } }, "spec": { "new": 1 } })
        );
    }

    #[rstest]
    #[case(answer("Failure", json!([])), "response.result.status was 'Failure', not 'Success'")]
    #[case(answer("Success", json!([])), "expected 1 converted objects, got 0")]
    #[case(answer("Success", json!([{ "apiVersion": "example.com/v1", "kind": "Thing" }])),
        "invalid converted object at index 0: invalid apiVersion \"example.com/v1\", expected \"example.com/v2\"")]
    #[case(json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": { "uid": "x" } }),
        "expected response.uid=\"u\", got \"x\"")]
    #[case(json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": { "uid": "u",
        "result": { "status": "Failure", "message": "cannot convert" } } }), "cannot convert")]
    fn bad_answers(#[case] answer: Value, #[case] error: &str) {
        assert_eq!(
            converted_objects("u", "example.com/v2", &answer, &[original()]),
            Err(error.to_owned())
        );
    }
}
