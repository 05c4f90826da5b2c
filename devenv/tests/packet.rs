//! metallb-rs's packet sockets on a real kernel, on the loopback
//! interface of a network namespace of the test's own, with an EtherType
//! reserved for local experiments (nothing else on the link uses it): the
//! blocking socket the responders read with, the send-only socket the
//! announcer writes with, and the kernel's drop counter. Needs root (raw
//! sockets, namespaces) and skips with a printed reason without it.

use devenv::lab::enter::in_netns;
use metallb_rs::net::ethernet::Mac;
use metallb_rs::net::packet::{BlockingPacketSocket, PacketSocket};
use std::time::{Duration, Instant};

/// IEEE 802 local experimental EtherType 1.
const ETHERTYPE: u16 = 0x88b5;

fn frame(n: u32) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&Mac::BROADCAST.0);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&n.to_be_bytes());
    f.resize(60, 0);
    f
}

/// A namespace of this test's own (removed on drop) with `lo` up.
struct Namespace(String);

impl Namespace {
    fn new() -> Self {
        let name = format!("pkt{}", std::process::id() % 100_000);
        let run = |args: &[&str]| {
            let out = std::process::Command::new("ip")
                .args(args)
                .output()
                .expect("ip");
            assert!(
                out.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &name])
            .output();
        run(&["netns", "add", &name]);
        let ns = Namespace(name);
        run(&["-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .output();
    }
}

#[test]
fn blocking_receiver_send_only_sender_and_the_drop_counter_needs_root() {
    if !devenv::prereq::netns_or_skip() {
        return;
    }
    let ns = Namespace::new();
    in_netns(&ns.0, || {
        let lo = metallb_rs::net::iface::list()
            .expect("interfaces")
            .into_iter()
            .find(|i| i.name == "lo")
            .expect("lo");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let wait = Duration::from_millis(100);
            let rx = BlockingPacketSocket::open(lo.index, ETHERTYPE, wait).expect("receiver");
            let tx = PacketSocket::open_sender(lo.index, ETHERTYPE).expect("sender");

            // Nothing sent: a receive returns empty after its wait.
            let mut buf = [0u8; 128];
            let t = Instant::now();
            assert!(rx.recv(&mut buf).expect("recv").is_none());
            assert!(
                t.elapsed() >= Duration::from_millis(80),
                "{:?}",
                t.elapsed()
            );

            // What the sender sends reaches the receiver; the sender itself
            // receives nothing, not even its own frames.
            tx.send(&frame(7)).await.expect("send");
            let mut got = Vec::new();
            while let Some((n, _)) = rx.recv(&mut buf).expect("recv") {
                got.push(buf[14..18].to_vec());
                assert!(n >= 18);
            }
            assert!(got.contains(&7u32.to_be_bytes().to_vec()), "{got:?}");
            let sender_got =
                tokio::time::timeout(Duration::from_millis(200), tx.recv(&mut buf)).await;
            assert!(
                sender_got.is_err(),
                "the send-only socket received {sender_got:?}"
            );

            // A small buffer left unread: the kernel drops, and says how
            // many once (the counter resets on every read).
            rx.set_recv_buffer(4096).expect("buffer");
            assert_eq!(rx.take_drops().expect("stats"), 0);
            for i in 0..500 {
                tx.send(&frame(i)).await.expect("send");
            }
            let drops = rx.take_drops().expect("stats");
            assert!(drops > 0, "500 frames into a 4 KiB buffer dropped none");
            assert_eq!(rx.take_drops().expect("stats"), 0, "read once, reset");
        });
    })
    .expect("in the namespace");
}
