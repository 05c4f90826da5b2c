//! Speaker membership over gossip: which speakers are alive, detected in
//! about a second when one dies - what upstream MetalLB gets from
//! hashicorp/memberlist.
//!
//! The speakers run the SWIM protocol ([`foca`]) over UDP on the node
//! address (port [`DEFAULT_PORT`]). Members are node names: a restarted
//! speaker replaces its previous run instead of appearing beside it.
//! Every datagram is encrypted and authenticated (XChaCha20-Poly1305,
//! random nonce per datagram) under a key derived by HKDF from the
//! `memberlist` Secret (or a [`Keyring`] of them during a rotation), and
//! carries its sender's name, run and sequence number so a recorded
//! datagram cannot be replayed; datagrams from addresses of no node,
//! and anything that does not open or decode, are dropped and counted
//! ([`Membership::dropped`]), never trusted.
//!
//! A graceful [`Membership::leave`] is told to every member at once and
//! acknowledged, so the others re-elect without waiting for failure
//! detection, and they can tell a leave ([`Down::left`]) from a crash.
//!
//! Layout: this file is the public API; `view` what gossip believes, as
//! plain data (what deciding modules import); `crypto` the envelope,
//! `wire` identities and frames, `gossip` the member's state and
//! decisions without I/O (also what the simulator runs), `task` the
//! gossip loop around it.

mod crypto;
mod gossip;
mod metrics;
mod replay;
mod task;
#[cfg(test)]
mod tests;
pub mod view;
mod wire;

