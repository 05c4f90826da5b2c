//! When to renew, retry and count the API server reachable.

use super::*;
use rstest::rstest;

fn at(t0: Instant, secs: f64) -> Instant {
    t0 + Duration::from_secs_f64(secs)
}

/// A success at 0 in `mode`, judged `secs` later, with renewals
/// failing since `failing` (when the first failed one was sent).
#[rstest]
#[case::fast_just_renewed(Mode::Follow, None, 0.5, true)]
#[case::fast_within_the_timeout(Mode::Trouble, None, 3.9, true)]
#[case::fast_past_the_timeout(Mode::Trouble, None, 4.1, false)]
#[case::slow_next_not_due_yet(Mode::Slow, None, 14.0, true)]
#[case::slow_within_its_period_and_the_timeout(Mode::Slow, None, 17.9, true)]
#[case::slow_past_its_period_and_the_timeout(Mode::Slow, None, 18.1, false)]
#[case::a_failure_after_a_recent_success_is_not_yet_a_cut(Mode::Slow, Some(0.5), 1.0, true)]
#[case::a_failure_ends_the_slow_grace(Mode::Slow, Some(3.0), 4.1, false)]
#[case::a_failure_while_fast(Mode::Trouble, Some(3.0), 4.1, false)]
#[case::one_error_answer_is_not_a_cut(Mode::Slow, Some(15.0), 15.5, true)]
#[case::errors_that_last_are(Mode::Slow, Some(15.0), 16.1, false)]
#[case::a_timed_out_write_is_at_once(Mode::Slow, Some(15.0), 17.0, false)]
fn the_api_counts_reachable(
    #[case] mode: Mode,
    #[case] failing: Option<f64>,
    #[case] secs: f64,
    #[case] want: bool,
) {
    let t0 = Instant::now();
    let r = Record {
        last_ok: t0,
        period: mode.period(),
        failing_since: failing.map(|f| at(t0, f)),
        latency: Duration::ZERO,
        witnesses: [None; WITNESSES],
    };
    assert_eq!(r.api_ok(at(t0, secs)), want);
}

/// The write latency estimate: the longest recent write, fading by a
/// fifth per second - a 2 s spike no longer widens deadlines two slow
/// renewals later, while a server that stays slow keeps it up.
#[test]
fn write_latency_fades_with_time_not_with_writes() {
    let t0 = Instant::now();
    let (leases, marks) = (BTreeMap::new(), BTreeMap::new());
    let latency_after = |writes: &[(f64, f64)]| {
        let mut r = Renewer::new(t0);
        for (start, took) in writes {
            let mode = r.poll(at(t0, *start), None, &leases, &marks, "me");
            let mode = mode.expect("a renewal is due");
            r.done(at(t0, start + took), mode, true, Duration::ZERO);
        }
        r.record().latency
    };
    let spike = latency_after(&[(0.0, 2.0)]);
    assert_eq!(spike, Duration::from_secs(2));
    let faded = latency_after(&[(0.0, 2.0), (15.0, 0.005), (30.0, 0.005)]);
    assert!(faded < Duration::from_millis(50), "{faded:?}");
    let slow = latency_after(&[(0.0, 1.0), (15.0, 1.0), (30.0, 1.0)]);
    assert!(slow >= Duration::from_secs(1), "{slow:?}");
}

#[rstest]
#[case::first_renewal(None, Mode::Slow, 0.0, false, false, true)]
#[case::same_mode_not_due(Some(Mode::Slow), Mode::Slow, 10.0, false, false, false)]
#[case::same_mode_due(Some(Mode::Slow), Mode::Slow, 0.0, false, false, true)]
#[case::trouble_starts(Some(Mode::Slow), Mode::Trouble, 10.0, false, false, true)]
#[case::trouble_ends(Some(Mode::Trouble), Mode::Slow, 10.0, false, false, true)]
#[case::follow_starts(Some(Mode::Slow), Mode::Follow, 10.0, false, false, true)]
#[case::asked(Some(Mode::Trouble), Mode::Trouble, 10.0, true, false, true)]
// After a failure nothing was written: the backoff alone decides (the
// old rule retried at the next look, every 200 ms, forever).
#[case::failed_waits_for_the_backoff(None, Mode::Slow, 1.0, false, true, false)]
#[case::failed_and_trouble_starts(None, Mode::Trouble, 1.0, false, true, false)]
#[case::failed_and_asked(None, Mode::Trouble, 1.0, true, true, false)]
#[case::failed_backoff_over(None, Mode::Trouble, 0.0, false, true, true)]
fn renewing(
    #[case] written: Option<Mode>,
    #[case] mode: Mode,
    #[case] due_in: f64,
    #[case] asked: bool,
    #[case] retrying: bool,
    #[case] want: bool,
) {
    let t0 = Instant::now();
    assert_eq!(
        renew_due(written, mode, at(t0, due_in), t0, asked, retrying),
        want
    );
}

