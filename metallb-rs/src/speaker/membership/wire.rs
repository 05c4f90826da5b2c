//! What travels inside the envelope: member identities and the frames
//! (a SWIM packet for foca, or this module's own leave handshake).

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// One speaker instance: its node, where it listens, and which run of
/// it this is.
///
/// Foca's address of an identity ([`foca::Identity::Addr`]) is the node
/// name, so one node is one member whatever its instances: when a
/// speaker restarts, its new identity (a larger `bump`) replaces the old
/// one everywhere instead of appearing beside it.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "IdentityWire")]
pub(crate) struct Identity {
    /// The node name's key, foca's address: derived, never sent. First,
    /// so that comparing two identities (foca does it against every
    /// member when it picks whom to gossip to) tells two nodes apart
    /// without comparing their names.
    #[serde(skip_serializing)]
    key: NodeKey,
    /// The Node name.
    pub(crate) node: Arc<str>,
    /// Where this instance receives datagrams.
    pub(crate) addr: SocketAddr,
    /// Which run: milliseconds since the epoch at start, plus one per
    /// automatic rejoin. Larger wins over smaller for the same node.
    pub(crate) bump: u64,
}

/// An [`Identity`] as it travels: the key is the receiver's to derive.
#[derive(Deserialize)]
struct IdentityWire {
    node: Arc<str>,
    addr: SocketAddr,
    bump: u64,
}

impl From<IdentityWire> for Identity {
    fn from(w: IdentityWire) -> Self {
        Self::with_name(w.node, w.addr, w.bump)
    }
}

/// A node name as foca compares it: a 128-bit digest of the name, taken
/// once per identity. Foca looks an update's member up by comparing its
/// address with every known member's, so at a thousand members the
/// comparison is the hot loop of gossip: two words instead of a shared
/// string cloned, compared and dropped per member. Two names with one
/// digest (about 1 in 10^32 for a thousand nodes) would be one member:
/// the loser would be judged by its lease, as a member gossip does not
/// know.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct NodeKey(u64, u64);

impl NodeKey {
    fn of(name: &str) -> Self {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let digest = |salt: u64| {
            let mut h = DefaultHasher::new();
            salt.hash(&mut h);
            name.hash(&mut h);
            h.finish()
        };
        Self(digest(0), digest(0x9e37_79b9_7f4a_7c15))
    }
}

/// Milliseconds since 1970 on this node's clock: a run's number, and
/// what a stamped run is checked against. A clock before 1970 only loses
/// the restart tie-break.
pub fn wall_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// How far in the future a sender's run may start (its epoch is its
/// start in milliseconds since 1970): beyond any clock skew a cluster
/// lives with, and short of what would let one sealed datagram with a
/// huge epoch make every receiver drop that sender's real gossip as
/// "an older run" until they forget it.
pub(crate) const MAX_EPOCH_AHEAD_MS: u64 = 24 * 3600 * 1000;

/// Whether a run starting at `epoch` (ms) is plausible at `now` (ms).
pub(crate) fn plausible_epoch(epoch: u64, now: u64) -> bool {
    epoch <= now.saturating_add(MAX_EPOCH_AHEAD_MS)
}

/// Room above the recorded run for the automatic rejoins of that run
/// (each takes the next number, and takes seconds: being declared down
/// first), so the next run still wins over the last identity the others
/// saw.
pub const REJOIN_ROOM: u64 = 10_000;

/// The number of a new run of a node's speaker, given the node's clock
/// (`wall_ms`, milliseconds since 1970) and the run its lease recorded
/// last (`last`): the clock's reading, unless the clock was stepped back
/// behind the last run - then past that run and its rejoins. A smaller
/// number would lose to the previous run everywhere: the others would
/// drop the new run's datagrams as an older run's and keep the old
/// identity (see [`Identity::win_addr_conflict`]) until they forget it.
/// A recorded run the others would refuse as implausibly far ahead is
/// not followed.
pub fn next_run(wall_ms: u64, last: Option<u64>) -> u64 {
    match last {
        Some(last) if last >= wall_ms && plausible_epoch(last, wall_ms) => {
            last.saturating_add(REJOIN_ROOM)
        }
        _ => wall_ms,
    }
}

