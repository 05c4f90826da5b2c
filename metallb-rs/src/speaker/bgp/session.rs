//! One BGP session (RFC 4271's finite state machine, active side only,
//! as upstream's native speaker): connect, OPEN, KEEPALIVE, Established;
//! then keep the peer's Adj-RIB-Out equal to the routes it is given,
//! keepalives, the hold timer, and reconnection with backoff. A malformed
//! message from the peer ends the session with the NOTIFICATION the
//! decoder named; nothing the peer sends can stop the speaker.

use super::advertise::RouteAttrs;
use super::socket::{self, Dial};
use super::updates::{self, Shape};
use crate::config::PeerAsn;
use crate::metrics::BgpMetrics;
use crate::net::bgp::{self, Afi, Context, Message, Notification, code};
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

mod adj_out;
mod negotiate;
pub use adj_out::{AdjRibOut, Diff};
pub use negotiate::{Negotiated, negotiate, our_open};

/// The prefixes a peer should have, with their attributes.
pub type Table = BTreeMap<IpNet, RouteAttrs>;

/// Everything a session needs to know about its peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// The BGPPeer's name.
    pub name: String,
    /// How to connect.
    pub dial: Dial,
    /// Our AS.
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
    stop: Option<oneshot::Sender<Notification>>,
    task: tokio::task::JoinHandle<()>,
}

