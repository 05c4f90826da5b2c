//! Turns route changes into UPDATE messages (pure): prefixes sharing
//! attributes go together, as many per message as fit in 4096 bytes;
//! IPv4 in the classic fields, IPv6 in MP_REACH / MP_UNREACH, and IPv4
//! there too when its next hop is an IPv6 address (RFC 8950).

use super::advertise::RouteAttrs;
use crate::config::Community;
use crate::net::bgp::{
    AsSegment, Attributes, Context, MAX_LEN, Message, MpReach, MpUnreach, Origin, SAFI_UNICAST,
    Update, encode, prefix_wire_len,
};
use ipnet::{IpNet, Ipv4Net};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// LOCAL_PREF on iBGP when the advertisement sets none (RFC 4271's
/// customary default, what FRR assumes).
pub const DEFAULT_LOCAL_PREF: u32 = 100;

/// The next hop of IPv4 routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V4NextHop {
    /// In NEXT_HOP, the routes in the classic fields.
    Ipv4(Ipv4Addr),
    /// An IPv6 address (on an unnumbered session, our link-local one),
    /// which needs the peer's extended next hop capability (RFC 8950):
    /// the routes go in MP_REACH_NLRI / MP_UNREACH_NLRI of AFI 1.
    Ipv6(Ipv6Addr),
}

/// What the session negotiated that shapes its UPDATEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Our AS on this session (`localASN` when set): the one AS_PATH
    /// carries, as FRR's `local-as .. replace-as` sends it.
    pub my_asn: u32,
    /// The peer is in our AS.
    pub ibgp: bool,
    /// 4-octet AS numbers negotiated.
    pub four_octet_as: bool,
    /// Next hop for IPv4 prefixes.
    pub next_hop_v4: Option<V4NextHop>,
    /// Next hop for IPv6 prefixes.
    pub next_hop_v6: Option<Ipv6Addr>,
}

impl Shape {
    /// The decoding/encoding context.
    pub fn context(&self) -> Context {
        Context {
            four_octet_as: self.four_octet_as,
        }
    }

    /// IPv4 prefixes travel in MP_REACH / MP_UNREACH, as FRR sends them
    /// once the extended next hop is in use.
    fn v4_in_mp(&self) -> bool {
        matches!(self.next_hop_v4, Some(V4NextHop::Ipv6(_)))
    }

    fn attributes(&self, attrs: &RouteAttrs) -> Attributes {
        let path = if self.ibgp {
            Vec::new()
        } else {
            vec![AsSegment::sequence(vec![self.my_asn])]
        };
        // A 2-octet peer sees AS_TRANS and learns the real AS from AS4_PATH.
        let as4_path = (!self.four_octet_as && !self.ibgp && u16::try_from(self.my_asn).is_err())
            .then(|| path.clone());
        let mut out = Attributes {
            origin: Some(Origin::Igp),
            as_path: Some(path),
            local_pref: self
                .ibgp
                .then(|| attrs.local_pref.unwrap_or(DEFAULT_LOCAL_PREF)),
            as4_path,
            ..Default::default()
        };
        for c in &attrs.communities {
            match c {
                Community::Standard(a, b) => {
                    out.communities.push((u32::from(*a) << 16) | u32::from(*b))
                }
                Community::Large(a, b, c) => out.large_communities.push([*a, *b, *c]),
            }
        }
        out
    }
}

