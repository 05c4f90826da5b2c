//! The gossip task: one tokio task owns the socket and the SWIM state
//! ([`foca::Foca`]) and reacts to datagrams, timers and the handle's
//! commands, one at a time - so nothing is shared but the view (a watch
//! channel) and the drop counters.
//!
//! Every interaction with foca fills an [`AccumulatingRuntime`]; the
//! loop then drains it: datagrams to send, timers to schedule (kept in
//! a heap here, so they fire in order), notifications that change the
//! [`View`].

use super::crypto::{Cipher, OpenError};
use super::replay::{Replay, Verdict};
use super::wire::{Frame, Identity, Stamp};
use super::{Command, Counters, Down, DropReason, MAX_DATAGRAM, MembershipError, Timing, View};
use foca::{
    AccumulatingRuntime, Codec as _, Foca, Member, Message, NoCustomBroadcast, OwnedNotification,
    PostcardCodec, Timer,
};
use rand::SeedableRng;
use rand::rngs::{StdRng, SysRng};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};

type Swim = Foca<Identity, PostcardCodec, StdRng, NoCustomBroadcast>;

/// Receive buffer: the largest UDP payload, so an oversized datagram is
/// seen whole (and dropped as not ours) rather than cut to look short.
const RECV_BUFFER: usize = 65536;
/// Pause after a failed receive, so a persistent socket error does not
/// spin the task.
const RECV_ERROR_PAUSE: Duration = Duration::from_millis(50);
/// How many times a leave is sent, at most, within the leave timeout.
const LEAVE_ROUNDS: u32 = 5;
/// Join requests (announces) one sender may make in a burst: each is
/// answered with the member list (a feed), so they are rate-limited -
/// a speaker announces to a member a few times per rejoin period.
const ANNOUNCE_BURST: f64 = 5.0;
/// Join requests per second one sender may make after its burst.
const ANNOUNCES_PER_SECOND: f64 = 2.0;

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
            node: self.node.clone(),
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
    node: String,
    foca: Swim,
    runtime: AccumulatingRuntime<Identity>,
    transport: Transport,
    timing: Timing,
    /// Foca's timers, earliest first (ties in foca's own order).
    timers: BinaryHeap<Reverse<(Instant, Timer<Identity>)>>,
    /// Frames to send after the current interaction: (to, plaintext).
    outbox: Vec<(SocketAddr, Vec<u8>)>,
    view: watch::Sender<View>,
    /// The latest seeds (node -> address), this node excluded.
    seeds: BTreeMap<String, SocketAddr>,
    /// The identity foca last reported for each node.
    known: HashMap<String, Identity>,
    /// The run (bump) of each node that told us it left.
    left: HashMap<String, u64>,
    /// Which stamps each sender already used.
    replay: Replay,
    /// Each sender's announce allowance: (tokens, when last refilled).
    announces: HashMap<String, (f64, Instant)>,
}

