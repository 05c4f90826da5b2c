//! The BGP wire codec against RFC 4271/4760/7606 examples: round trips,
//! malformed messages and the NOTIFICATION each earns, proptested decoding,
//! and the wire parts of graceful restart (RFC 4724).

use super::*;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use proptest::prelude::*;
use rstest::rstest;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod extended_next_hop;

const FOUR: Context = Context {
    four_octet_as: true,
};
const TWO: Context = Context {
    four_octet_as: false,
};

fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = MARKER.to_vec();
    m.extend_from_slice(&((HEADER_LEN + body.len()) as u16).to_be_bytes());
    m.push(kind);
    m.extend_from_slice(body);
    m
}

fn v4net() -> impl Strategy<Value = Ipv4Net> {
    (any::<u32>(), 0u8..=32).prop_map(|(a, l)| {
        Ipv4Net::new(Ipv4Addr::from(a), l)
            .expect("length <= 32")
            .trunc()
    })
}

fn v6net() -> impl Strategy<Value = IpNet> {
    (any::<u128>(), 0u8..=128).prop_map(|(a, l)| {
        IpNet::V6(
            Ipv6Net::new(Ipv6Addr::from(a), l)
                .expect("length <= 128")
                .trunc(),
        )
    })
}

fn segments() -> impl Strategy<Value = Vec<AsSegment>> {
    prop::collection::vec(
        (1u8..=4, prop::collection::vec(any::<u32>(), 1..10))
            .prop_map(|(kind, asns)| AsSegment { kind, asns }),
        0..3,
    )
}

prop_compose! {
    fn attributes(four: bool)(
        origin in prop::option::of(prop_oneof![Just(Origin::Igp), Just(Origin::Egp), Just(Origin::Incomplete)]),
        as_path in prop::option::of(segments()),
        next_hop in prop::option::of((1u32..0xdfff_ffff).prop_map(Ipv4Addr::from)),
        med in prop::option::of(any::<u32>()),
        local_pref in prop::option::of(any::<u32>()),
        atomic_aggregate in any::<bool>(),
        aggregator in prop::option::of((any::<u32>(), any::<u32>().prop_map(Ipv4Addr::from))),
        communities in prop::collection::vec(any::<u32>(), 0..80),
        large in prop::collection::vec(any::<[u32; 3]>(), 0..30),
        v6 in prop::option::of((prop::collection::vec(v6net(), 0..40), any::<u128>(), any::<bool>())),
        unreach in prop::option::of(prop::collection::vec(v6net(), 0..40)),
        as4_path in prop::option::of(segments()),
        other in prop::collection::btree_map(40u8..=255, (any::<bool>(), any::<bool>(), prop::collection::vec(any::<u8>(), 0..300)), 0..3),
    ) -> Attributes {
        Attributes {
            origin,
            as_path: as_path.map(|p| p.into_iter().map(|mut s| {
                if !four { s.asns.iter_mut().for_each(|a| *a &= 0xffff); }
                s
            }).collect()),
            next_hop,
            med,
            local_pref,
            atomic_aggregate,
            aggregator: aggregator.map(|(a, id)| (if four { a } else { a & 0xffff }, id)),
            communities,
            large_communities: large,
            mp_reach: v6.map(|(nlri, nh, two)| MpReach {
                afi: 2,
                safi: 1,
                next_hops: if two {
                    vec![IpAddr::V6(Ipv6Addr::from(nh)), IpAddr::V6(Ipv6Addr::from(nh ^ 1))]
                } else {
                    vec![IpAddr::V6(Ipv6Addr::from(nh))]
                },
                nlri,
            }),
            mp_unreach: unreach.map(|withdrawn| MpUnreach { afi: 2, safi: 1, withdrawn }),
            as4_path,
            other: other
                .into_iter()
                .filter(|(code, _)| *code != 32)
                .map(|(code, (t, p, value))| RawAttribute {
                    flags: 0x80 | if t { 0x40 } else { 0 } | if p { 0x20 } else { 0 },
                    code,
                    value,
                })
                .collect(),
        }
    }
}

