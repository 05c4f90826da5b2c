//! The `scale` subresource of Deployments and ReplicaSets (what `kubectl
//! scale` reads and patches): an `autoscaling/v1` Scale made from the
//! object, and a write of the Scale's `spec.replicas` back into the
//! object's `spec.replicas` (through [`crate::write::update`], so it is
//! admitted and stored as any update is).

use crate::error::ApiError;
use crate::patch::{self, PatchKind};
use crate::registry::ResourceType;
use crate::state::Part;
use crate::write::{self, Change, Ctx, Reply};
use serde_json::{Value, json};

/// `matchLabels` as a label selector string (what Scale's
/// `status.selector` holds).
fn selector_string(selector: &Value) -> String {
    let mut parts: Vec<String> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_owned(),
            _ => format!("!{key}"),
        });
    }
    parts.join(",")
}

/// The Scale of `obj`.
pub fn of(obj: &Value) -> Value {
    let m = &obj["metadata"];
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
            "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
        },
        "spec": { "replicas": obj["spec"]["replicas"].as_i64().unwrap_or(1) },
        "status": {
            "replicas": obj["status"]["replicas"].as_i64().unwrap_or(0),
            "selector": selector_string(&obj["spec"]["selector"]),
        },
    })
}

/// How a request changes a Scale.
pub enum ScaleChange<'a> {
    /// PUT: the whole Scale.
    Replace(Value),
    /// PATCH: applied to the current Scale.
    Patch(&'a Value, PatchKind),
}

/// A write to `ns/name`'s scale: the object's new Scale.
pub async fn update(
    ctx: &Ctx<'_>,
    t: &ResourceType,
    ns: &str,
    name: &str,
    change: ScaleChange<'_>,
) -> Reply {
    let fail = |e: ApiError| Reply {
        result: Err(e),
        warnings: Vec::new(),
    };
    let current = {
        let s = crate::state::lock(ctx.shared);
        match s.get(t, ns, name) {
            Ok(o) => o,
            Err(e) => return fail(e),
        }
    };
    let mut scale = of(&current);
    let rv = match change {
        ScaleChange::Replace(body) => {
            let rv = body["metadata"]["resourceVersion"].clone();
            scale = body;
            rv
        }
        ScaleChange::Patch(p, kind) => {
            if let Err(e) = patch::apply(&mut scale, p, kind) {
                return fail(ApiError::bad_request(e));
            }
            p["metadata"]["resourceVersion"].clone()
        }
    };
    let Some(replicas) = scale["spec"]["replicas"].as_i64().filter(|r| *r >= 0) else {
        return fail(ApiError::invalid(
            "Scale.autoscaling",
            name,
            vec![(
                "spec.replicas".into(),
                "must be greater than or equal to 0".into(),
            )],
        ));
    };
    let mut body = json!({ "spec": { "replicas": replicas } });
    if !rv.is_null() {
        body["metadata"] = json!({ "resourceVersion": rv });
    }
    let reply = write::update(
        ctx,
        t,
        ns,
        name,
        Change::Patch(&body, PatchKind::Merge),
        Part::Main,
    )
    .await;
    Reply {
        result: reply.result.map(|o| of(&o)),
        warnings: reply.warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_of_a_deployment() {
        let d = json!({
            "metadata": { "name": "web", "namespace": "default", "uid": "u", "resourceVersion": "7" },
            "spec": { "replicas": 2, "selector": { "matchLabels": { "app": "web", "tier": "fe" },
                "matchExpressions": [{ "key": "env", "operator": "In", "values": ["a", "b"] }] } },
            "status": { "replicas": 3 },
        });
        let s = of(&d);
        assert_eq!(s["spec"]["replicas"], 2);
        assert_eq!(s["status"]["replicas"], 3);
        assert_eq!(s["status"]["selector"], "app=web,tier=fe,env in (a,b)");
        assert_eq!(s["metadata"]["resourceVersion"], "7");
        assert_eq!(s["kind"], "Scale");
    }
}
