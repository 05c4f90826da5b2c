//! Sessions against an in-process peer on loopback that speaks the
//! protocol through the same codec, byte for byte over real TCP.

use super::session::{DesiredRoutes, ReadError};
use super::*;
use crate::config::Community;
use crate::net::bgp::{self, Capability, Context, Message, Open, Update};
use prometheus::Registry;
use socket2::{Domain, Protocol, Socket, Type};
use std::time::Instant;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const FOUR: Context = Context {
    four_octet_as: true,
};

fn listener(key: Option<&str>) -> TcpListener {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
    sock.set_reuse_address(true).expect("reuse");
    if let Some(k) = key {
        socket::set_md5(&sock, IpAddr::V4(Ipv4Addr::LOCALHOST), k).expect("md5 on listener");
    }
    sock.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())
        .expect("bind");
    sock.listen(8).expect("listen");
    sock.set_nonblocking(true).expect("nonblocking");
    TcpListener::from_std(sock.into()).expect("tokio listener")
}

fn config(l: &TcpListener, peer_asn: u32) -> SessionConfig {
    let peer = Peer {
        hold_time: Some(Duration::from_secs(9)),
        connect_time: Some(Duration::from_millis(200)),
        router_id: Some(Ipv4Addr::new(10, 0, 0, 1)),
        dual_stack_address_family: true,
        ..Peer::example(
            "fake",
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            l.local_addr().expect("addr").port(),
            PeerAsn::Fixed(peer_asn),
        )
    };
    session_config(
        &peer,
        NodeAddresses {
            v4: Some(Ipv4Addr::new(10, 0, 0, 1)),
            v6: Some("fc00::1".parse().expect("ip")),
        },
    )
}

/// The far end of one connection.
struct FakePeer {
    rd: BufReader<tokio::net::tcp::OwnedReadHalf>,
    wr: tokio::net::tcp::OwnedWriteHalf,
    /// The OPEN the speaker sent.
    open: Open,
    /// The End-of-RIB markers [`FakePeer::next`] passed over.
    end_of_rib: Vec<Afi>,
}

/// Reads one message as a peer that decodes our UPDATEs fully (the
/// session's own reader only length-checks received UPDATEs).
async fn read_strict(
    rd: &mut (impl tokio::io::AsyncRead + Unpin),
    ctx: &Context,
) -> Result<Message, ReadError> {
    use tokio::io::AsyncReadExt as _;
    let mut header = [0u8; bgp::HEADER_LEN];
    rd.read_exact(&mut header).await.map_err(ReadError::Io)?;
    let (_, len) = bgp::decode_header(&header).map_err(ReadError::Malformed)?;
    let mut buf = vec![0u8; len];
    buf[..bgp::HEADER_LEN].copy_from_slice(&header);
    rd.read_exact(&mut buf[bgp::HEADER_LEN..])
        .await
        .map_err(ReadError::Io)?;
    bgp::decode(&buf, ctx).map_err(ReadError::Malformed)
}

impl FakePeer {
    /// Accepts the speaker's connection and completes the handshake as AS
    /// `asn` with `hold` seconds.
    async fn accept(l: &TcpListener, asn: u32, hold: u16) -> FakePeer {
        FakePeer::accept_with(l, asn, hold, vec![]).await
    }

    /// As [`FakePeer::accept`], sending `more` capabilities too.
    async fn accept_with(l: &TcpListener, asn: u32, hold: u16, more: Vec<Capability>) -> FakePeer {
        let (s, _) = tokio::time::timeout(Duration::from_secs(10), l.accept())
            .await
            .expect("the speaker connects")
            .expect("accept");
        let mut p = FakePeer::handshake_start(s).await;
        let mut caps = vec![
            Capability::Multiprotocol { afi: 1, safi: 1 },
            Capability::Multiprotocol { afi: 2, safi: 1 },
        ];
        caps.extend(more);
        let ours = Open::new(asn, hold, Ipv4Addr::new(10, 0, 0, 99), caps);
        p.send(&Message::Open(ours)).await;
        p.send(&Message::Keepalive).await;
        assert_eq!(p.next().await, Message::Keepalive);
        p
    }

