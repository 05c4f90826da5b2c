//! IPv6 Neighbor Discovery (RFC 4861): parsing Neighbor Solicitations
//! out of IPv6 packets (with the validity checks of §7.1.1 and the ICMPv6
//! checksum) and building Neighbor Advertisements.

use super::ethernet::{self, Mac, ParseError, need};
use std::net::Ipv6Addr;

/// IPv6 header length.
pub const IPV6_HEADER_LEN: usize = 40;
const ICMPV6: u8 = 58;
const NEIGHBOR_SOLICITATION: u8 = 135;
const NEIGHBOR_ADVERTISEMENT: u8 = 136;
const OPT_SOURCE_LL: u8 = 1;
const OPT_TARGET_LL: u8 = 2;

/// ff02::1, all nodes.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The solicited-node multicast group of `ip` (ff02::1:ffXX:XXXX).
pub fn solicited_node(ip: Ipv6Addr) -> Ipv6Addr {
    let o = ip.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet multicast address of IPv6 group `group` (33:33 + low 32 bits).
pub fn multicast_mac(group: Ipv6Addr) -> Mac {
    let o = group.octets();
    Mac([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// NA flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags {
    /// Router.
    pub router: bool,
    /// Solicited: answers a solicitation.
    pub solicited: bool,
    /// Override: replace cached link-layer addresses.
    pub override_: bool,
}

/// The ND messages the responder handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// Who has `target`? `source_ll` is the asker's MAC when it said.
    NeighborSolicitation {
        /// The address asked about.
        target: Ipv6Addr,
        /// Source link-layer address option.
        source_ll: Option<Mac>,
    },
    /// `target` is at `target_ll`.
    NeighborAdvertisement {
        /// R/S/O flags.
        flags: Flags,
        /// The address advertised.
        target: Ipv6Addr,
        /// Target link-layer address option.
        target_ll: Option<Mac>,
    },
}

/// An IPv6 packet carrying an ND message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// IPv6 source.
    pub src: Ipv6Addr,
    /// IPv6 destination.
    pub dst: Ipv6Addr,
    /// The message.
    pub msg: Message,
}

/// Why an IPv6 packet is not an ND message for us (not an error: most
/// IPv6 traffic on a link is not ND).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NdpError {
    /// Malformed.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// Valid IPv6, but not ICMPv6 neighbor discovery.
    #[error("not a neighbor discovery message")]
    NotNdp,
}

fn checksum(src: Ipv6Addr, dst: Ipv6Addr, icmp: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut add = |bytes: &[u8]| {
        for chunk in bytes.chunks(2) {
            let word = if chunk.len() == 2 {
                u16::from_be_bytes([chunk[0], chunk[1]])
            } else {
                u16::from_be_bytes([chunk[0], 0])
            };
            sum += u32::from(word);
        }
    };
    add(&src.octets());
    add(&dst.octets());
    let len = u32::try_from(icmp.len()).unwrap_or(u32::MAX);
    add(&len.to_be_bytes());
    add(&[0, 0, 0, ICMPV6]);
    add(icmp);
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn ip6_at(buf: &[u8], at: usize) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o.copy_from_slice(&buf[at..at + 16]);
    Ipv6Addr::from(o)
}

/// Link-layer address options of type `kind` in `opts` (validates every
/// option's length, as RFC 4861 requires).
fn ll_option(mut opts: &[u8], kind: u8) -> Result<Option<Mac>, ParseError> {
    let mut found = None;
    while !opts.is_empty() {
        need(opts, 2, "ND option")?;
        let len = usize::from(opts[1]) * 8;
        if len == 0 {
            return Err(ParseError::Invalid("ND option length 0"));
        }
        need(opts, len, "ND option")?;
        if opts[0] == kind && len >= 8 {
            found = Some(ethernet::mac_at(opts, 2));
        }
        opts = &opts[len..];
    }
    Ok(found)
}

