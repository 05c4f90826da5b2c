//! What the election specs (preferred nodes, node and service selectors)
//! share: node labels that a guard takes off again, and who announces a
//! service, read as upstream reads it (the one ServiceL2Status's node,
//! upstream's `status.L2ForService`) and as the external host sees it
//! (the prober: that node's MAC alone answers).

use super::set_label;
use super::watch::{HOLD, Watch};
use crate::metallb;
use crate::{Ctx, Spec};
use anyhow::{Context, Result, bail};
use devenv::wait::{eventually, throughout};
use std::net::IpAddr;
use std::time::Duration;

/// How long upstream waits for an election to settle (`Eventually(...,
/// 2*time.Minute, ...)`).
pub(super) const ELECTION_WAIT: Duration = Duration::from_secs(120);
/// How long upstream's `Consistently` holds in these files.
pub(super) const CONSISTENTLY: Duration = Duration::from_secs(5);

/// A spec tagged `IPV4`: upstream's names in these files carry no
/// family, and their single-stack services take the cluster's first,
/// IPv4 here.
pub(super) fn v4(describe: &'static str, it: &'static str, run: fn(&Ctx) -> Result<()>) -> Spec {
    Spec::new(describe, it, &["IPV4"], run)
}

/// Labels the spec put on nodes: every one still set is taken off when
/// the guard drops (pass, fail or panic). Made with the keys the spec
/// uses, it first takes them off every node, in case an interrupted run
/// left them behind.
pub(in crate::suites) struct NodeLabels<'a> {
    ctx: &'a Ctx,
    set: Vec<(String, String)>,
}

impl<'a> NodeLabels<'a> {
    pub(in crate::suites) fn new(ctx: &'a Ctx, keys: &[&str]) -> Result<Self> {
        for node in super::nodes(ctx) {
            for key in keys {
                set_label(ctx, &node, key, None)
                    .with_context(|| format!("clearing label {key} on {node}"))?;
            }
        }
        Ok(Self {
            ctx,
            set: Vec::new(),
        })
    }

    /// Sets `key=value` on `node`.
    pub(in crate::suites) fn add(&mut self, node: &str, key: &str, value: &str) -> Result<()> {
        // Recorded first: a patch that fails after reaching the API
        // server is still undone.
        if !self.set.iter().any(|(n, k)| n == node && k == key) {
            self.set.push((node.to_owned(), key.to_owned()));
        }
        set_label(self.ctx, node, key, Some(value))
            .with_context(|| format!("labelling {node} {key}={value}"))
    }

    /// Takes `key` off `node`.
    pub(in crate::suites) fn remove(&mut self, node: &str, key: &str) -> Result<()> {
        set_label(self.ctx, node, key, None)
            .with_context(|| format!("removing label {key} from {node}"))?;
        self.set.retain(|(n, k)| !(n == node && k == key));
        Ok(())
    }
}

impl Drop for NodeLabels<'_> {
    fn drop(&mut self) {
        for (node, key) in self.set.drain(..) {
            if let Err(e) = set_label(self.ctx, &node, &key, None) {
                eprintln!("e2e: could not remove label {key} from node {node}: {e:#}");
            }
        }
    }
}

/// Upstream's `L2ForService`: the node of the one ServiceL2Status of
/// `svc`, or why there is none (no status, several, no node yet).
pub(super) fn status_node(ctx: &Ctx, svc: &str) -> Result<std::result::Result<String, String>> {
    let list = metallb::l2_statuses(ctx, svc)?;
    Ok(match list.as_slice() {
        [] => Err(format!("no ServiceL2Status for {svc}")),
        [one] => one
            .status
            .as_ref()
            .and_then(|s| s.node.clone())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("the ServiceL2Status of {svc} names no node")),
        many => Err(format!("{} ServiceL2Status objects for {svc}", many.len())),
    })
}

/// Upstream's `waitForNaturalWinner`: the node announcing `svc` once its
/// status names one, which the external host sees alone answering.
pub(super) fn winner(ctx: &Ctx, svc: &str, ips: &[IpAddr]) -> Result<String> {
    announced(ctx, svc, ips, ELECTION_WAIT)
}

