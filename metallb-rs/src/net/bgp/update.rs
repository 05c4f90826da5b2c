//! UPDATE (RFC 4271 section 4.3) and its path attributes, with
//! multiprotocol reach/unreach (RFC 4760), AS4_PATH (RFC 6793),
//! communities (RFC 1997), large communities (RFC 8092) and End-of-RIB
//! markers (RFC 4724).

use super::{AS_TRANS, Afi, Context, Notification, Reader, SAFI_UNICAST, code};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// ORIGIN values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// 0: learned inside the AS (what `network` statements give).
    Igp,
    /// 1.
    Egp,
    /// 2: learned some other way.
    Incomplete,
}

/// An AS_PATH segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsSegment {
    /// 1 AS_SET, 2 AS_SEQUENCE, 3 AS_CONFED_SEQUENCE, 4 AS_CONFED_SET.
    pub kind: u8,
    /// The AS numbers (1 to 255 of them).
    pub asns: Vec<u32>,
}

impl AsSegment {
    /// AS_SEQUENCE.
    pub const SEQUENCE: u8 = 2;
    /// A sequence of `asns`.
    pub fn sequence(asns: Vec<u32>) -> Self {
        Self {
            kind: Self::SEQUENCE,
            asns,
        }
    }
}

/// MP_REACH_NLRI: prefixes of another family and their next hop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpReach {
    /// Address family.
    pub afi: u16,
    /// Subsequent address family.
    pub safi: u8,
    /// One next hop (IPv4 or global IPv6), or a global and a link-local IPv6.
    pub next_hops: Vec<IpAddr>,
    /// Announced prefixes.
    pub nlri: Vec<IpNet>,
}

/// MP_UNREACH_NLRI: withdrawn prefixes of another family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpUnreach {
    /// Address family.
    pub afi: u16,
    /// Subsequent address family.
    pub safi: u8,
    /// Withdrawn prefixes.
    pub withdrawn: Vec<IpNet>,
}

/// An optional attribute this codec does not interpret, kept as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawAttribute {
    /// Flags (optional, transitive, partial; extended length is recomputed).
    pub flags: u8,
    /// Type code.
    pub code: u8,
    /// Value.
    pub value: Vec<u8>,
}

/// Path attributes of an UPDATE.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// 1 ORIGIN.
    pub origin: Option<Origin>,
    /// 2 AS_PATH.
    pub as_path: Option<Vec<AsSegment>>,
    /// 3 NEXT_HOP.
    pub next_hop: Option<Ipv4Addr>,
    /// 4 MULTI_EXIT_DISC.
    pub med: Option<u32>,
    /// 5 LOCAL_PREF.
    pub local_pref: Option<u32>,
    /// 6 ATOMIC_AGGREGATE.
    pub atomic_aggregate: bool,
    /// 7 AGGREGATOR.
    pub aggregator: Option<(u32, Ipv4Addr)>,
    /// 8 COMMUNITIES.
    pub communities: Vec<u32>,
    /// 14 MP_REACH_NLRI.
    pub mp_reach: Option<MpReach>,
    /// 15 MP_UNREACH_NLRI.
    pub mp_unreach: Option<MpUnreach>,
    /// 17 AS4_PATH.
    pub as4_path: Option<Vec<AsSegment>>,
    /// 32 LARGE_COMMUNITY.
    pub large_communities: Vec<[u32; 3]>,
    /// Other optional attributes.
    pub other: Vec<RawAttribute>,
}

/// An UPDATE message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Update {
    /// Withdrawn IPv4 prefixes.
    pub withdrawn: Vec<Ipv4Net>,
    /// Path attributes.
    pub attributes: Attributes,
    /// Announced IPv4 prefixes.
    pub nlri: Vec<Ipv4Net>,
}

const OPTIONAL: u8 = 0x80;
const TRANSITIVE: u8 = 0x40;
const EXTENDED: u8 = 0x10;

const ORIGIN: u8 = 1;
const AS_PATH: u8 = 2;
const NEXT_HOP: u8 = 3;
const MED: u8 = 4;
const LOCAL_PREF: u8 = 5;
const ATOMIC_AGGREGATE: u8 = 6;
const AGGREGATOR: u8 = 7;
const COMMUNITIES: u8 = 8;
const MP_REACH: u8 = 14;
const MP_UNREACH: u8 = 15;
const AS4_PATH: u8 = 17;
const LARGE_COMMUNITY: u8 = 32;

