//! BFD beside the BGP sessions: the I/O edge of [`crate::speaker::bfd`].
//!
//! Per BFD-enabled peer a task owns a [`bfd::Session`] and the UDP socket
//! it sends from (TTL 255, a source port from 49152-65535, bound to the
//! peer's sourceAddress when set, else the kernel picks the source as it
//! does for the BGP connection). One listener per address family and port
//! (3784 single hop, 4784 multihop) reads each datagram with its TTL and
//! routes it to a session by Your Discriminator, or by source address
//! while the peer does not know ours yet. When a session leaves Up because
//! the path failed ([`closes_bgp`]), the peer's BGP session closes at once
//! through its `path_lost` signal ([`Links::path`]); BGP never waits for
//! BFD, as FRR's default.
//!
//! Bounded: each session's queue holds [`QUEUE`] datagrams, and what does
//! not fit is dropped and counted (`metallb_rs_bfd_packets_dropped_total`);
//! the routing maps hold one entry per configured peer. Sends never wait
//! (a full socket buffer loses the packet, as the path might), receives
//! wait only for readiness, and a socket that cannot be bound is retried
//! with the reason logged.

mod sock;
mod task;
#[cfg(test)]
mod tests;

use crate::config::Peer;
use crate::metrics::BfdMetrics;
use crate::speaker::bfd::{self, Change, ControlPacket, Profile, Reach, State};
use rand::rngs::{StdRng, SysRng};
use rand::{RngExt as _, SeedableRng as _};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::task::AbortOnDropHandle;

/// Datagrams waiting for one session; a peer sends a few per detection
/// time, so more means a flood, dropped.
pub const QUEUE: usize = 16;
/// How long a stopped session may take to send its AdminDown.
const STOP_WAIT: Duration = Duration::from_secs(1);

/// The UDP ports, the RFC's unless a test runs both ends on one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ports {
    /// Where single-hop packets are received.
    pub single_hop: u16,
    /// Where multihop packets are received.
    pub multihop: u16,
    /// Where the peer receives single-hop packets.
    pub peer_single_hop: u16,
    /// Where the peer receives multihop packets.
    pub peer_multihop: u16,
    /// Source ports to send from.
    pub source: RangeInclusive<u16>,
}

impl Default for Ports {
    fn default() -> Ports {
        Ports {
            single_hop: bfd::packet::SINGLE_HOP_PORT,
            multihop: bfd::packet::MULTIHOP_PORT,
            peer_single_hop: bfd::packet::SINGLE_HOP_PORT,
            peer_multihop: bfd::packet::MULTIHOP_PORT,
            source: bfd::packet::SOURCE_PORTS,
        }
    }
}

impl Ports {
    /// (where we listen, where the peer listens) for `reach`.
    fn of(&self, reach: Reach) -> (u16, u16) {
        match reach {
            Reach::SingleHop => (self.single_hop, self.peer_single_hop),
            Reach::MultiHop => (self.multihop, self.peer_multihop),
        }
    }
}

/// How far the BGP peer is, as its configuration says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distance {
    /// eBGP without ebgpMultiHop: directly connected.
    Direct,
    /// eBGP with ebgpMultiHop.
    MultiHop,
    /// iBGP: directly connected only if on a connected network.
    Internal,
}

/// Single hop or multihop, as FRR's bgpd decides it: eBGP multihop is
/// multihop, and so is iBGP to an address on no connected network.
pub fn reach(distance: Distance, on_connected_network: bool) -> Reach {
    match distance {
        Distance::Direct => Reach::SingleHop,
        Distance::MultiHop => Reach::MultiHop,
        Distance::Internal if on_connected_network => Reach::SingleHop,
        Distance::Internal => Reach::MultiHop,
    }
}

/// Whether a state change must close the BGP session riding on BFD: the
/// session left Up because the path failed (detection time, or the peer
/// saying Down), not because either side took BFD down administratively
/// (ours on removing the profile, or the peer's AdminDown): RFC 5882
/// §3.2 keeps the client session up then. `remote` is the peer's state
/// after the change.
pub fn closes_bgp(change: &Change, remote: State) -> bool {
    change.session_lost() && change.to != State::AdminDown && remote != State::AdminDown
}

/// One peer's BFD session as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkConfig {
    /// The BGPPeer's name.
    pub name: String,
    /// The peer's address.
    pub peer: IpAddr,
    /// The BGPPeer's sourceAddress.
    pub source: Option<IpAddr>,
    /// How far the peer is.
    pub distance: Distance,
    /// The profile's values.
    pub profile: Profile,
}

impl LinkConfig {
    /// Whether only the profile differs: then the session is
    /// reconfigured in place, never restarted.
    fn same_path(&self, other: &LinkConfig) -> bool {
        (self.peer, self.source, self.distance) == (other.peer, other.source, other.distance)
    }
}

