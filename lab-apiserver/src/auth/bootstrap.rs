//! The RBAC policy a cluster starts with, as kube-apiserver's bootstrap
//! policy: `cluster-admin` for `system:masters`, discovery and self
//! reviews for every authenticated user, health and version for everyone.

use serde_json::{Value, json};

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": name, "labels": { "kubernetes.io/bootstrapping": "rbac-defaults" } },
        "rules": rules,
    })
}

fn binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g }))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": name, "labels": { "kubernetes.io/bootstrapping": "rbac-defaults" } },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": subjects,
    })
}

/// ClusterRoles, then ClusterRoleBindings.
pub fn objects() -> (Vec<Value>, Vec<Value>) {
    let roles = vec![
        cluster_role(
            "cluster-admin",
            json!([
                { "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] },
                { "nonResourceURLs": ["*"], "verbs": ["*"] },
            ]),
        ),
        cluster_role(
            "system:discovery",
            json!([{ "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"] }]),
        ),
        cluster_role(
            "system:basic-user",
            json!([
                { "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"] },
                { "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"] },
            ]),
        ),
        cluster_role(
            "system:public-info-viewer",
            json!([{ "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"] }]),
        ),
    ];
    let bindings = vec![
        binding("cluster-admin", &[super::MASTERS]),
        binding("system:discovery", &["system:authenticated"]),
        binding("system:basic-user", &["system:authenticated"]),
        binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ];
    (roles, bindings)
}
