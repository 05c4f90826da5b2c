//! The HTTPS side every TLS server of the process shares (the validating
//! webhooks, the secure metrics): the certificate [`Resolver`], swapped
//! in place on renewal, and [`serve`], the accept loop with a handshake
//! timeout. What is offered (versions, suites, curves) is `policy`'s
//! decision, taken once from the flags.

pub mod policy;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// A client that opened a connection and sends no handshake is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections one server holds at once; past it, new ones wait in the
/// kernel's backlog until one ends (a flood of idle connections costs
/// this many tasks for a handshake timeout, not one each).
pub const MAX_CONNECTIONS: usize = 256;
/// How long a stopping server lets the requests in flight finish (a
/// review is answered within `k8s::webhook::REVIEW_BUDGET`); idle
/// keep-alive connections close at once.
pub const DRAIN: Duration = Duration::from_secs(3);

/// The serving certificate, replaced in place when renewed; until the
/// first is set, handshakes fail.
#[derive(Debug, Default)]
pub struct Resolver(RwLock<Option<Arc<CertifiedKey>>>);

impl Resolver {
    /// Serves `key` from the next handshake on.
    pub fn set(&self, key: Arc<CertifiedKey>) {
        if let Ok(mut k) = self.0.write() {
            *k = Some(key);
        }
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.read().ok()?.clone()
    }
}

/// The certificate of `--metrics-cert-dir` (`tls.crt`, `tls.key`), or a
/// self-signed one for this host, made in memory, when no directory is
/// given (as upstream: scrapers of such an endpoint skip verification).
pub fn metrics_certificate(dir: Option<&std::path::Path>) -> anyhow::Result<Arc<CertifiedKey>> {
    use anyhow::Context as _;
    let bundle = match dir {
        Some(dir) => {
            let read = |name: &str| {
                let path = dir.join(name);
                std::fs::read_to_string(&path).with_context(|| {
                    format!(
                        "--metrics-cert-dir: reading {} (the directory must hold tls.crt and tls.key)",
                        path.display()
                    )
                })
            };
            crate::certs::Bundle {
                ca_pem: String::new(),
                ca_key_pem: None,
                cert_pem: read(crate::certs::TLS_CERT)?,
                key_pem: read(crate::certs::TLS_KEY)?,
            }
        }
        None => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "localhost".to_owned());
            crate::certs::self_signed(&host, std::time::SystemTime::now())?
        }
    };
    Ok(crate::certs::certified_key(&bundle)?)
}

/// How often `--metrics-cert-dir` is read again: a certificate renewed
/// in its Secret (cert-manager's) is served without a restart.
pub const CERT_RELOAD: Duration = Duration::from_secs(60);

/// Reads the certificate in `dir` every [`CERT_RELOAD`] and serves it
/// from the next handshake on; a read that fails keeps the one served.
/// Never returns.
pub async fn reload_metrics_certificate(
    dir: std::path::PathBuf,
    resolver: Arc<Resolver>,
) -> anyhow::Result<()> {
    loop {
        tokio::time::sleep(CERT_RELOAD).await;
        match metrics_certificate(Some(&dir)) {
            Ok(key) => resolver.set(key),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "metrics certificate not reloaded")
            }
        }
    }
}

/// Serves `app` over TLS on `listener` until the task is dropped, at
/// most [`MAX_CONNECTIONS`] at once; `what` names the server in logs.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: axum::Router,
    what: &'static str,
) {
    serve_until(listener, tls, app, what, std::future::pending()).await;
}

/// [`serve`] until `stop` resolves, then drains: no new connection is
/// accepted, and the requests in flight get up to [`DRAIN`] to finish.
pub async fn serve_until(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: axum::Router,
    what: &'static str,
    stop: impl std::future::Future<Output = ()>,
) {
    serve_at_most(listener, tls, app, what, MAX_CONNECTIONS, stop).await;
}

