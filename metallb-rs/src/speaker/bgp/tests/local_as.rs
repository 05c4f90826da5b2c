//! `localASN`: a table from the BGPPeer through the OPEN we send, the
//! negotiation with the peer's OPEN and the UPDATE we build, one line of
//! text per row; then one session against the fake router.

use super::*;
use crate::net::bgp::AsSegment;
use crate::speaker::bgp::session::{PeerHistory, negotiate, our_open};
use crate::speaker::bgp::updates::{Shape, V4NextHop, build};
use rstest::rstest;

fn peer(my_asn: u32, local_asn: Option<u32>, peer_asn: PeerAsn) -> Peer {
    Peer {
        my_asn,
        local_asn,
        router_id: Some(Ipv4Addr::new(10, 0, 0, 1)),
        ..Peer::example("p", "192.0.2.1".parse().expect("ip"), 179, peer_asn)
    }
}

fn path(p: &Option<Vec<AsSegment>>) -> String {
    match p {
        None => "-".into(),
        Some(segs) => format!(
            "[{}]",
            segs.iter()
                .flat_map(|s| s.asns.iter().map(u32::to_string))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// `open=<2-byte My AS>/<4-octet capability> ttl=..`, then what the peer's
/// OPEN (`asn [2octet]`) leads to: refused, or the shape of the UPDATE
/// announcing one route.
fn check(peer: &Peer, theirs: &str) -> String {
    let cfg = session_config(peer, NodeAddresses::default());
    let ours = our_open(
        &cfg,
        "10.0.0.1".parse().expect("ip"),
        PeerHistory::NeverEstablished,
    );
    let four = ours.capabilities.iter().find_map(|c| match c {
        Capability::FourOctetAs(a) => Some(*a),
        _ => None,
    });
    let head = format!(
        "open={}/{} ttl={}",
        ours.my_as,
        four.map_or("-".into(), |a| a.to_string()),
        cfg.dial.ttl
    );
    let mut words = theirs.split_whitespace();
    let asn: u32 = words.next().expect("asn").parse().expect("asn");
    let mut open = Open::new(
        asn,
        90,
        Ipv4Addr::new(10, 0, 0, 99),
        vec![Capability::Multiprotocol { afi: 1, safi: 1 }],
    );
    if words.next() == Some("2octet") {
        open.capabilities
            .retain(|c| !matches!(c, Capability::FourOctetAs(_)));
    }
    let n = match negotiate(&cfg, &ours, &open) {
        Ok(n) => n,
        Err(e) => return format!("{head} refused ({},{})", e.code, e.subcode),
    };
    let shape = Shape {
        my_asn: cfg.my_asn,
        ibgp: n.ibgp,
        four_octet_as: n.ctx.four_octet_as,
        next_hop_v4: Some(V4NextHop::Ipv4(Ipv4Addr::new(10, 0, 0, 1))),
        next_hop_v6: None,
    };
    let attrs = RouteAttrs::default();
    let net: IpNet = "192.168.10.5/32".parse().expect("net");
    let updates = build(&[(net, &attrs)], &[], &shape);
    let a = &updates[0].attributes;
    format!(
        "{head} ibgp={} as_path={} as4_path={} local_pref={}",
        n.ibgp,
        path(&a.as_path),
        path(&a.as4_path),
        a.local_pref.map_or("-".into(), |l| l.to_string())
    )
}

#[rstest]
#[case::without_local_asn_our_as(
    peer(64512, None, PeerAsn::Fixed(64600)),
    "64600",
    "open=64512/64512 ttl=1 ibgp=false as_path=[64512] as4_path=- local_pref=-"
)]
#[case::local_asn_replaces_my_asn(
    peer(64512, Some(65410), PeerAsn::Fixed(64600)),
    "64600",
    "open=65410/65410 ttl=1 ibgp=false as_path=[65410] as4_path=- local_pref=-"
)]
#[case::four_byte_local_asn_as_trans(
    peer(64512, Some(4_200_000_001), PeerAsn::Fixed(64600)),
    "64600",
    "open=23456/4200000001 ttl=1 ibgp=false as_path=[4200000001] as4_path=- local_pref=-"
)]
// The encoder writes AS_PATH's AS as AS_TRANS to a 2-octet peer.
#[case::four_byte_local_asn_to_a_2_octet_peer(
    peer(64512, Some(4_200_000_001), PeerAsn::Fixed(64600)),
    "64600 2octet",
    "open=23456/4200000001 ttl=1 ibgp=false as_path=[4200000001] as4_path=[4200000001] local_pref=-"
)]
#[case::peer_in_local_asn_is_ibgp(
    peer(64512, Some(65410), PeerAsn::Fixed(65410)),
    "65410",
    "open=65410/65410 ttl=255 ibgp=true as_path=[] as4_path=- local_pref=100"
)]
#[case::peer_in_my_asn_is_ebgp_under_local_asn(
    peer(64512, Some(65410), PeerAsn::Fixed(64512)),
    "64512",
    "open=65410/65410 ttl=1 ibgp=false as_path=[65410] as4_path=- local_pref=-"
)]
#[case::fixed_peer_as_still_checked(
    peer(64512, Some(65410), PeerAsn::Fixed(64600)),
    "65410",
    "open=65410/65410 ttl=1 refused (2,2)"
)]
#[case::dynamic_internal_is_the_local_asn(
    peer(64512, Some(65410), PeerAsn::Internal),
    "65410",
    "open=65410/65410 ttl=255 ibgp=true as_path=[] as4_path=- local_pref=100"
)]
#[case::dynamic_internal_refuses_my_asn(
    peer(64512, Some(65410), PeerAsn::Internal),
    "64512",
    "open=65410/65410 ttl=255 refused (2,2)"
)]
#[case::dynamic_external_refuses_the_local_asn(
    peer(64512, Some(65410), PeerAsn::External),
    "65410",
    "open=65410/65410 ttl=1 refused (2,2)"
)]
#[case::dynamic_external_takes_my_asn(
    peer(64512, Some(65410), PeerAsn::External),
    "64512",
    "open=65410/65410 ttl=1 ibgp=false as_path=[65410] as4_path=- local_pref=-"
)]
fn local_asn(#[case] peer: Peer, #[case] theirs: &str, #[case] want: &str) {
    assert_eq!(check(&peer, theirs), want);
}

/// Over TCP: the router sees the 4-byte localASN in the OPEN (AS_TRANS in
/// My AS) and as the only AS of the route's AS_PATH.
#[tokio::test]
async fn the_router_sees_the_local_asn() {
    let l = listener(None);
    let mut p = peer(64512, Some(4_200_000_001), PeerAsn::Fixed(64600));
    p.port = l.local_addr().expect("addr").port();
    p.address = crate::config::PeerAddress::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
    p.connect_time = Some(Duration::from_millis(200));
    let cfg = session_config(&p, NodeAddresses::default());
    let _s = Session::start(
        cfg,
        DesiredRoutes::new(table(&[("192.168.10.5/32", Some(150))])),
        BgpMetrics::new(&Registry::new()),
    );
    let mut p = FakePeer::accept(&l, 64600, 9).await;
    assert_eq!((p.open.my_as, p.open.asn()), (23456, 4_200_000_001));
    let u = p.update().await;
    assert_eq!(
        u.attributes.as_path,
        Some(vec![bgp::AsSegment::sequence(vec![4_200_000_001])])
    );
    assert_eq!(u.attributes.local_pref, None);
}
