//! Established: the first table and End-of-RIB when due (see
//! [`graceful`](super::graceful)), then the peer's Adj-RIB-Out kept
//! equal to the desired routes, keepalives, the hold timer,
//! ROUTE-REFRESH.
//!
//! Writes never hold up the loop: one batch at a time is in flight beside
//! it (the batch owns the write half and hands it back when written), so
//! the hold timer, the keepalive ticker and the peer's messages go on
//! while it waits. A batch the peer does not take within the hold time
//! (its receive window stayed full) ends the session as a hold timer
//! expiry does, and the session reconnects with backoff. Route changes
//! that come meanwhile wait in [`DesiredRoutes`], merged per prefix;
//! ROUTE-REFRESH requests wait in [`Refresh`].

use super::super::advertise::RouteAttrs;
use super::super::updates::{self, Shape};
use super::graceful::{self, FirstPass, Opening, Step, Stop};
use super::refresh::{self, Refresh};
use super::{AdjRibOut, DesiredRoutes, Ended, ReadError, SessionConfig, Status};
use crate::metrics::BgpMetrics;
use crate::net::bgp::{self, Afi, Context, Message, Notification, Update, code};
use ipnet::IpNet;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// What an established session runs with.
pub(super) struct EstablishedCtx<'a, R, W> {
    pub cfg: &'a SessionConfig,
    pub rd: R,
    pub wr: W,
    pub ctx: Context,
    /// Negotiated hold time (zero: no hold timer).
    pub hold: Duration,
    /// Negotiated keepalive interval (zero: none).
    pub keepalive: Duration,
    /// The families both sides carry.
    pub families: Vec<Afi>,
    /// Both sides sent the graceful restart capability.
    pub graceful_restart: bool,
    pub shape: Shape,
    pub routes: &'a DesiredRoutes,
    pub status: &'a watch::Sender<Status>,
    pub stop: &'a mut oneshot::Receiver<Stop>,
    /// Changes when BFD sees the path fail.
    pub path_lost: &'a mut watch::Receiver<u64>,
    /// True once the speaker's first pass over the services is complete.
    pub first_pass: &'a mut watch::Receiver<bool>,
    pub metrics: &'a BgpMetrics,
    pub label: String,
}

/// Runs an established session until it is stopped or fails: the first
/// table when due, then whatever comes first of the speaker's stop, the
/// first pass completing, BFD, the peer's messages, the hold timer, a
/// batch landing, the keepalive ticker, a ROUTE-REFRESH falling due and
/// changed routes.
pub(super) async fn established<R, W>(e: EstablishedCtx<'_, R, W>) -> Ended
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let EstablishedCtx {
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
        path_lost,
        first_pass,
        metrics,
        label,
    } = e;
    let (mut rx, _reader) = spawn_reader(rd, ctx);
    let mut out = Out {
        wr: None,
        flight: None,
        bound: super::hold_or_open_wait(hold),
        adj_out: AdjRibOut::default(),
        shape,
        metrics,
        label,
        status,
    };
    let mut hold_deadline = Instant::now() + hold;
    let mut ticker = keepalive_ticker(keepalive).await;
    out.wr = Some(wr);
    let mut opening = Opening::new(&families, graceful_restart);
    out.first_table(
        &mut opening,
        FirstPass::from_flag(*first_pass.borrow()),
        routes,
    );
    if !opening.sent() {
        tracing::info!(peer = cfg.name, address = %cfg.dial.peer, "graceful restart: holding the table and End-of-RIB until every service has been seen once");
    }
    let mut refresh = Refresh::new(Instant::now());
    loop {
        let refresh_at = refresh.due();
        tokio::select! {
            stopped = &mut *stop => return out.close(cfg, stopped, graceful_restart),
            // Also when the speaker is gone (a closed channel): nothing
            // is left to wait for.
            _ = first_pass.wait_for(|done| *done), if !opening.sent() && out.wr.is_some() => {
                out.first_table(&mut opening, FirstPass::Complete, routes);
            }
            // A closed sender (BFD removed from the peer) disables this
            // branch instead of matching.
            Ok(()) = path_lost.changed() => {
                let why = Notification::new(code::CEASE, code::CEASE_BFD_DOWN, []);
                let sent = out.notify(&why);
                return failed(format!("BFD saw the path to the peer fail: {why}; {sent}"));
            }
            msg = rx.recv() => {
                let Some(msg) = msg else {
                    return failed("the connection's reader stopped".into());
                };
                if let Err(ended) = out.receive(cfg, msg, &families, &mut refresh) {
                    return ended;
                }
                hold_deadline = Instant::now() + hold;
            }
            () = tokio::time::sleep_until(hold_deadline), if !hold.is_zero() => {
                out.notify(&Notification::new(code::HOLD_TIMER_EXPIRED, 0, []));
                return failed(format!("hold timer expired: nothing from the peer for {hold:?}"));
            }
            (wr, r, batch) = out.landed() => {
                if let Err(ended) = out.after_landing(wr, r, &batch) {
                    return ended;
                }
            }
            _ = ticker.tick(), if !keepalive.is_zero() => {
                // With a batch in flight the peer gets messages or the
                // session ends: no keepalive is needed behind it.
                if let Some(wr) = out.wr.take() {
                    out.fly(wr, bgp::encode(&Message::Keepalive, &ctx), Batch::Keepalive);
                }
            }
            () = tokio::time::sleep_until(refresh_at.unwrap_or(hold_deadline)), if refresh_at.is_some() && out.wr.is_some() && opening.sent() => {
                out.resend(&mut refresh, routes);
            }
            () = routes.changed(), if out.wr.is_some() && opening.sent() => {
                if let Some(wr) = out.wr.take() {
                    let changes = routes.take_changes();
                    out.sync(wr, &changes, routes.len(), &[]);
                }
            }
        }
    }
}

