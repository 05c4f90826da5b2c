//! The BFD edge: what a BGPPeer asks for, and two ends over loopback
//! (different listening ports on 127.0.0.1, no root needed) coming Up,
//! surviving a timers change, and one seeing the other die.

use super::*;
use crate::config::{BfdProfile, PeerAsn};
use prometheus::Registry;
use std::net::Ipv4Addr;

#[test]
fn only_a_failed_path_closes_the_bgp_session() {
    use bfd::Diagnostic;
    let change = |from, to, diagnostic| bfd::Change {
        from,
        to,
        diagnostic,
    };
    let expired = Diagnostic::ControlDetectionTimeExpired;
    let signalled = Diagnostic::NeighborSignaledSessionDown;
    let rows = [
        (
            "detection time expired",
            change(State::Up, State::Down, expired),
            State::Down,
            true,
        ),
        (
            "the peer says Down",
            change(State::Up, State::Down, signalled),
            State::Down,
            true,
        ),
        (
            "the peer's AdminDown",
            change(State::Up, State::Down, signalled),
            State::AdminDown,
            false,
        ),
        (
            "our AdminDown",
            change(
                State::Up,
                State::AdminDown,
                Diagnostic::AdministrativelyDown,
            ),
            State::Up,
            false,
        ),
        (
            "coming up",
            change(State::Init, State::Up, Diagnostic::None),
            State::Up,
            false,
        ),
        (
            "Init lost",
            change(State::Init, State::Down, expired),
            State::Down,
            false,
        ),
    ];
    for (name, c, remote, want) in rows {
        assert_eq!(closes_bgp(&c, remote), want, "{name}");
    }
}

#[test]
fn reach_follows_the_peer() {
    let rows = [
        ("direct eBGP", Distance::Direct, false, Reach::SingleHop),
        ("eBGP multihop", Distance::MultiHop, true, Reach::MultiHop),
        (
            "iBGP on a connected network",
            Distance::Internal,
            true,
            Reach::SingleHop,
        ),
        (
            "iBGP further away",
            Distance::Internal,
            false,
            Reach::MultiHop,
        ),
    ];
    for (name, distance, connected, want) in rows {
        assert_eq!(reach(distance, connected), want, "{name}");
    }
}

fn peer(peer_asn: PeerAsn, multihop: bool, profile: Option<BfdProfile>) -> Peer {
    Peer {
        source_address: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
        ebgp_multi_hop: multihop,
        bfd_profile: profile,
        ..Peer::example("p", IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 179, peer_asn)
    }
}

#[test]
fn a_peer_with_a_profile_asks_for_a_link_with_its_values() {
    let profile = BfdProfile {
        name: "fast".into(),
        receive_interval: Some(150),
        transmit_interval: Some(200),
        detect_multiplier: Some(5),
        echo_interval: Some(60),
        passive_mode: Some(true),
        minimum_ttl: Some(10),
    };
    assert_eq!(link_config(&peer(PeerAsn::Fixed(64513), false, None)), None);
    let link = link_config(&peer(PeerAsn::Fixed(64513), false, Some(profile.clone())));
    assert_eq!(
        link,
        Some(LinkConfig {
            name: "p".into(),
            peer: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            source: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
            distance: Distance::Direct,
            profile: Profile {
                receive_interval: Some(150),
                transmit_interval: Some(200),
                detect_multiplier: Some(5),
                echo_interval: Some(60),
                echo_mode: None,
                passive_mode: Some(true),
                minimum_ttl: Some(10),
            },
        })
    );
    let distance = |asn, multihop| {
        link_config(&peer(asn, multihop, Some(profile.clone()))).map(|l| l.distance)
    };
    assert_eq!(
        distance(PeerAsn::Fixed(64513), true),
        Some(Distance::MultiHop)
    );
    assert_eq!(distance(PeerAsn::External, false), Some(Distance::Direct));
    assert_eq!(
        distance(PeerAsn::Fixed(64512), false),
        Some(Distance::Internal)
    );
    assert_eq!(distance(PeerAsn::Internal, false), Some(Distance::Internal));
}

/// A UDP port free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.local_addr().expect("addr").port()
}

fn loopback(transmit_ms: u32) -> LinkConfig {
    LinkConfig {
        name: "peer".into(),
        peer: IpAddr::V4(Ipv4Addr::LOCALHOST),
        source: None,
        distance: Distance::Direct,
        profile: Profile {
            receive_interval: Some(50),
            transmit_interval: Some(transmit_ms),
            detect_multiplier: Some(3),
            ..Profile::default()
        },
    }
}

