//! Connect, OpenSent and OpenConfirm: from dialling the peer to a
//! connection both sides have confirmed, with what the two OPENs agreed.
//! Each wait gives way to the speaker's stop; a failure here is one
//! before Established.

use super::super::socket;
use super::super::unnumbered::Discovery;
use super::super::updates::Shape;
use super::negotiate::{self, Negotiated, negotiate, our_open};
use super::{
    Ended, EstablishedPeers, OPEN_WAIT, ReadError, SessionConfig, Stop, hold_or_open_wait, notify,
    read_message,
};
use crate::net::bgp::{Context, Message, Notification, Open, code};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How long a connection attempt to an unnumbered peer waits for the
/// router's advertisements: three of FRR's intervals.
const DISCOVERY_WAIT: Duration = Duration::from_secs(30);

/// A connection the peer confirmed, and what Established runs with.
pub(super) struct Opened {
    /// The address dialled.
    pub peer: SocketAddr,
    pub rd: BufReader<OwnedReadHalf>,
    pub wr: OwnedWriteHalf,
    /// How our UPDATEs are built on this session.
    pub shape: Shape,
    pub negotiated: Negotiated,
}

/// How an attempt fails before Established.
fn fail(why: String) -> Ended {
    Ended::Failed(why, false)
}

/// Dials the peer and exchanges OPEN and KEEPALIVE; `Err` is how the
/// attempt ended: stopped, or failed before Established.
pub(super) async fn open(
    cfg: &SessionConfig,
    stop: &mut oneshot::Receiver<Stop>,
    history: &EstablishedPeers,
    discovery: Option<&mut Discovery>,
) -> Result<Opened, Ended> {
    let peer = tokio::select! {
        _ = &mut *stop => return Err(Ended::Stopped),
        r = peer_address(&cfg.dial.peer, discovery) => r.map_err(fail)?,
    };
    let stream = tokio::select! {
        _ = &mut *stop => return Err(Ended::Stopped),
        r = socket::connect(&cfg.dial, peer) => {
            r.map_err(|e| fail(format!("connecting to {peer}: {e}")))?
        }
    };
    let local = stream
        .local_addr()
        .map_err(|e| fail(format!("reading the local address: {e}")))?;
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let ours = our_open(cfg, local.ip(), history.of(peer));
    let theirs = open_sent(&mut rd, &mut wr, &ours, stop).await?;
    let negotiated = match negotiate(cfg, &ours, &theirs) {
        Ok(n) => n,
        Err(n) => {
            notify(&mut wr, &n);
            return Err(fail(negotiate::refusal(cfg, &ours, &theirs, &n)));
        }
    };
    let shape = negotiate::shape(cfg, local.ip(), &negotiated);
    open_confirm(&mut rd, &mut wr, &negotiated, stop).await?;
    Ok(Opened {
        peer,
        rd,
        wr,
        shape,
        negotiated,
    })
}

/// The address to dial: the configured one, or the router heard on the
/// interface.
async fn peer_address(
    remote: &socket::Remote,
    discovery: Option<&mut Discovery>,
) -> Result<SocketAddr, String> {
    use socket::Remote;
    match (remote, discovery) {
        (Remote::Address(a), _) => Ok(*a),
        (Remote::Interface { name, port }, Some(d)) => match d.router(DISCOVERY_WAIT).await {
            Some(mut a) => {
                a.set_port(*port);
                Ok(SocketAddr::V6(a))
            }
            None => Err(format!(
                "no IPv6 Router Advertisement heard on {name} within {DISCOVERY_WAIT:?}: \
                 is the router's neighbor on this link an interface one (FRR: neighbor <interface> interface)?"
            )),
        },
        (Remote::Interface { name, .. }, None) => {
            Err(format!("no router discovery running on {name}"))
        }
    }
}

