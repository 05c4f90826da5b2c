//! ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1), as
//! kube-apiserver evaluates it: a policy acts only through a binding
//! (`spec.policyName`); a write matches when the policy's
//! `matchConstraints` (resourceRules with resourceNames,
//! excludeResourceRules, namespaceSelector, objectSelector) and the
//! binding's `matchResources` both take it; then every `matchCondition`
//! must hold, and every `validation` that does not hold denies the write
//! (`Deny`) or warns (`Warn`) as the binding's `validationActions` say.
//! An expression that does not compile or fails to evaluate fails the
//! policy: the write is denied under `failurePolicy: Fail` (the default)
//! and goes through under `Ignore`.
//!
//! The CEL variables are `object`, `oldObject` (null when absent),
//! `request` (operation, name, namespace, userInfo with username, uid,
//! groups and extra, resource, subResource, dryRun), `namespaceObject` and
//! `params` (always null: `paramKind` is not served). Not served either:
//! `variables`, `auditAnnotations`, `messageExpression` (the `message` or
//! the expression stands in) and type checking at create. Pure: JSON in,
//! decisions out.

use super::rules::{self, Request};
use crate::auth::User;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Who writes, as the policies see them.
pub struct Subject<'a> {
    /// The write.
    pub request: &'a Request<'a>,
    /// The object's name.
    pub name: &'a str,
    /// The writer.
    pub user: &'a User,
    /// The writer's extra attributes (a ServiceAccount token's node name,
    /// `authentication.kubernetes.io/node-name`).
    pub extra: &'a BTreeMap<String, Vec<String>>,
    /// `?dryRun=All`.
    pub dry_run: bool,
}

/// A denial: HTTP code, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// 422 (Invalid, the default), 403, 401 or 413.
    pub code: u16,
    /// The validation's `reason`.
    pub reason: &'static str,
    /// kube-apiserver's wording.
    pub message: String,
}

/// What the policies decided of one write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// `Warn` actions' messages.
    pub warnings: Vec<String>,
    /// The first denial, in binding-name order.
    pub denial: Option<Denial>,
}

fn matches_constraints(c: &Value, subject: &Subject<'_>) -> Result<bool, String> {
    let r = subject.request;
    let rule_matches = |rule: &Value| {
        let as_webhook = json!({ "rules": [rule] });
        let names = rule["resourceNames"].as_array();
        rules::rules_match(&as_webhook, r, r.version)
            && names.is_none_or(|n| n.is_empty() || n.iter().any(|x| x == subject.name))
    };
    let listed = c["resourceRules"].as_array().into_iter().flatten();
    let excluded = c["excludeResourceRules"].as_array().into_iter().flatten();
    if !listed.clone().any(rule_matches) || excluded.clone().any(rule_matches) {
        return Ok(false);
    }
    rules::selectors_match(c, r)
}

fn request_json(s: &Subject<'_>) -> Value {
    let r = s.request;
    json!({
        "operation": r.operation.as_str(),
        "name": s.name,
        "namespace": r.namespace,
        "resource": { "group": r.group, "version": r.version, "resource": r.resource },
        "subResource": r.subresource,
        "dryRun": s.dry_run,
        "userInfo": {
            "username": s.user.name,
            "uid": s.user.uid,
            "groups": s.user.groups,
            "extra": s.extra,
        },
    })
}

/// What one binding of one policy decided: a failed validation's
/// message, or the error that fails the policy.
enum Outcome {
    Allowed,
    Failed {
        message: String,
        reason: &'static str,
    },
    Error(String),
}

fn bool_of(expression: &str, vars: &[(&str, &Value)]) -> Result<bool, String> {
    match crd_cel::eval(expression, vars) {
        Ok(crd_cel::Outcome::Bool(b)) => Ok(b),
        Ok(crd_cel::Outcome::Other(v)) => Err(format!(
            "expression '{expression}' resulted in {v}, not a bool"
        )),
        Err(crd_cel::Error::Compile(e)) => Err(format!("compilation error: {e}")),
        Err(crd_cel::Error::Eval(e)) => {
            Err(format!("expression '{expression}' resulted in error: {e}"))
        }
    }
}