    async fn handshake_start(s: TcpStream) -> FakePeer {
        let (rd, wr) = s.into_split();
        let mut rd = BufReader::new(rd);
        let Ok(Message::Open(open)) = read_strict(&mut rd, &Context::default()).await else {
            panic!("the speaker did not send OPEN first");
        };
        FakePeer {
            rd,
            wr,
            open,
            end_of_rib: Vec::new(),
        }
    }

    async fn send(&mut self, m: &Message) {
        self.send_raw(&bgp::encode(m, &FOUR)).await;
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.wr.write_all(bytes).await.expect("write");
    }

    /// The next message but End-of-RIB markers (recorded), within 10 s.
    async fn next(&mut self) -> Message {
        loop {
            match self.next_any(Duration::from_secs(10)).await {
                Some(Message::Update(u)) if u.end_of_rib().is_some() => {
                    self.end_of_rib.extend(u.end_of_rib().map(|(afi, _)| afi));
                }
                Some(m) => return m,
                None => panic!("no message within 10 s"),
            }
        }
    }

    /// The next message within `wait`, if one comes.
    async fn next_any(&mut self, wait: Duration) -> Option<Message> {
        match tokio::time::timeout(wait, read_strict(&mut self.rd, &FOUR)).await {
            Err(_) => None,
            Ok(Ok(m)) => Some(m),
            Ok(Err(ReadError::Io(e))) => panic!("connection: {e}"),
            Ok(Err(ReadError::Malformed(n))) => {
                panic!("the speaker sent a malformed message: {n}")
            }
        }
    }

    /// The next UPDATE, skipping keepalives.
    async fn update(&mut self) -> Update {
        loop {
            match self.next().await {
                Message::Keepalive => continue,
                Message::Update(u) => return u,
                other => panic!("expected UPDATE, got {other:?}"),
            }
        }
    }

    /// The next NOTIFICATION, skipping keepalives and updates.
    async fn notification(&mut self) -> Notification {
        loop {
            match self.next().await {
                Message::Notification(n) => return n,
                _ => continue,
            }
        }
    }
}

fn table(entries: &[(&str, Option<u32>)]) -> Table {
    entries
        .iter()
        .map(|(p, lp)| {
            (
                p.parse().expect("net"),
                RouteAttrs {
                    local_pref: *lp,
                    communities: [Community::Standard(64512, 7)].into(),
                },
            )
        })
        .collect()
}

/// The series of one peer, read through the handles.
fn up(m: &BgpMetrics, label: &str) -> i64 {
    m.session_up.with_label_values(&[label]).get()
}

