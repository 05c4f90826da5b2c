//! The gossip member without I/O: foca's SWIM state and what this
//! speaker adds to it (seeds and rejoins, first-hand leaves, the join
//! rate limit, the [`View`]). Time is an input; what it sends comes out
//! of [`Gossip::take_outgoing`] as frames to stamp, seal and send. The
//! gossip task drives it with a socket and tokio timers; the simulator
//! drives it with virtual time and a simulated network.

use super::wire::{Frame, Identity};
use super::{Down, DropReason, MembershipError, Reach, Timing, View};
use foca::{
    AccumulatingRuntime, Codec as _, Foca, Member, Message, NoCustomBroadcast, OwnedNotification,
    PostcardCodec, Timer,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

type Swim = Foca<Identity, PostcardCodec, StdRng, NoCustomBroadcast>;

/// Join requests (announces) one sender may make in a burst: each is
/// answered with the member list (a feed), so they are rate-limited -
/// a speaker announces to a member a few times per rejoin period.
const ANNOUNCE_BURST: f64 = 5.0;
/// Join requests per second one sender may make after its burst.
const ANNOUNCES_PER_SECOND: f64 = 2.0;
/// How often a member that knows no other one announces to the seeds
/// (within what [`ANNOUNCES_PER_SECOND`] lets each receiver answer).
const ALONE_REJOIN: std::time::Duration = std::time::Duration::from_secs(1);

/// One gossip member's state.
pub struct Gossip {
    node: String,
    foca: Swim,
    runtime: AccumulatingRuntime<Identity>,
    timing: Timing,
    /// Foca's timers, earliest first (ties in foca's own order).
    timers: BinaryHeap<Reverse<(Instant, Timer<Identity>)>>,
    /// When seeds not known alive are announced to again.
    next_rejoin: Instant,
    /// Frames to send: (to, encoded frame).
    outbox: Vec<(SocketAddr, Vec<u8>)>,
    view: View,
    /// The latest seeds (node -> address), this node excluded.
    seeds: BTreeMap<String, SocketAddr>,
    /// The identity foca last reported for each node.
    known: HashMap<String, Identity>,
    /// The run (bump) of each node that told us it left.
    left: HashMap<String, u64>,
    /// Join-request tokens per sender (a token bucket).
    announces: HashMap<String, (f64, Instant)>,
    /// Probes sent (for the metrics).
    probes: u64,
    /// The probe the last probe timer started had a member to go to.
    probing: bool,
    /// The outcomes (answered or not) of the last [`Reach::WINDOW`]
    /// probes.
    outcomes: VecDeque<bool>,
    /// Members forgotten since the last [`Gossip::take_forgotten`].
    forgotten: Vec<String>,
    /// Bumped whenever the view may have changed ([`Gossip::view_changes`]).
    changes: u64,
    /// Seeds the random choices of a foca started afresh.
    reseed: StdRng,
    /// Foca went idle: this member declared every other one down.
    idle: bool,
    /// When a SWIM packet of each node's own last came in (nodes this
    /// member knows only, so bounded by the cluster).
    heard: HashMap<String, Instant>,
    /// Members our own probe found silent that had sent us a packet of
    /// their own meanwhile: a lost ping or ack, not doubt, unless they
    /// stay suspect and silent ([`Self::drain_probed`]).
    held: BTreeSet<String>,
    /// Since when, and at which incarnation, foca holds each member
    /// suspect (members it holds suspect only, so bounded by the
    /// cluster): a suspicion nobody settles is ended here
    /// ([`Self::settle_stale_suspicions`]).
    suspected: HashMap<String, (Instant, foca::Incarnation)>,
    /// The probe in flight ([`probe::Probe`]).
    probe: probe::Probe,
    /// A member whose suspicion was refuted before its timer fired: foca
    /// still tells it that it is down ([`Self::withheld`]).
    withheld_notice: Option<Identity>,
}

impl Gossip {
    /// A member `node` receiving at `addr`, with `timing`, its random
    /// choices seeded with `seed` and its run numbered `bump` (a restart
    /// needs a larger one), starting at `now`.
    pub fn new(
        node: String,
        addr: SocketAddr,
        timing: &Timing,
        seed: u64,
        bump: u64,
        now: Instant,
    ) -> Result<Self, MembershipError> {
        let identity = Identity::new(node.clone(), addr, bump);
        Self::with_identity(
            identity,
            timing.foca_config()?,
            timing.clone(),
            StdRng::seed_from_u64(seed),
            now,
        )
    }

    pub(super) fn with_identity(
        identity: Identity,
        foca_config: foca::Config,
        timing: Timing,
        rng: StdRng,
        now: Instant,
    ) -> Result<Self, MembershipError> {
        let node = identity.node.to_string();
        // Another stream than foca's own, as reproducible.
        let reseed = node.bytes().fold(identity.bump ^ 0x5eed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let reseed = StdRng::seed_from_u64(reseed);
        Ok(Self {
            node: node.clone(),
            foca: Foca::new(identity, foca_config, rng, PostcardCodec),
            runtime: AccumulatingRuntime::new(),
            next_rejoin: now + timing.rejoin_period,
            timing,
            timers: BinaryHeap::new(),
            outbox: Vec::new(),
            view: View {
                alive: BTreeSet::from([node]),
                ..View::default()
            },
            seeds: BTreeMap::new(),
            known: HashMap::new(),
            left: HashMap::new(),
            announces: HashMap::new(),
            probes: 0,
            probing: false,
            outcomes: VecDeque::new(),
            forgotten: Vec::new(),
            changes: 0,
            reseed,
            idle: false,
            heard: HashMap::new(),
            suspected: HashMap::new(),
            probe: probe::Probe::default(),
            withheld_notice: None,
            held: BTreeSet::new(),
        })
    }

    /// What this member believes.
    pub fn view(&self) -> &View {
        &self.view
    }

    /// A count that moves whenever [`Self::view`] may have changed: a
    /// caller that looks again only on a move need not compare views.
    pub fn view_changes(&self) -> u64 {
        self.changes
    }

    /// This member's identity.
    pub(super) fn identity(&self) -> &Identity {
        self.foca.identity()
    }

    /// Probes sent so far.
    pub fn probes(&self) -> u64 {
        self.probes
    }

    /// Members forgotten since the last call (what is kept per sender
    /// outside, such as replay windows, can go too).
    pub(super) fn take_forgotten(&mut self) -> Vec<String> {
        std::mem::take(&mut self.forgotten)
    }

    /// Frames to send since the last call: (to, frame).
    pub fn take_outgoing(&mut self) -> Vec<(SocketAddr, Vec<u8>)> {
        std::mem::take(&mut self.outbox)
    }

    /// When [`Gossip::tick`] has something to do next.
    pub fn next_wakeup(&self) -> Instant {
        self.timers
            .peek()
            .map_or(self.next_rejoin, |Reverse((at, _))| {
                (*at).min(self.next_rejoin)
            })
    }

    /// Whether `node`'s speaker gossips from `ip`: its seed's (its Node's
    /// InternalIP) or the address its current identity announced.
    pub fn speaks_from(&self, node: &str, ip: IpAddr) -> bool {
        self.seeds.get(node).is_some_and(|a| a.ip() == ip)
            || self.known.get(node).is_some_and(|id| id.addr.ip() == ip)
    }

    /// Whether `node` is a seed or a member this speaker knows.
    pub fn knows(&self, node: &str) -> bool {
        self.seeds.contains_key(node) || self.known.contains_key(node)
    }

    /// Whether `ip` is a node's address (a seed's or a known member's):
    /// datagrams from anywhere else are not opened.
    pub fn is_node_address(&self, ip: IpAddr) -> bool {
        self.seeds.values().any(|a| a.ip() == ip)
            || self.known.values().any(|id| id.addr.ip() == ip)
    }

    /// Fires the timers due at `now` and, when due, announces again to
    /// seeds not known alive.
    pub fn tick(&mut self, now: Instant) {
        while self
            .timers
            .peek()
            .is_some_and(|Reverse((at, _))| *at <= now)
        {
            let Some(Reverse((_, timer))) = self.timers.pop() else {
                break;
            };
            let probe = matches!(timer, Timer::ProbeRandomMember(_));
            // A probe timer ends the probe in flight.
            let unanswered = if probe {
                self.probes += 1;
                self.probe_unanswered()
            } else {
                None
            };
            if let Timer::SendIndirectProbe { probed_id, .. } = &timer {
                self.probe.indirect_stage(&probed_id.node);
            }
            let forgets = match &timer {
                Timer::RemoveDown(id) => Some(id.clone()),
                _ => None,
            };
            let verdict = match &timer {
                Timer::ChangeSuspectToDown { member_id, .. } => Some(member_id.clone()),
                _ => None,
            };
            if let Err(e) = self.foca.handle_timer(timer, &mut self.runtime) {
                tracing::debug!(error = %e, "gossip timer");
            }
            if let Some(id) = forgets {
                self.forget_if_removed(&id);
            }
            self.withheld_notice = verdict.filter(|id| !self.holds_down(id));
            let raised = self.drain_probed(now, Some(unanswered.as_deref()));
            if probe {
                self.probe.start(now);
                // This timer ends the last probe (a member foca found
                // silent turns suspect now) and starts the next, if any
                // member is left to probe.
                if self.probing {
                    self.record_probe(raised == 0);
                }
                self.probing = self.view.alive.len() > 1;
            }
        }
        self.settle_stale_suspicions(now);
        if now >= self.next_rejoin {
            // Alone (started afresh, or not joined yet): a member that
            // announces to us teaches us only itself, so ask the seeds
            // again soon rather than a rejoin period later.
            let alone = self.view.alive.len() == 1;
            self.next_rejoin = now
                + if alone {
                    ALONE_REJOIN
                } else {
                    self.timing.rejoin_period
                };
            self.announce_to_missing_seeds();
            self.drain(now);
        }
    }

    /// A frame from `sender` (the name its authenticated stamp carries)
    /// at `from`, received at `now`.
    pub fn receive(
        &mut self,
        sender: &str,
        frame: &[u8],
        from: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        let outcome = match Frame::decode(frame) {
            Ok(Frame::Foca(packet)) => self.on_packet(sender, packet, from, now),
            Ok(Frame::Leave(leaver)) => self.on_leave(sender, leaver, from, now),
            Ok(Frame::LeaveAck { .. }) => Ok(()),
            Err(e) => {
                tracing::debug!(%from, error = %e, "dropped gossip datagram");
                Err(DropReason::Decode)
            }
        };
        self.drain(now);
        outcome
    }

    /// Seeds: (node name, address) of every node that may run a speaker.
    /// New or moved seeds not known alive are announced to at once.
    pub fn join(&mut self, seeds: Vec<(String, SocketAddr)>, now: Instant) {
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
        // A node gone from the cluster is no one to doubt: forgotten
        // members are bounded by the seeds, as everything else kept here.
        let before = self.view.forgotten.len();
        let seeds = &self.seeds;
        self.view.forgotten.retain(|n| seeds.contains_key(n));
        if self.view.forgotten.len() != before {
            self.changes += 1;
        }
        for (node, addr) in fresh {
            if !self.view.alive.contains(&node) {
                self.announce(node, addr);
            }
        }
        self.drain(now);
    }

    /// Starts a graceful leave: foca declares itself down and gossips it
    /// (queued), and every member it knows should get a first-hand leave
    /// - the returned frame, to the returned addresses - until it confirms
    ///   ([`Frame::LeaveAck`]).
    pub(super) fn begin_leave(
        &mut self,
        now: Instant,
    ) -> Result<(Vec<u8>, BTreeMap<String, SocketAddr>), postcard::Error> {
        let me = self.foca.identity().clone();
        let waiting: BTreeMap<String, SocketAddr> = self
            .foca
            .iter_members()
            .map(|m| (m.id().node.to_string(), m.id().addr))
            .collect();
        if let Err(e) = self.foca.leave_cluster(&mut self.runtime) {
            tracing::debug!(error = %e, "gossip leave");
        }
        self.drain(now);
        Ok((Frame::Leave(me).encode()?, waiting))
    }

    /// A graceful leave in one round: the gossip of it and a first-hand
    /// leave to every member, queued (the gossip task resends until they
    /// confirm; a simulator may send once).
    pub fn leave(&mut self, now: Instant) {
        match self.begin_leave(now) {
            Ok((frame, waiting)) => {
                for to in waiting.into_values() {
                    self.outbox.push((to, frame.clone()));
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not encode the leave"),
        }
    }

    fn may_announce(&mut self, node: &str, now: Instant) -> bool {
        let (tokens, at) = self
            .announces
            .entry(node.to_owned())
            .or_insert((ANNOUNCE_BURST, now));
        let refill = now.saturating_duration_since(*at).as_secs_f64() * ANNOUNCES_PER_SECOND;
        *tokens = (*tokens + refill).min(ANNOUNCE_BURST);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn on_packet(
        &mut self,
        sender: &str,
        packet: &[u8],
        from: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        let header: foca::Header<Identity> = match PostcardCodec.decode_header(packet) {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!(%from, error = %e, "dropped gossip packet");
                return Err(DropReason::Decode);
            }
        };
        if *header.src.node != *sender {
            tracing::debug!(%from, %sender, claimed = %header.src.node, "dropped gossip packet in another member's name");
            return Err(DropReason::Rejected);
        }
        if matches!(header.message, Message::Announce) && !self.may_announce(sender, now) {
            tracing::debug!(%from, %sender, "dropped a join request: too many from this member");
            return Err(DropReason::RateLimited);
        }
        let handled = self
            .foca
            .handle_data(packet, &mut self.runtime)
            .map_err(|e| {
                tracing::debug!(%from, error = %e, "dropped gossip packet");
                match e {
                    foca::Error::Decode(_)
                    | foca::Error::MalformedPacket
                    | foca::Error::DataTooBig => DropReason::Decode,
                    _ => DropReason::Rejected,
                }
            });
        if handled.is_ok() && self.knows(sender) {
            self.heard.insert(sender.to_owned(), now);
            self.probe.on_message(&header.message);
        }
        handled
    }

    fn on_leave(
        &mut self,
        sender: &str,
        leaver: Identity,
        from: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        if *leaver.node == *self.node {
            tracing::debug!(%from, "dropped a leave in this node's name: two speakers with one node name?");
            return Err(DropReason::Rejected);
        }
        if *sender != *leaver.node || self.known.get(&*leaver.node) != Some(&leaver) {
            tracing::debug!(%from, %sender, leaver = ?leaver, known = ?self.known.get(&*leaver.node), "dropped a leave: not the sender's own current identity");
            return Err(DropReason::Rejected);
        }
        tracing::debug!(leaver = ?leaver, "member leaves");
        self.left.insert(leaver.node.to_string(), leaver.bump);
        // Foca's gossip of the leave may come first and make this the
        // last member (idle: started afresh, its verdicts dropped); the
        // leave, said first-hand, counts all the same.
        let down = self
            .view
            .down
            .entry(leaver.node.to_string())
            .or_insert(Down {
                since: now,
                left: true,
            });
        down.left = true;
        self.view.alive.remove(&*leaver.node);
        self.changes += 1;
        let down = std::iter::once(Member::down(leaver.clone()));
        if let Err(e) = self.foca.apply_many(down, true, &mut self.runtime) {
            tracing::debug!(error = %e, "could not apply a member's leave");
        }
        let to = leaver.addr;
        let ack = Frame::LeaveAck {
            leaver,
            by: self.node.to_string(),
        };
        self.queue(to, &ack);
        Ok(())
    }

    fn announce_to_missing_seeds(&mut self) {
        let missing: Vec<(String, SocketAddr)> = self
            .seeds
            .iter()
            .filter(|(node, _)| !self.view.alive.contains(*node))
            .map(|(node, addr)| (node.clone(), *addr))
            .collect();
        for (node, addr) in missing {
            self.announce(node, addr);
        }
    }

    fn announce(&mut self, node: String, addr: SocketAddr) {
        if let Err(e) = self
            .foca
            .announce(Identity::seed(node, addr), &mut self.runtime)
        {
            tracing::debug!(%addr, error = %e, "could not announce to a seed");
        }
    }

    /// Foca forgets a down member after `remove_down_after`: so does the
    /// view, and everything kept per member.
    fn forget_if_removed(&mut self, id: &Identity) {
        let still_known = self
            .foca
            .iter_membership_state()
            .any(|m| m.id().node == id.node);
        if still_known || self.known.get(&*id.node) != Some(id) {
            return;
        }
        self.known.remove(&*id.node);
        self.heard.remove(&*id.node);
        self.held.remove(&*id.node);
        self.suspected.remove(&*id.node);
        self.left.remove(&*id.node);
        self.announces.remove(&*id.node);
        self.view.down.remove(&*id.node);
        self.view.forgotten.remove(&*id.node);
        self.changes += 1;
        self.forgotten.push(id.node.to_string());
    }

    /// Moves what foca produced into the outbox, the timer heap and the
    /// view.
    fn drain(&mut self, now: Instant) {
        self.drain_probed(now, None);
    }

    /// [`Self::drain`] after foca handled a timer (`timer`, with the
    /// member our probe that ended then found silent, if any) or anything
    /// else: a member that turns suspect while a timer is handled was
    /// suspected by this speaker's own probe (foca suspects a member when
    /// the probe period ends unanswered), and so was one already suspect
    /// that our probe found silent; one that turns suspect on a received
    /// datagram is hearsay.
    /// Returns how many members turned suspect by our own probe.
    fn drain_probed(&mut self, now: Instant, timer: Option<Option<&str>>) -> usize {
        while let Some((to, packet)) = self.runtime.to_send() {
            if !self.withheld(&to, &packet) {
                self.queue(to.addr, &Frame::Foca(&packet));
            }
        }
        self.withheld_notice = None;
        while let Some((after, timer)) = self.runtime.to_schedule() {
            self.timers.push(Reverse((now + after, timer)));
        }
        while let Some(notification) = self.runtime.to_notify() {
            self.on_notification(notification, now);
        }
        if std::mem::take(&mut self.idle) {
            self.start_afresh();
        }
        let suspect: BTreeMap<String, foca::Incarnation> = self
            .foca
            .iter_membership_state()
            .filter(|m| m.state() == foca::State::Suspect)
            .map(|m| (m.id().node.to_string(), m.incarnation()))
            .collect();
        self.note_suspects(&suspect, now);
        let suspect: BTreeSet<String> = suspect.into_keys().collect();
        self.held.retain(|n| suspect.contains(n));
        let raised: Vec<String> = if let Some(silent) = timer {
            // A member that sent us a packet of its own while our probe
            // of it went unanswered lives: a ping or ack was lost. With
            // no third member to probe through, one lost datagram in 50
            // made two survivors doubt each other every few seconds
            // (two writes each). It is doubted once it stays suspect
            // and silent for a probe's length.
            let quiet = self.timing.probe_period + self.timing.probe_rtt;
            let heard = |n: &String| {
                self.heard
                    .get(n)
                    .is_some_and(|t| now.saturating_duration_since(*t) < quiet)
            };
            let (held, raised): (BTreeSet<String>, BTreeSet<String>) = suspect
                .iter()
                .filter(|n| {
                    !self.view.suspect.contains(*n)
                        || self.held.contains(*n)
                        || silent == Some(n.as_str())
                })
                .cloned()
                .partition(heard);
            self.held = held;
            raised.into_iter().collect()
        } else {
            Vec::new()
        };
        let count = raised.len();
        let before = self.view.unanswered.len();
        self.view.unanswered.retain(|n| suspect.contains(n));
        self.view.unanswered.extend(raised);
        if count > 0 || before != self.view.unanswered.len() || suspect != self.view.suspect {
            self.changes += 1;
            self.view.suspect = suspect;
        }
        count
    }

    fn queue(&mut self, to: SocketAddr, frame: &Frame<'_>) {
        match frame.encode() {
            Ok(bytes) => self.outbox.push((to, bytes)),
            Err(e) => tracing::warn!(%to, error = %e, "could not encode a gossip frame"),
        }
    }

    /// Every other member is down, some by this member's own verdicts
    /// (not all left): it is the one cut off, or the last one left. Foca keeps a down identity
    /// down and answers it with "you are down", so on reconnecting every
    /// healthy member it talks to would have to take a new identity (a
    /// reset each: its probes stop, pings to its old identity go
    /// unanswered, more members are suspected), while the verdicts still
    /// queued for gossip declare live members down: gossip falls apart
    /// for seconds. A fresh foca as the next identity holds neither; it
    /// rejoins through the seeds as a restarted speaker does, and its
    /// view keeps no member down (nor does it judge by gossip's "down"
    /// what it decided while cut off).
    fn start_afresh(&mut self) {
        if self.view.down.values().all(|d| d.left) {
            // Everyone else left: nothing was decided while cut off.
            return;
        }
        let Some(next) = foca::Identity::renew(self.foca.identity()) else {
            return;
        };
        let Ok(config) = self.timing.foca_config() else {
            return;
        };
        let rng = StdRng::seed_from_u64(rand::Rng::next_u64(&mut self.reseed));
        self.foca = Foca::new(next, config, rng, PostcardCodec);
        self.runtime = AccumulatingRuntime::new();
        self.timers
            .retain(|Reverse((_, t))| matches!(t, Timer::RemoveDown(_)));
        self.probing = false;
        self.view.suspect.clear();
        self.view.unanswered.clear();
        self.held.clear();
        self.suspected.clear();
        self.probe = probe::Probe::default();
        // Its probes went to members the old foca knew; the new one's
        // reach is measured afresh as it finds them again (a speaker
        // back from a cut would otherwise count itself cut off for the
        // probes it made while it was).
        self.outcomes.clear();
        self.view.reach = Reach::default();
        // The verdicts made while cut off go with the foca that made them
        // (a member gossip does not know is judged by its lease); leaves
        // were said first-hand and stay.
        let dropped = self.view.down.iter().filter(|(_, d)| !d.left);
        let dropped: Vec<String> = dropped.map(|(n, _)| n.clone()).collect();
        self.view.forgotten.extend(dropped);
        self.view.down.retain(|_, d| d.left);
        self.changes += 1;
    }

    fn on_notification(&mut self, notification: OwnedNotification<Identity>, now: Instant) {
        match notification {
            OwnedNotification::MemberUp(id) => {
                tracing::info!(member = %id.node, addr = %id.addr, "member alive");
                if self
                    .left
                    .get(&*id.node)
                    .is_some_and(|bump| *bump != id.bump)
                {
                    self.left.remove(&*id.node);
                }
                self.view.alive.insert(id.node.to_string());
                self.view.down.remove(&*id.node);
                self.view.forgotten.remove(&*id.node);
                self.changes += 1;
                self.known.insert(id.node.to_string(), id);
            }
            OwnedNotification::MemberDown(id) => {
                let left = self.left.get(&*id.node) == Some(&id.bump);
                if left {
                    tracing::info!(member = %id.node, "member left");
                } else {
                    tracing::warn!(member = %id.node, addr = %id.addr, "member failed: declared down");
                }
                self.view.alive.remove(&*id.node);
                self.view.forgotten.remove(&*id.node);
                self.changes += 1;
                self.view
                    .down
                    .insert(id.node.to_string(), Down { since: now, left });
                self.known.insert(id.node.to_string(), id);
            }
            OwnedNotification::Rename(old, new) => {
                tracing::debug!(previous = ?old, current = ?new, "member restarted");
                self.known.insert(new.node.to_string(), new);
            }
            OwnedNotification::Active => tracing::info!("joined the gossip cluster"),
            OwnedNotification::Idle => {
                tracing::warn!("no other gossip member is alive: gossip starts afresh");
                self.idle = true;
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
}

mod probe;
mod suspicion;
#[cfg(test)]
mod tests;
