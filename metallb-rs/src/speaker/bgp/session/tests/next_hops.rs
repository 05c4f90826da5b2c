//! The next hops a session's routes carry, from its connection's local
//! address, whether it is unnumbered and what the peer offered.

use super::*;

/// `local` the connection's local address; `peer` the peer's OPEN as
/// [`theirs`] reads it.
fn check(unnumbered: bool, local: &str, peer: &str) -> String {
    let mut cfg = cfg(PeerAsn::Fixed(64513), None);
    cfg.node_v4 = Some("10.0.0.9".parse().expect("ip"));
    cfg.node_v6 = Some("fc00::9".parse().expect("ip"));
    if unnumbered {
        cfg.dial.peer = Remote::Interface {
            name: "eth1".into(),
            port: 179,
        };
    }
    let local: IpAddr = local.parse().expect("ip");
    let ours = our_open(&cfg, local, PeerHistory::NeverEstablished);
    let offered = ours.extended_next_hop(crate::net::bgp::ExtendedNextHop::IPV4_OVER_IPV6);
    let n = negotiate(&cfg, &ours, &theirs(peer)).expect("negotiates");
    let s = negotiate::shape(&cfg, local, &n);
    let v4 = match s.next_hop_v4 {
        Some(V4NextHop::Ipv4(a)) => a.to_string(),
        Some(V4NextHop::Ipv6(a)) => format!("{a} (extended)"),
        None => "-".into(),
    };
    let v6 = s.next_hop_v6.map_or("-".into(), |a| a.to_string());
    format!("offered={offered} v4={v4} v6={v6}")
}

#[rstest]
#[case::numbered_v4(
    false,
    "10.0.0.1",
    "64513 90 10.0.0.2 v4 v6",
    "offered=false v4=10.0.0.1 v6=fc00::9"
)]
#[case::numbered_v6(
    false,
    "fc00::1",
    "64513 90 10.0.0.2 v4 v6",
    "offered=false v4=10.0.0.9 v6=fc00::1"
)]
#[case::numbered_link_local(
    false,
    "fe80::1",
    "64513 90 10.0.0.2 v4 v6 enhe",
    "offered=false v4=10.0.0.9 v6=fc00::9"
)]
#[case::unnumbered(
    true,
    "fe80::1",
    "64513 90 10.0.0.2 v4 v6 enhe",
    "offered=true v4=fe80::1 (extended) v6=fe80::1"
)]
#[case::unnumbered_peer_without_enhe(
    true,
    "fe80::1",
    "64513 90 10.0.0.2 v4 v6",
    "offered=true v4=10.0.0.9 v6=fe80::1"
)]
#[case::unnumbered_ipv4_only_peer(
    true,
    "fe80::1",
    "64513 90 10.0.0.2 v4 enhe",
    "offered=true v4=fe80::1 (extended) v6=-"
)]
fn next_hops(
    #[case] unnumbered: bool,
    #[case] local: &str,
    #[case] peer: &str,
    #[case] want: &str,
) {
    assert_eq!(check(unnumbered, local, peer), want);
}
