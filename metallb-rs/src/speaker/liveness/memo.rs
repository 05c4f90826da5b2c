//! When a judgement stands. [`assess`](super::assess) on unchanged
//! inputs decides the same until [`stands_until`], and a lease change
//! for which [`lease_change_matters`] is false changes nothing it
//! decides: a member gossip sees answering, that nobody doubts and that
//! marks nobody, counts whatever its lease's timing says. A caller that
//! judges a large cluster often - the simulator runs up to a thousand
//! speakers, each judging every 100 ms while a thousand leases renew -
//! skips the passes that could not decide anything new; its debug builds
//! check every skipped pass against a full one.

use super::{GOSSIP_SETTLE, Inputs, Judging, LeaseState, View};
use std::time::Instant;

/// Whether the rules look at `node`'s lease beyond its presence: this
/// speaker's own, one cleared, marking others or marked link-down, one
/// naming a member in doubt, or a member gossip does not see answering
/// (down, unknown, or unanswered by this speaker's own probe). For any
/// other, its renewals' timing decides nothing.
fn watched(
    judging: &Judging,
    view: Option<&View>,
    me: &str,
    node: &str,
    lease: &LeaseState,
) -> bool {
    node == me
        || !lease.held
        || lease.trouble
        || lease.link_down
        || judging.doubted_since.contains_key(node)
        || !view.is_some_and(|v| v.alive.contains(node) && !v.unanswered.contains(node))
}

/// Whether `node`'s lease going from `old` to `new` (either absent) can
/// change what [`assess`](super::assess) decides, given `judging` and
/// `view` as they stood at the last pass: a lease appearing or going
/// always can (it makes the node a known speaker); a renewal of a
/// member nobody watches ([`watched`] before and after) cannot.
pub fn lease_change_matters(
    judging: &Judging,
    view: Option<&View>,
    me: &str,
    node: &str,
    old: Option<&LeaseState>,
    new: Option<&LeaseState>,
) -> bool {
    match (old, new) {
        (Some(o), Some(n)) => {
            watched(judging, view, me, node, o) || watched(judging, view, me, node, n)
        }
        (None, None) => false,
        _ => true,
    }
}

/// The earliest instant, from `input.now` on, at which
/// [`assess`](super::assess) could decide differently on the same
/// inputs, `judging` being as that pass left it; `None`: never. Every
/// rule compares time with a fixed instant (a lease's deadlines, the
/// end of gossip's settling), and once past one it stays past.
pub fn stands_until(judging: &Judging, input: &Inputs<'_>) -> Option<Instant> {
    let now = input.now;
    let settled = judging.gossip_since.map(|t| t + GOSSIP_SETTLE);
    let deadlines = input
        .leases
        .iter()
        .filter(|(node, l)| watched(judging, input.view, input.me, node, l))
        .flat_map(|(node, l)| {
            let doubted = judging.doubted_since.get(node).map(|d| d.since);
            [
                l.deadline(),
                l.stop_deadline(doubted, input.api_latency),
                l.stop_deadline(None, input.api_latency),
            ]
        });
    settled
        .into_iter()
        .chain(deadlines)
        .filter(|t| *t >= now)
        .min()
}