/// A speaker's renewals through failures: it writes at once, slowly
/// while all is well, retries a failure only when the backoff says
/// (a mode change or an ask meanwhile does not hurry it), and is back
/// to its period after a success.
#[test]
fn a_renewer_backs_off_through_failures() {
    let t0 = Instant::now();
    let none = BTreeMap::new();
    let no_marks = BTreeMap::new();
    let doubt = Mark::Names(["a".to_owned()].into());
    let mut r = Renewer::new(t0);
    assert_eq!(r.poll(t0, None, &none, &no_marks, "me"), Some(Mode::Slow));
    r.done(t0, Mode::Slow, true, Duration::ZERO);
    assert_eq!(r.poll(at(t0, 1.0), None, &none, &no_marks, "me"), None);
    assert_eq!(r.next_wakeup(), at(t0, 15.0));
    // Trouble starts: at once; the write fails.
    assert_eq!(
        r.poll(at(t0, 2.0), Some(&doubt), &none, &no_marks, "me"),
        Some(Mode::Trouble)
    );
    r.done(
        at(t0, 2.0),
        Mode::Trouble,
        false,
        Duration::from_millis(1500),
    );
    assert_eq!(r.record().failing_since, Some(at(t0, 2.0)));
    r.ask();
    assert_eq!(
        r.poll(at(t0, 2.2), Some(&doubt), &none, &no_marks, "me"),
        None,
        "asked, but backing off"
    );
    assert_eq!(
        r.poll(at(t0, 3.4), None, &none, &no_marks, "me"),
        None,
        "mode changed, but backing off"
    );
    assert_eq!(
        r.poll(at(t0, 3.5), Some(&doubt), &none, &no_marks, "me"),
        Some(Mode::Trouble)
    );
    r.done(at(t0, 3.5), Mode::Trouble, true, Duration::ZERO);
    assert!(r.record().api_ok(at(t0, 4.0)));
    assert_eq!(
        r.poll(at(t0, 4.0), Some(&doubt), &none, &no_marks, "me"),
        None
    );
    assert_eq!(
        r.poll(at(t0, 4.5), Some(&doubt), &none, &no_marks, "me"),
        Some(Mode::Trouble)
    );
}

/// A change of the link state is written at once, whatever the mode
/// and however far the next renewal is; while a failure is retried
/// the backoff still rules. Without a change nothing more is written.
#[test]
fn a_link_change_is_written_at_once() {
    let t0 = Instant::now();
    let none = BTreeMap::new();
    let no_marks = BTreeMap::new();
    let mut r = Renewer::new(t0);
    assert_eq!(r.poll(t0, None, &none, &no_marks, "me"), Some(Mode::Slow));
    assert!(!r.write_says_link_down());
    r.done(t0, Mode::Slow, true, Duration::ZERO);
    assert_eq!(r.poll(at(t0, 1.0), None, &none, &no_marks, "me"), None);
    r.set_link_down(true);
    assert_eq!(
        r.poll(at(t0, 1.1), None, &none, &no_marks, "me"),
        Some(Mode::Slow)
    );
    assert!(r.write_says_link_down(), "the write says the link is down");
    r.done(at(t0, 1.2), Mode::Slow, true, Duration::ZERO);
    assert_eq!(
        r.poll(at(t0, 2.0), None, &none, &no_marks, "me"),
        None,
        "written"
    );
    // Back up, but the write fails: the backoff decides the retry.
    r.set_link_down(false);
    assert_eq!(
        r.poll(at(t0, 3.0), None, &none, &no_marks, "me"),
        Some(Mode::Slow)
    );
    assert!(!r.write_says_link_down());
    r.done(at(t0, 3.0), Mode::Slow, false, Duration::from_secs(1));
    r.set_link_down(true);
    assert_eq!(
        r.poll(at(t0, 3.5), None, &none, &no_marks, "me"),
        None,
        "backing off"
    );
    assert_eq!(
        r.poll(at(t0, 4.0), None, &none, &no_marks, "me"),
        Some(Mode::Slow)
    );
    assert!(r.write_says_link_down());
    r.done(at(t0, 4.0), Mode::Slow, true, Duration::ZERO);
    assert_eq!(r.poll(at(t0, 5.0), None, &none, &no_marks, "me"), None);
}

