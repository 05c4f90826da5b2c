//! ValidatingWebhookConfiguration objects as stored: kube-apiserver's
//! defaults (failurePolicy Fail, matchPolicy Equivalent, empty selectors,
//! timeoutSeconds 10, scope `*`, service port 443) and the validation that
//! keeps a configuration callable. Pure.

use crate::selector::LabelSelector;
use serde_json::{Value, json};

fn default(obj: &mut Value, key: &str, value: Value) {
    if obj[key].is_null() {
        obj[key] = value;
    }
}

fn one_of(v: &Value, allowed: &[&str]) -> bool {
    v.as_str().is_some_and(|s| allowed.contains(&s))
}

/// Fills in the defaults of every webhook of `obj`.
pub fn default_webhooks(obj: &mut Value) {
    for w in obj["webhooks"].as_array_mut().into_iter().flatten() {
        default(w, "failurePolicy", json!("Fail"));
        default(w, "matchPolicy", json!("Equivalent"));
        default(w, "namespaceSelector", json!({}));
        default(w, "objectSelector", json!({}));
        default(w, "timeoutSeconds", json!(10));
        if w["clientConfig"]["service"].is_object() {
            default(&mut w["clientConfig"]["service"], "port", json!(443));
        }
        for r in w["rules"].as_array_mut().into_iter().flatten() {
            default(r, "scope", json!("*"));
        }
    }
}

/// What is wrong with a (defaulted) configuration: (field, message).
pub fn validate(obj: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let mut names = Vec::new();
    for (i, w) in obj["webhooks"].as_array().into_iter().flatten().enumerate() {
        let mut bad = |field: &str, message: String| {
            causes.push((format!("webhooks[{i}].{field}"), message));
        };
        match w["name"].as_str() {
            None | Some("") => bad("name", "Required value".into()),
            Some(n) if names.contains(&n) => bad("name", format!("Duplicate value: {n:?}")),
            Some(n) => names.push(n),
        }
        check_client_config(&w["clientConfig"], &mut bad);
        check_policies(w, &mut bad);
        for key in ["namespaceSelector", "objectSelector"] {
            if let Err(e) = LabelSelector::from_object(&w[key]) {
                bad(key, format!("Invalid value: {e}"));
            }
        }
        for (j, r) in w["rules"].as_array().into_iter().flatten().enumerate() {
            check_rule(r, &mut |field, message| {
                bad(&format!("rules[{j}].{field}"), message);
            });
        }
    }
    causes
}

/// Where a webhook is called: exactly one of a URL or a Service, and a
/// Service by name and namespace. `bad` takes a field under the webhook
/// and what is wrong with it.
fn check_client_config(cc: &Value, bad: &mut dyn FnMut(&str, String)) {
    if cc["url"].is_string() == cc["service"].is_object() {
        bad(
            "clientConfig",
            "Required value: exactly one of url or service is required".into(),
        );
    }
    if cc["service"].is_object()
        && (cc["service"]["name"].as_str().is_none_or(str::is_empty)
            || cc["service"]["namespace"]
                .as_str()
                .is_none_or(str::is_empty))
    {
        bad(
            "clientConfig.service",
            "Required value: name and namespace".into(),
        );
    }
}

/// How a webhook is called: the enumerated policies, the review versions
/// this server can send, and the timeout's bounds.
fn check_policies(w: &Value, bad: &mut dyn FnMut(&str, String)) {
    if !one_of(
        &w["sideEffects"],
        &["None", "NoneOnDryRun", "Some", "Unknown"],
    ) {
        bad(
            "sideEffects",
            "Unsupported value: supported values: \"None\", \"NoneOnDryRun\"".into(),
        );
    }
    let versions = &w["admissionReviewVersions"];
    if !versions
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v == "v1"))
    {
        bad(
            "admissionReviewVersions",
            "Invalid value: must include \"v1\" (the only AdmissionReview version this server sends)".into(),
        );
    }
    if !one_of(&w["failurePolicy"], &["Fail", "Ignore"]) {
        bad(
            "failurePolicy",
            "Unsupported value: supported values: \"Fail\", \"Ignore\"".into(),
        );
    }
    if !one_of(&w["matchPolicy"], &["Exact", "Equivalent"]) {
        bad(
            "matchPolicy",
            "Unsupported value: supported values: \"Equivalent\", \"Exact\"".into(),
        );
    }
    if !w["timeoutSeconds"]
        .as_i64()
        .is_some_and(|t| (1..=30).contains(&t))
    {
        bad(
            "timeoutSeconds",
            "Invalid value: the timeout value must be between 1 and 30 seconds".into(),
        );
    }
}

