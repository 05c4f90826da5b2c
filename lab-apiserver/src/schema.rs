//! Structural-schema behaviour for custom objects: defaults applied and
//! unknown fields pruned, as kube-apiserver does before validating.

use serde_json::Value;

/// Applies `default`s of absent properties and drops properties the
/// schema does not declare (unless it preserves unknown fields), at every
/// level. The root's apiVersion/kind/metadata are always kept.
pub fn default_and_prune(obj: &mut Value, schema: &Value) {
    walk(obj, schema, true);
}

fn walk(obj: &mut Value, schema: &Value, root: bool) {
    match obj {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let preserve =
                schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            if let Some(props) = props {
                for (name, prop) in props {
                    if !map.contains_key(name)
                        && let Some(d) = prop.get("default")
                    {
                        map.insert(name.clone(), d.clone());
                    }
                }
                if !preserve {
                    map.retain(|k, _| {
                        props.contains_key(k)
                            || (root && ["apiVersion", "kind", "metadata"].contains(&k.as_str()))
                    });
                }
                for (name, value) in map.iter_mut() {
                    if let Some(prop) = props.get(name)
                        && !(root && name == "metadata")
                    {
                        walk(value, prop, false);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for value in map.values_mut() {
                    walk(value, ap, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    walk(item, item_schema, false);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_prunes_recursively() {
        let schema = json!({ "type": "object", "properties": {
            "spec": { "type": "object", "properties": {
                "autoAssign": { "type": "boolean", "default": true },
                "items": { "type": "array", "items": { "type": "object", "properties": { "a": { "type": "string" } } } },
                "free": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
            } },
        } });
        let mut obj = json!({ "apiVersion": "x/v1", "kind": "K", "metadata": { "name": "n", "anything": 1 },
            "spec": { "items": [{ "a": "1", "b": 2 }], "free": { "z": 1 }, "bogus": 1 }, "top": 1 });
        default_and_prune(&mut obj, &schema);
        assert_eq!(
            obj,
            json!({ "apiVersion": "x/v1", "kind": "K", "metadata": { "name": "n", "anything": 1 },
            "spec": { "autoAssign": true, "items": [{ "a": "1" }], "free": { "z": 1 } } })
        );
    }
}
