//! Which resources the lab API server serves: the built-in kinds metallb-rs
//! and the e2e suites use, plus every version of every applied CRD (with
//! its compiled openAPIV3Schema). Also renders the discovery documents.
//!
//! Sits under every handler and names none of them: what it keeps about a
//! type beyond names is plain data ([`columns`] for tables, [`conversion`]
//! for CRD conversion), which the handlers act on.

pub mod columns;
pub mod conversion;

use columns::PrinterColumn;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One served resource at one version.
#[derive(Clone)]
pub struct ResourceType {
    /// API group ("" for core).
    pub group: String,
    /// Version served.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural (URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Has a status subresource (main-resource writes keep status; /status
    /// writes keep everything else).
    pub status: bool,
    /// Short names for kubectl.
    pub short_names: Vec<String>,
    /// Compiled schema and its JSON (for defaults and pruning), CRDs only.
    pub schema: Option<Arc<(jsonschema::Validator, Value)>>,
    /// Defined by a CustomResourceDefinition (not built in).
    pub custom: bool,
    /// The CRD version's printer columns (custom resources only).
    pub columns: Vec<PrinterColumn>,
    /// Create-only and never stored: the answer comes back in the
    /// response (access and token reviews).
    pub review: bool,
    /// A CRD whose conversion strategy is Webhook: objects are stored in
    /// its storage version and converted through the webhook.
    pub conversion: Option<Arc<conversion::Webhook>>,
}

impl ResourceType {
    /// `apiVersion` of this type's objects.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The store collection (shared by every version of a CRD).
    pub fn collection(&self) -> (String, String) {
        (self.group.clone(), self.plural.clone())
    }

    /// Whether this type has a `scale` subresource ([`crate::scale`]).
    pub fn has_scale(&self) -> bool {
        self.group == "apps"
            && matches!(
                self.plural.as_str(),
                "deployments" | "replicasets" | "statefulsets"
            )
    }
}

fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    status: bool,
    short: &[&str],
) -> ResourceType {
    ResourceType {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        namespaced,
        status,
        short_names: short.iter().map(|s| (*s).to_owned()).collect(),
        schema: None,
        custom: false,
        columns: Vec::new(),
        review: false,
        conversion: None,
    }
}

/// Served types, by (group, version, plural).
#[derive(Clone)]
pub struct Registry {
    types: BTreeMap<(String, String, String), ResourceType>,
}

impl Default for Registry {
    fn default() -> Self {
        let list = [
            builtin("", "v1", "Namespace", "namespaces", false, true, &["ns"]),
            builtin("", "v1", "Node", "nodes", false, true, &["no"]),
            builtin("", "v1", "Service", "services", true, true, &["svc"]),
            builtin("", "v1", "Pod", "pods", true, true, &["po"]),
            builtin("", "v1", "Secret", "secrets", true, false, &[]),
            builtin("", "v1", "ConfigMap", "configmaps", true, false, &["cm"]),
            builtin("", "v1", "Event", "events", true, false, &["ev"]),
            builtin("", "v1", "Endpoints", "endpoints", true, false, &["ep"]),
            builtin(
                "",
                "v1",
                "ServiceAccount",
                "serviceaccounts",
                true,
                false,
                &["sa"],
            ),
            builtin(
                "events.k8s.io",
                "v1",
                "Event",
                "events",
                true,
                false,
                &["ev"],
            ),
            builtin(
                "discovery.k8s.io",
                "v1",
                "EndpointSlice",
                "endpointslices",
                true,
                false,
                &[],
            ),
            builtin(
                "apps",
                "v1",
                "Deployment",
                "deployments",
                true,
                true,
                &["deploy"],
            ),
            builtin(
                "apps",
                "v1",
                "ReplicaSet",
                "replicasets",
                true,
                true,
                &["rs"],
            ),
            builtin("apps", "v1", "DaemonSet", "daemonsets", true, true, &["ds"]),
            builtin(
                "apps",
                "v1",
                "StatefulSet",
                "statefulsets",
                true,
                true,
                &["sts"],
            ),
            builtin("batch", "v1", "Job", "jobs", true, true, &[]),
            builtin(
                "coordination.k8s.io",
                "v1",
                "Lease",
                "leases",
                true,
                false,
                &[],
            ),
            builtin(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
                false,
                false,
                &[],
            ),
            builtin(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicy",
                "validatingadmissionpolicies",
                false,
                true,
                &[],
            ),
            builtin(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicyBinding",
                "validatingadmissionpolicybindings",
                false,
                false,
                &[],
            ),
            builtin(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                false,
                true,
                &["crd", "crds"],
            ),
        ];
        let rbac = [
            ("ClusterRole", "clusterroles", false),
            ("ClusterRoleBinding", "clusterrolebindings", false),
            ("Role", "roles", true),
            ("RoleBinding", "rolebindings", true),
        ]
        .map(|(kind, plural, namespaced)| {
            builtin(
                "rbac.authorization.k8s.io",
                "v1",
                kind,
                plural,
                namespaced,
                false,
                &[],
            )
        });
        let reviews = [
            (
                "authorization.k8s.io",
                "SelfSubjectAccessReview",
                "selfsubjectaccessreviews",
                false,
            ),
            (
                "authorization.k8s.io",
                "SubjectAccessReview",
                "subjectaccessreviews",
                false,
            ),
            (
                "authorization.k8s.io",
                "LocalSubjectAccessReview",
                "localsubjectaccessreviews",
                true,
            ),
            (
                "authentication.k8s.io",
                "TokenReview",
                "tokenreviews",
                false,
            ),
            (
                "authentication.k8s.io",
                "SelfSubjectReview",
                "selfsubjectreviews",
                false,
            ),
        ]
        .map(|(group, kind, plural, namespaced)| ResourceType {
            review: true,
            ..builtin(group, "v1", kind, plural, namespaced, false, &[])
        });
        let mut r = Registry {
            types: BTreeMap::new(),
        };
        for t in list.into_iter().chain(rbac).chain(reviews) {
            r.insert(t);
        }
        r
    }
}