/// The BFD session a BGPPeer asks for, if it names a profile (and has
/// an address: the configuration refuses BFD for unnumbered peers).
pub fn link_config(peer: &Peer) -> Option<LinkConfig> {
    let p = peer.bfd_profile.as_ref()?;
    let crate::config::PeerAddress::Ip(address) = peer.address else {
        return None;
    };
    let distance = match (super::ebgp(peer), peer.ebgp_multi_hop) {
        (false, _) => Distance::Internal,
        (true, false) => Distance::Direct,
        (true, true) => Distance::MultiHop,
    };
    Some(LinkConfig {
        name: peer.name.clone(),
        peer: address,
        source: peer.source_address,
        distance,
        profile: Profile {
            receive_interval: p.receive_interval,
            transmit_interval: p.transmit_interval,
            detect_multiplier: p.detect_multiplier,
            echo_interval: p.echo_interval,
            // Refused by the configuration check.
            echo_mode: None,
            passive_mode: p.passive_mode,
            minimum_ttl: p.minimum_ttl,
        },
    })
}

/// A datagram that passed decoding, for one session.
#[derive(Debug, Clone, Copy)]
struct Received {
    packet: ControlPacket,
    /// Its TTL or hop limit.
    ttl: u8,
    /// When it was read.
    at: std::time::Instant,
}

/// Where a session's datagrams go.
struct Route {
    peer: IpAddr,
    /// The port they must arrive on.
    port: u16,
    tx: mpsc::Sender<Received>,
}

/// Sessions by discriminator, and by (peer, port) for packets that do not
/// name ours yet. One entry per configured peer.
#[derive(Default)]
struct Router {
    by_discriminator: HashMap<u32, Route>,
    by_peer: HashMap<(IpAddr, u16), u32>,
}

fn lock(router: &Mutex<Router>) -> MutexGuard<'_, Router> {
    // Every update leaves the maps consistent: a panic mid-way is harmless.
    router.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running session.
struct Link {
    config: LinkConfig,
    discriminator: u32,
    /// The port its packets arrive on.
    port: u16,
    profile: watch::Sender<Profile>,
    state: watch::Receiver<State>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// This node's BFD sessions and listeners.
pub struct Links {
    ports: Ports,
    metrics: BfdMetrics,
    router: Arc<Mutex<Router>>,
    /// By (IPv4, port).
    listeners: BTreeMap<(bool, u16), AbortOnDropHandle<()>>,
    links: BTreeMap<String, Link>,
    /// Per BGPPeer, whether or not it runs BFD now: a BGP session subscribes
    /// once and hears of losses from whichever BFD session comes later.
    paths: BTreeMap<String, watch::Sender<u64>>,
    rng: StdRng,
}

impl Links {
    /// No sessions yet; nothing is bound until one is configured.
    pub fn new(ports: Ports, metrics: BfdMetrics) -> Links {
        let rng = StdRng::try_from_rng(&mut SysRng).unwrap_or_else(|_| {
            // Discriminators need only be unique here, jitter only spread.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            StdRng::seed_from_u64(nanos ^ u64::from(std::process::id()))
        });
        Links {
            ports,
            metrics,
            router: Arc::default(),
            listeners: BTreeMap::new(),
            links: BTreeMap::new(),
            paths: BTreeMap::new(),
            rng,
        }
    }