/// `Eventually(announcingNode(svc)).Should(Equal(node))`, and the
/// external host sees `node` alone answering.
pub(super) fn announced_by(ctx: &Ctx, svc: &str, ips: &[IpAddr], node: &str) -> Result<()> {
    let mut last = String::new();
    let waited = eventually(
        ELECTION_WAIT,
        &format!("{svc}'s status naming {node}"),
        || {
            last = match status_node(ctx, svc)? {
                Ok(n) if n == node => return Ok(Some(())),
                Ok(n) => format!("it names {n}"),
                Err(why) => why,
            };
            Ok(None)
        },
    );
    waited.with_context(|| format!("last: {last}"))?;
    Watch::new(ctx, ips, "eth0")?
        .wait_only(node)
        .with_context(|| format!("{svc} should be answered by {node} alone"))
}

/// `Consistently(announcingNode(svc)).Should(Equal(node))` over
/// [`CONSISTENTLY`], then a prober window in which `node` alone answers.
pub(super) fn stays_on(ctx: &Ctx, svc: &str, ips: &[IpAddr], node: &str) -> Result<()> {
    throughout(CONSISTENTLY, &format!("{svc} announced by {node}"), || {
        Ok(match status_node(ctx, svc)? {
            Ok(n) if n == node => None,
            Ok(n) => Some(format!("the status names {n}")),
            Err(why) => Some(why),
        })
    })?;
    let watch = Watch::new(ctx, ips, "eth0")?;
    let mac = watch.mac_of(node)?;
    for w in watch.windows(HOLD)? {
        w.expect_only(mac, &|m| watch.name(m))
            .with_context(|| format!("{svc} should stay with {node}"))?;
    }
    Ok(())
}

/// Waits until `svc` has a ServiceL2Status (upstream's
/// `Eventually(L2ForService).ShouldNot(HaveOccurred())`) and one node
/// alone answers for it; returns that node.
pub(super) fn announced(ctx: &Ctx, svc: &str, ips: &[IpAddr], wait: Duration) -> Result<String> {
    let node = eventually(wait, &format!("{svc} announced"), || {
        Ok(status_node(ctx, svc)?.ok())
    })?;
    Watch::new(ctx, ips, "eth0")?
        .wait_only(&node)
        .with_context(|| format!("{svc}'s status names {node}"))?;
    Ok(node)
}

/// Fails unless `svc` has no ServiceL2Status
/// (`pkgerr.IsNotFound(L2ForService)`) over `during`, and nobody
/// answers for it over a prober window.
pub(super) fn stays_unannounced(
    ctx: &Ctx,
    svc: &str,
    ips: &[IpAddr],
    during: Duration,
) -> Result<()> {
    throughout(during, &format!("{svc} not announced"), || {
        let list = metallb::l2_statuses(ctx, svc)?;
        Ok((!list.is_empty()).then(|| {
            let nodes: Vec<_> = list
                .iter()
                .filter_map(|s| s.status.as_ref()?.node.clone())
                .collect();
            format!("{} ServiceL2Status objects, naming {nodes:?}", list.len())
        }))
    })?;
    Watch::new(ctx, ips, "eth0")?
        .expect_silent()
        .with_context(|| format!("{svc} should not be announced"))
}

/// Waits until `svc` has no ServiceL2Status and nobody answers for it.
pub(super) fn withdrawn(ctx: &Ctx, svc: &str, ips: &[IpAddr], wait: Duration) -> Result<()> {
    eventually(wait, &format!("{svc} no longer announced"), || {
        Ok(metallb::l2_statuses(ctx, svc)?.is_empty().then_some(()))
    })?;
    let watch = Watch::new(ctx, ips, "eth0")?;
    eventually(wait, &format!("nobody answering for {svc}"), || {
        Ok(watch.expect_silent().ok())
    })
}

/// The first of the cluster's nodes that is not in `exclude`
/// (upstream's `nonNaturalNode`).
pub(super) fn other_node(ctx: &Ctx, exclude: &[&str]) -> Result<String> {
    match super::nodes(ctx)
        .into_iter()
        .find(|n| !exclude.contains(&n.as_str()))
    {
        Some(n) => Ok(n),
        None => bail!("no node besides {exclude:?}"),
    }
}

/// Skips unless the cluster has `n` nodes (upstream's `ginkgo.Skip`).
pub(super) fn need_nodes(ctx: &Ctx, n: usize) -> Result<Vec<String>> {
    let all = super::nodes(ctx);
    if all.len() < n {
        return Err(crate::skip(format!(
            "need at least {n} nodes, the cluster has {}",
            all.len()
        )));
    }
    Ok(all)
}