impl Packet {
    /// Parses an IPv6 packet (after the Ethernet header) as an ND message.
    pub fn parse(buf: &[u8]) -> Result<Self, NdpError> {
        need(buf, IPV6_HEADER_LEN, "IPv6 header")?;
        if buf[0] >> 4 != 6 {
            return Err(ParseError::Invalid("IP version").into());
        }
        let payload_len = usize::from(u16::from_be_bytes([buf[4], buf[5]]));
        need(buf, IPV6_HEADER_LEN + payload_len, "IPv6 payload")?;
        if buf[6] != ICMPV6 {
            return Err(NdpError::NotNdp);
        }
        let hop_limit = buf[7];
        let src = ip6_at(buf, 8);
        let dst = ip6_at(buf, 24);
        let icmp = &buf[IPV6_HEADER_LEN..IPV6_HEADER_LEN + payload_len];
        need(icmp, 4, "ICMPv6 header")?;
        let kind = icmp[0];
        if kind != NEIGHBOR_SOLICITATION && kind != NEIGHBOR_ADVERTISEMENT {
            return Err(NdpError::NotNdp);
        }
        // RFC 4861 7.1.1 / 7.1.2: hop limit 255 (not forwarded), code 0, length >= 24.
        if hop_limit != 255 {
            return Err(ParseError::Invalid("ND hop limit (must be 255)").into());
        }
        if icmp[1] != 0 {
            return Err(ParseError::Invalid("ND code").into());
        }
        need(icmp, 24, "ND message")?;
        if checksum(src, dst, icmp) != 0 {
            return Err(ParseError::Invalid("ICMPv6 checksum").into());
        }
        let target = ip6_at(icmp, 8);
        if target.is_multicast() {
            return Err(ParseError::Invalid("ND target (multicast)").into());
        }
        let opts = &icmp[24..];
        let msg = if kind == NEIGHBOR_SOLICITATION {
            let source_ll = ll_option(opts, OPT_SOURCE_LL)?;
            if src.is_unspecified() && (source_ll.is_some() || solicited_node(target) != dst) {
                return Err(ParseError::Invalid("DAD solicitation").into());
            }
            Message::NeighborSolicitation { target, source_ll }
        } else {
            Message::NeighborAdvertisement {
                flags: Flags {
                    router: icmp[4] & 0x80 != 0,
                    solicited: icmp[4] & 0x40 != 0,
                    override_: icmp[4] & 0x20 != 0,
                },
                target,
                target_ll: ll_option(opts, OPT_TARGET_LL)?,
            }
        };
        Ok(Self { src, dst, msg })
    }

