//! Which webhooks an admission request goes to, as kube-apiserver decides
//! it: a webhook's `rules` (operations, apiGroups, apiVersions, resources
//! with their subresources, scope), its `namespaceSelector` and
//! `objectSelector`, and `matchPolicy` (Equivalent: the same resource at
//! another served version matches too). Pure: JSON in, decisions out.

use crate::selector::LabelSelector;
use serde_json::Value;

/// An admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// POST.
    Create,
    /// PUT and PATCH.
    Update,
    /// DELETE.
    Delete,
}

impl Operation {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What an admission request is about.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The operation.
    pub operation: Operation,
    /// API group ("" for core).
    pub group: &'a str,
    /// The version the request addressed.
    pub version: &'a str,
    /// The resource (plural).
    pub resource: &'a str,
    /// The subresource ("" for the object itself).
    pub subresource: &'a str,
    /// The namespace ("" for cluster-scoped objects).
    pub namespace: &'a str,
    /// The object after the write (none on a delete).
    pub object: Option<&'a Value>,
    /// The object before the write (none on a create).
    pub old_object: Option<&'a Value>,
    /// The object's Namespace (for `namespaceSelector`), when it has one.
    pub namespace_object: Option<&'a Value>,
}

/// Kinds that no webhook or admission policy is ever called for
/// (kube-apiserver exempts them so a broken one cannot lock its own
/// configuration in).
pub fn exempt(group: &str, resource: &str) -> bool {
    group == "admissionregistration.k8s.io"
        && matches!(
            resource,
            "validatingwebhookconfigurations"
                | "mutatingwebhookconfigurations"
                | "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
        )
}

fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn listed(list: &Value, wanted: &str) -> bool {
    strings(list).any(|s| s == "*" || s == wanted)
}

/// `pods` matches the object only, `pods/status` its status, `pods/*`
/// every subresource, `*` every object, `*/*` everything.
fn resource_listed(resources: &Value, resource: &str, subresource: &str) -> bool {
    strings(resources).any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        (res == "*" || res == resource) && (sub == "*" || sub == subresource)
    })
}

fn scope_matches(scope: Option<&str>, request: &Request<'_>) -> bool {
    let is_namespace = request.group.is_empty() && request.resource == "namespaces";
    match scope {
        Some("Namespaced") => !is_namespace && !request.namespace.is_empty(),
        Some("Cluster") => is_namespace || request.namespace.is_empty(),
        _ => true,
    }
}

/// Whether one of `webhook`'s rules matches `request` at `version`.
pub fn rules_match(webhook: &Value, request: &Request<'_>, version: &str) -> bool {
    webhook["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|rule| {
            listed(&rule["operations"], request.operation.as_str())
                && listed(&rule["apiGroups"], request.group)
                && listed(&rule["apiVersions"], version)
                && resource_listed(&rule["resources"], request.resource, request.subresource)
                && scope_matches(rule["scope"].as_str(), request)
        })
}

/// Whether `webhook`'s selectors let `request` through: the namespace's
/// labels (a Namespace's own for Namespaces; cluster-scoped objects always
/// pass) and the object's or the old object's labels.
pub fn selectors_match(webhook: &Value, request: &Request<'_>) -> Result<bool, String> {
    let ns_selector = LabelSelector::from_object(&webhook["namespaceSelector"])
        .map_err(|e| format!("namespaceSelector: {e}"))?;
    let is_namespace = request.group.is_empty() && request.resource == "namespaces";
    let namespace_ok = if is_namespace {
        [request.object, request.old_object]
            .into_iter()
            .flatten()
            .any(|o| ns_selector.matches(o))
    } else if request.namespace.is_empty() {
        true
    } else {
        // A namespace that cannot be read has no labels.
        let empty = Value::Null;
        ns_selector.matches(request.namespace_object.unwrap_or(&empty))
    };
    let object_selector = LabelSelector::from_object(&webhook["objectSelector"])
        .map_err(|e| format!("objectSelector: {e}"))?;
    let object_ok = [request.object, request.old_object]
        .into_iter()
        .flatten()
        .any(|o| object_selector.matches(o));
    Ok(namespace_ok && object_ok)
}

