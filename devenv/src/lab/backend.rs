//! The lab's pod runner (the kubelet part of the node agent): no image is
//! pulled here, so every container of a Pod bound to this node is played
//! by the lab backend, an agnhost-netexec-like echo server in the node's
//! network namespace (host networking: the pod IPs are the node's), on
//! the ports [`super::played`] names. Its status is reported Running,
//! and Ready at once or, with readinessProbes, as [`prober`] finds them,
//! so the EndpointSlice controller publishes it; an event on the Pod says
//! the container is played by the lab backend, and what it served goes to
//! the container's log ([`lab_apiserver::podlog`], `kubectl logs`). A
//! Job's Pod completes at once instead. A container of the metallb-rs
//! image runs the lab's metallb-rs binary ([`process`]). The same Pod
//! spec runs real agnhost (or the real image) on kind.
//!
//! Pods on one node share its addresses, so two of them may want one
//! port (two replicas, or a rolling update's old and new Pod): every
//! listener is opened with `SO_REUSEPORT` and the kernel spreads
//! connections over the Pods that listen.

use super::played::{self, Played, Player, Protocol};
use super::probe;
use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use lab_apiserver::podlog;
use metallb_rs::k8s::events::{EventSpec, Recorder};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod prober;
mod process;
mod status;

use prober::Prober;
pub use process::MetallbRs;
use status::Status;

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
async fn serve_http(port: u16, name: String, log: Log) -> Result<()> {
    use axum::extract::{ConnectInfo, RawQuery};
    let access = move |ConnectInfo(peer): ConnectInfo<SocketAddr>,
                       req: axum::extract::Request,
                       next: axum::middleware::Next| {
        let log = log.clone();
        async move {
            let request = format!("{} {} {:?}", req.method(), req.uri(), req.version());
            let agent = req
                .headers()
                .get(axum::http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_owned();
            let response = next.run(req).await;
            let bytes = axum::body::HttpBody::size_hint(response.body()).exact();
            log.line(&access_line(
                peer,
                &request,
                response.status().as_u16(),
                bytes,
                &agent,
                jiff::Timestamp::now(),
            ));
            response
        }
    };
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
        })
        .layer(axum::middleware::from_fn(access));
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

async fn serve_udp(port: u16, name: String, log: Log) -> Result<()> {
    let socket = bind_retrying(port, || async { shared_udp_socket(port) }).await?;
    let mut buf = [0u8; 2048];
    loop {
        let (n, peer) = socket.recv_from(&mut buf).await?;
        let reply = udp_reply(&buf[..n], &name);
        let _ = socket.send_to(&reply, peer).await;
        log.line(&format!(
            "{peer} udp {port}: {n} bytes in, {} bytes out",
            reply.len()
        ));
    }
}

/// The access log line of one HTTP request (nginx's combined format).
fn access_line(
    peer: SocketAddr,
    request: &str,
    status: u16,
    bytes: Option<u64>,
    agent: &str,
    at: jiff::Timestamp,
) -> String {
    let time = at.strftime("%d/%b/%Y:%H:%M:%S +0000");
    let bytes = bytes.map_or("-".to_owned(), |b| b.to_string());
    format!(
        "{} - - [{time}] \"{request}\" {status} {bytes} \"-\" \"{agent}\"",
        // A dual-stack listener sees IPv4 clients as mapped addresses.
        peer.ip().to_canonical()
    )
}

/// One container's log ([`lab_apiserver::podlog`]), shared by its
/// servers; a log that cannot be written is skipped, not fatal.
#[derive(Clone)]
struct Log(Option<Arc<Mutex<podlog::Ring>>>);

impl Log {
    fn open(dir: &Path, pod: &Pod, container: &str) -> Log {
        let m = &pod.metadata;
        let file = podlog::path(
            dir,
            m.namespace.as_deref().unwrap_or_default(),
            m.name.as_deref().unwrap_or_default(),
            m.uid.as_deref().unwrap_or_default(),
            container,
        );
        match podlog::Ring::create(file.clone()) {
            Ok(ring) => Log(Some(Arc::new(Mutex::new(ring)))),
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "no container log");
                Log(None)
            }
        }
    }

    fn line(&self, text: &str) {
        if let Some(ring) = &self.0 {
            let mut ring = ring.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = ring.push(text) {
                tracing::debug!(error = %e, "container log write failed");
            }
        }
    }
}