proptest! {
    #[test]
    fn update_round_trips(
        four in any::<bool>(),
        withdrawn in prop::collection::vec(v4net(), 0..50),
        nlri in prop::collection::vec(v4net(), 0..50),
        attrs in any::<bool>().prop_flat_map(attributes),
    ) {
        let ctx = Context { four_octet_as: four };
        let mut attributes = attrs;
        if !four {
            attributes.as_path = attributes.as_path.map(|p| p.into_iter().map(|mut s| {
                s.asns.iter_mut().for_each(|a| *a &= 0xffff);
                s
            }).collect());
            attributes.aggregator = attributes.aggregator.map(|(a, id)| (a & 0xffff, id));
        }
        // An UPDATE announcing anything carries the well-known attributes.
        let announces = !nlri.is_empty() || attributes.mp_reach.is_some();
        if announces {
            attributes.origin.get_or_insert(Origin::Igp);
            attributes.as_path.get_or_insert_with(Vec::new);
            if !nlri.is_empty() {
                attributes.next_hop.get_or_insert(Ipv4Addr::new(10, 0, 0, 1));
            }
        }
        let update = Update { withdrawn, attributes, nlri };
        let bytes = encode(&Message::Update(update.clone()), &ctx);
        prop_assume!(bytes.len() <= MAX_LEN);
        prop_assert_eq!(decode(&bytes, &ctx), Ok(Message::Update(update)));
    }

    #[test]
    fn open_round_trips(
        asn in any::<u32>(),
        hold in prop_oneof![Just(0u16), 3u16..],
        id in 1u32..,
        mp in prop::collection::vec((any::<u16>(), any::<u8>()), 0..4),
        refresh in any::<bool>(),
        // Not 5: extended next hop has a layout of its own.
        other in prop::collection::vec((6u8..60, prop::collection::vec(any::<u8>(), 0..8)), 0..3),
    ) {
        let mut caps: Vec<Capability> = mp.into_iter().map(|(afi, safi)| Capability::Multiprotocol { afi, safi }).collect();
        if refresh { caps.push(Capability::RouteRefresh); }
        caps.extend(other.into_iter().map(|(code, value)| Capability::Other { code, value }));
        let open = Open::new(asn, hold, Ipv4Addr::from(id), caps);
        prop_assert_eq!(open.asn(), asn);
        let bytes = encode(&Message::Open(open.clone()), &FOUR);
        prop_assert_eq!(decode(&bytes, &FOUR), Ok(Message::Open(open)));
    }

    #[test]
    fn notification_round_trips(code in any::<u8>(), sub in any::<u8>(), data in prop::collection::vec(any::<u8>(), 0..100)) {
        let n = Message::Notification(Notification::new(code, sub, data));
        prop_assert_eq!(decode(&encode(&n, &TWO), &TWO), Ok(n));
    }

    /// Whatever the bytes, decoding answers (a message or a notification)
    /// and never panics; what decodes re-encodes to something that decodes
    /// to the same message.
    #[test]
    fn arbitrary_bytes_never_panic(kind in 1u8..=6, body in prop::collection::vec(any::<u8>(), 0..200), four in any::<bool>()) {
        let ctx = Context { four_octet_as: four };
        let bytes = frame(kind, &body);
        if let Ok(m) = decode(&bytes, &ctx) {
            prop_assert_eq!(decode(&encode(&m, &ctx), &ctx), Ok(m));
        }
    }
}

#[test]
fn keepalive_and_route_refresh_bytes() {
    let k = encode(&Message::Keepalive, &FOUR);
    assert_eq!(k.len(), 19);
    assert_eq!(&k[16..], &[0, 19, 4]);
    assert_eq!(decode(&k, &FOUR), Ok(Message::Keepalive));
    let rr = Message::RouteRefresh { afi: 2, safi: 1 };
    assert_eq!(&encode(&rr, &FOUR)[16..], &[0, 23, 5, 0, 2, 0, 1]);
}

