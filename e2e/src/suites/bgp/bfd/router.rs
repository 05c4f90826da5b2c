//! What the BFD specs do to and read from both ends: BFD turned on at the
//! routers for the speakers' addresses ([`RouterBfd`], off again when
//! dropped), the routers' BFD sessions (`show bfd peers json`), the
//! speakers' `metallb_bfd_*` metrics, and a node's link cut
//! ([`LinkCut`], restored when dropped).
//!
//! The routers' BFD configuration is made at run time through vtysh and
//! never written to their start-up files: a router restart forgets it,
//! and a spec that dies between enabling and dropping leaves nothing a
//! restart would not clear.

use crate::Ctx;
use anyhow::{Result, bail};
use devenv::frr::BgpRouter;
use devenv::frr::bfd::{self, BfdPeer, BfdProfile};
use devenv::wait::eventually;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// BFD on at some routers for some of their neighbors, with one profile;
/// off again, and the profile removed, when dropped.
pub(super) struct RouterBfd<'a> {
    ctx: &'a Ctx,
    profile: String,
    /// The routers whose configuration was (perhaps partly) changed.
    on: Vec<BgpRouter>,
    neighbors: Vec<IpAddr>,
}

impl<'a> RouterBfd<'a> {
    /// Turns BFD on with `profile` at each of `routers` for `neighbors`
    /// (node addresses). Skips the spec when a router runs no bfdd (kind's
    /// FRR container starts bgpd only).
    pub(super) fn enable(
        ctx: &'a Ctx,
        routers: &[BgpRouter],
        neighbors: &[IpAddr],
        profile: &BfdProfile,
    ) -> Result<Self> {
        let mut guard = Self {
            ctx,
            profile: profile.name.clone(),
            on: Vec::new(),
            neighbors: neighbors.to_vec(),
        };
        for r in routers {
            if let Err(e) = peers(ctx, r) {
                return Err(crate::skip(format!(
                    "router {} cannot show its BFD peers (no bfdd?): {e:#}",
                    r.name
                )));
            }
            let commands = bfd::enable_commands(profile, r.asn, neighbors)?;
            // Before running: a command that half worked is undone too.
            guard.on.push(r.clone());
            ctx.cluster().vtysh_on(&r.name, &commands)?;
        }
        Ok(guard)
    }
}

impl Drop for RouterBfd<'_> {
    fn drop(&mut self) {
        for r in &self.on {
            let commands = bfd::disable_commands(&self.profile, r.asn, &self.neighbors);
            if let Err(e) = self.ctx.cluster().vtysh_on(&r.name, &commands) {
                eprintln!("e2e: could not turn BFD off at {}: {e:#}", r.name);
            }
        }
    }
}

/// `router`'s BFD sessions by the speaker's address.
pub(super) fn peers(ctx: &Ctx, router: &BgpRouter) -> Result<BTreeMap<IpAddr, BfdPeer>> {
    bfd::parse_peers(&ctx.cluster().vtysh_on(&router.name, bfd::PEERS_COMMAND)?)
}

/// Waits until each of `routers` has its BFD sessions with every one of
/// `from` up; returns each router's sessions then.
pub(super) fn wait_up(
    ctx: &Ctx,
    routers: &[BgpRouter],
    from: &BTreeSet<IpAddr>,
    timeout: Duration,
) -> Result<Vec<(BgpRouter, BTreeMap<IpAddr, BfdPeer>)>> {
    let mut out = Vec::new();
    for r in routers {
        let sessions = eventually(
            timeout,
            &format!("BFD sessions of {} with {from:?} up", r.name),
            || {
                let sessions = peers(ctx, r)?;
                if from
                    .iter()
                    .all(|a| sessions.get(a).is_some_and(BfdPeer::up))
                {
                    Ok(Some(sessions))
                } else {
                    bail!("statuses: {:?}", statuses(&sessions))
                }
            },
        )?;
        out.push((r.clone(), sessions));
    }
    Ok(out)
}

