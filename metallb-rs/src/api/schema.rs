//! Schema helpers shared by the CRD types: upstream-shaped fragments that
//! schemars cannot express through attributes alone (`schema_with`
//! functions), and the normalisation pass applied to every generated
//! openAPIV3Schema.

use serde_json::{Map, Value, json};

/// Makes a generated schema look like controller-gen's output where the
/// difference matters to users:
///
/// - `nullable: true` is dropped. Upstream schemas have none; without it the
///   API server prunes explicit nulls instead of storing them, which is what
///   MetalLB users get today.
/// - schemars' unsigned formats become controller-gen's: `uint32` ->
///   `int32`, `uint16`/`uint8` -> none (fields that upstream renders as
///   int64 say so on the field).
/// - metav1.LabelSelector gets its `x-kubernetes-*` markers.
pub fn normalize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("nullable");
            match map.get("format").and_then(Value::as_str) {
                Some("uint32") => {
                    map.insert("format".into(), json!("int32"));
                }
                Some("uint16" | "uint8") => {
                    map.remove("format");
                }
                _ => {}
            }
            mark_label_selector(map);
            for v in map.values_mut() {
                normalize(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// `{type: integer}` with no format: what controller-gen emits for Go `int`.
pub fn int(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "integer" })
}

/// `{type: integer, format: int32}` without a minimum: controller-gen's
/// rendering of Go `uint32` fields that carry no bounds marker.
pub fn int32(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "integer", "format": "int32" })
}

/// `[]metav1.Condition` exactly as the Kubernetes API (and upstream's
/// CRD) constrains it; k8s-openapi's schema carries none of the bounds.
pub fn conditions(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Conditions contains the status conditions from the reconcilers running in this component.\n- configReconcilerValid: ConfigReconciler validation status\n- poolReconcilerValid: PoolReconciler validation status",
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "description": "Condition contains details for one aspect of the current state of this API Resource.",
            "type": "object",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {
                    "description": "lastTransitionTime is the last time the condition transitioned from one status to another.",
                    "type": "string",
                    "format": "date-time"
                },
                "message": {
                    "description": "message is a human readable message indicating details about the transition.",
                    "type": "string",
                    "maxLength": 32768
                },
                "observedGeneration": {
                    "description": "observedGeneration represents the .metadata.generation that the condition was set based upon.",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0
                },
                "reason": {
                    "description": "reason contains a programmatic identifier indicating the reason for the condition's last transition.",
                    "type": "string",
                    "maxLength": 1024,
                    "minLength": 1,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
                },
                "status": {
                    "description": "status of the condition, one of True, False, Unknown.",
                    "type": "string",
                    "enum": ["True", "False", "Unknown"]
                },
                "type": {
                    "description": "type of condition in CamelCase or in foo.example.com/CamelCase.",
                    "type": "string",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
                }
            }
        }
    })
}

/// Adds the markers controller-gen puts on metav1.LabelSelector (atomic
/// map, atomic lists) wherever one appears. v1beta1 BGPPeer's own
/// NodeSelector looks alike but requires `values`; upstream gives it no
/// markers, so neither do we.
fn mark_label_selector(map: &mut Map<String, Value>) {
    let Some(props) = map.get("properties").and_then(Value::as_object) else {
        return;
    };
    let mut keys: Vec<&str> = props.keys().map(String::as_str).collect();
    keys.sort();
    if keys != ["matchExpressions", "matchLabels"] {
        return;
    }
    let requirement_required = props["matchExpressions"]["items"]["required"].clone();
    if requirement_required != json!(["key", "operator"]) {
        return;
    }
    map.insert("x-kubernetes-map-type".into(), json!("atomic"));
    if let Some(exprs) = map
        .get_mut("properties")
        .and_then(|p| p.get_mut("matchExpressions"))
    {
        exprs["x-kubernetes-list-type"] = json!("atomic");
        exprs["items"]["properties"]["values"]["x-kubernetes-list-type"] = json!("atomic");
    }
}

/// The `apiVersion`, `kind` and `metadata` properties every controller-gen
/// root schema declares (`kubectl explain` shows them).
pub fn add_root_properties(root: &mut Value) {
    let Some(props) = root.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    props.entry("apiVersion").or_insert_with(|| json!({
        "description": "APIVersion defines the versioned schema of this representation of an object.\nServers should convert recognized schemas to the latest internal value, and\nmay reject unrecognized values.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
        "type": "string"
    }));
    props.entry("kind").or_insert_with(|| json!({
        "description": "Kind is a string value representing the REST resource this object represents.\nServers may infer this from the endpoint the client submits requests to.\nCannot be updated.\nIn CamelCase.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
        "type": "string"
    }));
    props
        .entry("metadata")
        .or_insert_with(|| json!({ "type": "object" }));
}