/// An OPEN as FRR 8.4 sends it to an iBGP neighbor in AS 64512 (hold 9 s,
/// id 10.0.0.2): multiprotocol IPv4 unicast, route refresh (new and old
/// code), 4-octet AS, and capabilities this codec keeps as "other".
#[test]
fn decodes_an_frr_style_open() {
    let body = [
        4, 0xfc, 0x00, 0, 9, 10, 0, 0, 2, 24, //
        2, 6, 1, 4, 0, 1, 0, 1, // MP ipv4 unicast
        2, 2, 2, 0, // route refresh
        2, 2, 128, 0, // old route refresh (Cisco)
        2, 6, 65, 4, 0, 0, 0xfc, 0x00, // 4-octet AS 64512
    ];
    let Ok(Message::Open(o)) = decode(&frame(1, &body), &TWO) else {
        panic!("not an OPEN");
    };
    assert_eq!(o.asn(), 64512);
    assert_eq!(o.hold_time, 9);
    assert_eq!(o.router_id, Ipv4Addr::new(10, 0, 0, 2));
    assert!(o.four_octet_as());
    assert_eq!(o.families(), vec![Afi::Ipv4]);
    assert!(o.capabilities.contains(&Capability::Other {
        code: 128,
        value: vec![]
    }));
}

#[test]
fn a_4_octet_as_goes_as_as_trans() {
    let o = Open::new(4_200_000_000, 90, Ipv4Addr::new(1, 2, 3, 4), vec![]);
    assert_eq!(o.my_as, AS_TRANS);
    assert_eq!(o.asn(), 4_200_000_000);
    assert_eq!(
        Open::new(65000, 90, Ipv4Addr::LOCALHOST, vec![]).my_as,
        65000
    );
}

#[test]
fn an_open_without_multiprotocol_means_ipv4_only() {
    let o = Open {
        my_as: 1,
        hold_time: 90,
        router_id: Ipv4Addr::new(1, 1, 1, 1),
        capabilities: vec![],
    };
    assert_eq!(o.families(), vec![Afi::Ipv4]);
    let o = Open::new(
        1,
        90,
        Ipv4Addr::new(1, 1, 1, 1),
        vec![Capability::Multiprotocol { afi: 2, safi: 1 }],
    );
    assert_eq!(o.families(), vec![Afi::Ipv6]);
}

/// An announcement of 192.0.2.0/24 in the bytes RFC 4271 prescribes.
#[test]
fn encodes_an_ipv4_announcement_byte_for_byte() {
    let u = Update {
        withdrawn: vec![],
        attributes: Attributes {
            origin: Some(Origin::Igp),
            as_path: Some(vec![AsSegment::sequence(vec![64512])]),
            next_hop: Some(Ipv4Addr::new(10, 0, 0, 1)),
            local_pref: Some(100),
            communities: vec![(64512 << 16) | 100],
            ..Default::default()
        },
        nlri: vec!["192.0.2.0/24".parse().expect("net")],
    };
    let bytes = encode(&Message::Update(u), &FOUR);
    let body = &bytes[HEADER_LEN..];
    #[rustfmt::skip]
    let want = [
        0, 0, // no withdrawn
        0, 34, // attributes
        0x40, 1, 1, 0, // ORIGIN IGP
        0x40, 2, 6, 2, 1, 0, 0, 0xfc, 0, // AS_PATH sequence [64512]
        0x40, 3, 4, 10, 0, 0, 1, // NEXT_HOP
        0x40, 5, 4, 0, 0, 0, 100, // LOCAL_PREF
        0xc0, 8, 4, 0xfc, 0, 0, 100, // COMMUNITIES 64512:100
        24, 192, 0, 2, // NLRI
    ];
    assert_eq!(body, want);
}

fn attr_update(attr: &[u8], nlri: &[u8]) -> Vec<u8> {
    let mut body = vec![0, 0];
    body.extend_from_slice(&(attr.len() as u16).to_be_bytes());
    body.extend_from_slice(attr);
    body.extend_from_slice(nlri);
    frame(2, &body)
}

/// ORIGIN IGP, an empty AS_PATH, NEXT_HOP 10.0.0.1.
const WELL_KNOWN: [u8; 14] = [0x40, 1, 1, 0, 0x40, 2, 0, 0x40, 3, 4, 10, 0, 0, 1];

