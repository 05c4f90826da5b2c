//! Which listeners the addresses give, and the reviews' reuse and
//! concurrency bound behind the HTTPS listener.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

fn addr(s: &str) -> Option<SocketAddr> {
    Some(s.parse().expect("address"))
}

fn plan(secure: &str, insecure: &str, health: &str) -> String {
    let opt = |s: &str| (!s.is_empty()).then(|| addr(s)).flatten();
    let serving = Serving {
        secure: opt(secure),
        insecure: opt(insecure),
        health: opt(health),
        ..Serving::default()
    };
    match serving.listeners() {
        Ok(l) => l
            .iter()
            .map(|(a, l)| match l {
                Listener::Secure => format!("{a} https"),
                Listener::Plain { metrics, probes } => format!(
                    "{a} http{}{}",
                    if *metrics { " metrics" } else { "" },
                    if *probes { " probes" } else { "" }
                ),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => e.to_string(),
    }
}

#[rstest::rstest]
#[case::defaults(
    "0.0.0.0:9120",
    "",
    "0.0.0.0:17472",
    "0.0.0.0:9120 https, 0.0.0.0:17472 http probes"
)]
#[case::all_three(
    "0.0.0.0:9120",
    "127.0.0.1:9121",
    "127.0.0.1:17472",
    "0.0.0.0:9120 https, 127.0.0.1:9121 http metrics, 127.0.0.1:17472 http probes"
)]
#[case::plain_metrics_share_the_probes(
    "127.0.0.1:9120",
    "127.0.0.1:9121",
    "127.0.0.1:9121",
    "127.0.0.1:9120 https, 127.0.0.1:9121 http metrics probes"
)]
#[case::ipv6_loopback("", "[::1]:9121", "", "[::1]:9121 http metrics")]
#[case::any_free_port_twice(
    "127.0.0.1:0",
    "",
    "127.0.0.1:0",
    "127.0.0.1:0 https, 127.0.0.1:0 http probes"
)]
#[case::insecure_off_loopback(
    "",
    "0.0.0.0:9121",
    "",
    "--insecure-metrics-bind-address 0.0.0.0:9121: unauthenticated plain-HTTP metrics are served on loopback only (use 127.0.0.1:PORT or [::1]:PORT, or scrape --metrics-bind-address over HTTPS with a token)"
)]
#[case::metrics_on_health(
    "0.0.0.0:9120",
    "",
    "0.0.0.0:9120",
    "--metrics-bind-address and --health-bind-address are both 0.0.0.0:9120: metrics are served over HTTPS and the probes over plain HTTP, so they need two addresses (give one another port)"
)]
#[case::secure_on_insecure(
    "127.0.0.1:9120",
    "127.0.0.1:9120",
    "",
    "--metrics-bind-address and --insecure-metrics-bind-address are both 127.0.0.1:9120: one is HTTPS, the other plain HTTP (give one another port)"
)]
fn addresses_decide_the_listeners(
    #[case] secure: &str,
    #[case] insecure: &str,
    #[case] health: &str,
    #[case] want: &str,
) {
    assert_eq!(plan(secure, insecure, health), want);
}

/// Answers every review as told, counting them; `hold` keeps every
/// review waiting forever.
#[derive(Default)]
struct Fake {
    authn: Option<Authn>,
    authz: Option<Authz>,
    hold: bool,
    calls: AtomicUsize,
}

impl Reviewer for Fake {
    fn authenticate<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Authn, ReviewFailed>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if self.hold {
                std::future::pending::<()>().await;
            }
            self.authn.clone().ok_or(ReviewFailed("down".into()))
        })
    }
    fn authorize<'a>(
        &'a self,
        _: &'a User,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Authz, ReviewFailed>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { self.authz.ok_or(ReviewFailed("down".into())) })
    }
}

fn guard(fake: Arc<Fake>) -> Arc<Guard> {
    Arc::new(Guard {
        reviewer: fake,
        caches: Mutex::new(Caches::default()),
        slots: tokio::sync::Semaphore::new(REVIEWS_IN_FLIGHT),
    })
}

fn alice() -> Authn {
    Authn::Authenticated(User {
        name: "alice".into(),
        uid: String::new(),
        groups: vec![],
        extra: Default::default(),
    })
}

#[tokio::test]
async fn answers_are_reused_and_failures_asked_again() {
    let fake = Arc::new(Fake {
        authn: Some(alice()),
        authz: Some(Authz::Allowed),
        ..Fake::default()
    });
    let g = guard(fake.clone());
    for _ in 0..3 {
        assert_eq!(
            g.check(Some(b"Bearer t"), "GET", "/metrics").await,
            Answer::Serve
        );
    }
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        2,
        "one review of each kind"
    );
    let down = Arc::new(Fake::default());
    let g = guard(down.clone());
    for _ in 0..2 {
        assert!(matches!(
            g.check(Some(b"Bearer t"), "GET", "/metrics").await,
            Answer::Refuse { status: 500, .. }
        ));
    }
    assert_eq!(
        down.calls.load(Ordering::SeqCst),
        2,
        "errors are not cached"
    );
}

#[tokio::test(start_paused = true)]
async fn a_scrape_waiting_over_a_second_for_a_review_gets_503() {
    let fake = Arc::new(Fake {
        hold: true,
        ..Fake::default()
    });
    let g = guard(fake.clone());
    let mut held = Vec::new();
    for i in 0..REVIEWS_IN_FLIGHT {
        let g = g.clone();
        held.push(tokio::spawn(async move {
            let header = format!("Bearer t{i}");
            g.check(Some(header.as_bytes()), "GET", "/metrics").await
        }));
    }
    tokio::task::yield_now().await;
    let answer = g.check(Some(b"Bearer other"), "GET", "/metrics").await;
    assert_eq!(answer, busy());
    assert_eq!(fake.calls.load(Ordering::SeqCst), REVIEWS_IN_FLIGHT);
    for h in held {
        h.abort();
    }
}
