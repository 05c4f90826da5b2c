//! RBAC evaluation, as kube-apiserver's RBAC authorizer does it: a
//! request is allowed when some rule of a role bound to the user allows
//! it. ClusterRoleBindings grant a ClusterRole's rules everywhere;
//! RoleBindings grant a Role's (or a ClusterRole's) rules in their own
//! namespace. Rules match on verbs, API groups, resources (with
//! `resource/subresource` and `*/subresource`), resourceNames (a request
//! without a name never matches a rule that lists names) and, for
//! requests outside the API, nonResourceURLs (exact, or a prefix ending
//! in `*`). Aggregated ClusterRoles are not expanded.
//!
//! Pure: the user, the request and the policy objects (as JSON) in, a
//! decision out.

use super::User;
use serde_json::Value;

/// What a request does, in RBAC's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A request for an API object or collection.
    Resource {
        /// get, list, watch, create, update, patch, delete,
        /// deletecollection (or impersonate, ...).
        verb: String,
        /// API group ("" for core).
        group: String,
        /// Plural.
        resource: String,
        /// Subresource ("" for none).
        subresource: String,
        /// Namespace ("" for cluster scope).
        namespace: String,
        /// Object name ("" for collections and creates).
        name: String,
    },
    /// A request for a path outside the API (`/healthz`, `/version`,
    /// discovery).
    NonResource {
        /// The lower-case HTTP verb (get, post, ...).
        verb: String,
        /// The URL path.
        path: String,
    },
}

/// The RBAC objects in force.
#[derive(Debug, Default, Clone)]
pub struct Policy {
    /// ClusterRoles.
    pub cluster_roles: Vec<Value>,
    /// ClusterRoleBindings.
    pub cluster_role_bindings: Vec<Value>,
    /// Roles of the request's namespace.
    pub roles: Vec<Value>,
    /// RoleBindings of the request's namespace.
    pub role_bindings: Vec<Value>,
}

/// The strings of a JSON list (none when it is not one).
pub(super) fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn has(list: &Value, wanted: &str) -> bool {
    strings(list).any(|s| s == "*" || s == wanted)
}

fn subject_matches(subject: &Value, user: &User, binding_ns: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => name == user.name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let ns = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

/// Whether `rule` allows `request`.
pub fn rule_allows(rule: &Value, request: &Request) -> bool {
    match request {
        Request::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            if !has(&rule["verbs"], verb) || !has(&rule["apiGroups"], group) {
                return false;
            }
            let resource_ok = strings(&rule["resources"]).any(|r| {
                if subresource.is_empty() {
                    r == "*" || r == resource
                } else {
                    r == "*"
                        || r == format!("{resource}/{subresource}")
                        || r == format!("*/{subresource}")
                }
            });
            let names: Vec<&str> = strings(&rule["resourceNames"]).collect();
            resource_ok
                && (names.is_empty() || (!name.is_empty() && names.contains(&name.as_str())))
        }
        Request::NonResource { verb, path } => {
            has(&rule["verbs"], verb)
                && strings(&rule["nonResourceURLs"]).any(|u| match u.strip_suffix('*') {
                    Some(prefix) => path.starts_with(prefix),
                    None => u == path,
                })
        }
    }
}

fn role_rules<'a>(roles: &'a [Value], name: &str) -> &'a [Value] {
    roles
        .iter()
        .find(|r| r["metadata"]["name"] == name)
        .and_then(|r| r["rules"].as_array())
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn bound<'a>(bindings: &'a [Value], user: &'a User) -> impl Iterator<Item = &'a Value> {
    bindings.iter().filter(move |b| {
        let ns = b["metadata"]["namespace"].as_str().unwrap_or_default();
        strings_objects(&b["subjects"]).any(|s| subject_matches(s, user, ns))
    })
}

fn strings_objects(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// Whether `policy` allows `user` to make `request`.
pub fn allows(policy: &Policy, user: &User, request: &Request) -> bool {
    let mut rules: Vec<&Value> = Vec::new();
    for b in bound(&policy.cluster_role_bindings, user) {
        if b["roleRef"]["kind"] == "ClusterRole" {
            let name = b["roleRef"]["name"].as_str().unwrap_or_default();
            rules.extend(role_rules(&policy.cluster_roles, name));
        }
    }
    let namespaced =
        matches!(request, Request::Resource { namespace, .. } if !namespace.is_empty());
    if namespaced {
        for b in bound(&policy.role_bindings, user) {
            let name = b["roleRef"]["name"].as_str().unwrap_or_default();
            match b["roleRef"]["kind"].as_str() {
                Some("ClusterRole") => rules.extend(role_rules(&policy.cluster_roles, name)),
                Some("Role") => rules.extend(role_rules(&policy.roles, name)),
                _ => {}
            }
        }
    }
    rules.into_iter().any(|r| rule_allows(r, request))
}

#[cfg(test)]
mod tests;
