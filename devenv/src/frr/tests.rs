//! The renderer against the exact text FRR gets, and the readers against
//! real FRR 8.4 output (`tests/fixtures/frr`, see its README) plus FRR 9's
//! `json detail` shape.

use super::*;
use std::collections::BTreeSet;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/frr/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn net(s: &str) -> IpNet {
    s.parse().expect("prefix")
}

fn nodes() -> Vec<IpAddr> {
    [
        "172.30.0.10",
        "fc00:f853:ccd:e793::10",
        "172.30.0.11",
        "fc00:f853:ccd:e793::11",
    ]
    .iter()
    .map(|a| ip(a))
    .collect()
}

#[test]
fn the_config_peers_per_family_with_ecmp_and_an_md5_password() {
    let config = RouterConfig::new("external", Some(Ipv4Addr::new(172, 30, 0, 2)), &nodes())
        .with_password(ip("172.30.0.11"), "s3cret")
        .expect("a neighbor");
    let expected = "\
frr defaults traditional
hostname external
log stdout informational
!
router bgp 64512
 bgp router-id 172.30.0.2
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 no bgp network import-check
 bgp graceful-restart
 neighbor 172.30.0.10 remote-as 64512
 neighbor 172.30.0.10 passive
 neighbor fc00:f853:ccd:e793::10 remote-as 64512
 neighbor fc00:f853:ccd:e793::10 passive
 neighbor 172.30.0.11 remote-as 64512
 neighbor 172.30.0.11 password s3cret
 neighbor 172.30.0.11 passive
 neighbor fc00:f853:ccd:e793::11 remote-as 64512
 neighbor fc00:f853:ccd:e793::11 passive
 !
 address-family ipv4 unicast
  maximum-paths 8
  maximum-paths ibgp 8
  neighbor 172.30.0.10 activate
  neighbor 172.30.0.10 next-hop-self
  neighbor 172.30.0.11 activate
  neighbor 172.30.0.11 next-hop-self
 exit-address-family
 !
 address-family ipv6 unicast
  maximum-paths 8
  maximum-paths ibgp 8
  neighbor fc00:f853:ccd:e793::10 activate
  neighbor fc00:f853:ccd:e793::10 next-hop-self
  neighbor fc00:f853:ccd:e793::11 activate
  neighbor fc00:f853:ccd:e793::11 next-hop-self
 exit-address-family
exit
!
line vty
!
";
    assert_eq!(frr_conf(&config).expect("renders"), expected);
}

#[test]
fn an_ebgp_multi_hop_router_names_the_speakers_as_and_allows_more_hops() {
    let v4: Vec<IpAddr> = nodes().into_iter().filter(IpAddr::is_ipv4).collect();
    let mut config =
        RouterConfig::new("ebgp-multi-hop", None, &v4).with_password_for_all("ebgp-test");
    config.asn = EXTERNAL_ASN;
    config.ebgp_multihop = true;
    let conf = frr_conf(&config).expect("renders");
    for line in [
        "router bgp 4200000000\n",
        " neighbor 172.30.0.10 remote-as 64512\n neighbor 172.30.0.10 ebgp-multihop\n neighbor 172.30.0.10 password ebgp-test\n",
        " neighbor 172.30.0.11 remote-as 64512\n neighbor 172.30.0.11 ebgp-multihop\n neighbor 172.30.0.11 password ebgp-test\n",
    ] {
        assert!(conf.contains(line), "{line:?} missing:\n{conf}");
    }
    // iBGP sessions are multi-hop already: no ebgp-multihop line.
    config.asn = ASN;
    assert!(
        !frr_conf(&config)
            .expect("renders")
            .contains("ebgp-multihop")
    );
}

#[test]
fn objects_carry_each_routers_password_port_and_multi_hop() {
    let router = BgpRouter {
        asn: EXTERNAL_ASN,
        port: 180,
        password: Some("ebgp-test".into()),
        multi_hop: true,
        ..BgpRouter::single("ebgp-multi-hop", &[ip("172.30.8.5")])
    };
    let objects = objects(
        "metallb-system",
        &[router],
        ("metallb-rs.dev/dev-env", "lab"),
    );
    crate::kind::validate(&objects).expect("valid config");
    let peer = objects
        .iter()
        .find(|o| o["kind"] == "BGPPeer")
        .expect("peer");
    assert_eq!(peer["metadata"]["name"], "ebgp-multi-hop-v4");
    assert_eq!(
        peer["spec"],
        json!({ "myASN": 64512, "peerASN": 4_200_000_000_u32, "peerAddress": "172.30.8.5",
                "peerPort": 180, "ebgpMultiHop": true, "password": "ebgp-test" })
    );
}

