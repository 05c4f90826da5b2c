//! Doubt that outlives a verdict gossip dropped.

use super::*;
use rstest::rstest;

/// A member whose verdict gossip dropped (it declared every other member
/// down and started afresh) stays in doubt while its lease stands still,
/// although that lease was seen renewing before: the last survivor of
/// two deaths in a row must find the second dead within a fast period,
/// not its slow one. Not once its lease is past its own period (settled
/// by that), cleared, or renewed since.
#[rstest]
#[case::renewing_before_then_still(lease(true, 9.0), true, true)]
#[case::verdict_not_dropped(lease(true, 9.0), false, false)]
#[case::stopped_by_its_own_period(lease(true, 3.0), true, false)]
#[case::cleared(lease(false, 9.0), true, false)]
fn doubt_outlives_a_dropped_verdict(
    #[case] lease: Option<LeaseState>,
    #[case] verdict_forgotten: bool,
    #[case] want: bool,
) {
    let e = Evidence {
        verdict_forgotten,
        ..ev(true, false, lease, None)
    };
    assert_eq!(troubled([&e], &settled(true, Some(10.0))), want);
}

/// Across passes: a member gossip forgot is doubted (named in this
/// speaker's mark) while its lease keeps the version it had when a pass
/// first saw it forgotten, and no longer once it renews; gossip seeing
/// it again ends the memory.
#[test]
fn a_forgotten_member_is_doubted_until_its_lease_changes() {
    let nodes = [node("b"), node("me")];
    let mut judging = Judging::default();
    judging.gossip_started(at(0.0));
    let mut view = View {
        alive: BTreeSet::from(["me".to_owned()]),
        forgotten: BTreeSet::from(["b".to_owned()]),
        ..View::default()
    };
    let pass = |judging: &mut Judging, view: &View, now: f64, b_changed: f64| {
        let leases: BTreeMap<String, LeaseState> =
            [("b", lease(true, b_changed)), ("me", lease(true, 9.5))]
                .into_iter()
                .filter_map(|(n, l)| Some((n.to_owned(), l?)))
                .collect();
        assess(
            judging,
            &Inputs {
                view: Some(view),
                own_write_seen: Some(at(9.5)),
                ..inputs(at(now), &nodes, &leases)
            },
        )
        .doubts
    };
    let b = BTreeSet::from(["b".to_owned()]);
    assert_eq!(pass(&mut judging, &view, 10.0, 9.0), b);
    assert_eq!(
        pass(&mut judging, &view, 10.5, 9.0),
        b,
        "still standing still"
    );
    assert!(pass(&mut judging, &view, 11.0, 10.8).is_empty(), "renewed");
    assert!(
        pass(&mut judging, &view, 11.5, 10.8).is_empty(),
        "and stays settled"
    );
    view.forgotten.clear();
    view.alive.insert("b".to_owned());
    assert!(pass(&mut judging, &view, 12.0, 10.8).is_empty());
    view.alive.remove("b");
    view.forgotten.insert("b".to_owned());
    assert_eq!(
        pass(&mut judging, &view, 12.5, 10.8),
        b,
        "forgotten anew: its version now is the one to change"
    );
}