async fn serve_at_most(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: axum::Router,
    what: &'static str,
    max: usize,
    stop: impl std::future::Future<Output = ()>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let slots = Arc::new(tokio::sync::Semaphore::new(max));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = &mut stop => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: pass, don't spin.
                tracing::warn!(error = %e, "{what}: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _slot = slot;
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "{what}: TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .http1_only();
            let connection = builder.serve_connection(hyper_util::rt::TokioIo::new(tls), service);
            let _ = watcher.watch(connection).await;
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("{what}: requests still in flight after {DRAIN:?}: cut");
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A client verifier that accepts any certificate: the tests here are
    /// about who may connect and when, not whom they reach.
    #[derive(Debug)]
    pub(crate) struct AnyCert;

    impl rustls::client::danger::ServerCertVerifier for AnyCert {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }

    /// A server config with a self-signed certificate for localhost.
    fn test_server_config() -> Arc<rustls::ServerConfig> {
        let resolver = Arc::new(Resolver::default());
        let bundle = crate::certs::self_signed("localhost", std::time::SystemTime::now())
            .expect("certificate");
        resolver.set(crate::certs::certified_key(&bundle).expect("key"));
        let policy = policy::decide(&policy::TlsFlags::default()).expect("policy");
        policy::server_config(&policy, resolver).expect("config")
    }

    /// Stopping lets a request in flight finish (its answer arrives after
    /// the stop), and takes no new connection.
    #[tokio::test]
    async fn a_stop_drains_the_requests_in_flight() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let app = axum::Router::new().route(
            "/slow",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_millis(500)).await;
                "done"
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_at_most(
            listener,
            test_server_config(),
            app,
            "test",
            8,
            async move {
                let _ = stopped.await;
            },
        ));
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert))
        .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(client))
            .connect(name, tcp)
            .await
            .expect("handshake");
        tls.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("request");
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send(()).expect("stop");
        // The server returns only once the answer is out: the process may
        // exit then without cutting it.
        tokio::time::timeout(DRAIN + Duration::from_secs(1), server)
            .await
            .expect("the server returns after draining")
            .expect("no panic");
        let mut buf = vec![0u8; 1024];
        let n = tokio::time::timeout(Duration::from_millis(50), tls.read(&mut buf))
            .await
            .expect("the answer was out before the server returned")
            .expect("read");
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(
            answer.contains("done"),
            "cut instead of drained: {answer:?}"
        );
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "no new connection after the stop"
        );
    }

    /// At most `max` connections are held: a second client waits in the
    /// backlog (its bytes unanswered) until the first leaves, then is
    /// served (here: its non-TLS bytes end the handshake, and the
    /// connection).
    #[tokio::test]
    async fn connections_past_the_bound_wait_for_a_slot() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let tls = test_server_config();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(serve_at_most(
            listener,
            tls,
            axum::Router::new(),
            "test",
            1,
            std::future::pending(),
        )));
        let first = tokio::net::TcpStream::connect(addr).await.expect("first");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut second = tokio::net::TcpStream::connect(addr).await.expect("second");
        second
            .write_all(b"GET / HTTP/1.0\r\n\r\n")
            .await
            .expect("write");
        let mut buf = [0u8; 64];
        let waited = tokio::time::timeout(Duration::from_millis(300), second.read(&mut buf)).await;
        assert!(waited.is_err(), "served past the bound: {waited:?}");
        drop(first);
        let served = tokio::time::timeout(Duration::from_secs(5), second.read(&mut buf)).await;
        assert!(
            matches!(served, Ok(Ok(_)) | Ok(Err(_))),
            "a freed slot serves the waiting client"
        );
        drop(server);
    }

    #[test]
    fn the_metrics_certificate_comes_from_the_directory_or_is_made() {
        let dir = std::env::temp_dir().join(format!("metallb-rs-certdir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let missing = metrics_certificate(Some(&dir)).expect_err("no files yet");
        assert!(
            format!("{missing:#}").contains("--metrics-cert-dir: reading"),
            "{missing:#}"
        );
        let bundle = crate::certs::self_signed("metrics.example", std::time::SystemTime::now())
            .expect("pair");
        std::fs::write(dir.join("tls.crt"), &bundle.cert_pem).expect("crt");
        std::fs::write(dir.join("tls.key"), &bundle.key_pem).expect("key");
        let served = metrics_certificate(Some(&dir)).expect("read");
        let want = crate::certs::certified_key(&bundle).expect("key");
        assert_eq!(served.cert, want.cert, "the directory's certificate");
        let made = metrics_certificate(None).expect("self-signed");
        assert_ne!(made.cert, want.cert);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
