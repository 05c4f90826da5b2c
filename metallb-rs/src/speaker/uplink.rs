//! Whether this node's uplink (the data-plane link gossip and the Node's
//! InternalIP use) counts as down: a debounce over what the speaker's
//! liveness tick sees of the link, so a node whose link failed while its
//! API path works says so on its lease (`presence::LINK_DOWN_ANNOTATION`)
//! and the others take its addresses over (liveness rule 3), without a
//! flapping link moving them back and forth.
//!
//! Marked after the link is seen down on [`DOWN_LOOKS`] consecutive looks;
//! cleared once it has been up continuously for the clear hold
//! ([`CLEAR_HOLD`], doubled for each mark within [`FLAP_WINDOW`] of the
//! previous one, at most [`MAX_HOLD`]). Pure: the caller looks at the
//! link and passes the time.

use std::time::{Duration, Instant};

/// Consecutive looks that must see the link down before it is marked
/// (with the liveness tick of 250 ms: a quarter to half a second).
pub const DOWN_LOOKS: u32 = 2;
/// How long the link must be up, continuously, before the mark clears.
pub const CLEAR_HOLD: Duration = Duration::from_secs(2);
/// The longest clear hold a flapping link earns.
pub const MAX_HOLD: Duration = Duration::from_secs(30);
/// A mark this soon after the previous one counts as a flap: the clear
/// hold doubles.
pub const FLAP_WINDOW: Duration = Duration::from_secs(60);

/// What the debounce remembers; [`State::default`] is a link never seen
/// down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct State {
    /// The link counts as down (the lease carries the mark).
    pub marked: bool,
    /// Consecutive looks that saw it down.
    down_looks: u32,
    /// While marked: since when it has been seen up without a break.
    up_since: Option<Instant>,
    /// The clear hold of the current (or last) mark.
    hold: Duration,
    /// When it was last marked.
    last_mark: Option<Instant>,
}

impl State {
    /// How long the link must stay up to clear the current mark.
    pub fn hold(&self) -> Duration {
        self.hold
    }
}

/// The state after one look at `now` saw the link `up` (or not).
pub fn step(prev: State, up: bool, now: Instant) -> State {
    let mut s = prev;
    if up {
        s.down_looks = 0;
        if s.marked {
            let since = *s.up_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= s.hold {
                s.marked = false;
                s.up_since = None;
            }
        }
        return s;
    }
    s.up_since = None;
    s.down_looks = s.down_looks.saturating_add(1);
    if !s.marked && s.down_looks >= DOWN_LOOKS {
        let flapping = s
            .last_mark
            .is_some_and(|t| now.saturating_duration_since(t) < FLAP_WINDOW);
        s.hold = if flapping {
            s.hold.saturating_mul(2).clamp(CLEAR_HOLD, MAX_HOLD)
        } else {
            CLEAR_HOLD
        };
        s.marked = true;
        s.last_mark = Some(now);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// Runs `looks` (seconds after start, link up?) through [`step`] from a
    /// link never seen down; the mark after each look, as text: `-` clear,
    /// `D` marked.
    fn marks(looks: &[(f64, bool)]) -> String {
        let t0 = Instant::now();
        let mut s = State::default();
        looks
            .iter()
            .map(|(at, up)| {
                s = step(s, *up, t0 + Duration::from_secs_f64(*at));
                if s.marked { 'D' } else { '-' }
            })
            .collect()
    }

    /// Looks every 250 ms, as the liveness tick does.
    fn every_quarter(pattern: &str) -> Vec<(f64, bool)> {
        pattern
            .chars()
            .enumerate()
            .map(|(i, c)| (i as f64 * 0.25, c == 'u'))
            .collect()
    }

    #[rstest]
    #[case::always_up("uuuuuuuu", "--------")]
    #[case::one_down_look_is_noise("uuduuuuu", "--------")]
    #[case::two_down_looks_mark("uudduuuu", "---DDDDD")]
    #[case::down_and_staying_down("udddddddd", "--DDDDDDD")]
    // Up 2 s without a break (eight quarters after the first up look).
    #[case::cleared_after_two_seconds_up("dduuuuuuuuu", "-DDDDDDDDD-")]
    #[case::a_down_look_restarts_the_hold("dduuuuuduuuuuuuuu", "-DDDDDDDDDDDDDDD-")]
    fn debouncing(#[case] looks: &str, #[case] want: &str) {
        assert_eq!(marks(&every_quarter(looks)), want);
    }

    /// A link that flaps within a minute holds its mark twice as long each
    /// time, up to [`MAX_HOLD`]; a minute's calm resets the hold.
    #[test]
    fn flapping_doubles_the_clear_hold() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut s = State::default();
        let mut holds = Vec::new();
        let mut t = 0.0;
        // Down for two looks, then up until the mark clears, six times.
        for _ in 0..6 {
            s = step(s, false, at(t));
            s = step(s, false, at(t + 0.25));
            assert!(s.marked);
            holds.push(s.hold().as_secs());
            t += 0.5;
            while s.marked {
                s = step(s, true, at(t));
                t += 0.25;
            }
        }
        assert_eq!(holds, [2, 4, 8, 16, 30, 30]);
        // Quiet for a minute: back to the short hold.
        t += 61.0;
        s = step(s, false, at(t));
        s = step(s, false, at(t + 0.25));
        assert_eq!(s.hold(), CLEAR_HOLD);
    }
}