/// The version `webhook` is called with for `request`: the request's own
/// when a rule lists it, else (matchPolicy Equivalent, the default) the
/// first of `other_versions` (the resource's other served versions, most
/// preferred first) that a rule lists; `None` when it is not called.
pub fn chosen_version(
    webhook: &Value,
    request: &Request<'_>,
    other_versions: &[String],
) -> Option<String> {
    if rules_match(webhook, request, request.version) {
        return Some(request.version.to_owned());
    }
    if webhook["matchPolicy"].as_str() == Some("Exact") {
        return None;
    }
    other_versions
        .iter()
        .find(|v| rules_match(webhook, request, v))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn request<'a>(
        operation: Operation,
        resource: &'a str,
        subresource: &'a str,
        namespace: &'a str,
    ) -> Request<'a> {
        Request {
            operation,
            group: "metallb.io",
            version: "v1beta1",
            resource,
            subresource,
            namespace,
            object: None,
            old_object: None,
            namespace_object: None,
        }
    }

    fn webhook(rule: Value) -> Value {
        json!({ "name": "w", "rules": [rule] })
    }

    fn rule(operations: Value, resources: Value) -> Value {
        json!({ "operations": operations, "apiGroups": ["metallb.io"], "apiVersions": ["v1beta1"], "resources": resources })
    }

    #[rstest]
    #[case(rule(json!(["CREATE"]), json!(["ipaddresspools"])), Operation::Create, "ipaddresspools", "", true)]
    #[case(rule(json!(["CREATE"]), json!(["ipaddresspools"])), Operation::Update, "ipaddresspools", "", false)]
    #[case(rule(json!(["*"]), json!(["ipaddresspools"])), Operation::Delete, "ipaddresspools", "", true)]
    #[case(rule(json!(["CREATE", "UPDATE"]), json!(["bgppeers"])), Operation::Create, "ipaddresspools", "", false)]
    #[case(rule(json!(["*"]), json!(["*"])), Operation::Update, "ipaddresspools", "", true)]
    #[case(rule(json!(["*"]), json!(["*"])), Operation::Update, "ipaddresspools", "status", false)]
    #[case(rule(json!(["*"]), json!(["ipaddresspools"])), Operation::Update, "ipaddresspools", "status", false)]
    #[case(rule(json!(["*"]), json!(["ipaddresspools/status"])), Operation::Update, "ipaddresspools", "status", true)]
    #[case(rule(json!(["*"]), json!(["ipaddresspools/status"])), Operation::Update, "ipaddresspools", "", false)]
    #[case(rule(json!(["*"]), json!(["*/status"])), Operation::Update, "bgppeers", "status", true)]
    #[case(rule(json!(["*"]), json!(["ipaddresspools/*"])), Operation::Update, "ipaddresspools", "status", true)]
    #[case(rule(json!(["*"]), json!(["*/*"])), Operation::Update, "bgppeers", "status", true)]
    #[case(json!({ "operations": ["*"], "apiGroups": [""], "apiVersions": ["*"], "resources": ["*"] }), Operation::Create, "ipaddresspools", "", false)]
    #[case(json!({ "operations": ["*"], "apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["*"] }), Operation::Create, "ipaddresspools", "", false)]
    #[case(json!({ "operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster" }), Operation::Create, "ipaddresspools", "", false)]
    #[case(json!({ "operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced" }), Operation::Create, "ipaddresspools", "", true)]
    fn rules(
        #[case] rule: Value,
        #[case] op: Operation,
        #[case] resource: &str,
        #[case] sub: &str,
        #[case] expected: bool,
    ) {
        let r = request(op, resource, sub, "metallb-system");
        assert_eq!(
            rules_match(&webhook(rule.clone()), &r, "v1beta1"),
            expected,
            "{rule} on {:?} {resource}/{sub}",
            op
        );
    }

    #[rstest]
    #[case("Cluster", "", "nodes", true)]
    #[case("Cluster", "", "namespaces", true)]
    #[case("Cluster", "ns", "services", false)]
    #[case("Namespaced", "", "namespaces", false)]
    #[case("Namespaced", "ns", "services", true)]
    #[case("*", "", "nodes", true)]
    fn scopes(
        #[case] scope: &str,
        #[case] ns: &str,
        #[case] resource: &str,
        #[case] expected: bool,
    ) {
        let r = Request {
            group: "",
            version: "v1",
            ..request(Operation::Create, resource, "", ns)
        };
        assert_eq!(scope_matches(Some(scope), &r), expected);
    }

    #[rstest]
    #[case(json!({}), json!({}), json!({ "app": "x" }), json!({}), true)]
    #[case(json!({ "matchLabels": { "watched": "yes" } }), json!({}), json!({}), json!({ "watched": "yes" }), true)]
    #[case(json!({ "matchLabels": { "watched": "yes" } }), json!({}), json!({}), json!({}), false)]
    #[case(json!({}), json!({ "matchLabels": { "app": "x" } }), json!({ "app": "x" }), json!({}), true)]
    #[case(json!({}), json!({ "matchLabels": { "app": "x" } }), json!({ "app": "y" }), json!({}), false)]
    #[case(json!({}), json!({ "matchExpressions": [{ "key": "skip", "operator": "DoesNotExist" }] }), json!({ "skip": "1" }), json!({}), false)]
    fn selectors(
        #[case] ns_selector: Value,
        #[case] object_selector: Value,
        #[case] object_labels: Value,
        #[case] ns_labels: Value,
        #[case] expected: bool,
    ) {
        let w = json!({ "namespaceSelector": ns_selector, "objectSelector": object_selector });
        let object = json!({ "metadata": { "labels": object_labels } });
        let ns = json!({ "metadata": { "labels": ns_labels } });
        let r = Request {
            object: Some(&object),
            namespace_object: Some(&ns),
            ..request(Operation::Create, "ipaddresspools", "", "metallb-system")
        };
        assert_eq!(selectors_match(&w, &r), Ok(expected));
    }

    #[test]
    fn object_selector_matches_the_old_object_too() {
        let w = json!({ "objectSelector": { "matchLabels": { "app": "x" } } });
        let old = json!({ "metadata": { "labels": { "app": "x" } } });
        let r = Request {
            old_object: Some(&old),
            ..request(Operation::Delete, "ipaddresspools", "", "")
        };
        assert_eq!(selectors_match(&w, &r), Ok(true));
    }

    #[rstest]
    #[case(None, &["v1beta2"], Some("v1beta2"))]
    #[case(Some("Equivalent"), &["v1beta2"], Some("v1beta2"))]
    #[case(Some("Exact"), &["v1beta2"], None)]
    #[case(None, &[], None)]
    fn match_policy(
        #[case] policy: Option<&str>,
        #[case] others: &[&str],
        #[case] expected: Option<&str>,
    ) {
        let mut w = json!({ "rules": [{ "operations": ["*"], "apiGroups": ["metallb.io"], "apiVersions": ["v1beta2"], "resources": ["bgppeers"] }] });
        if let Some(p) = policy {
            w["matchPolicy"] = json!(p);
        }
        let others: Vec<String> = others.iter().map(|s| (*s).to_owned()).collect();
        let r = request(Operation::Create, "bgppeers", "", "ns");
        assert_eq!(chosen_version(&w, &r, &others).as_deref(), expected);
    }

    #[test]
    fn the_request_version_wins() {
        let w = json!({ "rules": [{ "operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"] }] });
        let r = request(Operation::Create, "bgppeers", "", "ns");
        assert_eq!(
            chosen_version(&w, &r, &["v1beta2".into()]).as_deref(),
            Some("v1beta1")
        );
    }

    #[test]
    fn webhook_configurations_are_exempt() {
        assert!(exempt(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations"
        ));
        assert!(!exempt("", "configmaps"));
    }
}
