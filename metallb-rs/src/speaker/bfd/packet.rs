//! The BFD Control packet (RFC 5880 §4.1): its mandatory 24-byte section
//! as a value, to and from bytes, with the reception checks of §6.8.6 that
//! need no session state, and the TTL rule a received packet must pass
//! (RFC 5881 §5 single hop, RFC 5883 §2 multihop). Owns no socket: the
//! caller reads the datagram and its TTL and hands both in.

use std::fmt;

/// Length of the mandatory section, the whole packet when there is no
/// authentication section (the only kind this speaker sends or accepts).
pub const CONTROL_LEN: usize = 24;
/// The protocol version this module speaks.
pub const VERSION: u8 = 1;
/// UDP destination port of single-hop Control packets (RFC 5881 §4).
pub const SINGLE_HOP_PORT: u16 = 3784;
/// UDP destination port of multihop Control packets (RFC 5883 §5).
pub const MULTIHOP_PORT: u16 = 4784;
/// Source ports a sender must pick from (RFC 5881 §4).
pub const SOURCE_PORTS: std::ops::RangeInclusive<u16> = 49152..=65535;
/// The TTL (hop limit) every Control packet is sent with, and the only
/// one a single-hop session accepts (RFC 5881 §5).
pub const SEND_TTL: u8 = 255;

/// A session state as carried in the Sta field (RFC 5880 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    /// Held down by configuration.
    AdminDown,
    /// Not established, or just went down.
    Down,
    /// The peer's Down was heard; waiting for it to hear us.
    Init,
    /// Both ends hear each other.
    Up,
}

impl State {
    fn from_bits(bits: u8) -> State {
        match bits & 0b11 {
            0 => State::AdminDown,
            1 => State::Down,
            2 => State::Init,
            _ => State::Up,
        }
    }

    fn bits(self) -> u8 {
        match self {
            State::AdminDown => 0,
            State::Down => 1,
            State::Init => 2,
            State::Up => 3,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::AdminDown => "AdminDown",
            State::Down => "Down",
            State::Init => "Init",
            State::Up => "Up",
        })
    }
}

/// Why the sender's session last changed state (RFC 5880 §4.1 Diag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Diagnostic {
    /// 0: no diagnostic.
    None,
    /// 1: nothing valid arrived for a Detection Time.
    ControlDetectionTimeExpired,
    /// 2: the Echo function failed.
    EchoFunctionFailed,
    /// 3: the peer said it went down.
    NeighborSignaledSessionDown,
    /// 4: the forwarding plane was reset.
    ForwardingPlaneReset,
    /// 5: the path is down.
    PathDown,
    /// 6: a concatenated path is down.
    ConcatenatedPathDown,
    /// 7: taken down by configuration.
    AdministrativelyDown,
    /// 8: a reverse concatenated path is down.
    ReverseConcatenatedPathDown,
    /// 9-31: reserved codes; received ones are kept, never sent.
    Reserved(u8),
}

impl Diagnostic {
    /// The diagnostic of a 5-bit code (higher bits are ignored).
    pub fn from_code(code: u8) -> Diagnostic {
        match code & 0x1f {
            0 => Diagnostic::None,
            1 => Diagnostic::ControlDetectionTimeExpired,
            2 => Diagnostic::EchoFunctionFailed,
            3 => Diagnostic::NeighborSignaledSessionDown,
            4 => Diagnostic::ForwardingPlaneReset,
            5 => Diagnostic::PathDown,
            6 => Diagnostic::ConcatenatedPathDown,
            7 => Diagnostic::AdministrativelyDown,
            8 => Diagnostic::ReverseConcatenatedPathDown,
            other => Diagnostic::Reserved(other),
        }
    }

    /// The 5-bit code on the wire.
    pub fn code(self) -> u8 {
        match self {
            Diagnostic::None => 0,
            Diagnostic::ControlDetectionTimeExpired => 1,
            Diagnostic::EchoFunctionFailed => 2,
            Diagnostic::NeighborSignaledSessionDown => 3,
            Diagnostic::ForwardingPlaneReset => 4,
            Diagnostic::PathDown => 5,
            Diagnostic::ConcatenatedPathDown => 6,
            Diagnostic::AdministrativelyDown => 7,
            Diagnostic::ReverseConcatenatedPathDown => 8,
            Diagnostic::Reserved(code) => code & 0x1f,
        }
    }
}

