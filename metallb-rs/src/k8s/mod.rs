//! Everything that talks to the Kubernetes API on behalf of the deciding
//! modules: the client, leader election, events. Only this module, the
//! controller's and the speaker's runners touch `kube::Api`.

pub mod config_state;
pub mod events;
pub mod leader;
pub mod memberlist;
pub mod watch;

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

/// Whether an API error is worth retrying (server trouble, conflicts,
/// throttling, network) rather than a permanent rejection.
pub fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 409 || s.code == 429 || s.code >= 500,
        _ => true,
    }
}