#[rstest::rstest]
#[case::ibgp_single_hop(ASN, 179, false, json!({ "myASN": 64512, "peerASN": 64512, "peerAddress": "172.30.0.2" }))]
#[case::ebgp_single_hop(EXTERNAL_ASN, 179, false, json!({ "myASN": 64512, "peerASN": 4_200_000_000_u32, "peerAddress": "172.30.0.2" }))]
#[case::ibgp_multi_hop(ASN, 180, true, json!({ "myASN": 64512, "peerASN": 64512, "peerAddress": "172.30.0.2", "peerPort": 180 }))]
#[case::ebgp_multi_hop(EXTERNAL_ASN, 180, true, json!({ "myASN": 64512, "peerASN": 4_200_000_000_u32, "peerAddress": "172.30.0.2", "peerPort": 180, "ebgpMultiHop": true }))]
fn peer_specs_follow_the_router(
    #[case] asn: u32,
    #[case] port: u16,
    #[case] multi_hop: bool,
    #[case] want: Value,
) {
    let router = BgpRouter {
        asn,
        port,
        multi_hop,
        ..BgpRouter::single("r", &[ip("172.30.0.2")])
    };
    assert_eq!(router.peer_spec(ip("172.30.0.2")), want);
}

#[test]
fn a_single_family_gets_only_its_address_family() {
    let v4: Vec<IpAddr> = nodes().into_iter().filter(IpAddr::is_ipv4).collect();
    let conf = frr_conf(&RouterConfig::new("r", None, &v4)).expect("renders");
    assert!(conf.contains("address-family ipv4 unicast"));
    assert!(!conf.contains("ipv6"), "{conf}");
    assert!(!conf.contains("router-id"), "FRR picks it: {conf}");
    let none = frr_conf(&RouterConfig::new("r", None, &[])).expect("renders");
    assert!(!none.contains("address-family"), "{none}");
}

#[rstest::rstest]
#[case::space("two words")]
#[case::empty("")]
#[case::comment("a!b")]
#[case::too_long(&"x".repeat(81))]
fn passwords_frr_cannot_read_as_one_word_are_refused(#[case] password: &str) {
    let config = RouterConfig::new("r", None, &nodes())
        .with_password(ip("172.30.0.10"), password)
        .expect("a neighbor");
    let err = frr_conf(&config).expect_err("refused");
    assert!(err.to_string().contains("neighbor 172.30.0.10"), "{err}");
}

#[test]
fn config_mistakes_are_refused() {
    let err = RouterConfig::new("r", None, &nodes())
        .with_password(ip("10.0.0.1"), "x")
        .expect_err("not a neighbor");
    assert!(err.to_string().contains("10.0.0.1"), "{err}");
    let twice = [ip("172.30.0.10"), ip("172.30.0.10")];
    assert!(frr_conf(&RouterConfig::new("r", None, &twice)).is_err());
    assert!(frr_conf(&RouterConfig::new("two words", None, &nodes())).is_err());
}

#[test]
fn objects_peer_per_router_address_and_pool_the_router_families() {
    let label = ("metallb-rs.dev/dev-env", "lab");
    let dual = objects(
        "metallb-system",
        &[BgpRouter::single(
            "frr",
            &[ip("172.30.0.2"), ip("fc00:f853:ccd:e793::2")],
        )],
        label,
    );
    crate::kind::validate(&dual).expect("valid config");
    let peers: Vec<&Value> = dual.iter().filter(|o| o["kind"] == "BGPPeer").collect();
    assert_eq!(peers.len(), 2);
    assert_eq!(peers[0]["metadata"]["name"], "frr-v4");
    assert_eq!(
        peers[0]["spec"],
        json!({ "myASN": 64512, "peerASN": 64512, "peerAddress": "172.30.0.2" })
    );
    assert_eq!(peers[1]["spec"]["peerAddress"], "fc00:f853:ccd:e793::2");
    let pool = dual
        .iter()
        .find(|o| o["kind"] == "IPAddressPool")
        .expect("pool");
    assert_eq!(pool["metadata"]["name"], POOL_NAME);
    assert_eq!(pool["spec"]["addresses"], json!(POOL));
    assert!(
        dual.iter()
            .all(|o| o["metadata"]["labels"]["metallb-rs.dev/dev-env"] == "lab")
    );

    let v4 = objects(
        "metallb-system",
        &[BgpRouter::single("frr", &[ip("172.30.0.2")])],
        label,
    );
    crate::kind::validate(&v4).expect("valid config");
    let pool = v4
        .iter()
        .find(|o| o["kind"] == "IPAddressPool")
        .expect("pool");
    assert_eq!(pool["spec"]["addresses"], json!(["192.168.10.0/24"]));
    let v6 = objects(
        "metallb-system",
        &[BgpRouter::single("frr", &[ip("fc00:f853:ccd:e793::2")])],
        label,
    );
    let pool = v6
        .iter()
        .find(|o| o["kind"] == "IPAddressPool")
        .expect("pool");
    assert_eq!(
        pool["spec"]["addresses"],
        json!(["fc00:f853:ccd:e799::/124"])
    );
}