fn with_well_known(extra: &[u8]) -> Vec<u8> {
    let mut a = WELL_KNOWN.to_vec();
    a.extend_from_slice(extra);
    attr_update(&a, &[24, 192, 0, 2])
}

/// Malformed messages and the NOTIFICATION each must produce (RFC 4271
/// section 6, RFC 6793, RFC 4760).
#[rstest]
#[case::marker_not_ones({ let mut m = encode(&Message::Keepalive, &TWO); m[3] = 0; m }, (1, 1))]
#[case::length_below_header({ let mut m = encode(&Message::Keepalive, &TWO); m[17] = 18; m }, (1, 2))]
#[case::keepalive_with_a_body(frame(4, &[0]), (1, 2))]
#[case::length_above_4096({ let mut m = frame(2, &[0; 4]); m[16] = 0x10; m[17] = 1; m }, (1, 2))]
#[case::open_too_short(frame(1, &[4, 0, 1]), (1, 2))]
#[case::unknown_type(frame(9, &[]), (1, 3))]
#[case::open_version_3(frame(1, &[3, 0, 1, 0, 90, 1, 1, 1, 1, 0]), (2, 1))]
#[case::open_hold_time_2(frame(1, &[4, 0, 1, 0, 2, 1, 1, 1, 1, 0]), (2, 6))]
#[case::open_router_id_zero(frame(1, &[4, 0, 1, 0, 90, 0, 0, 0, 0, 0]), (2, 3))]
#[case::open_unknown_parameter(frame(1, &[4, 0, 1, 0, 90, 1, 1, 1, 1, 3, 1, 1, 0]), (2, 4))]
#[case::open_parameters_overrun(frame(1, &[4, 0, 1, 0, 90, 1, 1, 1, 1, 9, 2, 6, 1]), (2, 0))]
#[case::open_bad_4_octet_capability(frame(1, &[4, 0, 1, 0, 90, 1, 1, 1, 1, 5, 2, 3, 65, 1, 0]), (2, 0))]
#[case::open_graceful_restart_length_3(frame(1, &[4, 0, 1, 0, 90, 1, 1, 1, 1, 7, 2, 5, 64, 3, 0, 120, 0]), (2, 0))]
#[case::update_withdrawn_overrun(frame(2, &[0, 9, 0, 0]), (3, 1))]
#[case::update_attributes_overrun(frame(2, &[0, 0, 0, 9]), (3, 1))]
#[case::attribute_value_overrun(attr_update(&[0x40, 1, 5, 0], &[]), (3, 1))]
#[case::duplicate_attribute(attr_update(&[0x40, 1, 1, 0, 0x40, 1, 1, 0], &[]), (3, 1))]
#[case::unknown_well_known(attr_update(&[0x40, 99, 0], &[]), (3, 2))]
#[case::missing_origin(attr_update(&WELL_KNOWN[4..14], &[24, 192, 0, 2]), (3, 3))]
#[case::missing_next_hop(attr_update(&WELL_KNOWN[..7], &[24, 192, 0, 2]), (3, 3))]
#[case::origin_flagged_optional(attr_update(&[0xc0, 1, 1, 0], &[]), (3, 4))]
#[case::communities_flagged_well_known(with_well_known(&[0x40, 8, 4, 0, 0, 0, 1]), (3, 4))]
#[case::origin_length_2(attr_update(&[0x40, 1, 2, 0, 0], &[]), (3, 5))]
#[case::communities_length_3(with_well_known(&[0xc0, 8, 3, 0, 0, 1]), (3, 5))]
#[case::large_community_length_8(with_well_known(&[0xc0, 32, 8, 0, 0, 0, 1, 0, 0, 0, 2]), (3, 5))]
#[case::origin_7(attr_update(&[0x40, 1, 1, 7], &[]), (3, 6))]
#[case::next_hop_zero(attr_update(&[0x40, 3, 4, 0, 0, 0, 0], &[]), (3, 8))]
#[case::next_hop_multicast(attr_update(&[0x40, 3, 4, 224, 0, 0, 1], &[]), (3, 8))]
#[case::mp_reach_unknown_afi(with_well_known(&[0x80, 14, 5, 0, 9, 1, 0, 0]), (3, 9))]
#[case::mp_reach_next_hop_length_5(with_well_known(&[0x80, 14, 10, 0, 2, 1, 5, 1, 2, 3, 4, 5, 0]), (3, 9))]
#[case::mp_reach_prefix_129(with_well_known(&[0x80, 14, 22, 0, 2, 1, 16, 0xfc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 129]), (3, 9))]
#[case::nlri_prefix_33(attr_update(&WELL_KNOWN, &[33, 1, 2, 3, 4, 5]), (3, 10))]
#[case::nlri_truncated(attr_update(&WELL_KNOWN, &[24, 1]), (3, 10))]
#[case::as_path_segment_type_9(attr_update(&[0x40, 2, 4, 9, 1, 0, 1], &[]), (3, 11))]
#[case::as_path_count_overrun(attr_update(&[0x40, 2, 4, 2, 5, 0, 1], &[]), (3, 11))]
#[case::as_path_empty_segment(attr_update(&[0x40, 2, 2, 2, 0], &[]), (3, 11))]
fn malformed_messages_get_the_right_notification(#[case] bytes: Vec<u8>, #[case] want: (u8, u8)) {
    let got = decode(&bytes, &TWO).expect_err("malformed message decoded");
    assert_eq!((got.code, got.subcode), want, "{got}");
}

