//! OPEN negotiation and Adj-RIB-Out diffs as tables: each row gives the
//! inputs in one line and the outcome as text.

use super::*;
use crate::net::bgp::{Capability, Open};
use rstest::rstest;

fn cfg(peer_asn: PeerAsn, keepalive: Option<u64>) -> SessionConfig {
    SessionConfig {
        name: "p".into(),
        dial: Dial {
            peer: "192.0.2.1:179".parse().expect("addr"),
            source: None,
            password: None,
            ttl: 1,
            timeout: Duration::from_secs(1),
        },
        my_asn: 64512,
        peer_asn,
        router_id: None,
        hold_time: Duration::from_secs(90),
        keepalive: keepalive.map(Duration::from_secs),
        max_backoff: Duration::from_secs(1),
        families: vec![Afi::Ipv4, Afi::Ipv6],
        node_v4: None,
        node_v6: None,
    }
}

/// The peer's OPEN: `asn hold router-id [v4] [v6] [2octet]`.
fn theirs(spec: &str) -> Open {
    let words: Vec<&str> = spec.split_whitespace().collect();
    let asn: u32 = words[0].parse().expect("asn");
    let hold: u16 = words[1].parse().expect("hold");
    let id: Ipv4Addr = words[2].parse().expect("router id");
    let mut caps = Vec::new();
    for w in &words[3..] {
        match *w {
            "v4" => caps.push(Capability::Multiprotocol {
                afi: Afi::Ipv4.number(),
                safi: crate::net::bgp::SAFI_UNICAST,
            }),
            "v6" => caps.push(Capability::Multiprotocol {
                afi: Afi::Ipv6.number(),
                safi: crate::net::bgp::SAFI_UNICAST,
            }),
            "2octet" => {}
            other => panic!("unknown word {other}"),
        }
    }
    let mut open = Open::new(asn, hold, id, caps);
    if words.contains(&"2octet") {
        open.capabilities
            .retain(|c| !matches!(c, Capability::FourOctetAs(_)));
    }
    open
}

fn outcome(cfg: &SessionConfig, peer: &str) -> String {
    let ours = our_open(cfg, "10.0.0.1".parse().expect("ip"));
    let theirs = theirs(peer);
    match negotiate(cfg, &ours, &theirs) {
        Ok(n) => format!(
            "ibgp={} hold={}s keepalive={}s families={:?} 4octet={}",
            n.ibgp,
            n.hold.as_secs(),
            n.keepalive.as_secs(),
            n.families,
            n.ctx.four_octet_as
        ),
        Err(n) => format!("{n}: {}", negotiate::refusal(cfg, &ours, &theirs, &n)),
    }
}

#[rstest]
#[case::ebgp(
    PeerAsn::Fixed(64513),
    None,
    "64513 90 10.0.0.2 v4",
    "ibgp=false hold=90s keepalive=30s families=[Ipv4] 4octet=true"
)]
#[case::smaller_hold_wins(
    PeerAsn::Fixed(64513),
    None,
    "64513 9 10.0.0.2 v4 v6",
    "ibgp=false hold=9s keepalive=3s families=[Ipv4, Ipv6] 4octet=true"
)]
#[case::keepalive_at_most_a_third(
    PeerAsn::Fixed(64513),
    Some(60),
    "64513 30 10.0.0.2 v4",
    "ibgp=false hold=30s keepalive=10s families=[Ipv4] 4octet=true"
)]
#[case::shorter_keepalive_kept(
    PeerAsn::Fixed(64513),
    Some(5),
    "64513 90 10.0.0.2 v4",
    "ibgp=false hold=90s keepalive=5s families=[Ipv4] 4octet=true"
)]
#[case::no_hold_timer(
    PeerAsn::Fixed(64513),
    None,
    "64513 0 10.0.0.2 v4",
    "ibgp=false hold=0s keepalive=0s families=[Ipv4] 4octet=true"
)]
#[case::two_octet_peer(
    PeerAsn::Fixed(64513),
    None,
    "64513 90 10.0.0.2 v4 2octet",
    "ibgp=false hold=90s keepalive=30s families=[Ipv4] 4octet=false"
)]
#[case::ibgp(
    PeerAsn::Internal,
    None,
    "64512 90 10.0.0.2 v4",
    "ibgp=true hold=90s keepalive=30s families=[Ipv4] 4octet=true"
)]
#[case::external_any(
    PeerAsn::External,
    None,
    "65000 90 10.0.0.2 v4",
    "ibgp=false hold=90s keepalive=30s families=[Ipv4] 4octet=true"
)]
#[case::wrong_as(
    PeerAsn::Fixed(64513),
    None,
    "64514 90 10.0.0.2 v4",
    "OPEN error: bad peer AS (2/2) data fc02: the peer's AS is 64514, expected Fixed(64513): fix peerASN"
)]
#[case::internal_but_external(
    PeerAsn::Internal,
    None,
    "64513 90 10.0.0.2 v4",
    "OPEN error: bad peer AS (2/2) data fc01: the peer's AS is 64513, expected Internal: fix peerASN"
)]
#[case::external_but_internal(
    PeerAsn::External,
    None,
    "64512 90 10.0.0.2 v4",
    "OPEN error: bad peer AS (2/2) data fc00: the peer's AS is 64512, expected External: fix peerASN"
)]
#[case::ibgp_same_router_id(
    PeerAsn::Internal,
    None,
    "64512 90 10.0.0.1 v4",
    "OPEN error: bad BGP identifier (2/3): the peer has our router ID 10.0.0.1: set routerID on one side"
)]
#[case::ebgp_same_router_id_allowed(
    PeerAsn::Fixed(64513),
    None,
    "64513 90 10.0.0.1 v4",
    "ibgp=false hold=90s keepalive=30s families=[Ipv4] 4octet=true"
)]
fn negotiation(
    #[case] peer_asn: PeerAsn,
    #[case] keepalive: Option<u64>,
    #[case] peer: &str,
    #[case] expected: &str,
) {
    assert_eq!(outcome(&cfg(peer_asn, keepalive), peer), expected);
}

