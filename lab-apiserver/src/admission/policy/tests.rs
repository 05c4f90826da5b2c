//! The admission policy evaluation: a policy that keeps a ServiceAccount
//! to the leases named after its node, its warn and failure policies, and
//! how resource names and exclusions narrow its match.

use super::*;
use crate::admission::rules::Operation;
use serde_json::json;

const SPEAKER: &str = "system:serviceaccount:metallb-system:speaker";

/// A policy that keeps one ServiceAccount to leases named after its node.
fn policy(failure: &str, extra_validation: Option<&str>) -> Value {
    let mut validations = vec![json!({
        "expression": "request.name.startsWith('metallb-speaker-')",
        "message": "only presence leases",
        "reason": "Forbidden",
    })];
    validations.push(json!({
        "expression": "!('authentication.kubernetes.io/node-name' in request.userInfo.extra) || request.name == 'metallb-speaker-' + request.userInfo.extra['authentication.kubernetes.io/node-name'][0]",
        "message": "only its own node's lease",
        "reason": "Forbidden",
    }));
    if let Some(e) = extra_validation {
        validations.push(json!({ "expression": e }));
    }
    json!({
        "metadata": { "name": "speaker-leases" },
        "spec": {
            "failurePolicy": failure,
            "matchConstraints": { "resourceRules": [{
                "apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["leases"],
            }] },
            "matchConditions": [{ "name": "speaker", "expression": format!("request.userInfo.username == '{SPEAKER}'") }],
            "validations": validations,
        },
    })
}

fn binding(actions: &[&str]) -> Value {
    json!({
        "metadata": { "name": "speaker-leases" },
        "spec": { "policyName": "speaker-leases", "validationActions": actions },
    })
}

fn user(name: &str) -> User {
    User {
        name: name.to_owned(),
        uid: String::new(),
        groups: vec!["system:authenticated".to_owned()],
    }
}

fn decide(
    policies: &[Value],
    bindings: &[Value],
    (who, node): (&str, Option<&str>),
    lease: &str,
) -> Verdict {
    let object = json!({ "metadata": { "name": lease, "namespace": "metallb-system" } });
    let request = Request {
        operation: Operation::Update,
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        subresource: "",
        namespace: "metallb-system",
        object: Some(&object),
        old_object: Some(&object),
        namespace_object: None,
    };
    let extra: BTreeMap<String, Vec<String>> = node
        .map(|n| {
            (
                "authentication.kubernetes.io/node-name".to_owned(),
                vec![n.to_owned()],
            )
        })
        .into_iter()
        .collect();
    let u = user(who);
    evaluate(
        policies,
        bindings,
        &Subject {
            request: &request,
            name: lease,
            user: &u,
            extra: &extra,
            dry_run: false,
        },
    )
}

#[test]
fn a_bound_policy_keeps_the_speaker_to_its_own_lease() {
    let (p, b) = ([policy("Fail", None)], [binding(&["Deny"])]);
    let denied = |v: Verdict| v.denial.map(|d| (d.code, d.message));
    let speaker = (SPEAKER, None);
    assert_eq!(denied(decide(&p, &b, speaker, "metallb-speaker-n1")), None);
    assert_eq!(
        denied(decide(&p, &b, speaker, "metallb-controller")),
        Some((
            403,
            "ValidatingAdmissionPolicy 'speaker-leases' with binding 'speaker-leases' denied request: only presence leases".to_owned()
        ))
    );
    // Another writer is not the policy's concern (its match condition).
    let controller = ("system:serviceaccount:metallb-system:controller", None);
    assert_eq!(
        denied(decide(&p, &b, controller, "metallb-controller")),
        None
    );
    // With the token's node name, only that node's lease.
    let on_n1 = (SPEAKER, Some("n1"));
    assert_eq!(denied(decide(&p, &b, on_n1, "metallb-speaker-n1")), None);
    let other = denied(decide(&p, &b, on_n1, "metallb-speaker-n2"));
    assert!(
        other
            .as_ref()
            .is_some_and(|(code, m)| *code == 403 && m.ends_with("only its own node's lease")),
        "{other:?}"
    );
    // Unbound, a policy does nothing.
    assert_eq!(
        decide(&p, &[], speaker, "metallb-controller"),
        Verdict::default()
    );
}

#[test]
fn warn_warns_and_failure_policy_decides_errors() {
    let p = [policy("Fail", None)];
    let warned = decide(&p, &[binding(&["Warn"])], (SPEAKER, None), "other");
    assert_eq!(warned.denial, None);
    assert_eq!(
        warned.warnings,
        [
            "Validation failed for ValidatingAdmissionPolicy 'speaker-leases' with binding 'speaker-leases': only presence leases"
        ]
    );
    // An expression that fails to evaluate (no such field) fails the
    // policy: denied under Fail, through under Ignore.
    let broken = "object.spec.nothing == 1";
    let lease = "metallb-speaker-n1";
    let fail = decide(
        &[policy("Fail", Some(broken))],
        &[binding(&["Deny"])],
        (SPEAKER, None),
        lease,
    );
    let d = fail.denial.expect("denied");
    assert_eq!(d.code, 422);
    assert!(d.message.contains(broken), "{}", d.message);
    let ignore = decide(
        &[policy("Ignore", Some(broken))],
        &[binding(&["Deny"])],
        (SPEAKER, None),
        lease,
    );
    assert_eq!(ignore, Verdict::default());
    // A validation without message names its expression.
    let no_message = decide(
        &[policy("Fail", Some("false"))],
        &[binding(&["Deny"])],
        (SPEAKER, None),
        lease,
    );
    assert!(
        no_message
            .denial
            .expect("denied")
            .message
            .ends_with("failed expression: false")
    );
}

#[test]
fn resource_names_and_exclusions_narrow_the_match() {
    let mut p = policy("Fail", None);
    p["spec"]["matchConstraints"]["resourceRules"][0]["resourceNames"] =
        json!(["metallb-controller"]);
    let b = [binding(&["Deny"])];
    assert!(
        decide(&[p.clone()], &b, (SPEAKER, None), "metallb-controller")
            .denial
            .is_some()
    );
    assert!(
        decide(&[p.clone()], &b, (SPEAKER, None), "something-else")
            .denial
            .is_none()
    );
    p["spec"]["matchConstraints"]["excludeResourceRules"] = json!([{
        "apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"],
        "operations": ["UPDATE"], "resources": ["leases"],
    }]);
    assert!(
        decide(&[p], &b, (SPEAKER, None), "metallb-controller")
            .denial
            .is_none()
    );
}