/// RFC 7606: what a session reads from a peer. Every malformed UPDATE
/// of [`malformed_messages_get_the_right_notification`] whose
/// withdrawn routes and attribute list fit in the message is read as an
/// (empty) UPDATE - treat-as-withdraw or attribute-discard, with no
/// routes kept - never a NOTIFICATION that would reset the session.
#[rstest]
#[case::attribute_value_overrun(attr_update(&[0x40, 1, 5, 0], &[]))]
#[case::duplicate_attribute(attr_update(&[0x40, 1, 1, 0, 0x40, 1, 1, 0], &[]))]
#[case::unknown_well_known(attr_update(&[0x40, 99, 0], &[]))]
#[case::missing_origin(attr_update(&WELL_KNOWN[4..14], &[24, 192, 0, 2]))]
#[case::missing_next_hop(attr_update(&WELL_KNOWN[..7], &[24, 192, 0, 2]))]
#[case::origin_flagged_optional(attr_update(&[0xc0, 1, 1, 0], &[]))]
#[case::communities_flagged_well_known(with_well_known(&[0x40, 8, 4, 0, 0, 0, 1]))]
#[case::origin_length_2(attr_update(&[0x40, 1, 2, 0, 0], &[]))]
#[case::communities_length_3(with_well_known(&[0xc0, 8, 3, 0, 0, 1]))]
#[case::large_community_length_8(with_well_known(&[0xc0, 32, 8, 0, 0, 0, 1, 0, 0, 0, 2]))]
#[case::origin_7(attr_update(&[0x40, 1, 1, 7], &[]))]
#[case::next_hop_zero(attr_update(&[0x40, 3, 4, 0, 0, 0, 0], &[]))]
#[case::mp_reach_unknown_afi(with_well_known(&[0x80, 14, 5, 0, 9, 1, 0, 0]))]
#[case::mp_reach_next_hop_length_5(with_well_known(&[0x80, 14, 10, 0, 2, 1, 5, 1, 2, 3, 4, 5, 0]))]
#[case::mp_reach_prefix_129(with_well_known(&[0x80, 14, 22, 0, 2, 1, 16, 0xfc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 129]))]
#[case::as4_path_garbage(with_well_known(&[0xc0, 17, 3, 2, 9, 0]))]
#[case::aggregator_length_3(with_well_known(&[0xc0, 7, 3, 0, 0, 1]))]
#[case::nlri_prefix_33(attr_update(&WELL_KNOWN, &[33, 1, 2, 3, 4, 5]))]
#[case::nlri_truncated(attr_update(&WELL_KNOWN, &[24, 1]))]
#[case::as_path_segment_type_9(attr_update(&[0x40, 2, 4, 9, 1, 0, 1], &[]))]
fn received_malformed_updates_never_reset_the_session(#[case] bytes: Vec<u8>) {
    assert!(
        decode(&bytes, &TWO).is_err(),
        "the strict decoder accepts it"
    );
    assert_eq!(
        decode_received(&bytes, &TWO),
        Ok(Message::Update(Update::default()))
    );
}