impl Identity {
    /// Instance `bump` ([`next_run`]) of `node`, listening on `addr`.
    pub(crate) fn new(node: String, addr: SocketAddr, bump: u64) -> Self {
        Self::with_name(node.into(), addr, bump)
    }

    fn with_name(node: Arc<str>, addr: SocketAddr, bump: u64) -> Self {
        Self {
            key: NodeKey::of(&node),
            node,
            addr,
            bump,
        }
    }

    /// The identity to announce to a seed: its real bump is unknown, and
    /// foca accepts an announce addressed to any identity of the node.
    pub(crate) fn seed(node: String, addr: SocketAddr) -> Self {
        Self::new(node, addr, 0)
    }
}

impl std::fmt::Debug for Identity {
    // Compact: identities appear in most gossip log lines.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}#{}", self.node, self.addr, self.bump)
    }
}

impl foca::Identity for Identity {
    type Addr = NodeKey;

    // Opting in to automatic rejoin: a speaker the others wrongly
    // declared down (a long pause, a partition) comes back at once as
    // the next identity instead of staying out until restarted.
    fn renew(&self) -> Option<Self> {
        Some(Self {
            bump: self.bump.wrapping_add(1),
            ..self.clone()
        })
    }

    fn addr(&self) -> NodeKey {
        self.key
    }

    fn win_addr_conflict(&self, adversary: &Self) -> bool {
        self.bump > adversary.bump
    }
}

/// Who sealed a datagram, which run of it and which of its datagrams:
/// the first thing inside every envelope, checked against the replay
/// window before the frame is looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    /// The sender's Node name.
    pub(crate) node: String,
    /// The sender's run: its start time in milliseconds since the epoch
    /// (a restart is a larger epoch).
    pub(crate) epoch: u64,
    /// Counts the run's datagrams from 0.
    pub(crate) seq: u64,
}

/// The longest encoded stamp: a node name of [`super::MAX_NODE_NAME`]
/// bytes with its 2-byte length, and two 10-byte varints.
pub(crate) const MAX_STAMP: usize = 2 + super::MAX_NODE_NAME + 10 + 10;

impl Stamp {
    /// `frame` behind this stamp: the plaintext to seal.
    pub(crate) fn prepend(&self, frame: &[u8]) -> Result<Vec<u8>, postcard::Error> {
        let mut out = postcard::to_allocvec(self)?;
        out.extend_from_slice(frame);
        Ok(out)
    }

    /// The stamp of a plaintext and the frame behind it.
    pub(crate) fn split(plaintext: &[u8]) -> Result<(Stamp, &[u8]), FrameError> {
        postcard::take_from_bytes::<Stamp>(plaintext).map_err(|e| FrameError::Body {
            what: "stamp",
            reason: e.to_string(),
        })
    }
}

const FOCA: u8 = 0;
const LEAVE: u8 = 1;
const LEAVE_ACK: u8 = 2;

/// One plaintext datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// A SWIM packet, for foca.
    Foca(&'a [u8]),
    /// "This identity leaves the cluster now." Sent by the leaver to every
    /// member it knows, so each hears it first-hand and can tell a leave
    /// from a failure.
    Leave(Identity),
    /// "`by` has taken note that `leaver` left": lets the leaver stop
    /// resending and exit early.
    LeaveAck {
        /// The identity that left.
        leaver: Identity,
        /// The node acknowledging.
        by: String,
    },
}

#[derive(Serialize, Deserialize)]
struct Ack {
    leaver: Identity,
    by: String,
}

/// Why a (authenticated) plaintext is not a frame: a peer speaking
/// another protocol version under the same secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FrameError {
    /// Nothing inside the envelope.
    #[error("empty frame")]
    Empty,
    /// A frame kind this speaker does not know.
    #[error("unknown frame kind {0}: is a peer running another metallb-rs release?")]
    Kind(u8),
    /// The body does not decode.
    #[error("undecodable {what} frame: {reason}")]
    Body {
        /// The frame kind.
        what: &'static str,
        /// The decoder's message.
        reason: String,
    },
}