    /// The IPv6 packet (header + ICMPv6 with checksum), hop limit 255.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut icmp = vec![0u8; 24];
        let (kind, target, opt) = match self.msg {
            Message::NeighborSolicitation { target, source_ll } => (
                NEIGHBOR_SOLICITATION,
                target,
                source_ll.map(|m| (OPT_SOURCE_LL, m)),
            ),
            Message::NeighborAdvertisement {
                flags,
                target,
                target_ll,
            } => {
                icmp[4] = (u8::from(flags.router) << 7)
                    | (u8::from(flags.solicited) << 6)
                    | (u8::from(flags.override_) << 5);
                (
                    NEIGHBOR_ADVERTISEMENT,
                    target,
                    target_ll.map(|m| (OPT_TARGET_LL, m)),
                )
            }
        };
        icmp[0] = kind;
        icmp[8..24].copy_from_slice(&target.octets());
        if let Some((t, mac)) = opt {
            icmp.extend_from_slice(&[t, 1]);
            icmp.extend_from_slice(&mac.0);
        }
        let sum = checksum(self.src, self.dst, &icmp);
        icmp[2..4].copy_from_slice(&sum.to_be_bytes());
        let mut out = Vec::with_capacity(IPV6_HEADER_LEN + icmp.len());
        out.extend_from_slice(&[0x60, 0, 0, 0]);
        out.extend_from_slice(&u16::try_from(icmp.len()).unwrap_or(u16::MAX).to_be_bytes());
        out.push(ICMPV6);
        out.push(255);
        out.extend_from_slice(&self.src.octets());
        out.extend_from_slice(&self.dst.octets());
        out.extend_from_slice(&icmp);
        out
    }

    /// The whole Ethernet frame carrying this packet.
    pub fn frame(&self, dst: Mac, src: Mac) -> Vec<u8> {
        ethernet::build(dst, src, ethernet::ETHERTYPE_IPV6, &self.to_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().expect("ip")
    }

    fn ns(src: &str, target: &str, sll: Option<Mac>) -> Packet {
        let target = ip(target);
        Packet {
            src: ip(src),
            dst: solicited_node(target),
            msg: Message::NeighborSolicitation {
                target,
                source_ll: sll,
            },
        }
    }

    #[test]
    fn solicited_node_groups() {
        assert_eq!(
            solicited_node(ip("fc00::1:2:3:4567")),
            ip("ff02::1:ff03:4567")
        );
        assert_eq!(
            multicast_mac(ip("ff02::1:ff03:4567")).to_string(),
            "33:33:ff:03:45:67"
        );
    }

    #[test]
    fn solicitation_round_trip_with_and_without_source_ll() {
        for sll in [Some(Mac([2, 0, 0, 0, 0, 1])), None] {
            let p = ns("fe80::1", "fc00::100", sll);
            assert_eq!(Packet::parse(&p.to_bytes()), Ok(p));
        }
    }

    #[test]
    fn advertisement_round_trip_keeps_flags() {
        let p = Packet {
            src: ip("fe80::aa"),
            dst: ALL_NODES,
            msg: Message::NeighborAdvertisement {
                flags: Flags {
                    router: false,
                    solicited: false,
                    override_: true,
                },
                target: ip("fc00::100"),
                target_ll: Some(Mac([2, 0, 0, 0, 0, 0xaa])),
            },
        };
        assert_eq!(Packet::parse(&p.to_bytes()), Ok(p));
    }

    #[test]
    fn invalid_messages_are_rejected() {
        let good = ns("fe80::1", "fc00::100", Some(Mac([2, 0, 0, 0, 0, 1]))).to_bytes();
        let mut bad = good.clone();
        bad[7] = 64;
        assert!(
            matches!(
                Packet::parse(&bad),
                Err(NdpError::Parse(ParseError::Invalid(_)))
            ),
            "hop limit"
        );
        let mut bad = good.clone();
        bad[IPV6_HEADER_LEN + 10] ^= 0xff;
        assert_eq!(
            Packet::parse(&bad),
            Err(NdpError::Parse(ParseError::Invalid("ICMPv6 checksum")))
        );
        let mut bad = good.clone();
        bad[IPV6_HEADER_LEN + 25] = 0; // option length 0 (checksum fixed below)
        let fixed = fix_checksum(bad);
        assert_eq!(
            Packet::parse(&fixed),
            Err(NdpError::Parse(ParseError::Invalid("ND option length 0")))
        );
        assert!(Packet::parse(&good[..50]).is_err(), "truncated");
        let mut tcp = good.clone();
        tcp[6] = 6;
        assert_eq!(Packet::parse(&tcp), Err(NdpError::NotNdp));
        // DAD (unspecified source) with a source link-layer option is invalid.
        let dad = Packet {
            src: Ipv6Addr::UNSPECIFIED,
            ..ns("::", "fc00::100", Some(Mac([2, 0, 0, 0, 0, 1])))
        };
        assert!(Packet::parse(&dad.to_bytes()).is_err());
        let dad_ok = Packet {
            src: Ipv6Addr::UNSPECIFIED,
            ..ns("::", "fc00::100", None)
        };
        assert!(Packet::parse(&dad_ok.to_bytes()).is_ok());
    }

    /// Recomputes the ICMPv6 checksum over the payload the header
    /// declares (or what there is of it).
    fn fix_checksum(mut pkt: Vec<u8>) -> Vec<u8> {
        pkt[IPV6_HEADER_LEN + 2] = 0;
        pkt[IPV6_HEADER_LEN + 3] = 0;
        let (src, dst) = (ip6_at(&pkt, 8), ip6_at(&pkt, 24));
        let declared = usize::from(u16::from_be_bytes([pkt[4], pkt[5]]));
        let end = (IPV6_HEADER_LEN + declared).min(pkt.len());
        let sum = checksum(src, dst, &pkt[IPV6_HEADER_LEN..end]);
        pkt[IPV6_HEADER_LEN + 2..IPV6_HEADER_LEN + 4].copy_from_slice(&sum.to_be_bytes());
        pkt
    }

    proptest! {
        #[test]
        fn round_trip(src in any::<u128>(), target in any::<u128>(), mac in proptest::option::of(any::<[u8; 6]>()), na in any::<bool>(), f in any::<(bool, bool, bool)>()) {
            let target = Ipv6Addr::from(target);
            prop_assume!(!target.is_multicast());
            let src = Ipv6Addr::from(src);
            prop_assume!(!src.is_unspecified());
            let msg = if na {
                Message::NeighborAdvertisement { flags: Flags { router: f.0, solicited: f.1, override_: f.2 }, target, target_ll: mac.map(Mac) }
            } else {
                Message::NeighborSolicitation { target, source_ll: mac.map(Mac) }
            };
            let p = Packet { src, dst: solicited_node(target), msg };
            prop_assert_eq!(Packet::parse(&p.to_bytes()), Ok(p));
        }

        #[test]
        fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = Packet::parse(&bytes);
        }

        /// Random bytes stop at the first header check; a valid
        /// solicitation or advertisement with a few bytes changed (and
        /// maybe cut short, its checksum mostly made right again so the
        /// later checks are reached) either is rejected or parses to a
        /// packet that re-encodes to itself.
        #[test]
        fn mutated_messages_are_rejected_or_round_trip(
            na in any::<bool>(),
            target in any::<u128>(),
            mac in proptest::option::of(any::<[u8; 6]>()),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
            cut in proptest::option::of(0usize..96),
            fix in proptest::bool::weighted(0.8),
        ) {
            let target = Ipv6Addr::from(target);
            let msg = if na {
                Message::NeighborAdvertisement { flags: Flags::default(), target, target_ll: mac.map(Mac) }
            } else {
                Message::NeighborSolicitation { target, source_ll: mac.map(Mac) }
            };
            let p = Packet { src: ip("fe80::1"), dst: solicited_node(target), msg };
            let mut b = p.to_bytes();
            let len = b.len();
            for (at, value) in edits {
                b[at % len] = value;
            }
            if let Some(cut) = cut {
                b.truncate(cut);
            }
            if fix && b.len() >= IPV6_HEADER_LEN + 4 {
                b = fix_checksum(b);
            }
            if let Ok(parsed) = Packet::parse(&b) {
                prop_assert_eq!(Packet::parse(&parsed.to_bytes()), Ok(parsed));
                prop_assert_eq!(b[7], 255, "hop limit");
            }
        }
    }
}
