//! Starts the validating webhook server and its certificate loop beside
//! the controller's work; readiness holds until both are in place.

use crate::k8s::webhook::{self, Options};
use crate::k8s::webhook_certs;
use crate::metrics::Health;
use crate::tls::Resolver;
use crate::tls::policy::{TlsPolicy, server_config};
use anyhow::Context as _;
use std::sync::Arc;
use tokio_util::task::AbortOnDropHandle;

/// The running server and certificate loop, stopped when dropped.
pub struct Running {
    server: AbortOnDropHandle<anyhow::Result<()>>,
    certs: AbortOnDropHandle<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Running {
    /// Stops taking connections and lets the reviews in flight finish
    /// (up to `tls::DRAIN`): a replica shutting down in a rolling update
    /// does not cut a review the API server already sent it (with
    /// failurePolicy Fail, the user's write would be refused).
    pub async fn drain(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let bound = crate::tls::DRAIN + std::time::Duration::from_millis(500);
        let _ = tokio::time::timeout(bound, &mut self.server).await;
    }

    /// Resolves when the server or the certificate loop stopped, which
    /// neither does on its own: the replica then exits (and is restarted)
    /// rather than stay Ready while nothing reviews the writes its
    /// configuration's failurePolicy Fail makes wait for it.
    pub async fn stopped(&mut self) -> anyhow::Error {
        tokio::select! {
            r = &mut self.server => match r {
                Ok(Ok(())) => anyhow::anyhow!("the webhook server stopped"),
                Ok(Err(e)) => e.context("the webhook server stopped"),
                Err(e) => anyhow::anyhow!("the webhook server failed: {e}"),
            },
            r = &mut self.certs => match r {
                Ok(()) => anyhow::anyhow!("the webhook certificate loop stopped"),
                Err(e) => anyhow::anyhow!("the webhook certificate loop failed: {e}"),
            },
        }
    }
}

/// Binds `opts.addr` (an error when taken: the replica would never be
/// ready), then serves and keeps the certificate on spawned tasks.
pub async fn start(
    client: &kube::Client,
    opts: &Options,
    tls: &TlsPolicy,
    health: &Arc<Health>,
) -> anyhow::Result<Running> {
    health.hold(
        webhook_certs::GATE,
        format!(
            "no serving certificate yet, or its CA not yet in validatingwebhookconfiguration {}",
            opts.configuration
        ),
    );
    let listener = tokio::net::TcpListener::bind(opts.addr)
        .await
        .with_context(|| {
            format!(
                "binding {} for the webhooks (choose another with --webhook-bind-address, or --webhook-mode disabled)",
                opts.addr
            )
        })?;
    tracing::info!(addr = %opts.addr, "serving validating webhooks");
    let resolver = Arc::new(Resolver::default());
    let tls = server_config(tls, resolver.clone())?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = {
        let (client, ns) = (client.clone(), opts.namespace.clone());
        let stopped = async move {
            let _ = stopped.await;
        };
        tokio::spawn(async move { webhook::serve(listener, tls, client, ns, stopped).await })
    };
    let certs = tokio::spawn(webhook_certs::run(
        client.clone(),
        opts.clone(),
        resolver,
        health.clone(),
    ));
    Ok(Running {
        server: AbortOnDropHandle::new(server),
        certs: AbortOnDropHandle::new(certs),
        stop: Some(stop),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that returns, or a certificate loop that panics, ends
    /// the wait with the reason; while both run, nothing resolves.
    #[tokio::test]
    async fn a_stopped_server_or_certificate_loop_is_fatal() {
        let mut failed = Running {
            server: AbortOnDropHandle::new(tokio::spawn(async {
                Err(anyhow::anyhow!("accept: too many open files"))
            })),
            certs: AbortOnDropHandle::new(tokio::spawn(std::future::pending())),
            stop: None,
        };
        let e = format!("{:#}", failed.stopped().await);
        assert_eq!(e, "the webhook server stopped: accept: too many open files");
        let mut panicked = Running {
            server: AbortOnDropHandle::new(tokio::spawn(std::future::pending())),
            certs: AbortOnDropHandle::new(tokio::spawn(async { panic!("bug") })),
            stop: None,
        };
        let e = panicked.stopped().await.to_string();
        assert!(e.starts_with("the webhook certificate loop failed"), "{e}");
        let mut running = Running {
            server: AbortOnDropHandle::new(tokio::spawn(std::future::pending())),
            certs: AbortOnDropHandle::new(tokio::spawn(std::future::pending())),
            stop: None,
        };
        let wait = tokio::time::timeout(std::time::Duration::from_millis(50), running.stopped());
        assert!(wait.await.is_err(), "both still run");
    }
}