/// The optional and transitive bits each known attribute must carry.
fn expected_flags(code: u8) -> Option<u8> {
    match code {
        ORIGIN | AS_PATH | NEXT_HOP | LOCAL_PREF | ATOMIC_AGGREGATE => Some(TRANSITIVE),
        MED | MP_REACH | MP_UNREACH => Some(OPTIONAL),
        AGGREGATOR | COMMUNITIES | AS4_PATH | LARGE_COMMUNITY => Some(OPTIONAL | TRANSITIVE),
        _ => None,
    }
}

/// Bytes a prefix takes in NLRI: its length and the significant octets.
pub fn prefix_wire_len(net: &IpNet) -> usize {
    1 + usize::from(net.prefix_len()).div_ceil(8)
}

fn encode_prefix(net: &IpNet, out: &mut Vec<u8>) {
    let len = net.prefix_len();
    out.push(len);
    let n = usize::from(len).div_ceil(8);
    match net.trunc().addr() {
        IpAddr::V4(a) => out.extend_from_slice(&a.octets()[..n]),
        IpAddr::V6(a) => out.extend_from_slice(&a.octets()[..n]),
    }
}

/// Decodes a run of prefixes; `None` when malformed.
fn decode_prefixes(buf: &[u8], v6: bool) -> Option<Vec<IpNet>> {
    let mut r = Reader::new(buf);
    let mut out = Vec::new();
    while !r.is_empty() {
        let len = r.u8()?;
        let bytes = r.take(usize::from(len).div_ceil(8))?;
        let net = if v6 {
            let mut o = [0u8; 16];
            o.get_mut(..bytes.len())?.copy_from_slice(bytes);
            IpNet::V6(Ipv6Net::new(Ipv6Addr::from(o), len).ok()?)
        } else {
            let mut o = [0u8; 4];
            o.get_mut(..bytes.len())?.copy_from_slice(bytes);
            IpNet::V4(Ipv4Net::new(Ipv4Addr::from(o), len).ok()?)
        };
        // Bits past the prefix length are meaningless (RFC 4271 4.3).
        out.push(net.trunc());
    }
    Some(out)
}

fn v4_only(nets: Vec<IpNet>) -> Vec<Ipv4Net> {
    nets.into_iter()
        .filter_map(|n| match n {
            IpNet::V4(n) => Some(n),
            IpNet::V6(_) => None,
        })
        .collect()
}

fn decode_as_path(value: &[u8], four: bool) -> Option<Vec<AsSegment>> {
    let mut r = Reader::new(value);
    let mut out = Vec::new();
    while !r.is_empty() {
        let kind = r.u8()?;
        let count = r.u8()?;
        if !(1..=4).contains(&kind) || count == 0 {
            return None;
        }
        let asns = (0..count)
            .map(|_| {
                if four {
                    r.u32()
                } else {
                    r.u16().map(u32::from)
                }
            })
            .collect::<Option<Vec<u32>>>()?;
        out.push(AsSegment { kind, asns });
    }
    Some(out)
}

fn encode_as_path(path: &[AsSegment], four: bool, out: &mut Vec<u8>) {
    for seg in path {
        // Longer segments are split: a count fits one octet.
        for chunk in seg.asns.chunks(255) {
            out.push(seg.kind);
            out.push(u8::try_from(chunk.len()).unwrap_or(u8::MAX));
            for asn in chunk {
                if four {
                    out.extend_from_slice(&asn.to_be_bytes());
                } else {
                    let a = u16::try_from(*asn).unwrap_or(AS_TRANS);
                    out.extend_from_slice(&a.to_be_bytes());
                }
            }
        }
    }
}

