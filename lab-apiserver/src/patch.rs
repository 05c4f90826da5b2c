//! PATCH bodies: JSON merge patch (RFC 7386) and JSON patch (RFC 6902)
//! through the json-patch crate, and the subset of strategic merge patch
//! that `kubectl apply`/`edit`/`label` send for built-in kinds.

use serde_json::{Map, Value};

/// The patch kinds, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml`: server-side apply, decided by
    /// [`crate::apply`], not by [`apply`].
    Apply,
}

impl PatchKind {
    /// The kind named by a Content-Type header value.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/strategic-merge-patch+json" => Some(PatchKind::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }
}

/// Applies `patch` of `kind` to `doc`.
pub fn apply(doc: &mut Value, patch: &Value, kind: PatchKind) -> Result<(), String> {
    match kind {
        PatchKind::Merge => {
            json_patch::merge(doc, patch);
            Ok(())
        }
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| format!("invalid JSON patch: {e}"))?;
            json_patch::patch(doc, &ops).map_err(|e| format!("JSON patch failed: {e}"))
        }
        PatchKind::StrategicMerge => {
            strategic_merge(doc, patch);
            Ok(())
        }
        // Objects and their status are applied by `crate::apply`; only a
        // subresource such as `scale` ends here.
        PatchKind::Apply => Err(
            "server-side apply is not supported by the lab API server on this subresource".into(),
        ),
    }
}

/// The merge key of list fields that strategic merge patch merges by
/// element instead of replacing (from the Kubernetes API's
/// `x-kubernetes-patch-merge-key` markers on the kinds the lab serves;
/// a list without one, such as `tolerations`, is replaced whole).
/// `ports` is two lists: a container's, keyed by `containerPort`, and a
/// Service's, keyed by `port` - told apart by their elements.
pub(crate) fn merge_key(field: &str, elements: &[Value]) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "volumeMounts"
        | "imagePullSecrets"
        | "webhooks"
        | "resourceClaims" => "name",
        "ports" if elements.iter().any(|e| e.get("containerPort").is_some()) => "containerPort",
        "ports" => "port",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        _ => return None,
    })
}

/// Puts `list`'s elements in the order `order` gives by merge key `key`
/// (a `$setElementOrder` directive); elements it does not name keep
/// their relative order after those it does.
fn set_order(list: &mut [Value], order: &[Value], key: &str) {
    let rank = |e: &Value| {
        e.get(key)
            .and_then(|id| order.iter().position(|o| o.get(key) == Some(id)))
            .unwrap_or(usize::MAX)
    };
    list.sort_by_key(rank);
}

fn strategic_merge(doc: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *doc = patch.clone();
        return;
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Value::Object(target) = doc else { return };
    for (key, value) in patch_map {
        // `$retainKeys` prunes (the lab does not); `$setElementOrder` is
        // applied after the lists are merged.
        if key.starts_with("$setElementOrder/") || key == "$retainKeys" || key == "$patch" {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(existing)), Value::Array(gone)) =
                (target.get_mut(field), value)
            {
                existing.retain(|e| !gone.contains(e));
            }
            continue;
        }
        if value.is_null() {
            target.remove(key);
            continue;
        }
        let elements = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
        let mut both = elements(target.get(key));
        both.extend(elements(Some(value)));
        match (target.get_mut(key), value, merge_key(key, &both)) {
            (Some(Value::Array(existing)), Value::Array(items), Some(mk)) => {
                merge_list(existing, items, mk)
            }
            (Some(existing @ Value::Object(_)), Value::Object(_), _) => {
                strategic_merge(existing, value)
            }
            _ => {
                let mut fresh = Value::Null;
                if value.is_object() {
                    strategic_merge(&mut fresh, value);
                } else {
                    fresh = value.clone();
                }
                target.insert(key.clone(), fresh);
            }
        }
    }
    for (key, order) in patch_map {
        let (Some(field), Value::Array(order)) = (key.strip_prefix("$setElementOrder/"), order)
        else {
            continue;
        };
        if let Some(Value::Array(list)) = target.get_mut(field)
            && let Some(mk) = merge_key(field, list)
        {
            set_order(list, order, mk);
        }
    }
}

