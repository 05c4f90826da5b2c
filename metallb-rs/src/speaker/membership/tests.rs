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

mod hostile;

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
        run: next_run(wall_millis(), None),
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
        // Suspect first (trouble starts there), still counted alive.
        let view = until(&a, "c suspect", |v| v.suspect.contains("c")).await;
        assert!(view.alive.contains("c"), "{view:?}");
        for m in [&a, &b] {
            let view = until(m, "c down", |v| v.down.contains_key("c")).await;
            assert_eq!(view.alive, BTreeSet::from(["a".to_owned(), "b".to_owned()]));
            assert!(!view.down["c"].left, "a crash is not a leave: {view:?}");
            assert!(view.suspect.is_empty(), "down, no longer suspect: {view:?}");
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