#[tokio::test]
async fn announces_both_families_then_withdraws() {
    let l = listener(None);
    let metrics = BgpMetrics::new(&Registry::new());
    let cfg = config(&l, 64512);
    let label = cfg.label();
    let s = Session::start(
        cfg,
        DesiredRoutes::new(table(&[
            ("192.168.10.5/32", Some(150)),
            ("fc00:f853::5/128", None),
        ])),
        metrics.clone(),
    );
    let mut p = FakePeer::accept(&l, 64512, 9).await;
    assert_eq!(p.open.asn(), 64512);
    assert_eq!(p.open.hold_time, 9);
    assert_eq!(p.open.router_id, Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(p.open.families(), vec![Afi::Ipv4, Afi::Ipv6]);
    let mut v4 = None;
    let mut v6 = None;
    while v4.is_none() || v6.is_none() {
        let u = p.update().await;
        if !u.nlri.is_empty() {
            v4 = Some(u);
        } else if u.attributes.mp_reach.is_some() {
            v6 = Some(u);
        }
    }
    let v4 = v4.expect("v4");
    assert_eq!(v4.nlri, vec!["192.168.10.5/32".parse().expect("net")]);
    // iBGP: LOCAL_PREF, our loopback address as next hop, the community.
    assert_eq!(v4.attributes.local_pref, Some(150));
    assert_eq!(v4.attributes.next_hop, Some(Ipv4Addr::LOCALHOST));
    assert_eq!(v4.attributes.communities, vec![(64512 << 16) | 7]);
    let mp = v6.expect("v6").attributes.mp_reach.expect("mp");
    assert_eq!(
        mp.nlri,
        vec!["fc00:f853::5/128".parse::<IpNet>().expect("net")]
    );
    // A v4 connection: the IPv6 next hop is the node's IPv6 address.
    assert_eq!(mp.next_hops, vec!["fc00::1".parse::<IpAddr>().expect("ip")]);

    let mut status = s.subscribe();
    status
        .wait_for(|st| st.established && st.announced == 2)
        .await
        .expect("status");
    assert_eq!(up(&metrics, &label), 1);
    let announced = metrics
        .announced_prefixes
        .with_label_values(&[&label])
        .get();
    assert_eq!(announced, 2);
    // Upstream's counting: one UPDATE per prefix announced, and the
    // pending count is the desired one.
    assert_eq!(metrics.updates.with_label_values(&[&label]).get(), 2);
    assert_eq!(
        metrics.pending_prefixes.with_label_values(&[&label]).get(),
        2
    );

    s.set_routes(table(&[("fc00:f853::5/128", None)]));
    let u = p.update().await;
    assert_eq!(u.withdrawn, vec!["192.168.10.5/32".parse().expect("net")]);
    status
        .wait_for(|st| st.announced == 1)
        .await
        .expect("status");
    // One more for the withdrawal.
    assert_eq!(metrics.updates.with_label_values(&[&label]).get(), 3);
    assert_eq!(
        metrics.pending_prefixes.with_label_values(&[&label]).get(),
        1
    );

    s.stop(Notification::new(
        code::CEASE,
        code::CEASE_ADMIN_SHUTDOWN,
        [],
    ))
    .await;
    let n = p.notification().await;
    assert_eq!((n.code, n.subcode), (6, 2));
    assert_eq!(up(&metrics, &label), 0);
}

#[tokio::test]
async fn ebgp_prepends_our_as_and_a_wrong_peer_as_is_refused() {
    let l = listener(None);
    let s = Session::start(
        config(&l, 64600),
        DesiredRoutes::new(table(&[("192.168.10.5/32", Some(150))])),
        BgpMetrics::new(&Registry::new()),
    );
    // First the wrong AS: the speaker names it in a NOTIFICATION.
    let (sock, _) = l.accept().await.expect("accept");
    let mut p = FakePeer::handshake_start(sock).await;
    p.send(&Message::Open(Open::new(
        64700,
        9,
        Ipv4Addr::new(9, 9, 9, 9),
        vec![],
    )))
    .await;
    let n = p.notification().await;
    assert_eq!((n.code, n.subcode), (2, 2));
    assert!(s.status().last_error.is_none_or(|e| e.contains("64700")));
    // It retries; the right AS gets the route with our AS and no LOCAL_PREF.
    let mut p = FakePeer::accept(&l, 64600, 9).await;
    let u = p.update().await;
    assert_eq!(
        u.attributes.as_path,
        Some(vec![bgp::AsSegment::sequence(vec![64512])])
    );
    assert_eq!(u.attributes.local_pref, None);
}

/// A malformed UPDATE ends the session with the NOTIFICATION that names
/// the problem; the speaker reconnects and announces again.
fn raw_update(body: &[u8]) -> Vec<u8> {
    let mut m = bgp::MARKER.to_vec();
    m.extend_from_slice(&((bgp::HEADER_LEN + body.len()) as u16).to_be_bytes());
    m.push(2);
    m.extend_from_slice(body);
    m
}

/// RFC 7606: malformed attributes in a received UPDATE never reset the
/// session (the speaker keeps no received routes: treat-as-withdraw is
/// ignoring them); only an UPDATE whose attribute list overruns it does.
#[tokio::test]
async fn a_malformed_update_is_ignored_and_only_an_unframeable_one_resets() {
    let l = listener(None);
    let s = Session::start(
        config(&l, 64512),
        DesiredRoutes::new(table(&[("192.168.10.5/32", None)])),
        BgpMetrics::new(&Registry::new()),
    );
    let mut p = FakePeer::accept(&l, 64512, 9).await;
    p.update().await;
    // ORIGIN 7; then a COMMUNITIES of 3 bytes (an optional attribute) beside
    // valid well-known ones and a prefix; then an AS4_PATH of garbage.
    let well_known = [0x40, 1, 1, 0, 0x40, 2, 0, 0x40, 3, 4, 10, 0, 0, 1];
    let mut communities = vec![0, 0, 0, 21];
    communities.extend_from_slice(&well_known);
    communities.extend_from_slice(&[0xc0, 8, 3, 0, 0, 1, 24, 192, 0, 2]);
    let mut as4 = vec![0, 0, 0, 20];
    as4.extend_from_slice(&well_known);
    as4.extend_from_slice(&[0xc0, 17, 3, 2, 9, 0]);
    for body in [&[0, 0, 0, 4, 0x40, 1, 1, 7][..], &communities, &as4] {
        p.send_raw(&raw_update(body)).await;
    }
    // Still up and reading: a route refresh is answered with the route.
    p.send(&Message::RouteRefresh { afi: 1, safi: 1 }).await;
    assert_eq!(
        p.update().await.nlri,
        vec!["192.168.10.5/32".parse().expect("net")]
    );
    assert_eq!(s.status().last_error, None);
    // The attribute list claims 9 bytes, there are none.
    p.send_raw(&raw_update(&[0, 0, 0, 9])).await;
    let n = p.notification().await;
    assert_eq!((n.code, n.subcode), (3, 1));
    let mut p = FakePeer::accept(&l, 64512, 9).await;
    assert_eq!(
        p.update().await.nlri,
        vec!["192.168.10.5/32".parse().expect("net")]
    );
    let last = s.status().last_error.unwrap_or_default();
    assert!(last.contains("malformed attribute list"), "{last}");
}

#[tokio::test]
async fn garbage_instead_of_a_header_is_a_synchronization_error() {
    let l = listener(None);
    let _s = Session::start(
        config(&l, 64512),
        DesiredRoutes::new(table(&[])),
        BgpMetrics::new(&Registry::new()),
    );
    let mut p = FakePeer::accept(&l, 64512, 9).await;
    p.send_raw(&[0x42; 19]).await;
    let n = p.notification().await;
    assert_eq!((n.code, n.subcode), (1, 1));
}

#[tokio::test]
async fn a_silent_peer_trips_the_hold_timer() {
    let l = listener(None);
    let _s = Session::start(
        config(&l, 64512),
        DesiredRoutes::new(table(&[])),
        BgpMetrics::new(&Registry::new()),
    );
    // Hold time 3 s negotiated down from our 9; the fake peer never sends
    // keepalives.
    let mut p = FakePeer::accept(&l, 64512, 3).await;
    let started = Instant::now();
    let n = p.notification().await;
    assert_eq!((n.code, n.subcode), (4, 0));
    assert!(started.elapsed() >= Duration::from_secs(2));
}

#[tokio::test]
async fn keepalives_flow_at_a_third_of_the_hold_time() {
    let l = listener(None);
    let _s = Session::start(
        config(&l, 64512),
        DesiredRoutes::new(table(&[])),
        BgpMetrics::new(&Registry::new()),
    );
    let mut p = FakePeer::accept(&l, 64512, 3).await;
    // Two keepalives within the hold time: every second.
    let started = Instant::now();
    assert_eq!(p.next().await, Message::Keepalive);
    assert_eq!(p.next().await, Message::Keepalive);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn tcp_md5_must_match() {
    let l = listener(Some("s3cret"));
    let mut cfg = config(&l, 64512);
    cfg.dial.password = Some("s3cret".into());
    let _s = Session::start(
        cfg.clone(),
        DesiredRoutes::new(table(&[])),
        BgpMetrics::new(&Registry::new()),
    );
    let p = FakePeer::accept(&l, 64512, 9).await;
    assert_eq!(p.open.asn(), 64512);
    drop(p);
    drop(_s);
    // A wrong key: the kernel drops the SYNs, nothing is accepted.
    let l = listener(Some("s3cret"));
    let mut cfg = config(&l, 64512);
    cfg.dial.password = Some("wrong".into());
    let s = Session::start(
        cfg,
        DesiredRoutes::new(table(&[])),
        BgpMetrics::new(&Registry::new()),
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(2), l.accept())
            .await
            .is_err()
    );
    assert!(!s.status().established);
}

#[tokio::test]
async fn a_removed_peer_gets_cease_deconfigured() {
    let l = listener(None);
    let mut speaker = Speaker::new(BgpMetrics::new(&Registry::new()));
    speaker.set_peers(vec![config(&l, 64512)]).await;
    let mut p = FakePeer::accept(&l, 64512, 9).await;
    speaker.set_peers(vec![]).await;
    let n = p.notification().await;
    assert_eq!((n.code, n.subcode), (6, 3));
}

fn routes(peer: &str, prefixes: &[(&str, u32)]) -> PeerRoutes {
    BTreeMap::from([(
        peer.to_owned(),
        prefixes
            .iter()
            .map(|(p, c)| {
                (
                    p.parse().expect("net"),
                    RouteAttrs {
                        local_pref: None,
                        communities: [Community::Standard(1, *c as u16)].into(),
                    },
                )
            })
            .collect(),
    )])
}

/// Two services in one aggregate: the prefix stays while either asks for
/// it, with both services' communities.
#[test]
fn services_sharing_an_aggregate_keep_it_until_the_last_goes() {
    let mut s = Speaker::new(BgpMetrics::new(&Registry::new()));
    let (a, b) = (ServiceKey::new("ns", "a"), ServiceKey::new("ns", "b"));
    let ip: IpAddr = "10.0.0.1".parse().expect("ip");
    assert_eq!(
        s.set_service(&a, &[ip], routes("p", &[("10.0.0.0/24", 1)])),
        None
    );
    s.set_service(
        &b,
        &[ip],
        routes("p", &[("10.0.0.0/24", 2), ("10.0.1.0/24", 2)]),
    );
    let t = s.table("p");
    assert_eq!(t.len(), 2);
    let agg: IpNet = "10.0.0.0/24".parse().expect("net");
    assert_eq!(t[&agg].communities.len(), 2);
    assert_eq!(s.set_service(&b, &[ip], PeerRoutes::new()), Some(vec![ip]));
    let t = s.table("p");
    assert_eq!(t.keys().collect::<Vec<_>>(), [&agg]);
    assert_eq!(t[&agg].communities.len(), 1);
    assert_eq!(s.peers_of(&a), ["p"]);
    assert!(!s.announces(&b));
    assert_eq!(s.services().collect::<Vec<_>>(), [&a]);
    s.set_service(&a, &[ip], PeerRoutes::new());
    assert_eq!(s.services().count(), 0);
    assert!(s.table("p").is_empty());
}

#[test]
fn session_config_follows_the_peer() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let mut peer = Peer::example(
        "x",
        "fc00::2".parse().expect("ip"),
        port,
        PeerAsn::Fixed(64513),
    );
    let c = session_config(&peer, NodeAddresses::default());
    assert_eq!(c.dial.ttl, 1);
    assert_eq!(c.families, vec![Afi::Ipv6]);
    assert_eq!(c.hold_time, DEFAULT_HOLD_TIME);
    peer.ebgp_multi_hop = true;
    peer.dual_stack_address_family = true;
    let c = session_config(&peer, NodeAddresses::default());
    assert_eq!(c.dial.ttl, 255);
    assert_eq!(c.families, vec![Afi::Ipv6, Afi::Ipv4]);
    peer.peer_asn = PeerAsn::Internal;
    peer.ebgp_multi_hop = false;
    assert_eq!(
        session_config(&peer, NodeAddresses::default()).dial.ttl,
        255
    );
    // Unnumbered: the interface, both families, TTL as for an address.
    peer.address = PeerAddress::Interface("eth1".into());
    peer.dual_stack_address_family = false;
    peer.peer_asn = PeerAsn::Fixed(64513);
    let c = session_config(&peer, NodeAddresses::default());
    assert_eq!(
        c.dial.peer,
        Remote::Interface {
            name: "eth1".into(),
            port
        }
    );
    assert_eq!(c.label(), format!("eth1:{port}"));
    assert_eq!(c.families, vec![Afi::Ipv4, Afi::Ipv6]);
    assert_eq!(c.dial.ttl, 1);
}