fn merge_list(existing: &mut Vec<Value>, items: &[Value], key: &str) {
    for item in items {
        let id = item.get(key).cloned();
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        let pos = id
            .as_ref()
            .and_then(|id| existing.iter().position(|e| e.get(key) == Some(id)));
        match (pos, delete) {
            (Some(i), true) => {
                existing.remove(i);
            }
            (Some(i), false) => strategic_merge(&mut existing[i], item),
            (None, true) => {}
            (None, false) => {
                let mut fresh = Value::Null;
                strategic_merge(&mut fresh, item);
                existing.push(fresh);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_sets_and_removes() {
        let mut doc =
            json!({ "metadata": { "labels": { "a": "1", "b": "2" } }, "spec": { "x": [1, 2] } });
        apply(
            &mut doc,
            &json!({ "metadata": { "labels": { "a": null, "c": "3" } }, "spec": { "x": [3] } }),
            PatchKind::Merge,
        )
        .expect("applies");
        assert_eq!(
            doc,
            json!({ "metadata": { "labels": { "b": "2", "c": "3" } }, "spec": { "x": [3] } })
        );
    }

    #[test]
    fn json_patch_ops_and_failures() {
        let mut doc = json!({ "spec": { "ports": [{ "port": 80 }] } });
        apply(&mut doc, &json!([{ "op": "add", "path": "/spec/ports/-", "value": { "port": 443 } }, { "op": "test", "path": "/spec/ports/0/port", "value": 80 }]), PatchKind::Json)
            .expect("applies");
        assert_eq!(doc["spec"]["ports"][1]["port"], 443);
        let err = apply(
            &mut doc,
            &json!([{ "op": "test", "path": "/spec/ports/0/port", "value": 81 }]),
            PatchKind::Json,
        )
        .expect_err("test op fails");
        assert!(err.contains("JSON patch failed"), "{err}");
        assert!(
            apply(&mut doc, &json!({ "op": "add" }), PatchKind::Json)
                .expect_err("not a list")
                .contains("invalid JSON patch")
        );
    }

    #[test]
    fn strategic_merge_merges_lists_by_key() {
        let mut doc = json!({ "spec": { "ports": [{ "port": 80, "name": "http" }, { "port": 443, "name": "https" }], "selector": { "app": "a" } } });
        let patch = json!({
            "$setElementOrder/ports": [{ "port": 80 }, { "port": 443 }],
            "spec": { "ports": [{ "port": 80, "protocol": "TCP" }, { "port": 443, "$patch": "delete" }, { "port": 8080 }], "selector": { "tier": "x" } },
        });
        apply(&mut doc, &patch, PatchKind::StrategicMerge).expect("applies");
        assert_eq!(
            doc,
            json!({ "spec": { "ports": [{ "port": 80, "name": "http", "protocol": "TCP" }, { "port": 8080 }], "selector": { "app": "a", "tier": "x" } } })
        );
    }

    #[test]
    fn strategic_merge_follows_each_lists_patch_strategy() {
        // What Helm's 3-way patches send: webhooks merged by name, a
        // container's ports by containerPort, tolerations replaced, the
        // order set by a directive, a value dropped from a primitive list.
        let mut doc = json!({
            "webhooks": [{ "name": "a", "sideEffects": "None", "clientConfig": { "service": { "name": "s" } } },
                         { "name": "b", "sideEffects": "None" }],
            "spec": { "containers": [{ "name": "c", "ports": [{ "containerPort": 7472, "name": "monitoring" }],
                                       "args": ["--x"] }],
                      "tolerations": [{ "key": "k", "effect": "NoSchedule" }, { "key": "k", "effect": "NoExecute" }],
                      "finalizers": ["f1", "f2"] },
        });
        let patch = json!({
            "$setElementOrder/webhooks": [{ "name": "b" }, { "name": "a" }],
            "webhooks": [{ "name": "a", "clientConfig": { "caBundle": "Q0E=" } }],
            "spec": {
                "containers": [{ "name": "c", "ports": [{ "containerPort": 7473, "name": "monitoring" }] }],
                "tolerations": [{ "key": "other", "operator": "Exists" }],
                "$deleteFromPrimitiveList/finalizers": ["f1"],
            },
        });
        apply(&mut doc, &patch, PatchKind::StrategicMerge).expect("applies");
        assert_eq!(
            doc,
            json!({
                "webhooks": [{ "name": "b", "sideEffects": "None" },
                             { "name": "a", "sideEffects": "None", "clientConfig": { "service": { "name": "s" }, "caBundle": "Q0E=" } }],
                "spec": { "containers": [{ "name": "c", "args": ["--x"],
                                           "ports": [{ "containerPort": 7472, "name": "monitoring" }, { "containerPort": 7473, "name": "monitoring" }] }],
                          "tolerations": [{ "key": "other", "operator": "Exists" }],
                          "finalizers": ["f2"] },
            })
        );
    }

    #[test]
    fn apply_patch_is_named_and_left_to_the_apply_module() {
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+yaml"),
            Some(PatchKind::Apply)
        );
        assert!(apply(&mut json!({}), &json!({}), PatchKind::Apply).is_err());
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchKind::Merge)
        );
        assert_eq!(PatchKind::from_content_type("text/plain"), None);
    }
}
