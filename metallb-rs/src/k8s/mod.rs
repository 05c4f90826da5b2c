//! Everything that talks to the Kubernetes API on behalf of the deciding
//! modules: the client, API calls with a timeout, the work queue, leader
//! election, events, watches.

pub mod admission_review;
pub mod call;
pub mod config_state;
pub mod conversion_review;
pub mod events;
pub mod index;
pub mod leader;
pub mod memberlist;
pub mod metrics_auth;
pub mod observed;
pub mod queue;
pub mod watch;
pub mod webhook;
pub mod webhook_certs;

use anyhow::Context;

/// A client from `KUBECONFIG` / `~/.kube/config`, or the in-cluster
/// service account.
pub async fn client() -> anyhow::Result<kube::Client> {
    kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API (set KUBECONFIG, or run in a pod)")
}

/// A client for a parsed kubeconfig, its current context: the one way the
/// tools around the components (dev environments, e2e suites, tests) make
/// a client for a cluster they were handed.
pub async fn client_from(kubeconfig: kube::config::Kubeconfig) -> anyhow::Result<kube::Client> {
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .context("loading the kubeconfig")?;
    kube::Client::try_from(config).context("building a kube client")
}

/// A client for the kubeconfig file at `path` (see [`client_from`]).
pub async fn client_for(path: &std::path::Path) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    client_from(kubeconfig)
        .await
        .with_context(|| format!("a client for {}", path.display()))
}

/// This process's identity for leases and events: the pod name when the
/// downward API gives it, else the host name plus the process id.
pub fn identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME")
        && !pod.is_empty()
    {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}-{}", std::process::id())
}