/// A change of the names marked is written at once; the same names
/// again are not.
#[test]
fn a_change_of_the_names_marked_is_written_at_once() {
    let t0 = Instant::now();
    let none = BTreeMap::new();
    let no_marks = BTreeMap::new();
    let a = Mark::Names(["a".to_owned()].into());
    let ab = Mark::Names(["a".to_owned(), "b".to_owned()].into());
    let mut r = Renewer::new(t0);
    assert_eq!(
        r.poll(t0, Some(&a), &none, &no_marks, "me"),
        Some(Mode::Trouble)
    );
    assert_eq!(r.write_says_mark(), Some(&a));
    r.done(t0, Mode::Trouble, true, Duration::ZERO);
    let later = at(t0, 0.5);
    assert_eq!(r.poll(later, Some(&a), &none, &no_marks, "me"), None);
    assert_eq!(
        r.poll(later, Some(&ab), &none, &no_marks, "me"),
        Some(Mode::Trouble)
    );
    assert_eq!(r.write_says_mark(), Some(&ab));
    r.done(later, Mode::Trouble, true, Duration::ZERO);
    assert_eq!(r.poll(at(t0, 0.6), Some(&ab), &none, &no_marks, "me"), None);
    assert_eq!(
        r.poll(at(t0, 0.7), None, &none, &no_marks, "me"),
        Some(Mode::Slow)
    );
    assert_eq!(
        r.write_says_mark(),
        None,
        "doubts over: the mark is cleared"
    );
}

/// Only a fresh mark that names this speaker (or an older release's
/// mark, which names nobody) makes it renew fast.
#[rstest]
#[case::named("me,b", true, Mode::Follow)]
#[case::not_named("b,c", true, Mode::Slow)]
#[case::an_older_release_asks_everyone("true", true, Mode::Follow)]
#[case::stale("me", false, Mode::Slow)]
fn following_a_mark(#[case] value: &str, #[case] fresh: bool, #[case] want: Mode) {
    let t0 = Instant::now();
    let marker = LeaseState {
        held: true,
        changed: t0,
        renewed: true,
        period: FAST_RENEW,
        trouble: true,
        link_down: false,
    };
    let leases = BTreeMap::from([("marker".to_owned(), marker)]);
    let marks = BTreeMap::from([("marker".to_owned(), Mark::parse(value))]);
    let now = if fresh { at(t0, 0.5) } else { at(t0, 2.0) };
    assert_eq!(presence::mode(false, &leases, &marks, "me", now), want);
}

/// Retries of failed renewals back off from 100 ms, doubling to two
/// seconds, each delayed by up to as much again at random: a thousand
/// speakers that failed together do not retry together, none writes
/// more than once a second over ten retries, and the first comes soon
/// enough for a doubted speaker's lease not to look stopped (a fast
/// period and the margin between two of its renewals).
#[test]
fn retries_back_off_with_jitter() {
    let a: Vec<Duration> = retries().take(10).collect();
    let b: Vec<Duration> = retries().take(10).collect();
    for (i, d) in a.iter().enumerate() {
        let base = retry_base(u32::try_from(i).expect("small") + 1);
        assert!(
            *d >= base && *d <= base.saturating_mul(2),
            "retry {i}: {d:?} outside {base:?} to twice that"
        );
    }
    assert!(a[5] >= RETRY.max, "the delay grows to the longest");
    assert!(
        a.iter().sum::<Duration>() >= FAST_RENEW * 10,
        "at most one write a second: {a:?}"
    );
    assert!(
        a[0] < crate::speaker::liveness::OVERDUE_MARGIN / 2,
        "the first retry lands well inside the margin: {a:?}"
    );
    assert!(
        a.iter().all(|d| *d < API_TIMEOUT),
        "the API's return is noticed in time"
    );
    assert_ne!(a, b, "two speakers' retries are jittered apart");
}

/// The writes a lease watch can show back: each successful write's
/// version with when it was sent, the last few only; a failed write
/// leaves them as they were.
#[test]
fn successful_writes_witness_how_current_the_watch_is() {
    let t0 = Instant::now();
    let mut r = Renewer::new(t0);
    let mut sent = Vec::new();
    for i in 0..6u32 {
        let start = at(t0, f64::from(i) * 2.0);
        r.ask();
        let polled = r.poll(start, None, &BTreeMap::new(), &BTreeMap::new(), "a");
        assert!(polled.is_some(), "write {i} due");
        r.done(
            start + Duration::from_millis(300),
            Mode::Slow,
            true,
            Duration::ZERO,
        );
        r.wrote(&format!("v{i}"));
        sent.push(start);
    }
    let rec = r.record();
    assert_eq!(rec.sent_of("v5"), Some(sent[5]));
    assert_eq!(rec.sent_of("v2"), Some(sent[2]));
    assert_eq!(rec.sent_of("v1"), None, "only the last {WITNESSES}");
    assert_eq!(rec.sent_of("v9"), None);
    r.done(at(t0, 20.0), Mode::Slow, false, Duration::from_secs(1));
    assert_eq!(r.record().sent_of("v5"), Some(sent[5]), "kept by a failure");
}
