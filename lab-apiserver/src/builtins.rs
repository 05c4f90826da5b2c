//! What kube-apiserver's own registries do for built-in kinds: what they
//! fill in on create (Namespace phase and finalizer, Service cluster IPs
//! and node ports, CRD status) and the checks beyond a schema
//! (ValidatingWebhookConfiguration defaults and validation, a CRD's
//! versions compiling).

use crate::error::ApiError;
use crate::registry::{Registry, ResourceType};
use crate::state::State;
use serde_json::{Value, json};

fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Whether `t` is CustomResourceDefinition.
pub fn is_crd(t: &ResourceType) -> bool {
    t.group == "apiextensions.k8s.io" && t.plural == "customresourcedefinitions"
}

/// Defaults and checks of built-in kinds, on every create and update of
/// the object (after the schema, before webhooks).
pub fn check(t: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match (t.group.as_str(), t.plural.as_str()) {
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            crate::admission::config::default_webhooks(obj);
            let causes = crate::admission::config::validate(obj);
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    &format!("{}.{}", t.kind, t.group),
                    &name,
                    causes,
                ));
            }
        }
        _ if is_crd(t) => {
            Registry::check_crd(obj)
                .map_err(|e| ApiError::invalid(&t.kind, &name, vec![("spec".into(), e)]))?;
        }
        _ => {}
    }
    Ok(())
}

impl State {
    /// What kube-apiserver's own controllers fill in on create.
    pub(crate) fn builtin_on_create(
        &mut self,
        t: &ResourceType,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        match (t.group.as_str(), t.plural.as_str()) {
            ("", "namespaces") => {
                obj["status"] = json!({ "phase": "Active" });
                obj["spec"]["finalizers"] = json!(["kubernetes"]);
                obj["metadata"]["labels"]["kubernetes.io/metadata.name"] =
                    obj["metadata"]["name"].clone();
            }
            ("", "services") => self.service_defaults(obj),
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                obj["status"] = json!({
                    "acceptedNames": obj["spec"]["names"],
                    "storedVersions": obj["spec"]["versions"].as_array().into_iter().flatten()
                        .filter(|v| v["storage"] == json!(true)).map(|v| v["name"].clone()).collect::<Vec<_>>(),
                    "conditions": [
                        { "type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now() },
                        { "type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now() },
                    ],
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// ClusterIP allocation ([`crate::SERVICE_CIDR_V4`] and
    /// [`crate::SERVICE_CIDR_V6`]), default type, protocol, families, node
    /// ports and the health check node port, as kube-apiserver does.
    pub(crate) fn service_defaults(&mut self, obj: &mut Value) {
        let spec = &mut obj["spec"];
        if spec["type"].is_null() {
            spec["type"] = json!("ClusterIP");
        }
        if spec["sessionAffinity"].is_null() {
            spec["sessionAffinity"] = json!("None");
        }
        let svc_type = spec["type"].as_str().unwrap_or("ClusterIP").to_owned();
        if svc_type != "ExternalName"
            && spec["clusterIP"] != json!("None")
            && spec["clusterIP"].as_str().is_none_or(str::is_empty)
        {
            let families: Vec<String> = match spec["ipFamilies"].as_array() {
                Some(f) if !f.is_empty() => f
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
                _ => match spec["ipFamilyPolicy"].as_str() {
                    Some("RequireDualStack") | Some("PreferDualStack") => {
                        vec!["IPv4".into(), "IPv6".into()]
                    }
                    _ => vec!["IPv4".into()],
                },
            };
            let n = self.next_cluster_ip;
            self.next_cluster_ip += 1;
            let ips: Vec<String> = families
                .iter()
                .map(|f| {
                    if f == "IPv6" {
                        format!("fd00:10:96::{:x}", n)
                    } else {
                        format!("10.96.{}.{}", n / 256, n % 256)
                    }
                })
                .collect();
            spec["clusterIP"] = json!(ips[0]);
            spec["clusterIPs"] = json!(ips);
            spec["ipFamilies"] = json!(families);
            if spec["ipFamilyPolicy"].is_null() {
                spec["ipFamilyPolicy"] = json!(if families.len() > 1 {
                    "PreferDualStack"
                } else {
                    "SingleStack"
                });
            }
        }
        let needs_node_port = svc_type == "NodePort"
            || (svc_type == "LoadBalancer"
                && spec["allocateLoadBalancerNodePorts"] != json!(false));
        let mut ports = spec["ports"].as_array().cloned().unwrap_or_default();
        for p in &mut ports {
            if p["protocol"].is_null() {
                p["protocol"] = json!("TCP");
            }
            if p["targetPort"].is_null() {
                p["targetPort"] = p["port"].clone();
            }
            if needs_node_port && p["nodePort"].is_null() {
                p["nodePort"] = json!(self.next_node_port);
                self.next_node_port = self.next_node_port.wrapping_add(1).max(30000);
            }
        }
        if !ports.is_empty() {
            spec["ports"] = json!(ports);
        }
        if (svc_type == "LoadBalancer" || svc_type == "NodePort")
            && spec["externalTrafficPolicy"].is_null()
        {
            spec["externalTrafficPolicy"] = json!("Cluster");
        }
        // kube-apiserver gives a LoadBalancer with the Local policy a node
        // port for load balancers' health checks, and takes it away with
        // the policy.
        if svc_type == "LoadBalancer" && spec["externalTrafficPolicy"] == json!("Local") {
            if spec["healthCheckNodePort"].is_null() {
                spec["healthCheckNodePort"] = json!(self.next_node_port);
                self.next_node_port = self.next_node_port.wrapping_add(1).max(30000);
            }
        } else if let Some(spec) = spec.as_object_mut() {
            spec.remove("healthCheckNodePort");
        }
        if obj["status"].is_null() {
            obj["status"] = json!({ "loadBalancer": {} });
        }
    }
}