/// RFC 7606 section 4: when the withdrawn routes or the attribute list
/// overrun the UPDATE, nothing in it can be located: session reset.
/// Header errors stay session errors too.
#[rstest]
#[case::update_withdrawn_overrun(frame(2, &[0, 9, 0, 0]), (3, 1))]
#[case::update_attributes_overrun(frame(2, &[0, 0, 0, 9]), (3, 1))]
#[case::update_attributes_overrun_by_one(frame(2, &[0, 0, 0, 1]), (3, 1))]
#[case::length_above_4096({ let mut m = frame(2, &[0; 4]); m[16] = 0x10; m[17] = 1; m }, (1, 2))]
#[case::update_too_short(frame(2, &[0, 0, 0]), (1, 2))]
#[case::open_version_3(frame(1, &[3, 0, 1, 0, 90, 1, 1, 1, 1, 0]), (2, 1))]
fn received_unframeable_messages_still_reset(#[case] bytes: Vec<u8>, #[case] want: (u8, u8)) {
    let got = decode_received(&bytes, &TWO).expect_err("unframeable message read");
    assert_eq!((got.code, got.subcode), want, "{got}");
}

#[test]
fn received_messages_other_than_updates_decode_fully() {
    for m in [
        Message::Keepalive,
        Message::RouteRefresh { afi: 1, safi: 1 },
        Message::Notification(Notification::new(6, 2, [])),
    ] {
        assert_eq!(decode_received(&encode(&m, &FOUR), &FOUR), Ok(m));
    }
    // A well-formed UPDATE is read, not decoded.
    let valid = with_well_known(&[]);
    assert!(decode(&valid, &TWO).is_ok());
    assert_eq!(
        decode_received(&valid, &TWO),
        Ok(Message::Update(Update::default()))
    );
}

proptest! {
    /// Whatever a peer sends, reading it does not panic, and an UPDATE
    /// is only refused when its two length fields overrun it.
    #[test]
    fn received_bytes_never_panic(kind in 1u8..=6, body in prop::collection::vec(any::<u8>(), 0..200)) {
        let bytes = frame(kind, &body);
        let got = decode_received(&bytes, &TWO);
        if kind == 2 && body.len() >= 4 {
            let withdrawn = usize::from(u16::from_be_bytes([body[0], body[1]]));
            let fits = body.len() >= 4 + withdrawn
                && body.len() >= 4 + withdrawn + usize::from(u16::from_be_bytes([body[2 + withdrawn], body[3 + withdrawn]]));
            prop_assert_eq!(got.is_ok(), fits);
        }
    }
}

#[test]
fn attribute_errors_carry_the_attribute() {
    let got = decode(&attr_update(&[0x40, 1, 1, 7], &[]), &TWO).expect_err("origin 7");
    assert_eq!(got.data, vec![0x40, 1, 1, 7]);
    let got = decode(&frame(9, &[]), &TWO).expect_err("type 9");
    assert_eq!(got.data, vec![9]);
    assert_eq!(
        got.to_string(),
        "message header error: bad message type (1/3) data 09"
    );
}

#[test]
fn two_octet_sessions_read_two_octet_as_paths() {
    let a = attr_update(
        &[
            0x40, 1, 1, 0, 0x40, 2, 6, 2, 2, 0xfd, 0xe8, 0x5b, 0xa0, 0x40, 3, 4, 10, 0, 0, 1,
        ],
        &[8, 10],
    );
    let Ok(Message::Update(u)) = decode(&a, &TWO) else {
        panic!("not an UPDATE");
    };
    assert_eq!(
        u.attributes.as_path,
        Some(vec![AsSegment::sequence(vec![65000, AS_TRANS.into()])])
    );
    assert_eq!(u.nlri, vec!["10.0.0.0/8".parse::<Ipv4Net>().expect("net")]);
    // The same bytes read as 4-octet ASes: one AS, 0xfde85ba0, twice the
    // length it claims - a malformed path.
    assert!(decode(&a, &FOUR).is_err());
}