fn decode_next_hops(bytes: &[u8]) -> Option<Vec<IpAddr>> {
    let v6 = |b: &[u8]| -> Option<IpAddr> {
        let o: [u8; 16] = b.try_into().ok()?;
        Some(IpAddr::V6(Ipv6Addr::from(o)))
    };
    match bytes.len() {
        4 => Some(vec![IpAddr::V4(Ipv4Addr::new(
            bytes[0], bytes[1], bytes[2], bytes[3],
        ))]),
        16 => Some(vec![v6(bytes)?]),
        32 => Some(vec![v6(&bytes[..16])?, v6(&bytes[16..])?]),
        _ => None,
    }
}

/// Checks a received UPDATE's body only as far as RFC 7606 asks for a
/// session reset: the withdrawn routes and the attribute list fit in the
/// message. Nothing inside them is looked at (see
/// [`super::decode_received`]).
pub(super) fn check_received(body: &[u8]) -> Result<(), Notification> {
    let list = || Notification::new(code::UPDATE, code::UPDATE_MALFORMED_ATTRIBUTE_LIST, []);
    let mut r = Reader::new(body);
    let withdrawn_len = usize::from(r.u16().ok_or_else(list)?);
    r.take(withdrawn_len).ok_or_else(list)?;
    let attrs_len = usize::from(r.u16().ok_or_else(list)?);
    r.take(attrs_len).ok_or_else(list)?;
    Ok(())
}

impl Update {
    /// The End-of-RIB marker for a family (RFC 4724 section 2): for IPv4
    /// unicast an UPDATE with nothing in it, for any other family one
    /// carrying only an empty MP_UNREACH_NLRI for it.
    pub fn end_of_rib_marker(afi: Afi, safi: u8) -> Update {
        if (afi, safi) == (Afi::Ipv4, SAFI_UNICAST) {
            return Update::default();
        }
        Update {
            attributes: Attributes {
                mp_unreach: Some(MpUnreach {
                    afi: afi.number(),
                    safi,
                    withdrawn: Vec::new(),
                }),
                ..Attributes::default()
            },
            ..Update::default()
        }
    }

    /// The family this UPDATE marks the end of the initial routes for, if
    /// it is an End-of-RIB marker: exactly the shape
    /// [`Update::end_of_rib_marker`] builds, nothing else alongside.
    pub fn end_of_rib(&self) -> Option<(Afi, u8)> {
        if !self.withdrawn.is_empty() || !self.nlri.is_empty() {
            return None;
        }
        let attributes = &self.attributes;
        if *attributes == Attributes::default() {
            return Some((Afi::Ipv4, SAFI_UNICAST));
        }
        let unreach = attributes.mp_unreach.as_ref()?;
        // Nothing but the empty MP_UNREACH_NLRI may be present.
        let alone = Attributes {
            mp_unreach: Some(unreach.clone()),
            ..Attributes::default()
        };
        if *attributes != alone || !unreach.withdrawn.is_empty() {
            return None;
        }
        Some((Afi::from_number(unreach.afi)?, unreach.safi))
    }

    pub(super) fn decode(body: &[u8], ctx: &Context) -> Result<Update, Notification> {
        let list = || Notification::new(code::UPDATE, code::UPDATE_MALFORMED_ATTRIBUTE_LIST, []);
        let network = || Notification::new(code::UPDATE, code::UPDATE_INVALID_NETWORK, []);
        let mut r = Reader::new(body);
        let withdrawn_len = usize::from(r.u16().ok_or_else(list)?);
        let withdrawn = r.take(withdrawn_len).ok_or_else(list)?;
        let attrs_len = usize::from(r.u16().ok_or_else(list)?);
        let attrs = r.take(attrs_len).ok_or_else(list)?;
        let nlri = r.take(r.buf.len()).unwrap_or_default();
        let withdrawn = v4_only(decode_prefixes(withdrawn, false).ok_or_else(network)?);
        let nlri = v4_only(decode_prefixes(nlri, false).ok_or_else(network)?);
        let attributes = Attributes::decode(attrs, ctx)?;
        if !nlri.is_empty() || attributes.mp_reach.is_some() {
            let missing = if attributes.origin.is_none() {
                Some(ORIGIN)
            } else if attributes.as_path.is_none() {
                Some(AS_PATH)
            } else if !nlri.is_empty() && attributes.next_hop.is_none() {
                Some(NEXT_HOP)
            } else {
                None
            };
            if let Some(m) = missing {
                return Err(Notification::new(
                    code::UPDATE,
                    code::UPDATE_MISSING_WELL_KNOWN,
                    [m],
                ));
            }
        }
        Ok(Update {
            withdrawn,
            attributes,
            nlri,
        })
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>, ctx: &Context) {
        let mut withdrawn = Vec::new();
        for n in &self.withdrawn {
            encode_prefix(&IpNet::V4(*n), &mut withdrawn);
        }
        out.extend_from_slice(&u16::try_from(withdrawn.len()).unwrap_or(0).to_be_bytes());
        out.extend_from_slice(&withdrawn);
        let mut attrs = Vec::new();
        self.attributes.encode(&mut attrs, ctx);
        out.extend_from_slice(&u16::try_from(attrs.len()).unwrap_or(0).to_be_bytes());
        out.extend_from_slice(&attrs);
        for n in &self.nlri {
            encode_prefix(&IpNet::V4(*n), out);
        }
    }
}