/// What one rule matches: operations, groups, versions, resources and
/// scope, each present and known. `bad` takes a field under the rule.
fn check_rule(r: &Value, bad: &mut dyn FnMut(&str, String)) {
    let ops_ok = r["operations"].as_array().is_some_and(|ops| {
        !ops.is_empty()
            && ops
                .iter()
                .all(|o| one_of(o, &["CREATE", "UPDATE", "DELETE", "CONNECT", "*"]))
    });
    if !ops_ok {
        bad(
            "operations",
            "Unsupported value: supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"".into(),
        );
    }
    for key in ["apiGroups", "apiVersions", "resources"] {
        if r[key].as_array().is_none_or(Vec::is_empty) {
            bad(key, "Required value".into());
        }
    }
    if !one_of(&r["scope"], &["*", "Cluster", "Namespaced"]) {
        bad(
            "scope",
            "Unsupported value: supported values: \"*\", \"Cluster\", \"Namespaced\"".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn good() -> Value {
        json!({ "webhooks": [{
            "name": "pools.metallb.io",
            "clientConfig": { "service": { "namespace": "metallb-system", "name": "hook", "path": "/v" } },
            "rules": [{ "operations": ["CREATE"], "apiGroups": ["metallb.io"], "apiVersions": ["v1beta1"], "resources": ["ipaddresspools"] }],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }] })
    }

    #[test]
    fn defaults() {
        let mut c = good();
        default_webhooks(&mut c);
        let w = &c["webhooks"][0];
        assert_eq!(w["failurePolicy"], "Fail");
        assert_eq!(w["matchPolicy"], "Equivalent");
        assert_eq!(w["timeoutSeconds"], 10);
        assert_eq!(w["namespaceSelector"], json!({}));
        assert_eq!(w["clientConfig"]["service"]["port"], 443);
        assert_eq!(w["rules"][0]["scope"], "*");
        assert_eq!(validate(&c), vec![]);
    }

    #[rstest]
    #[case("/webhooks/0/sideEffects", json!(null), "webhooks[0].sideEffects")]
    #[case("/webhooks/0/admissionReviewVersions", json!(["v1beta1"]), "webhooks[0].admissionReviewVersions")]
    #[case("/webhooks/0/timeoutSeconds", json!(31), "webhooks[0].timeoutSeconds")]
    #[case("/webhooks/0/failurePolicy", json!("Sometimes"), "webhooks[0].failurePolicy")]
    #[case("/webhooks/0/name", json!(""), "webhooks[0].name")]
    #[case("/webhooks/0/clientConfig", json!({}), "webhooks[0].clientConfig")]
    #[case("/webhooks/0/rules/0/operations", json!(["GET"]), "webhooks[0].rules[0].operations")]
    #[case("/webhooks/0/rules/0/scope", json!("Global"), "webhooks[0].rules[0].scope")]
    #[case("/webhooks/0/objectSelector", json!({ "matchExpressions": [{ "key": "a", "operator": "Gt" }] }), "webhooks[0].objectSelector")]
    fn invalid(#[case] pointer: &str, #[case] value: Value, #[case] field: &str) {
        let mut c = good();
        default_webhooks(&mut c);
        *c.pointer_mut(pointer).expect("pointer") = value;
        let causes = validate(&c);
        assert_eq!(
            causes.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(),
            vec![field],
            "{causes:?}"
        );
    }

    #[test]
    fn names_are_unique() {
        let mut c = good();
        let w = c["webhooks"][0].clone();
        c["webhooks"].as_array_mut().expect("list").push(w);
        default_webhooks(&mut c);
        assert_eq!(validate(&c)[0].0, "webhooks[1].name");
    }
}