impl Registry {
    fn insert(&mut self, t: ResourceType) {
        self.types
            .insert((t.group.clone(), t.version.clone(), t.plural.clone()), t);
    }

    /// The type at `group/version/plural`.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
    }

    /// Whether a group/version is served at all.
    pub fn serves(&self, group: &str, version: &str) -> bool {
        self.types
            .keys()
            .any(|(g, v, _)| g == group && v == version)
    }

    /// Every served version of `group/plural`, most preferred first.
    pub fn versions_of(&self, group: &str, plural: &str) -> Vec<String> {
        let mut versions: Vec<String> = self
            .types
            .keys()
            .filter(|(g, _, p)| g == group && p == plural)
            .map(|(_, v, _)| v.clone())
            .collect();
        versions.sort_by_key(|v| std::cmp::Reverse(version_rank(v)));
        versions
    }

    /// What [`Registry::add_crd`] would say about `crd`, without serving it.
    pub fn check_crd(crd: &Value) -> Result<(), String> {
        Registry {
            types: BTreeMap::new(),
        }
        .add_crd(crd)
    }

    /// Serves every version of the CRD `crd` (a JSON object), replacing
    /// what an earlier version of the same CRD registered.
    pub fn add_crd(&mut self, crd: &Value) -> Result<(), String> {
        let spec = &crd["spec"];
        let group = spec["group"]
            .as_str()
            .ok_or("spec.group missing")?
            .to_owned();
        let names = &spec["names"];
        let plural = names["plural"]
            .as_str()
            .ok_or("spec.names.plural missing")?
            .to_owned();
        let kind = names["kind"]
            .as_str()
            .ok_or("spec.names.kind missing")?
            .to_owned();
        let conversion = conversion::Webhook::of_crd(crd)?.map(Arc::new);
        self.remove_crd(&group, &plural);
        for v in spec["versions"].as_array().into_iter().flatten() {
            if v["served"] == json!(false) {
                continue;
            }
            let version = v["name"]
                .as_str()
                .ok_or("spec.versions[].name missing")?
                .to_owned();
            let schema_json = v["schema"]["openAPIV3Schema"].clone();
            let schema = if schema_json.is_object() {
                let validator = jsonschema::draft4::new(&schema_json)
                    .map_err(|e| format!("spec.versions[{version}].schema.openAPIV3Schema: {e}"))?;
                Some(Arc::new((validator, schema_json)))
            } else {
                None
            };
            self.insert(ResourceType {
                group: group.clone(),
                version,
                kind: kind.clone(),
                plural: plural.clone(),
                singular: names["singular"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| kind.to_lowercase()),
                namespaced: spec["scope"] != "Cluster",
                status: v["subresources"]["status"].is_object(),
                short_names: names["shortNames"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect(),
                schema,
                custom: true,
                columns: PrinterColumn::of_version(v),
                review: false,
                conversion: conversion.clone(),
            });
        }
        Ok(())
    }

    /// Stops serving the CRD-defined `group/plural`.
    pub fn remove_crd(&mut self, group: &str, plural: &str) {
        self.types
            .retain(|(g, _, p), t| !(t.custom && g == group && p == plural));
    }

    /// `/api`.
    pub fn core_versions(&self) -> Value {
        json!({ "kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1" }] })
    }

    /// `/apis`.
    pub fn groups(&self) -> Value {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (g, v, _) in self.types.keys() {
            if !g.is_empty() {
                let versions = groups.entry(g).or_default();
                if !versions.contains(&v.as_str()) {
                    versions.push(v);
                }
            }
        }
        let groups: Vec<Value> = groups
            .into_iter()
            .map(|(g, mut versions)| {
                // Preferred: the newest (v1 > v1beta2 > v1beta1).
                versions.sort_by_key(|v| std::cmp::Reverse(version_rank(v)));
                let vs: Vec<Value> = versions
                    .iter()
                    .map(|v| json!({ "groupVersion": format!("{g}/{v}"), "version": v }))
                    .collect();
                json!({ "name": g, "versions": vs, "preferredVersion": vs[0] })
            })
            .collect();
        json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
    }

    /// `/api/v1` or `/apis/{group}/{version}`.
    pub fn resources(&self, group: &str, version: &str) -> Value {
        let mut resources = Vec::new();
        for t in self
            .types
            .values()
            .filter(|t| t.group == group && t.version == version)
        {
            let verbs = if t.review {
                json!(["create"])
            } else {
                json!([
                    "create",
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "update",
                    "watch"
                ])
            };
            resources.push(json!({
                "name": t.plural,
                "singularName": t.singular,
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": verbs,
                "shortNames": t.short_names,
            }));
            if t.group.is_empty() && t.plural == "serviceaccounts" {
                resources.push(json!({ "name": "serviceaccounts/token", "singularName": "", "namespaced": true, "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"] }));
            }
            if t.group.is_empty() && t.plural == "pods" {
                resources.push(json!({ "name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"] }));
            }
            if t.has_scale() {
                resources.push(json!({ "name": format!("{}/scale", t.plural), "singularName": "", "namespaced": true, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"] }));
            }
            if t.status {
                resources.push(json!({ "name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced, "kind": t.kind, "verbs": ["get", "patch", "update"] }));
            }
        }
        let gv = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources })
    }
}

impl Registry {
    /// `/openapi/v3`: where each group-version's document lives.
    pub fn openapi_root(&self) -> Value {
        let mut paths = serde_json::Map::new();
        for (g, v, _) in self.types.keys() {
            let key = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            paths.insert(
                key.clone(),
                json!({ "serverRelativeURL": format!("/openapi/v3/{key}") }),
            );
        }
        json!({ "paths": paths })
    }

    /// `/openapi/v3/{api/v1 | apis/g/v}`: paths only, enough for kubectl to
    /// see that PATCH takes `fieldValidation` and so validate on the
    /// server (no component schemas: kubectl then builds strategic merge
    /// patches from its compiled-in types).
    pub fn openapi_group_version(&self, group: &str, version: &str) -> Option<Value> {
        if !self.serves(group, version) {
            return None;
        }
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let mut paths = serde_json::Map::new();
        for t in self
            .types
            .values()
            .filter(|t| t.group == group && t.version == version)
        {
            let item = if t.namespaced {
                format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
            } else {
                format!("{prefix}/{}/{{name}}", t.plural)
            };
            let gvk = json!({ "group": t.group, "version": t.version, "kind": t.kind });
            let param = json!({ "name": "fieldValidation", "in": "query", "schema": { "type": "string", "uniqueItems": true } });
            paths.insert(item, json!({ "patch": { "x-kubernetes-group-version-kind": gvk, "parameters": [param], "responses": {} } }));
        }
        Some(
            json!({ "openapi": "3.0.0", "info": { "title": "metallb-rs lab", "version": version }, "paths": paths, "components": {} }),
        )
    }
}

/// Orders Kubernetes versions: GA > beta > alpha, then by number.
fn version_rank(v: &str) -> (u8, u32, u32) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let (major, stage, minor) = match rest.find(|c: char| !c.is_ascii_digit()) {
        None => (rest, 3, ""),
        Some(i) => {
            let (m, tail) = rest.split_at(i);
            if let Some(n) = tail.strip_prefix("beta") {
                (m, 2, n)
            } else if let Some(n) = tail.strip_prefix("alpha") {
                (m, 1, n)
            } else {
                (m, 0, "")
            }
        }
    };
    (
        stage,
        major.parse().unwrap_or(0),
        minor.parse().unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_versions_are_served_and_replaced() {
        let mut r = Registry::default();
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../manifests/crds/metallb.io_bgppeers.yaml"
        );
        let yaml = std::fs::read_to_string(path).expect("the generated CRD");
        let crd: Value = serde_yaml::from_str(&yaml).expect("CRD YAML");
        r.add_crd(&crd).expect("adds");
        assert!(r.get("metallb.io", "v1beta1", "bgppeers").is_some());
        let v2 = r.get("metallb.io", "v1beta2", "bgppeers").expect("v1beta2");
        assert!(v2.status && v2.namespaced && v2.schema.is_some());
        let groups = r.groups();
        let metallb = groups["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .find(|g| g["name"] == "metallb.io")
            .expect("group");
        assert_eq!(metallb["preferredVersion"]["version"], "v1beta2");
        r.remove_crd("metallb.io", "bgppeers");
        assert!(r.get("metallb.io", "v1beta1", "bgppeers").is_none());
        assert!(r.get("", "v1", "services").is_some(), "built-ins stay");
    }

    #[test]
    fn version_order() {
        let mut v = vec!["v1beta1", "v1", "v2alpha1", "v1beta2"];
        v.sort_by_key(|v| std::cmp::Reverse(version_rank(v)));
        assert_eq!(v, ["v1", "v1beta2", "v1beta1", "v2alpha1"]);
    }
}
