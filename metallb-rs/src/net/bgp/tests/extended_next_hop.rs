//! RFC 8950 on the wire: the extended next hop capability, and IPv4
//! prefixes in MP_REACH_NLRI / MP_UNREACH_NLRI with an IPv6 next hop of
//! 16 octets (link-local alone) or 32 (global and link-local).

use super::*;

fn ll() -> Ipv6Addr {
    "fe80::1".parse().expect("ip")
}

/// The capability as FRR sends it for `neighbor X interface`: one tuple,
/// IPv4 unicast over IPv6, in a parameter of its own.
#[test]
fn encodes_and_decodes_the_capability_byte_for_byte() {
    let open = Open::new(
        64512,
        90,
        Ipv4Addr::new(10, 0, 0, 1),
        vec![Capability::ExtendedNextHop(vec![
            ExtendedNextHop::IPV4_OVER_IPV6,
        ])],
    );
    let bytes = encode(&Message::Open(open.clone()), &FOUR);
    #[rustfmt::skip]
    let want = [
        4, 0xfc, 0x00, 0, 90, 10, 0, 0, 1, 18, // version, AS, hold, id, params
        2, 8, 5, 6, 0, 1, 0, 1, 0, 2, // extended next hop: AFI 1, SAFI 1, next hop AFI 2
        2, 6, 65, 4, 0, 0, 0xfc, 0x00, // 4-octet AS 64512
    ];
    assert_eq!(&bytes[HEADER_LEN..], want);
    let Ok(Message::Open(back)) = decode(&bytes, &FOUR) else {
        panic!("not an OPEN");
    };
    assert_eq!(back, open);
    assert!(back.extended_next_hop(ExtendedNextHop::IPV4_OVER_IPV6));
}

/// Only the exact tuple counts: IPv6 next hops for IPv4 multicast, or
/// IPv4 unicast over some other family, do not let us send IPv4 unicast
/// with an IPv6 next hop.
#[rstest]
#[case::ipv4_unicast_over_ipv6(&[0, 1, 0, 1, 0, 2], true)]
#[case::after_another_tuple(&[0, 1, 0, 2, 0, 2, 0, 1, 0, 1, 0, 2], true)]
#[case::ipv4_multicast(&[0, 1, 0, 2, 0, 2], false)]
#[case::other_next_hop_family(&[0, 1, 0, 1, 0, 3], false)]
#[case::no_tuple(&[], false)]
fn reads_the_peers_tuples(#[case] value: &[u8], #[case] offered: bool) {
    let mut body = vec![4, 0xfc, 0x00, 0, 90, 10, 0, 0, 2];
    let len = u8::try_from(value.len()).expect("short");
    body.extend_from_slice(&[len + 4, 2, len + 2, 5, len]);
    body.extend_from_slice(value);
    let Ok(Message::Open(o)) = decode(&frame(1, &body), &FOUR) else {
        panic!("not an OPEN");
    };
    assert_eq!(
        o.extended_next_hop(ExtendedNextHop::IPV4_OVER_IPV6),
        offered
    );
}

/// A value that is not whole 6-octet tuples is a malformed OPEN.
#[rstest]
#[case::five_octets(&[0, 1, 0, 1, 0])]
#[case::seven_octets(&[0, 1, 0, 1, 0, 2, 0])]
fn a_truncated_capability_is_malformed(#[case] value: &[u8]) {
    let mut body = vec![4, 0xfc, 0x00, 0, 90, 10, 0, 0, 2];
    let len = u8::try_from(value.len()).expect("short");
    body.extend_from_slice(&[len + 4, 2, len + 2, 5, len]);
    body.extend_from_slice(value);
    let Err(n) = decode(&frame(1, &body), &FOUR) else {
        panic!("accepted");
    };
    assert_eq!((n.code, n.subcode), (code::OPEN, code::UNSPECIFIC));
}

fn v4_reach(next_hops: Vec<IpAddr>) -> Update {
    Update {
        attributes: Attributes {
            origin: Some(Origin::Igp),
            as_path: Some(vec![]),
            mp_reach: Some(MpReach {
                afi: 1,
                safi: 1,
                next_hops,
                nlri: vec!["192.168.10.5/32".parse().expect("net")],
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// 192.168.10.5/32 with the link-local next hop alone: 16 octets.
#[test]
fn ipv4_route_with_a_link_local_next_hop_byte_for_byte() {
    let u = v4_reach(vec![IpAddr::V6(ll())]);
    let bytes = encode(&Message::Update(u.clone()), &FOUR);
    #[rustfmt::skip]
    let want = [
        0, 0, // no withdrawn
        0, 36, // attributes
        0x40, 1, 1, 0, // ORIGIN IGP
        0x40, 2, 0, // AS_PATH empty (iBGP)
        0x80, 14, 26, // MP_REACH_NLRI
        0, 1, 1, // AFI 1, SAFI 1
        16, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // next hop fe80::1
        0, // reserved
        32, 192, 168, 10, 5, // 192.168.10.5/32
    ];
    assert_eq!(&bytes[HEADER_LEN..], want);
    assert_eq!(decode(&bytes, &FOUR), Ok(Message::Update(u)));
}

/// Global and link-local: 32 octets, the global first (RFC 2545).
#[test]
fn ipv4_route_with_global_and_link_local_next_hops_byte_for_byte() {
    let global: Ipv6Addr = "fc00::10".parse().expect("ip");
    let u = v4_reach(vec![IpAddr::V6(global), IpAddr::V6(ll())]);
    let bytes = encode(&Message::Update(u.clone()), &FOUR);
    let body = &bytes[HEADER_LEN..];
    // The attribute starts after ORIGIN and AS_PATH.
    let mp = &body[4 + 4 + 3..];
    let mut want = vec![0x80, 14, 42, 0, 1, 1, 32];
    want.extend_from_slice(&global.octets());
    want.extend_from_slice(&ll().octets());
    want.extend_from_slice(&[0, 32, 192, 168, 10, 5]);
    assert_eq!(mp, want);
    assert_eq!(decode(&bytes, &FOUR), Ok(Message::Update(u)));
}

/// An IPv4 withdrawal in MP_UNREACH_NLRI, as a peer using extended next
/// hops sends it.
#[test]
fn ipv4_withdrawal_in_mp_unreach_byte_for_byte() {
    let u = Update {
        attributes: Attributes {
            mp_unreach: Some(MpUnreach {
                afi: 1,
                safi: 1,
                withdrawn: vec!["192.168.10.5/32".parse().expect("net")],
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let bytes = encode(&Message::Update(u.clone()), &FOUR);
    let want = [0, 0, 0, 11, 0x80, 15, 8, 0, 1, 1, 32, 192, 168, 10, 5];
    assert_eq!(&bytes[HEADER_LEN..], want);
    assert_eq!(decode(&bytes, &FOUR), Ok(Message::Update(u)));
}
