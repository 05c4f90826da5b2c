//! Membership under hostile input: garbage, forged and replayed
//! datagrams, strangers' addresses, leaves in another's name, join
//! floods, and key rotation, over real UDP sockets on loopback.

use super::*;
#[tokio::test]
async fn garbage_is_dropped_and_counted_and_the_member_keeps_working() {
    traced(async {
        let (a, b) = (start("a").await, start("b").await);
        join_all(&[&a, &b]);
        all_see(&[&a, &b], "both alive", alive(&["a", "b"])).await;

        let attacker = UdpSocket::bind(loopback()).await.expect("bind");
        // z is a Node whose speaker does not run: the attacker speaks
        // from its address (a sender is bound to its Node's address).
        a.join(with_node(&[&a, &b], "z", &attacker));
        let to = a.local_addr();
        let ours = Cipher::with_keyring(
            &Keyring::new(SECRET.to_vec(), vec![]).expect("ring"),
            CLUSTER_LABEL,
        );
        let theirs = Cipher::new(b"wrong key");
        let swim = Frame::Foca(b"not a swim packet").encode().expect("encode");
        let valid = forged("z", 1, 0, &Frame::Foca(b"not a swim packet"));
        let impostor = Frame::Leave(Identity::new("b".into(), b.local_addr(), 1))
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

        // a still works: a newcomer joins through it (once a knows its
        // Node, as the Node watch tells every speaker).
        let c = start("c").await;
        a.join(with_node(&[&a, &b, &c], "z", &attacker));
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
    let me = Frame::Leave(Identity::new("a".into(), a.local_addr(), 1));
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
        a.join(with_node(&[&a, &b], "z", &sock));
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
        let sock = UdpSocket::bind(loopback()).await.expect("bind");
        a.join(vec![
            ("b".into(), SocketAddr::from(([127, 0, 0, 1], 9))),
            ("z".into(), sock.local_addr().expect("addr")),
        ]);
        let header = foca::Header {
            src: Identity::new("z".into(), sock.local_addr().expect("addr"), 1),
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

/// The seeds of `members` and a node `name` gossiping from `sock`.
fn with_node(members: &[&Membership], name: &str, sock: &UdpSocket) -> Vec<(String, SocketAddr)> {
    let mut all = seeds(members);
    all.push((name.to_owned(), sock.local_addr().expect("addr")));
    all
}

/// A sender is bound to its Node's address: a datagram stamped in the
/// name of a node gossiping elsewhere, or of a name that is no node, is
/// rejected before replay windows or join tokens are spent on it; a run
/// from the far future is rejected too (it would shadow the sender's
/// real runs).
#[tokio::test]
async fn senders_are_bound_to_their_node_address() {
    traced(async {
        let (a, b) = (start("a").await, start("b").await);
        join_all(&[&a, &b]);
        all_see(&[&a, &b], "both alive", alive(&["a", "b"])).await;
        let sock = UdpSocket::bind(SocketAddr::from(([127, 0, 0, 2], 0)))
            .await
            .expect("bind");
        // b gossips from 127.0.0.1; 127.0.0.2 is z's (a seed) address.
        a.join(with_node(&[&a, &b], "z", &sock));
        let far = u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_millis(),
        )
        .expect("ms")
            + 48 * 3600 * 1000;
        for d in [
            forged("b", b.identity.bump, 1 << 41, &Frame::Foca(b"in b's name")),
            forged("ghost", 1, 0, &Frame::Foca(b"no such node")),
            forged("z", far, 0, &Frame::Foca(b"from the far future")),
        ] {
            sock.send_to(&d, a.local_addr()).await.expect("send");
        }
        until_true("three datagrams rejected", || a.dropped().rejected >= 3).await;
        assert!(a.view().alive.contains("b"), "{:?}", a.view());
    })
    .await;
}
