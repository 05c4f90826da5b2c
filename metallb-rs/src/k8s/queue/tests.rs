//! The queue's rules, one test each, on tokio's paused clock.

use super::*;

const BACKOFF: Backoff = Backoff {
    first: Duration::from_millis(100),
    max: Duration::from_secs(2),
};

#[tokio::test(start_paused = true)]
async fn a_key_queued_many_times_is_one_entry() {
    let (mut q, tx) = Queue::<u32>::new(BACKOFF);
    for _ in 0..1000 {
        tx.push(7);
    }
    assert_eq!(q.len(), 1);
    assert_eq!(q.next().await, Some(vec![7]));
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn every_ready_key_comes_in_one_batch_in_order() {
    let (mut q, tx) = Queue::<&str>::new(BACKOFF);
    for k in ["c", "a", "b"] {
        tx.push(k);
    }
    assert_eq!(q.next().await, Some(vec!["a", "b", "c"]));
}

#[tokio::test(start_paused = true)]
async fn transient_failures_back_off_with_growing_jittered_delays() {
    let (mut q, _tx) = Queue::<u32>::new(BACKOFF);
    let mut delays = Vec::new();
    for _ in 0..8 {
        delays.push(q.retry(1, ErrorClass::Transient).expect("retried"));
    }
    // Jitter adds up to the delay itself: each lies in [d, 2d).
    assert!(
        delays[0] >= BACKOFF.first && delays[0] < 2 * BACKOFF.first,
        "{delays:?}"
    );
    assert!(delays[3] >= 8 * BACKOFF.first, "{delays:?}");
    assert!(delays.iter().all(|d| *d < 2 * BACKOFF.max), "{delays:?}");
    assert!(delays[7] >= BACKOFF.max, "{delays:?}");
}

#[tokio::test(start_paused = true)]
async fn a_failed_key_comes_back_after_its_delay() {
    let (mut q, _tx) = Queue::<u32>::new(BACKOFF);
    let delay = q.retry(1, ErrorClass::Conflict).expect("retried");
    let start = Instant::now();
    assert_eq!(q.next().await, Some(vec![1]));
    assert!(Instant::now() - start >= delay);
}

#[tokio::test(start_paused = true)]
async fn a_watch_event_cuts_a_retry_delay_short() {
    let (mut q, tx) = Queue::<u32>::new(BACKOFF);
    q.retry(1, ErrorClass::Forbidden);
    tx.push(1);
    let start = Instant::now();
    assert_eq!(q.next().await, Some(vec![1]));
    assert_eq!(Instant::now(), start);
    assert!(q.is_empty(), "the delayed copy is gone");
}

#[rstest::rstest]
#[case::not_found(ErrorClass::NotFound)]
#[case::invalid(ErrorClass::Invalid)]
#[tokio::test(start_paused = true)]
async fn missing_objects_and_invalid_requests_wait_for_a_change(#[case] class: ErrorClass) {
    let (mut q, _tx) = Queue::<u32>::new(BACKOFF);
    assert_eq!(q.retry(1, class), None);
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn forbidden_calls_are_retried_slowly() {
    let (mut q, _tx) = Queue::<u32>::new(BACKOFF);
    assert_eq!(q.retry(1, ErrorClass::Forbidden), Some(BACKOFF.max));
    assert_eq!(q.retry(1, ErrorClass::Forbidden), Some(BACKOFF.max));
}

#[tokio::test(start_paused = true)]
async fn success_starts_the_backoff_afresh() {
    let (mut q, _tx) = Queue::<u32>::new(BACKOFF);
    for _ in 0..6 {
        q.retry(1, ErrorClass::Transient);
    }
    q.done(&1);
    let d = q.retry(1, ErrorClass::Transient).expect("retried");
    assert!(d < 2 * BACKOFF.first, "{d:?}");
}

#[tokio::test(start_paused = true)]
async fn backoff_is_per_key() {
    let (mut q, _tx) = Queue::<u32>::new(BACKOFF);
    for _ in 0..6 {
        q.retry(1, ErrorClass::Transient);
    }
    let d = q.retry(2, ErrorClass::Transient).expect("retried");
    assert!(d < 2 * BACKOFF.first, "{d:?}");
}

#[tokio::test(start_paused = true)]
async fn the_queue_ends_when_every_sender_is_gone() {
    let (mut q, tx) = Queue::<u32>::new(BACKOFF);
    let tx2 = tx.clone();
    tx.push(1);
    drop(tx);
    assert_eq!(q.next().await, Some(vec![1]));
    drop(tx2);
    assert_eq!(q.next().await, None);
}

#[tokio::test(start_paused = true)]
async fn a_pending_write_hides_until_the_watch_shows_it() {
    let mut p = PendingWrites::default();
    p.wrote("svc", "42".to_owned());
    assert!(p.in_flight(&"svc", |v| v == "41"));
    assert!(!p.in_flight(&"svc", |v| v == "42"));
    assert!(!p.in_flight(&"svc", |_| false), "forgotten once shown");
}

#[tokio::test(start_paused = true)]
async fn a_pending_write_the_watch_never_shows_stops_hiding() {
    let mut p = PendingWrites::default();
    p.wrote("svc", "42".to_owned());
    tokio::time::advance(PENDING_WRITE_TIMEOUT).await;
    assert!(p.in_flight(&"svc", |_| false));
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(!p.in_flight(&"svc", |_| false));
}

/// Our write is behind the cache while it shows the version we decided
/// from or one of our intermediate writes; anything else came after it.
#[rstest::rstest]
#[case::decided_from(&["1"], Some("1"), true)]
#[case::our_intermediate_write(&["1", "2"], Some("2"), true)]
#[case::our_last_write(&["1", "2"], Some("3"), false)]
#[case::someone_wrote_after_us(&["1"], Some("7"), false)]
#[case::gone(&["1"], None, false)]
fn behind_our_write_rows(
    #[case] before: &[&str],
    #[case] seen: Option<&str>,
    #[case] behind: bool,
) {
    let before: Vec<String> = before.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(behind_our_write(&before, seen), behind);
}
