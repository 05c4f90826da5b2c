//! The delay line's decisions as tables, and one delayed pipe over real
//! TCP on the loopback (no root, no lab).

use super::*;
use rstest::rstest;
use std::net::TcpListener;

const MS: Duration = Duration::from_millis(1);

#[rstest]
#[case::off("off", None)]
#[case::empty_file("", None)]
#[case::range("0ms..700ms", Some(0..700))]
#[case::with_newline_and_spaces(" 100ms .. 250ms\n", Some(100..250))]
#[case::fixed("300ms..300ms", Some(300..300))]
fn parses(#[case] text: &str, #[case] want: Option<Range<u64>>) {
    let want = want.map(|r| Duration::from_millis(r.start)..Duration::from_millis(r.end));
    assert_eq!(parse(text).expect("parses"), want);
    // What render writes reads back the same.
    assert_eq!(parse(&render(want.as_ref())).expect("parses"), want);
}

#[rstest]
#[case::no_unit("0..700")]
#[case::seconds("0s..1s")]
#[case::backwards("700ms..100ms")]
#[case::one_bound("700ms")]
#[case::negative("-1ms..5ms")]
fn refuses(#[case] text: &str) {
    let err = parse(text).expect_err("no setting");
    assert!(err.to_string().starts_with("api latency"), "{err}");
}

#[rstest]
#[case::lowest(0, 100)]
#[case::in_between(250_000_000, 350)]
#[case::wraps_around(700_000_000 + 5_000_000, 105)]
#[case::highest_stays_below_the_end(699_999_999, 799)]
fn uniform_stays_in_range(#[case] random: u64, #[case] want_ms: u64) {
    let got = uniform(&(100 * MS..800 * MS), random);
    assert_eq!(got.as_millis(), u128::from(want_ms));
    assert!(got >= 100 * MS && got < 800 * MS);
}

#[test]
fn an_empty_range_is_its_start() {
    assert_eq!(uniform(&(300 * MS..300 * MS), 12345), 300 * MS);
    assert_eq!(ApiLatency::default().draw(), Duration::ZERO);
}

#[test]
fn draws_cover_the_range_and_nothing_else() {
    let latency = ApiLatency::default();
    latency.set(Some(Duration::ZERO..700 * MS));
    let draws: Vec<Duration> = (0..2000).map(|_| latency.draw()).collect();
    assert!(draws.iter().all(|d| *d < 700 * MS), "{draws:?}");
    // Uniform: both ends of the range are reached.
    assert!(draws.iter().any(|d| *d < 70 * MS));
    assert!(draws.iter().any(|d| *d > 630 * MS));
}

/// Chunks arriving at `arrivals` (ms) with `draws` as the new requests'
/// delays; their release times (ms).
fn releases(arrivals: &[u64], draws: &[u64]) -> Vec<u64> {
    let t0 = Instant::now();
    let mut draws = draws.iter();
    let mut schedule = Schedule::default();
    arrivals
        .iter()
        .map(|a| {
            let at = schedule.release(t0 + Duration::from_millis(*a), || {
                Duration::from_millis(*draws.next().expect("a draw per request"))
            });
            u64::try_from((at - t0).as_millis()).expect("small")
        })
        .collect()
}

#[rstest]
#[case::each_request_its_own_delay(&[0, 100, 200], &[50, 10, 30], &[50, 110, 230])]
#[case::a_burst_keeps_its_delay(&[0, 1, 2, 500], &[400, 5], &[400, 401, 402, 505])]
#[case::order_is_kept(&[0, 10], &[600, 0], &[600, 600])]
#[case::no_delay(&[0, 5, 9], &[0, 0, 0], &[0, 5, 9])]
fn schedule(#[case] arrivals: &[u64], #[case] draws: &[u64], #[case] want: &[u64]) {
    assert_eq!(releases(arrivals, draws), want);
}

/// A pipe from a client socket to a server socket through
/// [`delayed_pipe`]; returns (client writer, server reader, the pipe's
/// thread).
fn piped(
    latency: Arc<ApiLatency>,
) -> (
    TcpStream,
    TcpStream,
    std::thread::JoinHandle<io::Result<()>>,
) {
    let listen = |_| TcpListener::bind("127.0.0.1:0").expect("bind");
    let (front, back) = (listen(()), listen(()));
    let client = TcpStream::connect(front.local_addr().expect("addr")).expect("connect");
    let (accepted, _) = front.accept().expect("accept");
    let upstream = TcpStream::connect(back.local_addr().expect("addr")).expect("connect");
    let (server, _) = back.accept().expect("accept");
    let pipe = std::thread::spawn(move || delayed_pipe(&accepted, &upstream, &latency));
    (client, server, pipe)
}

#[test]
fn a_delayed_pipe_delays_each_request_within_the_range() {
    let latency = Arc::new(ApiLatency::default());
    latency.set(Some(100 * MS..200 * MS));
    let (mut client, mut server, pipe) = piped(latency.clone());
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    for i in 0..5u8 {
        let sent = Instant::now();
        client.write_all(&[i; 10]).expect("write");
        let mut got = [0u8; 10];
        server.read_exact(&mut got).expect("read");
        let waited = sent.elapsed();
        assert_eq!(got, [i; 10]);
        // Never early; late only by a loaded machine's scheduling.
        assert!(
            waited >= 100 * MS && waited < 200 * MS + 300 * MS,
            "request {i} waited {waited:?}"
        );
    }
    // Switched off at run time: the next request passes at once.
    latency.set(None);
    let sent = Instant::now();
    client.write_all(b"x").expect("write");
    let mut got = [0u8; 1];
    server.read_exact(&mut got).expect("read");
    assert!(sent.elapsed() < 100 * MS, "waited {:?}", sent.elapsed());
    // EOF passes through and ends the pipe.
    client.shutdown(Shutdown::Write).expect("shutdown");
    assert_eq!(server.read(&mut got).expect("eof"), 0);
    pipe.join().expect("no panic").expect("pipe ends cleanly");
}

#[test]
fn apply_waits_for_the_acknowledgement() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("forward-node-1.latency");
    let target = Arc::new(ApiLatency::default());
    let _following = follow(path.clone(), vec![target.clone()]).expect("follow");
    let range = Duration::ZERO..700 * MS;
    apply(&path, Some(&range), Duration::from_secs(5)).expect("applied");
    assert_eq!(target.get(), Some(range));
    apply(&path, None, Duration::from_secs(5)).expect("applied");
    assert_eq!(target.get(), None);
    // Nobody follows this one: a clear error, not a silent success.
    let err = apply(&dir.path().join("nobody"), None, 200 * MS).expect_err("not applied");
    assert!(
        err.to_string()
            .contains("did not apply api latency \"off\""),
        "{err}"
    );
}
