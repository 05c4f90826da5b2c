//! The lab's service proxy: what kube-proxy in nftables mode does on each
//! node, so traffic reaching a node for a Service goes where a real
//! cluster would send it.
//!
//! [`ruleset`] (module `ruleset`, pure) decides: from the node, the Services and the
//! EndpointSlices it writes one nftables table, [`TABLE`], that DNATs
//! ClusterIPs, LoadBalancer ingress IPs and NodePorts (on the node's own
//! addresses) from `port` to the endpoints' `targetPort` (resolved through
//! the slice's ports, so named target ports work), spread at random over
//! the ready endpoints. `externalTrafficPolicy: Cluster` marks external
//! traffic for masquerade, so an endpoint on another node replies through
//! this one; `Local` sends it to this node's endpoints only, keeps the
//! client's address, and drops it when there are none (traffic the node
//! itself originates still reaches every endpoint, as kube-proxy does).
//! A service port without ready endpoints is rejected, and so is TCP or
//! UDP to a service IP on a port no service uses (the lab has the VIPs on
//! `lo`, which would otherwise hand them to whatever listens there).
//! Forwarding is on in the node namespaces (see [`super::netns`]); the
//! table's forward chain lets only the connections it DNATed through.
//!
//! [`Applier`] does: it replaces the whole table in one `nft -f`
//! transaction when the text changed, and deletes it on shutdown.
//! [`Nft`] runs `nft` in the caller's namespace (the node agent runs
//! inside the node's) with a timeout.

mod ruleset;

pub(crate) use ruleset::slices_of;
pub use ruleset::{TABLE, ruleset};

use anyhow::{Context, Result, bail};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long one `nft` or `ip` run may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `nft` (and `ip`) for the [`Applier`]. Injectable so tests need
/// no root.
pub trait NftExecutor: Send {
    /// Makes sure the [`service_routes`] are there (the kernel drops them
    /// with the link when it goes down).
    fn routes(&mut self) -> Result<()>;
    /// Runs `script` with `nft -f -`, all or nothing.
    fn apply(&mut self, script: &str) -> Result<()>;
    /// Deletes [`TABLE`]; a missing table is success.
    fn delete(&mut self) -> Result<()>;
}