#[test]
fn bits_past_the_prefix_length_are_ignored() {
    let Ok(Message::Update(u)) = decode(&with_well_known(&[]), &TWO) else {
        panic!("not an UPDATE");
    };
    assert_eq!(
        u.nlri,
        vec!["192.0.2.0/24".parse::<Ipv4Net>().expect("net")]
    );
    let loose = attr_update(&WELL_KNOWN, &[20, 10, 1, 0xff]);
    let Ok(Message::Update(u)) = decode(&loose, &TWO) else {
        panic!("not an UPDATE");
    };
    assert_eq!(
        u.nlri,
        vec!["10.1.240.0/20".parse::<Ipv4Net>().expect("net")]
    );
}

#[test]
fn prefix_wire_lengths() {
    for (net, len) in [
        ("0.0.0.0/0", 1),
        ("10.0.0.1/32", 5),
        ("10.0.0.0/9", 3),
        ("fc00::1/128", 17),
        ("fc00::/124", 17),
    ] {
        assert_eq!(prefix_wire_len(&net.parse().expect("net")), len, "{net}");
    }
}

fn graceful_restart(
    restarting: bool,
    notification: bool,
    restart_time: u16,
    families: &[(u16, u8, bool)],
) -> GracefulRestart {
    GracefulRestart {
        restarting,
        notification,
        restart_time,
        families: families
            .iter()
            .map(|&(afi, safi, forwarding_preserved)| GracefulRestartFamily {
                afi,
                safi,
                forwarding_preserved,
            })
            .collect(),
    }
}

/// Families for the round trip: one without the F bit, one with, and one
/// this speaker does not carry (L2VPN EVPN).
const GR_FAMILIES: [(u16, u8, bool); 3] = [(1, 1, false), (2, 1, true), (25, 70, true)];

/// Every combination of the R and N bits, restart times at both ends of
/// the 12 bits, and no, one or several families come back as sent.
#[rstest]
fn graceful_restart_round_trips(
    #[values(false, true)] restarting: bool,
    #[values(false, true)] notification: bool,
    #[values(0, 120, 4095)] restart_time: u16,
    #[values(0, 1, 2, 3)] family_count: usize,
) {
    let families = &GR_FAMILIES[..family_count];
    let gr = graceful_restart(restarting, notification, restart_time, families);
    let open = Open::new(
        64512,
        90,
        Ipv4Addr::new(10, 0, 0, 1),
        vec![Capability::GracefulRestart(gr.clone())],
    );
    let Ok(Message::Open(back)) = decode(&encode(&Message::Open(open), &FOUR), &FOUR) else {
        panic!("not an OPEN");
    };
    assert_eq!(back.graceful_restart(), Some(&gr));
}

/// The capability laid out as RFC 4724 section 3 draws it: restart time
/// 120 with the R bit, IPv4 and IPv6 unicast both with the F bit.
#[test]
fn decodes_and_encodes_the_rfc_4724_layout() {
    #[rustfmt::skip]
    let body = [
        4, 0xfc, 0x00, 0, 90, 10, 0, 0, 2, 14, //
        2, 12, 64, 10, // one capability: graceful restart, 10 octets
        0x80, 120, // R bit, restart time 120
        0, 1, 1, 0x80, // IPv4 unicast, F bit
        0, 2, 1, 0x80, // IPv6 unicast, F bit
    ];
    let want = graceful_restart(true, false, 120, &[(1, 1, true), (2, 1, true)]);
    let Ok(Message::Open(o)) = decode(&frame(1, &body), &TWO) else {
        panic!("not an OPEN");
    };
    assert_eq!(o.graceful_restart(), Some(&want));
    assert_eq!(encode(&Message::Open(o), &TWO), frame(1, &body));
}