impl<'a> Frame<'a> {
    /// The frame's bytes (kind byte, then body).
    pub(crate) fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        match self {
            Frame::Foca(packet) => {
                let mut out = Vec::with_capacity(1 + packet.len());
                out.push(FOCA);
                out.extend_from_slice(packet);
                Ok(out)
            }
            Frame::Leave(id) => {
                let mut out = vec![LEAVE];
                out.extend_from_slice(&postcard::to_allocvec(id)?);
                Ok(out)
            }
            Frame::LeaveAck { leaver, by } => {
                let mut out = vec![LEAVE_ACK];
                let ack = Ack {
                    leaver: leaver.clone(),
                    by: by.clone(),
                };
                out.extend_from_slice(&postcard::to_allocvec(&ack)?);
                Ok(out)
            }
        }
    }

    /// The frame in `bytes`.
    pub(crate) fn decode(bytes: &'a [u8]) -> Result<Self, FrameError> {
        let (&kind, body) = bytes.split_first().ok_or(FrameError::Empty)?;
        match kind {
            FOCA => Ok(Frame::Foca(body)),
            LEAVE => Ok(Frame::Leave(whole(body, "leave")?)),
            LEAVE_ACK => {
                let Ack { leaver, by } = whole(body, "leave-ack")?;
                Ok(Frame::LeaveAck { leaver, by })
            }
            other => Err(FrameError::Kind(other)),
        }
    }
}

