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
    _server: AbortOnDropHandle<()>,
    _certs: AbortOnDropHandle<()>,
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
    let server = {
        let (client, ns) = (client.clone(), opts.namespace.clone());
        tokio::spawn(async move {
            if let Err(e) = webhook::serve(listener, tls, client, ns).await {
                tracing::error!(error = %e, "webhook server stopped");
            }
        })
    };
    let certs = tokio::spawn(webhook_certs::run(
        client.clone(),
        opts.clone(),
        resolver,
        health.clone(),
    ));
    Ok(Running {
        _server: AbortOnDropHandle::new(server),
        _certs: AbortOnDropHandle::new(certs),
    })
}
