//! The readinessProbes of one played Pod: sent, each bounded by its
//! timeout, to what the lab backend serves ([`check`]), judged by
//! [`crate::lab::probe`], and the Pod's readiness written when it
//! changes.

use super::Status;
use crate::lab::probe::{self, Check, Probe, Readiness};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use metallb_rs::k8s::events::{EventSpec, Recorder};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// How long a status write of the prober may take.
const STATUS_TIMEOUT: Duration = Duration::from_secs(10);

/// Probes one Pod's containers and writes its readiness when it changes.
pub(super) struct Prober {
    pub(super) api: Api<Pod>,
    pub(super) recorder: Recorder,
    pub(super) pod: Pod,
    pub(super) addresses: Vec<IpAddr>,
    pub(super) started: String,
    pub(super) probes: Vec<Probe>,
    /// Each container's readiness as the Pod's status says it.
    pub(super) written: Vec<bool>,
}

impl Prober {
    /// Runs until aborted (the Pod goes away).
    pub(super) async fn run(mut self) {
        let start = tokio::time::Instant::now();
        let mut next: Vec<tokio::time::Instant> = self
            .probes
            .iter()
            .map(|p| start + p.initial_delay)
            .collect();
        let mut states: Vec<Option<Readiness>> = vec![None; self.written.len()];
        for p in &self.probes {
            if let Some(s) = states.get_mut(p.container) {
                *s = Some(Readiness::default());
            }
        }
        let name = self.pod.metadata.name.clone().unwrap_or_default();
        let pod_ip = self.addresses.first().copied();
        loop {
            let Some((i, at)) = next.iter().copied().enumerate().min_by_key(|(_, at)| *at) else {
                return;
            };
            tokio::time::sleep_until(at).await;
            let p = &self.probes[i];
            let result = check(&p.check, pod_ip, p.timeout).await;
            next[i] = tokio::time::Instant::now() + p.period;
            if let Some(Some(state)) = states.get_mut(p.container) {
                *state = state.observe(result.is_ok(), p);
            }
            if let Err(why) = &result {
                let ev = EventSpec::warning("Unhealthy", format!("Readiness probe failed: {why}"));
                self.recorder
                    .publish(&Recorder::reference(&self.pod), &ev)
                    .await;
            }
            let ready: Vec<bool> = states.iter().map(|s| s.is_none_or(|r| r.ready)).collect();
            if ready == self.written {
                continue;
            }
            let status = Status {
                pod: &self.pod,
                addresses: &self.addresses,
                started: &self.started,
            };
            let patch = Patch::Merge(status.patch(&ready));
            let pp = PatchParams::default();
            let write = self.api.patch_status(&name, &pp, &patch);
            // A failed write is retried after the next probe.
            match tokio::time::timeout(STATUS_TIMEOUT, write).await {
                Ok(Ok(_)) => {
                    tracing::info!(pod = %name, ready = probe::pod_ready(&states), "readiness changed");
                    self.written = ready;
                }
                Ok(Err(e)) => tracing::debug!(pod = %name, error = %e, "readiness write failed"),
                Err(_) => tracing::debug!(pod = %name, "readiness write timed out"),
            }
        }
    }
}

/// Sends one probe to `pod_ip` (or the probe's host), bounded by
/// `timeout`; the error says why it failed, worded like kubelet's.
async fn check(check: &Check, pod_ip: Option<IpAddr>, timeout: Duration) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = |h: &Option<String>| {
        h.clone()
            .or_else(|| pod_ip.map(|ip| ip.to_string()))
            .unwrap_or_else(|| "127.0.0.1".to_owned())
    };
    let connect = |host: String, port: u16| async move {
        let addr = match host.parse::<IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, port).to_string(),
            Err(_) => format!("{host}:{port}"),
        };
        tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| format!("dial tcp {addr}: {e}"))
    };
    let probe = async {
        match check {
            Check::Played => Ok(()),
            Check::Unresolved(name) => {
                Err(format!("port {name:?} is declared by no container port"))
            }
            Check::Tcp { host: h, port } => connect(host(h), *port).await.map(drop),
            Check::Http { https: true, .. } => Err(
                "the lab backend serves no TLS: http: server gave HTTP response to HTTPS client"
                    .to_owned(),
            ),
            Check::Http {
                host: h,
                port,
                path,
                ..
            } => {
                let host = host(h);
                let mut stream = connect(host.clone(), *port).await?;
                let request = format!(
                    "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.35\r\nAccept: */*\r\nConnection: close\r\n\r\n"
                );
                stream
                    .write_all(request.as_bytes())
                    .await
                    .map_err(|e| format!("Get \"http://{host}:{port}{path}\": {e}"))?;
                let mut head = Vec::new();
                let mut buf = [0u8; 512];
                while !head.contains(&b'\n') && head.len() < 4096 {
                    let n = stream
                        .read(&mut buf)
                        .await
                        .map_err(|e| format!("Get \"http://{host}:{port}{path}\": {e}"))?;
                    if n == 0 {
                        break;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
                let code = String::from_utf8_lossy(&head)
                    .split_whitespace()
                    .nth(1)
                    .and_then(|c| c.parse::<u16>().ok());
                match code {
                    Some(c) if (200..400).contains(&c) => Ok(()),
                    Some(c) => Err(format!("HTTP probe failed with statuscode: {c}")),
                    None => Err(format!(
                        "Get \"http://{host}:{port}{path}\": malformed HTTP response"
                    )),
                }
            }
        }
    };
    match tokio::time::timeout(timeout, probe).await {
        Ok(r) => r,
        Err(_) => Err(format!("timeout after {timeout:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::backend::{Log, serve_http, shared_tcp_listener};

    #[tokio::test]
    async fn probes_answer_from_what_listens() {
        let listener = shared_tcp_listener(0).expect("listener");
        let port = listener.local_addr().expect("addr").port();
        let ip: IpAddr = "127.0.0.1".parse().expect("ip");
        drop(listener);
        let server = tokio::spawn(serve_http(port, "web-0".into(), Log(None)));
        let http = |path: &str| Check::Http {
            host: None,
            port,
            path: path.into(),
            https: false,
        };
        let timeout = Duration::from_secs(5);
        let mut answered = Err(String::new());
        // The server binds in its own task: wait for it.
        for _ in 0..50 {
            answered = check(&http("/"), Some(ip), timeout).await;
            if answered.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(answered, Ok(()));
        assert_eq!(
            check(&Check::Tcp { host: None, port }, Some(ip), timeout).await,
            Ok(())
        );
        server.abort();
        let _ = server.await;
        // Nothing listens on a port bound without `listen`, and no other
        // test's shared (SO_REUSEPORT) listener can take it meanwhile, as
        // one could take the server's port once it was let go.
        let closed = tokio::net::TcpSocket::new_v4().expect("socket");
        closed.bind(SocketAddr::from((ip, 0))).expect("bind");
        let closed = closed.local_addr().expect("addr").port();
        let refused = check(
            &Check::Tcp {
                host: None,
                port: closed,
            },
            Some(ip),
            timeout,
        )
        .await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.starts_with("dial tcp 127.0.0.1:")),
            "{refused:?}"
        );
        assert!(
            check(&Check::Unresolved("http".into()), Some(ip), timeout)
                .await
                .is_err()
        );
        assert_eq!(check(&Check::Played, Some(ip), timeout).await, Ok(()));
    }
}
