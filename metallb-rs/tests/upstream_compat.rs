//! Our generated CRDs against upstream MetalLB's, field by field.
//!
//! `fixtures/upstream-crd-skeleton.txt` is the "skeleton" of upstream's
//! generated CRDs (metallb/metallb 238396d7, controller-gen v0.22.0):
//! every version flag, printer column and schema node with its type,
//! format, default, enum, bounds, required list, x-kubernetes markers and
//! CEL rules - everything except descriptions. This test renders the same
//! skeleton from `metallb_rs::api::crds()` and requires it to be equal, so
//! a MetalLB user's YAML meets the same schema here.

use metallb_rs::api;
use serde_json::Value;

const KEYS: &[&str] = &[
    "type",
    "format",
    "default",
    "enum",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "required",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
];

/// JSON with sorted keys and integral floats printed as integers (as
/// Python's json.dumps prints what YAML parsed as ints).
fn canon(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && !n.is_i64() && !n.is_u64() => format!("{}", f as i64),
            _ => n.to_string(),
        },
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(canon).collect::<Vec<_>>().join(",")
        ),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canon(&map[*k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

fn attrs(s: &Value) -> String {
    let mut out = Vec::new();
    for k in KEYS {
        if let Some(v) = s.get(*k) {
            let v = if *k == "required" {
                let mut list: Vec<Value> = v.as_array().cloned().unwrap_or_default();
                list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                Value::Array(list)
            } else {
                v.clone()
            };
            out.push(format!("{k}={}", canon(&v)));
        }
    }
    if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
        out.push(format!(
            "additionalProperties.type={}",
            canon(ap.get("type").unwrap_or(&Value::Null))
        ));
    }
    out.join(" ")
}

fn walk(prefix: &str, path: &str, s: &Value, lines: &mut Vec<String>) {
    lines.push(
        format!("{prefix} {path} {}", attrs(s))
            .trim_end()
            .to_owned(),
    );
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let mut names: Vec<&String> = props.keys().collect();
        names.sort();
        for name in names {
            if path == "." && ["apiVersion", "kind", "metadata"].contains(&name.as_str()) {
                continue;
            }
            let child = if path == "." {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            walk(prefix, &child, &props[name], lines);
        }
    }
    if let Some(items) = s.get("items") {
        walk(prefix, &format!("{path}[]"), items, lines);
    }
    if let Some(ap) = s
        .get("additionalProperties")
        .filter(|a| a.get("properties").is_some())
    {
        walk(prefix, &format!("{path}{{}}"), ap, lines);
    }
}

fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).expect("serializes")
}

fn skeleton() -> String {
    let mut lines = Vec::new();
    let mut crds = api::crds();
    // Upstream's manifest lists CRDs in this order; compare in the same one.
    crds.sort_by_key(|c| c.metadata.name.clone());
    for crd in crds {
        let sp = &crd.spec;
        let n = &sp.names;
        lines.push(format!(
            "{} group={} kind={} listKind={} singular={} scope={} shortNames={}",
            n.plural,
            sp.group,
            n.kind,
            n.list_kind.as_deref().unwrap_or("None"),
            n.singular.as_deref().unwrap_or("None"),
            sp.scope,
            json(&n.short_names)
        ));
        for v in &sp.versions {
            let p = format!("{}/{}", n.plural, v.name);
            let subresources: Vec<&str> = match &v.subresources {
                Some(s) => [("scale", s.scale.is_some()), ("status", s.status.is_some())]
                    .into_iter()
                    .filter(|(_, on)| *on)
                    .map(|(k, _)| k)
                    .collect(),
                None => vec![],
            };
            lines.push(format!(
                "{p} served={} storage={} deprecated={} warning={} subresources={}",
                v.served,
                v.storage,
                v.deprecated.unwrap_or(false),
                json(&v.deprecation_warning),
                json(&subresources)
            ));
            for c in v.additional_printer_columns.iter().flatten() {
                lines.push(format!(
                    "{p} column name={} type={} jsonPath={} priority={}",
                    json(&c.name),
                    c.type_,
                    c.json_path,
                    json(&c.priority)
                ));
            }
            let schema = serde_json::to_value(
                v.schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref()),
            )
            .expect("schema");
            walk(&p, ".", &schema, &mut lines);
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn generated_crds_match_upstream_field_by_field() {
    let expected = include_str!("fixtures/upstream-crd-skeleton.txt");
    let actual = skeleton();
    if actual != expected {
        let exp: std::collections::BTreeSet<&str> = expected.lines().collect();
        let act: std::collections::BTreeSet<&str> = actual.lines().collect();
        let mut report = String::new();
        for l in exp.difference(&act) {
            report.push_str(&format!("- upstream: {l}\n"));
        }
        for l in act.difference(&exp) {
            report.push_str(&format!("+ ours:     {l}\n"));
        }
        if report.is_empty() {
            report = "same lines in a different order (CRD or version order)".into();
        }
        panic!("generated CRDs differ from upstream:\n{report}");
    }
}
