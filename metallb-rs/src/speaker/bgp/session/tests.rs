//! OPEN negotiation, Adj-RIB-Out diffs and ROUTE-REFRESH decisions as
//! tables: each row gives the inputs in one line and the outcome as text
//! (graceful restart's in `graceful/tests.rs`); then Established over an
//! in-memory pipe on the paused clock (a peer that stops reading,
//! ROUTE-REFRESH bursts, the first table held for the speaker's first
//! pass).

use super::*;
use crate::net::bgp::{Capability, GracefulRestart, Open};
use crate::speaker::bgp::updates::{Shape, V4NextHop};
use rstest::rstest;

pub(super) fn cfg(peer_asn: PeerAsn, keepalive: Option<u64>) -> SessionConfig {
    SessionConfig {
        name: "p".into(),
        dial: Dial {
            peer: Remote::Address("192.0.2.1:179".parse().expect("addr")),
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
        graceful_restart: false,
    }
}

mod next_hops;

/// The peer's OPEN: `asn hold router-id [v4] [v6] [2octet] [gr] [enhe]`.
pub(super) fn theirs(spec: &str) -> Open {
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
            "enhe" => caps.push(Capability::ExtendedNextHop(vec![
                crate::net::bgp::ExtendedNextHop::IPV4_OVER_IPV6,
            ])),
            "gr" => caps.push(Capability::GracefulRestart(GracefulRestart {
                restart_time: 120,
                ..GracefulRestart::default()
            })),
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
    let ours = our_open(
        cfg,
        "10.0.0.1".parse().expect("ip"),
        PeerHistory::NeverEstablished,
    );
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
        next_hop_v4: v4.then(|| V4NextHop::Ipv4("10.0.0.1".parse().expect("ip"))),
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

#[rstest]
#[case::ipv4_unicast(1, 1, &[Afi::Ipv4], Some(Afi::Ipv4))]
#[case::ipv6_unicast(2, 1, &[Afi::Ipv4, Afi::Ipv6], Some(Afi::Ipv6))]
#[case::family_not_negotiated(2, 1, &[Afi::Ipv4], None)]
#[case::not_unicast(1, 128, &[Afi::Ipv4, Afi::Ipv6], None)]
#[case::unknown_afi(25, 1, &[Afi::Ipv4, Afi::Ipv6], None)]
fn route_refresh_answered_for(
    #[case] afi: u16,
    #[case] safi: u8,
    #[case] negotiated: &[Afi],
    #[case] expected: Option<Afi>,
) {
    assert_eq!(refresh::family(afi, safi, negotiated), expected);
}

/// Requests merge: the table goes out at once after a quiet second, then
/// at most once a second, always after the latest request.
#[test]
fn route_refresh_requests_merge() {
    let t0 = tokio::time::Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut r = refresh::Refresh::new(t0);
    assert_eq!(r.due(), None);
    r.request(Afi::Ipv4);
    assert_eq!(r.due(), Some(at(1000)));
    assert_eq!(r.take(at(1500)), [Afi::Ipv4].into());
    assert_eq!(r.due(), None);
    for _ in 0..5 {
        r.request(Afi::Ipv4);
    }
    r.request(Afi::Ipv6);
    assert_eq!(r.due(), Some(at(2500)));
    assert_eq!(r.take(at(2500)), [Afi::Ipv4, Afi::Ipv6].into());
}

/// Established over an in-memory pipe (`pipe` bytes each way) on the
/// paused clock, the far end in the test's hands.
mod pipe {
    use super::super::established::{EstablishedCtx, established};
    use super::*;
    use crate::metrics::BgpMetrics;
    use crate::net::bgp::{Context, Message};
    use tokio::io::{AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
    use tokio::sync::mpsc;
    use tokio::time::Instant;

    const FOUR: Context = Context {
        four_octet_as: true,
    };

    /// Runs Established until it ends, at most `limit` of (paused) time;
    /// how it ended and after how long.
    async fn run(
        hold: u64,
        routes: &DesiredRoutes,
        ours: DuplexStream,
        limit: Duration,
    ) -> Option<(String, Duration)> {
        let first_pass = watch::channel(true).1;
        run_with(hold, routes, ours, limit, (false, first_pass)).await
    }

    /// As `run`, with graceful restart negotiated or not and the
    /// speaker's first pass complete when the receiver says so.
    async fn run_with(
        hold: u64,
        routes: &DesiredRoutes,
        ours: DuplexStream,
        limit: Duration,
        (graceful_restart, mut first_pass): (bool, watch::Receiver<bool>),
    ) -> Option<(String, Duration)> {
        let (rd, wr) = tokio::io::split(ours);
        let cfg = cfg(PeerAsn::Internal, None);
        let (status, _status) = watch::channel(Status::default());
        let (_stop, mut stop) = oneshot::channel();
        let (_lost, mut path_lost) = watch::channel(0u64);
        let metrics = BgpMetrics::new(&prometheus::Registry::new());
        let hold = Duration::from_secs(hold);
        let started = Instant::now();
        let ended = tokio::time::timeout(
            limit,
            established(EstablishedCtx {
                cfg: &cfg,
                rd: BufReader::new(rd),
                wr,
                ctx: FOUR,
                hold,
                keepalive: hold / 3,
                families: vec![Afi::Ipv4],
                graceful_restart,
                shape: shape(true, false),
                routes,
                status: &status,
                stop: &mut stop,
                path_lost: &mut path_lost,
                first_pass: &mut first_pass,
                metrics: &metrics,
                label: "p".into(),
            }),
        )
        .await
        .ok()?;
        let why = match ended {
            Ended::Failed(why, true) => why,
            Ended::Failed(why, false) => format!("failed before Established?: {why}"),
            Ended::Stopped => "stopped".into(),
        };
        Some((why, started.elapsed()))
    }

    fn v4_table(n: u8) -> Table {
        (0..n)
            .map(|i| {
                (
                    IpNet::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)), 32).expect("net"),
                    RouteAttrs::default(),
                )
            })
            .collect()
    }

    /// One message as a peer sees it, UPDATEs decoded in full (the
    /// session's own reader only checks their lengths).
    async fn read_decoded(rd: &mut (impl AsyncRead + Unpin)) -> Option<Message> {
        let mut header = [0u8; bgp::HEADER_LEN];
        rd.read_exact(&mut header).await.ok()?;
        let (_, len) = bgp::decode_header(&header).ok()?;
        let mut buf = vec![0u8; len];
        buf[..bgp::HEADER_LEN].copy_from_slice(&header);
        rd.read_exact(&mut buf[bgp::HEADER_LEN..]).await.ok()?;
        bgp::decode(&buf, &FOUR).ok()
    }

    /// Everything the session sends to a peer reading `rd`, with when
    /// (since now); recording stops when the handle drops.
    fn record(
        rd: ReadHalf<DuplexStream>,
    ) -> (
        tokio_util::task::AbortOnDropHandle<()>,
        mpsc::UnboundedReceiver<(Duration, Message)>,
    ) {
        let t0 = Instant::now();
        let (seen_tx, seen) = mpsc::unbounded_channel();
        let reader = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            let mut rd = BufReader::new(rd);
            while let Some(m) = read_decoded(&mut rd).await {
                let _ = seen_tx.send((t0.elapsed(), m));
            }
        }));
        (reader, seen)
    }

    async fn send(wr: &mut WriteHalf<DuplexStream>, m: &Message) {
        wr.write_all(&bgp::encode(m, &FOUR)).await.expect("write");
    }

    /// Keeps sending KEEPALIVEs every second; never reads.
    async fn keepalives_only(theirs: DuplexStream) {
        let (_rd, mut wr) = tokio::io::split(theirs);
        loop {
            send(&mut wr, &Message::Keepalive).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// The peer keeps talking but stopped reading: our UPDATEs fill its
    /// window and the session ends once they have waited the hold time
    /// (3 s), not never; the hold timer alone would not catch it.
    #[tokio::test(start_paused = true)]
    async fn a_peer_that_stops_reading_is_dropped_after_the_hold_time() {
        let (ours, theirs) = tokio::io::duplex(32);
        let _peer = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(keepalives_only(theirs)));
        let routes = DesiredRoutes::new(v4_table(20));
        let (why, after) = run(3, &routes, ours, Duration::from_secs(60))
            .await
            .expect("the session ends within 60 s");
        assert!(
            why.starts_with("the peer took none of our UPDATEs for 3s"),
            "{why}"
        );
        assert!(
            (Duration::from_secs(3)..Duration::from_millis(3100)).contains(&after),
            "{after:?}"
        );
    }

    /// A write waiting on the peer does not stop the hold timer: the peer
    /// went silent at 0 s, our UPDATEs stall from 1.5 s, the hold timer
    /// (3 s) ends the session at 3 s.
    #[tokio::test(start_paused = true)]
    async fn the_hold_timer_runs_while_a_write_waits() {
        let (ours, theirs) = tokio::io::duplex(64);
        let routes = DesiredRoutes::new(Table::new());
        let later = routes.clone();
        let _peer = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            let _theirs = theirs;
            tokio::time::sleep(Duration::from_millis(1500)).await;
            later.replace(v4_table(20));
            std::future::pending::<()>().await;
        }));
        let (why, after) = run(3, &routes, ours, Duration::from_secs(60))
            .await
            .expect("the session ends within 60 s");
        assert!(why.starts_with("hold timer expired"), "{why}");
        assert!(
            (Duration::from_secs(3)..Duration::from_millis(3100)).contains(&after),
            "{after:?}"
        );
    }

    /// ROUTE-REFRESH for a family not carried is ignored; a burst of them
    /// costs the full table at most once a second (at 5 s, then once at
    /// 6 s for the nine that came meanwhile), not once each.
    #[tokio::test(start_paused = true)]
    async fn route_refresh_bursts_are_merged_and_other_families_ignored() {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (rd, mut wr) = tokio::io::split(theirs);
        let (_reader, mut seen) = record(rd);
        let _peer = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            for (afi, safi) in [(1, 128), (2, 1)] {
                send(&mut wr, &Message::RouteRefresh { afi, safi }).await;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            for _ in 0..10 {
                send(&mut wr, &Message::RouteRefresh { afi: 1, safi: 1 }).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            std::future::pending::<()>().await;
        }));
        let routes = DesiredRoutes::new(v4_table(1));
        // No hold time: no keepalives, the session runs until the limit.
        assert_eq!(run(0, &routes, ours, Duration::from_secs(10)).await, None);
        let mut updates = Vec::new();
        while let Ok((at, m)) = seen.try_recv() {
            if matches!(&m, Message::Update(u) if u.end_of_rib().is_none()) {
                updates.push(format!("{:.1}s", at.as_secs_f64()));
            }
        }
        assert_eq!(updates.join(" "), "0.0s 5.0s 6.0s");
    }

    /// With graceful restart the first table waits for the speaker's
    /// first pass (complete at 2 s): a route added at 1 s goes out with
    /// it, End-of-RIB follows the table once, and a change at 3 s is an
    /// ordinary UPDATE.
    #[tokio::test(start_paused = true)]
    async fn graceful_restart_holds_the_first_table_until_the_first_pass() {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (rd, _wr) = tokio::io::split(theirs);
        let (_reader, mut seen) = record(rd);
        let routes = DesiredRoutes::new(v4_table(1));
        let (pass_tx, pass) = watch::channel(false);
        let later = routes.clone();
        let _speaker = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            later.replace(v4_table(2));
            tokio::time::sleep(Duration::from_secs(1)).await;
            pass_tx.send_replace(true);
            tokio::time::sleep(Duration::from_secs(1)).await;
            later.replace(v4_table(3));
            std::future::pending::<()>().await;
        }));
        assert_eq!(
            run_with(0, &routes, ours, Duration::from_secs(5), (true, pass)).await,
            None
        );
        let mut got = Vec::new();
        while let Ok((at, m)) = seen.try_recv() {
            let Message::Update(u) = m else { continue };
            let what = match u.end_of_rib() {
                Some((afi, _)) => format!("EoR {afi:?}"),
                None => {
                    let nlri: Vec<String> = u.nlri.iter().map(ToString::to_string).collect();
                    nlri.join(",")
                }
            };
            got.push(format!("{:.1}s {what}", at.as_secs_f64()));
        }
        assert_eq!(
            got.join("; "),
            "2.0s 10.0.0.0/32,10.0.0.1/32; 2.0s EoR Ipv4; 3.0s 10.0.0.2/32"
        );
    }
}

/// Connection attempts wait a quarter to half a second at first, then
/// double, jittered, up to the peer's connectTime and never past it; a
/// session that was up starts again from the first wait.
#[rstest]
#[case::one_second(1)]
#[case::default(10)]
#[case::frr_default(120)]
fn connect_retries_back_off_with_jitter_within_connect_time(#[case] secs: u64) {
    let connect_time = Duration::from_secs(secs);
    let waits: Vec<Duration> = dial_backoff(connect_time).delays().take(40).collect();
    let (first, later) = (waits[0], &waits[20..]);
    assert!(
        first >= FIRST_DIAL_RETRY && first <= FIRST_DIAL_RETRY * 2,
        "{first:?}"
    );
    assert!(waits.iter().all(|w| *w <= connect_time), "{waits:?}");
    assert!(later.iter().all(|w| *w >= connect_time / 2), "{waits:?}");
    assert!(
        later.windows(2).any(|p| p[0] != p[1]),
        "no jitter: {later:?}"
    );
    assert!(waits[1] < waits[6] || secs == 1, "no backoff: {waits:?}");
}
