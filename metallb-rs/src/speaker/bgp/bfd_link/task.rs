//! The tasks: one per BFD session (its timers, its packets in and out,
//! its metrics, and the BGP session's `path_lost` signal) and one per
//! listening socket (datagrams to sessions). The session decides; these
//! only carry out what it says.

use super::{Received, Router, lock, sock};
use crate::metrics::{BFD_VRF, BfdMetrics};
use crate::speaker::bfd::{
    Action, ControlPacket, Counters, Params, Profile, Reach, Session, State, check_ttl,
};
use rand::RngExt as _;
use rand::rngs::StdRng;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::ops::RangeInclusive;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::Interest;
use tokio::sync::{mpsc, oneshot, watch};

/// Wait before binding a socket again after a failure.
const REBIND: Duration = Duration::from_secs(10);
/// Pause after a receive error, so a persistent one cannot spin.
const RECV_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// The time the session is handed: tokio's clock, so that a test with a
/// paused clock drives the session too.
fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// What one session's task runs with.
pub(super) struct LinkCtx {
    pub config: super::LinkConfig,
    pub reach: Reach,
    pub params: Params,
    pub discriminator: NonZeroU32,
    /// Where the peer listens.
    pub peer_port: u16,
    pub source_ports: RangeInclusive<u16>,
    /// Where in `source_ports` to start looking for a free port.
    pub port_offset: u16,
    pub packets: mpsc::Receiver<Received>,
    pub profile: watch::Receiver<Profile>,
    pub stop: oneshot::Receiver<()>,
    pub state: watch::Sender<State>,
    /// Bumped when the session goes from Up to Down.
    pub lost: watch::Sender<u64>,
    pub metrics: BfdMetrics,
    pub jitter: StdRng,
}

/// Runs one session until told to stop, then sends AdminDown once.
pub(super) async fn run(ctx: LinkCtx) {
    let LinkCtx {
        config,
        reach,
        params,
        discriminator,
        peer_port,
        source_ports,
        port_offset,
        mut packets,
        mut profile,
        mut stop,
        state,
        lost,
        metrics,
        mut jitter,
    } = ctx;
    let label = config.peer.to_string();
    let out = Out {
        name: &config.name,
        dest: SocketAddr::new(config.peer, peer_port),
        state: &state,
        lost: &lost,
        metrics: &metrics,
        label: &label,
    };
    // The series exist from the start, at zero, as upstream shows them.
    metrics
        .session_up
        .with_label_values(&[label.as_str(), BFD_VRF])
        .set(0);
    out.publish(&mut Counters::default(), Counters::default());
    let socket = loop {
        match sock::sender(config.source, config.peer, &source_ports, port_offset) {
            Ok(s) => break s,
            Err(e) => tracing::error!(
                peer = config.name, address = %config.peer, error = %e,
                "cannot open the BFD socket (retrying in {REBIND:?})"
            ),
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(REBIND) => {}
        }
    };
    let mut session = Session::new(params, discriminator, now());
    let mut published = Counters::default();
    loop {
        let wake = session.next_wake().map(tokio::time::Instant::from_std);
        let actions = tokio::select! {
            _ = &mut stop => {
                let actions = session.admin_down(now());
                out.act(&socket, &actions, session.remote_state());
                out.publish(&mut published, session.counters());
                break;
            }
            Ok(()) = profile.changed() => {
                let p = *profile.borrow_and_update();
                match Params::from_profile(&p, reach) {
                    Ok(params) => session.reconfigure(params),
                    Err(e) => tracing::error!(peer = config.name, error = %e, "BFD profile refused: keeping the previous one"),
                }
                Vec::new()
            }
            Some(r) = packets.recv() => match check_ttl(session.params().hops, r.ttl) {
                Ok(()) => session.on_packet(r.at, &r.packet),
                Err(e) => {
                    tracing::debug!(peer = config.name, error = %e, "BFD packet refused");
                    metrics.packets_dropped.with_label_values(&["ttl"]).inc();
                    Vec::new()
                }
            },
            () = tokio::time::sleep_until(wake.unwrap_or_else(tokio::time::Instant::now)), if wake.is_some() => {
                session.on_timer(now(), jitter.random::<f64>())
            }
        };
        out.act(&socket, &actions, session.remote_state());
        out.publish(&mut published, session.counters());
    }
    metrics
        .session_up
        .with_label_values(&[label.as_str(), BFD_VRF])
        .set(0);
}

/// Where a session's actions go.
struct Out<'a> {
    name: &'a str,
    dest: SocketAddr,
    state: &'a watch::Sender<State>,
    lost: &'a watch::Sender<u64>,
    metrics: &'a BfdMetrics,
    label: &'a str,
}