async fn wait_for(links: &Links, want: State, within: Duration) {
    let mut state = links.watch_state("peer").expect("a session");
    let reached = tokio::time::timeout(within, state.wait_for(|s| *s == want)).await;
    assert!(
        matches!(reached, Ok(Ok(_))),
        "not {want:?} within {within:?}: {:?}",
        links.state("peer")
    );
}

#[tokio::test]
async fn two_ends_come_up_and_one_sees_the_other_die() {
    let (port_a, port_b) = (free_port(), free_port());
    let ports = |mine, theirs| Ports {
        single_hop: mine,
        peer_single_hop: theirs,
        ..Ports::default()
    };
    let metrics_b = BfdMetrics::new(&Registry::new());
    let mut a = Links::new(ports(port_a, port_b), BfdMetrics::new(&Registry::new()));
    let mut b = Links::new(ports(port_b, port_a), metrics_b.clone());
    let path_b = b.path("peer");
    a.set(vec![loopback(50)]).await;
    b.set(vec![loopback(50)]).await;
    // Down -> Init -> Up takes one slow (1 s, jittered) round each way.
    wait_for(&a, State::Up, Duration::from_secs(5)).await;
    wait_for(&b, State::Up, Duration::from_secs(5)).await;

    // New timers: a Poll Sequence, the session stays Up.
    a.set(vec![loopback(60)]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(a.state("peer"), Some(State::Up));
    assert_eq!(b.state("peer"), Some(State::Up));
    assert_eq!(*path_b.borrow(), 0, "no path loss while the timers change");

    // `a` vanishes without AdminDown: `b` detects it within 3 x 60 ms.
    let died = tokio::time::Instant::now();
    drop(a);
    wait_for(&b, State::Down, Duration::from_secs(1)).await;
    let took = died.elapsed();
    assert!(
        took >= Duration::from_millis(100),
        "down too early: {took:?}"
    );
    assert_eq!(*path_b.borrow(), 1, "the BGP session is told once");

    let get = |c: &prometheus::IntCounterVec| c.with_label_values(&["127.0.0.1", "default"]).get();
    assert_eq!(get(&metrics_b.session_up_events), 1);
    assert_eq!(get(&metrics_b.session_down_events), 1);
    assert_eq!(get(&metrics_b.zebra_notifications), 2);
    assert!(get(&metrics_b.control_packet_input) > 5);
    assert!(get(&metrics_b.control_packet_output) > 5);
    assert_eq!(get(&metrics_b.echo_packet_output), 0);
    let up = metrics_b
        .session_up
        .with_label_values(&["127.0.0.1", "default"])
        .get();
    assert_eq!(up, 0);

    // Removing the session forgets its series.
    b.set(vec![]).await;
    assert_eq!(b.state("peer"), None);
    let gone = metrics_b
        .session_up_events
        .remove_label_values(&["127.0.0.1", "default"]);
    assert!(gone.is_err(), "the series outlived its session");
}

#[tokio::test]
async fn the_peers_admin_down_keeps_the_bgp_session() {
    let (port_a, port_b) = (free_port(), free_port());
    let ports = |mine, theirs| Ports {
        single_hop: mine,
        peer_single_hop: theirs,
        ..Ports::default()
    };
    let mut a = Links::new(ports(port_a, port_b), BfdMetrics::new(&Registry::new()));
    let mut b = Links::new(ports(port_b, port_a), BfdMetrics::new(&Registry::new()));
    let path_a = a.path("peer");
    let path_b = b.path("peer");
    a.set(vec![loopback(50)]).await;
    b.set(vec![loopback(50)]).await;
    wait_for(&a, State::Up, Duration::from_secs(5)).await;
    wait_for(&b, State::Up, Duration::from_secs(5)).await;
    // `a` loses its profile: it sends AdminDown, `b` goes Down at once
    // (well before its detection time would) and keeps BGP up, as does `a`.
    let mut state_b = b.watch_state("peer").expect("a session");
    a.set(vec![]).await;
    let down = tokio::time::timeout(
        Duration::from_millis(100),
        state_b.wait_for(|s| *s == State::Down),
    )
    .await;
    assert!(matches!(down, Ok(Ok(_))), "{:?}", b.state("peer"));
    assert_eq!(
        *path_b.borrow(),
        0,
        "the peer's AdminDown is no path failure"
    );
    assert_eq!(*path_a.borrow(), 0, "our own AdminDown is no path failure");
}
