//! One BGP session (RFC 4271's finite state machine, active side only,
//! as upstream's native speaker): connect, OPEN, KEEPALIVE, Established;
//! then keep the peer's Adj-RIB-Out equal to the routes it is given,
//! keepalives, the hold timer, and reconnection with backoff. Every write
//! is bounded (the hold time, or the OPEN wait before there is one): a
//! peer that stops reading is dropped like a silent one. A malformed
//! message from the peer ends the session with the NOTIFICATION the
//! decoder named; nothing the peer sends can stop the speaker.

use super::advertise::RouteAttrs;
use super::socket::{Dial, Remote};
use super::unnumbered::Discovery;
use crate::config::PeerAsn;
use crate::k8s::queue::Backoff;
use crate::metrics::BgpMetrics;
use crate::net::bgp::{self, Afi, Context, Message, Notification};
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::{oneshot, watch};

mod adj_out;
mod established;
pub mod graceful;
mod handshake;
mod negotiate;
mod refresh;
pub use adj_out::{AdjRibOut, Diff};
use established::{EstablishedCtx, established};
pub use graceful::Stop;
use handshake::Opened;
pub use negotiate::{Negotiated, PeerHistory, negotiate, our_open};

/// The prefixes a peer should have, with their attributes.
pub type Table = BTreeMap<IpNet, RouteAttrs>;

/// Everything a session needs to know about its peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// The BGPPeer's name.
    pub name: String,
    /// How to connect.
    pub dial: Dial,
    /// Our AS on this session: the BGPPeer's `localASN` when set, else
    /// its `myASN`. The OPEN, the AS_PATH and iBGP-or-eBGP all follow it.
    pub my_asn: u32,
    /// The AS the peer must have.
    pub peer_asn: PeerAsn,
    /// Our BGP identifier; the local IPv4 address of the connection when
    /// None.
    pub router_id: Option<Ipv4Addr>,
    /// Proposed hold time (0: no keepalives).
    pub hold_time: Duration,
    /// Keepalive interval (hold time / 3 when None).
    pub keepalive: Option<Duration>,
    /// Longest wait between connection attempts.
    pub max_backoff: Duration,
    /// Families to carry.
    pub families: Vec<Afi>,
    /// Next hops for a family the connection's own address is not of (a
    /// dual-stack session): this node's addresses.
    pub node_v4: Option<Ipv4Addr>,
    /// See `node_v4`.
    pub node_v6: Option<Ipv6Addr>,
    /// Offer graceful restart (RFC 4724) as a restarting speaker.
    pub graceful_restart: bool,
}

impl SessionConfig {
    /// The `peer` metric label: address:port.
    pub fn label(&self) -> String {
        self.dial.peer.to_string()
    }
}

/// The routes a peer should have, shared by the speaker (writer) and
/// the session (reader), with the prefixes changed since the session last
/// looked: a change costs the session the changed prefixes, not the whole
/// table.
#[derive(Clone, Default)]
pub struct DesiredRoutes {
    inner: Arc<(std::sync::Mutex<Desired>, tokio::sync::Notify)>,
}

#[derive(Default)]
struct Desired {
    routes: Table,
    changed: BTreeSet<IpNet>,
}