#[tokio::test]
async fn connects_from_the_source_address() {
    let l = listener(None);
    let mut cfg = config(&l, 64512);
    cfg.dial.source = Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
    let _s = Session::start(
        cfg,
        DesiredRoutes::new(table(&[])),
        BgpMetrics::new(&Registry::new()),
    );
    let (_sock, from) = tokio::time::timeout(Duration::from_secs(10), l.accept())
        .await
        .expect("the speaker connects")
        .expect("accept");
    assert_eq!(from.ip(), IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
}

#[tokio::test]
async fn an_unusable_source_address_is_reported() {
    let l = listener(None);
    let mut cfg = config(&l, 64512);
    // Not an address of this host.
    cfg.dial.source = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 77)));
    let s = Session::start(
        cfg,
        DesiredRoutes::new(table(&[])),
        BgpMetrics::new(&Registry::new()),
    );
    let mut st = s.subscribe();
    let st = tokio::time::timeout(
        Duration::from_secs(10),
        st.wait_for(|st| st.last_error.is_some()),
    )
    .await
    .expect("an error within 10 s")
    .expect("status")
    .clone();
    let e = st.last_error.unwrap_or_default();
    assert!(e.contains("192.0.2.77"), "{e}");
}

/// A directly connected eBGP peer gets TTL 1, multihop and iBGP 255: set
/// on the socket before the SYN.
#[tokio::test]
async fn ttl_follows_ebgp_multihop() {
    for (ttl, want) in [(1, 1), (255, 255)] {
        let l = listener(None);
        let mut cfg = config(&l, 64600);
        cfg.dial.ttl = ttl;
        let Remote::Address(to) = cfg.dial.peer else {
            panic!("numbered");
        };
        let stream = socket::connect(&cfg.dial, to).await.expect("connects");
        assert_eq!(stream.ttl().expect("ttl"), want);
    }
}