impl Out<'_> {
    /// Carries out `actions`; `remote` is the peer's state after them.
    fn act(&self, socket: &std::net::UdpSocket, actions: &[Action], remote: State) {
        for a in actions {
            match a {
                // Never waits: a packet the socket cannot take now is lost,
                // as on a congested path, and the next one follows.
                Action::Send(p) => {
                    if let Err(e) = socket.send_to(&p.encode(), self.dest) {
                        tracing::debug!(peer = self.name, dest = %self.dest, error = %e, "sending a BFD packet failed");
                    }
                }
                Action::StateChanged(c) => {
                    self.state.send_replace(c.to);
                    self.metrics
                        .session_up
                        .with_label_values(&[self.label, BFD_VRF])
                        .set(i64::from(c.to == State::Up));
                    if super::closes_bgp(c, remote) {
                        tracing::warn!(peer = self.name, address = %self.dest.ip(), diagnostic = ?c.diagnostic, "BFD session down: closing the BGP session");
                        self.lost.send_modify(|n| *n += 1);
                    } else {
                        tracing::info!(peer = self.name, address = %self.dest.ip(), from = ?c.from, to = ?c.to, "BFD session state changed");
                    }
                }
            }
        }
    }

    /// Moves the counters on by what the session counted since `seen`.
    fn publish(&self, seen: &mut Counters, now: Counters) {
        let labels = [self.label, BFD_VRF];
        let m = self.metrics;
        for (counter, before, after) in [
            (
                &m.control_packet_input,
                seen.control_packets_in,
                now.control_packets_in,
            ),
            (
                &m.control_packet_output,
                seen.control_packets_out,
                now.control_packets_out,
            ),
            (
                &m.echo_packet_input,
                seen.echo_packets_in,
                now.echo_packets_in,
            ),
            (
                &m.echo_packet_output,
                seen.echo_packets_out,
                now.echo_packets_out,
            ),
            (&m.session_up_events, seen.up_events, now.up_events),
            (&m.session_down_events, seen.down_events, now.down_events),
            (
                &m.zebra_notifications,
                seen.notifications,
                now.notifications,
            ),
        ] {
            counter
                .with_label_values(&labels)
                .inc_by(after.saturating_sub(before));
        }
        *seen = now;
    }
}

/// Reads datagrams on `port` of the family and hands each to its session,
/// binding again after a failure.
pub(super) async fn listen(
    v4: bool,
    port: u16,
    router: std::sync::Arc<Mutex<Router>>,
    metrics: BfdMetrics,
) {
    let mut reported = false;
    loop {
        match sock::listener(v4, port) {
            Ok(socket) => {
                reported = false;
                receive(&socket, port, &router, &metrics).await;
            }
            // Said once as an error: it lasts until someone acts.
            Err(e) if !reported => {
                reported = true;
                tracing::error!(port, error = %e, "cannot listen for BFD packets: BFD sessions on this port stay down (retrying every {REBIND:?})");
            }
            Err(e) => tracing::debug!(port, error = %e, "still cannot listen for BFD packets"),
        }
        tokio::time::sleep(REBIND).await;
    }
}

async fn receive(
    socket: &tokio::net::UdpSocket,
    port: u16,
    router: &Mutex<Router>,
    metrics: &BfdMetrics,
) {
    // A Control packet is 24 bytes, 52 with authentication; more is not
    // BFD, and a truncated read fails the length check.
    let mut buf = [0u8; 128];
    loop {
        let read = socket
            .async_io(Interest::READABLE, || sock::recv_with_ttl(socket, &mut buf))
            .await;
        match read {
            Ok((len, from, ttl)) => dispatch(router, metrics, port, from, &buf[..len], ttl),
            Err(e) => {
                tracing::debug!(port, error = %e, "receiving a BFD packet failed");
                tokio::time::sleep(RECV_ERROR_PAUSE).await;
            }
        }
    }
}

/// Hands one datagram to the session it is for, or drops and counts it.
fn dispatch(
    router: &Mutex<Router>,
    metrics: &BfdMetrics,
    port: u16,
    from: SocketAddr,
    data: &[u8],
    ttl: Option<u8>,
) {
    let dropped = |reason: &str| metrics.packets_dropped.with_label_values(&[reason]).inc();
    let Some(ttl) = ttl else {
        return dropped("no_ttl");
    };
    let packet = match ControlPacket::decode(data) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(%from, error = %e, "not a BFD control packet this speaker accepts");
            return dropped("malformed");
        }
    };
    let r = lock(router);
    let discriminator = match packet.your_discriminator {
        0 => r.by_peer.get(&(from.ip(), port)).copied(),
        d => Some(d),
    };
    let route = discriminator.and_then(|d| r.by_discriminator.get(&d));
    let Some(route) = route.filter(|route| route.peer == from.ip() && route.port == port) else {
        return dropped("unknown_session");
    };
    let received = Received {
        packet,
        ttl,
        at: now(),
    };
    match route.tx.try_send(received) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(_)) => dropped("queue_full"),
        Err(mpsc::error::TrySendError::Closed(_)) => dropped("unknown_session"),
    }
}