/// OpenSent: sends our OPEN and reads the peer's, both within
/// [`OPEN_WAIT`] (RFC 4271 suggests a large hold time until the peer's
/// OPEN).
async fn open_sent(
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
    ours: &Open,
    stop: &mut oneshot::Receiver<Stop>,
) -> Result<Open, Ended> {
    let open_deadline = Instant::now() + OPEN_WAIT;
    let plain = Context::default();
    let open = Message::Open(ours.clone());
    let sent = tokio::select! {
        _ = &mut *stop => return Err(Ended::Stopped),
        r = send_by(wr, &open, &plain, open_deadline) => r,
    };
    if let Err(e) = sent {
        return Err(fail(format!("sending OPEN: {e}")));
    }
    let theirs = tokio::select! {
        _ = &mut *stop => return Err(Ended::Stopped),
        r = tokio::time::timeout_at(open_deadline, read_message(rd, &plain)) => r,
    };
    match theirs {
        Err(_) => {
            notify(wr, &Notification::new(code::HOLD_TIMER_EXPIRED, 0, []));
            Err(fail("no OPEN from the peer within 240 s".into()))
        }
        Ok(Err(ReadError::Io(e))) => Err(fail(format!("waiting for OPEN: {e}"))),
        Ok(Err(ReadError::Malformed(n))) => {
            notify(wr, &n);
            Err(fail(format!("malformed message from the peer: {n}")))
        }
        Ok(Ok(Message::Open(o))) => Ok(o),
        Ok(Ok(Message::Notification(n))) => Err(fail(format!("peer sent NOTIFICATION: {n}"))),
        Ok(Ok(other)) => {
            notify(
                wr,
                &Notification::new(code::FSM, code::FSM_UNEXPECTED_IN_OPEN_SENT, []),
            );
            Err(fail(format!("expected OPEN, got {other:?}")))
        }
    }
}

/// OpenConfirm: sends our KEEPALIVE and waits for the peer's, within the
/// negotiated hold time.
async fn open_confirm(
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
    negotiated: &Negotiated,
    stop: &mut oneshot::Receiver<Stop>,
) -> Result<(), Ended> {
    let ctx = negotiated.ctx;
    let confirm_deadline = Instant::now() + hold_or_open_wait(negotiated.hold);
    let sent = tokio::select! {
        _ = &mut *stop => return Err(Ended::Stopped),
        r = send_by(wr, &Message::Keepalive, &ctx, confirm_deadline) => r,
    };
    if let Err(e) = sent {
        return Err(fail(format!("sending KEEPALIVE: {e}")));
    }
    let confirmed = tokio::select! {
        _ = &mut *stop => return Err(Ended::Stopped),
        r = tokio::time::timeout_at(confirm_deadline, read_message(rd, &ctx)) => r,
    };
    match confirmed {
        Ok(Ok(Message::Keepalive)) => Ok(()),
        Ok(Ok(Message::Notification(n))) => Err(fail(format!("peer sent NOTIFICATION: {n}"))),
        Ok(Ok(other)) => {
            notify(
                wr,
                &Notification::new(code::FSM, code::FSM_UNEXPECTED_IN_OPEN_CONFIRM, []),
            );
            Err(fail(format!("expected KEEPALIVE, got {other:?}")))
        }
        Ok(Err(ReadError::Io(e))) => Err(fail(format!("waiting for KEEPALIVE: {e}"))),
        Ok(Err(ReadError::Malformed(n))) => {
            notify(wr, &n);
            Err(fail(format!("malformed message from the peer: {n}")))
        }
        Err(_) => {
            notify(wr, &Notification::new(code::HOLD_TIMER_EXPIRED, 0, []));
            Err(fail(
                "no KEEPALIVE from the peer before the hold time".into(),
            ))
        }
    }
}

/// Writes `msg`, failing when the peer has not taken it by `deadline`.
async fn send_by(
    wr: &mut (impl AsyncWrite + Unpin),
    msg: &Message,
    ctx: &Context,
    deadline: Instant,
) -> std::io::Result<()> {
    match tokio::time::timeout_at(deadline, wr.write_all(&crate::net::bgp::encode(msg, ctx))).await
    {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the peer is not reading",
        )),
    }
}
