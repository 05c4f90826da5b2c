//! Verdicts a cut-off speaker reached: back in touch with gossip, before
//! its API server answers again, they must not hand it the addresses of
//! members that lived on.

use super::*;
use crate::speaker::membership::{Down, Reach};

fn failed() -> Down {
    Down {
        since: Instant::now(),
        left: false,
    }
}

/// Ten members; `me` without the API server. Cut off, it declares b and
/// c failed (its probes go unanswered, it sees itself in the minority);
/// back in touch it sees most alive again, while its foca still holds b
/// and c down and its next renewal has not got through. b and c keep
/// counting (judged by their leases, which its stalled watch cannot show
/// stopped); a member that failed while it was in touch is gone at once
/// (its API down: gossip is all it knows).
#[test]
fn verdicts_reached_while_cut_off_do_not_count() {
    let names: Vec<String> = ["me", "a", "b", "c", "d", "e", "f", "g", "h", "i"]
        .map(str::to_owned)
        .to_vec();
    let nodes: Vec<NodeInfo> = names.iter().map(|n| node(n)).collect();
    let leases: BTreeMap<String, LeaseState> = names
        .iter()
        .map(|n| (n.clone(), lease(true, 9.0).expect("held")))
        .collect();
    let assess_at = |judging: &mut Judging, view: &View, secs: f64| {
        assess(
            judging,
            &Inputs {
                api_ok: false,
                view: Some(view),
                own_write_seen: Some(at(9.0)),
                ..inputs(at(secs), &nodes, &leases)
            },
        )
    };
    let mut judging = Judging::default();
    let mut view = View {
        alive: ["me", "a"].map(str::to_owned).into(),
        down: ["b", "c"].map(|n| (n.to_owned(), failed())).into(),
        reach: Reach {
            probed: 8,
            answered: 0,
        },
        ..View::default()
    };
    let cut = assess_at(&mut judging, &view, 10.0);
    assert!(cut.isolated, "{cut:?}");
    // Back in touch: most alive, b and c still down in its foca; then d
    // fails while it is in touch.
    view.alive = names
        .iter()
        .filter(|n| !["b", "c", "d"].contains(&n.as_str()))
        .cloned()
        .collect();
    view.down.insert("d".to_owned(), failed());
    view.reach = Reach {
        probed: 8,
        answered: 8,
    };
    let back = assess_at(&mut judging, &view, 12.0);
    assert!(!back.isolated, "{back:?}");
    assert!(
        back.alive.contains("b") && back.alive.contains("c"),
        "{back:?}"
    );
    assert_eq!(back.gone.get("d"), Some(&Gone::Failed), "{back:?}");
    // Without the memory of being cut off, b and c would be gone.
    let fresh = assess_at(&mut Judging::default(), &view, 12.0);
    assert_eq!(fresh.gone.get("b"), Some(&Gone::Failed), "{fresh:?}");
}
