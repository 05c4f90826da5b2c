//! The responders' answers and the announcer's bookkeeping.

use super::respond::owned_fn;
use super::*;
use crate::net::ethernet::Frame;

const ME: Mac = Mac([2, 0, 0, 0, 0, 0xaa]);
const THEM: Mac = Mac([2, 0, 0, 0, 0, 0x01]);

fn owned(ip: IpAddr, iface: &str) -> Option<bool> {
    match ip.to_string().as_str() {
        "10.0.0.100" | "fc00::100" => Some(iface == "eth0"),
        _ => None,
    }
}

fn v4(s: &str) -> std::net::Ipv4Addr {
    s.parse().expect("ip")
}

#[test]
fn arp_replies_only_for_owned_ips_on_matching_interfaces() {
    let req = arp_request_frame(THEM, v4("10.0.0.2"), v4("10.0.0.100"));
    let (ip, reply) = arp_response(&req, "eth0", ME, owned).expect("answered");
    assert_eq!(ip.to_string(), "10.0.0.100");
    let f = Frame::parse(&reply).expect("frame");
    assert_eq!((f.dst, f.src), (THEM, ME));
    let a = arp::Arp::parse(f.payload).expect("arp");
    assert_eq!(
        (a.op, a.sha, a.spa, a.tha, a.tpa),
        (arp::Op::Reply, ME, v4("10.0.0.100"), THEM, v4("10.0.0.2"))
    );
    assert_eq!(
        arp_response(&req, "eth1", ME, owned).err(),
        Some(DropReason::NotMatchInterface)
    );
    let other = arp_request_frame(THEM, v4("10.0.0.2"), v4("10.0.0.7"));
    assert_eq!(
        arp_response(&other, "eth0", ME, owned).err(),
        Some(DropReason::AnnounceIp)
    );
    let reply_frame =
        arp::Arp::gratuitous(arp::Op::Reply, THEM, v4("10.0.0.100")).frame(Mac::BROADCAST, THEM);
    assert_eq!(
        arp_response(&reply_frame, "eth0", ME, owned).err(),
        Some(DropReason::ArpReply)
    );
    let mut unicast_elsewhere = req.clone();
    unicast_elsewhere[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x55]);
    assert_eq!(
        arp_response(&unicast_elsewhere, "eth0", ME, owned).err(),
        Some(DropReason::EthernetDestination)
    );
    assert_eq!(
        arp_response(&req[..20], "eth0", ME, owned).err(),
        Some(DropReason::Error)
    );
}

fn ns_frame(src: &str, dst_mac: Mac, sll: Option<Mac>) -> Vec<u8> {
    let target: Ipv6Addr = "fc00::100".parse().expect("ip");
    let src: Ipv6Addr = src.parse().expect("ip");
    let dst = if src.is_unspecified() || dst_mac.is_multicast() {
        ndp::solicited_node(target)
    } else {
        "fc00::100".parse().expect("ip")
    };
    ndp::Packet {
        src,
        dst,
        msg: ndp::Message::NeighborSolicitation {
            target,
            source_ll: sll,
        },
    }
    .frame(dst_mac, THEM)
}

fn parse_na(frame: &[u8]) -> (Frame<'_>, ndp::Packet) {
    let f = Frame::parse(frame).expect("frame");
    let p = ndp::Packet::parse(f.payload).expect("na");
    (f, p)
}

