//! The protobuf core/v1 kinds Helm's client writes without a JSON
//! fallback: its release records (Secrets of type `helm.sh/release.v1`)
//! and, with `--create-namespace`, the Namespace.

use super::meta::{ObjectMeta, meta, put};
use base64::Engine;
use prost::Message;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

#[derive(Clone, PartialEq, Message)]
struct Secret {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, bytes", tag = "2")]
    data: BTreeMap<String, Vec<u8>>,
    #[prost(string, optional, tag = "3")]
    type_: Option<String>,
    #[prost(btree_map = "string, string", tag = "4")]
    string_data: BTreeMap<String, String>,
    #[prost(bool, optional, tag = "5")]
    immutable: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct NamespaceSpec {
    #[prost(string, repeated, tag = "1")]
    finalizers: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Namespace {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<NamespaceSpec>,
}

/// The JSON form of a protobuf core/v1 Secret: `data` in base64, as the
/// JSON API carries it.
pub(super) fn secret(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let s = Secret::decode(raw)?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let data: Map<String, Value> = s
        .data
        .into_iter()
        .map(|(k, v)| (k, json!(b64.encode(v))))
        .collect();
    let mut out = Map::new();
    out.insert("metadata".into(), meta(s.metadata));
    put(&mut out, "data", Value::Object(data));
    put(&mut out, "stringData", json!(s.string_data));
    put(&mut out, "type", json!(s.type_));
    put(&mut out, "immutable", json!(s.immutable));
    Ok(Value::Object(out))
}

/// The JSON form of a protobuf core/v1 Namespace.
pub(super) fn namespace(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    let n = Namespace::decode(raw)?;
    let mut out = Map::new();
    out.insert("metadata".into(), meta(n.metadata));
    let mut spec = Map::new();
    put(
        &mut spec,
        "finalizers",
        json!(n.spec.unwrap_or_default().finalizers),
    );
    put(&mut out, "spec", Value::Object(spec));
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_helm_release_secret() {
        let s = Secret {
            metadata: Some(ObjectMeta {
                name: Some("sh.helm.release.v1.metallb-rs.v2".into()),
                namespace: Some("metallb-system".into()),
                resource_version: Some("41".into()),
                labels: BTreeMap::from([("owner".into(), "helm".into())]),
                ..Default::default()
            }),
            data: BTreeMap::from([("release".into(), b"H4sI\x00".to_vec())]),
            type_: Some("helm.sh/release.v1".into()),
            ..Default::default()
        };
        let v = secret(&s.encode_to_vec()).expect("decodes");
        assert_eq!(
            v,
            json!({
                "metadata": { "name": "sh.helm.release.v1.metallb-rs.v2", "namespace": "metallb-system",
                    "resourceVersion": "41", "labels": { "owner": "helm" } },
                "data": { "release": "SDRzSQA=" },
                "type": "helm.sh/release.v1",
            })
        );
        assert!(secret(b"\xff\xff").is_err());
    }

    #[test]
    fn decodes_a_namespace() {
        let n = Namespace {
            metadata: Some(ObjectMeta {
                name: Some("metallb-system".into()),
                labels: BTreeMap::from([(
                    "pod-security.kubernetes.io/enforce".into(),
                    "privileged".into(),
                )]),
                ..Default::default()
            }),
            spec: None,
        };
        assert_eq!(
            namespace(&n.encode_to_vec()).expect("decodes"),
            json!({ "metadata": { "name": "metallb-system",
                "labels": { "pod-security.kubernetes.io/enforce": "privileged" } } })
        );
    }
}