    /// Changes each time BFD sees the path to BGPPeer `name` fail.
    pub fn path(&mut self, name: &str) -> watch::Receiver<u64> {
        self.paths
            .entry(name.to_owned())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Forgets the path signals of peers that are gone.
    pub fn retain_paths(&mut self, keep: impl Fn(&str) -> bool) {
        self.paths.retain(|name, _| keep(name));
    }

    /// The state of `name`'s session, if it runs one.
    pub fn state(&self, name: &str) -> Option<State> {
        self.links.get(name).map(|l| *l.state.borrow())
    }

    /// A receiver of `name`'s session states, if it runs one.
    pub fn watch_state(&self, name: &str) -> Option<watch::Receiver<State>> {
        self.links.get(name).map(|l| l.state.clone())
    }

    /// Runs exactly these sessions: a changed profile reconfigures its
    /// session in place (a Poll Sequence, the BGP session untouched); a
    /// changed address or distance restarts it; a removed one sends
    /// AdminDown and ends.
    pub async fn set(&mut self, wanted: Vec<LinkConfig>) {
        let wanted: BTreeMap<String, LinkConfig> =
            wanted.into_iter().map(|c| (c.name.clone(), c)).collect();
        let names: Vec<String> = self.links.keys().cloned().collect();
        for name in names {
            let kept = match (wanted.get(&name), self.links.get_mut(&name)) {
                (Some(want), Some(link)) if want.same_path(&link.config) => {
                    if want.profile != link.config.profile {
                        tracing::info!(
                            peer = name,
                            "BFD profile changed: reconfiguring the session"
                        );
                        link.config.profile = want.profile;
                        link.profile.send_replace(want.profile);
                    }
                    true
                }
                _ => false,
            };
            if !kept && let Some(link) = self.links.remove(&name) {
                self.stop(link, &wanted).await;
            }
        }
        for (name, cfg) in wanted {
            if !self.links.contains_key(&name) {
                self.start(cfg);
            }
        }
        self.sync_listeners();
    }

    /// Ends every session, each peer hearing AdminDown.
    pub async fn shutdown(&mut self) {
        let links = std::mem::take(&mut self.links);
        for link in links.into_values() {
            self.stop(link, &BTreeMap::new()).await;
        }
        self.sync_listeners();
    }

    fn start(&mut self, cfg: LinkConfig) {
        let connected = cfg.distance == Distance::Internal && sock::on_connected_network(cfg.peer);
        let reach = reach(cfg.distance, connected);
        let params = match bfd::Params::from_profile(&cfg.profile, reach) {
            Ok(p) => p,
            Err(e) => {
                // The configuration check refuses these first.
                tracing::error!(peer = cfg.name, error = %e, "BFD profile refused: no BFD session");
                return;
            }
        };
        let (port, peer_port) = self.ports.of(reach);
        let discriminator = self.discriminator();
        let (tx, rx) = mpsc::channel(QUEUE);
        {
            let mut r = lock(&self.router);
            let route = Route {
                peer: cfg.peer,
                port,
                tx,
            };
            r.by_discriminator.insert(discriminator.get(), route);
            r.by_peer.insert((cfg.peer, port), discriminator.get());
        }
        let (profile_tx, profile_rx) = watch::channel(cfg.profile);
        let (stop_tx, stop_rx) = oneshot::channel();
        let (state_tx, state_rx) = watch::channel(State::Down);
        let lost = self
            .paths
            .entry(cfg.name.clone())
            .or_insert_with(|| watch::channel(0).0)
            .clone();
        tracing::info!(peer = cfg.name, address = %cfg.peer, reach = ?reach, port = peer_port, "starting BFD session");
        let task = tokio::spawn(task::run(task::LinkCtx {
            config: cfg.clone(),
            reach,
            params,
            discriminator,
            peer_port,
            source_ports: self.ports.source.clone(),
            port_offset: self.rng.random(),
            packets: rx,
            profile: profile_rx,
            stop: stop_rx,
            state: state_tx,
            lost,
            metrics: self.metrics.clone(),
            jitter: StdRng::from_rng(&mut self.rng),
        }));
        self.links.insert(
            cfg.name.clone(),
            Link {
                config: cfg,
                discriminator: discriminator.get(),
                port,
                profile: profile_tx,
                state: state_rx,
                stop: Some(stop_tx),
                task,
            },
        );
    }

    /// Unroutes `link`, lets it send AdminDown, and forgets its series
    /// unless a `wanted` session keeps the same peer address.
    async fn stop(&mut self, mut link: Link, wanted: &BTreeMap<String, LinkConfig>) {
        {
            let mut r = lock(&self.router);
            r.by_discriminator.remove(&link.discriminator);
            let key = (link.config.peer, link.port);
            if r.by_peer.get(&key) == Some(&link.discriminator) {
                r.by_peer.remove(&key);
            }
        }
        tracing::info!(peer = link.config.name, "ending BFD session");
        if let Some(stop) = link.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(STOP_WAIT, &mut link.task)
            .await
            .is_err()
        {
            link.task.abort();
        }
        let peer = link.config.peer;
        if !wanted.values().any(|c| c.peer == peer) {
            self.metrics.forget(&peer.to_string());
        }
    }

    /// A discriminator no session of this node uses (RFC 5880 §6.8.1:
    /// unique, and random makes a stale peer's packets unlikely to match).
    fn discriminator(&mut self) -> NonZeroU32 {
        let r = lock(&self.router);
        loop {
            if let Some(d) = NonZeroU32::new(self.rng.random::<u32>())
                && !r.by_discriminator.contains_key(&d.get())
            {
                return d;
            }
        }
    }

    /// One listener per (family, port) some session needs, none other.
    fn sync_listeners(&mut self) {
        let needed: BTreeSet<(bool, u16)> = self
            .links
            .values()
            .map(|l| (l.config.peer.is_ipv4(), l.port))
            .collect();
        self.listeners.retain(|key, _| needed.contains(key));
        for (v4, port) in needed {
            self.listeners.entry((v4, port)).or_insert_with(|| {
                AbortOnDropHandle::new(tokio::spawn(task::listen(
                    v4,
                    port,
                    self.router.clone(),
                    self.metrics.clone(),
                )))
            });
        }
    }
}