#[test]
fn ndp_answers_solicitations_with_and_without_source_ll() {
    let multicast = ndp::multicast_mac(ndp::solicited_node("fc00::100".parse().expect("ip")));
    let (_, reply) = ndp_response(
        &ns_frame("fc00::2", multicast, Some(THEM)),
        "eth0",
        ME,
        owned,
    )
    .expect("answered");
    let (f, p) = parse_na(&reply);
    assert_eq!((f.dst, f.src), (THEM, ME));
    assert_eq!(
        p.src,
        "fc00::100".parse::<Ipv6Addr>().expect("ip"),
        "from the announced address"
    );
    assert_eq!(p.dst, "fc00::2".parse::<Ipv6Addr>().expect("ip"));
    let ndp::Message::NeighborAdvertisement {
        flags, target_ll, ..
    } = p.msg
    else {
        panic!("not an NA")
    };
    assert!(flags.solicited && !flags.override_);
    assert_eq!(target_ll, Some(ME));
    // Upstream bug #2920: a unicast NUD probe without source LL is answered too.
    let (_, reply) =
        ndp_response(&ns_frame("fc00::2", ME, None), "eth0", ME, owned).expect("answered");
    assert_eq!(parse_na(&reply).0.dst, THEM, "to the frame's source MAC");
    // DAD for our address: defended to all nodes, not solicited.
    let (_, reply) =
        ndp_response(&ns_frame("::", multicast, None), "eth0", ME, owned).expect("answered");
    let (f, p) = parse_na(&reply);
    assert_eq!(
        (f.dst, p.dst),
        (ndp::multicast_mac(ndp::ALL_NODES), ndp::ALL_NODES)
    );
    assert_eq!(
        ndp_response(
            &ns_frame("fc00::2", multicast, Some(THEM)),
            "eth1",
            ME,
            owned
        )
        .err(),
        Some(DropReason::NotMatchInterface)
    );
    let elsewhere = ns_frame("fc00::2", Mac([2, 0, 0, 0, 0, 0x55]), Some(THEM));
    assert_eq!(
        ndp_response(&elsewhere, "eth0", ME, owned).err(),
        Some(DropReason::EthernetDestination)
    );
}

#[test]
fn garbage_is_dropped_as_error_never_panics() {
    for len in 0..80 {
        let junk: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
        assert!(arp_response(&junk, "eth0", ME, owned).is_err());
        assert!(ndp_response(&junk, "eth0", ME, owned).is_err());
    }
}

#[test]
fn a_silenced_announcer_answers_nothing_until_let_go() {
    let ip: IpAddr = "10.0.0.100".parse().expect("ip");
    let table: SharedTable = Arc::new(RwLock::new(Table {
        ips: [(ip, Interfaces::All)].into(),
        silenced: false,
    }));
    let silencer = Silencer(table.clone());
    let answers = owned_fn(&table);
    assert_eq!(answers(ip, "eth0"), Some(true));
    assert!(silencer.set(true), "silencing is a change");
    assert!(silencer.silenced());
    assert_eq!(answers(ip, "eth0"), None);
    assert!(!silencer.set(true), "silencing twice changes nothing");
    assert!(silencer.set(false));
    assert_eq!(answers(ip, "eth0"), Some(true));
}

#[tokio::test]
async fn an_address_is_answered_while_any_of_its_services_is_announced() {
    let mut a = Announcer::new(Layer2Metrics::new(&prometheus::Registry::new()));
    let (one, two) = (ServiceKey::new("ns", "one"), ServiceKey::new("ns", "two"));
    let shared: IpAddr = "10.0.0.100".parse().expect("ip");
    let own: IpAddr = "fc00::100".parse().expect("ip");
    let answers = |a: &Announcer, ip| owned_fn(&a.table)(ip, "eth0");
    assert_eq!(a.set(&one, &[shared], Interfaces::All).await, Ok(None));
    assert_eq!(a.set(&two, &[shared, own], Interfaces::All).await, Ok(None));
    assert_eq!(
        a.set(&two, &[shared, own], Interfaces::All).await,
        Ok(Some(vec![shared, own])),
        "announcing again returns what was announced"
    );
    assert_eq!(a.withdraw(&one).await, Some(vec![shared]));
    assert_eq!(answers(&a, shared), Some(true), "two still uses it");
    assert_eq!(
        a.set(&two, &[own], Interfaces::All).await,
        Ok(Some(vec![shared, own]))
    );
    assert_eq!(answers(&a, shared), None, "no service uses it any more");
    assert_eq!(answers(&a, own), Some(true));
    assert_eq!(
        a.set(
            &one,
            &[shared],
            Interfaces::Named(["eth9".to_owned()].into())
        )
        .await,
        Err(AnnounceError::NoInterface(["eth9".to_owned()].into())),
        "no responder on a named interface that does not exist"
    );
    assert_eq!(a.withdraw(&two).await, Some(vec![own]));
    assert_eq!(a.withdraw(&two).await, None);
    assert_eq!(answers(&a, own), None);
    assert_eq!(a.services().count(), 0);
}
