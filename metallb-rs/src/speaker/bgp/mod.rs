//! BGP mode: one session per BGPPeer selected for this node, each keeping
//! its peer's routes equal to what the services ask for.
//!
//! - [`advertise`] (pure): which prefixes this node announces for a
//!   service, to which peers, with which attributes.
//! - [`updates`] (pure): route changes as UPDATE messages.
//! - [`session`]: the finite state machine over TCP ([`socket`]: source
//!   address, TTL, TCP MD5).
//! - [`bfd_link`]: BFD beside the sessions of peers with a BFDProfile;
//!   a path failure it sees closes the BGP session at once.
//! - [`unnumbered`]: the router on an interface, for peers named by
//!   interface: Router Advertisements sent and heard.
//! - [`Speaker`] (here): the sessions and the per-peer tables, built from
//!   every service's contribution (several services may share an
//!   aggregated prefix); a service's change reaches the sessions as the
//!   prefixes it touched, never as a whole table.

pub mod advertise;
pub mod bfd_link;
pub mod session;
pub mod socket;
pub mod unnumbered;
pub mod updates;

use crate::config::{Peer, PeerAddress, PeerAsn};
use crate::metrics::BgpMetrics;
use crate::net::bgp::{Afi, Notification, code};
use crate::service::ServiceKey;
use advertise::{PeerRoutes, RouteAttrs};
use ipnet::IpNet;
use session::{DesiredRoutes, EstablishedPeers, Links, Session, SessionConfig, Table};
use socket::{Dial, Remote};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// Hold time when the BGPPeer sets none (upstream's default).
pub const DEFAULT_HOLD_TIME: Duration = Duration::from_secs(90);
/// Longest wait between connection attempts when `connectTime` is unset.
pub const DEFAULT_CONNECT_RETRY: Duration = Duration::from_secs(10);
/// How long one connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// This node's addresses, next hops of the family a session's own
/// connection is not of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeAddresses {
    /// First IPv4 InternalIP.
    pub v4: Option<Ipv4Addr>,
    /// First IPv6 InternalIP.
    pub v6: Option<Ipv6Addr>,
}

/// Whether the BGPPeer is external, judged by the AS the session uses
/// (`localASN` when set), as FRR sorts a `local-as` neighbor.
pub fn ebgp(peer: &Peer) -> bool {
    match peer.peer_asn {
        PeerAsn::Fixed(a) => a != peer.session_asn(),
        PeerAsn::External => true,
        PeerAsn::Internal => false,
    }
}

/// The session a BGPPeer asks for. An unnumbered peer carries both
/// families, as upstream's FRR mode activates both for it.
pub fn session_config(peer: &Peer, node: NodeAddresses) -> SessionConfig {
    let ebgp = ebgp(peer);
    let (remote, own) = match &peer.address {
        PeerAddress::Ip(a) => (
            Remote::Address(SocketAddr::new(*a, peer.port)),
            if a.is_ipv4() { Afi::Ipv4 } else { Afi::Ipv6 },
        ),
        PeerAddress::Interface(name) => (
            Remote::Interface {
                name: name.clone(),
                port: peer.port,
            },
            Afi::Ipv4,
        ),
    };
    let mut families = vec![own];
    if peer.dual_stack_address_family || matches!(remote, Remote::Interface { .. }) {
        families.push(if own == Afi::Ipv4 {
            Afi::Ipv6
        } else {
            Afi::Ipv4
        });
    }
    SessionConfig {
        name: peer.name.clone(),
        dial: Dial {
            peer: remote,
            source: peer.source_address,
            password: peer.password.clone(),
            // A directly connected eBGP peer is one hop away; multihop and
            // iBGP peers may be further.
            ttl: if ebgp && !peer.ebgp_multi_hop { 1 } else { 255 },
            timeout: CONNECT_TIMEOUT,
        },
        my_asn: peer.session_asn(),
        peer_asn: peer.peer_asn,
        router_id: peer.router_id,
        hold_time: peer.hold_time.unwrap_or(DEFAULT_HOLD_TIME),
        keepalive: peer.keepalive_time,
        max_backoff: peer.connect_time.unwrap_or(DEFAULT_CONNECT_RETRY),
        families,
        node_v4: node.v4,
        node_v6: node.v6,
        graceful_restart: peer.graceful_restart,
    }
}

