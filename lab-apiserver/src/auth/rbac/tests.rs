//! RBAC evaluation as tables: rules, bindings, subjects and the 403
//! messages kube-apiserver gives.

use super::*;
use rstest::rstest;
use serde_json::json;

fn sa(ns: &str, name: &str) -> User {
    User::impersonated(&format!("system:serviceaccount:{ns}:{name}"), vec![], "")
}

/// The RBAC objects of the generated `manifests/metallb-native.yaml`,
/// with `namespace`'s Roles and RoleBindings.
fn metallb_policy(namespace: &str) -> Policy {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../manifests/metallb-native.yaml"
    );
    let text = std::fs::read_to_string(path).expect("generated manifests");
    let mut policy = Policy::default();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: serde_yaml::Value = serde::Deserialize::deserialize(doc).expect("YAML");
        let v: Value = serde_json::to_value(v).expect("JSON");
        let in_ns = v["metadata"]["namespace"] == namespace;
        match v["kind"].as_str() {
            Some("ClusterRole") => policy.cluster_roles.push(v),
            Some("ClusterRoleBinding") => policy.cluster_role_bindings.push(v),
            Some("Role") if in_ns => policy.roles.push(v),
            Some("RoleBinding") if in_ns => policy.role_bindings.push(v),
            _ => {}
        }
    }
    policy
}

fn res(verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> Request {
    let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
    Request::Resource {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

#[rstest]
#[case(
    "speaker",
    "create",
    "metallb.io",
    "servicel2statuses",
    "metallb-system",
    "",
    true
)]
#[case(
    "speaker",
    "delete",
    "metallb.io",
    "ipaddresspools",
    "metallb-system",
    "prod",
    false
)]
#[case("speaker", "list", "", "nodes", "", "", true)]
#[case("speaker", "patch", "", "services/status", "default", "web", false)]
#[case("speaker", "get", "", "pods", "metallb-system", "speaker-x", true)]
#[case("speaker", "list", "metallb.io", "ipaddresspools", "other", "", false)]
#[case("controller", "patch", "", "services/status", "default", "web", true)]
#[case("controller", "update", "", "services/status", "default", "web", false)]
#[case(
    "controller",
    "patch",
    "metallb.io",
    "ipaddresspools/status",
    "metallb-system",
    "p",
    true
)]
#[case(
    "controller",
    "patch",
    "metallb.io",
    "ipaddresspools",
    "metallb-system",
    "p",
    false
)]
#[case("controller", "create", "", "secrets", "metallb-system", "", true)]
#[case("controller", "create", "", "secrets", "default", "", false)]
fn the_manifests_rbac(
    #[case] account: &str,
    #[case] verb: &str,
    #[case] group: &str,
    #[case] resource: &str,
    #[case] ns: &str,
    #[case] name: &str,
    #[case] allowed: bool,
) {
    let policy = metallb_policy(ns);
    assert_eq!(
        allows(
            &policy,
            &sa("metallb-system", account),
            &res(verb, group, resource, ns, name)
        ),
        allowed
    );
}

#[test]
fn resource_names_subresources_wildcards_and_urls() {
    let rule = json!({ "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get", "update"] });
    assert!(rule_allows(&rule, &res("get", "", "configmaps", "x", "a")));
    assert!(!rule_allows(&rule, &res("get", "", "configmaps", "x", "b")));
    assert!(
        !rule_allows(&rule, &res("list", "", "configmaps", "x", "")),
        "a named rule never matches a collection"
    );
    assert!(
        !rule_allows(&rule, &res("get", "", "configmaps/status", "x", "a")),
        "subresources are separate"
    );
    let any_status = json!({ "apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"] });
    assert!(rule_allows(
        &any_status,
        &res("patch", "metallb.io", "ipaddresspools/status", "x", "p")
    ));
    assert!(!rule_allows(
        &any_status,
        &res("patch", "metallb.io", "ipaddresspools", "x", "p")
    ));
    let urls = json!({ "nonResourceURLs": ["/metrics", "/apis/*"], "verbs": ["get"] });
    let url = |path: &str| Request::NonResource {
        verb: "get".into(),
        path: path.into(),
    };
    assert!(rule_allows(&urls, &url("/metrics")));
    assert!(!rule_allows(&urls, &url("/metrics/x")));
    assert!(rule_allows(&urls, &url("/apis/metallb.io")));
    assert!(
        !rule_allows(&urls, &res("get", "", "metrics", "", "")),
        "URL rules never grant resources"
    );
}

#[test]
fn bindings_grant_by_user_group_and_account_in_their_scope() {
    let reader = json!({ "metadata": { "name": "reader" }, "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["list"] }] });
    let policy = Policy {
        cluster_roles: vec![reader.clone()],
        cluster_role_bindings: vec![
            json!({ "metadata": { "name": "b" }, "roleRef": { "kind": "ClusterRole", "name": "reader" },
            "subjects": [{ "kind": "Group", "name": "readers" }] }),
        ],
        roles: vec![
            json!({ "metadata": { "name": "reader", "namespace": "a" }, "rules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get"] }] }),
        ],
        role_bindings: vec![
            json!({ "metadata": { "name": "r", "namespace": "a" }, "roleRef": { "kind": "Role", "name": "reader" },
                "subjects": [{ "kind": "User", "name": "alice" }, { "kind": "ServiceAccount", "name": "bot" }] }),
            json!({ "metadata": { "name": "c", "namespace": "a" }, "roleRef": { "kind": "ClusterRole", "name": "reader" },
                "subjects": [{ "kind": "User", "name": "bob" }] }),
        ],
    };
    let user = |name: &str, groups: &[&str]| User {
        name: name.into(),
        uid: String::new(),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
    };
    assert!(allows(
        &policy,
        &user("carol", &["readers"]),
        &res("list", "", "pods", "", "")
    ));
    assert!(!allows(
        &policy,
        &user("carol", &[]),
        &res("list", "", "pods", "", "")
    ));
    assert!(allows(
        &policy,
        &user("alice", &[]),
        &res("get", "", "secrets", "a", "s")
    ));
    assert!(
        allows(
            &policy,
            &sa("a", "bot"),
            &res("get", "", "secrets", "a", "s")
        ),
        "account namespace defaults to the binding's"
    );
    assert!(!allows(
        &policy,
        &sa("b", "bot"),
        &res("get", "", "secrets", "a", "s")
    ));
    assert!(
        allows(
            &policy,
            &user("bob", &[]),
            &res("list", "", "pods", "a", "")
        ),
        "a RoleBinding to a ClusterRole grants in its namespace"
    );
    assert!(
        !allows(&policy, &user("bob", &[]), &res("list", "", "pods", "", "")),
        "but not cluster-wide"
    );
}