/// How an established session fails: always after Established.
fn failed(why: String) -> Ended {
    Ended::Failed(why, true)
}

/// Reads the peer's messages in a task of their own, so that a half-read
/// message survives the session's select picking another branch; the
/// task stops with the returned handle.
fn spawn_reader<R>(
    mut rd: R,
    ctx: Context,
) -> (
    mpsc::Receiver<Result<Message, ReadError>>,
    tokio_util::task::AbortOnDropHandle<()>,
)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Result<Message, ReadError>>(16);
    let reader = tokio::spawn(async move {
        loop {
            let r = super::read_message(&mut rd, &ctx).await;
            let end = r.is_err();
            if tx.send(r).await.is_err() || end {
                break;
            }
        }
    });
    (rx, tokio_util::task::AbortOnDropHandle::new(reader))
}

/// The keepalive ticker, its immediate first tick taken (an hour apart
/// when keepalives are off: its branch is disabled then anyway).
async fn keepalive_ticker(keepalive: Duration) -> tokio::time::Interval {
    let mut ticker = tokio::time::interval(if keepalive.is_zero() {
        Duration::from_secs(3600)
    } else {
        keepalive
    });
    ticker.tick().await;
    ticker
}

/// What a batch in flight carries, and what to record once it is written.
enum Batch {
    Keepalive,
    Updates {
        /// Prefixes the peer should have (the pending metric).
        desired: usize,
        /// What `metallb_bgp_updates_total` grows by.
        counted: u64,
        /// UPDATE messages.
        messages: usize,
    },
}

impl Batch {
    fn what(&self) -> &'static str {
        match self {
            Batch::Keepalive => "KEEPALIVE",
            Batch::Updates { .. } => "UPDATEs",
        }
    }
}

/// Why a batch was not written.
enum WriteError {
    Io(std::io::Error),
    /// Not written within the bound.
    Stalled,
}

/// A batch being written: hands the write half back when done.
type Flight<W> = Pin<Box<dyn Future<Output = (W, Result<(), WriteError>, Batch)> + Send>>;

