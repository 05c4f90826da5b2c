//! Who answers for a service's addresses on one of the nodes' networks,
//! in node names: the prober's windows ([`crate::prober`]) read against
//! the nodes' MACs. What the L2 specs claim ("from X", "only", "not from
//! X", "and back") is checked here, always the same way: wait until one
//! node alone answers steadily, then hold a window in which that node's
//! MAC and no other answers every address.

use crate::Ctx;
use crate::external::node_mac;
use crate::prober::{Prober, Window};
use anyhow::{Context, Result, bail};
use metallb_rs::net::ethernet::Mac;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Short windows while waiting for an announcement to settle.
const SETTLE: Duration = Duration::from_secs(1);
/// The window that proves a claim once settled.
pub const HOLD: Duration = Duration::from_secs(3);
/// Longest wait for an announcement to settle.
const WAIT: Duration = Duration::from_secs(60);

/// Probers for every address of a service on one network, and the
/// nodes' MACs there.
pub struct Watch {
    iface: String,
    probers: Vec<Prober>,
    nodes: BTreeMap<Mac, String>,
}

impl Watch {
    /// Watches `ips` on the nodes' network `iface` (`eth0`, `eth1`) from
    /// the external host.
    pub fn new(ctx: &Ctx, ips: &[IpAddr], iface: &str) -> Result<Self> {
        let mut nodes = BTreeMap::new();
        for n in ctx.cluster().nodes() {
            let mac = node_mac(ctx, &n.name, iface)?;
            let mac: Mac = mac
                .parse()
                .map_err(|e: String| anyhow::anyhow!("{}'s {iface}: {e}", n.name))?;
            nodes.insert(mac, n.name);
        }
        let probers = ips
            .iter()
            .map(|ip| Prober::for_cluster(ctx.cluster().as_ref(), *ip, iface))
            .collect::<Result<_>>()?;
        Ok(Self {
            iface: iface.to_owned(),
            probers,
            nodes,
        })
    }

    /// The node whose `iface` has `mac`, or the MAC when no node has it.
    pub fn name(&self, mac: Mac) -> String {
        self.nodes
            .get(&mac)
            .cloned()
            .unwrap_or_else(|| format!("no node ({mac})"))
    }

    /// `node`'s MAC on the watched network.
    pub fn mac_of(&self, node: &str) -> Result<Mac> {
        self.nodes
            .iter()
            .find(|(_, n)| *n == node)
            .map(|(m, _)| *m)
            .with_context(|| format!("no node {node} on {}", self.iface))
    }

    /// One window of `length` per address, probed at the same time.
    pub fn windows(&self, length: Duration) -> Result<Vec<Window>> {
        std::thread::scope(|s| {
            let running: Vec<_> = self
                .probers
                .iter()
                .map(|p| s.spawn(move || p.window(length)))
                .collect();
            running
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }

    fn describe(&self, windows: &[Window]) -> String {
        windows
            .iter()
            .map(|w| format!("{}: {}", w.target, w.describe(&|m| self.name(m))))
            .collect::<Vec<_>>()
            .join("\n  ")
    }

    /// The node that alone answers every address in `windows` (rule 4 of
    /// [`crate::prober::window`]), if one does.
    fn only_node(&self, windows: &[Window]) -> Option<String> {
        let first = windows.first()?;
        let mac = *first.macs().first()?;
        let node = self.nodes.get(&mac)?;
        windows.iter().all(|w| w.only(mac)).then(|| node.clone())
    }

    /// Waits until a node for which `wanted` holds alone answers every
    /// address, then holds a window in which it alone answers; returns
    /// it. `what` names the wait in errors.
    fn settle(&self, what: &str, wanted: impl Fn(&str) -> bool) -> Result<String> {
        let deadline = Instant::now() + WAIT;
        let node = loop {
            let windows = self.windows(SETTLE)?;
            if let Some(node) = self.only_node(&windows).filter(|n| wanted(n)) {
                break node;
            }
            if Instant::now() > deadline {
                bail!(
                    "timed out after {WAIT:?} waiting for {what} on {}; last window:\n  {}",
                    self.iface,
                    self.describe(&windows)
                );
            }
        };
        let mac = self.mac_of(&node)?;
        let held = self.windows(HOLD)?;
        for w in &held {
            w.expect_only(mac, &|m| self.name(m)).with_context(|| {
                format!(
                    "{what}: {node} answered alone, then over {HOLD:?} on {}",
                    self.iface
                )
            })?;
        }
        Ok(node)
    }

    /// Waits until every address has one node alone answering it over a
    /// window (not necessarily the same node for all); returns that node
    /// per address.
    pub fn owners(&self) -> Result<BTreeMap<IpAddr, String>> {
        let deadline = Instant::now() + WAIT;
        loop {
            let windows = self.windows(HOLD)?;
            let owners: Option<BTreeMap<IpAddr, String>> = windows
                .iter()
                .map(|w| {
                    let mac = *w.macs().first()?;
                    let node = self.nodes.get(&mac).filter(|_| w.only(mac))?;
                    Some((w.target, node.clone()))
                })
                .collect();
            if let Some(owners) = owners {
                return Ok(owners);
            }
            if Instant::now() > deadline {
                bail!(
                    "timed out after {WAIT:?} waiting for one node alone to answer each address on {}; last window:\n  {}",
                    self.iface,
                    self.describe(&windows)
                );
            }
        }
    }

    /// Waits until one node alone answers every address and keeps doing
    /// so over a window; returns it.
    pub fn settled(&self) -> Result<String> {
        self.settle("one node alone to answer", |_| true)
    }

    /// Waits until `node` alone answers every address and keeps doing so
    /// over a window: its MAC, no other.
    pub fn wait_only(&self, node: &str) -> Result<()> {
        self.mac_of(node)?;
        self.settle(&format!("{node} alone to answer"), |n| n == node)
            .map(drop)
    }

    /// Waits until a node other than `from` alone answers every address
    /// and keeps doing so over a window in which `from` is never seen;
    /// returns it.
    pub fn wait_moved(&self, from: &str) -> Result<String> {
        self.settle(&format!("another node than {from} alone to answer"), |n| {
            n != from
        })
    }

    /// Fails unless nobody answers any address over a window.
    pub fn expect_silent(&self) -> Result<()> {
        for w in self.windows(HOLD)? {
            w.expect_silent(&|m| self.name(m))
                .with_context(|| format!("on {}", self.iface))?;
        }
        Ok(())
    }
}