pub use crypto::Keyring;
pub use gossip::Gossip;
use metrics::Counters;
pub use metrics::{Dropped, GossipMetrics};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::num::{NonZeroU8, NonZeroUsize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
pub use view::{Down, Reach, View};
pub use wire::{REJOIN_ROOM, next_run, wall_millis};

/// UDP port of the gossip (upstream memberlist's default).
pub const DEFAULT_PORT: u16 = 7946;

/// Largest SWIM packet a speaker produces and accepts, before the
/// envelope. Kept well under 1500 minus the envelope and IP/UDP headers
/// so datagrams are not fragmented even on overlay-sized MTUs (1450).
const MAX_PACKET: usize = 1080;
const MAX_PACKET_SIZE: NonZeroUsize = NonZeroUsize::new(MAX_PACKET).expect("1080 is not zero");
/// Largest datagram a speaker sends: the packet, its frame kind byte,
/// the sender's stamp (replay protection) and the envelope. Anything
/// larger on the wire is not ours.
const MAX_DATAGRAM: usize = MAX_PACKET + 1 + wire::MAX_STAMP + crypto::OVERHEAD;
// Fits a VXLAN-sized MTU (1450) less IPv6 and UDP headers.
const _: () = assert!(MAX_DATAGRAM <= 1450 - 40 - 8);
/// How many times each membership update rides on outgoing messages.
/// Enough to reach every member of a few-hundred-node cluster with
/// high probability (memberlist uses 4·log10(n+1)); updates are tiny.
const MAX_TRANSMISSIONS: NonZeroU8 = NonZeroU8::new(8).expect("8 is not zero");
/// How many members held down each speaker tells so every
/// [`Timing::rejoin_period`] (an announce, answered with a turn-undead
/// notice that makes a live one rejoin under a new identity). A speaker
/// back from being cut off holds down whoever it probed meanwhile, and
/// doubts those still renewing until it reaches them; more per period
/// reach them sooner, but in the simulator eight made enough members
/// rejoin at once that the churn broke the steady write rate in 5 of 45
/// 100-node seeds (two: 1 of 45).
const DOWN_ANNOUNCE_FANOUT: usize = 2;
/// Longest node name Kubernetes allows (a DNS subdomain).
const MAX_NODE_NAME: usize = 253;

/// Failure-detection timings.
///
/// [`Default`] is tuned to fail over fast - a SIGKILLed speaker of a
/// 3-node cluster is declared down in about 1.3 s, 2 s at worst - while
/// staying clear of false positives on a loaded 2-core machine: a
/// member is only declared down after it missed a whole probe period
/// *and* did not refute the suspicion for [`Self::suspect_to_down_after`],
/// so it must be unresponsive for about a second.
///
/// # Detection time
///
/// Each member probes one other member per [`Self::probe_period`],
/// round robin over a shuffled list. After a member dies:
///
/// 1. the first probe of it comes after (n-1)/n·`probe_period` on
///    average with n members (each of the n-1 survivors probes it once
///    per n-1 periods): at most one `probe_period` on average, up to
///    3·`probe_period` on a 3-node cluster in the worst case;
/// 2. that probe fails at the end of its period (+`probe_period`): no
///    direct ack within [`Self::probe_rtt`], and none through the
///    [`Self::num_indirect_probes`] members asked to probe it indirectly;
/// 3. the prober declares it suspect, and down [`Self::suspect_to_down_after`]
///    later since it does not refute;
/// 4. the others learn it within about one [`Self::gossip_period`].
///
/// So the mean is about `2·probe_period + suspect_to_down_after`
/// ([`Self::expected_detection`]), between `suspect_to_down_after` and
/// `4·probe_period + suspect_to_down_after + gossip_period` on 3 nodes.
/// A graceful leave takes one round trip instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// How often this speaker probes one other member; also how long a
    /// probe may take, indirect probes included. Must exceed `probe_rtt`.
    pub probe_period: Duration,
    /// How long to wait for a direct ack before asking other members to
    /// probe indirectly (a high percentile of the node-to-node RTT plus
    /// scheduling delays).
    pub probe_rtt: Duration,
    /// How many members are asked to probe a silent member indirectly,
    /// so one lossy path does not make it suspect; also how many members
    /// each periodic gossip goes to.
    pub num_indirect_probes: usize,
    /// How long a suspect member has to refute before it is declared
    /// down. The main guard against false positives: a member that is
    /// only slow hears of the suspicion within a gossip period and
    /// refutes it.
    pub suspect_to_down_after: Duration,
    /// How often pending updates (joins, suspicions, deaths) are gossiped
    /// to [`Self::num_indirect_probes`] random members, besides riding on
    /// probes.
    pub gossip_period: Duration,
    /// How often this speaker announces itself again to seeds it does not
    /// know alive and to members it holds down: what finds speakers that
    /// start later, heals partitions and brings back a member that was
    /// wrongly declared down.
    pub rejoin_period: Duration,
    /// How long a member declared down is remembered (and listed in
    /// [`View::down`]) before it is forgotten. A restarted speaker rejoins
    /// at once whatever this is: its new run is a new identity.
    pub remove_down_after: Duration,
    /// Longest a graceful leave waits for the others to confirm they
    /// heard it; the leave is resent meanwhile.
    pub leave_timeout: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            probe_period: Duration::from_millis(300),
            probe_rtt: Duration::from_millis(150),
            num_indirect_probes: 3,
            suspect_to_down_after: Duration::from_millis(700),
            gossip_period: Duration::from_millis(100),
            rejoin_period: Duration::from_secs(5),
            remove_down_after: Duration::from_secs(3600),
            leave_timeout: Duration::from_millis(500),
        }
    }
}

impl Timing {
    /// The mean time for the survivors to declare a crashed member down:
    /// `2·probe_period + suspect_to_down_after` (see the type's docs for
    /// the derivation and the spread).
    pub fn expected_detection(&self) -> Duration {
        self.probe_period
            .saturating_mul(2)
            .saturating_add(self.suspect_to_down_after)
    }

    /// Checks the timings make sense together.
    pub fn validate(&self) -> Result<(), MembershipError> {
        let nonzero = [
            ("probe_period", self.probe_period),
            ("probe_rtt", self.probe_rtt),
            ("suspect_to_down_after", self.suspect_to_down_after),
            ("gossip_period", self.gossip_period),
            ("rejoin_period", self.rejoin_period),
            ("remove_down_after", self.remove_down_after),
        ];
        for (field, value) in nonzero {
            if value.is_zero() {
                return Err(MembershipError::InvalidTiming(format!(
                    "{field} is zero; give it a positive duration (default {:?})",
                    field_default(field)
                )));
            }
        }
        if self.probe_rtt >= self.probe_period {
            return Err(MembershipError::InvalidTiming(format!(
                "probe_rtt ({:?}) must be shorter than probe_period ({:?}): a probe needs time for its indirect round",
                self.probe_rtt, self.probe_period
            )));
        }
        if self.num_indirect_probes == 0 {
            return Err(MembershipError::InvalidTiming(
                "num_indirect_probes is 0; ask at least 1 member (default 3)".into(),
            ));
        }
        Ok(())
    }

