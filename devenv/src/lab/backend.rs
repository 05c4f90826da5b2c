//! The lab's pod runner (the kubelet part of the node agent): Pods bound
//! to this node are "run" as agnhost-netexec-like echo servers in the
//! node's network namespace (host networking: the pod IPs are the node's),
//! and their status is reported Running/Ready so the EndpointSlice
//! controller publishes them. The same Pod spec runs real agnhost on kind.

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The image the e2e suites use for backends (agnhost netexec).
pub const NETEXEC_IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";

pub use super::played::netexec_ports;

/// The reply to a UDP datagram: `echo X` -> X, anything else -> the node
/// name (netexec's `hostname`).
pub fn udp_reply(datagram: &[u8], node: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(datagram);
    match text.trim().strip_prefix("echo ") {
        Some(rest) => rest.as_bytes().to_vec(),
        None => node.as_bytes().to_vec(),
    }
}

async fn serve_http(port: u16, node: String) -> Result<()> {
    use axum::extract::ConnectInfo;
    let name = node.clone();
    let app = axum::Router::new()
        .route(
            "/clientip",
            axum::routing::get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
                peer.to_string()
            }),
        )
        .fallback(move || {
            let name = name.clone();
            async move { name }
        });
    let listener = bind_retrying(port, || async {
        tokio::net::TcpListener::bind(("::", port))
            .await
            .or_else(|_| {
                std::net::TcpListener::bind(("0.0.0.0", port)).and_then(|l| {
                    l.set_nonblocking(true)?;
                    tokio::net::TcpListener::from_std(l)
                })
            })
    })
    .await?;
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}

/// Binds with `bind`, retrying for 10 s while the port is still held by
/// a pod that is going away (the way consecutive test pods reuse a port).
async fn bind_retrying<T, F, Fut>(port: u16, bind: F) -> std::io::Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = std::io::Result<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match bind().await {
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && tokio::time::Instant::now() < deadline =>
            {
                tracing::debug!(port, "port still in use, retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

async fn serve_udp(port: u16, node: String) -> Result<()> {
    let socket = bind_retrying(port, || async {
        match tokio::net::UdpSocket::bind(("::", port)).await {
            Ok(s) => Ok(s),
            Err(_) => tokio::net::UdpSocket::bind(("0.0.0.0", port)).await,
        }
    })
    .await?;
    let mut buf = [0u8; 2048];
    loop {
        let (n, peer) = socket.recv_from(&mut buf).await?;
        let _ = socket.send_to(&udp_reply(&buf[..n], &node), peer).await;
    }
}

struct Running {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.tasks.iter().for_each(tokio::task::JoinHandle::abort);
    }
}

/// Runs this node's Pods until `shutdown`.
pub async fn run(
    client: kube::Client,
    node: String,
    addresses: Vec<IpAddr>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut running: BTreeMap<(String, String, String), Running> = BTreeMap::new();
    loop {
        if let Err(e) = reconcile(&client, &node, &addresses, &mut running).await {
            tracing::debug!(error = %e, "pod runner: retrying");
        }
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(Duration::from_millis(300)) => {}
        }
    }
}

async fn reconcile(
    client: &kube::Client,
    node: &str,
    addresses: &[IpAddr],
    running: &mut BTreeMap<(String, String, String), Running>,
) -> Result<()> {
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?
        .items;
    // Stop pods that went away first: a new pod may reuse their ports.
    let live: std::collections::BTreeSet<(String, String, String)> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            (
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
                p.metadata.uid.clone().unwrap_or_default(),
            )
        })
        .collect();
    running.retain(|k, _| live.contains(k));
    for pod in &pods {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let key = (
            ns.clone(),
            name.clone(),
            pod.metadata.uid.clone().unwrap_or_default(),
        );
        if running.contains_key(&key) || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let mut tasks = Vec::new();
        for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
            let args: Vec<String> = c
                .command
                .iter()
                .flatten()
                .chain(c.args.iter().flatten())
                .cloned()
                .collect();
            if !args.iter().any(|a| a == "netexec") {
                continue;
            }
            let (http, udp) = netexec_ports(&args);
            let (n1, n2) = (node.to_owned(), node.to_owned());
            tasks.push(tokio::spawn(async move {
                if let Err(e) = serve_http(http, n1).await {
                    tracing::warn!(port = http, error = %e, "netexec http server failed");
                }
            }));
            tasks.push(tokio::spawn(async move {
                if let Err(e) = serve_udp(udp, n2).await {
                    tracing::warn!(port = udp, error = %e, "netexec udp server failed");
                }
            }));
        }
        running.insert(key, Running { tasks });
        let ips: Vec<serde_json::Value> = addresses
            .iter()
            .map(|a| json!({ "ip": a.to_string() }))
            .collect();
        let now = jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .map(|t| t.to_string())
            .unwrap_or_default();
        let status = json!({ "status": {
            "phase": "Running",
            "hostIP": addresses.first().map(ToString::to_string),
            "podIP": addresses.first().map(ToString::to_string),
            "podIPs": ips,
            "startTime": now,
            "conditions": [
                { "type": "Ready", "status": "True", "lastTransitionTime": now },
                { "type": "ContainersReady", "status": "True", "lastTransitionTime": now },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": now },
            ],
        }});
        Api::<Pod>::namespaced(client.clone(), &ns)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_replies() {
        assert_eq!(udp_reply(b"hostname", "n1"), b"n1");
        assert_eq!(udp_reply(b"echo hi\n", "n1"), b"hi");
    }
}