/// The mandatory section of a Control packet. Intervals are in
/// microseconds, as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlPacket {
    /// The sender's diagnostic.
    pub diagnostic: Diagnostic,
    /// The sender's session state.
    pub state: State,
    /// P: the sender asks for a Final (a parameter change or Up).
    pub poll: bool,
    /// F: the answer to a Poll.
    pub final_: bool,
    /// C: BFD runs independently of the control plane (never for us).
    pub control_plane_independent: bool,
    /// D: the sender wants Demand mode (accepted, ignored).
    pub demand: bool,
    /// Detect Mult: the sender's detection multiplier.
    pub detect_mult: u8,
    /// My Discriminator: the sender's session id, never zero.
    pub my_discriminator: u32,
    /// Your Discriminator: the receiver's session id, zero when unknown.
    pub your_discriminator: u32,
    /// Desired Min TX Interval, microseconds.
    pub desired_min_tx_us: u32,
    /// Required Min RX Interval, microseconds; zero: send me nothing.
    pub required_min_rx_us: u32,
    /// Required Min Echo RX Interval, microseconds; zero: no echo.
    pub required_min_echo_rx_us: u32,
}

const POLL: u8 = 0x20;
const FINAL: u8 = 0x10;
const CPI: u8 = 0x08;
const AUTH: u8 = 0x04;
const DEMAND: u8 = 0x02;
const MULTIPOINT: u8 = 0x01;

impl ControlPacket {
    /// The packet on the wire: 24 bytes, A and M bits clear.
    pub fn encode(&self) -> [u8; CONTROL_LEN] {
        let mut b = [0u8; CONTROL_LEN];
        b[0] = (VERSION << 5) | self.diagnostic.code();
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        b[1] = (self.state.bits() << 6)
            | flag(self.poll, POLL)
            | flag(self.final_, FINAL)
            | flag(self.control_plane_independent, CPI)
            | flag(self.demand, DEMAND);
        b[2] = self.detect_mult;
        b[3] = CONTROL_LEN as u8;
        b[4..8].copy_from_slice(&self.my_discriminator.to_be_bytes());
        b[8..12].copy_from_slice(&self.your_discriminator.to_be_bytes());
        b[12..16].copy_from_slice(&self.desired_min_tx_us.to_be_bytes());
        b[16..20].copy_from_slice(&self.required_min_rx_us.to_be_bytes());
        b[20..24].copy_from_slice(&self.required_min_echo_rx_us.to_be_bytes());
        b
    }

    /// Reads one datagram's payload and applies the checks of RFC 5880
    /// §6.8.6 that need no session; bytes past the Length field are
    /// ignored.
    pub fn decode(datagram: &[u8]) -> Result<ControlPacket, DecodeError> {
        let Some(head) = datagram.first_chunk::<CONTROL_LEN>() else {
            return Err(DecodeError::TooShort {
                len: datagram.len(),
            });
        };
        let version = head[0] >> 5;
        if version != VERSION {
            return Err(DecodeError::Version(version));
        }
        let length = head[3];
        if usize::from(length) < CONTROL_LEN {
            return Err(DecodeError::LengthTooSmall(length));
        }
        if usize::from(length) > datagram.len() {
            return Err(DecodeError::LengthPastDatagram {
                length,
                datagram: datagram.len(),
            });
        }
        let word =
            |at: usize| u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        let flags = head[1];
        let packet = ControlPacket {
            diagnostic: Diagnostic::from_code(head[0]),
            state: State::from_bits(flags >> 6),
            poll: flags & POLL != 0,
            final_: flags & FINAL != 0,
            control_plane_independent: flags & CPI != 0,
            demand: flags & DEMAND != 0,
            detect_mult: head[2],
            my_discriminator: word(4),
            your_discriminator: word(8),
            desired_min_tx_us: word(12),
            required_min_rx_us: word(16),
            required_min_echo_rx_us: word(20),
        };
        if packet.detect_mult == 0 {
            return Err(DecodeError::ZeroDetectMult);
        }
        if flags & MULTIPOINT != 0 {
            return Err(DecodeError::Multipoint);
        }
        if packet.my_discriminator == 0 {
            return Err(DecodeError::ZeroMyDiscriminator);
        }
        if packet.your_discriminator == 0 && !matches!(packet.state, State::Down | State::AdminDown)
        {
            return Err(DecodeError::ZeroYourDiscriminator(packet.state));
        }
        if flags & AUTH != 0 {
            return Err(DecodeError::Authentication);
        }
        Ok(packet)
    }
}

