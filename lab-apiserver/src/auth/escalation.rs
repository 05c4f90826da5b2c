//! RBAC's escalation prevention, as kube-apiserver's: a Role or
//! ClusterRole may be written only by someone who holds every permission
//! it grants (in its namespace; cluster-wide for a ClusterRole) or may
//! `escalate` roles; a RoleBinding or ClusterRoleBinding only by someone
//! who holds every permission of the role it names (where it binds) or
//! may `bind` that role. Without this, anyone allowed to create a
//! binding could bind cluster-admin to themselves. Pure: the caller
//! says what the writer is allowed.

use super::rbac::Request;
use serde_json::Value;

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

fn strings(v: &Value) -> Vec<&str> {
    super::rbac::strings(v).collect()
}

/// Every request `rule` allows, one per verb, group, resource and name
/// (wildcards as they are: only a wildcard grant covers them), in
/// `namespace`.
pub fn requests_of(rule: &Value, namespace: &str) -> Vec<Request> {
    let verbs = strings(&rule["verbs"]);
    let urls = strings(&rule["nonResourceURLs"]);
    let mut out = Vec::new();
    for verb in &verbs {
        for path in &urls {
            out.push(Request::NonResource {
                verb: (*verb).into(),
                path: (*path).into(),
            });
        }
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
                let names = strings(&rule["resourceNames"]);
                let names = if names.is_empty() { vec![""] } else { names };
                for name in names {
                    out.push(Request::Resource {
                        verb: (*verb).into(),
                        group: group.into(),
                        resource: resource.into(),
                        subresource: subresource.into(),
                        namespace: namespace.into(),
                        name: name.into(),
                    });
                }
            }
        }
    }
    out
}

/// What an RBAC write asks the writer to hold, or to be allowed instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demand {
    /// The permission that stands in for holding the rules: `escalate`
    /// on the role written, or `bind` on the role bound.
    pub instead: Request,
    /// The rules to hold, and where.
    pub rules: Vec<Value>,
    /// Where the rules must be held ("" cluster-wide).
    pub namespace: String,
}

/// What writing `object` (of `plural` in the RBAC group, in `namespace`)
/// demands, or `None` for other kinds. `role_rules` gives the rules of
/// the role a binding names (`(kind, name)`), if it exists.
pub fn demand(
    plural: &str,
    namespace: &str,
    object: &Value,
    role_rules: impl Fn(&str, &str) -> Option<Vec<Value>>,
) -> Option<Demand> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let on = |verb: &str, resource: &str, ns: &str, name: &str| Request::Resource {
        verb: verb.into(),
        group: GROUP.into(),
        resource: resource.into(),
        subresource: String::new(),
        namespace: ns.into(),
        name: name.into(),
    };
    match plural {
        "roles" | "clusterroles" => Some(Demand {
            instead: on("escalate", plural, namespace, name),
            rules: object["rules"].as_array().cloned().unwrap_or_default(),
            namespace: namespace.into(),
        }),
        "rolebindings" | "clusterrolebindings" => {
            let kind = object["roleRef"]["kind"].as_str().unwrap_or_default();
            let role = object["roleRef"]["name"].as_str().unwrap_or_default();
            let resource = if kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            Some(Demand {
                instead: on("bind", resource, namespace, role),
                rules: role_rules(kind, role).unwrap_or_default(),
                namespace: namespace.into(),
            })
        }
        _ => None,
    }
}

/// The requests of `demand`'s rules that `held` does not allow (none when
/// the writer may do what `demand.instead` says).
pub fn not_held(demand: &Demand, held: impl Fn(&Request) -> bool) -> Vec<Request> {
    if held(&demand.instead) {
        return Vec::new();
    }
    demand
        .rules
        .iter()
        .flat_map(|r| requests_of(r, &demand.namespace))
        .filter(|r| !held(r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn get_pods(ns: &str) -> Request {
        Request::Resource {
            verb: "get".into(),
            group: String::new(),
            resource: "pods".into(),
            subresource: String::new(),
            namespace: ns.into(),
            name: String::new(),
        }
    }

    #[test]
    fn rules_expand_to_requests() {
        let rule = json!({ "apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get"], "resourceNames": ["a", "b"] });
        let got = requests_of(&rule, "ns");
        assert_eq!(got.len(), 4);
        assert!(got.contains(&Request::Resource {
            verb: "get".into(),
            group: String::new(),
            resource: "pods".into(),
            subresource: "log".into(),
            namespace: "ns".into(),
            name: "b".into(),
        }));
        let urls = json!({ "nonResourceURLs": ["/healthz"], "verbs": ["get"] });
        assert_eq!(
            requests_of(&urls, ""),
            [Request::NonResource {
                verb: "get".into(),
                path: "/healthz".into()
            }]
        );
    }

    #[test]
    fn a_role_needs_its_permissions_held_or_escalate() {
        let role = json!({ "metadata": { "name": "r" },
            "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get"] }] });
        let d = demand("roles", "ns", &role, |_, _| None).expect("RBAC kind");
        assert_eq!(not_held(&d, |r| *r == get_pods("ns")), []);
        assert_eq!(not_held(&d, |_| false), [get_pods("ns")]);
        assert_eq!(
            not_held(
                &d,
                |r| matches!(r, Request::Resource { verb, .. } if verb == "escalate")
            ),
            []
        );
        assert!(demand("configmaps", "ns", &role, |_, _| None).is_none());
    }

    #[test]
    fn a_binding_needs_the_roles_permissions_where_it_binds_or_bind() {
        let binding = json!({ "metadata": { "name": "b" },
            "roleRef": { "apiGroup": GROUP, "kind": "ClusterRole", "name": "cluster-admin" } });
        let admin = |kind: &str, name: &str| {
            (kind == "ClusterRole" && name == "cluster-admin")
                .then(|| vec![json!({ "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] })])
        };
        let d = demand("rolebindings", "ns", &binding, admin).expect("RBAC kind");
        // Holding one verb on pods is not holding everything.
        assert_eq!(not_held(&d, |r| *r == get_pods("ns")).len(), 1);
        let bind = |r: &Request| {
            matches!(r, Request::Resource { verb, resource, namespace, name, .. }
                if verb == "bind" && resource == "clusterroles" && namespace == "ns" && name == "cluster-admin")
        };
        assert_eq!(not_held(&d, bind), []);
    }
}
