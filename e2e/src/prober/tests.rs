//! The prober's frames against the codecs, then the prober itself
//! against real kernels: a lab network of its own where two node
//! namespaces carry the same address and both answer for it.

use super::*;
use devenv::lab::netns::{self, Topology};
use devenv::prereq;
use metallb_rs::net::ndp::Flags;
use std::collections::BTreeSet;

const OURS: Mac = Mac([2, 0, 0, 0, 0, 1]);
const NODE: Mac = Mac([2, 0, 0, 0, 0, 0xa]);

fn v4(s: &str) -> Ipv4Addr {
    s.parse().expect("ipv4")
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().expect("ipv6")
}

#[test]
fn arp_question_and_answers() {
    let (ours, target) = (v4("10.0.0.2"), v4("10.0.0.100"));
    let source = Source::V4(ours);
    let q = question(OURS, source, IpAddr::V4(target));
    let f = Frame::parse(&q).expect("frame");
    assert_eq!((f.dst, f.src), (Mac::BROADCAST, OURS));
    let req = Arp::parse(f.payload).expect("arp");
    assert_eq!((req.op, req.spa, req.tpa), (Op::Request, ours, target));

    let reply = req.reply(NODE).frame(OURS, NODE);
    assert_eq!(answer(OURS, source, IpAddr::V4(target), &reply), Some(NODE));
    // A reply about another address, a gratuitous announcement and an
    // answer to another host are not answers to us.
    let other = Arp {
        tpa: v4("10.0.0.101"),
        ..req
    }
    .reply(NODE)
    .frame(OURS, NODE);
    assert_eq!(answer(OURS, source, IpAddr::V4(target), &other), None);
    let garp = Arp::gratuitous(Op::Reply, NODE, target).frame(Mac::BROADCAST, NODE);
    assert_eq!(answer(OURS, source, IpAddr::V4(target), &garp), None);
    let to_other = Arp {
        sha: Mac([2, 0, 0, 0, 0, 9]),
        spa: v4("10.0.0.9"),
        ..req
    }
    .reply(NODE)
    .frame(Mac([2, 0, 0, 0, 0, 9]), NODE);
    assert_eq!(answer(OURS, source, IpAddr::V4(target), &to_other), None);
    // Our own question is not an answer.
    assert_eq!(answer(OURS, source, IpAddr::V4(target), &q), None);
}

#[test]
fn ndp_question_and_answers() {
    let (ours, target) = (v6("fe80::1"), v6("fc00::100"));
    let source = Source::V6(ours);
    let q = question(OURS, source, IpAddr::V6(target));
    let f = Frame::parse(&q).expect("frame");
    assert_eq!(f.dst, ndp::multicast_mac(ndp::solicited_node(target)));
    let ns = ndp::Packet::parse(f.payload).expect("solicitation");
    assert_eq!(
        ns.msg,
        Message::NeighborSolicitation {
            target,
            source_ll: Some(OURS)
        }
    );

    let na = |dst: Ipv6Addr, solicited: bool, target: Ipv6Addr, ll: Option<Mac>| {
        ndp::Packet {
            src: target,
            dst,
            msg: Message::NeighborAdvertisement {
                flags: Flags {
                    router: false,
                    solicited,
                    override_: true,
                },
                target,
                target_ll: ll,
            },
        }
        .frame(OURS, NODE)
    };
    let t = IpAddr::V6(target);
    assert_eq!(
        answer(OURS, source, t, &na(ours, true, target, Some(NODE))),
        Some(NODE)
    );
    // Without the option, the frame's source.
    assert_eq!(
        answer(OURS, source, t, &na(ours, true, target, None)),
        Some(NODE)
    );
    // Unsolicited, to someone else, or about another address: no.
    assert_eq!(
        answer(
            OURS,
            source,
            t,
            &na(ndp::ALL_NODES, false, target, Some(NODE))
        ),
        None
    );
    assert_eq!(
        answer(
            OURS,
            source,
            t,
            &na(v6("fe80::9"), true, target, Some(NODE))
        ),
        None
    );
    assert_eq!(
        answer(
            OURS,
            source,
            t,
            &na(ours, true, v6("fc00::101"), Some(NODE))
        ),
        None
    );
    assert_eq!(answer(OURS, source, t, &q), None);
}

fn ip(args: &[&str]) {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The address `offset` hosts into the subnet of `host`'s eth0 of the
/// family of `v6`.
fn address_in(lab: &netns::Lab, v6: bool, offset: usize) -> IpAddr {
    let net = lab.nodes[0]
        .interface("eth0")
        .expect("eth0")
        .addresses
        .iter()
        .find(|a| a.addr().is_ipv6() == v6)
        .expect("an address of the family")
        .trunc();
    net.hosts().nth(offset).expect("room in the subnet")
}

#[test]
fn two_namespaces_answering_one_address_are_two_macs_needs_root() {
    if !prereq::netns_or_skip() {
        return;
    }
    let name = format!("pr{}", std::process::id() % 100_000);
    let _guard = test_support::Guard::new(&name, netns::destroy);
    netns::destroy(&name).expect("remove leftovers");
    let lab = netns::ensure(&Topology::new(&name, 1)).expect("lab network");
    let (a, b) = (&lab.nodes[0], &lab.nodes[1]);
    let mac = |h: &netns::LabHost| h.interface("eth0").expect("eth0").mac;
    let external = lab.external.namespace.as_str();

    for v6 in [false, true] {
        let target = address_in(&lab, v6, 199);
        let (plen, extra): (&str, &[&str]) = if v6 { ("128", &["nodad"]) } else { ("32", &[]) };
        let cidr = format!("{target}/{plen}");
        let add = |host: &netns::LabHost| {
            let mut args = vec![
                "-n",
                host.namespace.as_str(),
                "addr",
                "add",
                &cidr,
                "dev",
                "eth0",
            ];
            args.extend_from_slice(extra);
            ip(&args);
        };
        let prober = Prober::open(Some(external), "eth0", target).expect("prober");

        // Nobody has it yet: silence.
        let w = prober.window(Duration::from_millis(500)).expect("window");
        assert_eq!(w.rounds.len(), 5);
        assert!(w.macs().is_empty(), "{target}: {w:?}");
        assert_eq!(w.silent_rounds(), 5);

        // One namespace: its MAC, every round.
        add(a);
        let w = prober.window(Duration::from_secs(1)).expect("window");
        assert!(
            w.only(mac(a)),
            "{target}: {}",
            w.describe(&|m| m.to_string())
        );

        // Both: two MACs in one round, a split stretch as long as the
        // window.
        add(b);
        let w = prober.window(Duration::from_secs(1)).expect("window");
        assert_eq!(w.macs(), BTreeSet::from([mac(a), mac(b)]), "{target}");
        assert!(
            w.split_rounds() >= 9 && w.longest_split() >= Duration::from_millis(900),
            "{target}: {}",
            w.describe(&|m| m.to_string())
        );
        assert!(w.expect_only(mac(a), &|m| m.to_string()).is_err());

        // Only b again.
        ip(&["-n", &a.namespace, "addr", "del", &cidr, "dev", "eth0"]);
        let w = prober.window(Duration::from_secs(1)).expect("window");
        assert!(
            w.only(mac(b)),
            "{target}: {}",
            w.describe(&|m| m.to_string())
        );
        ip(&["-n", &b.namespace, "addr", "del", &cidr, "dev", "eth0"]);
    }
}