/// Why a received datagram is not a Control packet this speaker accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the mandatory section.
    TooShort {
        /// Bytes received.
        len: usize,
    },
    /// A version other than 1.
    Version(u8),
    /// A Length field below the mandatory section's size.
    LengthTooSmall(u8),
    /// A Length field longer than the datagram.
    LengthPastDatagram {
        /// The Length field.
        length: u8,
        /// Bytes received.
        datagram: usize,
    },
    /// Detect Mult of zero.
    ZeroDetectMult,
    /// The Multipoint bit, reserved for point-to-multipoint extensions.
    Multipoint,
    /// My Discriminator of zero.
    ZeroMyDiscriminator,
    /// Your Discriminator of zero from a sender that is past Down.
    ZeroYourDiscriminator(State),
    /// The A bit: an authentication section, which BFDProfile cannot
    /// configure.
    Authentication,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooShort { len } => {
                write!(f, "{len} bytes is shorter than a BFD control packet ({CONTROL_LEN})")
            }
            DecodeError::Version(v) => write!(f, "BFD version {v}, only version {VERSION} is spoken"),
            DecodeError::LengthTooSmall(l) => {
                write!(f, "length field {l} is below the minimum of {CONTROL_LEN}")
            }
            DecodeError::LengthPastDatagram { length, datagram } => {
                write!(f, "length field {length} exceeds the {datagram}-byte datagram")
            }
            DecodeError::ZeroDetectMult => f.write_str("detect multiplier is zero"),
            DecodeError::Multipoint => f.write_str("multipoint bit is set"),
            DecodeError::ZeroMyDiscriminator => f.write_str("my discriminator is zero"),
            DecodeError::ZeroYourDiscriminator(state) => {
                write!(f, "your discriminator is zero in state {state} (allowed only in Down or AdminDown)")
            }
            DecodeError::Authentication => f.write_str(
                "authentication bit is set but BFD authentication is not configured (BFDProfile has no authentication)",
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// How far the peer is, which decides the TTL a received packet needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hops {
    /// Directly connected (RFC 5881): only TTL 255 proves the packet was
    /// not forwarded, so no remote host can spoof it.
    Single,
    /// Several hops away (RFC 5883): TTL at least `minimum_ttl`.
    Multi {
        /// The profile's minimumTtl.
        minimum_ttl: u8,
    },
}

/// A received TTL (IPv4) or hop limit (IPv6) the session must not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlRefused {
    /// The rule applied.
    pub hops: Hops,
    /// The TTL received.
    pub ttl: u8,
}

impl fmt::Display for TtlRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.hops {
            Hops::Single => write!(
                f,
                "single-hop BFD packet with TTL {} (must be {SEND_TTL}: it was forwarded or spoofed)",
                self.ttl
            ),
            Hops::Multi { minimum_ttl } => write!(
                f,
                "multihop BFD packet with TTL {} is below the profile's minimumTtl {minimum_ttl}",
                self.ttl
            ),
        }
    }
}

impl std::error::Error for TtlRefused {}

