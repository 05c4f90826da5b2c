//! Ethernet II frames (no VLAN tags: the responders bind to the untagged
//! interface, as upstream's do).

use std::fmt;

/// A MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: Mac = Mac([0xff; 6]);
    /// 00:00:00:00:00:00.
    pub const ZERO: Mac = Mac([0; 6]);

    /// Whether the group bit is set (multicast or broadcast).
    pub fn is_multicast(self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for Mac {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return Err(format!("invalid MAC address {s:?}"));
        }
        let mut mac = [0u8; 6];
        for (i, p) in parts.iter().enumerate() {
            mac[i] = u8::from_str_radix(p, 16).map_err(|_| format!("invalid MAC address {s:?}"))?;
        }
        Ok(Mac(mac))
    }
}

/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// Header length.
pub const HEADER_LEN: usize = 14;
/// Frames shorter than this (without FCS) are padded on send.
pub const MIN_FRAME_LEN: usize = 60;

/// A parsed frame, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Destination.
    pub dst: Mac,
    /// Source.
    pub src: Mac,
    /// EtherType.
    pub ethertype: u16,
    /// What follows the header (padding included).
    pub payload: &'a [u8],
}

/// Why a frame or packet was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Fewer bytes than the format needs.
    #[error("truncated {what}: {len} bytes, need {need}")]
    Truncated {
        /// The part being read.
        what: &'static str,
        /// Bytes present.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A field has a value the protocol does not allow here.
    #[error("invalid {0}")]
    Invalid(&'static str),
}

/// Fails unless `buf` has at least `need` bytes.
pub fn need(buf: &[u8], need: usize, what: &'static str) -> Result<(), ParseError> {
    if buf.len() < need {
        Err(ParseError::Truncated {
            what,
            len: buf.len(),
            need,
        })
    } else {
        Ok(())
    }
}

pub(crate) fn mac_at(buf: &[u8], at: usize) -> Mac {
    let mut m = [0u8; 6];
    m.copy_from_slice(&buf[at..at + 6]);
    Mac(m)
}

impl<'a> Frame<'a> {
    /// Parses the header of `buf`.
    pub fn parse(buf: &'a [u8]) -> Result<Self, ParseError> {
        need(buf, HEADER_LEN, "ethernet header")?;
        Ok(Self {
            dst: mac_at(buf, 0),
            src: mac_at(buf, 6),
            ethertype: u16::from_be_bytes([buf[12], buf[13]]),
            payload: &buf[HEADER_LEN..],
        })
    }
}

/// A frame carrying `payload`, padded to the Ethernet minimum.
pub fn build(dst: Mac, src: Mac, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity((HEADER_LEN + payload.len()).max(MIN_FRAME_LEN));
    out.extend_from_slice(&dst.0);
    out.extend_from_slice(&src.0);
    out.extend_from_slice(&ethertype.to_be_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len().max(MIN_FRAME_LEN), 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_padding() {
        let src: Mac = "02:00:00:00:00:01".parse().expect("mac");
        let f = build(Mac::BROADCAST, src, ETHERTYPE_ARP, &[1, 2, 3]);
        assert_eq!(f.len(), MIN_FRAME_LEN);
        let p = Frame::parse(&f).expect("parses");
        assert_eq!(
            (p.dst, p.src, p.ethertype),
            (Mac::BROADCAST, src, ETHERTYPE_ARP)
        );
        assert_eq!(&p.payload[..3], &[1, 2, 3]);
        assert!(Frame::parse(&f[..13]).is_err());
        assert_eq!(src.to_string(), "02:00:00:00:00:01");
        assert_eq!(
            "02:fc:00:00:0a:ff".parse::<Mac>(),
            Ok(Mac([2, 0xfc, 0, 0, 0x0a, 0xff]))
        );
        assert!("02:00:00".parse::<Mac>().is_err());
        assert!("02:fc:00:00:0a:ff:00".parse::<Mac>().is_err());
        assert!(Mac::BROADCAST.is_multicast() && !src.is_multicast());
    }
}
