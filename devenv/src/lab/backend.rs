//! The lab's pod runner (the kubelet part of the node agent): no image is
//! pulled here, so every container of a Pod bound to this node is played
//! by the lab backend, an agnhost-netexec-like echo server in the node's
//! network namespace (host networking: the pod IPs are the node's), on
//! the ports [`super::played`] names. Its status is reported
//! Running/Ready so the EndpointSlice controller publishes it, and an
//! event on the Pod says the container is played by the lab backend. The
//! same Pod spec runs real agnhost (or the real image) on kind.
//!
//! Pods on one node share its addresses, so two of them may want one
//! port (two replicas, or a rolling update's old and new Pod): every
//! listener is opened with `SO_REUSEPORT` and the kernel spreads
//! connections over the Pods that listen.

use super::played::{self, Played, Protocol};
use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use metallb_rs::k8s::events::{EventSpec, Recorder};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The image the e2e suites use for backends (agnhost netexec).
pub const NETEXEC_IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";

/// The reply to a UDP datagram: `echo X` -> X, anything else -> the node
/// name (netexec's `hostname`).
pub fn udp_reply(datagram: &[u8], node: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(datagram);
    match text.trim().strip_prefix("echo ") {
        Some(rest) => rest.as_bytes().to_vec(),
        None => node.as_bytes().to_vec(),
    }
}

/// The echo `/echo?msg=X` answers: X, percent-decoded.
fn echo(query: Option<&str>) -> String {
    let msg = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("msg="))
        .unwrap_or_default();
    let bytes = msg.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A TCP listener on `port` (IPv6 and IPv4, else IPv4 only) that other
/// Pods on this node may share.
fn shared_tcp_listener(port: u16) -> std::io::Result<tokio::net::TcpListener> {
    let open = |v6: bool| -> std::io::Result<tokio::net::TcpListener> {
        let (socket, addr) = if v6 {
            (
                tokio::net::TcpSocket::new_v6()?,
                SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)),
            )
        } else {
            (
                tokio::net::TcpSocket::new_v4()?,
                SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, port)),
            )
        };
        socket.set_reuseaddr(true)?;
        socket.set_reuseport(true)?;
        socket.bind(addr)?;
        socket.listen(1024)
    };
    open(true).or_else(|_| open(false))
}

/// A UDP socket on `port` (IPv6 and IPv4, else IPv4 only) that other Pods
/// on this node may share.
fn shared_udp_socket(port: u16) -> std::io::Result<tokio::net::UdpSocket> {
    use socket2::{Domain, Socket, Type};
    let open = |v6: bool| -> std::io::Result<tokio::net::UdpSocket> {
        let (domain, addr) = if v6 {
            (
                Domain::IPV6,
                SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)),
            )
        } else {
            (
                Domain::IPV4,
                SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, port)),
            )
        };
        let socket = Socket::new(domain, Type::DGRAM, None)?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        tokio::net::UdpSocket::from_std(socket.into())
    };
    open(true).or_else(|_| open(false))
}

/// Serves HTTP on `port`: `/clientip` answers the client's address,
/// `/echo?msg=X` answers X, anything else `name`.
async fn serve_http(port: u16, name: String) -> Result<()> {
    use axum::extract::{ConnectInfo, RawQuery};
    let app = axum::Router::new()
        .route(
            "/clientip",
            axum::routing::get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
                peer.to_string()
            }),
        )
        .route(
            "/echo",
            axum::routing::get(|RawQuery(q): RawQuery| async move { echo(q.as_deref()) }),
        )
        .fallback(move || {
            let name = name.clone();
            async move { name }
        });
    let listener = bind_retrying(port, || async { shared_tcp_listener(port) }).await?;
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

async fn serve_udp(port: u16, name: String) -> Result<()> {
    let socket = bind_retrying(port, || async { shared_udp_socket(port) }).await?;
    let mut buf = [0u8; 2048];
    loop {
        let (n, peer) = socket.recv_from(&mut buf).await?;
        let _ = socket.send_to(&udp_reply(&buf[..n], &name), peer).await;
    }
}

struct Running {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// How long a Pod that went away keeps serving (a short termination
/// grace period): long enough for the EndpointSlice controller and every
/// node's proxy to stop sending it new connections (about 3 s in the
/// lab: the slice controller looks every 0.3 s, the agents' proxies on
/// each 2 s heartbeat).
const DRAIN: Duration = Duration::from_secs(5);

/// The Pods this runner plays: those bound here, by namespace, name and
/// uid, and those that went away, until their drain ends (bounded by how
/// many ran in the last [`DRAIN`]).
#[derive(Default)]
struct Pods {
    running: BTreeMap<(String, String, String), Running>,
    draining: Vec<(tokio::time::Instant, Running)>,
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
    let recorder = Recorder::new(client.clone(), "kubelet", &node);
    let mut pods = Pods::default();
    loop {
        let round = reconcile(&client, &recorder, &node, &addresses, &mut pods);
        match tokio::time::timeout(ROUND_TIMEOUT, round).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "pod runner: retrying"),
            Err(_) => tracing::debug!("pod runner: timed out, retrying"),
        }
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(Duration::from_millis(300)) => {}
        }
    }
}

