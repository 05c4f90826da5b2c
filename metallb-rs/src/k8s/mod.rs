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