#[cfg(test)]
mod tests {
    use super::super::{Inputs, Judging, LeaseState, assess};
    use super::*;
    use crate::speaker::election::NodeInfo;
    use crate::speaker::lease::Mark;
    use crate::speaker::membership::{Down, View};
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn node(name: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            labels: BTreeMap::new(),
            network_unavailable: false,
            ready: true,
            out_of_service: false,
        }
    }

    fn lease(changed: Instant, trouble: bool) -> LeaseState {
        LeaseState {
            held: true,
            changed,
            renewed: true,
            period: Duration::from_secs(10),
            trouble,
            link_down: false,
        }
    }

    /// Four members: `a` (this speaker) and `b` alive, `c` down in
    /// gossip with a lease that stops at t0+10.5 s, `d` alive but
    /// unanswered by our own probe.
    struct Case {
        t0: Instant,
        nodes: Vec<NodeInfo>,
        view: View,
        leases: BTreeMap<String, LeaseState>,
        marks: BTreeMap<String, Mark>,
    }

    impl Case {
        fn new() -> Self {
            let t0 = Instant::now();
            let mut view = View::default();
            for n in ["a", "b", "d"] {
                view.alive.insert(n.into());
            }
            view.suspect.insert("d".into());
            view.unanswered.insert("d".into());
            view.down.insert(
                "c".into(),
                Down {
                    since: Instant::now(),
                    left: false,
                },
            );
            let leases = ["a", "b", "c", "d"]
                .into_iter()
                .map(|n| (n.to_owned(), lease(t0, false)))
                .collect();
            Self {
                t0,
                nodes: ["a", "b", "c", "d"].into_iter().map(node).collect(),
                view,
                leases,
                marks: BTreeMap::new(),
            }
        }

        /// Judging at `now`, its watch shown current to 2 s in.
        fn input(&self, now: Instant) -> Inputs<'_> {
            Inputs {
                now,
                me: "a",
                api_ok: true,
                api_latency: Duration::ZERO,
                view: Some(&self.view),
                nodes: &self.nodes,
                leases: &self.leases,
                marks: &self.marks,
                own_write_seen: Some(self.t0 + Duration::from_secs(2)),
                last_write_sent: Some(self.t0 + Duration::from_secs(2)),
            }
        }
    }

    #[test]
    fn only_watched_members_leases_matter() {
        let case = Case::new();
        let mut judging = Judging::default();
        judging.gossip_started(case.t0);
        assess(&mut judging, &case.input(case.t0));
        let view = Some(&case.view);
        let old = lease(case.t0, false);
        let renewed = lease(case.t0 + Duration::from_secs(10), false);
        let rows: [(&str, Option<LeaseState>, Option<LeaseState>, bool); 9] = [
            // A member gossip sees answering renews: nothing to decide.
            ("b", Some(old), Some(renewed), false),
            // It starts marking others: its mark counts from now.
            ("b", Some(old), Some(lease(case.t0, true)), true),
            // It clears its lease (left).
            (
                "b",
                Some(old),
                Some(LeaseState { held: false, ..old }),
                true,
            ),
            // Its link goes down.
            (
                "b",
                Some(old),
                Some(LeaseState {
                    link_down: true,
                    ..old
                }),
                true,
            ),
            // A new speaker's lease, or one deleted.
            ("b", None, Some(renewed), true),
            ("b", Some(old), None, true),
            // Down in gossip: its renewals are all that keeps it.
            ("c", Some(old), Some(renewed), true),
            // Unanswered by our own probe: in doubt.
            ("d", Some(old), Some(renewed), true),
            // Our own.
            ("a", Some(old), Some(renewed), true),
        ];
        for (n, o, new, want) in rows {
            assert_eq!(
                lease_change_matters(&judging, view, "a", n, o.as_ref(), new.as_ref()),
                want,
                "{n}: {o:?} -> {new:?}"
            );
        }
    }

    #[test]
    fn a_judgement_stands_until_a_watched_deadline() {
        let case = Case::new();
        let mut judging = Judging::default();
        judging.gossip_started(case.t0);
        let input = case.input(case.t0);
        assess(&mut judging, &input);
        // Gossip settles first.
        let until = stands_until(&judging, &input);
        assert_eq!(until, Some(case.t0 + GOSSIP_SETTLE));
        // After it, the watched leases' deadlines: b's renewals are
        // ignored, so its deadline is not among them.
        let later = case.t0 + Duration::from_secs(2);
        let settled = assess(&mut judging, &case.input(later));
        let until = stands_until(&judging, &case.input(later)).expect("deadlines ahead");
        assert!(until > later, "{until:?}");
        // Every pass before it decides the same, on a copy of what
        // judging remembers; the pass after the deadline does not.
        let mut t = later;
        while t < until {
            let mut j = judging.clone();
            assert_eq!(assess(&mut j, &case.input(t)), settled, "at {t:?}");
            assert_eq!(j, judging, "judging moved at {t:?}");
            t += Duration::from_millis(100);
        }
        let past = until + Duration::from_millis(1);
        let mut j = judging.clone();
        let after = assess(&mut j, &case.input(past));
        assert_ne!(after, settled, "nothing changed past {until:?}");
    }
}
