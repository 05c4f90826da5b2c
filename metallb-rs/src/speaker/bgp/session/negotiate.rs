//! OpenSent: our OPEN, what it and the peer's agree on, and the next
//! hops that follows. Pure.

use super::super::socket::Remote;
use super::super::updates::{Shape, V4NextHop};
use super::{SessionConfig, peer_as_ok, router_id};
use crate::net::bgp::{
    Afi, Capability, Context, ExtendedNextHop, GracefulRestart, GracefulRestartFamily,
    Notification, Open, SAFI_UNICAST, code,
};
use std::net::IpAddr;
use std::time::Duration;

/// What a session runs with once both OPENs are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// How messages are encoded from now on (4-octet AS numbers).
    pub ctx: Context,
    /// The peer is in our AS.
    pub ibgp: bool,
    /// The smaller of the two hold times (zero: no hold timer).
    pub hold: Duration,
    /// Ours when configured, at most a third of the hold time.
    pub keepalive: Duration,
    /// The families both sides carry.
    pub families: Vec<Afi>,
    /// Both sides sent the graceful restart capability: the peer keeps
    /// our routes as stale when the connection drops without a
    /// NOTIFICATION, until we come back and send End-of-RIB.
    pub graceful_restart: bool,
    /// Both sides sent the extended next hop capability for IPv4 unicast
    /// over IPv6 (RFC 8950): IPv4 routes may carry an IPv6 next hop.
    pub extended_next_hop: bool,
}

/// How long the peer keeps our routes after the connection drops, waiting
/// for us to come back: FRR's default. Long enough for a speaker Pod to
/// be replaced; upstream's native speaker offers none.
pub const RESTART_TIME: u16 = 120;

/// What this process has seen of a peer, which the R bit of our graceful
/// restart capability tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerHistory {
    /// No session to the peer has been Established since this process
    /// started: we have restarted (R set), so the peer need not wait for
    /// our End-of-RIB before sending its own.
    NeverEstablished,
    /// One has: a new connection is a session failing over, not this
    /// process restarting (R clear).
    EstablishedBefore,
}

/// Our graceful restart capability, when `cfg` asks for it: R bit from
/// `history`; the F bit for every family we offer, since the node's
/// forwarding does not depend on this process (without F the peer
/// drops the family's stale routes at once, RFC 4724 section 4.2); no N
/// bit, so a Cease (peer removed or changed) still withdraws at once.
pub fn graceful_restart(cfg: &SessionConfig, history: PeerHistory) -> Option<Capability> {
    cfg.graceful_restart.then(|| {
        Capability::GracefulRestart(GracefulRestart {
            restarting: history == PeerHistory::NeverEstablished,
            notification: false,
            restart_time: RESTART_TIME,
            families: cfg
                .families
                .iter()
                .map(|f| GracefulRestartFamily {
                    afi: f.number(),
                    safi: SAFI_UNICAST,
                    forwarding_preserved: true,
                })
                .collect(),
        })
    })
}

/// An unnumbered session: over link-local addresses, where IPv4 routes
/// can only have our IPv6 link-local address as next hop.
fn unnumbered(cfg: &SessionConfig) -> bool {
    matches!(cfg.dial.peer, Remote::Interface { .. })
}

/// The next hops of the session's routes, from its connection's local
/// address `local`: that address for its own family; on an unnumbered
/// session the link-local address for both families, IPv4 through the
/// extended next hop (without it, the node's IPv4 address, as a
/// numbered IPv6 session); else the node's address of the other family.
/// A family the session does not carry gets none.
pub fn shape(cfg: &SessionConfig, local: IpAddr, n: &Negotiated) -> Shape {
    let link_local = match local {
        IpAddr::V6(a) if a.is_unicast_link_local() => Some(a),
        _ => None,
    };
    let v4 = match (local, link_local) {
        (_, Some(ll)) if n.extended_next_hop => Some(V4NextHop::Ipv6(ll)),
        (IpAddr::V4(a), _) => Some(V4NextHop::Ipv4(a)),
        _ => cfg.node_v4.map(V4NextHop::Ipv4),
    };
    let v6 = match (local, link_local) {
        (_, Some(ll)) if unnumbered(cfg) => Some(ll),
        (IpAddr::V6(a), None) => Some(a),
        _ => cfg.node_v6,
    };
    Shape {
        my_asn: cfg.my_asn,
        ibgp: n.ibgp,
        four_octet_as: n.ctx.four_octet_as,
        next_hop_v4: v4.filter(|_| n.families.contains(&Afi::Ipv4)),
        next_hop_v6: v6.filter(|_| n.families.contains(&Afi::Ipv6)),
    }
}

/// The OPEN we send for `cfg` on a connection from `local`.
pub fn our_open(cfg: &SessionConfig, local: IpAddr, history: PeerHistory) -> Open {
    let hold_secs = u16::try_from(cfg.hold_time.as_secs()).unwrap_or(u16::MAX);
    let caps: Vec<Capability> = cfg
        .families
        .iter()
        .map(|f| Capability::Multiprotocol {
            afi: f.number(),
            safi: SAFI_UNICAST,
        })
        .chain([Capability::RouteRefresh])
        .chain(graceful_restart(cfg, history))
        .chain(
            unnumbered(cfg)
                .then(|| Capability::ExtendedNextHop(vec![ExtendedNextHop::IPV4_OVER_IPV6])),
        )
        .collect();
    Open::new(cfg.my_asn, hold_secs, router_id(cfg, local), caps)
}

/// Checks the peer's OPEN against the configuration and our OPEN; the
/// NOTIFICATION to send when it is refused.
pub fn negotiate(
    cfg: &SessionConfig,
    ours: &Open,
    theirs: &Open,
) -> Result<Negotiated, Notification> {
    if !peer_as_ok(cfg, theirs.asn()) {
        return Err(Notification::new(
            code::OPEN,
            code::OPEN_BAD_PEER_AS,
            theirs.my_as.to_be_bytes(),
        ));
    }
    let ibgp = theirs.asn() == cfg.my_asn;
    if ibgp && theirs.router_id == ours.router_id {
        return Err(Notification::new(code::OPEN, code::OPEN_BAD_IDENTIFIER, []));
    }
    let hold = Duration::from_secs(u64::from(ours.hold_time.min(theirs.hold_time)));
    Ok(Negotiated {
        ctx: Context {
            four_octet_as: theirs.four_octet_as(),
        },
        ibgp,
        hold,
        keepalive: cfg.keepalive.unwrap_or(hold / 3).min(hold / 3),
        families: theirs
            .families()
            .into_iter()
            .filter(|f| cfg.families.contains(f))
            .collect(),
        graceful_restart: ours.graceful_restart().is_some() && theirs.graceful_restart().is_some(),
        extended_next_hop: ours.extended_next_hop(ExtendedNextHop::IPV4_OVER_IPV6)
            && theirs.extended_next_hop(ExtendedNextHop::IPV4_OVER_IPV6),
    })
}

/// Why `negotiate` refused the peer's OPEN with `n`, and what to fix.
pub fn refusal(cfg: &SessionConfig, ours: &Open, theirs: &Open, n: &Notification) -> String {
    match (n.code, n.subcode) {
        (code::OPEN, code::OPEN_BAD_PEER_AS) => format!(
            "the peer's AS is {}, expected {:?}: fix peerASN",
            theirs.asn(),
            cfg.peer_asn
        ),
        (code::OPEN, code::OPEN_BAD_IDENTIFIER) => format!(
            "the peer has our router ID {}: set routerID on one side",
            ours.router_id
        ),
        _ => format!("refused the peer's OPEN: {n}"),
    }
}