/// What woke the loop.
enum Event {
    Datagram(usize, SocketAddr),
    RecvError(std::io::Error),
    Command(Option<Command>),
    Timers,
    Rejoin,
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
        // Foca's randomness picks whom to probe and gossip to: it need not
        // be secret, only unpredictable enough to spread the load.
        let rng = StdRng::try_from_rng(&mut SysRng)
            .map_err(|e| MembershipError::Random(e.to_string()))?;
        let node = identity.node.clone();
        let epoch = identity.bump;
        Ok(Self {
            node: node.clone(),
            foca: Foca::new(identity, foca_config, rng, PostcardCodec),
            runtime: AccumulatingRuntime::new(),
            transport: Transport {
                socket,
                cipher,
                counters,
                node: node.clone(),
                epoch,
                seq: AtomicU64::new(0),
            },
            timing,
            timers: BinaryHeap::new(),
            outbox: Vec::new(),
            view,
            seeds: BTreeMap::new(),
            known: HashMap::new(),
            left: HashMap::new(),
            replay: Replay::default(),
            announces: HashMap::new(),
        })
    }

    /// Runs until the handle asks to leave or goes away.
    pub(super) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut buf = vec![0u8; RECV_BUFFER];
        let mut rejoin = tokio::time::interval_at(
            Instant::now() + self.timing.rejoin_period,
            self.timing.rejoin_period,
        );
        rejoin.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let next_timer = self.timers.peek().map(|Reverse((at, _))| *at);
            let event = tokio::select! {
                received = self.transport.socket.recv_from(&mut buf) => match received {
                    Ok((len, from)) => Event::Datagram(len, from),
                    Err(e) => Event::RecvError(e),
                },
                command = commands.recv() => Event::Command(command),
                () = sleep_until(next_timer) => Event::Timers,
                _ = rejoin.tick() => Event::Rejoin,
            };
            match event {
                Event::Datagram(len, from) => self.on_datagram(&buf[..len], from),
                Event::RecvError(e) => {
                    tracing::warn!(error = %e, "gossip socket receive failed");
                    tokio::time::sleep(RECV_ERROR_PAUSE).await;
                }
                Event::Command(Some(Command::Join(seeds))) => self.join(seeds),
                Event::Command(Some(Command::Keys(keyring))) => {
                    tracing::info!(?keyring, "gossip keys changed");
                    self.transport.cipher = Cipher::with_keyring(&keyring, super::CLUSTER_LABEL);
                }
                Event::Command(Some(Command::Leave(done))) => {
                    self.leave(&mut buf).await;
                    // The handle may have stopped waiting: nothing to tell.
                    let _ = done.send(());
                    return;
                }
                // The handle was dropped without leaving: stop as a crash
                // would, the others will detect it.
                Event::Command(None) => return,
                Event::Timers => self.fire_due_timers(),
                Event::Rejoin => self.announce_to_missing_seeds(),
            }
            self.drain().await;
        }
    }

    /// Whether `ip` is the address of a node: a seed (every Node) or a
    /// member the gossip told of.
    fn is_node_address(&self, ip: IpAddr) -> bool {
        self.seeds.values().any(|a| a.ip() == ip)
            || self.known.values().any(|id| id.addr.ip() == ip)
    }

    /// The stamp and frame of a received datagram, or `None` (counted)
    /// when it is not a fresh datagram of another member of this
    /// cluster: from an unknown address (before any decryption),
    /// unopenable, unstamped, in this node's own name or replayed.
    fn accept(&mut self, datagram: &[u8], from: SocketAddr) -> Option<(Stamp, Vec<u8>)> {
        if !self.is_node_address(from.ip()) {
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
        if stamp.node == self.node {
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

    /// Whether `node` may make one more join request now (token bucket).
    fn may_announce(&mut self, node: &str) -> bool {
        let now = Instant::now();
        let (tokens, at) = self
            .announces
            .entry(node.to_owned())
            .or_insert((ANNOUNCE_BURST, now));
        let refill = now.duration_since(*at).as_secs_f64() * ANNOUNCES_PER_SECOND;
        *tokens = (*tokens + refill).min(ANNOUNCE_BURST);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Checks a SWIM packet's header against its stamp: it must come
    /// from the member that sealed it, and join requests are
    /// rate-limited. Counts and returns false when refused.
    fn check_packet(&mut self, stamp: &Stamp, packet: &[u8], from: SocketAddr) -> bool {
        let header: foca::Header<Identity> = match PostcardCodec.decode_header(packet) {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!(%from, error = %e, "dropped gossip packet");
                self.transport.counters.count(DropReason::Decode);
                return false;
            }
        };
        if header.src.node != stamp.node {
            tracing::debug!(%from, sender = %stamp.node, claimed = %header.src.node, "dropped gossip packet in another member's name");
            self.transport.counters.count(DropReason::Rejected);
            return false;
        }
        if matches!(header.message, Message::Announce) && !self.may_announce(&stamp.node) {
            tracing::debug!(%from, sender = %stamp.node, "dropped a join request: too many from this member");
            self.transport.counters.count(DropReason::RateLimited);
            return false;
        }
        true
    }

    fn on_datagram(&mut self, datagram: &[u8], from: SocketAddr) {
        let Some((stamp, plaintext)) = self.accept(datagram, from) else {
            return;
        };
        match Frame::decode(&plaintext) {
            Ok(Frame::Foca(packet)) => {
                if !self.check_packet(&stamp, packet, from) {
                    return;
                }
                if let Err(e) = self.foca.handle_data(packet, &mut self.runtime) {
                    let reason = match e {
                        foca::Error::Decode(_)
                        | foca::Error::MalformedPacket
                        | foca::Error::DataTooBig => DropReason::Decode,
                        _ => DropReason::Rejected,
                    };
                    tracing::debug!(%from, error = %e, "dropped gossip packet");
                    self.transport.counters.count(reason);
                }
            }
            Ok(Frame::Leave(leaver)) => self.on_leave(&stamp, leaver, from),
            // Late or duplicate: only a leaving speaker waits for these.
            Ok(Frame::LeaveAck { .. }) => {}
            Err(e) => {
                tracing::debug!(%from, error = %e, "dropped gossip datagram");
                self.transport.counters.count(DropReason::Decode);
            }
        }
    }

    /// A member tells us it leaves: down now, marked as left, and
    /// acknowledged (after the view changed, so an acknowledged leave is
    /// already visible here). Only a member's own current identity can
    /// leave, and the acknowledgement goes to its known address, never
    /// to wherever the datagram claims to come from.
    fn on_leave(&mut self, stamp: &Stamp, leaver: Identity, from: SocketAddr) {
        if leaver.node == self.node {
            tracing::debug!(%from, "dropped a leave in this node's name: two speakers with one node name?");
            self.transport.counters.count(DropReason::Rejected);
            return;
        }
        if stamp.node != leaver.node || self.known.get(&leaver.node) != Some(&leaver) {
            tracing::debug!(%from, sender = %stamp.node, leaver = ?leaver, known = ?self.known.get(&leaver.node), "dropped a leave: not the sender's own current identity");
            self.transport.counters.count(DropReason::Rejected);
            return;
        }
        tracing::debug!(leaver = ?leaver, "member leaves");
        self.left.insert(leaver.node.clone(), leaver.bump);
        // Its own gossip may have brought the news first: fix the reason.
        if self.known.get(&leaver.node) == Some(&leaver) {
            self.view
                .send_if_modified(|view| match view.down.get_mut(&leaver.node) {
                    Some(down) if !down.left => {
                        down.left = true;
                        true
                    }
                    _ => false,
                });
        }
        // Foca then notifies MemberDown (if it held the member up) and
        // gossips the death like any other.
        let down = std::iter::once(Member::down(leaver.clone()));
        if let Err(e) = self.foca.apply_many(down, true, &mut self.runtime) {
            tracing::debug!(error = %e, "could not apply a member's leave");
        }
        // The known identity's address (equal to the leaver's, checked
        // above), not `from`.
        let to = leaver.addr;
        let ack = Frame::LeaveAck {
            leaver,
            by: self.node.clone(),
        };
        self.queue(to, &ack);
    }

    fn join(&mut self, seeds: Vec<(String, SocketAddr)>) {
        let seeds: BTreeMap<String, SocketAddr> = seeds
            .into_iter()
            .filter(|(node, _)| *node != self.node)
            .collect();
        let fresh: Vec<(String, SocketAddr)> = seeds
            .iter()
            .filter(|(node, addr)| self.seeds.get(*node) != Some(*addr))
            .map(|(node, addr)| (node.clone(), *addr))
            .collect();
        self.seeds = seeds;
        for (node, addr) in fresh {
            if !self.is_alive(&node) {
                self.announce(node, addr);
            }
        }
    }

    fn announce_to_missing_seeds(&mut self) {
        let missing: Vec<(String, SocketAddr)> = self
            .seeds
            .iter()
            .filter(|(node, _)| !self.is_alive(node))
            .map(|(node, addr)| (node.clone(), *addr))
            .collect();
        for (node, addr) in missing {
            self.announce(node, addr);
        }
    }

    fn is_alive(&self, node: &str) -> bool {
        self.view.borrow().alive.contains(node)
    }

    fn announce(&mut self, node: String, addr: SocketAddr) {
        if let Err(e) = self
            .foca
            .announce(Identity::seed(node, addr), &mut self.runtime)
        {
            tracing::debug!(%addr, error = %e, "could not announce to a seed");
        }
    }

    fn fire_due_timers(&mut self) {
        let now = Instant::now();
        while self
            .timers
            .peek()
            .is_some_and(|Reverse((at, _))| *at <= now)
        {
            let Some(Reverse((_, timer))) = self.timers.pop() else {
                break;
            };
            if matches!(timer, Timer::ProbeRandomMember(_)) {
                self.transport.counters.probe();
            }
            let forgets = match &timer {
                Timer::RemoveDown(id) => Some(id.clone()),
                _ => None,
            };
            if let Err(e) = self.foca.handle_timer(timer, &mut self.runtime) {
                tracing::debug!(error = %e, "gossip timer");
            }
            if let Some(id) = forgets {
                self.forget_if_removed(&id);
            }
        }
    }

    /// Foca forgets a down member after `remove_down_after`: so does the
    /// view (unless the node came back meanwhile).
    fn forget_if_removed(&mut self, id: &Identity) {
        let still_known = self
            .foca
            .iter_membership_state()
            .any(|m| m.id().node == id.node);
        if still_known || self.known.get(&id.node) != Some(id) {
            return;
        }
        self.known.remove(&id.node);
        self.left.remove(&id.node);
        self.replay.forget(&id.node);
        self.announces.remove(&id.node);
        self.view
            .send_if_modified(|view| view.down.remove(&id.node).is_some());
    }

    /// Reacts to what the last interactions with foca produced.
    async fn drain(&mut self) {
        while let Some((to, packet)) = self.runtime.to_send() {
            self.queue(to.addr, &Frame::Foca(&packet));
        }
        let now = Instant::now();
        while let Some((after, timer)) = self.runtime.to_schedule() {
            self.timers.push(Reverse((now + after, timer)));
        }
        while let Some(notification) = self.runtime.to_notify() {
            self.on_notification(notification);
        }
        self.publish_suspects();
        for (to, frame) in std::mem::take(&mut self.outbox) {
            self.transport.send(to, &frame).await;
        }
    }

    /// Foca notifies members up and down, not suspect: the view's
    /// suspects are read from its membership after every interaction
    /// (one pass over the members; a comparison when nothing changed).
    fn publish_suspects(&mut self) {
        let suspect: BTreeSet<String> = self
            .foca
            .iter_membership_state()
            .filter(|m| m.state() == foca::State::Suspect)
            .map(|m| m.id().node.clone())
            .collect();
        self.view.send_if_modified(|view| {
            let changed = view.suspect != suspect;
            if changed {
                view.suspect = suspect;
            }
            changed
        });
    }

    fn queue(&mut self, to: SocketAddr, frame: &Frame<'_>) {
        match frame.encode() {
            Ok(bytes) => self.outbox.push((to, bytes)),
            // Only a serializer bug gets here: log, the protocol copes
            // with a lost datagram.
            Err(e) => tracing::warn!(%to, error = %e, "could not encode a gossip frame"),
        }
    }

    fn on_notification(&mut self, notification: OwnedNotification<Identity>) {
        match notification {
            OwnedNotification::MemberUp(id) => {
                tracing::info!(member = %id.node, addr = %id.addr, "member alive");
                if self.left.get(&id.node).is_some_and(|bump| *bump != id.bump) {
                    self.left.remove(&id.node);
                }
                self.view.send_if_modified(|view| {
                    let added = view.alive.insert(id.node.clone());
                    let undowned = view.down.remove(&id.node).is_some();
                    added || undowned
                });
                self.known.insert(id.node.clone(), id);
            }
            OwnedNotification::MemberDown(id) => {
                let left = self.left.get(&id.node) == Some(&id.bump);
                if left {
                    tracing::info!(member = %id.node, "member left");
                } else {
                    tracing::warn!(member = %id.node, addr = %id.addr, "member failed: declared down");
                }
                let down = Down {
                    since: SystemTime::now(),
                    left,
                };
                self.view.send_if_modified(|view| {
                    view.alive.remove(&id.node);
                    view.down.insert(id.node.clone(), down);
                    true
                });
                self.known.insert(id.node.clone(), id);
            }
            OwnedNotification::Rename(old, new) => {
                tracing::debug!(previous = ?old, current = ?new, "member restarted");
                self.known.insert(new.node.clone(), new);
            }
            OwnedNotification::Active => tracing::info!("joined the gossip cluster"),
            OwnedNotification::Idle => {
                tracing::warn!("no other gossip member is alive");
            }
            OwnedNotification::Rejoin(id) => tracing::warn!(
                identity = ?id,
                "the others declared this speaker down (paused or cut off?); rejoined"
            ),
            // Not expected: identities renew themselves (see Identity::renew).
            OwnedNotification::Defunct => {
                tracing::error!("this speaker was declared down and cannot rejoin until restarted");
            }
        }
    }

    /// Leaves: foca declares itself down and gossips it, and every known
    /// member gets a first-hand leave, resent until it confirms or the
    /// leave timeout passes.
    async fn leave(&mut self, buf: &mut [u8]) {
        let me = self.foca.identity().clone();
        let mut waiting: BTreeMap<String, SocketAddr> = self
            .foca
            .iter_members()
            .map(|m| (m.id().node.clone(), m.id().addr))
            .collect();
        if let Err(e) = self.foca.leave_cluster(&mut self.runtime) {
            tracing::debug!(error = %e, "gossip leave");
        }
        while let Some((to, packet)) = self.runtime.to_send() {
            self.queue(to.addr, &Frame::Foca(&packet));
        }
        for (to, frame) in std::mem::take(&mut self.outbox) {
            self.transport.send(to, &frame).await;
        }
        let frame = match Frame::Leave(me.clone()).encode() {
            Ok(frame) => frame,
            Err(e) => {
                tracing::warn!(error = %e, "could not encode the leave; the others will detect this speaker as failed");
                return;
            }
        };
        let deadline = Instant::now() + self.timing.leave_timeout;
        let round = self.timing.leave_timeout / LEAVE_ROUNDS;
        while !waiting.is_empty() && Instant::now() < deadline {
            for to in waiting.values() {
                self.transport.send(*to, &frame).await;
            }
            let round_end = deadline.min(Instant::now() + round);
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

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