/// One path attribute as read off the wire, before its value is checked.
struct WireAttribute<'a> {
    flags: u8,
    code: u8,
    value: &'a [u8],
    /// The whole attribute: the diagnostic data of most errors.
    whole: &'a [u8],
}

impl<'a> WireAttribute<'a> {
    /// The next attribute of `r`: flags, type code, a length of one or
    /// (extended) two octets, and that many octets of value.
    fn read(r: &mut Reader<'a>) -> Result<WireAttribute<'a>, Notification> {
        let list = || Notification::new(code::UPDATE, code::UPDATE_MALFORMED_ATTRIBUTE_LIST, []);
        let start = r.buf;
        let flags = r.u8().ok_or_else(list)?;
        let code = r.u8().ok_or_else(list)?;
        let len = if flags & EXTENDED != 0 {
            usize::from(r.u16().ok_or_else(list)?)
        } else {
            usize::from(r.u8().ok_or_else(list)?)
        };
        let value = r.take(len).ok_or_else(list)?;
        Ok(WireAttribute {
            flags,
            code,
            value,
            whole: &start[..start.len() - r.buf.len()],
        })
    }

    /// An UPDATE error with subcode `sub` carrying this attribute.
    fn err(&self, sub: u8) -> Notification {
        Notification::new(code::UPDATE, sub, self.whole.to_vec())
    }

    /// The flags a known attribute must have (an unknown one must be
    /// optional) and the length its type fixes.
    fn check(&self, ctx: &Context) -> Result<(), Notification> {
        match expected_flags(self.code) {
            Some(f) if self.flags & (OPTIONAL | TRANSITIVE) != f => {
                return Err(self.err(code::UPDATE_ATTRIBUTE_FLAGS));
            }
            None if self.flags & OPTIONAL == 0 => {
                return Err(self.err(code::UPDATE_UNRECOGNIZED_WELL_KNOWN));
            }
            _ => {}
        }
        let len = self.value.len();
        let length_ok = match self.code {
            ORIGIN => len == 1,
            NEXT_HOP | MED | LOCAL_PREF => len == 4,
            ATOMIC_AGGREGATE => len == 0,
            AGGREGATOR => len == if ctx.four_octet_as { 8 } else { 6 },
            COMMUNITIES => len.is_multiple_of(4),
            LARGE_COMMUNITY => len.is_multiple_of(12),
            _ => true,
        };
        if !length_ok {
            return Err(self.err(code::UPDATE_ATTRIBUTE_LENGTH));
        }
        Ok(())
    }
}

/// An MP_REACH_NLRI or MP_UNREACH_NLRI value's AFI and SAFI, and whether
/// its prefixes are IPv6 (no other AFI is read: any failure of the value
/// is the same error, so where it shows does not matter).
fn mp_family(v: &mut Reader<'_>) -> Option<(u16, u8, bool)> {
    let afi = v.u16()?;
    let safi = v.u8()?;
    let v6 = match afi {
        1 => false,
        2 => true,
        _ => return None,
    };
    Some((afi, safi, v6))
}

impl MpReach {
    /// An MP_REACH_NLRI value: family, next hops, a reserved octet, then
    /// the prefixes.
    fn decode(value: &[u8]) -> Option<MpReach> {
        let mut v = Reader::new(value);
        let (afi, safi, v6) = mp_family(&mut v)?;
        let nh_len = usize::from(v.u8()?);
        let next_hops = decode_next_hops(v.take(nh_len)?)?;
        let _reserved = v.u8()?;
        let nlri = decode_prefixes(v.buf, v6)?;
        Some(MpReach {
            afi,
            safi,
            next_hops,
            nlri,
        })
    }
}

impl MpUnreach {
    /// An MP_UNREACH_NLRI value: family, then the withdrawn prefixes.
    fn decode(value: &[u8]) -> Option<MpUnreach> {
        let mut v = Reader::new(value);
        let (afi, safi, v6) = mp_family(&mut v)?;
        let withdrawn = decode_prefixes(v.buf, v6)?;
        Some(MpUnreach {
            afi,
            safi,
            withdrawn,
        })
    }
}

impl Attributes {
    /// The path attributes of an UPDATE: each read, refused when it
    /// repeats one before it, checked, then its value taken.
    fn decode(buf: &[u8], ctx: &Context) -> Result<Attributes, Notification> {
        let mut out = Attributes::default();
        let mut seen = [false; 256];
        let mut r = Reader::new(buf);
        while !r.is_empty() {
            let a = WireAttribute::read(&mut r)?;
            if std::mem::replace(&mut seen[usize::from(a.code)], true) {
                return Err(Notification::new(
                    code::UPDATE,
                    code::UPDATE_MALFORMED_ATTRIBUTE_LIST,
                    [],
                ));
            }
            a.check(ctx)?;
            out.set(&a, ctx)?;
        }
        Ok(out)
    }

