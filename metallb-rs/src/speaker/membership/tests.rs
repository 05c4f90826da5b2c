//! Membership over real UDP sockets on loopback (ephemeral ports).
//!
//! Nothing here asserts a wall-clock duration: each test waits for an
//! event with a generous timeout (the machine may be compiling at the
//! same time), and compares graceful leave with failure detection by
//! order only.

use super::crypto::Cipher;
use super::wire::{Frame, Identity, Stamp};
use super::*;
use std::future::Future;
use tokio::net::UdpSocket;

const SECRET: &[u8] = b"the memberlist secretkey";
/// Generous: an event that should take a second or two on an idle
/// machine.
const PATIENCE: Duration = Duration::from_secs(30);

fn config(node: &str, bind: SocketAddr, secret: &[u8], timing: Timing) -> Config {
    Config {
        node: node.into(),
        bind,
        secret: secret.to_vec(),
        timing,
    }
}

/// `frame` stamped as `node`'s datagram `seq` of run `epoch` and sealed
/// with the cluster's secret: what a key holder (or a recording) sends.
fn forged(node: &str, epoch: u64, seq: u64, frame: &Frame<'_>) -> Vec<u8> {
    let stamp = Stamp {
        node: node.into(),
        epoch,
        seq,
    };
    let plaintext = stamp
        .prepend(&frame.encode().expect("encode"))
        .expect("stamp");
    Cipher::with_keyring(
        &Keyring::new(SECRET.to_vec(), vec![]).expect("ring"),
        CLUSTER_LABEL,
    )
    .seal(&plaintext)
    .expect("seal")
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

async fn start(node: &str) -> Membership {
    start_with(node, SECRET, Timing::default()).await
}

async fn start_with(node: &str, secret: &[u8], timing: Timing) -> Membership {
    Membership::start(config(node, loopback(), secret, timing))
        .await
        .expect("start")
}

fn seeds(members: &[&Membership]) -> Vec<(String, SocketAddr)> {
    members
        .iter()
        .map(|m| (m.node().to_owned(), m.local_addr()))
        .collect()
}

/// Seeds every member with all of them (its own entry included, as the
/// speaker passes every Node).
fn join_all(members: &[&Membership]) {
    for m in members {
        m.join(seeds(members));
    }
}

/// Waits until `m`'s view satisfies `want`; panics with the view if it
/// does not within [`PATIENCE`].
async fn until(m: &Membership, what: &str, want: impl Fn(&View) -> bool) -> View {
    let mut views = m.subscribe();
    let waited = tokio::time::timeout(PATIENCE, views.wait_for(|v| want(v))).await;
    match waited {
        Ok(Ok(view)) => view.clone(),
        _ => panic!(
            "{}: not {what} within {PATIENCE:?}; view {:?}",
            m.node(),
            m.view()
        ),
    }
}

/// Waits until `check` holds, polling.
async fn until_true(what: &str, check: impl Fn() -> bool) {
    let polled = tokio::time::timeout(PATIENCE, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    if polled.await.is_err() {
        panic!("not {what} within {PATIENCE:?}");
    }
}

fn alive(nodes: &[&str]) -> impl Fn(&View) -> bool {
    let want: BTreeSet<String> = nodes.iter().map(|n| (*n).to_owned()).collect();
    move |v| v.alive == want
}

/// Stops a member's task without a leave and waits until its socket is
/// closed: what SIGKILL does to a speaker.
async fn crash(mut m: Membership) {
    if let Some(task) = m.task.take() {
        task.abort();
        let _ = task.await;
    }
}

async fn all_see(members: &[&Membership], what: &str, want: impl Fn(&View) -> bool) {
    for m in members {
        until(m, what, &want).await;
    }
}

/// Runs `fut` with the tracing output of the test visible on failure.
async fn traced<F: Future<Output = ()>>(fut: F) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "metallb_rs::speaker::membership=info".into()),
        )
        .with_test_writer()
        .try_init();
    fut.await;
}

