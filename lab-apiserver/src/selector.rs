//! Label and field selectors in their query-string syntax
//! (`a=b,c!=d,e in (x,y),f notin (z),g,!h`; fields `metadata.name=x`).

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Req>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn set(values: &str) -> Result<Vec<String>, String> {
    let inner = values
        .trim()
        .strip_prefix('(')
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised value list, got {values:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let req = if let Some(key) = part.strip_prefix('!') {
                Req::NotExists(key.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("!=") {
                Req::Ne(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Req::Eq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once(" notin ") {
                Req::NotIn(k.trim().to_owned(), set(v)?)
            } else if let Some((k, v)) = part.split_once(" in ") {
                Req::In(k.trim().to_owned(), set(v)?)
            } else if part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                Req::Exists(part.to_owned())
            } else {
                return Err(format!("unable to parse requirement {part:?}"));
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`
    /// with In, NotIn, Exists, DoesNotExist); null or `{}` selects all.
    pub fn from_object(selector: &Value) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for (k, v) in selector["matchLabels"].as_object().into_iter().flatten() {
            let v = v
                .as_str()
                .ok_or_else(|| format!("matchLabels.{k} must be a string"))?;
            reqs.push(Req::Eq(k.clone(), v.to_owned()));
        }
        for e in selector["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let key = e["key"].as_str().unwrap_or_default().to_owned();
            let values: Vec<String> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            reqs.push(match e["operator"].as_str().unwrap_or_default() {
                "In" => Req::In(key, values),
                "NotIn" => Req::NotIn(key, values),
                "Exists" => Req::Exists(key),
                "DoesNotExist" => Req::NotExists(key),
                other => {
                    return Err(format!(
                        "matchExpressions operator {other:?} is not one of In, NotIn, Exists, DoesNotExist"
                    ));
                }
            });
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether `object`'s labels satisfy the selector.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v),
            Req::Ne(k, v) => get(k) != Some(v),
            Req::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Req::NotIn(k, vs) => get(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector: equality and inequality on dotted paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for part in split_top(s) {
            let (path, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (k, true, v)
            } else {
                return Err(format!(
                    "invalid field selector {part:?}: use path=value or path!=value"
                ));
            };
            out.push((path.trim().to_owned(), equal, value.trim().to_owned()));
        }
        Ok(FieldSelector(out))
    }

    /// Refuses a field `group`/`plural` cannot be selected by, as
    /// kube-apiserver does (`field label not supported: ...`): every kind
    /// by `metadata.name` and `metadata.namespace`, some by a few more
    /// ([`selectable`]). A selector that named any field would match
    /// nothing useful there, and a client relying on it must hear so.
    pub fn check(&self, group: &str, plural: &str) -> Result<(), String> {
        match self
            .0
            .iter()
            .find(|(path, _, _)| !selectable(group, plural, path))
        {
            Some((path, _, _)) => Err(format!("field label not supported: {path}")),
            None => Ok(()),
        }
    }

    /// The value an equality term requires of `path`, if one does.
    pub fn exact(&self, path: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(p, equal, _)| p == path && *equal)
            .map(|(_, _, value)| value.as_str())
    }

    /// Whether `object` satisfies every term. Missing fields compare as "".
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, value)| {
            let mut v = object;
            for seg in path.split('.') {
                v = &v[seg];
            }
            let actual = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }
}

/// Whether kube-apiserver selects `group`/`plural` by `field` (its field
/// label conversions and selectable attributes; custom resources by the
/// two metadata fields only here).
pub fn selectable(group: &str, plural: &str, field: &str) -> bool {
    const EVENT: &[&str] = &[
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ];
    let more: &[&str] = match (group, plural) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "namespaces") => &["status.phase"],
        ("", "secrets") => &["type"],
        ("", "services") => &["spec.clusterIP", "spec.type"],
        ("", "replicationcontrollers") | ("apps", "replicasets") => &["status.replicas"],
        ("batch", "jobs") => &["status.successful"],
        ("certificates.k8s.io", "certificatesigningrequests") => &["spec.signerName"],
        ("", "events") | ("events.k8s.io", "events") => EVENT,
        _ => &[],
    };
    field == "metadata.name" || field == "metadata.namespace" || more.contains(&field)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn obj() -> Value {
        json!({ "metadata": { "name": "web", "namespace": "default", "labels": { "app": "web", "tier": "front" } }, "spec": { "nodeName": "worker" } })
    }

    #[rstest]
    #[case("app=web", true)]
    #[case("app==web", true)]
    #[case("app!=web", false)]
    #[case("app=web,tier=back", false)]
    #[case("tier in (front, back)", true)]
    #[case("tier notin (front)", false)]
    #[case("missing notin (x)", true)]
    #[case("app", true)]
    #[case("!app", false)]
    #[case("!missing", true)]
    #[case("app in (db),tier", false)]
    #[case("", true)]
    fn labels(#[case] sel: &str, #[case] expected: bool) {
        assert_eq!(
            LabelSelector::parse(sel).expect("parses").matches(&obj()),
            expected,
            "{sel}"
        );
    }

    #[rstest]
    #[case(json!(null), true)]
    #[case(json!({}), true)]
    #[case(json!({ "matchLabels": { "app": "web" } }), true)]
    #[case(json!({ "matchLabels": { "app": "db" } }), false)]
    #[case(json!({ "matchExpressions": [{ "key": "tier", "operator": "In", "values": ["front"] }] }), true)]
    #[case(json!({ "matchExpressions": [{ "key": "tier", "operator": "NotIn", "values": ["front"] }] }), false)]
    #[case(json!({ "matchExpressions": [{ "key": "x", "operator": "DoesNotExist" }] }), true)]
    #[case(json!({ "matchLabels": { "app": "web" }, "matchExpressions": [{ "key": "x", "operator": "Exists" }] }), false)]
    fn label_selector_objects(#[case] sel: Value, #[case] expected: bool) {
        let parsed = LabelSelector::from_object(&sel).expect("parses");
        assert_eq!(parsed.matches(&obj()), expected, "{sel}");
    }

    #[test]
    fn bad_label_selector() {
        assert!(
            LabelSelector::from_object(
                &json!({ "matchExpressions": [{ "key": "a", "operator": "Gt" }] })
            )
            .is_err()
        );
        assert!(LabelSelector::parse("app in x").is_err());
        assert!(LabelSelector::parse("a b c").is_err());
    }

    #[rstest]
    #[case("metadata.name=web", true)]
    #[case("metadata.name!=web", false)]
    #[case("spec.nodeName=worker,metadata.namespace=default", true)]
    #[case("spec.missing=", true)]
    #[case("spec.nodeName=other", false)]
    fn fields(#[case] sel: &str, #[case] expected: bool) {
        assert_eq!(
            FieldSelector::parse(sel).expect("parses").matches(&obj()),
            expected,
            "{sel}"
        );
    }

    #[rstest]
    #[case("", "pods", "spec.nodeName=w,metadata.name=p", None)]
    #[case("", "pods", "status.phase!=Running", None)]
    #[case("", "configmaps", "metadata.namespace=default", None)]
    #[case("", "configmaps", "data.key=x", Some("data.key"))]
    #[case("", "events", "involvedObject.name=web,type=Warning", None)]
    #[case("", "secrets", "type=kubernetes.io/tls", None)]
    #[case("apps", "deployments", "spec.replicas=1", Some("spec.replicas"))]
    #[case(
        "metallb.io",
        "ipaddresspools",
        "spec.autoAssign=true",
        Some("spec.autoAssign")
    )]
    #[case("", "nodes", "spec.nodeName=w", Some("spec.nodeName"))]
    fn fields_kube_apiserver_selects_by(
        #[case] group: &str,
        #[case] plural: &str,
        #[case] sel: &str,
        #[case] refused: Option<&str>,
    ) {
        assert_eq!(
            FieldSelector::parse(sel)
                .expect("parses")
                .check(group, plural)
                .err(),
            refused.map(|f| format!("field label not supported: {f}")),
            "{plural}: {sel}"
        );
    }
}
