//! The gossip task: one tokio task owns the socket and the SWIM state
//! ([`foca::Foca`]) and reacts to datagrams, timers and the handle's
//! commands, one at a time - so nothing is shared but the view (a watch
//! channel) and the drop counters.
//!
//! The SWIM state and every decision about it live in [`Gossip`]
//! (without I/O); this task stamps, seals, sends and opens its frames,
//! checks stamps against replays, sleeps until its next timer and
//! publishes its view.

use super::crypto::{Cipher, OpenError};
use super::gossip::Gossip;
use super::replay::{Replay, Verdict};
use super::wire::{Frame, Identity, Stamp, plausible_epoch, wall_millis};
use super::{Command, Counters, DropReason, MAX_DATAGRAM, MembershipError, Timing, View};
use rand::SeedableRng;
use rand::rngs::{StdRng, SysRng};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

/// Receive buffer: the largest UDP payload, so an oversized datagram is
/// seen whole (and dropped as not ours) rather than cut to look short.
const RECV_BUFFER: usize = 65536;
/// Pause after a failed receive, so a persistent socket error does not
/// spin the task.
const RECV_ERROR_PAUSE: Duration = Duration::from_millis(50);
/// How many times a leave is sent, at most, within the leave timeout.
const LEAVE_ROUNDS: u32 = 5;

/// Everything the task starts from.
pub(super) struct Parts {
    pub(super) identity: Identity,
    pub(super) foca_config: foca::Config,
    pub(super) timing: Timing,
    pub(super) socket: UdpSocket,
    pub(super) cipher: Cipher,
    pub(super) view: watch::Sender<View>,
    pub(super) counters: Arc<Counters>,
}

/// The socket side: stamps, seals, sends, opens and counts what it
/// drops.
struct Transport {
    socket: UdpSocket,
    cipher: Cipher,
    counters: Arc<Counters>,
    /// This node's name, in every stamp.
    node: String,
    /// This run, in every stamp.
    epoch: u64,
    /// The next stamp's sequence number.
    seq: AtomicU64,
}

impl Transport {
    /// Stamps and seals `frame` and sends it to `to`; failures are
    /// logged, not fatal (UDP is best effort, and SWIM copes with loss).
    async fn send(&self, to: SocketAddr, frame: &[u8]) {
        let stamp = Stamp {
            node: self.node.to_string(),
            epoch: self.epoch,
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
        };
        let plaintext = match stamp.prepend(frame) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(%to, error = %e, "could not stamp a gossip frame");
                return;
            }
        };
        let datagram = match self.cipher.seal(&plaintext) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(%to, error = %e, "gossip datagram not sent");
                return;
            }
        };
        if let Err(e) = self.socket.send_to(&datagram, to).await {
            tracing::debug!(%to, error = %e, "gossip datagram not sent");
        }
    }

    /// The plaintext of a received datagram, or `None` (counted) when it
    /// is not a datagram of this cluster.
    fn open(&self, datagram: &[u8], from: SocketAddr) -> Option<Vec<u8>> {
        if datagram.len() > MAX_DATAGRAM {
            tracing::debug!(%from, len = datagram.len(), "dropped gossip datagram: larger than any speaker sends");
            self.counters.count(DropReason::Malformed);
            return None;
        }
        match self.cipher.open(datagram) {
            Ok(plaintext) => Some(plaintext),
            Err(e) => {
                let reason = match e {
                    OpenError::Auth => DropReason::Auth,
                    OpenError::TooShort(_) | OpenError::Version(_) => DropReason::Malformed,
                };
                tracing::debug!(%from, error = %e, "dropped gossip datagram");
                self.counters.count(reason);
                None
            }
        }
    }
}

/// The gossip loop's state.
pub(super) struct Runner {
    gossip: Gossip,
    transport: Transport,
    timing: Timing,
    view: watch::Sender<View>,
    replay: Replay,
}

enum Event {
    Datagram(usize, SocketAddr),
    RecvError(std::io::Error),
    Command(Option<Command>),
    Timers,
}

impl Runner {
    pub(super) fn new(parts: Parts) -> Result<Self, MembershipError> {
        let Parts {
            identity,
            foca_config,
            timing,
            socket,
            cipher,
            view,
            counters,
        } = parts;
        let rng = StdRng::try_from_rng(&mut SysRng)
            .map_err(|e| MembershipError::Random(e.to_string()))?;
        let node = identity.node.to_string();
        let epoch = identity.bump;
        Ok(Self {
            gossip: Gossip::with_identity(
                identity,
                foca_config,
                timing.clone(),
                rng,
                Instant::now(),
            )?,
            transport: Transport {
                socket,
                cipher,
                counters,
                node,
                epoch,
                seq: AtomicU64::new(0),
            },
            timing,
            view,
            replay: Replay::default(),
        })
    }