/// `T` decoded from all of `body` (trailing bytes are an error: they
/// would mean the sender meant something else).
fn whole<'de, T: Deserialize<'de>>(body: &'de [u8], what: &'static str) -> Result<T, FrameError> {
    let body_error = |reason: String| FrameError::Body { what, reason };
    let (value, rest) =
        postcard::take_from_bytes::<T>(body).map_err(|e| body_error(e.to_string()))?;
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(body_error(format!("{} trailing bytes", rest.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use foca::Identity as _;
    use proptest::prelude::*;

    fn id(node: &str, bump: u64) -> Identity {
        Identity::new(node.into(), "10.0.0.1:7946".parse().expect("addr"), bump)
    }

    #[test]
    fn frames_round_trip() {
        let frames = [
            Frame::Foca(b"swim"),
            Frame::Foca(b""),
            Frame::Leave(id("a", 7)),
            Frame::LeaveAck {
                leaver: id("a", 7),
                by: "b".into(),
            },
        ];
        for frame in frames {
            let bytes = frame.encode().expect("encode");
            assert_eq!(Frame::decode(&bytes), Ok(frame));
        }
    }

    #[test]
    fn stamps_round_trip_and_fit_their_bound() {
        let stamp = Stamp {
            node: "n".repeat(crate::speaker::membership::MAX_NODE_NAME),
            epoch: u64::MAX,
            seq: u64::MAX,
        };
        let sealed = stamp.prepend(b"frame").expect("encode");
        assert_eq!(sealed.len(), MAX_STAMP + 5);
        assert_eq!(Stamp::split(&sealed), Ok((stamp, &b"frame"[..])));
        assert!(Stamp::split(&[5, b'a']).is_err());
    }

    #[test]
    fn bad_frames_are_errors() {
        assert_eq!(Frame::decode(&[]), Err(FrameError::Empty));
        assert_eq!(Frame::decode(&[9, 1, 2]), Err(FrameError::Kind(9)));
        assert!(matches!(
            Frame::decode(&[LEAVE, 200]),
            Err(FrameError::Body { what: "leave", .. })
        ));
        let mut bytes = Frame::Leave(id("a", 1)).encode().expect("encode");
        bytes.push(0);
        assert!(matches!(
            Frame::decode(&bytes),
            Err(FrameError::Body { what: "leave", .. })
        ));
    }

    #[test]
    fn identities_of_one_node_are_one_member() {
        let old = id("a", 1);
        let new = old.renew().expect("renewable");
        assert_eq!(old.addr(), new.addr());
        assert!(new.win_addr_conflict(&old));
        assert!(!old.win_addr_conflict(&new));
    }

    #[test]
    fn two_nodes_are_two_members_whatever_their_addresses() {
        let a = id("a", 1);
        let moved = Identity::new("a".into(), "10.0.0.9:7946".parse().expect("addr"), 5);
        assert_eq!(a.addr(), moved.addr(), "one node, another address and run");
        for other in ["b", "a ", "A", "", "node-a"] {
            assert_ne!(a.addr(), id(other, 1).addr(), "{other:?} is not node a");
        }
    }

    /// The key is derived, not sent: identities travel exactly as they
    /// did without it (name, address, run), so speakers of both kinds
    /// understand each other during a rolling upgrade.
    #[test]
    fn an_identity_travels_as_its_name_address_and_run() {
        #[derive(Serialize)]
        struct Sent<'a> {
            node: &'a str,
            addr: SocketAddr,
            bump: u64,
        }
        let addr: SocketAddr = "10.0.0.1:7946".parse().expect("addr");
        let sent = postcard::to_allocvec(&Sent {
            node: "node-a",
            addr,
            bump: 7,
        })
        .expect("encode");
        let got: Identity = postcard::from_bytes(&sent).expect("decode");
        assert_eq!(got, Identity::new("node-a".into(), addr, 7));
        assert_eq!(got.addr(), id("node-a", 1).addr());
        assert_eq!(postcard::to_allocvec(&got).expect("encode"), sent);
    }

    #[test]
    fn a_restart_wins_over_the_previous_run() {
        let addr = "10.0.0.1:7946".parse().expect("addr");
        let first = Identity::new("a".into(), addr, next_run(wall_millis(), None));
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = Identity::new("a".into(), addr, next_run(wall_millis(), Some(first.bump)));
        assert!(second.win_addr_conflict(&first));
    }

    /// A run may start up to a day ahead of our clock (skew), not more:
    /// `u64::MAX` would shadow the sender's real runs for an hour.
    #[test]
    fn runs_from_the_far_future_are_refused() {
        let now = 1_800_000_000_000;
        assert!(plausible_epoch(now, now));
        assert!(plausible_epoch(now - 1, now));
        assert!(plausible_epoch(now + MAX_EPOCH_AHEAD_MS, now));
        assert!(!plausible_epoch(now + MAX_EPOCH_AHEAD_MS + 1, now));
        assert!(!plausible_epoch(u64::MAX, now));
    }

    #[test]
    fn a_run_after_a_clock_step_back_still_wins() {
        let hour = 3_600_000;
        let now = 1_800_000_000_000;
        // (clock now, recorded run) -> the new run.
        let cases = [
            (now, None, now),
            // The clock went on: it is the number.
            (now, Some(now - hour), now),
            // Stepped back an hour behind the last run (rejoined a few
            // times): past the run and its rejoins.
            (now - hour, Some(now), now + REJOIN_ROOM),
            (now, Some(now), now + REJOIN_ROOM),
            // A recorded run the others refuse as too far ahead is not
            // followed (it never was their run).
            (now, Some(now + MAX_EPOCH_AHEAD_MS + 1), now),
            (now, Some(u64::MAX), now),
        ];
        for (wall, last, want) in cases {
            assert_eq!(
                next_run(wall, last),
                want,
                "clock {wall}, last run {last:?}"
            );
        }
        let addr = "10.0.0.1:7946".parse().expect("addr");
        let before = Identity::new("a".into(), addr, now + 5);
        let after = Identity::new("a".into(), addr, next_run(now - hour, Some(now)));
        assert!(after.win_addr_conflict(&before));
        assert!(plausible_epoch(after.bump, now - hour));
    }

    #[test]
    fn debug_is_compact() {
        assert_eq!(format!("{:?}", id("a", 3)), "a@10.0.0.1:7946#3");
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Frame::decode(&bytes);
        }
    }
}
