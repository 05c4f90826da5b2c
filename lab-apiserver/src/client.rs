//! Calling a webhook, for admission and for CRD conversion alike: where a
//! `clientConfig` points (a `url`, or a `service` resolved through the
//! server's override map or the Service's EndpointSlices, since the lab
//! has no Service proxy), TLS verified against `caBundle` alone (server
//! name `<service>.<namespace>.svc` or the URL's host), one JSON POST with
//! `?timeout=` added and the whole exchange bounded by that timeout.
//! Failures read as kube-apiserver's: `Post "<url>": <cause>`.

use crate::state::State;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Where one webhook call goes.
pub struct Target {
    /// The URL as error messages show it (with `?timeout=`).
    pub url: String,
    /// `host:port[,host:port...]` to connect to (the first that accepts),
    /// or why the service has no address.
    connect: Result<String, String>,
    /// The name the serving certificate must carry.
    server_name: String,
    /// The `Host` header.
    host: String,
    /// Path and query.
    path: String,
    /// The caBundle's certificates: the only roots trusted.
    roots: rustls::RootCertStore,
}

/// Go's rendering of a duration in whole seconds (`10s`).
fn go_seconds(timeout: Duration) -> String {
    format!("{}s", timeout.as_secs())
}

fn with_timeout(path: &str, timeout: Duration) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}timeout={}", go_seconds(timeout))
}

/// Splits `https://host[:port][/path]` into (host, port, path).
pub fn split_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("clientConfig.url {url:?} must start with https://"))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], rest[i..].to_owned()),
        None => (rest, "/".to_owned()),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, tail) = v6
            .split_once(']')
            .ok_or_else(|| format!("clientConfig.url {url:?}: unclosed [ in the host"))?;
        (h.to_owned(), tail.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (authority.to_owned(), None),
        }
    };
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| format!("clientConfig.url {url:?}: port {p:?} is not a number"))?,
        None => 443,
    };
    if host.is_empty() {
        return Err(format!("clientConfig.url {url:?} has no host"));
    }
    Ok((host, port, path))
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn roots(client_config: &Value) -> Result<rustls::RootCertStore, String> {
    use base64::Engine as _;
    let mut store = rustls::RootCertStore::empty();
    let Some(bundle) = client_config["caBundle"].as_str().filter(|b| !b.is_empty()) else {
        return Ok(store);
    };
    let pem = base64::engine::general_purpose::STANDARD
        .decode(bundle.trim())
        .map_err(|e| format!("clientConfig.caBundle is not base64: {e}"))?;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("clientConfig.caBundle is not PEM: {e}"))?;
        store
            .add(cert)
            .map_err(|e| format!("clientConfig.caBundle: {e}"))?;
    }
    Ok(store)
}