    /// The SWIM configuration for these timings.
    fn foca_config(&self) -> Result<foca::Config, MembershipError> {
        self.validate()?;
        let fanout = NonZeroUsize::new(self.num_indirect_probes).ok_or_else(|| {
            MembershipError::InvalidTiming("num_indirect_probes is 0; ask at least 1 member".into())
        })?;
        Ok(foca::Config {
            probe_period: self.probe_period,
            probe_rtt: self.probe_rtt,
            num_indirect_probes: fanout,
            max_transmissions: MAX_TRANSMISSIONS,
            suspect_to_down_after: self.suspect_to_down_after,
            remove_down_after: Some(self.remove_down_after),
            max_packet_size: MAX_PACKET_SIZE,
            // Tells a member the others hold down, so it renews its
            // identity and rejoins instead of staying out.
            notify_down_members: true,
            periodic_announce: Some(foca::PeriodicParams {
                frequency: self.rejoin_period,
                num_members: NonZeroUsize::MIN,
            }),
            periodic_announce_to_down_members: Some(foca::PeriodicParams {
                frequency: self.rejoin_period,
                num_members: NonZeroUsize::MIN.saturating_add(DOWN_ANNOUNCE_FANOUT - 1),
            }),
            periodic_gossip: Some(foca::PeriodicParams {
                frequency: self.gossip_period,
                num_members: fanout,
            }),
        })
    }
}

fn field_default(field: &str) -> Duration {
    let d = Timing::default();
    match field {
        "probe_period" => d.probe_period,
        "probe_rtt" => d.probe_rtt,
        "suspect_to_down_after" => d.suspect_to_down_after,
        "gossip_period" => d.gossip_period,
        "rejoin_period" => d.rejoin_period,
        "remove_down_after" => d.remove_down_after,
        _ => d.leave_timeout,
    }
}

/// How to start the membership.
#[derive(Clone)]
pub struct Config {
    /// This node's name (the member name the others see).
    pub node: String,
    /// Address to listen on and advertise: the node's own address
    /// (InternalIP) and port, reachable by the other speakers. Port 0
    /// picks a free port (tests).
    pub bind: SocketAddr,
    /// The shared secret (the `memberlist` Secret's bytes, at least 16);
    /// the key is derived from it by HKDF-SHA256. Other keys can be
    /// accepted later ([`Membership::set_keyring`]).
    pub secret: Vec<u8>,
    /// Detection timings.
    pub timing: Timing,
    /// This run's number ([`next_run`]): the gossip identity's and every
    /// datagram stamp's; a restart must take a larger one.
    pub run: u64,
}

impl std::fmt::Debug for Config {
    // The secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("node", &self.node)
            .field("bind", &self.bind)
            .field("secret", &format_args!("<{} bytes>", self.secret.len()))
            .field("timing", &self.timing)
            .field("run", &self.run)
            .finish()
    }
}

/// Why a received datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// Not an envelope of ours: too short, too long or of an unknown
    /// version (stray traffic on the port, or another release).
    Malformed,
    /// Failed authentication: sealed with another secret, or altered.
    Auth,
    /// Authenticated but undecodable: a peer speaking another protocol
    /// version under the same secret.
    Decode,
    /// Decoded but refused by the protocol (e.g. a message claiming to
    /// come from this very node: two speakers with one node name?, or a
    /// leave for another identity than the sender's current one).
    Rejected,
    /// From an address that is no known node's: dropped before any
    /// decryption.
    UnknownSender,
    /// Authentic but seen before (recorded and sent again), or from an
    /// older run of its sender.
    Replayed,
    /// A join request (which is answered with the member list) beyond
    /// the rate one sender may ask for.
    RateLimited,
}