#[tokio::test]
async fn three_members_see_each_other() {
    traced(async {
        let (a, b, c) = (start("a").await, start("b").await, start("c").await);
        assert_eq!(a.view().alive, BTreeSet::from(["a".to_owned()]));
        join_all(&[&a, &b, &c]);
        all_see(&[&a, &b, &c], "all alive", alive(&["a", "b", "c"])).await;
        assert_eq!(a.members(), 3);
        assert!(a.view().down.is_empty());
        assert_eq!(a.dropped(), Dropped::default());
        for m in [a, b, c] {
            m.leave().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_member_learns_the_others_from_one_seed() {
    traced(async {
        let (a, b, c) = (start("a").await, start("b").await, start("c").await);
        // b and c only know a: each learns the other from a. (a knows
        // every node, as every speaker does from the Nodes: datagrams
        // from addresses of no node are dropped.)
        a.join(seeds(&[&a, &b, &c]));
        b.join(seeds(&[&a]));
        c.join(seeds(&[&a]));
        all_see(&[&a, &b, &c], "all alive", alive(&["a", "b", "c"])).await;
    })
    .await;
}

#[tokio::test]
async fn a_crashed_member_is_declared_failed() {
    traced(async {
        let (a, b, c) = (start("a").await, start("b").await, start("c").await);
        join_all(&[&a, &b, &c]);
        all_see(&[&a, &b, &c], "all alive", alive(&["a", "b", "c"])).await;
        crash(c).await;
        for m in [&a, &b] {
            let view = until(m, "c down", |v| v.down.contains_key("c")).await;
            assert_eq!(view.alive, BTreeSet::from(["a".to_owned(), "b".to_owned()]));
            assert!(!view.down["c"].left, "a crash is not a leave: {view:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn a_leave_is_seen_at_once_and_before_a_simultaneous_crash() {
    traced(async {
        let (a, b) = (start("a").await, start("b").await);
        let (c, d) = (start("c").await, start("d").await);
        join_all(&[&a, &b, &c, &d]);
        all_see(&[&a, &b, &c, &d], "all alive", alive(&["a", "b", "c", "d"])).await;

        // c crashes and d leaves at the same moment.
        crash(c).await;
        d.leave().await;
        // leave() returns once the others confirmed, and they confirm
        // after updating their view: no waiting needed.
        for m in [&a, &b] {
            let view = m.view();
            let down = view.down.get("d").unwrap_or_else(|| {
                panic!("{}: d not down right after its leave: {view:?}", m.node())
            });
            assert!(down.left, "{view:?}");
        }
        // The crash takes failure detection; it comes second.
        for m in [&a, &b] {
            let view = until(m, "c down", |v| v.down.contains_key("c")).await;
            assert!(!view.down["c"].left, "{view:?}");
            assert!(
                view.down["d"].since <= view.down["c"].since,
                "the leave should be seen before the crash: {view:?}"
            );
            assert_eq!(view.alive, BTreeSet::from(["a".to_owned(), "b".to_owned()]));
        }
    })
    .await;
}

#[tokio::test]
async fn a_leave_is_bounded_when_a_member_never_confirms() {
    traced(async {
        let (a, b, c) = (start("a").await, start("b").await, start("c").await);
        join_all(&[&a, &b, &c]);
        all_see(&[&a, &b, &c], "all alive", alive(&["a", "b", "c"])).await;
        // c is gone but not yet detected: a's leave goes unconfirmed by
        // it, and returns after the leave timeout all the same.
        crash(c).await;
        tokio::time::timeout(PATIENCE, a.leave())
            .await
            .expect("leave is bounded");
        let view = b.view();
        assert!(view.down.get("a").is_some_and(|d| d.left), "{view:?}");
    })
    .await;
}

#[tokio::test]
async fn a_restarted_member_is_alive_again_everywhere() {
    traced(async {
        let (a, b, c) = (start("a").await, start("b").await, start("c").await);
        join_all(&[&a, &b, &c]);
        all_see(&[&a, &b, &c], "all alive", alive(&["a", "b", "c"])).await;
        let c_addr = c.local_addr();
        crash(c).await;
        all_see(&[&a, &b], "c down", |v| v.down.contains_key("c")).await;

        // Same node name, same address, new run.
        let c = Membership::start(config("c", c_addr, SECRET, Timing::default()))
            .await
            .expect("restart on the same address");
        c.join(seeds(&[&a, &b, &c]));
        all_see(&[&a, &b, &c], "all alive again", |v| {
            alive(&["a", "b", "c"])(v) && v.down.is_empty()
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn a_member_restarted_before_detection_stays_alive() {
    traced(async {
        let (a, b, c) = (start("a").await, start("b").await, start("c").await);
        join_all(&[&a, &b, &c]);
        all_see(&[&a, &b, &c], "all alive", alive(&["a", "b", "c"])).await;
        let c_addr = c.local_addr();
        crash(c).await;
        let c = Membership::start(config("c", c_addr, SECRET, Timing::default()))
            .await
            .expect("restart on the same address");
        c.join(seeds(&[&a, &b, &c]));
        // Its new run replaces the old one; whether the old one was
        // declared down first is a race, it must end alive everywhere.
        all_see(&[&a, &b, &c], "all alive", |v| {
            alive(&["a", "b", "c"])(v) && v.down.is_empty()
        })
        .await;
    })
    .await;
}

/// The default timings do not declare a healthy member down while the
/// machine is busy (the tests run while cargo compiles).
#[tokio::test]
async fn a_healthy_cluster_sees_no_failure() {
    traced(async {
        let (a, b, c) = (start("a").await, start("b").await, start("c").await);
        join_all(&[&a, &b, &c]);
        all_see(&[&a, &b, &c], "all alive", alive(&["a", "b", "c"])).await;
        // Several detection times: long enough for a false suspicion to
        // turn into a false death. Every change is looked at, so even a
        // death quickly undone by a rejoin is seen.
        let deadline = tokio::time::Instant::now() + Timing::default().expected_detection() * 4;
        let watchers: Vec<_> = [&a, &b, &c]
            .iter()
            .map(|m| {
                let mut views = m.subscribe();
                tokio::spawn(async move {
                    let mut downs = Vec::new();
                    let _ = tokio::time::timeout_at(deadline, async {
                        while views.changed().await.is_ok() {
                            let view = views.borrow_and_update().clone();
                            if !view.down.is_empty() {
                                downs.push(view);
                            }
                        }
                    })
                    .await;
                    downs
                })
            })
            .collect();
        for (m, watcher) in [&a, &b, &c].iter().zip(watchers) {
            let downs = watcher.await.expect("watcher");
            assert!(downs.is_empty(), "{}: false positives: {downs:?}", m.node());
        }
        for m in [&a, &b, &c] {
            assert_eq!(m.view().alive.len(), 3, "{:?}", m.view());
        }
    })
    .await;
}

#[tokio::test]
async fn a_member_with_another_secret_cannot_join() {
    traced(async {
        let timing = Timing {
            // Announce often so the intruder tries many times.
            rejoin_period: Duration::from_millis(100),
            ..Timing::default()
        };
        let a = start_with("a", SECRET, timing.clone()).await;
        let b = start_with("b", SECRET, timing.clone()).await;
        let x = start_with("x", b"another secret, long enough", timing).await;
        join_all(&[&a, &b, &x]);
        all_see(&[&a, &b], "a and b alive", alive(&["a", "b"])).await;
        // Both sides keep knocking; every datagram fails authentication.
        until_true("many datagrams dropped", || {
            a.dropped().auth >= 5 && b.dropped().auth >= 5 && x.dropped().auth >= 5
        })
        .await;
        for m in [&a, &b] {
            let view = m.view();
            assert!(
                !view.alive.contains("x") && !view.down.contains_key("x"),
                "{view:?}"
            );
            assert_eq!(m.dropped().decode, 0);
        }
        assert_eq!(x.view().alive, BTreeSet::from(["x".to_owned()]));
    })
    .await;
}

#[tokio::test]
async fn garbage_is_dropped_and_counted_and_the_member_keeps_working() {
    traced(async {
        let (a, b) = (start("a").await, start("b").await);
        join_all(&[&a, &b]);
        all_see(&[&a, &b], "both alive", alive(&["a", "b"])).await;

        let attacker = UdpSocket::bind(loopback()).await.expect("bind");
        let to = a.local_addr();
        let ours = Cipher::with_keyring(
            &Keyring::new(SECRET.to_vec(), vec![]).expect("ring"),
            CLUSTER_LABEL,
        );
        let theirs = Cipher::new(b"wrong key");
        let swim = Frame::Foca(b"not a swim packet").encode().expect("encode");
        let valid = forged("z", 1, 0, &Frame::Foca(b"not a swim packet"));
        let impostor = Frame::Leave(Identity::new("b".into(), b.local_addr()))
            .encode()
            .expect("encode");

        let malformed = [
            Vec::new(),                  // empty datagram
            b"hello".to_vec(),           // too short for an envelope
            vec![9; 100],                // unknown version
            vec![crypto::VERSION; 3000], // larger than any speaker sends
        ];
        let auth = [
            vec![crypto::VERSION; 100],            // random-looking body
            valid[..valid.len() - 1].to_vec(),     // truncated
            theirs.seal(&swim).expect("seal"),     // another key
            theirs.seal(&impostor).expect("seal"), // a leave under another key
            {
                let mut flipped = valid.clone();
                flipped[30] ^= 1;
                flipped
            },
        ];
        let decode = [
            ours.seal(b"").expect("seal"),            // empty frame
            ours.seal(&[42, 1, 2, 3]).expect("seal"), // unknown frame kind
            ours.seal(&[1, 0xff]).expect("seal"),     // bad leave body
            valid.clone(),                            // foca cannot decode it
        ];
        let replayed = [valid];
        for d in malformed
            .iter()
            .chain(&auth)
            .chain(&decode)
            .chain(&replayed)
        {
            attacker.send_to(d, to).await.expect("send");
        }
        until_true("every datagram counted", || {
            a.dropped()
                == Dropped {
                    malformed: malformed.len() as u64,
                    auth: auth.len() as u64,
                    decode: decode.len() as u64,
                    replayed: 1,
                    ..Dropped::default()
                }
        })
        .await;
        // b was not affected: still alive in a's view.
        assert!(a.view().alive.contains("b"));

        // a still works: a newcomer joins through it.
        let c = start("c").await;
        c.join(seeds(&[&a]));
        all_see(&[&a, &b, &c], "all alive", alive(&["a", "b", "c"])).await;
        assert_eq!(
            a.dropped().total(),
            (malformed.len() + auth.len() + decode.len() + replayed.len()) as u64
        );
    })
    .await;
}

#[tokio::test]
async fn a_leave_in_our_own_name_is_rejected() {
    let a = start("a").await;
    // A node on loopback, so datagrams from loopback are a node's.
    a.join(vec![("b".into(), SocketAddr::from(([127, 0, 0, 1], 9)))]);
    let sock = UdpSocket::bind(loopback()).await.expect("bind");
    let me = Frame::Leave(Identity::new("a".into(), a.local_addr()));
    for datagram in [forged("b", 1, 0, &me), forged("a", 1, 0, &me)] {
        sock.send_to(&datagram, a.local_addr()).await.expect("send");
    }
    until_true("rejected", || a.dropped().rejected == 2).await;
    assert_eq!(a.view().alive, BTreeSet::from(["a".to_owned()]));
}

#[tokio::test]
async fn keys_rotate_through_the_keyring_without_a_split() {
    traced(async {
        let (a, b) = (start("a").await, start("b").await);
        join_all(&[&a, &b]);
        all_see(&[&a, &b], "both alive", alive(&["a", "b"])).await;
        let old = SECRET.to_vec();
        let new = b"the next memberlist secretkey".to_vec();
        let ring = |primary: &[u8], accepted: &[&[u8]]| {
            Keyring::new(
                primary.to_vec(),
                accepted.iter().map(|k| k.to_vec()).collect(),
            )
            .expect("ring")
        };
        // As memberlist: accept the new key everywhere, make it primary
        // everywhere, drop the old one.
        let steps = [ring(&old, &[&new]), ring(&new, &[&old]), ring(&new, &[])];
        for step in steps {
            a.set_keyring(step.clone());
            b.set_keyring(step);
            // A few probe rounds under the new ring.
            tokio::time::sleep(Timing::default().probe_period * 3).await;
        }
        all_see(&[&a, &b], "both alive", alive(&["a", "b"])).await;
        assert_eq!(a.dropped().auth + b.dropped().auth, 0);
        // The reload takes effect: a key b does not have splits them.
        a.set_keyring(ring(b"a key nobody else has", &[]));
        until_true("b refuses a's datagrams", || b.dropped().auth >= 3).await;
    })
    .await;
}

#[tokio::test]
async fn gossip_metrics_count_members_probes_and_drops() {
    traced(async {
        let (a, b) = (start("a").await, start("b").await);
        join_all(&[&a, &b]);
        all_see(&[&a, &b], "both alive", alive(&["a", "b"])).await;
        let registry = prometheus::Registry::new();
        registry
            .register(Box::new(a.metrics()))
            .expect("registered");
        let sock = UdpSocket::bind(SocketAddr::from(([127, 0, 0, 2], 0)))
            .await
            .expect("bind");
        sock.send_to(b"x", a.local_addr()).await.expect("send");
        until_true("dropped and probed", || {
            a.dropped().unknown_sender == 1 && a.metrics().counters.probes() >= 2
        })
        .await;
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .expect("encode");
        for line in [
            "metallb_rs_gossip_members{state=\"alive\"} 2",
            "metallb_rs_gossip_members{state=\"down\"} 0",
            "metallb_rs_gossip_dropped_datagrams_total{reason=\"unknown_sender\"} 1",
            "metallb_rs_gossip_dropped_datagrams_total{reason=\"replayed\"} 0",
        ] {
            assert!(text.contains(line), "no {line} in\n{text}");
        }
        assert!(!text.contains("metallb_rs_gossip_probes_total 0"), "{text}");
    })
    .await;
}

#[tokio::test]
async fn replayed_datagrams_are_dropped() {
    traced(async {
        let (a, b) = (start("a").await, start("b").await);
        join_all(&[&a, &b]);
        all_see(&[&a, &b], "both alive", alive(&["a", "b"])).await;
        let sock = UdpSocket::bind(loopback()).await.expect("bind");
        // A datagram of z's run 7, recorded: the first copy reaches the
        // protocol (which cannot decode it), a second copy and anything
        // of an older run of z do not.
        let recorded = forged("z", 7, 0, &Frame::Foca(b"recorded"));
        let older_run = forged("z", 6, 1, &Frame::Foca(b"older"));
        for d in [&recorded, &recorded, &older_run] {
            sock.send_to(d, a.local_addr()).await.expect("send");
        }
        let want = Dropped {
            decode: 1,
            replayed: 2,
            ..Dropped::default()
        };
        until_true("two replays dropped", || a.dropped() == want).await;
        assert!(a.view().alive.contains("b"));
    })
    .await;
}

#[tokio::test]
async fn datagrams_from_an_address_of_no_node_are_dropped_before_decryption() {
    traced(async {
        let (a, b) = (start("a").await, start("b").await);
        join_all(&[&a, &b]);
        all_see(&[&a, &b], "both alive", alive(&["a", "b"])).await;
        // Loopback, but no node's address.
        let stranger = UdpSocket::bind(SocketAddr::from(([127, 0, 0, 2], 0)))
            .await
            .expect("bind");
        let leave = forged(
            "b",
            b.identity.bump,
            1 << 40,
            &Frame::Leave(b.identity.clone()),
        );
        for d in [leave, vec![crypto::VERSION; 100]] {
            stranger.send_to(&d, a.local_addr()).await.expect("send");
        }
        until_true("dropped", || a.dropped().unknown_sender == 2).await;
        assert_eq!(a.dropped().total(), 2, "{:?}", a.dropped());
        assert!(a.view().alive.contains("b"));
    })
    .await;
}

#[tokio::test]
async fn a_leave_is_acknowledged_to_the_leavers_known_address_only() {
    traced(async {
        let (a, b) = (start("a").await, start("b").await);
        join_all(&[&a, &b]);
        all_see(&[&a, &b], "both alive", alive(&["a", "b"])).await;
        // A key holder sends b's leave from another socket: a takes it
        // (it is b's own current identity) but answers b, not the socket.
        let sock = UdpSocket::bind(loopback()).await.expect("bind");
        let leave = forged(
            "b",
            b.identity.bump,
            1 << 40,
            &Frame::Leave(b.identity.clone()),
        );
        sock.send_to(&leave, a.local_addr()).await.expect("send");
        until(&a, "b left", |v| v.down.get("b").is_some_and(|d| d.left)).await;
        let mut buf = [0u8; 2048];
        let answered = tokio::time::timeout(Duration::from_secs(1), sock.recv_from(&mut buf)).await;
        assert!(answered.is_err(), "the ack went to the datagram's source");
    })
    .await;
}

#[tokio::test]
async fn a_leave_only_counts_for_the_senders_own_current_identity() {
    traced(async {
        let (a, b, c) = (start("a").await, start("b").await, start("c").await);
        join_all(&[&a, &b, &c]);
        all_see(&[&a, &b, &c], "all alive", alive(&["a", "b", "c"])).await;
        let sock = UdpSocket::bind(loopback()).await.expect("bind");
        let mut older = b.identity.clone();
        older.bump -= 1;
        let mut newer = b.identity.clone();
        newer.bump += 1;
        let forgeries = [
            // c telling that b leaves.
            forged(
                "c",
                c.identity.bump,
                1 << 40,
                &Frame::Leave(b.identity.clone()),
            ),
            // b's previous run, and a run b never announced.
            forged("b", b.identity.bump, 1 << 40, &Frame::Leave(older)),
            forged("b", b.identity.bump, (1 << 40) + 1, &Frame::Leave(newer)),
        ];
        for d in &forgeries {
            sock.send_to(d, a.local_addr()).await.expect("send");
        }
        until_true("all rejected", || a.dropped().rejected == 3).await;
        // (Stamped far ahead, the forgeries also make a drop b's own
        // next datagrams as replays: a key holder can disturb anything.)
        assert!(a.view().alive.contains("b"), "{:?}", a.view());
    })
    .await;
}

#[tokio::test]
async fn join_requests_are_rate_limited() {
    traced(async {
        let a = start("a").await;
        a.join(vec![("b".into(), SocketAddr::from(([127, 0, 0, 1], 9)))]);
        let sock = UdpSocket::bind(loopback()).await.expect("bind");
        let header = foca::Header {
            src: Identity {
                node: "z".into(),
                addr: sock.local_addr().expect("addr"),
                bump: 1,
            },
            src_incarnation: 0,
            dst: Identity::seed("a".into(), a.local_addr()),
            message: foca::Message::Announce,
        };
        let mut packet = Vec::new();
        foca::Codec::encode_header(&mut foca::PostcardCodec, &header, &mut packet).expect("encode");
        const SENT: u64 = 30;
        for seq in 0..SENT {
            let d = forged("z", 1, seq, &Frame::Foca(&packet));
            sock.send_to(&d, a.local_addr()).await.expect("send");
        }
        // Each of the first few is answered with a feed; the rest are
        // dropped (a few more pass if sending took long).
        until_true("most join requests dropped", || {
            a.dropped().rate_limited >= SENT - 10
        })
        .await;
        assert_eq!(a.dropped().total(), a.dropped().rate_limited);
    })
    .await;
}

#[tokio::test]
async fn leave_alone_returns_at_once() {
    // Nobody to tell: leave does not wait for the timeout. With a leave
    // timeout far beyond the test's patience, a leave that waited for it
    // runs out of patience first.
    let timing = Timing {
        leave_timeout: PATIENCE * 120,
        ..Timing::default()
    };
    let a = start_with("a", SECRET, timing).await;
    if tokio::time::timeout(PATIENCE, a.leave()).await.is_err() {
        panic!("a member alone waited for its leave timeout instead of returning at once");
    }
}

#[tokio::test]
async fn start_rejects_bad_configs_with_what_to_do() {
    let cases = [
        (
            config("", loopback(), SECRET, Timing::default()),
            "node's name",
        ),
        (config("a", loopback(), b"", Timing::default()), "secretkey"),
        (
            config("a", loopback(), b"fifteen bytes!!", Timing::default()),
            "at least 16 random bytes",
        ),
        (
            config(
                "a",
                "0.0.0.0:7946".parse().expect("addr"),
                SECRET,
                Timing::default(),
            ),
            "InternalIP",
        ),
        (
            config(&"n".repeat(254), loopback(), SECRET, Timing::default()),
            "longer than Kubernetes allows",
        ),
        (
            config(
                "a",
                loopback(),
                SECRET,
                Timing {
                    probe_rtt: Duration::from_secs(1),
                    ..Timing::default()
                },
            ),
            "must be shorter than probe_period",
        ),
        (
            config(
                "a",
                loopback(),
                SECRET,
                Timing {
                    num_indirect_probes: 0,
                    ..Timing::default()
                },
            ),
            "num_indirect_probes",
        ),
        (
            config(
                "a",
                loopback(),
                SECRET,
                Timing {
                    gossip_period: Duration::ZERO,
                    ..Timing::default()
                },
            ),
            "gossip_period is zero",
        ),
    ];
    for (config, says) in cases {
        let err = Membership::start(config.clone())
            .await
            .expect_err("invalid config");
        assert!(err.to_string().contains(says), "{config:?}: {err}");
    }
}

#[tokio::test]
async fn a_busy_port_is_a_bind_error() {
    let a = start("a").await;
    let err = Membership::start(config("b", a.local_addr(), SECRET, Timing::default()))
        .await
        .expect_err("port in use");
    assert!(matches!(err, MembershipError::Bind { .. }), "{err}");
    assert!(err.to_string().contains("another speaker"), "{err}");
}

#[test]
fn the_handle_can_be_shared_across_tasks() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Membership>();
    send_sync::<View>();
}

#[test]
fn default_timing_is_valid_and_fast() {
    let t = Timing::default();
    t.validate().expect("valid");
    assert_eq!(t.expected_detection(), Duration::from_millis(1300));
    assert!(t.foca_config().is_ok());
}

#[test]
fn config_debug_hides_the_secret() {
    let c = config("a", loopback(), b"hunter2", Timing::default());
    let printed = format!("{c:?}");
    assert!(
        !printed.contains("hunter2") && printed.contains("<7 bytes>"),
        "{printed}"
    );
}

#[test]
fn drop_reasons_have_stable_labels() {
    let labels: Vec<&str> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(
        labels,
        [
            "malformed",
            "auth",
            "decode",
            "rejected",
            "unknown_sender",
            "replayed",
            "rate_limited"
        ]
    );
    let d = Dropped {
        malformed: 1,
        auth: 2,
        decode: 3,
        rejected: 4,
        unknown_sender: 5,
        replayed: 6,
        rate_limited: 7,
    };
    assert_eq!(d.total(), 28);
    assert_eq!(d.get(DropReason::Decode), 3);
}