/// Where `client_config` sends a call bounded by `timeout`; the error is
/// a configuration that cannot be called at all.
pub fn target(s: &State, client_config: &Value, timeout: Duration) -> Result<Target, String> {
    let roots = roots(client_config)?;
    if let Some(url) = client_config["url"].as_str() {
        let (host, port, path) = split_url(url)?;
        let path = with_timeout(&path, timeout);
        let authority = host_port(&host, port);
        return Ok(Target {
            url: format!("https://{authority}{path}"),
            connect: Ok(authority.clone()),
            server_name: host,
            host: authority,
            path,
            roots,
        });
    }
    let svc = &client_config["service"];
    let (Some(ns), Some(name)) = (svc["namespace"].as_str(), svc["name"].as_str()) else {
        return Err("clientConfig needs url or service (namespace and name)".into());
    };
    let port = svc["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(443);
    let path = with_timeout(svc["path"].as_str().unwrap_or("/"), timeout);
    let server_name = format!("{name}.{ns}.svc");
    let host = format!("{server_name}:{port}");
    Ok(Target {
        url: format!("https://{host}{path}"),
        connect: resolve_service(s, ns, name, port),
        server_name,
        host,
        path,
        roots,
    })
}

/// The `host:port` behind Service `ns/name` port `port`: the server's
/// override for `ns/name` when it has one, else the first ready endpoint
/// of the Service's EndpointSlices on that port's target.
pub fn resolve_service(s: &State, ns: &str, name: &str, port: u16) -> Result<String, String> {
    if let Some(addr) = s.webhook_services.get(&format!("{ns}/{name}")) {
        return Ok(addr.clone());
    }
    let svc = s
        .store
        .get(&(String::new(), "services".into()), ns, name)
        .ok_or_else(|| format!("service {name:?} not found"))?;
    let service_port = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"] == port)
        .ok_or_else(|| format!("service {name:?} has no port {port}"))?;
    let port_name = service_port["name"].as_str().unwrap_or_default();
    let slices = s.store.list(
        &("discovery.k8s.io".into(), "endpointslices".into()),
        Some(ns),
    );
    for slice in slices
        .iter()
        .filter(|e| e["metadata"]["labels"]["kubernetes.io/service-name"] == name)
    {
        let target_port = slice["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_u64())
            .or_else(|| service_port["targetPort"].as_u64())
            .and_then(|p| u16::try_from(p).ok());
        let Some(target_port) = target_port else {
            continue;
        };
        let ready = slice["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["conditions"]["ready"] != false)
            .find_map(|e| e["addresses"][0].as_str());
        if let Some(addr) = ready {
            return Ok(host_port(addr, target_port));
        }
    }
    Err(format!("no endpoints available for service {name:?}"))
}

/// POSTs `body` to `target`, bounded by `timeout`; the error reads
/// `Post "<url>": <cause>`.
pub async fn post(target: &Target, body: &Value, timeout: Duration) -> Result<Value, String> {
    match tokio::time::timeout(timeout, exchange(target, body)).await {
        Ok(r) => r.map_err(|cause| format!("Post {:?}: {cause}", target.url)),
        Err(_) => Err(format!("Post {:?}: context deadline exceeded", target.url)),
    }
}

fn tls_cause(e: &std::io::Error) -> String {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        // No root, or a root of the same name that did not sign it.
        Some(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer | rustls::CertificateError::BadSignature,
        )) => "tls: failed to verify certificate: x509: certificate signed by unknown authority"
            .into(),
        Some(rustls::Error::InvalidCertificate(c)) => {
            format!("tls: failed to verify certificate: {c:?}")
        }
        Some(other) => format!("tls: {other}"),
        None => format!("tls: {e}"),
    }
}

/// A connection to the first of `addrs` (comma-separated) that accepts
/// one; the last refusal otherwise.
async fn dial(addrs: &str) -> Result<tokio::net::TcpStream, String> {
    let mut last = String::from("no address");
    for addr in addrs.split(',') {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(tcp) => return Ok(tcp),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                last = format!("dial tcp {addr}: connect: connection refused");
            }
            Err(e) => last = format!("dial tcp {addr}: {e}"),
        }
    }
    Err(last)
}