impl DropReason {
    /// Every reason, in a stable order.
    pub const ALL: [DropReason; 7] = [
        DropReason::Malformed,
        DropReason::Auth,
        DropReason::Decode,
        DropReason::Rejected,
        DropReason::UnknownSender,
        DropReason::Replayed,
        DropReason::RateLimited,
    ];

    /// A short lowercase label (for metrics).
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::Auth => "auth",
            DropReason::Decode => "decode",
            DropReason::Rejected => "rejected",
            DropReason::UnknownSender => "unknown_sender",
            DropReason::Replayed => "replayed",
            DropReason::RateLimited => "rate_limited",
        }
    }
}

/// Why the membership could not start.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    /// No node name.
    #[error(
        "membership needs this node's name; pass the Node the speaker runs on (NODE_NAME from spec.nodeName)"
    )]
    EmptyNode,
    /// A node name longer than Kubernetes allows.
    #[error(
        "node name of {0} bytes is longer than Kubernetes allows ({MAX_NODE_NAME}); pass the Node's metadata.name"
    )]
    NodeTooLong(usize),
    /// No secret.
    #[error(
        "the memberlist secret is empty; the `memberlist` Secret must hold random bytes under `secretkey` (e.g. `openssl rand -base64 128`)"
    )]
    EmptySecret,
    /// A secret too short to be a key.
    #[error(
        "a memberlist secret of {0} bytes is too short: at least {min} random bytes are needed (e.g. `openssl rand -base64 128`)",
        min = crypto::MIN_SECRET
    )]
    ShortSecret(usize),
    /// An address the others cannot send to.
    #[error(
        "cannot advertise {0} to the other speakers; bind membership to the node's own address (its InternalIP), not an unspecified one"
    )]
    UnspecifiedBind(SocketAddr),
    /// The socket could not be bound.
    #[error(
        "cannot bind the membership socket on UDP {addr}: {source}; is another speaker or process using that port on this node, and is the address the node's own?"
    )]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Timings that do not fit together.
    #[error("invalid membership timing: {0}")]
    InvalidTiming(String),
    /// No randomness from the OS to seed the protocol.
    #[error("cannot seed the gossip's random number generator from the operating system: {0}")]
    Random(String),
}

/// The cluster label, authenticated with every datagram (and salting
/// the key): a datagram of another cluster or another program using the
/// same secret never opens.
const CLUSTER_LABEL: &str = "metallb";

/// Requests from the handle to the gossip task.
#[derive(Debug)]
enum Command {
    /// Seal with this ring's primary key from now on, open with any.
    Keys(Keyring),
    /// Seeds to announce to (see [`Membership::join`]).
    Join(Vec<(String, SocketAddr)>),
    /// Leave now; answered when done.
    Leave(oneshot::Sender<()>),
}

/// Extra time [`Membership::leave`] allows the task beyond
/// [`Timing::leave_timeout`] (a busy runtime), before stopping it anyway.
const LEAVE_MARGIN: Duration = Duration::from_millis(500);

/// The running membership: a handle on the gossip task.
///
/// Dropping it without [`Membership::leave`] stops the task abruptly, as
/// a crash would: the others detect the failure.
#[derive(Debug)]
pub struct Membership {
    node: String,
    addr: SocketAddr,
    commands: mpsc::UnboundedSender<Command>,
    view: watch::Receiver<View>,
    counters: Arc<Counters>,
    leave_timeout: Duration,
    task: Option<JoinHandle<()>>,
    /// This run's first identity (tests forge its datagrams).
    #[cfg(test)]
    identity: wire::Identity,
}

