//! BGP-4 messages (RFC 4271) with the extensions the speaker uses:
//! capabilities (RFC 5492), multiprotocol NLRI for IPv6 (RFC 4760),
//! 4-octet AS numbers (RFC 6793), communities (RFC 1997), large
//! communities (RFC 8092), route refresh (RFC 2918) and the wire parts
//! of graceful restart (RFC 4724: the capability and End-of-RIB), and
//! IPv4 routes with an IPv6 next hop (RFC 8950: the capability; the
//! routes travel in MP_REACH_NLRI with a 16- or 32-octet next hop).
//!
//! Pure: bytes in, messages out and back. Decoding checks what RFC 4271
//! section 6 asks a speaker to check, and a failure carries the
//! NOTIFICATION (code, subcode, data) that ends the session, so a peer
//! sending garbage gets told exactly what was wrong.

mod open;
mod update;

#[cfg(test)]
mod tests;

pub use open::SAFI_UNICAST;
pub use open::{Afi, Capability, ExtendedNextHop, GracefulRestart, GracefulRestartFamily, Open};
pub use update::{
    AsSegment, Attributes, MpReach, MpUnreach, Origin, RawAttribute, Update, prefix_wire_len,
};

use std::fmt;

/// Every message starts with 16 bytes of ones.
pub const MARKER: [u8; 16] = [0xff; 16];
/// Marker, length and type.
pub const HEADER_LEN: usize = 19;
/// The largest message without the extended message capability.
pub const MAX_LEN: usize = 4096;
/// The port BGP listens on.
pub const PORT: u16 = 179;
/// The longest TCP MD5 key (RFC 2385) Linux accepts (TCP_MD5SIG_MAXKEYLEN).
pub const MD5_MAX_KEY: usize = 80;
/// Stands in for a 4-octet AS in 2-octet fields (RFC 6793).
pub const AS_TRANS: u16 = 23456;

/// What decoding needs from the session: whether AS numbers in AS_PATH
/// are 4 octets (both sides announced the capability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Context {
    /// 4-octet AS numbers negotiated.
    pub four_octet_as: bool,
}

/// A BGP message.
// Messages live briefly, one at a time per session: boxing the large
// UPDATE would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Type 1.
    Open(Open),
    /// Type 2.
    Update(Update),
    /// Type 3.
    Notification(Notification),
    /// Type 4.
    Keepalive,
    /// Type 5 (RFC 2918): the peer asks for every route again.
    RouteRefresh {
        /// Address family.
        afi: u16,
        /// Subsequent address family.
        safi: u8,
    },
}

/// A NOTIFICATION: why a session ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// Error code (1 header, 2 OPEN, 3 UPDATE, 4 hold timer, 5 FSM, 6 cease).
    pub code: u8,
    /// Error subcode.
    pub subcode: u8,
    /// Diagnostic data.
    pub data: Vec<u8>,
}