/// The UPDATEs announcing `announce` and withdrawing `withdraw`;
/// withdrawals first, so a prefix moving between attribute sets is never
/// left out. Prefixes of a family without a next hop are skipped (the
/// caller counts them as pending).
pub fn build(announce: &[(IpNet, &RouteAttrs)], withdraw: &[IpNet], shape: &Shape) -> Vec<Update> {
    let ctx = shape.context();
    let len_of = |u: &Update| encode(&Message::Update(u.clone()), &ctx).len();
    let mut out = Vec::new();

    let (w4, w6): (Vec<IpNet>, Vec<IpNet>) = withdraw.iter().partition(|n| n.addr().is_ipv4());
    let unreach = |afi: u16, withdrawn: Vec<IpNet>| Update {
        attributes: Attributes {
            mp_unreach: Some(MpUnreach {
                afi,
                safi: SAFI_UNICAST,
                withdrawn,
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    // +1: the attribute switches to a 2-byte length once it passes 255.
    let unreach_base = |afi| len_of(&unreach(afi, Vec::new())) + 1;
    if shape.v4_in_mp() {
        for chunk in chunks(&w4, MAX_LEN - unreach_base(1)) {
            out.push(unreach(1, chunk.to_vec()));
        }
    } else {
        for chunk in chunks(&w4, MAX_LEN - len_of(&Update::default())) {
            out.push(Update {
                withdrawn: chunk.iter().filter_map(v4).collect(),
                ..Default::default()
            });
        }
    }
    for chunk in chunks(&w6, MAX_LEN - unreach_base(2)) {
        out.push(unreach(2, chunk.to_vec()));
    }

    let mut groups: BTreeMap<(bool, Option<u32>, Vec<Community>), Vec<IpNet>> = BTreeMap::new();
    for (net, attrs) in announce {
        let v6 = net.addr().is_ipv6();
        if (v6 && shape.next_hop_v6.is_none()) || (!v6 && shape.next_hop_v4.is_none()) {
            continue;
        }
        let key = (
            v6,
            attrs.local_pref,
            attrs.communities.iter().copied().collect(),
        );
        groups.entry(key).or_default().push(*net);
    }
    for ((v6, local_pref, communities), nets) in groups {
        let attrs = shape.attributes(&RouteAttrs {
            local_pref,
            communities: communities.into_iter().collect(),
        });
        let mp_next_hop = match (v6, shape.next_hop_v4) {
            (true, _) => shape.next_hop_v6.map(|nh| (2, nh)),
            (false, Some(V4NextHop::Ipv6(nh))) => Some((1, nh)),
            (false, _) => None,
        };
        if let Some((afi, nh)) = mp_next_hop {
            let reach = |nlri: Vec<IpNet>| Update {
                attributes: Attributes {
                    mp_reach: Some(MpReach {
                        afi,
                        safi: SAFI_UNICAST,
                        next_hops: vec![IpAddr::V6(nh)],
                        nlri,
                    }),
                    ..attrs.clone()
                },
                ..Default::default()
            };
            let base = len_of(&reach(Vec::new())) + 1;
            for chunk in chunks(&nets, MAX_LEN - base) {
                out.push(reach(chunk.to_vec()));
            }
        } else if let Some(V4NextHop::Ipv4(nh)) = shape.next_hop_v4 {
            let with_nh = Attributes {
                next_hop: Some(nh),
                ..attrs
            };
            let base = len_of(&Update {
                attributes: with_nh.clone(),
                ..Default::default()
            });
            for chunk in chunks(&nets, MAX_LEN - base) {
                out.push(Update {
                    attributes: with_nh.clone(),
                    nlri: chunk.iter().filter_map(v4).collect(),
                    ..Default::default()
                });
            }
        }
    }
    out
}

fn v4(n: &IpNet) -> Option<Ipv4Net> {
    match n {
        IpNet::V4(n) => Some(*n),
        IpNet::V6(_) => None,
    }
}

/// Splits `nets` into runs whose encoded prefixes fit `budget` bytes.
fn chunks(nets: &[IpNet], budget: usize) -> Vec<&[IpNet]> {
    let mut out = Vec::new();
    let (mut start, mut used) = (0, 0);
    for (i, n) in nets.iter().enumerate() {
        let l = prefix_wire_len(n);
        if used + l > budget && i > start {
            out.push(&nets[start..i]);
            start = i;
            used = 0;
        }
        used += l;
    }
    if start < nets.len() {
        out.push(&nets[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::bgp::{AS_TRANS, decode};
    use std::collections::BTreeSet;

    fn shape(ibgp: bool, four: bool, asn: u32) -> Shape {
        Shape {
            my_asn: asn,
            ibgp,
            four_octet_as: four,
            next_hop_v4: Some(V4NextHop::Ipv4(Ipv4Addr::new(10, 0, 0, 10))),
            next_hop_v6: Some("fc00::10".parse().expect("ip")),
        }
    }

    fn host_routes(n: u32, v6: bool) -> Vec<IpNet> {
        (0..n)
            .map(|i| {
                if v6 {
                    IpNet::new(
                        IpAddr::V6(Ipv6Addr::from(0xfc00_u128 << 112 | u128::from(i))),
                        128,
                    )
                } else {
                    IpNet::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), 32)
                }
                .expect("net")
            })
            .collect()
    }

    /// 10k prefixes of each family with two attribute sets: every UPDATE
    /// fits 4096 bytes, decodes, and together they carry each prefix once.
    #[test]
    fn many_prefixes_split_into_messages_that_fit() {
        let a = RouteAttrs::default();
        let b = RouteAttrs {
            local_pref: Some(200),
            communities: BTreeSet::from([Community::Standard(1, 2), Community::Large(1, 2, 3)]),
        };
        let nets: Vec<IpNet> = host_routes(10_000, false)
            .into_iter()
            .chain(host_routes(10_000, true))
            .collect();
        let announce: Vec<(IpNet, &RouteAttrs)> = nets
            .iter()
            .enumerate()
            .map(|(i, n)| (*n, if i % 3 == 0 { &b } else { &a }))
            .collect();
        let withdraw = host_routes(5000, true);
        let s = shape(true, true, 64512);
        let updates = build(&announce, &withdraw, &s);
        let mut seen = BTreeSet::new();
        let mut withdrawn = 0;
        for u in &updates {
            let bytes = encode(&Message::Update(u.clone()), &s.context());
            assert!(bytes.len() <= MAX_LEN, "{} bytes", bytes.len());
            let Ok(Message::Update(back)) = decode(&bytes, &s.context()) else {
                panic!("does not decode");
            };
            for n in back.nlri {
                assert!(seen.insert(IpNet::V4(n)));
            }
            if let Some(mp) = back.attributes.mp_reach {
                assert_eq!(
                    mp.next_hops,
                    vec![IpAddr::V6("fc00::10".parse().expect("ip"))]
                );
                for n in mp.nlri {
                    assert!(seen.insert(n));
                }
            }
            withdrawn += back.attributes.mp_unreach.map_or(0, |m| m.withdrawn.len());
        }
        assert_eq!(seen.len(), 20_000);
        assert_eq!(withdrawn, 5000);
        // Packed, not one prefix per message: 5 bytes per /32, 17 per /128.
        assert!(updates.len() < 80, "{} updates", updates.len());
    }

    #[test]
    fn ibgp_carries_local_pref_and_no_as() {
        let attrs = RouteAttrs {
            local_pref: None,
            communities: BTreeSet::from([Community::Standard(64512, 100)]),
        };
        let net: IpNet = "192.168.10.5/32".parse().expect("net");
        let u = &build(&[(net, &attrs)], &[], &shape(true, true, 64512))[0];
        assert_eq!(u.attributes.local_pref, Some(DEFAULT_LOCAL_PREF));
        assert_eq!(u.attributes.as_path, Some(vec![]));
        assert_eq!(u.attributes.next_hop, Some(Ipv4Addr::new(10, 0, 0, 10)));
        assert_eq!(u.attributes.communities, vec![(64512 << 16) | 100]);
    }

    #[test]
    fn ebgp_prepends_our_as_and_sends_no_local_pref() {
        let attrs = RouteAttrs {
            local_pref: Some(300),
            communities: BTreeSet::new(),
        };
        let net: IpNet = "192.168.10.5/32".parse().expect("net");
        let u = &build(&[(net, &attrs)], &[], &shape(false, true, 64512))[0];
        assert_eq!(u.attributes.local_pref, None);
        assert_eq!(
            u.attributes.as_path,
            Some(vec![AsSegment::sequence(vec![64512])])
        );
        assert_eq!(u.attributes.as4_path, None);
    }

    #[test]
    fn a_two_octet_peer_gets_as_trans_and_as4_path() {
        let net: IpNet = "192.168.10.5/32".parse().expect("net");
        let s = shape(false, false, 4_200_000_000);
        let u = &build(&[(net, &RouteAttrs::default())], &[], &s)[0];
        let bytes = encode(&Message::Update(u.clone()), &s.context());
        let Ok(Message::Update(back)) = decode(&bytes, &s.context()) else {
            panic!("does not decode");
        };
        assert_eq!(
            back.attributes.as_path,
            Some(vec![AsSegment::sequence(vec![u32::from(AS_TRANS)])])
        );
        assert_eq!(
            back.attributes.as4_path,
            Some(vec![AsSegment::sequence(vec![4_200_000_000])])
        );
    }

    #[test]
    fn a_family_without_next_hop_is_not_sent() {
        let mut s = shape(true, true, 1);
        s.next_hop_v6 = None;
        let nets = [
            "192.168.10.5/32".parse().expect("net"),
            "fc00::5/128".parse().expect("net"),
        ];
        let a = RouteAttrs::default();
        let updates = build(&[(nets[0], &a), (nets[1], &a)], &[], &s);
        assert_eq!(updates.len(), 1);
        assert!(updates[0].attributes.mp_reach.is_none());
    }

    /// With an IPv6 next hop for IPv4 (an unnumbered session), IPv4
    /// announcements and withdrawals travel in MP_REACH / MP_UNREACH of
    /// AFI 1, never in the classic fields.
    #[test]
    fn ipv4_with_an_ipv6_next_hop_goes_in_mp_attributes() {
        let ll: Ipv6Addr = "fe80::10".parse().expect("ip");
        let mut s = shape(false, true, 64512);
        s.next_hop_v4 = Some(V4NextHop::Ipv6(ll));
        s.next_hop_v6 = Some(ll);
        let nets: [IpNet; 3] = [
            "192.168.10.5/32".parse().expect("net"),
            "fc00::5/128".parse().expect("net"),
            "192.168.10.6/32".parse().expect("net"),
        ];
        let a = RouteAttrs::default();
        let updates = build(&[(nets[0], &a), (nets[1], &a)], &[nets[2]], &s);
        let lines: Vec<String> = updates
            .iter()
            .map(|u| {
                assert!(
                    u.withdrawn.is_empty() && u.nlri.is_empty() && u.attributes.next_hop.is_none()
                );
                match (&u.attributes.mp_reach, &u.attributes.mp_unreach) {
                    (Some(r), None) => {
                        format!("reach afi {} via {:?}: {:?}", r.afi, r.next_hops, r.nlri)
                    }
                    (None, Some(w)) => format!("unreach afi {}: {:?}", w.afi, w.withdrawn),
                    other => panic!("unexpected {other:?}"),
                }
            })
            .collect();
        assert_eq!(
            lines,
            [
                "unreach afi 1: [192.168.10.6/32]",
                "reach afi 1 via [fe80::10]: [192.168.10.5/32]",
                "reach afi 2 via [fe80::10]: [fc00::5/128]",
            ]
        );
        for u in &updates {
            let bytes = encode(&Message::Update(u.clone()), &s.context());
            assert_eq!(decode(&bytes, &s.context()), Ok(Message::Update(u.clone())));
        }
    }

    #[test]
    fn chunks_respect_the_budget() {
        let nets = host_routes(10, false);
        let c = chunks(&nets, 12);
        assert_eq!(
            c.iter().map(|c| c.len()).collect::<Vec<_>>(),
            [2, 2, 2, 2, 2]
        );
        assert!(chunks(&[], 10).is_empty());
    }
}