impl Membership {
    /// Binds the socket and starts the gossip task (on the current tokio
    /// runtime). Alone until [`Membership::join`] is given seeds.
    pub async fn start(config: Config) -> Result<Self, MembershipError> {
        let Config {
            node,
            bind,
            secret,
            timing,
            run,
        } = config;
        if node.is_empty() {
            return Err(MembershipError::EmptyNode);
        }
        if node.len() > MAX_NODE_NAME {
            return Err(MembershipError::NodeTooLong(node.len()));
        }
        if secret.is_empty() {
            return Err(MembershipError::EmptySecret);
        }
        let keyring = Keyring::new(secret, Vec::new())?;
        if bind.ip().is_unspecified() {
            return Err(MembershipError::UnspecifiedBind(bind));
        }
        let foca_config = timing.foca_config()?;
        let socket = tokio::net::UdpSocket::bind(bind)
            .await
            .map_err(|source| MembershipError::Bind { addr: bind, source })?;
        // With port 0 the OS picked one: advertise that.
        let addr = socket
            .local_addr()
            .map_err(|source| MembershipError::Bind { addr: bind, source })?;
        let identity = wire::Identity::new(node.clone(), addr, run);
        let view = View {
            alive: BTreeSet::from([node.clone()]),
            ..View::default()
        };
        let (view_tx, view_rx) = watch::channel(view);
        let (commands_tx, commands_rx) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let runner = task::Runner::new(task::Parts {
            #[cfg(test)]
            identity: identity.clone(),
            #[cfg(not(test))]
            identity,
            foca_config,
            timing: timing.clone(),
            socket,
            cipher: crypto::Cipher::with_keyring(&keyring, CLUSTER_LABEL),
            view: view_tx,
            counters: Arc::clone(&counters),
        })?;
        tracing::info!(%node, %addr, expected_detection = ?timing.expected_detection(), "gossip membership listening");
        let task = tokio::spawn(runner.run(commands_rx));
        Ok(Self {
            node,
            addr,
            commands: commands_tx,
            view: view_rx,
            counters,
            leave_timeout: timing.leave_timeout,
            task: Some(task),
            #[cfg(test)]
            identity,
        })
    }

    /// Changes of the view. The channel closes when the task stops
    /// (after [`Membership::leave`]).
    pub fn subscribe(&self) -> watch::Receiver<View> {
        self.view.clone()
    }

    /// The current view.
    pub fn view(&self) -> View {
        self.view.borrow().clone()
    }

    /// Seeds: (node name, address) of every node that may run a speaker
    /// (every Node's InternalIP and the gossip port), whenever they
    /// change. This node's entry is ignored.
    ///
    /// Seeds not known alive are announced to at once if new or moved,
    /// and every [`Timing::rejoin_period`] otherwise, so calling this
    /// often costs nothing but a comparison.
    pub fn join(&self, seeds: Vec<(String, SocketAddr)>) {
        // Fails only once the task has stopped: nothing to join then.
        let _ = self.commands.send(Command::Join(seeds));
    }

    /// Graceful leave: tells every member at once (so they re-elect
    /// without waiting for failure detection), waits for them to confirm
    /// - at most [`Timing::leave_timeout`] - and stops the task.
    pub async fn leave(mut self) {
        let Some(task) = self.task.take() else {
            return;
        };
        let (done_tx, done_rx) = oneshot::channel();
        if self.commands.send(Command::Leave(done_tx)).is_ok() {
            let bound = self.leave_timeout.saturating_add(LEAVE_MARGIN);
            if tokio::time::timeout(bound, done_rx).await.is_err() {
                tracing::warn!(node = %self.node, "gossip leave did not finish in {bound:?}; stopping anyway");
            }
        }
        task.abort();
        // Cancelled or finished: either way it is gone.
        let _ = task.await;
    }

    /// Replaces the keys (the `memberlist` Secret changed): datagrams are
    /// sealed with `keyring`'s primary key from now on and opened with
    /// any of its keys, as hashicorp memberlist's keyring.
    pub fn set_keyring(&self, keyring: Keyring) {
        // Fails only once the task has stopped: no keys to change then.
        let _ = self.commands.send(Command::Keys(keyring));
    }

    /// The gossip metrics (members, probes, dropped datagrams by reason)
    /// as a collector to register in the speaker's registry.
    pub fn metrics(&self) -> GossipMetrics {
        GossipMetrics::new(Arc::clone(&self.counters), self.view.clone())
    }

    /// Datagrams dropped since start, by reason.
    pub fn dropped(&self) -> Dropped {
        self.counters.snapshot()
    }

    /// How many members are alive, this node included.
    pub fn members(&self) -> usize {
        self.view.borrow().alive.len()
    }

    /// The address this speaker gossips on (the bound one: with port 0,
    /// the port the OS picked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
