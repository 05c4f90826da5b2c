//! The protobuf ObjectMeta every decoded kind carries, and the JSON
//! building both decoders share. Fields outside the message are skipped
//! by the decoder; server-set ones (timestamps, managedFields) are the
//! server's to write anyway.

use prost::Message;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

#[derive(Clone, PartialEq, Message)]
pub(super) struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub(super) uid: Option<String>,
    /// An update's precondition (Helm replaces its release Secrets by PUT).
    #[prost(string, optional, tag = "6")]
    pub(super) resource_version: Option<String>,
    #[prost(btree_map = "string, string", tag = "11")]
    pub(super) labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    pub(super) annotations: BTreeMap<String, String>,
    #[prost(string, repeated, tag = "14")]
    pub(super) finalizers: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Preconditions {
    #[prost(string, optional, tag = "1")]
    uid: Option<String>,
    #[prost(string, optional, tag = "2")]
    resource_version: Option<String>,
}

/// What a DELETE carries (Helm sends it as protobuf when it purges its
/// release records).
#[derive(Clone, PartialEq, Message)]
struct DeleteOptions {
    #[prost(int64, optional, tag = "1")]
    grace_period_seconds: Option<i64>,
    #[prost(message, optional, tag = "2")]
    preconditions: Option<Preconditions>,
    #[prost(bool, optional, tag = "3")]
    orphan_dependents: Option<bool>,
    #[prost(string, optional, tag = "4")]
    propagation_policy: Option<String>,
    #[prost(string, repeated, tag = "5")]
    dry_run: Vec<String>,
}

/// The JSON form of a protobuf meta/v1 DeleteOptions.
pub(super) fn delete_options(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let d = DeleteOptions::decode(raw)?;
    let mut out = Map::new();
    put(
        &mut out,
        "gracePeriodSeconds",
        json!(d.grace_period_seconds),
    );
    if let Some(p) = d.preconditions {
        let mut pre = Map::new();
        put(&mut pre, "uid", json!(p.uid));
        put(&mut pre, "resourceVersion", json!(p.resource_version));
        out.insert("preconditions".into(), Value::Object(pre));
    }
    put(&mut out, "orphanDependents", json!(d.orphan_dependents));
    put(&mut out, "propagationPolicy", json!(d.propagation_policy));
    put(&mut out, "dryRun", json!(d.dry_run));
    Ok(Value::Object(out))
}

/// `value` under `key` unless it is absent or empty.
pub(super) fn put(m: &mut Map<String, Value>, key: &str, value: Value) {
    let empty = match &value {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if !empty {
        m.insert(key.to_owned(), value);
    }
}

/// The JSON form of `m`.
pub(super) fn meta(m: Option<ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut out = Map::new();
    put(&mut out, "name", json!(m.name));
    put(&mut out, "generateName", json!(m.generate_name));
    put(&mut out, "namespace", json!(m.namespace));
    put(&mut out, "uid", json!(m.uid));
    put(&mut out, "resourceVersion", json!(m.resource_version));
    put(&mut out, "labels", json!(m.labels));
    put(&mut out, "annotations", json!(m.annotations));
    put(&mut out, "finalizers", json!(m.finalizers));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_delete_options() {
        let d = DeleteOptions {
            propagation_policy: Some("Background".into()),
            preconditions: Some(Preconditions {
                uid: Some("u-1".into()),
                resource_version: None,
            }),
            ..Default::default()
        };
        assert_eq!(
            delete_options(&d.encode_to_vec()).expect("decodes"),
            json!({ "preconditions": { "uid": "u-1" }, "propagationPolicy": "Background" })
        );
    }
}