async fn exchange(target: &Target, body: &Value) -> Result<Value, String> {
    let tcp = dial(&target.connect.clone()?).await?;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(target.roots.clone())
    .with_no_client_auth();
    let name = ServerName::try_from(target.server_name.clone())
        .map_err(|e| format!("server name {:?}: {e}", target.server_name))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| tls_cause(&e))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
    let request = hyper::Request::post(&target.path)
        .header(hyper::header::HOST, &target.host)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .map_err(|e| e.to_string())?;
    let answer = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), 8 << 20)
            .await
            .map_err(|e| format!("reading the answer: {e}"))?;
        if !status.is_success() {
            return Err(format!(
                "an error on the server ({:?}) has prevented the request from succeeding (status {status})",
                String::from_utf8_lossy(&bytes[..bytes.len().min(256)])
            ));
        }
        serde_json::from_slice::<Value>(&bytes).map_err(|e| format!("decoding the answer: {e}"))
    };
    // The connection is driven beside the request and dropped with it.
    tokio::select! {
        r = answer => r,
        c = conn => Err(match c {
            Ok(()) => "the connection closed before an answer".to_owned(),
            Err(e) => e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// A Service of two replicas, the first stopped: the second answers;
    /// both stopped: the refusal names the last address tried.
    #[tokio::test]
    async fn the_first_replica_that_accepts_answers() {
        let stopped = {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            l.local_addr().expect("addr")
        };
        let running = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let up = running.local_addr().expect("addr");
        let tcp = dial(&format!("{stopped},{up}")).await.expect("dialled");
        assert_eq!(tcp.peer_addr().expect("peer"), up);
        drop(running);
        assert_eq!(
            dial(&format!("{up},{stopped}")).await.err(),
            Some(format!("dial tcp {stopped}: connect: connection refused"))
        );
    }

    #[rstest]
    #[case("https://127.0.0.1:9443/validate", Ok(("127.0.0.1".into(), 9443, "/validate".into())))]
    #[case("https://hook.example", Ok(("hook.example".into(), 443, "/".into())))]
    #[case("https://[::1]:8443/v?x=1", Ok(("::1".into(), 8443, "/v?x=1".into())))]
    #[case("https://h?x=1", Ok(("h".into(), 443, "/?x=1".into())))]
    #[case("http://h/", Err("clientConfig.url \"http://h/\" must start with https://".into()))]
    #[case("https://h:x/", Err("clientConfig.url \"https://h:x/\": port \"x\" is not a number".into()))]
    fn urls(#[case] url: &str, #[case] expected: Result<(String, u16, String), String>) {
        assert_eq!(split_url(url), expected);
    }

    #[rstest]
    #[case("/validate", 10, "/validate?timeout=10s")]
    #[case("/v?a=b", 30, "/v?a=b&timeout=30s")]
    fn timeouts(#[case] path: &str, #[case] secs: u64, #[case] expected: &str) {
        assert_eq!(with_timeout(path, Duration::from_secs(secs)), expected);
    }

    #[test]
    fn services_resolve_through_overrides_then_endpoint_slices() {
        use serde_json::json;
        let mut s = State::new();
        s.bootstrap();
        let ns = "metallb-system";
        let svc_t = s.registry.get("", "v1", "services").cloned().expect("svc");
        let eps_t = s
            .registry
            .get("discovery.k8s.io", "v1", "endpointslices")
            .cloned()
            .expect("eps");
        let ns_t = s.registry.get("", "v1", "namespaces").cloned().expect("ns");
        s.create(&ns_t, "", json!({ "metadata": { "name": ns } }))
            .expect("ns");
        assert_eq!(
            resolve_service(&s, ns, "hook", 443),
            Err("service \"hook\" not found".into())
        );
        s.create(&svc_t, ns, json!({ "metadata": { "name": "hook" }, "spec": { "ports": [{ "name": "https", "port": 443, "targetPort": 9443 }] } }))
            .expect("svc");
        assert_eq!(
            resolve_service(&s, ns, "hook", 443),
            Err("no endpoints available for service \"hook\"".into())
        );
        s.create(&eps_t, ns, json!({ "metadata": { "name": "hook-1", "labels": { "kubernetes.io/service-name": "hook" } },
            "addressType": "IPv4", "ports": [{ "name": "https", "port": 9443 }],
            "endpoints": [{ "addresses": ["10.0.0.9"], "conditions": { "ready": false } }, { "addresses": ["127.0.0.1"], "conditions": { "ready": true } }] }))
            .expect("eps");
        assert_eq!(
            resolve_service(&s, ns, "hook", 443),
            Ok("127.0.0.1:9443".into())
        );
        assert_eq!(
            resolve_service(&s, ns, "hook", 80),
            Err("service \"hook\" has no port 80".into())
        );
        s.webhook_services
            .insert(format!("{ns}/hook"), "127.0.0.1:1234".into());
        assert_eq!(
            resolve_service(&s, ns, "hook", 443),
            Ok("127.0.0.1:1234".into())
        );
    }
}
