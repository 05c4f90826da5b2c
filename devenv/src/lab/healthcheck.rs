//! The health check node ports kube-proxy serves for LoadBalancer
//! Services with `externalTrafficPolicy: Local`: on each node, HTTP on
//! the Service's `healthCheckNodePort` answers 200 while the node has a
//! ready endpoint of the Service and 503 otherwise, with kube-proxy's JSON
//! body, so a load balancer sends traffic only to nodes that keep it.
//!
//! [`health_checks`] and [`response`] decide; [`Server`] binds and drops
//! the listeners as the ports come and go.

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// What one health check port reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// Ready endpoints of the Service on this node.
    pub local_endpoints: usize,
}

/// The health check ports `node` serves, by port: every LoadBalancer
/// Service with the Local policy and a `healthCheckNodePort`.
pub fn health_checks(
    node: &str,
    services: &[Service],
    slices: &[EndpointSlice],
) -> BTreeMap<u16, HealthCheck> {
    let mut out = BTreeMap::new();
    for svc in services {
        let Some(spec) = &svc.spec else { continue };
        if spec.type_.as_deref() != Some("LoadBalancer")
            || spec.external_traffic_policy.as_deref() != Some("Local")
        {
            continue;
        }
        let Some(port) = spec
            .health_check_node_port
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        // One count per endpoint (a dual-stack pod has one per family).
        let local: BTreeSet<String> = super::proxy::slices_of(svc, slices)
            .flat_map(|s| &s.endpoints)
            .filter(|e| {
                e.node_name.as_deref() == Some(node)
                    && e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
            })
            .map(|e| {
                e.target_ref
                    .as_ref()
                    .and_then(|r| r.name.clone())
                    .unwrap_or_else(|| e.addresses.join(","))
            })
            .collect();
        out.insert(
            port,
            HealthCheck {
                namespace: svc.metadata.namespace.clone().unwrap_or_default(),
                name: svc.metadata.name.clone().unwrap_or_default(),
                local_endpoints: local.len(),
            },
        );
    }
    out
}

/// The status and JSON body kube-proxy answers for `check`.
pub fn response(check: &HealthCheck) -> (u16, String) {
    let status = if check.local_endpoints > 0 { 200 } else { 503 };
    let body = serde_json::json!({
        "service": { "namespace": check.namespace, "name": check.name },
        "localEndpoints": check.local_endpoints,
        "serviceProxyHealthy": true,
    });
    (status, body.to_string())
}

type Shared = Arc<Mutex<BTreeMap<u16, HealthCheck>>>;

async fn answer(State((checks, port)): State<(Shared, u16)>) -> Response {
    let check = checks.lock().ok().and_then(|c| c.get(&port).cloned());
    let Some(check) = check else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let (status, body) = response(&check);
    let mut resp = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
        body,
    )
        .into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        "X-Content-Type-Options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// Listens on every health check port of the latest [`health_checks`].
#[derive(Default)]
pub struct Server {
    checks: Shared,
    listeners: BTreeMap<u16, tokio::task::JoinHandle<()>>,
}

impl Server {
    /// Serves `checks` from now on: binds new ports (on every address,
    /// both families), stops those that went away. A port that cannot be
    /// bound is logged and tried again next time.
    pub async fn update(&mut self, checks: BTreeMap<u16, HealthCheck>) {
        let ports: BTreeSet<u16> = checks.keys().copied().collect();
        if let Ok(mut shared) = self.checks.lock() {
            *shared = checks;
        }
        self.listeners.retain(|port, task| {
            let keep = ports.contains(port) && !task.is_finished();
            if !keep {
                task.abort();
            }
            keep
        });
        for port in ports {
            if self.listeners.contains_key(&port) {
                continue;
            }
            let listener = match tokio::net::TcpListener::bind(("::", port)).await {
                Ok(l) => l,
                Err(_) => match tokio::net::TcpListener::bind(("0.0.0.0", port)).await {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!(port, error = %e, "binding a health check node port failed");
                        continue;
                    }
                },
            };
            let app = axum::Router::new()
                .fallback(answer)
                .with_state((self.checks.clone(), port));
            tracing::info!(port, "serving a health check node port");
            self.listeners.insert(
                port,
                tokio::spawn(async move {
                    if let Err(e) = axum::serve(listener, app).await {
                        tracing::warn!(port, error = %e, "health check server failed");
                    }
                }),
            );
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.listeners
            .values()
            .for_each(tokio::task::JoinHandle::abort);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn svc(type_: &str, policy: &str, port: Option<i32>) -> Service {
        serde_json::from_value(json!({
            "metadata": { "name": "web", "namespace": "t" },
            "spec": { "type": type_, "externalTrafficPolicy": policy, "healthCheckNodePort": port },
        }))
        .expect("service")
    }

    fn slice(endpoints: Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": { "name": "web-ipv4", "namespace": "t",
                          "labels": { "kubernetes.io/service-name": "web" } },
            "addressType": "IPv4",
            "endpoints": endpoints,
        }))
        .expect("slice")
    }

    fn ep(node: &str, pod: &str, ready: bool) -> Value {
        json!({ "addresses": ["172.30.0.10"], "nodeName": node,
                "conditions": { "ready": ready },
                "targetRef": { "kind": "Pod", "name": pod } })
    }

    #[rstest]
    #[case::local_endpoint(svc("LoadBalancer", "Local", Some(30100)), vec![ep("n1", "a", true)], Some(1))]
    #[case::two_local(svc("LoadBalancer", "Local", Some(30100)),
        vec![ep("n1", "a", true), ep("n1", "b", true)], Some(2))]
    #[case::elsewhere_only(svc("LoadBalancer", "Local", Some(30100)), vec![ep("n2", "a", true)], Some(0))]
    #[case::not_ready(svc("LoadBalancer", "Local", Some(30100)), vec![ep("n1", "a", false)], Some(0))]
    #[case::cluster_policy(svc("LoadBalancer", "Cluster", Some(30100)), vec![ep("n1", "a", true)], None)]
    #[case::no_port(svc("LoadBalancer", "Local", None), vec![ep("n1", "a", true)], None)]
    #[case::node_port_type(svc("NodePort", "Local", Some(30100)), vec![ep("n1", "a", true)], None)]
    fn checks(#[case] svc: Service, #[case] endpoints: Vec<Value>, #[case] local: Option<usize>) {
        let checks = health_checks("n1", &[svc], &[slice(json!(endpoints))]);
        assert_eq!(checks.get(&30100).map(|c| c.local_endpoints), local);
        assert_eq!(checks.len(), usize::from(local.is_some()));
    }

    #[rstest]
    #[case(1, 200)]
    #[case(0, 503)]
    fn kube_proxy_shaped_answer(#[case] local: usize, #[case] status: u16) {
        let (code, body) = response(&HealthCheck {
            namespace: "t".into(),
            name: "web".into(),
            local_endpoints: local,
        });
        assert_eq!(code, status);
        let body: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(
            body,
            json!({ "service": { "namespace": "t", "name": "web" },
                    "localEndpoints": local, "serviceProxyHealthy": true })
        );
    }
}