    /// Takes the value of a checked attribute into its field (an unknown
    /// one is kept as it came, to pass on).
    fn set(&mut self, a: &WireAttribute<'_>, ctx: &Context) -> Result<(), Notification> {
        let list = || Notification::new(code::UPDATE, code::UPDATE_MALFORMED_ATTRIBUTE_LIST, []);
        let value = a.value;
        let mut v = Reader::new(value);
        match a.code {
            ORIGIN => {
                self.origin = Some(match value[0] {
                    0 => Origin::Igp,
                    1 => Origin::Egp,
                    2 => Origin::Incomplete,
                    _ => return Err(a.err(code::UPDATE_INVALID_ORIGIN)),
                })
            }
            AS_PATH => {
                self.as_path = Some(
                    decode_as_path(value, ctx.four_octet_as)
                        .ok_or_else(|| a.err(code::UPDATE_MALFORMED_AS_PATH))?,
                )
            }
            NEXT_HOP => {
                let nh = Ipv4Addr::from(v.u32().ok_or_else(list)?);
                if nh.is_unspecified() || nh.is_multicast() || nh.is_broadcast() {
                    return Err(a.err(code::UPDATE_INVALID_NEXT_HOP));
                }
                self.next_hop = Some(nh);
            }
            MED => self.med = v.u32(),
            LOCAL_PREF => self.local_pref = v.u32(),
            ATOMIC_AGGREGATE => self.atomic_aggregate = true,
            AGGREGATOR => {
                let asn = if ctx.four_octet_as {
                    v.u32()
                } else {
                    v.u16().map(u32::from)
                };
                self.aggregator = asn.zip(v.u32().map(Ipv4Addr::from));
            }
            COMMUNITIES => {
                self.communities = value
                    .chunks_exact(4)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            }
            LARGE_COMMUNITY => {
                self.large_communities = value
                    .chunks_exact(12)
                    .map(|c| {
                        let w = |i: usize| u32::from_be_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
                        [w(0), w(4), w(8)]
                    })
                    .collect()
            }
            MP_REACH => {
                let bad = || a.err(code::UPDATE_OPTIONAL_ATTRIBUTE);
                self.mp_reach = Some(MpReach::decode(value).ok_or_else(bad)?);
            }
            MP_UNREACH => {
                let bad = || a.err(code::UPDATE_OPTIONAL_ATTRIBUTE);
                self.mp_unreach = Some(MpUnreach::decode(value).ok_or_else(bad)?);
            }
            AS4_PATH => {
                self.as4_path = Some(
                    decode_as_path(value, true)
                        .ok_or_else(|| a.err(code::UPDATE_OPTIONAL_ATTRIBUTE))?,
                )
            }
            _ => self.other.push(RawAttribute {
                flags: a.flags & !EXTENDED,
                code: a.code,
                value: value.to_vec(),
            }),
        }
        Ok(())
    }