/// Error codes and subcodes (RFC 4271 section 4.5, RFC 4486, RFC 5492).
pub mod code {
    /// Message header error.
    pub const HEADER: u8 = 1;
    /// Marker not all ones.
    pub const HEADER_NOT_SYNCHRONIZED: u8 = 1;
    /// Length out of range for the type.
    pub const HEADER_BAD_LENGTH: u8 = 2;
    /// Unknown message type.
    pub const HEADER_BAD_TYPE: u8 = 3;
    /// OPEN message error.
    pub const OPEN: u8 = 2;
    /// No specific subcode.
    pub const UNSPECIFIC: u8 = 0;
    /// Version other than 4.
    pub const OPEN_UNSUPPORTED_VERSION: u8 = 1;
    /// The peer's AS is not the configured one.
    pub const OPEN_BAD_PEER_AS: u8 = 2;
    /// BGP identifier 0 or equal to ours.
    pub const OPEN_BAD_IDENTIFIER: u8 = 3;
    /// Optional parameter other than capabilities.
    pub const OPEN_UNSUPPORTED_PARAMETER: u8 = 4;
    /// Hold time 1 or 2 seconds.
    pub const OPEN_UNACCEPTABLE_HOLD_TIME: u8 = 6;
    /// UPDATE message error.
    pub const UPDATE: u8 = 3;
    /// Lengths do not add up, or an attribute appears twice.
    pub const UPDATE_MALFORMED_ATTRIBUTE_LIST: u8 = 1;
    /// A well-known attribute this speaker does not know.
    pub const UPDATE_UNRECOGNIZED_WELL_KNOWN: u8 = 2;
    /// ORIGIN, AS_PATH or NEXT_HOP missing with NLRI present.
    pub const UPDATE_MISSING_WELL_KNOWN: u8 = 3;
    /// Flags contradict the attribute type.
    pub const UPDATE_ATTRIBUTE_FLAGS: u8 = 4;
    /// Length wrong for the attribute type.
    pub const UPDATE_ATTRIBUTE_LENGTH: u8 = 5;
    /// ORIGIN other than 0, 1, 2.
    pub const UPDATE_INVALID_ORIGIN: u8 = 6;
    /// NEXT_HOP unusable.
    pub const UPDATE_INVALID_NEXT_HOP: u8 = 8;
    /// An optional attribute's value is malformed.
    pub const UPDATE_OPTIONAL_ATTRIBUTE: u8 = 9;
    /// A prefix is malformed.
    pub const UPDATE_INVALID_NETWORK: u8 = 10;
    /// AS_PATH is malformed.
    pub const UPDATE_MALFORMED_AS_PATH: u8 = 11;
    /// Hold timer expired.
    pub const HOLD_TIMER_EXPIRED: u8 = 4;
    /// Finite state machine error.
    pub const FSM: u8 = 5;
    /// FSM error: a message other than OPEN in OpenSent (RFC 6608).
    pub const FSM_UNEXPECTED_IN_OPEN_SENT: u8 = 1;
    /// FSM error: a message other than KEEPALIVE in OpenConfirm (RFC 6608).
    pub const FSM_UNEXPECTED_IN_OPEN_CONFIRM: u8 = 2;
    /// FSM error: an OPEN in Established (RFC 6608).
    pub const FSM_UNEXPECTED_IN_ESTABLISHED: u8 = 3;
    /// Cease.
    pub const CEASE: u8 = 6;
    /// Cease: administrative shutdown (the speaker stops).
    pub const CEASE_ADMIN_SHUTDOWN: u8 = 2;
    /// Cease: peer de-configured.
    pub const CEASE_PEER_DECONFIGURED: u8 = 3;
    /// Cease: other configuration change.
    pub const CEASE_CONFIG_CHANGE: u8 = 6;
    /// Cease: BFD Down (RFC 9384), the path under the session failed.
    pub const CEASE_BFD_DOWN: u8 = 10;
}

impl Notification {
    /// A notification with diagnostic data.
    pub fn new(code: u8, subcode: u8, data: impl Into<Vec<u8>>) -> Self {
        Self {
            code,
            subcode,
            data: data.into(),
        }
    }
}