#[test]
fn neighbors_read_state_md5_timers_and_prefixes() {
    let up = parse_neighbors(&fixture("neighbors.json")).expect("parses");
    assert_eq!(up.keys().copied().collect::<Vec<_>>(), nodes_sorted());
    assert!(up.values().all(NeighborStatus::established), "{up:?}");
    let md5 = &up[&ip("172.30.0.11")];
    assert!(md5.authentication);
    assert!(!up[&ip("172.30.0.10")].authentication);
    assert_eq!(md5.remote_as, Some(64512));
    assert_eq!(md5.remote_router_id, Some(Ipv4Addr::new(172, 30, 0, 11)));
    assert_eq!(md5.hold_time_ms, Some(180_000));
    assert_eq!(md5.keepalive_ms, Some(60_000));
    assert_eq!(md5.accepted_prefixes, 2);
    assert_eq!(up[&ip("fc00:f853:ccd:e793::10")].accepted_prefixes, 1);
    assert!(md5.connections_established >= 1);
    // The throw-away peers run FRR's default: helper only.
    assert_eq!(md5.remote_gr_mode.as_deref(), Some("Helper"));

    let one_down = parse_neighbors(&fixture("neighbors-one-down.json")).expect("parses");
    let states = states(&one_down);
    assert_eq!(states[&ip("172.30.0.10")], "Established");
    assert_eq!(states[&ip("172.30.0.11")], "Idle");
    assert_eq!(states[&ip("fc00:f853:ccd:e793::11")], "Idle");
    let gone = &one_down[&ip("172.30.0.11")];
    assert_eq!(gone.last_reset.as_deref(), Some("Peer closed the session"));
    assert_eq!(gone.accepted_prefixes, 0);
    assert!(gone.connections_dropped >= 1);
}

fn nodes_sorted() -> Vec<IpAddr> {
    let mut n = nodes();
    n.sort();
    n
}

#[test]
fn neighbors_of_an_empty_router_and_garbage() {
    assert!(parse_neighbors("{}").expect("empty").is_empty());
    let err = parse_neighbors("% Unknown command").expect_err("not JSON");
    assert!(err.to_string().contains("Unknown command"), "{err}");
    assert!(parse_neighbors("[]").is_err());
}

#[test]
fn detail_routes_of_84_carry_next_hops_and_attributes() {
    let routes = parse_routes(&fixture("routes-ipv4-detail.json")).expect("parses");
    assert_eq!(
        routes.keys().copied().collect::<Vec<_>>(),
        [
            net("198.51.100.1/32"),
            net("198.51.100.10/32"),
            net("198.51.100.11/32")
        ]
    );
    let vip = &routes[&net("198.51.100.1/32")];
    assert_eq!(vip.len(), 2, "the header is no path: {vip:?}");
    let hops: BTreeSet<IpAddr> = vip.iter().flat_map(|p| p.nexthops.clone()).collect();
    assert_eq!(hops, [ip("172.30.0.10"), ip("172.30.0.11")].into());
    assert_eq!(vip.iter().filter(|p| p.best).count(), 1);
    assert!(vip.iter().all(|p| p.multipath && p.valid));
    for p in vip {
        assert_eq!(p.local_pref, Some(150));
        assert_eq!(p.med, Some(0));
        assert_eq!(p.communities, ["64512:100", "no-export"]);
        assert_eq!(p.peer, p.nexthops.first().copied());
        assert_eq!(p.as_path, "Local");
        assert_eq!(p.origin.as_deref(), Some("IGP"));
    }
    let large: BTreeSet<String> = vip
        .iter()
        .flat_map(|p| p.large_communities.clone())
        .collect();
    assert_eq!(
        large,
        ["64512:1:0".to_owned(), "64512:1:1".to_owned()].into()
    );
    let own = &routes[&net("198.51.100.10/32")];
    assert_eq!(own.len(), 1);
    assert_eq!(own[0].nexthops, [ip("172.30.0.10")]);
    assert_eq!(own[0].local_pref, Some(100));
    assert!(own[0].communities.is_empty() && own[0].large_communities.is_empty());
    assert!(own[0].best && !own[0].multipath);

    let v6 = parse_routes(&fixture("routes-ipv6-detail.json")).expect("parses");
    let vip6 = &v6[&net("2001:db8:51::1/128")];
    let hops: BTreeSet<IpAddr> = vip6.iter().flat_map(|p| p.nexthops.clone()).collect();
    assert_eq!(
        hops,
        [ip("fc00:f853:ccd:e793::10"), ip("fc00:f853:ccd:e793::11")].into()
    );
}

