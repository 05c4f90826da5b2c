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
use std::time::{Instant, SystemTime};

type Swim = Foca<Identity, PostcardCodec, StdRng, NoCustomBroadcast>;

/// Join requests (announces) one sender may make in a burst: each is
/// answered with the member list (a feed), so they are rate-limited -
/// a speaker announces to a member a few times per rejoin period.
const ANNOUNCE_BURST: f64 = 5.0;
/// Join requests per second one sender may make after its burst.
const ANNOUNCES_PER_SECOND: f64 = 2.0;

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
        let identity = Identity {
            node: node.clone(),
            addr,
            bump,
        };
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
        let node = identity.node.clone();
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
                down: BTreeMap::new(),
                suspect: BTreeSet::new(),
                unanswered: BTreeSet::new(),
                reach: Reach::default(),
            },
            seeds: BTreeMap::new(),
            known: HashMap::new(),
            left: HashMap::new(),
            announces: HashMap::new(),
            probes: 0,
            probing: false,
            outcomes: VecDeque::new(),
            forgotten: Vec::new(),
        })
    }

    /// What this member believes.
    pub fn view(&self) -> &View {
        &self.view
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
            if probe {
                self.probes += 1;
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
            let raised = self.drain_probed(now, true);
            if probe {
                // This timer ends the last probe (a member foca found
                // silent turns suspect now) and starts the next, if any
                // member is left to probe.
                if self.probing {
                    self.record_probe(raised == 0);
                }
                self.probing = self.view.alive.len() > 1;
            }
        }
        if now >= self.next_rejoin {
            self.next_rejoin = now + self.timing.rejoin_period;
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
            Ok(Frame::Leave(leaver)) => self.on_leave(sender, leaver, from),
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
            .map(|m| (m.id().node.clone(), m.id().addr))
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
        if header.src.node != sender {
            tracing::debug!(%from, %sender, claimed = %header.src.node, "dropped gossip packet in another member's name");
            return Err(DropReason::Rejected);
        }
        if matches!(header.message, Message::Announce) && !self.may_announce(sender, now) {
            tracing::debug!(%from, %sender, "dropped a join request: too many from this member");
            return Err(DropReason::RateLimited);
        }
        self.foca
            .handle_data(packet, &mut self.runtime)
            .map_err(|e| {
                tracing::debug!(%from, error = %e, "dropped gossip packet");
                match e {
                    foca::Error::Decode(_)
                    | foca::Error::MalformedPacket
                    | foca::Error::DataTooBig => DropReason::Decode,
                    _ => DropReason::Rejected,
                }
            })
    }

    fn on_leave(
        &mut self,
        sender: &str,
        leaver: Identity,
        from: SocketAddr,
    ) -> Result<(), DropReason> {
        if leaver.node == self.node {
            tracing::debug!(%from, "dropped a leave in this node's name: two speakers with one node name?");
            return Err(DropReason::Rejected);
        }
        if sender != leaver.node || self.known.get(&leaver.node) != Some(&leaver) {
            tracing::debug!(%from, %sender, leaver = ?leaver, known = ?self.known.get(&leaver.node), "dropped a leave: not the sender's own current identity");
            return Err(DropReason::Rejected);
        }
        tracing::debug!(leaver = ?leaver, "member leaves");
        self.left.insert(leaver.node.clone(), leaver.bump);
        if let Some(down) = self.view.down.get_mut(&leaver.node) {
            down.left = true;
        }
        let down = std::iter::once(Member::down(leaver.clone()));
        if let Err(e) = self.foca.apply_many(down, true, &mut self.runtime) {
            tracing::debug!(error = %e, "could not apply a member's leave");
        }
        let to = leaver.addr;
        let ack = Frame::LeaveAck {
            leaver,
            by: self.node.clone(),
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
        if still_known || self.known.get(&id.node) != Some(id) {
            return;
        }
        self.known.remove(&id.node);
        self.left.remove(&id.node);
        self.announces.remove(&id.node);
        self.view.down.remove(&id.node);
        self.forgotten.push(id.node.clone());
    }

    /// Moves what foca produced into the outbox, the timer heap and the
    /// view.
    fn drain(&mut self, now: Instant) {
        self.drain_probed(now, false);
    }

    /// [`Self::drain`] after foca handled a timer (`timer`) or anything
    /// else: a member that turns suspect while a timer is handled was
    /// suspected by this speaker's own probe (foca suspects a member when
    /// the probe period ends unanswered); one that turns suspect on a
    /// received datagram is hearsay.
    /// Returns how many members turned suspect by our own probe.
    fn drain_probed(&mut self, now: Instant, timer: bool) -> usize {
        while let Some((to, packet)) = self.runtime.to_send() {
            self.queue(to.addr, &Frame::Foca(&packet));
        }
        while let Some((after, timer)) = self.runtime.to_schedule() {
            self.timers.push(Reverse((now + after, timer)));
        }
        while let Some(notification) = self.runtime.to_notify() {
            self.on_notification(notification);
        }
        let suspect: BTreeSet<String> = self
            .foca
            .iter_membership_state()
            .filter(|m| m.state() == foca::State::Suspect)
            .map(|m| m.id().node.clone())
            .collect();
        let raised: Vec<String> = if timer {
            suspect.difference(&self.view.suspect).cloned().collect()
        } else {
            Vec::new()
        };
        let count = raised.len();
        self.view.unanswered.retain(|n| suspect.contains(n));
        self.view.unanswered.extend(raised);
        self.view.suspect = suspect;
        count
    }

    /// One probe's outcome into [`View::reach`], the last
    /// [`Reach::WINDOW`] kept.
    fn record_probe(&mut self, answered: bool) {
        if self.outcomes.len() >= usize::from(Reach::WINDOW) {
            self.outcomes.pop_front();
        }
        self.outcomes.push_back(answered);
        let count = |f: &dyn Fn(&bool) -> bool| {
            u8::try_from(self.outcomes.iter().filter(|a| f(a)).count()).unwrap_or(u8::MAX)
        };
        self.view.reach = Reach {
            probed: count(&|_| true),
            answered: count(&|a| *a),
        };
    }

    fn queue(&mut self, to: SocketAddr, frame: &Frame<'_>) {
        match frame.encode() {
            Ok(bytes) => self.outbox.push((to, bytes)),
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
                self.view.alive.insert(id.node.clone());
                self.view.down.remove(&id.node);
                self.known.insert(id.node.clone(), id);
            }
            OwnedNotification::MemberDown(id) => {
                let left = self.left.get(&id.node) == Some(&id.bump);
                if left {
                    tracing::info!(member = %id.node, "member left");
                } else {
                    tracing::warn!(member = %id.node, addr = %id.addr, "member failed: declared down");
                }
                self.view.alive.remove(&id.node);
                self.view.down.insert(
                    id.node.clone(),
                    Down {
                        since: SystemTime::now(),
                        left,
                    },
                );
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Members on virtual time, every frame delivered 1 ms later unless
    /// its sender or receiver is `cut` (which still runs); returns when it
    /// stopped.
    fn run(members: &mut [Gossip], start: Instant, secs: f64, cut: Option<usize>) -> Instant {
        run_observed(members, start, secs, cut, &mut |_| {})
    }

    /// [`run`], calling `observe` after every step.
    fn run_observed(
        members: &mut [Gossip],
        start: Instant,
        secs: f64,
        cut: Option<usize>,
        observe: &mut dyn FnMut(&[Gossip]),
    ) -> Instant {
        let addrs: Vec<SocketAddr> = members.iter().map(|g| g.identity().addr).collect();
        let names: Vec<String> = members.iter().map(|g| g.node.clone()).collect();
        let mut now = start;
        let end = start + Duration::from_secs_f64(secs);
        let step = Duration::from_millis(1);
        let mut in_flight: Vec<(Instant, usize, usize, Vec<u8>)> = Vec::new();
        while now < end {
            now += step;
            for g in members.iter_mut() {
                g.tick(now);
            }
            let (due, later): (Vec<_>, Vec<_>) = in_flight.into_iter().partition(|f| f.0 <= now);
            in_flight = later;
            for (_, from, to, frame) in due {
                if Some(to) != cut && Some(from) != cut {
                    let _ = members[to].receive(&names[from], &frame, addrs[from], now);
                }
            }
            for (i, g) in members.iter_mut().enumerate() {
                for (to, frame) in g.take_outgoing() {
                    if let Some(j) = addrs.iter().position(|a| *a == to) {
                        in_flight.push((now + step, i, j, frame));
                    }
                }
            }
            observe(members);
        }
        now
    }

    /// A member one of our own probes found silent is `unanswered`; one
    /// we only heard is suspect is not: the first to suspect a member
    /// that stopped answering did so by its own probe, and another
    /// heard of it before its own probe failed. The member cut off sees
    /// its probes unanswered (its reach is at most half) within two
    /// seconds; the others still reach most of the cluster.
    #[test]
    fn unanswered_is_our_own_probe_and_suspect_may_be_hearsay() {
        let start = Instant::now();
        let timing = Timing::default();
        let mut members: Vec<Gossip> = (0..6u8)
            .map(|i| {
                let addr = SocketAddr::from(([10, 0, 0, i + 1], 7946));
                Gossip::new(format!("n{i}"), addr, &timing, u64::from(i), 1, start)
                    .expect("timing is valid")
            })
            .collect();
        let seeds: Vec<(String, SocketAddr)> = members
            .iter()
            .map(|g| (g.node.clone(), g.identity().addr))
            .collect();
        for g in &mut members {
            g.join(seeds.clone(), start);
        }
        let joined = run(&mut members, start, 2.0, None);
        let (mut first, mut hearsay) = (None, false);
        run_observed(&mut members, joined, 2.0, Some(5), &mut |members| {
            for g in &members[..5] {
                let v = g.view();
                assert!(v.unanswered.is_subset(&v.suspect), "{}: {v:?}", g.node);
                if v.suspect.contains("n5") {
                    first.get_or_insert((g.node.clone(), v.unanswered.contains("n5")));
                    hearsay |= !v.unanswered.contains("n5");
                }
            }
        });
        let cut_off = members[5].view().reach;
        assert!(cut_off.at_most_half(), "n5 hears no answer: {cut_off:?}");
        for g in &members[..5] {
            let reach = g.view().reach;
            assert!(!reach.at_most_half(), "{} reaches most: {reach:?}", g.node);
            assert!(reach.probed >= Reach::ENOUGH, "{}: {reach:?}", g.node);
        }
        let (who, own) = first.expect("n5 was suspected");
        assert!(own, "{who} suspected n5 first, by its own probe");
        assert!(hearsay, "the other member heard of the suspicion");
    }

    /// The sans-IO member on virtual time: three join and see each other
    /// alive; one stops answering and the others declare it down within
    /// the documented detection spread; the same seeds give the same
    /// views.
    #[test]
    fn members_on_virtual_time_join_and_detect_a_failure() {
        let start = Instant::now();
        let timing = Timing::default();
        let make = || -> Vec<Gossip> {
            (0..3u8)
                .map(|i| {
                    let addr = SocketAddr::from(([10, 0, 0, i + 1], 7946));
                    Gossip::new(format!("n{i}"), addr, &timing, u64::from(i), 1, start)
                        .expect("timing is valid")
                })
                .collect()
        };
        let mut members = make();
        let seeds: Vec<(String, SocketAddr)> = members
            .iter()
            .map(|g| (g.node.clone(), g.identity().addr))
            .collect();
        for g in &mut members {
            g.join(seeds.clone(), start);
        }
        let joined = run(&mut members, start, 2.0, None);
        for g in &members {
            assert_eq!(g.view().alive.len(), 3, "{} sees {:?}", g.node, g.view());
        }
        let worst = timing.probe_period * 4 + timing.suspect_to_down_after + timing.gossip_period;
        run(&mut members, joined, worst.as_secs_f64(), Some(2));
        for g in &members[..2] {
            assert!(
                g.view().down.contains_key("n2"),
                "{} still counts n2 after {worst:?}: {:?}",
                g.node,
                g.view()
            );
        }
        let twice: Vec<Vec<(View, u64)>> = (0..2)
            .map(|_| {
                let mut again = make();
                for g in &mut again {
                    g.join(seeds.clone(), start);
                }
                run(&mut again, start, 2.0, None);
                again
                    .iter()
                    .map(|g| (g.view().clone(), g.probes()))
                    .collect()
            })
            .collect();
        assert_eq!(twice[0], twice[1], "same seeds, same run");
        // A sender is bound to its Node's address (the port may differ);
        // a name that is no seed or member speaks from nowhere.
        let n0 = &members[0];
        assert!(n0.speaks_from("n1", IpAddr::from([10, 0, 0, 2])));
        assert!(!n0.speaks_from("n1", IpAddr::from([10, 0, 0, 3])));
        assert!(!n0.speaks_from("ghost", IpAddr::from([10, 0, 0, 2])));
        assert!(n0.knows("n2") && !n0.knows("ghost"));
    }
}