impl fmt::Display for Notification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use code::*;
        let what = match (self.code, self.subcode) {
            (HEADER, HEADER_NOT_SYNCHRONIZED) => {
                "message header error: connection not synchronized"
            }
            (HEADER, HEADER_BAD_LENGTH) => "message header error: bad message length",
            (HEADER, HEADER_BAD_TYPE) => "message header error: bad message type",
            (HEADER, _) => "message header error",
            (OPEN, OPEN_UNSUPPORTED_VERSION) => "OPEN error: unsupported version number",
            (OPEN, OPEN_BAD_PEER_AS) => "OPEN error: bad peer AS",
            (OPEN, OPEN_BAD_IDENTIFIER) => "OPEN error: bad BGP identifier",
            (OPEN, OPEN_UNSUPPORTED_PARAMETER) => "OPEN error: unsupported optional parameter",
            (OPEN, OPEN_UNACCEPTABLE_HOLD_TIME) => "OPEN error: unacceptable hold time",
            (OPEN, _) => "OPEN error",
            (UPDATE, UPDATE_MALFORMED_ATTRIBUTE_LIST) => "UPDATE error: malformed attribute list",
            (UPDATE, UPDATE_UNRECOGNIZED_WELL_KNOWN) => {
                "UPDATE error: unrecognized well-known attribute"
            }
            (UPDATE, UPDATE_MISSING_WELL_KNOWN) => "UPDATE error: missing well-known attribute",
            (UPDATE, UPDATE_ATTRIBUTE_FLAGS) => "UPDATE error: attribute flags error",
            (UPDATE, UPDATE_ATTRIBUTE_LENGTH) => "UPDATE error: attribute length error",
            (UPDATE, UPDATE_INVALID_ORIGIN) => "UPDATE error: invalid ORIGIN",
            (UPDATE, UPDATE_INVALID_NEXT_HOP) => "UPDATE error: invalid NEXT_HOP",
            (UPDATE, UPDATE_OPTIONAL_ATTRIBUTE) => "UPDATE error: optional attribute error",
            (UPDATE, UPDATE_INVALID_NETWORK) => "UPDATE error: invalid network field",
            (UPDATE, UPDATE_MALFORMED_AS_PATH) => "UPDATE error: malformed AS_PATH",
            (UPDATE, _) => "UPDATE error",
            (HOLD_TIMER_EXPIRED, _) => "hold timer expired",
            (FSM, _) => "finite state machine error",
            (CEASE, CEASE_ADMIN_SHUTDOWN) => "cease: administrative shutdown",
            (CEASE, CEASE_PEER_DECONFIGURED) => "cease: peer de-configured",
            (CEASE, CEASE_CONFIG_CHANGE) => "cease: other configuration change",
            (CEASE, CEASE_BFD_DOWN) => "cease: BFD down",
            (CEASE, _) => "cease",
            _ => "unknown error",
        };
        write!(f, "{what} ({}/{})", self.code, self.subcode)?;
        if !self.data.is_empty() {
            write!(f, " data ")?;
            for b in self.data.iter().take(32) {
                write!(f, "{b:02x}")?;
            }
            if self.data.len() > 32 {
                write!(f, "...")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Notification {}

/// Message types.
const OPEN: u8 = 1;
const UPDATE: u8 = 2;
const NOTIFICATION: u8 = 3;
const KEEPALIVE: u8 = 4;
const ROUTE_REFRESH: u8 = 5;

/// Checks a header; returns the message type and its total length.
/// The session reads this many bytes (the header included) next.
pub fn decode_header(header: &[u8; HEADER_LEN]) -> Result<(u8, usize), Notification> {
    if header[..16] != MARKER {
        return Err(Notification::new(
            code::HEADER,
            code::HEADER_NOT_SYNCHRONIZED,
            [],
        ));
    }
    let len = usize::from(u16::from_be_bytes([header[16], header[17]]));
    let kind = header[18];
    let bad_length = || {
        Notification::new(
            code::HEADER,
            code::HEADER_BAD_LENGTH,
            [header[16], header[17]],
        )
    };
    let min = match kind {
        OPEN => 29,
        UPDATE => 23,
        NOTIFICATION => 21,
        KEEPALIVE => HEADER_LEN,
        ROUTE_REFRESH => 23,
        _ => {
            return Err(Notification::new(
                code::HEADER,
                code::HEADER_BAD_TYPE,
                [kind],
            ));
        }
    };
    if len < min
        || len > MAX_LEN
        || (kind == KEEPALIVE && len != HEADER_LEN)
        || (kind == ROUTE_REFRESH && len != 23)
    {
        return Err(bad_length());
    }
    Ok((kind, len))
}

/// Decodes one whole message received from a peer (header included):
/// as [`decode`], except that an UPDATE is only length-checked, never
/// decoded - the speaker announces and never uses received routes - so
/// it comes back as an empty [`Update`].
///
/// Error handling per RFC 7606: only an UPDATE whose withdrawn-routes or
/// total-attribute length overruns the message ends the session; any
/// other malformation (an attribute's flags, length or value, a
/// duplicate, a missing well-known attribute, bad NLRI) is an error
/// RFC 7606 handles by treat-as-withdraw or attribute-discard, which,
/// with no routes kept, is ignoring the UPDATE. (RFC 7606 also allows a
/// reset for malformed MP_REACH/MP_UNREACH NLRI, only because the
/// routes to withdraw are unknown: with none kept, there is nothing to
/// withdraw.)
pub fn decode_received(buf: &[u8], ctx: &Context) -> Result<Message, Notification> {
    let (kind, body) = framed(buf)?;
    if kind == UPDATE {
        update::check_received(body)?;
        return Ok(Message::Update(Update::default()));
    }
    decode(buf, ctx)
}

/// The type and body of a whole message, its header checked.
fn framed(buf: &[u8]) -> Result<(u8, &[u8]), Notification> {
    let header: &[u8; HEADER_LEN] = buf
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| Notification::new(code::HEADER, code::HEADER_BAD_LENGTH, []))?;
    let (kind, len) = decode_header(header)?;
    if len != buf.len() {
        return Err(Notification::new(
            code::HEADER,
            code::HEADER_BAD_LENGTH,
            [header[16], header[17]],
        ));
    }
    Ok((kind, &buf[HEADER_LEN..]))
}

/// Decodes one whole message (header included), strictly: every
/// field RFC 4271 section 6 checks (tests and tools; the session reads
/// with [`decode_received`]).
pub fn decode(buf: &[u8], ctx: &Context) -> Result<Message, Notification> {
    let header: &[u8; HEADER_LEN] = buf
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| Notification::new(code::HEADER, code::HEADER_BAD_LENGTH, []))?;
    let (kind, len) = decode_header(header)?;
    if len != buf.len() {
        return Err(Notification::new(
            code::HEADER,
            code::HEADER_BAD_LENGTH,
            [header[16], header[17]],
        ));
    }
    let body = &buf[HEADER_LEN..];
    match kind {
        OPEN => Open::decode(body).map(Message::Open),
        UPDATE => Update::decode(body, ctx).map(Message::Update),
        NOTIFICATION => Ok(Message::Notification(Notification {
            code: body[0],
            subcode: body[1],
            data: body[2..].to_vec(),
        })),
        KEEPALIVE => Ok(Message::Keepalive),
        _ => Ok(Message::RouteRefresh {
            afi: u16::from_be_bytes([body[0], body[1]]),
            safi: body[3],
        }),
    }
}

/// Encodes one message, header included. The caller keeps UPDATEs within
/// [`MAX_LEN`] (see [`Update::encoded_len`]).
pub fn encode(msg: &Message, ctx: &Context) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&MARKER);
    out.extend_from_slice(&[0, 0, 0]);
    let kind = match msg {
        Message::Open(o) => {
            o.encode(&mut out);
            OPEN
        }
        Message::Update(u) => {
            u.encode(&mut out, ctx);
            UPDATE
        }
        Message::Notification(n) => {
            out.push(n.code);
            out.push(n.subcode);
            out.extend_from_slice(&n.data);
            NOTIFICATION
        }
        Message::Keepalive => KEEPALIVE,
        Message::RouteRefresh { afi, safi } => {
            out.extend_from_slice(&afi.to_be_bytes());
            out.push(0);
            out.push(*safi);
            ROUTE_REFRESH
        }
    };
    let len = u16::try_from(out.len()).unwrap_or(u16::MAX);
    out[16..18].copy_from_slice(&len.to_be_bytes());
    out[18] = kind;
    out
}

/// A cursor over a message body; running short is the caller's error.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }
    fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}
