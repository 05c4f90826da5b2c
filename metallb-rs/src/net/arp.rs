//! ARP for IPv4 over Ethernet (RFC 826): parsing requests, building
//! replies and gratuitous announcements.

use super::ethernet::{self, Mac, ParseError, mac_at, need};
use std::net::Ipv4Addr;

/// ARP payload length for IPv4 over Ethernet.
pub const LEN: usize = 28;

/// Request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Who has `tpa`?
    Request,
    /// `spa` is at `sha`.
    Reply,
}

/// An ARP packet (IPv4 over Ethernet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arp {
    /// Request or reply.
    pub op: Op,
    /// Sender hardware address.
    pub sha: Mac,
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target hardware address.
    pub tha: Mac,
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

fn ip_at(buf: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(buf[at], buf[at + 1], buf[at + 2], buf[at + 3])
}

impl Arp {
    /// Parses an ARP payload (after the Ethernet header; trailing padding
    /// ignored). Anything but Ethernet/IPv4 requests and replies is
    /// rejected.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        need(buf, LEN, "ARP packet")?;
        if u16::from_be_bytes([buf[0], buf[1]]) != 1 {
            return Err(ParseError::Invalid("ARP hardware type (not Ethernet)"));
        }
        if u16::from_be_bytes([buf[2], buf[3]]) != 0x0800 {
            return Err(ParseError::Invalid("ARP protocol type (not IPv4)"));
        }
        if buf[4] != 6 || buf[5] != 4 {
            return Err(ParseError::Invalid("ARP address lengths"));
        }
        let op = match u16::from_be_bytes([buf[6], buf[7]]) {
            1 => Op::Request,
            2 => Op::Reply,
            _ => return Err(ParseError::Invalid("ARP operation")),
        };
        Ok(Self {
            op,
            sha: mac_at(buf, 8),
            spa: ip_at(buf, 14),
            tha: mac_at(buf, 18),
            tpa: ip_at(buf, 24),
        })
    }

    /// The 28-byte payload.
    pub fn to_bytes(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..2].copy_from_slice(&1u16.to_be_bytes());
        b[2..4].copy_from_slice(&0x0800u16.to_be_bytes());
        b[4] = 6;
        b[5] = 4;
        let op: u16 = match self.op {
            Op::Request => 1,
            Op::Reply => 2,
        };
        b[6..8].copy_from_slice(&op.to_be_bytes());
        b[8..14].copy_from_slice(&self.sha.0);
        b[14..18].copy_from_slice(&self.spa.octets());
        b[18..24].copy_from_slice(&self.tha.0);
        b[24..28].copy_from_slice(&self.tpa.octets());
        b
    }

    /// The reply to this request saying `tpa` is at `mac`.
    pub fn reply(&self, mac: Mac) -> Arp {
        Arp {
            op: Op::Reply,
            sha: mac,
            spa: self.tpa,
            tha: self.sha,
            tpa: self.spa,
        }
    }

    /// A gratuitous announcement of `ip` at `mac` (sender = target = ip),
    /// as a request or a reply; both are sent, as upstream does, since
    /// hosts differ in which they honour.
    pub fn gratuitous(op: Op, mac: Mac, ip: Ipv4Addr) -> Arp {
        Arp {
            op,
            sha: mac,
            spa: ip,
            tha: if op == Op::Reply { mac } else { Mac::ZERO },
            tpa: ip,
        }
    }

    /// The whole Ethernet frame carrying this packet.
    pub fn frame(&self, dst: Mac, src: Mac) -> Vec<u8> {
        ethernet::build(dst, src, ethernet::ETHERTYPE_ARP, &self.to_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mac(s: &str) -> Mac {
        s.parse().expect("mac")
    }

    #[test]
    fn reply_swaps_and_answers() {
        let req = Arp {
            op: Op::Request,
            sha: mac("02:00:00:00:00:02"),
            spa: Ipv4Addr::new(10, 0, 0, 2),
            tha: Mac::ZERO,
            tpa: Ipv4Addr::new(10, 0, 0, 100),
        };
        let rep = req.reply(mac("02:00:00:00:00:aa"));
        assert_eq!(rep.op, Op::Reply);
        assert_eq!(
            (rep.sha, rep.spa),
            (mac("02:00:00:00:00:aa"), Ipv4Addr::new(10, 0, 0, 100))
        );
        assert_eq!((rep.tha, rep.tpa), (req.sha, req.spa));
        let frame = rep.frame(req.sha, rep.sha);
        let f = ethernet::Frame::parse(&frame).expect("frame");
        assert_eq!(Arp::parse(f.payload).expect("arp"), rep);
    }

    #[test]
    fn gratuitous_has_sender_equal_target() {
        let g = Arp::gratuitous(
            Op::Request,
            mac("02:00:00:00:00:aa"),
            Ipv4Addr::new(10, 0, 0, 1),
        );
        assert_eq!(g.spa, g.tpa);
        assert_eq!(g.tha, Mac::ZERO);
        let r = Arp::gratuitous(
            Op::Reply,
            mac("02:00:00:00:00:aa"),
            Ipv4Addr::new(10, 0, 0, 1),
        );
        assert_eq!(r.tha, r.sha);
    }

    #[test]
    fn malformed_packets_are_rejected() {
        let good = Arp::gratuitous(Op::Request, Mac::BROADCAST, Ipv4Addr::LOCALHOST).to_bytes();
        assert!(Arp::parse(&good[..27]).is_err(), "truncated");
        let mut bad = good;
        bad[1] = 6;
        assert_eq!(
            Arp::parse(&bad),
            Err(ParseError::Invalid("ARP hardware type (not Ethernet)"))
        );
        let mut bad = good;
        bad[2] = 0x86;
        assert!(Arp::parse(&bad).is_err(), "protocol");
        let mut bad = good;
        bad[4] = 8;
        assert!(Arp::parse(&bad).is_err(), "hlen");
        let mut bad = good;
        bad[7] = 3;
        assert!(Arp::parse(&bad).is_err(), "op");
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(op in any::<bool>(), sha in any::<[u8; 6]>(), spa in any::<u32>(), tha in any::<[u8; 6]>(), tpa in any::<u32>()) {
            let a = Arp { op: if op { Op::Request } else { Op::Reply }, sha: Mac(sha), spa: spa.into(), tha: Mac(tha), tpa: tpa.into() };
            prop_assert_eq!(Arp::parse(&a.to_bytes()), Ok(a));
        }

        #[test]
        fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Arp::parse(&bytes);
        }

        /// Random bytes stop at the first header check; a valid frame
        /// with a few bytes changed (and maybe cut short) reaches every
        /// check. Whatever parses says exactly what its bytes say: the
        /// packet re-encodes to the 28 bytes it came from.
        #[test]
        fn mutated_frames_parse_to_what_they_say(
            request in any::<bool>(),
            sha in any::<[u8; 6]>(),
            spa in any::<u32>(),
            tpa in any::<u32>(),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
            cut in proptest::option::of(0usize..64),
        ) {
            let a = Arp {
                op: if request { Op::Request } else { Op::Reply },
                sha: Mac(sha),
                spa: spa.into(),
                tha: Mac::ZERO,
                tpa: tpa.into(),
            };
            let mut bytes = a.frame(Mac::BROADCAST, Mac(sha));
            let len = bytes.len();
            for (at, value) in edits {
                bytes[at % len] = value;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut);
            }
            if let Ok(frame) = ethernet::Frame::parse(&bytes)
                && let Ok(parsed) = Arp::parse(frame.payload)
            {
                prop_assert_eq!(&parsed.to_bytes()[..], &frame.payload[..LEN]);
            }
        }
    }
}