impl DesiredRoutes {
    /// Starting with `routes`.
    pub fn new(routes: Table) -> Self {
        let d = DesiredRoutes::default();
        d.replace(routes);
        d
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Desired> {
        // A panic while holding the lock leaves a consistent map behind.
        self.inner.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets one prefix's attributes (None: not announced).
    pub fn set(&self, prefix: IpNet, attrs: Option<RouteAttrs>) {
        let mut d = self.lock();
        let changed = match attrs {
            Some(a) => d.routes.insert(prefix, a.clone()).as_ref() != Some(&a),
            None => d.routes.remove(&prefix).is_some(),
        };
        if changed {
            d.changed.insert(prefix);
            drop(d);
            self.inner.1.notify_one();
        }
    }

    /// Replaces every route.
    pub fn replace(&self, routes: Table) {
        let mut d = self.lock();
        let changed: Vec<IpNet> = d
            .routes
            .iter()
            .filter(|(p, a)| routes.get(p) != Some(a))
            .map(|(p, _)| *p)
            .chain(
                routes
                    .iter()
                    .filter(|(p, a)| d.routes.get(p) != Some(a))
                    .map(|(p, _)| *p),
            )
            .collect();
        if !changed.is_empty() {
            d.changed.extend(changed);
            d.routes = routes;
            drop(d);
            self.inner.1.notify_one();
        }
    }

    /// A copy of every route.
    pub fn routes(&self) -> Table {
        self.lock().routes.clone()
    }

    /// How many prefixes the peer should have.
    pub fn len(&self) -> usize {
        self.lock().routes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every route, forgetting pending changes (a full resync follows).
    pub(super) fn snapshot(&self) -> Table {
        let mut d = self.lock();
        d.changed.clear();
        d.routes.clone()
    }

    /// The prefixes changed since the last look, with what they are now.
    pub(super) fn take_changes(&self) -> Vec<(IpNet, Option<RouteAttrs>)> {
        let mut d = self.lock();
        let changed = std::mem::take(&mut d.changed);
        changed
            .into_iter()
            .map(|p| (p, d.routes.get(&p).cloned()))
            .collect()
    }

    /// Resolves after a change (at once if one came since the last call).
    async fn changed(&self) {
        self.inner.1.notified().await;
    }
}

/// The peers a session has been Established with since the process
/// started, shared by every session of the speaker: the R bit of our
/// graceful restart capability is set until one has.
#[derive(Clone, Default)]
pub struct EstablishedPeers(Arc<std::sync::Mutex<BTreeSet<SocketAddr>>>);

impl EstablishedPeers {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<SocketAddr>> {
        // A panic while holding the lock leaves a consistent set behind.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What this process has seen of `peer`.
    pub fn of(&self, peer: SocketAddr) -> PeerHistory {
        if self.lock().contains(&peer) {
            PeerHistory::EstablishedBefore
        } else {
            PeerHistory::NeverEstablished
        }
    }

    /// Records that a session to `peer` reached Established.
    pub fn established(&self, peer: SocketAddr) {
        self.lock().insert(peer);
    }
}

/// What a session shares with the speaker besides its routes.
#[derive(Clone)]
pub struct Links {
    /// Changes whenever BFD sees the path fail: an Established session
    /// closes (Cease, BFD Down). Losses before Established are ignored,
    /// as BGP does not wait for BFD.
    pub path_lost: watch::Receiver<u64>,
    /// True once the speaker has been through every service (see
    /// [`graceful`]).
    pub first_pass: watch::Receiver<bool>,
    /// The peers Established with since the process started.
    pub history: EstablishedPeers,
}

impl Links {
    /// A session on its own: no path failure is ever signalled, the
    /// routes it is given are complete, no peer seen before.
    pub fn standalone() -> Links {
        Links {
            path_lost: watch::channel(0).1,
            first_pass: watch::channel(true).1,
            history: EstablishedPeers::default(),
        }
    }
}

/// What the session reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Established now.
    pub established: bool,
    /// Prefixes the peer has been sent.
    pub announced: usize,
    /// Why the last connection ended, if one did.
    pub last_error: Option<String>,
}

/// A running session.
pub struct Session {
    config: SessionConfig,
    routes: DesiredRoutes,
    status: watch::Receiver<Status>,
    stop: Option<oneshot::Sender<Stop>>,
    task: tokio::task::JoinHandle<()>,
}

impl Session {
    /// Starts connecting to the peer, which should have `routes` (the
    /// caller may go on changing them).
    pub fn start(config: SessionConfig, routes: DesiredRoutes, metrics: BgpMetrics) -> Session {
        Session::start_with(config, routes, metrics, Links::standalone())
    }

    /// As [`Session::start`], tied to the speaker through `links`.
    pub fn start_with(
        config: SessionConfig,
        routes: DesiredRoutes,
        metrics: BgpMetrics,
        links: Links,
    ) -> Session {
        let (status_tx, status_rx) = watch::channel(Status::default());
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = tokio::spawn(run(
            config.clone(),
            routes.clone(),
            status_tx,
            Signals {
                stop: stop_rx,
                links,
            },
            metrics,
        ));
        Session {
            config,
            routes,
            status: status_rx,
            stop: Some(stop_tx),
            task,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Replaces the routes the peer should have.
    pub fn set_routes(&self, routes: Table) {
        self.routes.replace(routes);
    }

    /// The latest status.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// A receiver that sees every status change.
    pub fn subscribe(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// Ends the session with `why` (a Cease) and waits briefly for it to
    /// reach the peer.
    pub async fn stop(self, why: Notification) {
        self.end(Stop::Cease(why)).await;
    }

    /// Ends the session as the process stops: as [`Session::stop`] with
    /// a Cease (administrative shutdown), or, with graceful restart
    /// negotiated, by dropping the connection (see [`graceful::closing`]).
    pub async fn exit(self) {
        self.end(Stop::Exit).await;
    }

    async fn end(mut self, stop: Stop) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(stop);
        }
        if tokio::time::timeout(Duration::from_secs(1), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How one connection ended.
enum Ended {
    /// Told to stop.
    Stopped,
    /// Failed; whether it had been Established.
    Failed(String, bool),
}

/// What ends a connection from outside (the speaker's stop, BFD's path
/// failures), and what else the speaker tells it.
struct Signals {
    stop: oneshot::Receiver<Stop>,
    links: Links,
}

async fn run(
    cfg: SessionConfig,
    routes: DesiredRoutes,
    status: watch::Sender<Status>,
    signals: Signals,
    metrics: BgpMetrics,
) {
    let Signals {
        mut stop,
        mut links,
    } = signals;
    let label = cfg.label();
    metrics.session_up.with_label_values(&[&label]).set(0);
    metrics
        .pending_prefixes
        .with_label_values(&[&label])
        .set(routes.len() as i64);
    let dial = dial_backoff(cfg.max_backoff);
    let mut delays = dial.delays();
    // Beside the session for as long as it runs: the router keeps hearing
    // us between connections too.
    let mut discovery = match &cfg.dial.peer {
        Remote::Interface { name, .. } => Some(Discovery::start(name.clone())),
        Remote::Address(_) => None,
    };
    loop {
        let signals = (&mut stop, &mut links);
        match connection(
            &cfg,
            &routes,
            &status,
            signals,
            &metrics,
            discovery.as_mut(),
        )
        .await
        {
            Ended::Stopped => break,
            Ended::Failed(why, was_up) => {
                metrics.session_up.with_label_values(&[&label]).set(0);
                metrics
                    .announced_prefixes
                    .with_label_values(&[&label])
                    .set(0);
                metrics
                    .pending_prefixes
                    .with_label_values(&[&label])
                    .set(routes.len() as i64);
                if was_up {
                    tracing::warn!(peer = cfg.name, address = %cfg.dial.peer, reason = why, "BGP session down");
                    delays = dial.delays();
                } else {
                    tracing::debug!(peer = cfg.name, address = %cfg.dial.peer, reason = why, "BGP connection failed");
                }
                status.send_modify(|s| {
                    s.established = false;
                    s.announced = 0;
                    s.last_error = Some(why);
                });
                tokio::select! {
                    _ = &mut stop => break,
                    () = tokio::time::sleep(delays.next().unwrap_or(cfg.max_backoff)) => {}
                }
            }
        }
    }
    metrics.session_up.with_label_values(&[&label]).set(0);
    status.send_modify(|s| s.established = false);
}

/// The first wait before a connection attempt is made again.
const FIRST_DIAL_RETRY: Duration = Duration::from_millis(250);

/// When a session's connection attempts are made again: a quarter second
/// after the first failure, doubling, with jitter (the speakers of a
/// cluster whose router restarted do not dial it in step), and never
/// longer than `connect_time` (the peer's `connectTime`: as FRR's connect
/// timer, the longest wait between attempts) - the jittered delay is up
/// to twice its base, so the base stops at half of it.
pub(super) fn dial_backoff(connect_time: Duration) -> Backoff {
    let max = connect_time / 2;
    Backoff {
        first: FIRST_DIAL_RETRY.min(max),
        max,
    }
}

#[derive(Debug)]
pub(super) enum ReadError {
    /// The connection failed or closed.
    Io(std::io::Error),
    /// The bytes are not a valid message.
    Malformed(Notification),
}

pub(super) async fn read_message(
    rd: &mut (impl AsyncRead + Unpin),
    ctx: &Context,
) -> Result<Message, ReadError> {
    let mut header = [0u8; bgp::HEADER_LEN];
    rd.read_exact(&mut header).await.map_err(ReadError::Io)?;
    let (_, len) = bgp::decode_header(&header).map_err(ReadError::Malformed)?;
    let mut buf = vec![0u8; len];
    buf[..bgp::HEADER_LEN].copy_from_slice(&header);
    rd.read_exact(&mut buf[bgp::HEADER_LEN..])
        .await
        .map_err(ReadError::Io)?;
    bgp::decode_received(&buf, ctx).map_err(ReadError::Malformed)
}

/// How long OpenSent waits for the peer's OPEN (RFC 4271 suggests a large
/// hold time until it comes); also the bound on a write while no hold
/// time applies.
const OPEN_WAIT: Duration = Duration::from_secs(240);

/// How long the peer may stay silent, or leave a write of ours untaken:
/// the hold time, or [`OPEN_WAIT`] when there is none (zero).
fn hold_or_open_wait(hold: Duration) -> Duration {
    if hold.is_zero() { OPEN_WAIT } else { hold }
}

/// Sends a NOTIFICATION if the socket takes it at once, then closes our
/// side; never waits (a peer that stopped reading gets none). Whether it
/// was sent.
fn notify(wr: &mut (impl AsyncWrite + Unpin), n: &Notification) -> bool {
    let bytes = bgp::encode(&Message::Notification(n.clone()), &Context::default());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut wr = std::pin::Pin::new(wr);
    let sent = matches!(
        wr.as_mut().poll_write(&mut cx, &bytes),
        std::task::Poll::Ready(Ok(k)) if k == bytes.len()
    );
    let _ = wr.poll_shutdown(&mut cx);
    sent
}

/// The router ID when none is configured: the connection's IPv4 address,
/// else the node's, else one derived from the node's IPv6 address.
fn router_id(cfg: &SessionConfig, local: IpAddr) -> Ipv4Addr {
    if let Some(id) = cfg.router_id {
        return id;
    }
    match (local, cfg.node_v4, cfg.node_v6) {
        (IpAddr::V4(a), _, _) => a,
        (_, Some(a), _) => a,
        (IpAddr::V6(a), _, v6) => {
            let o = v6.unwrap_or(a).octets();
            Ipv4Addr::new(o[12], o[13], o[14], o[15].max(1))
        }
    }
}

/// `my_asn` is the session's AS, so with `localASN` set `internal` means
/// the peer is in the local AS (as FRR checks a `local-as` neighbor) and
/// `external` refuses it (FRR refuses only the router's AS there, which
/// would send the peer its own AS in AS_PATH).
fn peer_as_ok(cfg: &SessionConfig, asn: u32) -> bool {
    match cfg.peer_asn {
        PeerAsn::Fixed(a) => a == asn,
        PeerAsn::Internal => asn == cfg.my_asn,
        PeerAsn::External => asn != cfg.my_asn,
    }
}

/// One connection to the peer, from dialling it to its end: the opening
/// exchange, then the Established session.
async fn connection(
    cfg: &SessionConfig,
    routes: &DesiredRoutes,
    status: &watch::Sender<Status>,
    (stop, links): (&mut oneshot::Receiver<Stop>, &mut Links),
    metrics: &BgpMetrics,
    discovery: Option<&mut Discovery>,
) -> Ended {
    let Opened {
        peer,
        rd,
        wr,
        shape,
        negotiated,
    } = match handshake::open(cfg, stop, &links.history, discovery).await {
        Ok(opened) => opened,
        Err(ended) => return ended,
    };
    let Negotiated {
        ctx,
        hold,
        keepalive,
        families,
        graceful_restart,
        extended_next_hop,
        ..
    } = negotiated;
    let label = cfg.label();
    tracing::info!(peer = cfg.name, address = %peer, ibgp = shape.ibgp, hold = ?hold, families = ?families, graceful_restart, extended_next_hop, "BGP session established");
    links.history.established(peer);
    metrics.session_up.with_label_values(&[&label]).set(1);
    status.send_modify(|s| s.established = true);
    // Only a failure from now on closes this session.
    links.path_lost.mark_unchanged();
    established(EstablishedCtx {
        cfg,
        rd,
        wr,
        ctx,
        hold,
        keepalive,
        families,
        graceful_restart,
        shape,
        routes,
        status,
        stop,
        path_lost: &mut links.path_lost,
        first_pass: &mut links.first_pass,
        metrics,
        label,
    })
    .await
}

#[cfg(test)]
mod tests;