fn reason_of(v: &Value) -> &'static str {
    match v["reason"].as_str() {
        Some("Forbidden") => "Forbidden",
        Some("Unauthorized") => "Unauthorized",
        Some("RequestEntityTooLarge") => "RequestEntityTooLarge",
        _ => "Invalid",
    }
}

fn run(policy: &Value, subject: &Subject<'_>) -> Outcome {
    let r = subject.request;
    let null = Value::Null;
    let request = request_json(subject);
    let vars = [
        ("object", r.object.unwrap_or(&null)),
        ("oldObject", r.old_object.unwrap_or(&null)),
        ("request", &request),
        ("namespaceObject", r.namespace_object.unwrap_or(&null)),
        ("params", &null),
    ];
    for condition in policy["spec"]["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let expression = condition["expression"].as_str().unwrap_or_default();
        match bool_of(expression, &vars) {
            Ok(true) => {}
            Ok(false) => return Outcome::Allowed,
            Err(e) => return Outcome::Error(e),
        }
    }
    for v in policy["spec"]["validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let expression = v["expression"].as_str().unwrap_or_default();
        match bool_of(expression, &vars) {
            Ok(true) => {}
            Ok(false) => {
                let message = v["message"]
                    .as_str()
                    .map_or_else(|| format!("failed expression: {expression}"), str::to_owned);
                return Outcome::Failed {
                    message,
                    reason: reason_of(v),
                };
            }
            Err(e) => return Outcome::Error(e),
        }
    }
    Outcome::Allowed
}

fn code_of(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// What `policies` bound by `bindings` decide of the write of `subject`.
pub fn evaluate(policies: &[Value], bindings: &[Value], subject: &Subject<'_>) -> Verdict {
    let mut verdict = Verdict::default();
    let mut bindings: Vec<&Value> = bindings.iter().collect();
    bindings.sort_by_key(|b| {
        b["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    for binding in bindings {
        let spec = &binding["spec"];
        let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
        let Some(policy) = policies
            .iter()
            .find(|p| p["metadata"]["name"] == spec["policyName"])
        else {
            continue;
        };
        let policy_name = policy["metadata"]["name"].as_str().unwrap_or_default();
        let fail_closed = policy["spec"]["failurePolicy"].as_str() != Some("Ignore");
        let selected =
            matches_constraints(&policy["spec"]["matchConstraints"], subject).and_then(|m| {
                match spec.get("matchResources").filter(|m| m.is_object()) {
                    Some(narrower) if m => {
                        // A binding's matchResources without rules narrows by
                        // its selectors only.
                        let rules_given = narrower["resourceRules"].is_array();
                        if rules_given {
                            matches_constraints(narrower, subject)
                        } else {
                            rules::selectors_match(narrower, subject.request)
                        }
                    }
                    _ => Ok(m),
                }
            });
        let outcome = match selected {
            Ok(false) => continue,
            Ok(true) => run(policy, subject),
            Err(e) => Outcome::Error(e),
        };
        let (detail, reason) = match outcome {
            Outcome::Allowed => continue,
            Outcome::Error(_) if !fail_closed => continue,
            Outcome::Error(e) => (e, "Invalid"),
            Outcome::Failed { message, reason } => (message, reason),
        };
        let who =
            format!("ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}'");
        let actions: Vec<&str> = spec["validationActions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if actions.contains(&"Warn") {
            verdict
                .warnings
                .push(format!("Validation failed for {who}: {detail}"));
        }
        if actions.contains(&"Deny") && verdict.denial.is_none() {
            verdict.denial = Some(Denial {
                code: code_of(reason),
                reason,
                message: format!("{who} denied request: {detail}"),
            });
        }
    }
    verdict
}

#[cfg(test)]
mod tests;