struct Running {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Tells each process to stop (SIGTERM, its grace, SIGKILL).
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Running {
    /// Tells its processes to stop; its servers go on serving until
    /// dropped (the drain).
    fn stop_processes(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
    }
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
    logs: PathBuf,
    metallb_rs: Option<MetallbRs>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let recorder = Recorder::new(client.clone(), "kubelet", &node);
    let mut pods = Pods::default();
    loop {
        let here = Here {
            client: &client,
            node: &node,
            addresses: &addresses,
            logs: &logs,
            metallb_rs: metallb_rs.as_ref(),
        };
        let round = reconcile(&here, &recorder, &mut pods);
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
fn played_event(pod: &Pod, play: &Played, metallb_rs: Option<&MetallbRs>) -> EventSpec {
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
    let what = match (play.player, metallb_rs) {
        (Player::MetallbRs, Some(rs)) => {
            return EventSpec::normal(
                "PlayedByLabBackend",
                process::event_message(&image, &play.container, rs),
            );
        }
        (Player::MetallbRs, None) => "nothing (no metallb-rs binary given to this node's agent)",
        (Player::Netexec, _) => "agnhost netexec",
        (Player::Echo, _) => "an echo server (HTTP: the pod name, /clientip, /echo?msg=)",
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

/// A Pod as this runner keys it: namespace, name and uid (a Pod deleted
/// and created again under its name is another Pod).
type PodKey = (String, String, String);

/// The key of `pod`.
fn pod_key(pod: &Pod) -> PodKey {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
        pod.metadata.uid.clone().unwrap_or_default(),
    )
}

/// One round: what went away stops, what is new starts.
async fn reconcile(here: &Here<'_>, recorder: &Recorder, pods_here: &mut Pods) -> Result<()> {
    let pods = Api::<Pod>::all(here.client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={}", here.node)))
        .await?
        .items;
    let live: std::collections::BTreeSet<PodKey> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(pod_key)
        .collect();
    stop_gone(here, pods_here, &live, tokio::time::Instant::now());
    for pod in &pods {
        let key = pod_key(pod);
        if pods_here.running.contains_key(&key) || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let running = if played::runs_to_completion(pod) {
            complete(here.client, recorder, here.addresses, here.logs, pod).await?;
            Running {
                tasks: Vec::new(),
                stops: Vec::new(),
            }
        } else {
            start(here, recorder, pod).await?
        };
        pods_here.running.insert(key, running);
    }
    Ok(())
}

/// Stops the Pods that are no longer `live` here and forgets what they
/// left behind, and ends the drains that are over at `now`. Pods that
/// went away keep serving for a while, as a container does through its
/// termination grace period, so connections the proxies still send them
/// are answered.
fn stop_gone(
    here: &Here<'_>,
    pods_here: &mut Pods,
    live: &std::collections::BTreeSet<PodKey>,
    now: tokio::time::Instant,
) {
    let Pods { running, draining } = pods_here;
    let gone: Vec<_> = running
        .keys()
        .filter(|k| !live.contains(*k))
        .cloned()
        .collect();
    for key in gone {
        if let Some(mut r) = running.remove(&key) {
            // A process stops at once, as a container gets SIGTERM when
            // its Pod is deleted.
            r.stop_processes();
            draining.push((now + DRAIN, r));
        }
        // Nobody can ask for a deleted Pod's logs: drop them, as kubelet
        // does.
        let (ns, name, uid) = &key;
        let _ = std::fs::remove_dir_all(podlog::pod_dir(here.logs, ns, name, uid));
        if let Some(rs) = here.metallb_rs {
            process::forget(rs, ns, name, uid);
        }
    }
    draining.retain(|(until, _)| *until > now);
}

/// Starts a new Pod that keeps running: its containers, its Running
/// status (Ready unless a readinessProbe must pass first), the prober
/// that flips readiness, and the events saying how each container is
/// played.
async fn start(here: &Here<'_>, recorder: &Recorder, pod: &Pod) -> Result<Running> {
    let plays = played::play(pod);
    // Aborts the servers if the status write below fails.
    let (mut running_pod, refusals) = start_containers(here, pod, &plays).await?;
    let started = jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default();
    let probes = probe::readiness_probes(pod);
    // A container with a readinessProbe is not ready until it passes.
    let containers = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    let ready: Vec<bool> = (0..containers)
        .map(|i| !probes.iter().any(|p| p.container == i))
        .collect();
    let status = Status {
        pod,
        addresses: here.addresses,
        started: &started,
    };
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let updated = Api::<Pod>::namespaced(here.client.clone(), &ns)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(status.patch(&ready)),
        )
        .await?;
    if !probes.is_empty() {
        let prober = Prober {
            api: Api::namespaced(here.client.clone(), &ns),
            recorder: recorder.clone(),
            pod: updated.clone(),
            addresses: here.addresses.to_vec(),
            started,
            probes,
            written: ready,
        };
        running_pod.tasks.push(tokio::spawn(prober.run()));
    }
    for play in &plays {
        recorder
            .publish(
                &Recorder::reference(&updated),
                &played_event(pod, play, here.metallb_rs),
            )
            .await;
    }
    for refusal in refusals {
        let ev = EventSpec::warning("FailedToPlay", refusal);
        recorder.publish(&Recorder::reference(&updated), &ev).await;
    }
    Ok(running_pod)
}

/// What a node's pod runner knows about where it runs.
struct Here<'a> {
    client: &'a kube::Client,
    node: &'a str,
    addresses: &'a [IpAddr],
    logs: &'a Path,
    metallb_rs: Option<&'a MetallbRs>,
}

/// Starts `pod`'s containers as `plays` says: what runs, and why any
/// container cannot be played (for good: reported, not retried). An
/// error is one to retry next round; what had started is stopped.
async fn start_containers(
    here: &Here<'_>,
    pod: &Pod,
    plays: &[Played],
) -> Result<(Running, Vec<String>)> {
    let mut running = Running {
        tasks: Vec::new(),
        stops: Vec::new(),
    };
    let mut refusals = Vec::new();
    let name = pod.metadata.name.clone().unwrap_or_default();
    for play in plays {
        let log = Log::open(here.logs, pod, &play.container);
        log.line(&played_event(pod, play, here.metallb_rs).message);
        if play.player == Player::MetallbRs {
            let (stop, stopped) = tokio::sync::oneshot::channel();
            match process::start_container(here, pod, play, log.clone(), stopped).await {
                Ok(process::Started::Task(task)) => {
                    running.tasks.push(task);
                    running.stops.push(stop);
                }
                Ok(process::Started::Refused(why)) => {
                    let refusal = format!("container {}: {why}", play.container);
                    log.line(&refusal);
                    refusals.push(refusal);
                }
                Err(e) => {
                    log.line(&format!("not started yet, retrying: {e:#}"));
                    return Err(e);
                }
            }
            continue;
        }
        // netexec answers with the node's name (the e2e suites tell
        // nodes apart by it); any other image with the Pod's.
        let answer = if play.player == Player::Netexec {
            here.node
        } else {
            name.as_str()
        };
        for port in &play.ports {
            let (number, protocol, answer) = (port.number, port.protocol, answer.to_owned());
            let log = log.clone();
            running.tasks.push(tokio::spawn(async move {
                let served = match protocol {
                    Protocol::Tcp => serve_http(number, answer, log).await,
                    Protocol::Udp => serve_udp(number, answer, log).await,
                };
                if let Err(e) = served {
                    tracing::warn!(port = number, error = %e, "lab backend failed");
                }
            }));
        }
    }
    Ok((running, refusals))
}

/// Plays a Job's Pod: each container completes at once with exit code 0.
async fn complete(
    client: &kube::Client,
    recorder: &Recorder,
    addresses: &[IpAddr],
    logs: &Path,
    pod: &Pod,
) -> Result<()> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let now = jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default();
    let status = Status {
        pod,
        addresses,
        started: &now,
    };
    let updated = Api::<Pod>::namespaced(client.clone(), &ns)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(status.completed()),
        )
        .await?;
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        let image = c.image.clone().unwrap_or_default();
        let ev = EventSpec::normal(
            "PlayedByLabBackend",
            format!(
                "image {image} is not pulled in the lab: container {} of a Job is played by the lab backend as completing at once with exit code 0",
                c.name
            ),
        );
        Log::open(logs, pod, &c.name).line(&ev.message);
        recorder.publish(&Recorder::reference(&updated), &ev).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let ev = played_event(&pod, &played::play(&pod)[0], None);
        assert_eq!(ev.reason, "PlayedByLabBackend");
        assert_eq!(
            ev.message,
            "image nginx is not pulled in the lab: container nginx is played by the lab backend \
             as an echo server (HTTP: the pod name, /clientip, /echo?msg=), serving 80/TCP"
        );
    }

    #[test]
    fn access_lines_read_like_nginx() {
        let at: jiff::Timestamp = "2026-12-06T15:04:05Z".parse().expect("time");
        let peer: SocketAddr = "172.30.0.2:40000".parse().expect("peer");
        let mapped: SocketAddr = "[::ffff:172.30.0.2]:40000".parse().expect("mapped");
        assert_eq!(
            access_line(mapped, "GET / HTTP/1.1", 200, Some(9), "curl/8.5.0", at),
            access_line(peer, "GET / HTTP/1.1", 200, Some(9), "curl/8.5.0", at),
        );
        assert_eq!(
            access_line(peer, "GET / HTTP/1.1", 200, Some(9), "curl/8.5.0", at),
            "172.30.0.2 - - [06/Dec/2026:15:04:05 +0000] \"GET / HTTP/1.1\" 200 9 \"-\" \"curl/8.5.0\""
        );
    }

    #[test]
    fn udp_replies() {
        assert_eq!(udp_reply(b"hostname", "n1"), b"n1");
        assert_eq!(udp_reply(b"echo hi\n", "n1"), b"hi");
    }
}