    fn encode(&self, out: &mut Vec<u8>, ctx: &Context) {
        let mut put = |flags: u8, code: u8, value: &[u8]| {
            if value.len() > 255 {
                out.extend_from_slice(&[flags | EXTENDED, code]);
                out.extend_from_slice(&u16::try_from(value.len()).unwrap_or(0).to_be_bytes());
            } else {
                out.extend_from_slice(&[flags, code, value.len() as u8]);
            }
            out.extend_from_slice(value);
        };
        if let Some(o) = self.origin {
            let v = match o {
                Origin::Igp => 0,
                Origin::Egp => 1,
                Origin::Incomplete => 2,
            };
            put(TRANSITIVE, ORIGIN, &[v]);
        }
        if let Some(path) = &self.as_path {
            let mut v = Vec::new();
            encode_as_path(path, ctx.four_octet_as, &mut v);
            put(TRANSITIVE, AS_PATH, &v);
        }
        if let Some(nh) = self.next_hop {
            put(TRANSITIVE, NEXT_HOP, &nh.octets());
        }
        if let Some(m) = self.med {
            put(OPTIONAL, MED, &m.to_be_bytes());
        }
        if let Some(lp) = self.local_pref {
            put(TRANSITIVE, LOCAL_PREF, &lp.to_be_bytes());
        }
        if self.atomic_aggregate {
            put(TRANSITIVE, ATOMIC_AGGREGATE, &[]);
        }
        if let Some((asn, id)) = self.aggregator {
            let mut v = Vec::new();
            if ctx.four_octet_as {
                v.extend_from_slice(&asn.to_be_bytes());
            } else {
                v.extend_from_slice(&u16::try_from(asn).unwrap_or(AS_TRANS).to_be_bytes());
            }
            v.extend_from_slice(&id.octets());
            put(OPTIONAL | TRANSITIVE, AGGREGATOR, &v);
        }
        if !self.communities.is_empty() {
            let v: Vec<u8> = self
                .communities
                .iter()
                .flat_map(|c| c.to_be_bytes())
                .collect();
            put(OPTIONAL | TRANSITIVE, COMMUNITIES, &v);
        }
        if let Some(mp) = &self.mp_reach {
            let mut v = Vec::new();
            v.extend_from_slice(&mp.afi.to_be_bytes());
            v.push(mp.safi);
            let mut nh = Vec::new();
            for a in &mp.next_hops {
                match a {
                    IpAddr::V4(a) => nh.extend_from_slice(&a.octets()),
                    IpAddr::V6(a) => nh.extend_from_slice(&a.octets()),
                }
            }
            v.push(u8::try_from(nh.len()).unwrap_or(0));
            v.extend_from_slice(&nh);
            v.push(0);
            for n in &mp.nlri {
                encode_prefix(n, &mut v);
            }
            put(OPTIONAL, MP_REACH, &v);
        }
        if let Some(mp) = &self.mp_unreach {
            let mut v = Vec::new();
            v.extend_from_slice(&mp.afi.to_be_bytes());
            v.push(mp.safi);
            for n in &mp.withdrawn {
                encode_prefix(n, &mut v);
            }
            put(OPTIONAL, MP_UNREACH, &v);
        }
        if let Some(path) = &self.as4_path {
            let mut v = Vec::new();
            encode_as_path(path, true, &mut v);
            put(OPTIONAL | TRANSITIVE, AS4_PATH, &v);
        }
        if !self.large_communities.is_empty() {
            let v: Vec<u8> = self
                .large_communities
                .iter()
                .flat_map(|c| c.iter().flat_map(|w| w.to_be_bytes()))
                .collect();
            put(OPTIONAL | TRANSITIVE, LARGE_COMMUNITY, &v);
        }
        for a in &self.other {
            put(a.flags & !EXTENDED, a.code, &a.value);
        }
    }
}
