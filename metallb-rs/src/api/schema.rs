//! Schema helpers shared by the CRD types: upstream-shaped fragments that
//! schemars cannot express through attributes alone, and the final
//! normalisation pass applied to every generated openAPIV3Schema.

use serde_json::{Value, json};

/// Makes a generated schema look like controller-gen's output where the
/// difference matters to users:
///
/// - `nullable: true` is dropped. Upstream schemas have none; without it the
///   API server prunes explicit nulls instead of storing them, which is what
///   MetalLB users get today.
/// - `x-kubernetes-validations` lists stay in declaration order, everything
///   else is left as generated (objects are already sorted maps).
pub fn normalize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("nullable");
            for v in map.values_mut() {
                normalize(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// Builds one `x-kubernetes-validations` entry.
pub fn cel(rule: &str, message: &str) -> Value {
    json!({ "rule": rule, "message": message })
}