/// Runs `program args` with `stdin`, killed after [`COMMAND_TIMEOUT`].
fn run(program: &str, args: &[&str], stdin: &str) -> Result<()> {
    let shown = format!("{program} {}", args.join(" "));
    let handle = duct::cmd(program, args)
        .stdin_bytes(stdin.as_bytes().to_vec())
        .stdout_null()
        .stderr_capture()
        .unchecked()
        .start()
        .with_context(|| format!("starting {shown}"))?;
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    loop {
        if let Some(out) = handle.try_wait()? {
            if out.status.success() {
                return Ok(());
            }
            bail!("{shown}: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        if Instant::now() > deadline {
            let _ = handle.kill();
            bail!("{shown} did not finish within {COMMAND_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The routes that let the node's own connections to a ClusterIP reach
/// the output hook (a lab node has no default route; without one the
/// connect fails before nftables sees it): the service ranges on the
/// interface holding the node's first address of each family.
pub fn service_routes(node_addresses: &[IpAddr], device: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (v6, cidr) in [
        (false, lab_apiserver::SERVICE_CIDR_V4),
        (true, lab_apiserver::SERVICE_CIDR_V6),
    ] {
        if let Some(src) = node_addresses.iter().find(|a| a.is_ipv6() == v6) {
            out.push(
                [
                    if v6 { "-6" } else { "-4" },
                    "route",
                    "replace",
                    cidr,
                    "dev",
                    device,
                    "src",
                    &src.to_string(),
                ]
                .map(str::to_owned)
                .to_vec(),
            );
        }
    }
    out
}

/// [`NftExecutor`] running `nft` and `ip` in this process's network
/// namespace, with the [`service_routes`] on `device`.
pub struct Nft {
    node_addresses: Vec<IpAddr>,
    device: String,
}

impl Nft {
    /// Manages the table here, with the service routes on `device`.
    pub fn new(node_addresses: Vec<IpAddr>, device: impl Into<String>) -> Self {
        Self {
            node_addresses,
            device: device.into(),
        }
    }
}

impl NftExecutor for Nft {
    fn routes(&mut self) -> Result<()> {
        for args in service_routes(&self.node_addresses, &self.device) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run("ip", &args, "")?;
        }
        Ok(())
    }

    fn apply(&mut self, script: &str) -> Result<()> {
        run("nft", &["-f", "-"], script)
    }

    fn delete(&mut self) -> Result<()> {
        run(
            "nft",
            &["-f", "-"],
            &format!("table inet {TABLE}\ndelete table inet {TABLE}\n"),
        )
    }
}

/// Keeps the node's table equal to the latest [`ruleset`].
pub struct Applier {
    exec: Box<dyn NftExecutor>,
    applied: Option<String>,
}

impl Applier {
    /// Applies through `exec`, starting from nothing applied.
    pub fn new(exec: Box<dyn NftExecutor>) -> Self {
        Self {
            exec,
            applied: None,
        }
    }

    /// Applies `script` unless it is what was last applied, and puts the
    /// service routes back if they went. A failure is logged and retried
    /// on the next call.
    pub fn reconcile(&mut self, script: &str) {
        if let Err(e) = self.exec.routes() {
            // Expected while the node's link is down.
            tracing::debug!(error = %e, "service routes not in place");
        }
        if self.applied.as_deref() == Some(script) {
            return;
        }
        match self.exec.apply(script) {
            Ok(()) => {
                tracing::info!(table = TABLE, "service proxy rules applied");
                self.applied = Some(script.to_owned());
            }
            Err(e) => tracing::warn!(error = %e, "applying the service proxy rules failed"),
        }
    }

    /// Deletes the table (on shutdown).
    pub fn clear(&mut self) {
        match self.exec.delete() {
            Ok(()) => self.applied = None,
            Err(e) => tracing::warn!(error = %e, "deleting the service proxy table failed"),
        }
    }
}

/// Deletes [`TABLE`] in each of `namespaces` that has it (for `down`,
/// after a crashed agent); what was removed.
pub fn delete_tables(namespaces: &[String]) -> Vec<String> {
    let mut removed = Vec::new();
    for ns in namespaces {
        let listed = run(
            "ip",
            &["netns", "exec", ns, "nft", "list", "table", "inet", TABLE],
            "",
        );
        if listed.is_ok()
            && run(
                "ip",
                &["netns", "exec", ns, "nft", "delete", "table", "inet", TABLE],
                "",
            )
            .is_ok()
        {
            removed.push(format!("nft table inet {TABLE} in {ns}"));
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn node_ips() -> Vec<IpAddr> {
        vec![
            "172.30.0.10".parse().expect("ip"),
            "fc00::10".parse().expect("ip"),
        ]
    }

    #[test]
    fn service_routes_per_family() {
        assert_eq!(
            service_routes(&node_ips(), "eth0"),
            [
                vec![
                    "-4",
                    "route",
                    "replace",
                    "10.96.0.0/16",
                    "dev",
                    "eth0",
                    "src",
                    "172.30.0.10"
                ],
                vec![
                    "-6",
                    "route",
                    "replace",
                    "fd00:10:96::/112",
                    "dev",
                    "eth0",
                    "src",
                    "fc00::10"
                ],
            ]
        );
    }

    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl NftExecutor for Recorder {
        fn routes(&mut self) -> Result<()> {
            self.0.lock().expect("lock").push("routes".to_owned());
            Ok(())
        }
        fn apply(&mut self, script: &str) -> Result<()> {
            self.0.lock().expect("lock").push(script.to_owned());
            Ok(())
        }
        fn delete(&mut self) -> Result<()> {
            self.0.lock().expect("lock").push("delete".to_owned());
            Ok(())
        }
    }

    #[test]
    fn applies_only_changes_and_deletes_on_clear() {
        let rec = Recorder::default();
        let mut applier = Applier::new(Box::new(rec.clone()));
        applier.reconcile("a");
        applier.reconcile("a");
        applier.reconcile("b");
        applier.clear();
        applier.reconcile("b");
        assert_eq!(
            *rec.0.lock().expect("lock"),
            [
                "routes", "a", "routes", "routes", "b", "delete", "routes", "b"
            ]
        );
    }
}