#[test]
fn the_plain_table_reads_too_without_communities() {
    let routes = parse_routes(&fixture("routes-ipv4.json")).expect("parses");
    let vip = &routes[&net("198.51.100.1/32")];
    assert_eq!(vip.len(), 2);
    assert!(vip.iter().all(|p| p.local_pref == Some(150)));
    assert!(vip.iter().all(|p| p.communities.is_empty()));
    assert_eq!(vip.iter().filter(|p| p.best).count(), 1);
    let peers: BTreeSet<IpAddr> = vip.iter().filter_map(|p| p.peer).collect();
    assert_eq!(peers, [ip("172.30.0.10"), ip("172.30.0.11")].into());
}

/// FRR 9's `json detail` (the shape of FRRouting/frr#12791, written by
/// hand: no FRR 9 runs here), with a link-local next hop beside the
/// global one.
#[test]
fn detail_routes_of_frr_9_and_link_local_next_hops() {
    let text = r#"{
 "vrfId": 0, "vrfName": "default", "routerId": "172.30.0.2", "localAS": 64512,
 "routes": { "2001:db8:51::1/128": {
  "prefix": "2001:db8:51::1/128", "version": "1",
  "paths": [{"aspath":{"string":"Local","segments":[],"length":0},"origin":"IGP","metric":0,
    "localpref":200,"valid":true,"bestpath":{"overall":true,"selectionReason":"First path received"},
    "community":{"string":"64512:7","list":["64512:7"]},
    "nexthops":[{"ip":"fc00:f853:ccd:e793::10","afi":"ipv6","scope":"global","used":true},
                {"ip":"fe80::1","afi":"ipv6","scope":"link-local","used":true}],
    "peer":{"peerId":"fc00:f853:ccd:e793::10","routerId":"172.30.0.10","type":"internal"}}]
 } } }"#;
    let routes = parse_routes(text).expect("parses");
    let p = &routes[&net("2001:db8:51::1/128")];
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].nexthops, [ip("fc00:f853:ccd:e793::10")]);
    assert_eq!(p[0].local_pref, Some(200));
    assert_eq!(p[0].communities, ["64512:7"]);
    assert!(p[0].best);
    assert_eq!(p[0].peer, Some(ip("fc00:f853:ccd:e793::10")));
}

#[test]
fn empty_tables_and_bad_keys() {
    let empty = r#"{ "vrfId": 0, "routerId": "172.30.0.2", "routes": {  }  } "#;
    assert!(parse_routes(empty).expect("empty").is_empty());
    assert!(parse_routes("{}").expect("no instance").is_empty());
    assert!(parse_routes(r#"{"routes": {"nonsense": []}}"#).is_err());
    assert!(parse_routes("% BGP instance not found").is_err());
}

#[test]
fn kernel_routes_read_ecmp_single_and_host_routes() {
    let v4 = parse_kernel_routes(&fixture("kernel-ipv4.json")).expect("parses");
    assert_eq!(
        v4,
        [
            KernelRoute {
                destination: net("198.51.100.1/32"),
                gateways: vec![ip("172.30.0.10"), ip("172.30.0.11")],
            },
            KernelRoute {
                destination: net("198.51.100.10/32"),
                gateways: vec![ip("172.30.0.10")],
            },
            KernelRoute {
                destination: net("198.51.100.11/32"),
                gateways: vec![ip("172.30.0.11")],
            },
        ]
    );
    let v6 = parse_kernel_routes(&fixture("kernel-ipv6.json")).expect("parses");
    assert_eq!(v6.len(), 1);
    assert_eq!(v6[0].destination, net("2001:db8:51::1/128"));
    assert_eq!(
        v6[0].gateways,
        [ip("fc00:f853:ccd:e793::10"), ip("fc00:f853:ccd:e793::11")]
    );
    assert!(parse_kernel_routes("").expect("nothing").is_empty());
    assert!(parse_kernel_routes("[]").expect("nothing").is_empty());
    let default =
        parse_kernel_routes(r#"[{"dst":"default","gateway":"fc00::1"}]"#).expect("default");
    assert_eq!(default[0].destination, net("::/0"));
    assert!(parse_kernel_routes(r#"[{"gateway":"10.0.0.1"}]"#).is_err());
}

#[test]
fn commands_name_the_family() {
    assert_eq!(
        routes_command(AddressFamily::Ipv6),
        "show bgp ipv6 unicast json detail"
    );
    assert_eq!(
        kernel_routes_argv(AddressFamily::Ipv4).join(" "),
        "ip -j -4 route show proto bgp"
    );
    assert_eq!(AddressFamily::of(&ip("::1")), AddressFamily::Ipv6);
}