/// The event saying how `play`'s container is played.
fn played_event(pod: &Pod, play: &Played) -> EventSpec {
    let image = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .find(|c| c.name == play.container)
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let ports: Vec<String> = play.ports.iter().map(ToString::to_string).collect();
    let serves = if ports.is_empty() {
        "listening on no port".to_owned()
    } else {
        format!("serving {}", ports.join(", "))
    };
    let what = if play.netexec {
        "agnhost netexec"
    } else {
        "an echo server (HTTP: the pod name, /clientip, /echo?msg=)"
    };
    EventSpec::normal(
        "PlayedByLabBackend",
        format!(
            "image {image} is not pulled in the lab: container {} is played by the lab backend as {what}, {serves}",
            play.container
        ),
    )
}

/// How long one round of the pod runner may take.
const ROUND_TIMEOUT: Duration = Duration::from_secs(10);

async fn reconcile(
    client: &kube::Client,
    recorder: &Recorder,
    node: &str,
    addresses: &[IpAddr],
    pods_here: &mut Pods,
) -> Result<()> {
    let Pods { running, draining } = pods_here;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?
        .items;
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
    // Pods that went away keep serving for a while, as a container does
    // through its termination grace period, so connections the proxies
    // still send them are answered.
    let gone: Vec<_> = running
        .keys()
        .filter(|k| !live.contains(*k))
        .cloned()
        .collect();
    let now = tokio::time::Instant::now();
    for key in gone {
        if let Some(r) = running.remove(&key) {
            draining.push((now + DRAIN, r));
        }
    }
    draining.retain(|(until, _)| *until > now);
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
        let plays = played::play(pod);
        let mut tasks = Vec::new();
        for play in &plays {
            // netexec answers with the node's name (the e2e suites tell
            // nodes apart by it); any other image with the Pod's.
            let answer = if play.netexec { node } else { name.as_str() };
            for port in &play.ports {
                let (number, protocol, answer) = (port.number, port.protocol, answer.to_owned());
                tasks.push(tokio::spawn(async move {
                    let served = match protocol {
                        Protocol::Tcp => serve_http(number, answer).await,
                        Protocol::Udp => serve_udp(number, answer).await,
                    };
                    if let Err(e) = served {
                        tracing::warn!(port = number, error = %e, "lab backend failed");
                    }
                }));
            }
        }
        let running_pod = Running { tasks };
        let ips: Vec<serde_json::Value> = addresses
            .iter()
            .map(|a| json!({ "ip": a.to_string() }))
            .collect();
        let now = jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .map(|t| t.to_string())
            .unwrap_or_default();
        let containers: Vec<serde_json::Value> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| {
                json!({
                    "name": c.name, "image": c.image, "imageID": "lab://backend",
                    "ready": true, "started": true, "restartCount": 0,
                    "state": { "running": { "startedAt": now } },
                })
            })
            .collect();
        let status = json!({ "status": {
            "phase": "Running",
            "containerStatuses": containers,
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
        let updated = Api::<Pod>::namespaced(client.clone(), &ns)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
        running.insert(key, running_pod);
        for play in &plays {
            recorder
                .publish(&Recorder::reference(&updated), &played_event(pod, play))
                .await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_decodes_msg() {
        assert_eq!(echo(Some("x=1&msg=hello+lab%21")), "hello lab!");
        assert_eq!(echo(None), "");
    }

    #[tokio::test]
    async fn two_pods_share_a_port() {
        let first = shared_tcp_listener(0).expect("first");
        let port = first.local_addr().expect("addr").port();
        let second = shared_tcp_listener(port);
        assert!(second.is_ok(), "second listener on {port}: {second:?}");
        let udp = shared_udp_socket(0).expect("udp");
        let port = udp.local_addr().expect("addr").port();
        assert!(shared_udp_socket(port).is_ok());
    }

    #[test]
    fn the_event_says_who_plays_the_container() {
        let pod: Pod = serde_json::from_value(json!({ "metadata": { "name": "web-1" },
            "spec": { "containers": [{ "name": "nginx", "image": "nginx" }] } }))
        .expect("pod");
        let ev = played_event(&pod, &played::play(&pod)[0]);
        assert_eq!(ev.reason, "PlayedByLabBackend");
        assert_eq!(
            ev.message,
            "image nginx is not pulled in the lab: container nginx is played by the lab backend \
             as an echo server (HTTP: the pod name, /clientip, /echo?msg=), serving 80/TCP"
        );
    }

    #[test]
    fn udp_replies() {
        assert_eq!(udp_reply(b"hostname", "n1"), b"n1");
        assert_eq!(udp_reply(b"echo hi\n", "n1"), b"hi");
    }
}
