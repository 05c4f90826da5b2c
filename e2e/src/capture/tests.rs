//! Segments built by hand (Ethernet, IPv4/IPv6, TCP) around messages
//! encoded with the speaker's own codec.

use super::*;
use metallb_rs::net::bgp::{AsSegment, Attributes, Origin, Update};
use metallb_rs::net::ethernet::{self, Mac};

const NODE: &str = "172.30.0.3";
const ROUTER: &str = "172.30.0.2";
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

/// A frame carrying a TCP segment (checksums left zero: nothing here
/// reads them).
fn frame(src: SocketAddr, dst: SocketAddr, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut tcp = Vec::new();
    tcp.extend_from_slice(&src.port().to_be_bytes());
    tcp.extend_from_slice(&dst.port().to_be_bytes());
    tcp.extend_from_slice(&seq.to_be_bytes());
    tcp.extend_from_slice(&[0, 0, 0, 0, 5 << 4, flags, 0xff, 0xff, 0, 0, 0, 0]);
    tcp.extend_from_slice(payload);
    let (ethertype, packet) = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = u16::try_from(20 + tcp.len()).expect("small");
            let mut p = vec![0x45, 0];
            p.extend_from_slice(&total.to_be_bytes());
            p.extend_from_slice(&[0, 0, 0x40, 0, 64, TCP, 0, 0]);
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&tcp);
            (ETHERTYPE_IPV4, p)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let len = u16::try_from(tcp.len()).expect("small");
            let mut p = vec![0x60, 0, 0, 0];
            p.extend_from_slice(&len.to_be_bytes());
            p.extend_from_slice(&[TCP, 64]);
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&tcp);
            (ETHERTYPE_IPV6, p)
        }
        _ => panic!("mixed families"),
    };
    ethernet::build(
        Mac([2, 0, 0, 0, 0, 2]),
        Mac([2, 0, 0, 0, 0, 1]),
        ethertype,
        &packet,
    )
}

fn segment(
    src: SocketAddr,
    dst: SocketAddr,
    seq: u32,
    flags: u8,
    payload: &[u8],
    ms: u64,
) -> Segment {
    parse_segment(
        &frame(src, dst, seq, flags, payload),
        bgp::PORT,
        Duration::from_millis(ms),
    )
    .expect("a BGP segment")
}

fn encode(msg: &Message) -> Vec<u8> {
    bgp::encode(
        msg,
        &bgp::Context {
            four_octet_as: true,
        },
    )
}

fn update(local_pref: Option<u32>) -> Message {
    Message::Update(Update {
        withdrawn: vec![],
        attributes: Attributes {
            origin: Some(Origin::Igp),
            as_path: Some(vec![AsSegment::sequence(vec![64513])]),
            next_hop: Some(NODE.parse().expect("v4")),
            local_pref,
            ..Attributes::default()
        },
        nlri: vec!["192.168.10.0/32".parse().expect("net")],
    })
}

#[test]
fn parses_ipv4_and_ipv6_segments_of_the_bgp_port_only() {
    let (node, router) = (
        SocketAddr::new(ip(NODE), 40000),
        SocketAddr::new(ip(ROUTER), 179),
    );
    let s = segment(node, router, 7, SYN, &[], 3);
    assert_eq!(
        (s.src, s.dst, s.seq, s.syn, s.ack),
        (node, router, 7, true, false)
    );
    assert_eq!(s.at, Duration::from_millis(3));
    let v6 = (
        SocketAddr::new(ip("fc00::3"), 179),
        SocketAddr::new(ip("fc00::2"), 40001),
    );
    let s = segment(v6.0, v6.1, 9, ACK, b"data", 0);
    assert_eq!(
        (s.src, s.dst, s.payload.as_slice()),
        (v6.0, v6.1, &b"data"[..])
    );
    let other_port = SocketAddr::new(ip(ROUTER), 80);
    assert_eq!(
        parse_segment(
            &frame(node, other_port, 1, ACK, b"x"),
            bgp::PORT,
            Duration::ZERO
        ),
        None
    );
    assert_eq!(parse_segment(&[0u8; 20], bgp::PORT, Duration::ZERO), None);
}

#[test]
fn reassembles_each_direction_and_decodes_messages() {
    let (node, router) = (
        SocketAddr::new(ip(NODE), 40000),
        SocketAddr::new(ip(ROUTER), 179),
    );
    let open = Message::Open(Open::new(64513, 9, NODE.parse().expect("v4"), vec![]));
    let cease = Message::Notification(bgp::Notification::new(
        bgp::code::CEASE,
        bgp::code::CEASE_ADMIN_SHUTDOWN,
        [],
    ));
    let mut bytes = encode(&open);
    bytes.extend(encode(&update(Some(300))));
    bytes.extend(encode(&cease));
    let (a, b) = bytes.split_at(40);
    let isn = 1000u32;
    let after = |n: usize| isn + 1 + u32::try_from(n).expect("small");
    let router_open = encode(&Message::Open(Open::new(
        64512,
        9,
        ROUTER.parse().expect("v4"),
        vec![],
    )));
    let segments = vec![
        segment(node, router, isn, SYN, &[], 0),
        segment(router, node, 5000, SYN | ACK, &[], 1),
        // Out of order, and the first part retransmitted.
        segment(node, router, after(40), ACK, b, 5),
        segment(node, router, after(0), ACK, a, 4),
        segment(node, router, after(0), ACK, a, 6),
        segment(router, node, 5001, ACK, &router_open, 2),
    ];
    let seen = messages(&segments, ip(NODE), ip(ROUTER));
    let msgs: Vec<&Message> = seen.iter().map(|s| &s.msg).collect();
    assert_eq!(msgs, [&open, &update(Some(300)), &cease]);
    // Each message is dated by the segment that completed it.
    assert_eq!(seen[0].at, Duration::from_millis(4));
    assert_eq!(seen[2].at, Duration::from_millis(5));
    assert!(seen.iter().all(|s| s.src == node && s.dst == router));
    // The other direction holds the router's OPEN only.
    let back = messages(&segments, ip(ROUTER), ip(NODE));
    assert_eq!(back.len(), 1);
    assert!(matches!(&back[0].msg, Message::Open(o) if o.asn() == 64512));

    // A missing segment stops decoding at the gap.
    let gap: Vec<Segment> = segments
        .iter()
        .filter(|s| s.seq != after(0))
        .cloned()
        .collect();
    assert!(messages(&gap, ip(NODE), ip(ROUTER)).is_empty());
}