/// Reserved bits are ignored on receipt; a restart time past 12 bits is
/// clamped, never spilling into the R and N bits.
#[test]
fn graceful_restart_reserved_bits_and_clamping() {
    let value = [0x30 | 0x01, 0x2c, 0, 1, 1, 0x7f];
    let body = [
        &[4, 0, 1, 0, 90, 1, 1, 1, 1, 10, 2, 8, 64, 6][..],
        &value[..],
    ]
    .concat();
    let Ok(Message::Open(o)) = decode(&frame(1, &body), &TWO) else {
        panic!("not an OPEN");
    };
    assert_eq!(
        o.graceful_restart(),
        Some(&graceful_restart(false, false, 300, &[(1, 1, false)]))
    );
    let big = Open {
        my_as: 1,
        hold_time: 90,
        router_id: Ipv4Addr::new(1, 1, 1, 1),
        capabilities: vec![Capability::GracefulRestart(graceful_restart(
            false,
            false,
            5000,
            &[],
        ))],
    };
    let bytes = encode(&Message::Open(big), &TWO);
    assert_eq!(&bytes[bytes.len() - 2..], &[0x0f, 0xff]);
    let Ok(Message::Open(o)) = decode(&bytes, &TWO) else {
        panic!("not an OPEN");
    };
    assert_eq!(
        o.graceful_restart(),
        Some(&graceful_restart(false, false, 4095, &[]))
    );
}

/// End-of-RIB markers (RFC 4724 section 2): IPv4 unicast is the empty
/// UPDATE, 19 header octets and two zero lengths; other families carry an
/// empty MP_UNREACH_NLRI. Each survives the wire and is recognised.
#[rstest]
#[case::ipv4_unicast(Afi::Ipv4, 1, &[0, 0, 0, 0][..])]
#[case::ipv6_unicast(Afi::Ipv6, 1, &[0, 0, 0, 6, 0x80, 15, 3, 0, 2, 1][..])]
#[case::ipv4_multicast(Afi::Ipv4, 2, &[0, 0, 0, 6, 0x80, 15, 3, 0, 1, 2][..])]
fn end_of_rib_markers(#[case] afi: Afi, #[case] safi: u8, #[case] want: &[u8]) {
    let marker = Update::end_of_rib_marker(afi, safi);
    assert_eq!(marker.end_of_rib(), Some((afi, safi)));
    let bytes = encode(&Message::Update(marker.clone()), &FOUR);
    assert_eq!(bytes.len(), HEADER_LEN + want.len());
    assert_eq!(&bytes[HEADER_LEN..], want);
    let Ok(Message::Update(back)) = decode(&bytes, &FOUR) else {
        panic!("not an UPDATE");
    };
    assert_eq!(back, marker);
    assert_eq!(back.end_of_rib(), Some((afi, safi)));
}

#[test]
fn the_ipv4_unicast_end_of_rib_is_23_octets() {
    let bytes = encode(
        &Message::Update(Update::end_of_rib_marker(Afi::Ipv4, SAFI_UNICAST)),
        &TWO,
    );
    assert_eq!(bytes.len(), 23);
    assert_eq!(&bytes[16..], &[0, 23, 2, 0, 0, 0, 0]);
}

/// UPDATEs carrying anything besides an empty MP_UNREACH_NLRI are not
/// End-of-RIB, whatever else they lack.
#[rstest]
#[case::ipv4_announcement(with_well_known(&[]))]
#[case::ipv4_withdrawal(frame(2, &[0, 4, 24, 192, 0, 2, 0, 0]))]
#[case::ipv6_withdrawal(attr_update(&[0x80, 15, 6, 0, 2, 1, 16, 0x20, 0x01], &[]))]
#[case::empty_unreach_with_a_community(attr_update(&[0x80, 15, 3, 0, 2, 1, 0xc0, 8, 4, 0, 0, 0, 1], &[]))]
#[case::community_alone(attr_update(&[0xc0, 8, 4, 0, 0, 0, 1], &[]))]
fn ordinary_updates_are_not_end_of_rib(#[case] bytes: Vec<u8>) {
    let Ok(Message::Update(u)) = decode(&bytes, &FOUR) else {
        panic!("not an UPDATE");
    };
    assert_eq!(u.end_of_rib(), None);
}
