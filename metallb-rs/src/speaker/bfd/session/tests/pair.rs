//! Two sessions back to back over a simulated link, every packet through
//! the codec: they come Up on their own, and each sees the other lost
//! within a detection time of the link being cut, whatever the jitter.

use super::*;

/// A deterministic stand-in for the caller's random numbers.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Pair {
    ends: [Session; 2],
    /// Packets in flight: arrival time, receiving end, bytes.
    flight: Vec<(Instant, usize, [u8; 24])>,
    link_up: bool,
    rng: Lcg,
    /// State changes per end, with their time in ms.
    changes: [Vec<(u64, Change)>; 2],
}

const LATENCY: Duration = Duration::from_millis(1);

impl Pair {
    fn new(seed: u64) -> Pair {
        let discr = |d| NonZeroU32::new(d).unwrap_or(NonZeroU32::MIN);
        let end = |d| Session::new(Params::default(), discr(d), at(0));
        Pair {
            ends: [end(1), end(2)],
            flight: Vec::new(),
            link_up: true,
            rng: Lcg(seed),
            changes: [vec![], vec![]],
        }
    }

    fn apply(&mut self, now: Instant, from: usize, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Send(p) if self.link_up => {
                    self.flight.push((now + LATENCY, 1 - from, p.encode()))
                }
                Action::Send(_) => {}
                Action::StateChanged(c) => {
                    self.changes[from].push(((now - base()).as_millis() as u64, c))
                }
            }
        }
    }

    fn run_until(&mut self, end: Instant) {
        loop {
            let wakes = self
                .ends
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.next_wake().map(|w| (w, Some(i))));
            let arrival = self.flight.iter().map(|(t, _, _)| (*t, None)).min();
            let Some((t, who)) = wakes
                .chain(arrival)
                .min_by_key(|(t, _)| *t)
                .filter(|(t, _)| *t <= end)
            else {
                return;
            };
            match who {
                Some(i) => {
                    let jitter = self.rng.next();
                    let actions = self.ends[i].on_timer(t, jitter);
                    self.apply(t, i, actions);
                }
                None => {
                    let k = self
                        .flight
                        .iter()
                        .position(|(at, _, _)| *at == t)
                        .unwrap_or(0);
                    let (_, to, bytes) = self.flight.remove(k);
                    let decoded = ControlPacket::decode(&bytes);
                    assert!(
                        decoded.is_ok(),
                        "a packet we sent did not decode: {decoded:?}"
                    );
                    if let Ok(p) = decoded {
                        let actions = self.ends[to].on_packet(t, &p);
                        self.apply(t, to, actions);
                    }
                }
            }
        }
    }
}

#[test]
fn two_sessions_come_up_and_detect_a_cut_link() {
    for seed in [1, 2, 3, 42, 1234] {
        let mut pair = Pair::new(seed);
        pair.run_until(at(4000));
        for (i, end) in pair.ends.iter().enumerate() {
            assert_eq!(end.state(), State::Up, "seed {seed} end {i}");
            assert!(
                !end.polling(),
                "seed {seed} end {i}: the Poll of coming Up got its Final"
            );
            assert_eq!(
                end.tx_interval(),
                Duration::from_millis(300),
                "seed {seed} end {i}"
            );
            let up_at = pair.changes[i]
                .iter()
                .find(|(_, c)| c.to == State::Up)
                .map(|(t, _)| *t);
            assert!(
                up_at.is_some_and(|t| t <= 2002),
                "seed {seed} end {i}: up at {up_at:?}"
            );
        }
        pair.link_up = false;
        pair.flight.clear();
        pair.run_until(at(6000));
        for (i, end) in pair.ends.iter().enumerate() {
            let lost: Vec<(u64, Diagnostic)> = pair.changes[i]
                .iter()
                .filter(|(_, c)| c.session_lost())
                .map(|(t, c)| (*t, c.diagnostic))
                .collect();
            assert_eq!(lost.len(), 1, "seed {seed} end {i}: {lost:?}");
            let (t, diag) = lost[0];
            // The last packet arrived at most one jittered interval
            // before the cut; the detection time is 3 x 300 ms.
            assert!(
                (4000 + 900 - 300..=4000 + 900).contains(&t),
                "seed {seed} end {i}: lost at {t}"
            );
            assert_eq!(
                diag,
                Diagnostic::ControlDetectionTimeExpired,
                "seed {seed} end {i}"
            );
            assert_eq!(end.counters().up_events, 1);
            assert_eq!(end.counters().down_events, 1);
        }
    }
}