impl Session {
    /// Starts connecting to the peer, which should have `routes` (the
    /// caller may go on changing them).
    pub fn start(config: SessionConfig, routes: DesiredRoutes, metrics: BgpMetrics) -> Session {
        let (status_tx, status_rx) = watch::channel(Status::default());
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = tokio::spawn(run(
            config.clone(),
            routes.clone(),
            status_tx,
            stop_rx,
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
    pub async fn stop(mut self, why: Notification) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(why);
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

async fn run(
    cfg: SessionConfig,
    routes: DesiredRoutes,
    status: watch::Sender<Status>,
    mut stop: oneshot::Receiver<Notification>,
    metrics: BgpMetrics,
) {
    let label = cfg.label();
    metrics.session_up.with_label_values(&[&label]).set(0);
    metrics
        .pending_prefixes
        .with_label_values(&[&label])
        .set(routes.len() as i64);
    let first = Duration::from_millis(500);
    let mut backoff = first;
    loop {
        match connection(&cfg, &routes, &status, &mut stop, &metrics).await {
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
                    backoff = first;
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
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(cfg.max_backoff.max(first));
            }
        }
    }
    metrics.session_up.with_label_values(&[&label]).set(0);
    status.send_modify(|s| s.established = false);
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

async fn send(wr: &mut OwnedWriteHalf, msg: &Message, ctx: &Context) -> std::io::Result<()> {
    wr.write_all(&bgp::encode(msg, ctx)).await
}

/// Sends a NOTIFICATION and gives it a moment to leave before the close.
async fn notify(wr: &mut OwnedWriteHalf, n: &Notification) {
    let _ = tokio::time::timeout(Duration::from_millis(500), async {
        let _ = send(wr, &Message::Notification(n.clone()), &Context::default()).await;
        let _ = wr.shutdown().await;
    })
    .await;
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

fn peer_as_ok(cfg: &SessionConfig, asn: u32) -> bool {
    match cfg.peer_asn {
        PeerAsn::Fixed(a) => a == asn,
        PeerAsn::Internal => asn == cfg.my_asn,
        PeerAsn::External => asn != cfg.my_asn,
    }
}

async fn connection(
    cfg: &SessionConfig,
    routes: &DesiredRoutes,
    status: &watch::Sender<Status>,
    stop: &mut oneshot::Receiver<Notification>,
    metrics: &BgpMetrics,
) -> Ended {
    let fail = |why: String| Ended::Failed(why, false);
    let stream = tokio::select! {
        _ = &mut *stop => return Ended::Stopped,
        r = socket::connect(&cfg.dial) => match r {
            Ok(s) => s,
            Err(e) => return fail(format!("connecting to {}: {e}", cfg.dial.peer)),
        },
    };
    let local = match stream.local_addr() {
        Ok(a) => a,
        Err(e) => return fail(format!("reading the local address: {e}")),
    };
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let ours = our_open(cfg, local.ip());
    if let Err(e) = send(&mut wr, &Message::Open(ours.clone()), &Context::default()).await {
        return fail(format!("sending OPEN: {e}"));
    }
    // OpenSent: RFC 4271 suggests a large hold time until the peer's OPEN.
    let plain = Context::default();
    let theirs = tokio::select! {
        _ = &mut *stop => return Ended::Stopped,
        r = tokio::time::timeout(Duration::from_secs(240), read_message(&mut rd, &plain)) => r,
    };
    let theirs = match theirs {
        Err(_) => {
            notify(&mut wr, &Notification::new(code::HOLD_TIMER_EXPIRED, 0, [])).await;
            return fail("no OPEN from the peer within 240 s".into());
        }
        Ok(Err(ReadError::Io(e))) => return fail(format!("waiting for OPEN: {e}")),
        Ok(Err(ReadError::Malformed(n))) => {
            notify(&mut wr, &n).await;
            return fail(format!("malformed message from the peer: {n}"));
        }
        Ok(Ok(Message::Open(o))) => o,
        Ok(Ok(Message::Notification(n))) => return fail(format!("peer sent NOTIFICATION: {n}")),
        Ok(Ok(other)) => {
            notify(
                &mut wr,
                &Notification::new(code::FSM, code::FSM_UNEXPECTED_IN_OPEN_SENT, []),
            )
            .await;
            return fail(format!("expected OPEN, got {other:?}"));
        }
    };
    let Negotiated {
        ctx,
        ibgp,
        hold,
        keepalive,
        families,
    } = match negotiate(cfg, &ours, &theirs) {
        Ok(n) => n,
        Err(n) => {
            notify(&mut wr, &n).await;
            return fail(negotiate::refusal(cfg, &ours, &theirs, &n));
        }
    };
    if let Err(e) = send(&mut wr, &Message::Keepalive, &ctx).await {
        return fail(format!("sending KEEPALIVE: {e}"));
    }
    // OpenConfirm: wait for the peer's KEEPALIVE.
    let confirm_wait = if hold.is_zero() {
        Duration::from_secs(240)
    } else {
        hold
    };
    let confirmed = tokio::select! {
        _ = &mut *stop => return Ended::Stopped,
        r = tokio::time::timeout(confirm_wait, read_message(&mut rd, &ctx)) => r,
    };
    match confirmed {
        Ok(Ok(Message::Keepalive)) => {}
        Ok(Ok(Message::Notification(n))) => return fail(format!("peer sent NOTIFICATION: {n}")),
        Ok(Ok(other)) => {
            notify(
                &mut wr,
                &Notification::new(code::FSM, code::FSM_UNEXPECTED_IN_OPEN_CONFIRM, []),
            )
            .await;
            return fail(format!("expected KEEPALIVE, got {other:?}"));
        }
        Ok(Err(ReadError::Io(e))) => return fail(format!("waiting for KEEPALIVE: {e}")),
        Ok(Err(ReadError::Malformed(n))) => {
            notify(&mut wr, &n).await;
            return fail(format!("malformed message from the peer: {n}"));
        }
        Err(_) => {
            notify(&mut wr, &Notification::new(code::HOLD_TIMER_EXPIRED, 0, [])).await;
            return fail("no KEEPALIVE from the peer before the hold time".into());
        }
    }

    let label = cfg.label();
    tracing::info!(peer = cfg.name, address = %cfg.dial.peer, ibgp, hold = ?hold, families = ?families, "BGP session established");
    metrics.session_up.with_label_values(&[&label]).set(1);
    status.send_modify(|s| s.established = true);
    let shape = Shape {
        my_asn: cfg.my_asn,
        ibgp,
        four_octet_as: ctx.four_octet_as,
        next_hop_v4: match local.ip() {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => cfg.node_v4,
        }
        .filter(|_| families.contains(&Afi::Ipv4)),
        next_hop_v6: match local.ip() {
            IpAddr::V6(a) if !a.is_unicast_link_local() => Some(a),
            _ => cfg.node_v6,
        }
        .filter(|_| families.contains(&Afi::Ipv6)),
    };
    established(EstablishedCtx {
        cfg,
        rd,
        wr,
        ctx,
        hold,
        keepalive,
        shape,
        routes,
        status,
        stop,
        metrics,
        label,
    })
    .await
}

struct EstablishedCtx<'a> {
    cfg: &'a SessionConfig,
    rd: BufReader<tokio::net::tcp::OwnedReadHalf>,
    wr: OwnedWriteHalf,
    ctx: Context,
    hold: Duration,
    keepalive: Duration,
    shape: Shape,
    routes: &'a DesiredRoutes,
    status: &'a watch::Sender<Status>,
    stop: &'a mut oneshot::Receiver<Notification>,
    metrics: &'a BgpMetrics,
    label: String,
}

async fn established(e: EstablishedCtx<'_>) -> Ended {
    let EstablishedCtx { mut rd, wr, .. } = e;
    let (cfg, ctx, hold, keepalive, shape) = (e.cfg, e.ctx, e.hold, e.keepalive, e.shape);
    let (routes, status, stop, metrics, label) = (e.routes, e.status, e.stop, e.metrics, e.label);
    let failed = |why: String| Ended::Failed(why, true);
    // Reading runs in its own task: a half-read message must survive the
    // select below picking another branch.
    let (tx, mut rx) = mpsc::channel::<Result<Message, ReadError>>(16);
    let reader = tokio::spawn(async move {
        loop {
            let r = read_message(&mut rd, &ctx).await;
            let end = r.is_err();
            if tx.send(r).await.is_err() || end {
                break;
            }
        }
    });
    let _reader = tokio_util::task::AbortOnDropHandle::new(reader);
    let mut out = Out {
        wr,
        adj_out: AdjRibOut::default(),
        shape,
        metrics,
        label,
        status,
    };
    let mut hold_deadline = Instant::now() + hold;
    let mut ticker = tokio::time::interval(if keepalive.is_zero() {
        Duration::from_secs(3600)
    } else {
        keepalive
    });
    ticker.tick().await;
    let desired = routes.snapshot();
    let count = desired.len();
    let all = out.adj_out.everything(desired);
    if let Err(e) = out.sync(&all, count).await {
        return failed(format!("sending UPDATEs: {e}"));
    }
    loop {
        tokio::select! {
            why = &mut *stop => {
                let why = why.unwrap_or_else(|_| Notification::new(code::CEASE, code::CEASE_ADMIN_SHUTDOWN, []));
                tracing::info!(peer = cfg.name, address = %cfg.dial.peer, reason = %why, "closing BGP session");
                notify(&mut out.wr, &why).await;
                return Ended::Stopped;
            }
            msg = rx.recv() => match msg {
                None => return failed("the connection's reader stopped".into()),
                Some(Ok(Message::Keepalive | Message::Update(_))) => {
                    hold_deadline = Instant::now() + hold;
                }
                Some(Ok(Message::RouteRefresh { afi, .. })) => {
                    hold_deadline = Instant::now() + hold;
                    // Send that family again from scratch.
                    let v6 = afi == Afi::Ipv6.number();
                    out.adj_out.forget_family(v6);
                    let desired = routes.snapshot();
                    let count = desired.len();
                    let all = out.adj_out.everything(desired);
                    if let Err(e) = out.sync(&all, count).await {
                        return failed(format!("sending UPDATEs: {e}"));
                    }
                }
                Some(Ok(Message::Notification(n))) => return failed(format!("peer sent NOTIFICATION: {n}")),
                Some(Ok(Message::Open(_))) => {
                    // RFC 6608: unexpected message in Established.
                    let n = Notification::new(code::FSM, code::FSM_UNEXPECTED_IN_ESTABLISHED, [1]);
                    notify(&mut out.wr, &n).await;
                    return failed("the peer sent OPEN in Established".into());
                }
                Some(Err(ReadError::Malformed(n))) => {
                    notify(&mut out.wr, &n).await;
                    return failed(format!("malformed message from the peer: {n}; sent NOTIFICATION"));
                }
                Some(Err(ReadError::Io(e))) => return failed(format!("connection lost: {e}")),
            },
            () = tokio::time::sleep_until(hold_deadline), if !hold.is_zero() => {
                notify(&mut out.wr, &Notification::new(code::HOLD_TIMER_EXPIRED, 0, [])).await;
                return failed(format!("hold timer expired: nothing from the peer for {hold:?}"));
            }
            _ = ticker.tick(), if !keepalive.is_zero() => {
                if let Err(e) = send(&mut out.wr, &Message::Keepalive, &ctx).await {
                    return failed(format!("sending KEEPALIVE: {e}"));
                }
            }
            () = routes.changed() => {
                let changes = routes.take_changes();
                if let Err(e) = out.sync(&changes, routes.len()).await {
                    return failed(format!("sending UPDATEs: {e}"));
                }
            }
        }
    }
}

/// The sending side of an established session.
struct Out<'a> {
    wr: OwnedWriteHalf,
    adj_out: AdjRibOut,
    shape: Shape,
    metrics: &'a BgpMetrics,
    label: String,
    status: &'a watch::Sender<Status>,
}

impl Out<'_> {
    /// Brings the peer in line with `changes` (see [`AdjRibOut::diff`]).
    /// `desired` counts the prefixes the peer should have (the pending
    /// metric, as upstream sets it).
    async fn sync(
        &mut self,
        changes: &[(IpNet, Option<RouteAttrs>)],
        desired: usize,
    ) -> std::io::Result<()> {
        let diff = self.adj_out.diff(changes, &self.shape);
        let label = self.label.as_str();
        if !diff.is_empty() {
            let msgs = updates::build(&diff.announce, &diff.withdraw, &self.shape);
            let ctx = self.shape.context();
            let mut bytes = Vec::new();
            for u in &msgs {
                bytes.extend(bgp::encode(&Message::Update(u.clone()), &ctx));
            }
            self.wr.write_all(&bytes).await?;
            self.metrics.updates.with_label_values(&[label]).inc_by(
                crate::metrics::upstream_updates(diff.announce.len(), diff.withdraw.len()),
            );
            self.adj_out.apply(&diff);
            tracing::debug!(
                peer = label,
                announced = self.adj_out.len(),
                updates = msgs.len(),
                "sent UPDATEs"
            );
        }
        let announced = self.adj_out.len();
        self.metrics
            .announced_prefixes
            .with_label_values(&[label])
            .set(announced as i64);
        self.metrics
            .pending_prefixes
            .with_label_values(&[label])
            .set(desired as i64);
        self.status.send_modify(|s| s.announced = announced);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