/// The node's first InternalIP of each family.
pub fn node_addresses(addresses: impl IntoIterator<Item = IpAddr>) -> NodeAddresses {
    let mut out = NodeAddresses::default();
    for a in addresses {
        match a {
            IpAddr::V4(a) if out.v4.is_none() => out.v4 = Some(a),
            IpAddr::V6(a) if out.v6.is_none() => out.v6 = Some(a),
            _ => {}
        }
    }
    out
}

/// The sessions of this node and what each peer should have.
pub struct Speaker {
    metrics: BgpMetrics,
    sessions: BTreeMap<String, Session>,
    /// The BFD sessions beside them.
    bfd: bfd_link::Links,
    /// Each announced service's addresses and routes per peer.
    services: BTreeMap<ServiceKey, (Vec<IpAddr>, PeerRoutes)>,
    /// Per peer: prefix -> the services asking for it, with attributes.
    tables: BTreeMap<String, BTreeMap<IpNet, BTreeMap<ServiceKey, RouteAttrs>>>,
    /// Per peer: the merged routes its session reads, changed prefix by
    /// prefix (kept while its session restarts).
    desired: BTreeMap<String, DesiredRoutes>,
    /// True once every service has been seen: sessions with graceful
    /// restart hold their first table until then.
    first_pass: tokio::sync::watch::Sender<bool>,
    /// The peers Established with since the process started.
    history: EstablishedPeers,
}

impl Speaker {
    /// No sessions yet.
    pub fn new(metrics: BgpMetrics) -> Self {
        Self {
            bfd: bfd_link::Links::new(bfd_link::Ports::default(), metrics.bfd.clone()),
            metrics,
            sessions: BTreeMap::new(),
            services: BTreeMap::new(),
            tables: BTreeMap::new(),
            desired: BTreeMap::new(),
            first_pass: tokio::sync::watch::Sender::new(false),
            history: EstablishedPeers::default(),
        }
    }

    /// Says the routes now hold every service (the speaker's first pass
    /// is complete); sessions holding their first table send it.
    pub fn first_pass_complete(&self) {
        self.first_pass
            .send_if_modified(|done| !std::mem::replace(done, true));
    }

    /// Runs exactly these sessions: starts new ones, ends removed ones
    /// (Cease, peer de-configured) and restarts changed ones (Cease,
    /// configuration change).
    pub async fn set_peers(&mut self, wanted: Vec<SessionConfig>) {
        let wanted: BTreeMap<String, SessionConfig> =
            wanted.into_iter().map(|c| (c.name.clone(), c)).collect();
        let names: Vec<String> = self.sessions.keys().cloned().collect();
        for name in names {
            let why = match wanted.get(&name) {
                None => Notification::new(code::CEASE, code::CEASE_PEER_DECONFIGURED, []),
                Some(c) if c != self.sessions[&name].config() => {
                    Notification::new(code::CEASE, code::CEASE_CONFIG_CHANGE, [])
                }
                Some(_) => continue,
            };
            if let Some(s) = self.sessions.remove(&name) {
                let label = s.config().label();
                tracing::info!(peer = name, reason = %why, "ending BGP session");
                s.stop(why).await;
                if !wanted.values().any(|c| c.label() == label) {
                    self.metrics.forget(&label);
                }
            }
        }
        self.bfd.retain_paths(|name| wanted.contains_key(name));
        for (name, cfg) in wanted {
            if !self.sessions.contains_key(&name) {
                tracing::info!(peer = name, address = %cfg.dial.peer, "starting BGP session");
                let routes = self.desired.entry(name.clone()).or_default().clone();
                let links = Links {
                    path_lost: self.bfd.path(&name),
                    first_pass: self.first_pass.subscribe(),
                    history: self.history.clone(),
                };
                let s = Session::start_with(cfg, routes, self.metrics.clone(), links);
                self.sessions.insert(name, s);
            }
        }
    }

