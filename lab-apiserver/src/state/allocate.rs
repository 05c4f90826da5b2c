//! What kube-apiserver's built-in registries fill in from the server's
//! own counters: a Service's cluster IPs, node ports and health check node
//! port. The other create-time defaults take nothing from the state and
//! are [`crate::builtins`]' (pure).

use super::State;
use crate::builtins;
use crate::error::ApiError;
use crate::registry::ResourceType;
use serde_json::{Value, json};

impl State {
    /// What kube-apiserver's own controllers fill in on create.
    pub(crate) fn builtin_on_create(
        &mut self,
        t: &ResourceType,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        match (t.group.as_str(), t.plural.as_str()) {
            ("", "services") => self.service_defaults(obj),
            _ => builtins::on_create(t, obj),
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
