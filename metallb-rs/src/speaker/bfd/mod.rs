//! BFD for the native BGP speaker: asynchronous mode of RFC 5880 over
//! single-hop (RFC 5881) or multihop (RFC 5883) UDP, set up from a
//! BFDProfile, so that a dead path closes the BGP session in well under a
//! second instead of a hold time.
//!
//! - [`packet`]: the Control packet to and from bytes, the stateless
//!   reception checks, and the TTL rule.
//! - [`params`]: a profile's values into session parameters, upstream's
//!   defaults, and the refusal of echo mode.
//! - [`session`]: one peer's state machine, timers and counters.
//!
//! Pure: time is an argument (`Instant`s handed in, never read here),
//! randomness for jitter is an argument, and there is no socket, thread or
//! task. The caller (`speaker::bgp::bfd_link`) owns the UDP sockets,
//! reads a datagram and its TTL, routes it to a session by discriminator,
//! sends what the session asks, and sleeps until
//! [`Session::next_wake`]; the same code then runs under
//! tokio and in a deterministic test. It uses only `std` and the
//! config's echoMode refusal text (one text for admission and run time).
//! Hand-rolled: the one Rust BFD crate found
//! (rust-bfd, three commits, its own async daemon) is neither maintained
//! nor free of I/O.
//!
//! Not run: echo mode, Demand mode (a peer's D bit is ignored, ours is
//! never set) and authentication (BFDProfile cannot configure it; packets
//! carrying it are refused).

pub mod packet;
pub mod params;
pub mod session;

pub use packet::{ControlPacket, DecodeError, Diagnostic, Hops, State, TtlRefused, check_ttl};
pub use params::{Params, Profile, ProfileError, Reach, echo_mode_refusal};
pub use session::{Action, Change, Counters, Session};
