//! A small kube-apiserver: plain HTTP on a loopback address, serving the
//! part of the Kubernetes API that metallb-rs, kubectl and the e2e suites
//! use, with real semantics ([`DEVIATIONS`] lists what differs from
//! kube-apiserver). The lab (`devenv`) runs it as the `lab-apiserver`
//! process; tests start it in process with [`ApiServer::start`].
//!
//! Knows nothing about MetalLB: custom resources come from the CRDs that
//! clients apply.

mod error;
mod http;
mod patch;
mod registry;
mod schema;
mod selector;
mod state;
mod store;
mod table;

use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What the lab API server does differently from kube-apiserver.
pub const DEVIATIONS: &str = "\
- plain HTTP, no authentication or authorization; every client is admin
- JSON only: protobuf/CBOR bodies get 415, so `kubectl create <kind>` generators fail; use `kubectl apply -f`
- Table responses (`kubectl get`) have kube-apiserver's columns for nodes, services, pods, endpointslices, leases, events, namespaces, configmaps, secrets and CRDs' additionalPrinterColumns; other built-in kinds get the default NAME and CREATED AT; pod STATUS is simplified (container reasons, phase, Terminating)
- /openapi/v3 lists paths only (so kubectl validates on the server); no component schemas, no /openapi/v2
- server-side apply is refused with 415; strategic merge patch merges lists by the merge keys of the kinds served here
- list ignores limit/continue and returns everything in one page
- CRD versions use conversion None whatever the CRD says (only apiVersion is rewritten)
- CEL rules (x-kubernetes-validations) are not evaluated; openAPIV3Schema is, with defaults and pruning
- namespace deletion is immediate (no Terminating phase); ownerReference garbage collection is background-only
- state lives in memory: it survives restarts of every other lab process, not of the API server itself
";

/// A running API server.
pub struct ApiServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl ApiServer {
    /// Starts serving on `listener` (e.g. bound to 127.0.0.1:0).
    pub async fn start(listener: tokio::net::TcpListener) -> Result<Self> {
        Self::start_with_history(listener, 10_000).await
    }

    /// Like [`ApiServer::start`], keeping only the last `history` changes
    /// for watches to resume from (older resourceVersions get 410 Gone).
    pub async fn start_with_history(
        listener: tokio::net::TcpListener,
        history: usize,
    ) -> Result<Self> {
        let addr = listener.local_addr()?;
        let mut state = state::State::with_history(history);
        state.bootstrap();
        let shared: http::Shared = Arc::new(Mutex::new(state));
        let app = axum::Router::new()
            .fallback(http::handle)
            .with_state(shared);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "lab API server stopped");
            }
        });
        Ok(Self { addr, task })
    }

    /// Starts on `addr`.
    pub async fn bind(addr: SocketAddr) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding the lab API server to {addr}"))?;
        Self::start(listener).await
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (YAML) that reaches this server.
    pub fn kubeconfig(&self, cluster: &str) -> String {
        kubeconfig(cluster, &format!("http://{}", self.addr))
    }

    /// Writes [`ApiServer::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, cluster: &str, path: &Path) -> Result<()> {
        std::fs::write(path, self.kubeconfig(cluster))
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Stops serving.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A kubeconfig for `server` with one context named `cluster`.
pub fn kubeconfig(cluster: &str, server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster:\n    server: {server}\ncontexts:\n- name: {cluster}\n  context:\n    cluster: {cluster}\n    user: admin\n    namespace: default\nusers:\n- name: admin\n  user: {{}}\ncurrent-context: {cluster}\n"
    )
}
