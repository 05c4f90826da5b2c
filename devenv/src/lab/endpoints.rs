//! The EndpointSlice controller of the lab (kube-controller-manager's
//! job): one slice per Service with a selector, listing the Pods that
//! match it, with their node and readiness.

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// The number of the container port called `name` with `protocol` in the
/// first of `pods` that has one.
fn named_port(pods: &[&Pod], name: &str, protocol: Option<&str>) -> Option<i32> {
    let protocol = protocol.unwrap_or("TCP");
    pods.iter()
        .flat_map(|p| p.spec.iter().flat_map(|s| &s.containers))
        .flat_map(|c| c.ports.iter().flatten())
        .find(|cp| {
            cp.name.as_deref() == Some(name) && cp.protocol.as_deref().unwrap_or("TCP") == protocol
        })
        .map(|cp| cp.container_port)
}

/// The label linking a slice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const MANAGER: &str = "lab-endpointslice-controller";

fn selects(selector: &BTreeMap<String, String>, pod: &Pod) -> bool {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn pod_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The slices `services` should have given `pods` (one per service and
/// address family with at least a selector; named `<service>-<family>`).
pub fn desired(services: &[Service], pods: &[Pod]) -> Vec<EndpointSlice> {
    let mut out = Vec::new();
    for svc in services {
        let Some(spec) = &svc.spec else { continue };
        let Some(selector) = spec.selector.as_ref().filter(|s| !s.is_empty()) else {
            continue;
        };
        let ns = svc.metadata.namespace.clone().unwrap_or_default();
        let name = svc.metadata.name.clone().unwrap_or_default();
        let families = spec
            .ip_families
            .clone()
            .unwrap_or_else(|| vec!["IPv4".into()]);
        let selected: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(&ns) && selects(selector, p))
            .collect();
        let ports: Vec<EndpointPort> = spec
            .ports
            .iter()
            .flatten()
            .map(|p| EndpointPort {
                name: p.name.clone(),
                port: match &p.target_port {
                    Some(IntOrString::Int(i)) => Some(*i),
                    // A named targetPort is the selected pods' container
                    // port of that name (the lab assumes they agree).
                    Some(IntOrString::String(name)) => {
                        named_port(&selected, name, p.protocol.as_deref())
                    }
                    None => Some(p.port),
                },
                protocol: p.protocol.clone().or(Some("TCP".into())),
                app_protocol: None,
            })
            .collect();
        for family in families {
            let v6 = family == "IPv6";
            let mut endpoints: Vec<Endpoint> = selected
                .iter()
                .filter_map(|p| {
                    let status = p.status.as_ref()?;
                    let ip = status
                        .pod_ips
                        .iter()
                        .flatten()
                        .map(|i| i.ip.clone())
                        .chain(status.pod_ip.clone())
                        .find(|ip| ip.contains(':') == v6)?;
                    let ready = pod_ready(p);
                    Some(Endpoint {
                        addresses: vec![ip],
                        conditions: Some(EndpointConditions {
                            ready: Some(ready),
                            serving: Some(ready),
                            terminating: Some(p.metadata.deletion_timestamp.is_some()),
                        }),
                        node_name: p.spec.as_ref().and_then(|s| s.node_name.clone()),
                        target_ref: Some(k8s_openapi::api::core::v1::ObjectReference {
                            kind: Some("Pod".into()),
                            name: p.metadata.name.clone(),
                            namespace: Some(ns.clone()),
                            uid: p.metadata.uid.clone(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                })
                .collect();
            endpoints.sort_by(|a, b| a.addresses.cmp(&b.addresses));
            out.push(EndpointSlice {
                metadata: ObjectMeta {
                    name: Some(format!("{name}-{}", family.to_lowercase())),
                    namespace: Some(ns.clone()),
                    labels: Some(BTreeMap::from([
                        (SERVICE_NAME_LABEL.to_owned(), name.clone()),
                        (MANAGED_BY.to_owned(), MANAGER.to_owned()),
                    ])),
                    owner_references: svc.metadata.uid.clone().map(|uid| {
                        vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "Service".into(),
                            name: name.clone(),
                            uid,
                            controller: Some(true),
                            block_owner_deletion: Some(true),
                        }]
                    }),
                    ..Default::default()
                },
                address_type: family.clone(),
                endpoints,
                ports: Some(ports.clone()),
            });
        }
    }
    out
}

/// Keeps every Service's slices equal to [`desired`] until `shutdown`.
pub async fn run(client: kube::Client, shutdown: impl std::future::Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        if let Err(e) = reconcile(&client).await {
            tracing::debug!(error = %e, "endpointslice reconcile failed; retrying");
        }
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(std::time::Duration::from_millis(300)) => {}
        }
    }
}

async fn reconcile(client: &kube::Client) -> anyhow::Result<()> {
    use kube::api::{Api, DeleteParams, ListParams, PostParams};
    let services = Api::<Service>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let want = desired(&services, &pods);
    let all: Api<EndpointSlice> = Api::all(client.clone());
    let have = all
        .list(&ListParams::default().labels(&format!("{MANAGED_BY}={MANAGER}")))
        .await?
        .items;
    for slice in &want {
        let ns = slice.metadata.namespace.clone().unwrap_or_default();
        let name = slice.metadata.name.clone().unwrap_or_default();
        let api: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
        match have.iter().find(|h| {
            h.metadata.namespace == slice.metadata.namespace
                && h.metadata.name == slice.metadata.name
        }) {
            None => {
                api.create(&PostParams::default(), slice).await?;
            }
            Some(h) if h.endpoints != slice.endpoints || h.ports != slice.ports => {
                let mut next = slice.clone();
                next.metadata.resource_version = h.metadata.resource_version.clone();
                api.replace(&name, &PostParams::default(), &next).await?;
            }
            Some(_) => {}
        }
    }
    for h in &have {
        if !want.iter().any(|w| {
            w.metadata.namespace == h.metadata.namespace && w.metadata.name == h.metadata.name
        }) {
            let api: Api<EndpointSlice> = Api::namespaced(
                client.clone(),
                h.metadata.namespace.as_deref().unwrap_or_default(),
            );
            let _ = api
                .delete(
                    h.metadata.name.as_deref().unwrap_or_default(),
                    &DeleteParams::default(),
                )
                .await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(families: &[&str]) -> Service {
        serde_json::from_value(json!({
            "metadata": { "name": "web", "namespace": "t", "uid": "u1" },
            "spec": { "selector": { "app": "web" }, "ipFamilies": families, "ports": [{ "port": 80, "targetPort": 8080, "protocol": "TCP" }] },
        }))
        .expect("svc")
    }

    fn pod(name: &str, node: &str, ips: &[&str], ready: bool, app: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "t", "labels": { "app": app } },
            "spec": { "nodeName": node, "containers": [] },
            "status": { "podIP": ips[0], "podIPs": ips.iter().map(|i| json!({ "ip": i })).collect::<Vec<_>>(),
                        "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] },
        }))
        .expect("pod")
    }

    #[test]
    fn one_slice_per_family_with_matching_pods() {
        let pods = [
            pod("a", "n1", &["172.30.0.10", "fc00::10"], true, "web"),
            pod("b", "n2", &["172.30.0.11", "fc00::11"], false, "web"),
            pod("c", "n3", &["172.30.0.12"], true, "db"),
        ];
        let slices = desired(&[svc(&["IPv4", "IPv6"])], &pods);
        assert_eq!(slices.len(), 2);
        let v4 = &slices[0];
        assert_eq!(
            (v4.metadata.name.as_deref(), v4.address_type.as_str()),
            (Some("web-ipv4"), "IPv4")
        );
        assert_eq!(v4.endpoints.len(), 2, "db pod excluded");
        assert_eq!(v4.endpoints[0].node_name.as_deref(), Some("n1"));
        assert_eq!(
            v4.endpoints[1].conditions.as_ref().and_then(|c| c.ready),
            Some(false)
        );
        assert_eq!(
            v4.ports.as_ref().expect("ports")[0].port,
            Some(8080),
            "targetPort"
        );
        assert_eq!(slices[1].endpoints[0].addresses, ["fc00::10"]);
        assert_eq!(
            v4.metadata.labels.as_ref().expect("labels")[SERVICE_NAME_LABEL],
            "web"
        );
    }

    #[test]
    fn named_target_port_is_the_pods_container_port() {
        let mut s = svc(&["IPv4"]);
        s.spec.as_mut().expect("spec").ports = Some(vec![
            serde_json::from_value(
                json!({ "name": "http", "port": 80, "targetPort": "web", "protocol": "TCP" }),
            )
            .expect("port"),
        ]);
        let mut p = pod("a", "n1", &["172.30.0.10"], true, "web");
        p.spec.as_mut().expect("spec").containers = vec![
            serde_json::from_value(json!({ "name": "c", "ports": [
                { "name": "web", "containerPort": 8080, "protocol": "UDP" },
                { "name": "web", "containerPort": 9090, "protocol": "TCP" },
            ] }))
            .expect("container"),
        ];
        let slices = desired(&[s], &[p]);
        let port = &slices[0].ports.as_ref().expect("ports")[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some("http"), Some(9090))
        );
    }

    #[test]
    fn services_without_selector_get_no_slice() {
        let mut s = svc(&["IPv4"]);
        if let Some(spec) = s.spec.as_mut() {
            spec.selector = None;
        }
        assert!(desired(&[s], &[pod("a", "n1", &["1.2.3.4"], true, "web")]).is_empty());
    }
}
