//! Where the parts of a lab are found: its loopback ports (each lab its
//! own, so two labs can coexist), the dev-env's addresses, and the files
//! in its directory the components share. Pure.

use std::path::{Path, PathBuf};

/// The API server port of lab `name`: 6443 for the default lab, another
/// fixed port per name otherwise, so two labs (a developer's and a test
/// run's) can coexist.
pub fn api_port(name: &str) -> u16 {
    if name == "lab" {
        return 6443;
    }
    let hash = name.bytes().fold(2166136261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16777619)
    });
    6444 + (hash % 1000) as u16
}

/// The loopback port of the lab controller's metrics and probes: the
/// controller runs in the root namespace, so each lab needs its own (API
/// ports are 6443-7443, so these are 26443-27443).
pub fn controller_metrics_port(api_port: u16) -> u16 {
    api_port + 20000
}

/// The loopback port of the standby controller replica's metrics and
/// probes (36443-37443), which [`Cluster::controller_takeover`] starts.
pub(super) fn standby_metrics_port(api_port: u16) -> u16 {
    api_port + 30000
}

/// The loopback port a controller replica serves its validating webhooks
/// on, by its metrics port: 61000-62000 for the controller, 62001-63001
/// for the standby (above Linux's ephemeral ports, so an outgoing
/// connection never holds one). The lab API server reaches the webhook
/// Service at both, the first that accepts.
pub(super) fn webhook_port(metrics_port: u16, api_port: u16) -> u16 {
    let offset = api_port.saturating_sub(6443);
    if metrics_port == standby_metrics_port(api_port) {
        62001 + offset
    } else {
        61000 + offset
    }
}

/// The loopback port of a controller's HTTPS metrics, beside the plain
/// ones on `plain_port` (28443-29443 and 38443-39443: clear of both
/// ranges above).
pub fn secure_metrics_port(plain_port: u16) -> u16 {
    plain_port + 2000
}

/// The speaker's plain metrics inside its node's namespace, where the
/// suites and benchmarks scrape them (`curl http://127.0.0.1:9120`); its
/// HTTPS metrics listen on the node's address, the same port.
pub const SPEAKER_PLAIN_METRICS: &str = "127.0.0.1:9120";

/// The IPv4 addresses of the layer2 dev-env's pool `dev-env-l2`: on the
/// nodes' subnet, apart from the nodes (from .10), the e2e pools
/// ([`Cluster::pool_ranges`](crate::cluster::Cluster::pool_ranges) of
/// `LabCluster`, .100-.119) and the external host (.2).
pub const DEV_ENV_L2_V4: &str = "172.30.0.200-172.30.0.215";
/// The IPv6 addresses of `dev-env-l2` (the same host numbers).
pub const DEV_ENV_L2_V6: &str = "fc00:f853:ccd:e793::200-fc00:f853:ccd:e793::20f";

/// Where the lab's container logs live (`kubectl logs`).
pub(super) fn pod_log_dir(lab: &Path) -> PathBuf {
    lab.join("pods")
}

/// The file `node`'s forwarder takes its API latency from
/// ([`crate::lab::latency::follow`]).
pub(super) fn latency_file(dir: &Path, node: &str) -> PathBuf {
    dir.join(format!("forward-{node}.latency"))
}
