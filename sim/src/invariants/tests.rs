//! The invariants' bookkeeping on hand-made runs.

use super::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// One node's writes at the given seconds (after the start grace and
/// the settling time) in the given modes, then the stretch closes at
/// `end`: the steady-writes violations it gives.
fn steady(writes: &[(f64, Mode)], end: f64) -> usize {
    let base = Instant::now();
    let mut c = Checker::new(
        base,
        Vec::new(),
        Vec::new(),
        1,
        Duration::ZERO,
        Duration::from_millis(300),
    );
    let settled = base + START_GRACE + STEADY_AFTER;
    for (t, mode) in writes {
        c.write_started(0, settled + Duration::from_secs_f64(*t), Some(*mode));
    }
    c.finish(settled + Duration::from_secs_f64(end));
    c.violations
        .iter()
        .filter(|v| v.invariant == Invariant::SteadyWrites)
        .count()
}

#[test]
fn the_failover_bound_grows_only_with_the_probe_tail_of_large_clusters() {
    let period = Duration::from_millis(300);
    for n in [1, 2, 3, 5, 10] {
        assert_eq!(failover_bound(n, period), FAILOVER_BOUND, "{n} nodes");
    }
    let at = |n| failover_bound(n, period).as_secs_f64();
    assert!((5.2..5.3).contains(&at(100)), "100 nodes: {}", at(100));
    assert!((5.4..5.5).contains(&at(1000)), "1,000 nodes: {}", at(1000));
    assert!(at(30) < at(100) && at(100) < at(1000));
    // The model against a draw: 99 survivors, each probing the dead
    // member at a uniform point of its round; a first probe later
    // than the tail allows is about as rare as it says (none in
    // 100,000, where a tail six periods shorter is passed some 100
    // times).
    let mut rng = StdRng::seed_from_u64(7);
    let draw = |rng: &mut StdRng| {
        (0..99)
            .map(|_| rng.random_range(0.0..99.0))
            .fold(f64::MAX, f64::min)
    };
    let (tail, short) = (first_probe_periods(100), first_probe_periods(100) - 6.0);
    let (mut late, mut late_short) = (0, 0);
    for _ in 0..100_000 {
        let first = draw(&mut rng);
        late += usize::from(first > tail);
        late_short += usize::from(first > short);
    }
    assert_eq!(late, 0);
    assert!(late_short > 20, "{late_short}");
}

#[test]
fn doubt_episodes_are_excused_and_flapping_is_not() {
    use Mode::{Follow, Slow, Trouble};
    // Seed 318's stretch: the one in flight, a mark naming it
    // (follow, slow again), its own doubt (mark, clear).
    let two = [
        (0.0, Slow),
        (3.4, Follow),
        (4.6, Slow),
        (11.2, Trouble),
        (11.8, Slow),
    ];
    assert_eq!(steady(&two, 12.0), 0);
    // Five slow writes in 12 s: no doubt excuses them.
    let slow: Vec<(f64, Mode)> = (0..5).map(|i| (f64::from(i) * 2.5, Slow)).collect();
    assert_eq!(steady(&slow, 12.0), 1);
    // A doubt that comes and goes every two seconds for a minute.
    let flap: Vec<(f64, Mode)> = (0..30)
        .map(|i| (f64::from(i) * 2.0, if i % 2 == 0 { Trouble } else { Slow }))
        .collect();
    assert_eq!(steady(&flap, 60.0), 1);
    // Renewing fast all along is one episode, and caught by the rate.
    let fast: Vec<(f64, Mode)> = (0..20).map(|i| (f64::from(i), Trouble)).collect();
    assert_eq!(steady(&fast, 20.0), 1);
}

#[test]
fn an_episode_starts_where_a_fast_renewal_follows_a_slow_one() {
    let t = Instant::now();
    let at = |s: u64, m: Option<Mode>| (t + Duration::from_secs(s), m);
    let (slow, fast, mark) = (Some(Mode::Slow), Some(Mode::Follow), Some(Mode::Trouble));
    assert_eq!(episodes(&[], t), 0);
    assert_eq!(episodes(&[at(0, fast), at(1, mark), at(2, slow)], t), 1);
    assert_eq!(
        episodes(&[at(0, slow), at(1, fast), at(2, slow), at(3, mark)], t),
        2
    );
    // Before `from` does not count; a lease clear is no renewal.
    let late = t + Duration::from_secs(2);
    assert_eq!(
        episodes(&[at(0, slow), at(1, fast), at(2, None), at(3, mark)], late),
        1
    );
}