/// Waits until none of `routers` has its BFD session with `node` up (down,
/// init, or gone).
pub(super) fn wait_down(
    ctx: &Ctx,
    routers: &[BgpRouter],
    node: IpAddr,
    timeout: Duration,
) -> Result<()> {
    for r in routers {
        eventually(
            timeout,
            &format!("BFD session of {} with {node} not up", r.name),
            || {
                let sessions = peers(ctx, r)?;
                if sessions.get(&node).is_some_and(BfdPeer::up) {
                    bail!("statuses: {:?}", statuses(&sessions))
                }
                Ok(Some(()))
            },
        )?;
    }
    Ok(())
}

fn statuses(sessions: &BTreeMap<IpAddr, BfdPeer>) -> BTreeMap<IpAddr, String> {
    sessions
        .iter()
        .map(|(a, p)| (*a, p.status.clone()))
        .collect()
}

/// The value of `metric` (also under its `_total` name: a counter's
/// exposition may add it) for the session with `router` in a speaker's
/// `/metrics` text. The `peer` label is matched as the router's address
/// alone or with its BGP port (as `metallb_bgp_*` label their sessions).
pub(super) fn speaker_sample(
    text: &str,
    metric: &str,
    router: &BgpRouter,
    v6: bool,
) -> Option<f64> {
    let address = router.address(v6)?;
    let labels = [
        format!("peer=\"{address}\""),
        format!("peer=\"{}\"", SocketAddr::new(address, router.port)),
    ];
    let total = format!("{metric}_total");
    [metric, total.as_str()].iter().find_map(|m| {
        labels
            .iter()
            .find_map(|l| crate::external::sample(text, m, &[l.as_str()]))
    })
}

/// What the BFD specs expect of a speaker's session with a router whose
/// BFD is up: `metallb_bfd_session_up` 1, control packets both ways, at
/// least one up event. `None` when so, else what the metrics show.
pub(super) fn session_metrics_wrong(text: &str, router: &BgpRouter, v6: bool) -> Option<String> {
    let get = |m: &str| speaker_sample(text, m, router, v6);
    let up = get("metallb_bfd_session_up");
    let input = get("metallb_bfd_control_packet_input");
    let output = get("metallb_bfd_control_packet_output");
    let up_events = get("metallb_bfd_session_up_events");
    let right = up == Some(1.0)
        && input.is_some_and(|v| v > 0.0)
        && output.is_some_and(|v| v > 0.0)
        && up_events.is_some_and(|v| v >= 1.0);
    (!right).then(|| {
        format!(
            "session_up {up:?} control_packet_input {input:?} control_packet_output {output:?} \
             session_up_events {up_events:?}"
        )
    })
}

/// A node's data-plane link taken down; up again when dropped (or
/// [`LinkCut::restore`]d), so no spec leaves a node cut off.
pub(super) struct LinkCut<'a> {
    ctx: &'a Ctx,
    node: String,
    restored: bool,
}

impl<'a> LinkCut<'a> {
    /// Takes `node`'s link down (the lab's `link_down`: its API path stays
    /// up, its speaker reaches no router); skips the spec where the
    /// cluster cannot.
    pub(super) fn cut(ctx: &'a Ctx, node: &str) -> Result<Self> {
        ctx.cluster()
            .link_down(node)
            .map_err(|e| crate::skip(format!("{e:#}")))?;
        Ok(Self {
            ctx,
            node: node.to_owned(),
            restored: false,
        })
    }

    /// Brings the link back up.
    pub(super) fn restore(mut self) -> Result<()> {
        self.restored = true;
        self.ctx.cluster().link_up(&self.node)
    }
}

impl Drop for LinkCut<'_> {
    fn drop(&mut self) {
        if !self.restored
            && let Err(e) = self.ctx.cluster().link_up(&self.node)
        {
            eprintln!("e2e: could not bring {}'s link back up: {e:#}", self.node);
        }
    }
}