/// Whether a packet received with `ttl` may reach the session.
pub fn check_ttl(hops: Hops, ttl: u8) -> Result<(), TtlRefused> {
    let ok = match hops {
        Hops::Single => ttl == SEND_TTL,
        Hops::Multi { minimum_ttl } => ttl >= minimum_ttl,
    };
    if ok {
        Ok(())
    } else {
        Err(TtlRefused { hops, ttl })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ControlPacket {
        ControlPacket {
            diagnostic: Diagnostic::NeighborSignaledSessionDown,
            state: State::Up,
            poll: true,
            final_: false,
            control_plane_independent: false,
            demand: false,
            detect_mult: 3,
            my_discriminator: 0x0102_0304,
            your_discriminator: 0x0a0b_0c0d,
            desired_min_tx_us: 300_000,
            required_min_rx_us: 300_000,
            required_min_echo_rx_us: 0,
        }
    }

    #[test]
    fn encode_lays_out_the_fields_of_rfc_5880() {
        let b = sample().encode();
        assert_eq!(b[0], 0x23, "version 1, diag 3");
        assert_eq!(b[1], 0xe0, "state Up, poll");
        assert_eq!(&b[2..4], &[3, 24]);
        assert_eq!(&b[4..12], &[1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(&b[12..16], &300_000u32.to_be_bytes());
        assert_eq!(&b[20..24], &[0, 0, 0, 0]);
    }

    #[test]
    fn decode_reads_back_what_encode_wrote() {
        for state in [State::AdminDown, State::Down, State::Init, State::Up] {
            for (poll, final_) in [(false, false), (true, false), (false, true)] {
                let p = ControlPacket {
                    state,
                    poll,
                    final_,
                    demand: poll,
                    ..sample()
                };
                assert_eq!(ControlPacket::decode(&p.encode()), Ok(p));
            }
        }
        let mut long = sample().encode().to_vec();
        long.extend_from_slice(&[0xff; 8]);
        assert_eq!(
            ControlPacket::decode(&long),
            Ok(sample()),
            "bytes past Length ignored"
        );
    }

    #[test]
    fn decode_refuses_what_rfc_5880_discards() {
        let good = sample().encode();
        let with = |f: fn(&mut Vec<u8>)| {
            let mut b = good.to_vec();
            f(&mut b);
            b
        };
        let d = |length, datagram| DecodeError::LengthPastDatagram { length, datagram };
        #[rustfmt::skip]
        let rows: &[(&str, Vec<u8>, DecodeError, &str)] = &[
            ("empty", vec![], DecodeError::TooShort { len: 0 },
             "0 bytes is shorter than a BFD control packet (24)"),
            ("23 bytes", good[..23].to_vec(), DecodeError::TooShort { len: 23 },
             "23 bytes is shorter than a BFD control packet (24)"),
            ("version 0", with(|b| b[0] &= 0x1f), DecodeError::Version(0),
             "BFD version 0, only version 1 is spoken"),
            ("version 2", with(|b| b[0] = 0x40), DecodeError::Version(2),
             "BFD version 2, only version 1 is spoken"),
            ("length 23", with(|b| b[3] = 23), DecodeError::LengthTooSmall(23),
             "length field 23 is below the minimum of 24"),
            ("length 26", with(|b| b[3] = 26), d(26, 24),
             "length field 26 exceeds the 24-byte datagram"),
            ("detect mult 0", with(|b| b[2] = 0), DecodeError::ZeroDetectMult,
             "detect multiplier is zero"),
            ("multipoint", with(|b| b[1] |= MULTIPOINT), DecodeError::Multipoint,
             "multipoint bit is set"),
            ("my discr 0", with(|b| b[4..8].fill(0)), DecodeError::ZeroMyDiscriminator,
             "my discriminator is zero"),
            ("your discr 0 in Up", with(|b| b[8..12].fill(0)), DecodeError::ZeroYourDiscriminator(State::Up),
             "your discriminator is zero in state Up (allowed only in Down or AdminDown)"),
            ("your discr 0 in Init", with(|b| { b[8..12].fill(0); b[1] = 0x80 }), DecodeError::ZeroYourDiscriminator(State::Init),
             "your discriminator is zero in state Init (allowed only in Down or AdminDown)"),
            ("auth bit", with(|b| b[1] |= AUTH), DecodeError::Authentication,
             "authentication bit is set but BFD authentication is not configured (BFDProfile has no authentication)"),
        ];
        for (name, bytes, want, message) in rows {
            let got = ControlPacket::decode(bytes);
            assert_eq!(got, Err(*want), "{name}");
            assert_eq!(want.to_string(), *message, "{name}");
        }
    }

    #[test]
    fn decode_accepts_zero_your_discriminator_while_down() {
        for (state_bits, state) in [(0x40, State::Down), (0x00, State::AdminDown)] {
            let mut b = sample().encode();
            b[8..12].fill(0);
            b[1] = state_bits;
            let p = ControlPacket::decode(&b).map(|p| (p.state, p.your_discriminator));
            assert_eq!(p, Ok((state, 0)));
        }
    }

    #[test]
    fn diagnostic_codes_round_trip() {
        for code in 0..32u8 {
            assert_eq!(Diagnostic::from_code(code).code(), code);
        }
        assert_eq!(
            Diagnostic::from_code(1),
            Diagnostic::ControlDetectionTimeExpired
        );
        assert_eq!(
            Diagnostic::from_code(3),
            Diagnostic::NeighborSignaledSessionDown
        );
        assert_eq!(
            Diagnostic::from_code(8),
            Diagnostic::ReverseConcatenatedPathDown
        );
        assert_eq!(Diagnostic::from_code(9), Diagnostic::Reserved(9));
    }

    #[test]
    fn ttl_rule_of_single_hop_and_multihop() {
        let multi = |minimum_ttl| Hops::Multi { minimum_ttl };
        let rows: &[(&str, Hops, u8, bool)] = &[
            ("single hop 255", Hops::Single, 255, true),
            ("single hop 254: forwarded once", Hops::Single, 254, false),
            ("single hop 1", Hops::Single, 1, false),
            ("multihop at the minimum", multi(5), 5, true),
            ("multihop above the minimum", multi(5), 250, true),
            ("multihop below the minimum", multi(5), 4, false),
            (
                "multihop default minimum 254, two hops",
                multi(254),
                253,
                false,
            ),
            (
                "multihop minimum 1 takes anything but 0",
                multi(1),
                0,
                false,
            ),
        ];
        for (name, hops, ttl, ok) in rows {
            assert_eq!(check_ttl(*hops, *ttl).is_ok(), *ok, "{name}");
        }
        assert_eq!(
            check_ttl(Hops::Single, 64).map_err(|e| e.to_string()),
            Err(
                "single-hop BFD packet with TTL 64 (must be 255: it was forwarded or spoofed)"
                    .to_string()
            )
        );
        assert_eq!(
            check_ttl(multi(10), 9).map_err(|e| e.to_string()),
            Err("multihop BFD packet with TTL 9 is below the profile's minimumTtl 10".to_string())
        );
    }
}