/// The session learns changes prefix by prefix: what changed since it
/// last looked, with the current value; nothing when a value is set to
/// what it already was.
#[test]
fn desired_routes_hand_over_only_changes() {
    let d = DesiredRoutes::new(table(&[("10.0.0.1/32", None), ("10.0.0.2/32", None)]));
    assert_eq!(d.len(), 2);
    d.snapshot();
    let p: IpNet = "10.0.0.1/32".parse().expect("net");
    let q: IpNet = "10.0.0.3/32".parse().expect("net");
    let same = d.routes()[&p].clone();
    d.set(p, Some(same));
    assert!(d.take_changes().is_empty());
    d.set(p, None);
    d.set(q, Some(RouteAttrs::default()));
    assert_eq!(
        d.take_changes(),
        vec![(p, None), (q, Some(RouteAttrs::default()))]
    );
    assert!(d.take_changes().is_empty());
    d.replace(table(&[("10.0.0.2/32", None)]));
    let changed: Vec<IpNet> = d.take_changes().into_iter().map(|(p, _)| p).collect();
    assert_eq!(changed, vec![q]);
}

/// BFD seeing the path fail closes an Established session at once with
/// Cease/BFD Down, and the session reconnects; a loss signalled before
/// the session was Established is not held against it (BGP does not wait
/// for BFD).
#[tokio::test]
async fn a_bfd_path_loss_closes_the_established_session() {
    let l = listener(None);
    let (lost, path) = tokio::sync::watch::channel(0u64);
    lost.send_modify(|n| *n += 1);
    let s = Session::start_with(
        config(&l, 64512),
        DesiredRoutes::new(table(&[("192.168.10.5/32", None)])),
        BgpMetrics::new(&Registry::new()),
        session::Links {
            path_lost: path,
            ..session::Links::standalone()
        },
    );
    let mut p = FakePeer::accept(&l, 64512, 9).await;
    p.update().await;
    assert_eq!(s.status().last_error, None);
    lost.send_modify(|n| *n += 1);
    let n = p.notification().await;
    assert_eq!((n.code, n.subcode), (6, 10));
    let mut p = FakePeer::accept(&l, 64512, 9).await;
    p.update().await;
    let last = s.status().last_error.unwrap_or_default();
    assert!(last.contains("BFD saw the path to the peer fail"), "{last}");
}

// Graceful restart against the same fake router.
mod graceful;
mod local_as;
