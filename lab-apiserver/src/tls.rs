//! The server's TLS identity and listener: a CA of its own and a serving
//! certificate for 127.0.0.1, ::1 and localhost signed by it (kubeconfigs
//! carry the CA), kept in a directory so kubeconfigs stay valid across
//! restarts. kubectl sends bearer tokens only over TLS, so clients speak
//! HTTPS; a connection that opens with plain HTTP is served too (health
//! probes), as the same anonymous-or-token user.

use anyhow::{Context, Result};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// The CA and the serving certificate, as PEM.
#[derive(Clone)]
pub struct Identity {
    /// The CA certificate clients trust.
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl std::fmt::Debug for Identity {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").finish_non_exhaustive()
    }
}

impl Identity {
    /// A fresh CA and a serving certificate for the loopback addresses.
    pub fn generate() -> Result<Self> {
        let ca_key = rcgen::KeyPair::generate().context("generating the CA key")?;
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "lab-apiserver-ca");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).context("signing the CA")?;
        let key = rcgen::KeyPair::generate().context("generating the serving key")?;
        let mut leaf = rcgen::CertificateParams::new(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ])?;
        leaf.distinguished_name
            .push(rcgen::DnType::CommonName, "lab-apiserver");
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let cert = leaf
            .signed_by(&key, &issuer)
            .context("signing the serving certificate")?;
        Ok(Self {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The identity kept in `dir` (`ca.crt`, `tls.crt`, `tls.key`), made
    /// when missing.
    pub fn load_or_create(dir: &Path) -> Result<Self> {
        let read = |f: &str| std::fs::read_to_string(dir.join(f));
        if let (Ok(ca_pem), Ok(cert_pem), Ok(key_pem)) =
            (read("ca.crt"), read("tls.crt"), read("tls.key"))
        {
            return Ok(Self {
                ca_pem,
                cert_pem,
                key_pem,
            });
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let id = Self::generate()?;
        std::fs::write(dir.join("ca.crt"), &id.ca_pem)
            .with_context(|| format!("writing {}", dir.join("ca.crt").display()))?;
        std::fs::write(dir.join("tls.crt"), &id.cert_pem)
            .with_context(|| format!("writing {}", dir.join("tls.crt").display()))?;
        crate::write_private(&dir.join("tls.key"), id.key_pem.as_bytes())?;
        Ok(id)
    }

    /// A TLS acceptor serving this identity.
    pub fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor> {
        let certs = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("reading the serving certificate")?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .context("reading the serving key")?;
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("building the TLS configuration")?;
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

/// Serves `app` on `listener`: TLS when a connection starts with a TLS
/// handshake, plain HTTP otherwise.
pub async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    app: axum::Router,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let mut first = [0u8; 1];
            // A TLS record of type handshake starts with 0x16.
            let tls = matches!(stream.peek(&mut first).await, Ok(1) if first[0] == 0x16);
            let service = hyper_util::service::TowerToHyperService::new(app);
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let served = if tls {
                match acceptor.accept(stream).await {
                    Ok(tls) => {
                        builder
                            .serve_connection_with_upgrades(
                                hyper_util::rt::TokioIo::new(tls),
                                service,
                            )
                            .await
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                }
            } else {
                builder
                    .serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(stream), service)
                    .await
            };
            if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
}
