//! The listeners: `/metrics` over HTTPS for whoever the API server says
//! may read it (`--metrics-bind-address`, as upstream), plain `/metrics`
//! on loopback for local tools (`--insecure-metrics-bind-address`), and
//! the probes (`/healthz`, `/readyz`) over plain HTTP where the kubelet
//! looks. Which address serves what is decided by [`Serving::listeners`]
//! (checked in `main` before anything starts); who may read is
//! `access`'s decision, the reviews made through a [`Reviewer`], at most
//! [`REVIEWS_IN_FLIGHT`] at once.

use super::access::{self, AccessKey, Answer, Authn, Authz, Caches, ReviewFailed, User};
use super::{Health, render};
use crate::tls::policy::TlsPolicy;
use futures::future::BoxFuture;
use prometheus::Registry;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::task::AbortOnDropHandle;

/// Reviews made at once at most; more scrapes wait.
pub const REVIEWS_IN_FLIGHT: usize = 4;
/// A scrape that waits longer than this for a review slot gets a 503.
pub const REVIEW_WAIT: Duration = Duration::from_secs(1);

/// Where and how the metrics and probes are served.
#[derive(Debug, Clone, Default)]
pub struct Serving {
    /// `/metrics` over HTTPS, with authentication and authorization.
    pub secure: Option<SocketAddr>,
    /// `/metrics` over plain HTTP, unauthenticated: loopback only.
    pub insecure: Option<SocketAddr>,
    /// `/healthz` and `/readyz`, plain HTTP.
    pub health: Option<SocketAddr>,
    /// What the HTTPS listener offers.
    pub tls: TlsPolicy,
    /// Where `tls.crt` and `tls.key` are (none: self-signed in memory).
    pub cert_dir: Option<PathBuf>,
}

/// Addresses that cannot be served as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// Plain, unauthenticated metrics off loopback.
    #[error(
        "--insecure-metrics-bind-address {0}: unauthenticated plain-HTTP metrics are served on loopback only (use 127.0.0.1:PORT or [::1]:PORT, or scrape --metrics-bind-address over HTTPS with a token)"
    )]
    InsecureNotLoopback(SocketAddr),
    /// HTTPS metrics and plain probes on one address.
    #[error(
        "--metrics-bind-address and --health-bind-address are both {0}: metrics are served over HTTPS and the probes over plain HTTP, so they need two addresses (give one another port)"
    )]
    MetricsOnHealth(SocketAddr),
    /// HTTPS and plain metrics on one address.
    #[error(
        "--metrics-bind-address and --insecure-metrics-bind-address are both {0}: one is HTTPS, the other plain HTTP (give one another port)"
    )]
    SecureOnInsecure(SocketAddr),
}

/// What one listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// HTTPS `/metrics`, reviewed.
    Secure,
    /// Plain HTTP: `/metrics` and/or the probes.
    Plain {
        /// Unauthenticated `/metrics`.
        metrics: bool,
        /// `/healthz`, `/readyz`.
        probes: bool,
    },
}

impl Serving {
    /// The listeners to open, or why these addresses cannot be served.
    /// Port 0 (any free port) never equals another address.
    pub fn listeners(&self) -> Result<Vec<(SocketAddr, Listener)>, AddressError> {
        let same = |a: Option<SocketAddr>, b: Option<SocketAddr>| match (a, b) {
            (Some(a), Some(b)) if a == b && a.port() != 0 => Some(a),
            _ => None,
        };
        if let Some(a) = self.insecure.filter(|a| !a.ip().is_loopback()) {
            return Err(AddressError::InsecureNotLoopback(a));
        }
        if let Some(a) = same(self.secure, self.health) {
            return Err(AddressError::MetricsOnHealth(a));
        }
        if let Some(a) = same(self.secure, self.insecure) {
            return Err(AddressError::SecureOnInsecure(a));
        }
        let mut out: Vec<(SocketAddr, Listener)> = self
            .secure
            .map(|a| (a, Listener::Secure))
            .into_iter()
            .collect();
        match (self.insecure, self.health) {
            (Some(m), Some(h)) if same(Some(m), Some(h)).is_some() => out.push((
                m,
                Listener::Plain {
                    metrics: true,
                    probes: true,
                },
            )),
            (m, h) => {
                out.extend(m.map(|a| {
                    (
                        a,
                        Listener::Plain {
                            metrics: true,
                            probes: false,
                        },
                    )
                }));
                out.extend(h.map(|a| {
                    (
                        a,
                        Listener::Plain {
                            metrics: false,
                            probes: true,
                        },
                    )
                }));
            }
        }
        Ok(out)
    }
}

/// Makes the API server's reviews (`k8s::metrics_auth` in production).
pub trait Reviewer: Send + Sync {
    /// A TokenReview of `token`.
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Authn, ReviewFailed>>;
    /// A SubjectAccessReview: may `user` `verb` the non-resource `path`.
    fn authorize<'a>(
        &'a self,
        user: &'a User,
        verb: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Authz, ReviewFailed>>;
}

/// The reviews of the HTTPS listener: cached answers, bounded concurrency.
struct Guard {
    reviewer: Arc<dyn Reviewer>,
    caches: Mutex<Caches>,
    slots: tokio::sync::Semaphore,
}

fn busy() -> Answer {
    Answer::Refuse {
        status: 503,
        body: "Too many authentication and authorization reviews in flight, retry".into(),
    }
}

impl Guard {
    /// Waits for a review slot, at most [`REVIEW_WAIT`].
    async fn slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, Answer> {
        match tokio::time::timeout(REVIEW_WAIT, self.slots.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(busy()),
        }
    }