/// Changes from lines `PREFIX [lp=N]` (announce) or `PREFIX -` (withdraw).
fn changes(spec: &str) -> Vec<(IpNet, Option<RouteAttrs>)> {
    spec.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut w = l.split_whitespace();
            let prefix: IpNet = w.next().expect("prefix").parse().expect("prefix");
            let attrs = match w.next() {
                Some("-") => None,
                Some(lp) => Some(RouteAttrs {
                    local_pref: Some(lp.trim_start_matches("lp=").parse().expect("lp")),
                    ..RouteAttrs::default()
                }),
                None => Some(RouteAttrs::default()),
            };
            (prefix, attrs)
        })
        .collect()
}

fn shape(v4: bool, v6: bool) -> Shape {
    Shape {
        my_asn: 64512,
        ibgp: false,
        four_octet_as: true,
        next_hop_v4: v4.then(|| "10.0.0.1".parse().expect("ip")),
        next_hop_v6: v6.then(|| "fc00::1".parse().expect("ip")),
    }
}

fn show(d: &Diff<'_>) -> String {
    let mut out: Vec<String> = d.withdraw.iter().map(|n| format!("withdraw {n}")).collect();
    for (n, a) in &d.announce {
        match a.local_pref {
            Some(lp) => out.push(format!("announce {n} lp={lp}")),
            None => out.push(format!("announce {n}")),
        }
    }
    if out.is_empty() {
        "nothing".into()
    } else {
        out.join("\n")
    }
}

#[rstest]
#[case::first_routes(
    "",
    "10.0.0.0/32\nfc00::/128",
    true,
    "announce 10.0.0.0/32\nannounce fc00::/128"
)]
#[case::unchanged_is_not_sent("10.0.0.0/32", "10.0.0.0/32", true, "nothing")]
#[case::changed_attributes(
    "10.0.0.0/32",
    "10.0.0.0/32 lp=200",
    true,
    "announce 10.0.0.0/32 lp=200"
)]
#[case::withdrawn("10.0.0.0/32", "10.0.0.0/32 -", true, "withdraw 10.0.0.0/32")]
#[case::withdraw_of_unsent("", "10.0.0.0/32 -", true, "nothing")]
#[case::no_next_hop_not_sent("", "fc00::/128", false, "nothing")]
#[case::no_next_hop_withdraws("fc00::/128", "fc00::/128", false, "withdraw fc00::/128")]
fn adj_rib_out_diff(
    #[case] sent: &str,
    #[case] change: &str,
    #[case] v6: bool,
    #[case] expected: &str,
) {
    let mut rib = AdjRibOut::default();
    let before = changes(sent);
    rib.apply(&rib.clone().diff(&before, &shape(true, true)));
    let change = changes(change);
    assert_eq!(show(&rib.diff(&change, &shape(true, v6))), expected);
}

#[test]
fn everything_withdraws_what_is_no_longer_desired() {
    let mut rib = AdjRibOut::default();
    let sent = changes("10.0.0.1/32\n10.0.0.2/32");
    rib.apply(&rib.clone().diff(&sent, &shape(true, true)));
    let desired: Table = changes("10.0.0.2/32 lp=5\n10.0.0.3/32")
        .into_iter()
        .map(|(n, a)| (n, a.expect("attrs")))
        .collect();
    let all = rib.everything(desired);
    let d = rib.diff(&all, &shape(true, true));
    assert_eq!(
        show(&d),
        "withdraw 10.0.0.1/32\nannounce 10.0.0.2/32 lp=5\nannounce 10.0.0.3/32"
    );
    rib.apply(&d);
    assert_eq!(rib.len(), 2);
    rib.forget_family(false);
    assert!(rib.is_empty());
}