/// The sending side of an established session.
struct Out<'a, W> {
    /// The write half while no batch is in flight.
    wr: Option<W>,
    flight: Option<Flight<W>>,
    /// How long a batch may take: the hold time.
    bound: Duration,
    adj_out: AdjRibOut,
    shape: Shape,
    metrics: &'a BgpMetrics,
    label: String,
    status: &'a watch::Sender<Status>,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Out<'_, W> {
    /// Ends the session as the speaker asked: with a NOTIFICATION, or,
    /// for a graceful restart, without one so the peer keeps our routes.
    fn close(
        &mut self,
        cfg: &SessionConfig,
        stopped: Result<Stop, oneshot::error::RecvError>,
        graceful_restart: bool,
    ) -> Ended {
        let stopped = stopped.unwrap_or_else(|_| {
            Stop::Cease(Notification::new(
                code::CEASE,
                code::CEASE_ADMIN_SHUTDOWN,
                [],
            ))
        });
        match graceful::closing(&stopped, graceful_restart) {
            Some(why) => {
                tracing::info!(peer = cfg.name, address = %cfg.dial.peer, reason = %why, "closing BGP session");
                self.notify(&why);
            }
            None => tracing::info!(
                peer = cfg.name, address = %cfg.dial.peer,
                "closing BGP session without NOTIFICATION: graceful restart, the peer keeps our routes until we are back"
            ),
        }
        Ended::Stopped
    }

    /// Takes in what the peer sent: a KEEPALIVE or UPDATE only shows it
    /// is there, a ROUTE-REFRESH queues its family; anything else, or a
    /// read that failed, ends the session.
    fn receive(
        &mut self,
        cfg: &SessionConfig,
        msg: Result<Message, ReadError>,
        families: &[Afi],
        refresh: &mut Refresh,
    ) -> Result<(), Ended> {
        match msg {
            Ok(Message::Keepalive | Message::Update(_)) => Ok(()),
            Ok(Message::RouteRefresh { afi, safi }) => {
                match refresh::family(afi, safi, families) {
                    Some(f) => refresh.request(f),
                    None => tracing::debug!(
                        peer = cfg.name, afi, safi, negotiated = ?families,
                        "ignoring ROUTE-REFRESH for a family this session does not carry"
                    ),
                }
                Ok(())
            }
            Ok(Message::Notification(n)) => Err(failed(format!("peer sent NOTIFICATION: {n}"))),
            Ok(Message::Open(_)) => {
                // RFC 6608: unexpected message in Established.
                self.notify(&Notification::new(
                    code::FSM,
                    code::FSM_UNEXPECTED_IN_ESTABLISHED,
                    [1],
                ));
                Err(failed("the peer sent OPEN in Established".into()))
            }
            Err(ReadError::Malformed(n)) => {
                let sent = self.notify(&n);
                Err(failed(format!(
                    "malformed message from the peer: {n}; {sent}"
                )))
            }
            Err(ReadError::Io(e)) => Err(failed(format!("connection lost: {e}"))),
        }
    }

    /// Takes the write half back from a batch that landed, or ends the
    /// session when it could not be written.
    fn after_landing(
        &mut self,
        wr: W,
        r: Result<(), WriteError>,
        batch: &Batch,
    ) -> Result<(), Ended> {
        match r {
            Ok(()) => {
                self.done(wr, batch);
                Ok(())
            }
            Err(WriteError::Io(e)) => Err(failed(format!("sending {}: {e}", batch.what()))),
            Err(WriteError::Stalled) => Err(failed(format!(
                "the peer took none of our {} for {:?} (it stopped reading, its receive window is full): closed without NOTIFICATION",
                batch.what(),
                self.bound
            ))),
        }
    }

    /// Sends the families a ROUTE-REFRESH asked for again from scratch;
    /// the write half must be free.
    fn resend(&mut self, refresh: &mut Refresh, routes: &DesiredRoutes) {
        let Some(wr) = self.wr.take() else { return };
        for f in refresh.take(Instant::now()) {
            self.adj_out.forget_family(f == Afi::Ipv6);
        }
        let desired = routes.snapshot();
        let count = desired.len();
        let all = self.adj_out.everything(desired);
        self.sync(wr, &all, count, &[]);
    }

    /// Sends the whole table and End-of-RIB if `opening` says they are
    /// due; the write half must be free.
    fn first_table(&mut self, opening: &mut Opening, pass: FirstPass, routes: &DesiredRoutes) {
        let Some(wr) = self.wr.take() else { return };
        match opening.step(pass) {
            Step::Table(end_of_rib) => {
                let desired = routes.snapshot();
                let count = desired.len();
                let all = self.adj_out.everything(desired);
                self.sync(wr, &all, count, &end_of_rib);
            }
            Step::Wait | Step::Changes => self.wr = Some(wr),
        }
    }

    /// Starts bringing the peer in line with `changes` (see
    /// [`AdjRibOut::diff`]), then sends `then` (End-of-RIB markers).
    /// `desired` counts the prefixes the peer should have (the pending
    /// metric, as upstream sets it).
    fn sync(
        &mut self,
        wr: W,
        changes: &[(IpNet, Option<RouteAttrs>)],
        desired: usize,
        then: &[Update],
    ) {
        let diff = self.adj_out.diff(changes, &self.shape);
        if diff.is_empty() && then.is_empty() {
            self.done(
                wr,
                &Batch::Updates {
                    desired,
                    counted: 0,
                    messages: 0,
                },
            );
            return;
        }
        let mut msgs = if diff.is_empty() {
            Vec::new()
        } else {
            updates::build(&diff.announce, &diff.withdraw, &self.shape)
        };
        msgs.extend_from_slice(then);
        let ctx = self.shape.context();
        let mut bytes = Vec::new();
        for u in &msgs {
            bytes.extend(bgp::encode(&Message::Update(u.clone()), &ctx));
        }
        // End-of-RIB is not counted: upstream sends none.
        let batch = Batch::Updates {
            desired,
            counted: crate::metrics::upstream_updates(diff.announce.len(), diff.withdraw.len()),
            messages: msgs.len(),
        };
        // Recorded now: if the batch fails, the session ends and this
        // Adj-RIB-Out with it.
        self.adj_out.apply(&diff);
        self.fly(wr, bytes, batch);
    }

    /// Puts `bytes` in flight, bounded by the hold time.
    fn fly(&mut self, mut wr: W, bytes: Vec<u8>, batch: Batch) {
        let bound = self.bound;
        self.flight = Some(Box::pin(async move {
            let r = match tokio::time::timeout(bound, wr.write_all(&bytes)).await {
                Ok(r) => r.map_err(WriteError::Io),
                Err(_) => Err(WriteError::Stalled),
            };
            (wr, r, batch)
        }));
    }

    /// Resolves when the batch in flight is done (never when there is
    /// none). Cancel-safe: the batch stays in flight.
    async fn landed(&mut self) -> (W, Result<(), WriteError>, Batch) {
        let Some(f) = self.flight.as_mut() else {
            return std::future::pending().await;
        };
        let r = f.await;
        self.flight = None;
        r
    }

    /// Takes the write half back after `batch` was written.
    fn done(&mut self, wr: W, batch: &Batch) {
        self.wr = Some(wr);
        let Batch::Updates {
            desired,
            counted,
            messages,
        } = *batch
        else {
            return;
        };
        let label = self.label.as_str();
        let announced = self.adj_out.len();
        if messages > 0 {
            self.metrics
                .updates
                .with_label_values(&[label])
                .inc_by(counted);
            tracing::debug!(peer = label, announced, updates = messages, "sent UPDATEs");
        }
        self.metrics
            .announced_prefixes
            .with_label_values(&[label])
            .set(announced as i64);
        self.metrics
            .pending_prefixes
            .with_label_values(&[label])
            .set(desired as i64);
        self.status.send_modify(|s| s.announced = announced);
    }

    /// Finishes the batch in flight if the socket takes the rest of it
    /// now (a keepalive nearly always does: it was put in flight but not
    /// yet polled), so a NOTIFICATION can follow it.
    fn try_land(&mut self) {
        let Some(f) = self.flight.as_mut() else {
            return;
        };
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready((wr, r, batch)) = f.as_mut().poll(&mut cx) {
            self.flight = None;
            if r.is_ok() {
                self.done(wr, &batch);
            }
        }
    }

    /// Sends `n` if no batch is left in flight (one would be cut
    /// mid-message) and it fits in the socket's buffer now; says whether
    /// it went.
    fn notify(&mut self, n: &Notification) -> &'static str {
        self.try_land();
        let sent = self.wr.as_mut().is_some_and(|wr| super::notify(wr, n));
        if sent {
            "sent NOTIFICATION"
        } else {
            "no NOTIFICATION could be sent"
        }
    }
}
