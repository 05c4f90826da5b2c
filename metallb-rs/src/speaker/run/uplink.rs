//! The uplink watch: on every liveness tick the loop looks at the node's
//! uplink (`iface::uplink`, found once, then followed by name), feeds
//! what it sees to the debounce (`speaker::uplink::step`) and tells the
//! renewal task whether the lease must say the link is down. A change of
//! the uplink's flags (or of its link-local address) makes the loop rescan the interfaces at once
//! instead of at the next periodic rescan (up to 10 s later).

use super::*;
use crate::speaker::uplink;

/// What the uplink watch remembers.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    /// The uplink's name, once found.
    name: Option<String>,
    /// What the responders depend on at the last look: UP, RUNNING, an
    /// IPv6 link-local address (an admin down flushes it, and it comes
    /// back after the link); `None` inside when not listed.
    flags: Option<Option<(bool, bool, bool)>>,
    /// The debounce.
    state: uplink::State,
}

impl Runner {
    /// Looks at the uplink once; true when its flags changed since the
    /// last look (the caller rescans the interfaces and runs a full pass).
    pub(super) fn look_at_uplink(&mut self) -> bool {
        let listed = match iface::list() {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, "could not list interfaces to look at the uplink");
                return false;
            }
        };
        if self.uplink.name.is_none() {
            let bind = self.opts.membership.as_ref().map(|m| m.bind.ip());
            let node_ips = self.internal_ips();
            self.uplink.name = iface::uplink(&listed, bind, &node_ips);
            if let Some(name) = &self.uplink.name {
                tracing::info!(interface = %name, "watching the uplink's link state");
            }
        }
        let Some(name) = self.uplink.name.clone() else {
            return false;
        };
        let flags = listed
            .iter()
            .find(|i| i.name == name)
            .map(|i| (i.up, i.running, i.link_local.is_some()));
        let changed = self.uplink.flags.is_some_and(|f| f != flags);
        self.uplink.flags = Some(flags);
        let was = self.uplink.state.marked;
        self.uplink.state = uplink::step(
            self.uplink.state,
            iface::link_up(&listed, &name),
            std::time::Instant::now(),
        );
        let marked = self.uplink.state.marked;
        if marked != was {
            if marked {
                tracing::warn!(interface = %name, "the uplink is down: saying so on the presence lease, so the other speakers take this node's addresses over");
            } else {
                tracing::info!(interface = %name, held = ?self.uplink.state.hold(), "the uplink is back");
            }
        }
        // Every look (cheap when unchanged): a renewal task started after
        // the mark learns it too.
        if let Some(renewal) = &self.renewal {
            renewal.set_link_down(marked.then_some(name));
        }
        changed
    }

    /// This node's InternalIPs, as its Node object lists them.
    fn internal_ips(&self) -> Vec<IpAddr> {
        let node = self.stores.nodes.get(&ObjectRef::new(&self.opts.node));
        node.iter()
            .filter_map(|n| n.status.as_ref()?.addresses.as_ref())
            .flatten()
            .filter(|a| a.type_ == "InternalIP")
            .filter_map(|a| a.address.parse().ok())
            .collect()
    }
}