    async fn check(&self, authorization: Option<&[u8]>, method: &str, path: &str) -> Answer {
        match self.reviewed(authorization, method, path).await {
            Ok(a) | Err(a) => a,
        }
    }

    async fn reviewed(
        &self,
        authorization: Option<&[u8]>,
        method: &str,
        path: &str,
    ) -> Result<Answer, Answer> {
        let token = access::token(authorization)?;
        let cached = self
            .caches
            .lock()
            .ok()
            .and_then(|c| c.tokens.get(&access::token_key(token), Instant::now()));
        let authn = match cached {
            Some(a) => Ok(a),
            None => {
                let _slot = self.slot().await?;
                let review = self.reviewer.authenticate(token).await;
                if let Err(ReviewFailed(why)) = &review {
                    tracing::warn!(error = %why, "metrics: token review failed");
                }
                if let Ok(mut c) = self.caches.lock() {
                    c.put_token(token, &review, Instant::now());
                }
                review
            }
        };
        let user = access::authenticated(authn)?;
        let key = AccessKey::new(&user, method, path);
        let cached = self
            .caches
            .lock()
            .ok()
            .and_then(|c| c.access.get(&key, Instant::now()));
        let authz = match cached {
            Some(a) => Ok(a),
            None => {
                let _slot = self.slot().await?;
                let review = self.reviewer.authorize(&user, key.verb(), path).await;
                if let Err(ReviewFailed(why)) = &review {
                    tracing::warn!(user = %user.name, error = %why, "metrics: access review failed");
                }
                if let Ok(mut c) = self.caches.lock() {
                    c.put_access(key, &review, Instant::now());
                }
                review
            }
        };
        Ok(access::authorized(&user, authz))
    }
}

fn metrics_route(registry: Arc<Registry>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move { render(&registry) }
        }),
    )
}

fn secure_route(registry: Arc<Registry>, guard: Arc<Guard>) -> axum::Router {
    use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
    use axum::response::IntoResponse;
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move |method: Method, uri: Uri, headers: HeaderMap| {
            let (registry, guard) = (registry.clone(), guard.clone());
            async move {
                let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
                match guard
                    .check(authorization, method.as_str(), uri.path())
                    .await
                {
                    Answer::Serve => render(&registry).into_response(),
                    Answer::Refuse { status, body } => (
                        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                        body,
                    )
                        .into_response(),
                }
            }
        }),
    )
}

fn probes_route(health: Arc<Health>) -> axum::Router {
    use axum::http::StatusCode;
    use axum::routing::get;
    let live = health.clone();
    axum::Router::new()
        .route(
            "/healthz",
            get(move || {
                let live = live.clone();
                async move {
                    match live.stalled() {
                        None => (StatusCode::OK, "ok".to_owned()),
                        Some(d) => (
                            StatusCode::SERVICE_UNAVAILABLE,
                            format!("loop stalled: no progress for {} s", d.as_secs()),
                        ),
                    }
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let health = health.clone();
                async move {
                    match health.not_ready() {
                        None => (StatusCode::OK, "ready".to_owned()),
                        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}")),
                    }
                }
            }),
        )
}

/// Serves what `serving` asks, the HTTPS metrics reviewed through
/// `reviewer`; returns only on a server error.
pub async fn serve(
    serving: Serving,
    registry: Registry,
    health: Arc<Health>,
    reviewer: Arc<dyn Reviewer>,
) -> anyhow::Result<()> {
    let listeners = serving.listeners()?;
    let registry = Arc::new(registry);
    // Stopped with this future: a component that returns frees its ports.
    let mut tasks: Vec<AbortOnDropHandle<anyhow::Result<()>>> = Vec::new();
    for (addr, listener) in listeners {
        let socket = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("binding {addr} for metrics/health: {e} (choose another address with --metrics-bind-address / --insecure-metrics-bind-address / --health-bind-address)"))?;
        match listener {
            Listener::Secure => {
                let resolver = Arc::new(crate::tls::Resolver::default());
                resolver.set(crate::tls::metrics_certificate(
                    serving.cert_dir.as_deref(),
                )?);
                if let Some(dir) = serving.cert_dir.clone() {
                    tasks.push(AbortOnDropHandle::new(tokio::spawn(
                        crate::tls::reload_metrics_certificate(dir, resolver.clone()),
                    )));
                }
                let tls = crate::tls::policy::server_config(&serving.tls, resolver)?;
                let guard = Arc::new(Guard {
                    reviewer: reviewer.clone(),
                    caches: Mutex::new(Caches::default()),
                    slots: tokio::sync::Semaphore::new(REVIEWS_IN_FLIGHT),
                });
                let app = secure_route(registry.clone(), guard);
                tracing::info!(%addr, "serving metrics over HTTPS (authenticated)");
                tasks.push(AbortOnDropHandle::new(tokio::spawn(async move {
                    crate::tls::serve(socket, tls, app, "metrics server").await;
                    Ok(())
                })));
            }
            Listener::Plain { metrics, probes } => {
                let mut app = axum::Router::new();
                if metrics {
                    app = app.merge(metrics_route(registry.clone()));
                }
                if probes {
                    app = app.merge(probes_route(health.clone()));
                }
                tracing::info!(%addr, metrics, probes, "serving plain HTTP");
                tasks.push(AbortOnDropHandle::new(tokio::spawn(async move {
                    Ok(axum::serve(socket, app).await?)
                })));
            }
        }
    }
    for t in tasks {
        t.await??;
    }
    // Nothing to serve (all disabled): never end, like a server.
    std::future::pending::<()>().await;
    Ok(())
}

#[cfg(test)]
mod tests;