    pub(super) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut buf = vec![0u8; RECV_BUFFER];
        loop {
            let wake = tokio::time::Instant::from_std(self.gossip.next_wakeup());
            let event = tokio::select! {
                received = self.transport.socket.recv_from(&mut buf) => match received {
                    Ok((len, from)) => Event::Datagram(len, from),
                    Err(e) => Event::RecvError(e),
                },
                command = commands.recv() => Event::Command(command),
                () = tokio::time::sleep_until(wake) => Event::Timers,
            };
            match event {
                Event::Datagram(len, from) => self.on_datagram(&buf[..len], from),
                Event::RecvError(e) => {
                    tracing::warn!(error = %e, "gossip socket receive failed");
                    tokio::time::sleep(RECV_ERROR_PAUSE).await;
                }
                Event::Command(Some(Command::Join(seeds))) => {
                    self.gossip.join(seeds, Instant::now());
                    // Replay windows are kept for nodes only: a name that
                    // is no seed and no member has nothing to protect.
                    let gossip = &self.gossip;
                    self.replay.retain(|node| gossip.knows(node));
                }
                Event::Command(Some(Command::Keys(keyring))) => {
                    tracing::info!(?keyring, "gossip keys changed");
                    self.transport.cipher = Cipher::with_keyring(&keyring, super::CLUSTER_LABEL);
                }
                Event::Command(Some(Command::Leave(done))) => {
                    self.leave(&mut buf).await;
                    let _ = done.send(());
                    return;
                }
                Event::Command(None) => return,
                Event::Timers => {
                    let probes = self.gossip.probes();
                    self.gossip.tick(Instant::now());
                    for _ in probes..self.gossip.probes() {
                        self.transport.counters.probe();
                    }
                }
            }
            self.flush().await;
        }
    }

    /// The stamp and frame of a received datagram, or `None` (counted)
    /// when it is not a fresh datagram of another member of this
    /// cluster: from an unknown address (before any decryption),
    /// unopenable, unstamped, in this node's own name or replayed.
    fn accept(&mut self, datagram: &[u8], from: SocketAddr) -> Option<(Stamp, Vec<u8>)> {
        if !self.gossip.is_node_address(from.ip()) {
            tracing::debug!(%from, "dropped gossip datagram: not from a node's address");
            self.transport.counters.count(DropReason::UnknownSender);
            return None;
        }
        let plaintext = self.transport.open(datagram, from)?;
        let (stamp, frame) = match Stamp::split(&plaintext) {
            Ok(split) => split,
            Err(e) => {
                tracing::debug!(%from, error = %e, "dropped gossip datagram");
                self.transport.counters.count(DropReason::Decode);
                return None;
            }
        };
        if !self.gossip.speaks_from(&stamp.node, from.ip()) {
            tracing::debug!(%from, sender = %stamp.node, "dropped gossip datagram: not from the sender's own Node address");
            self.transport.counters.count(DropReason::Rejected);
            return None;
        }
        if !plausible_epoch(stamp.epoch, wall_millis()) {
            tracing::debug!(%from, sender = %stamp.node, epoch = stamp.epoch, "dropped gossip datagram: its run starts implausibly far in the future");
            self.transport.counters.count(DropReason::Rejected);
            return None;
        }
        if *stamp.node == *self.gossip.identity().node {
            tracing::debug!(%from, "dropped gossip datagram in this node's name: two speakers with one node name?");
            self.transport.counters.count(DropReason::Rejected);
            return None;
        }
        if self.replay.check(&stamp.node, stamp.epoch, stamp.seq) == Verdict::Replayed {
            tracing::debug!(%from, sender = %stamp.node, seq = stamp.seq, "dropped replayed gossip datagram");
            self.transport.counters.count(DropReason::Replayed);
            return None;
        }
        let frame = frame.to_vec();
        Some((stamp, frame))
    }

    fn on_datagram(&mut self, datagram: &[u8], from: SocketAddr) {
        let Some((stamp, frame)) = self.accept(datagram, from) else {
            return;
        };
        if let Err(reason) = self
            .gossip
            .receive(&stamp.node, &frame, from, Instant::now())
        {
            self.transport.counters.count(reason);
        }
    }

    /// Sends what the gossip queued, forgets the replay windows of
    /// forgotten members and publishes the view when it changed.
    async fn flush(&mut self) {
        for node in self.gossip.take_forgotten() {
            self.replay.forget(&node);
        }
        for (to, frame) in self.gossip.take_outgoing() {
            self.transport.send(to, &frame).await;
        }
        let view = self.gossip.view();
        self.view.send_if_modified(|published| {
            let changed = published != view;
            if changed {
                published.clone_from(view);
            }
            changed
        });
    }

    /// Leaves: foca declares itself down and gossips it, and every known
    /// member gets a first-hand leave, resent until it confirms or the
    /// leave timeout passes.
    async fn leave(&mut self, buf: &mut [u8]) {
        let me = self.gossip.identity().clone();
        let (frame, mut waiting) = match self.gossip.begin_leave(Instant::now()) {
            Ok(started) => started,
            Err(e) => {
                tracing::warn!(error = %e, "could not encode the leave; the others will detect this speaker as failed");
                self.flush().await;
                return;
            }
        };
        self.flush().await;
        let deadline = tokio::time::Instant::now() + self.timing.leave_timeout;
        let round = self.timing.leave_timeout / LEAVE_ROUNDS;
        while !waiting.is_empty() && tokio::time::Instant::now() < deadline {
            for to in waiting.values() {
                self.transport.send(*to, &frame).await;
            }
            let round_end = deadline.min(tokio::time::Instant::now() + round);
            while !waiting.is_empty() {
                let received = tokio::select! {
                    r = self.transport.socket.recv_from(buf) => r,
                    () = tokio::time::sleep_until(round_end) => break,
                };
                let Ok((len, from)) = received else { continue };
                let Some((stamp, plaintext)) = self.accept(&buf[..len], from) else {
                    continue;
                };
                if let Ok(Frame::LeaveAck { leaver, by }) = Frame::decode(&plaintext)
                    && leaver == me
                    && by == stamp.node
                {
                    waiting.remove(&by);
                }
            }
        }
        if waiting.is_empty() {
            tracing::info!("left the gossip cluster");
        } else {
            let silent: Vec<&String> = waiting.keys().collect();
            tracing::warn!(
                ?silent,
                "left the gossip cluster; these members did not confirm and will detect the leave as a failure"
            );
        }
    }
}