    /// Runs exactly these BFD sessions beside the BGP sessions (call after
    /// [`Speaker::set_peers`]); a changed profile reconfigures its BFD
    /// session without touching the BGP session.
    pub async fn set_bfd(&mut self, wanted: Vec<bfd_link::LinkConfig>) {
        self.bfd.set(wanted).await;
    }

    /// Sets what `key` announces: its addresses `ips` as `routes` (empty:
    /// nothing); returns the addresses it announced before.
    pub fn set_service(
        &mut self,
        key: &ServiceKey,
        ips: &[IpAddr],
        routes: PeerRoutes,
    ) -> Option<Vec<IpAddr>> {
        let (before, old) = self.services.remove(key).unzip();
        let old = old.unwrap_or_default();
        if old != routes {
            self.retable(key, &old, &routes);
        }
        if !routes.is_empty() {
            self.services.insert(key.clone(), (ips.to_vec(), routes));
        }
        before
    }

    /// Moves `key`'s contribution to the per-peer tables from `old` to
    /// `routes`, and hands the touched prefixes to the sessions.
    fn retable(&mut self, key: &ServiceKey, old: &PeerRoutes, routes: &PeerRoutes) {
        let mut touched: BTreeSet<(String, IpNet)> = BTreeSet::new();
        for (peer, prefixes) in old {
            if let Some(t) = self.tables.get_mut(peer) {
                for p in prefixes.keys() {
                    if let Some(by) = t.get_mut(p) {
                        by.remove(key);
                        if by.is_empty() {
                            t.remove(p);
                        }
                    }
                    touched.insert((peer.clone(), *p));
                }
            }
        }
        for (peer, prefixes) in routes {
            let t = self.tables.entry(peer.clone()).or_default();
            for (p, a) in prefixes {
                t.entry(*p).or_default().insert(key.clone(), a.clone());
                touched.insert((peer.clone(), *p));
            }
        }
        // Only the touched prefixes reach the sessions, merged over every
        // service asking for them.
        for (peer, p) in touched.iter().cloned() {
            let merged = self.tables.get(&peer).and_then(|t| t.get(&p)).map(|by| {
                let mut attrs = RouteAttrs::default();
                for a in by.values() {
                    attrs.merge(a);
                }
                attrs
            });
            if self.tables.get(&peer).is_some_and(BTreeMap::is_empty) {
                self.tables.remove(&peer);
            }
            self.desired.entry(peer).or_default().set(p, merged);
        }
        // Upstream sets the pending count as soon as the routes change,
        // session up or not.
        let peers: BTreeSet<String> = touched.iter().map(|(p, _)| p.clone()).collect();
        for peer in &peers {
            if let (Some(s), Some(d)) = (self.sessions.get(peer), self.desired.get(peer)) {
                self.metrics
                    .pending_prefixes
                    .with_label_values(&[&s.config().label()])
                    .set(d.len() as i64);
            }
        }
    }

    /// Whether `key` announces anything.
    pub fn announces(&self, key: &ServiceKey) -> bool {
        self.services.contains_key(key)
    }

    /// The peers `key` is announced to.
    pub fn peers_of(&self, key: &ServiceKey) -> Vec<String> {
        self.services
            .get(key)
            .map(|(_, r)| r.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Services announced.
    pub fn services(&self) -> impl Iterator<Item = &ServiceKey> {
        self.services.keys()
    }

    /// What `peer` should have now.
    pub fn table(&self, peer: &str) -> Table {
        self.desired
            .get(peer)
            .map(DesiredRoutes::routes)
            .unwrap_or_default()
    }

    /// Ends every session as the process stops: a Cease (administrative
    /// shutdown), so the peers withdraw this node's routes at once instead
    /// of after the hold time; with graceful restart negotiated, a dropped
    /// connection instead, so they keep them until the speaker is back.
    pub async fn shutdown(&mut self) {
        let stops = std::mem::take(&mut self.sessions)
            .into_values()
            .map(Session::exit);
        futures::future::join_all(stops).await;
        self.bfd.shutdown().await;
    }
}

#[cfg(test)]
mod tests;
