//! Trouble marks in the assessment: who names whom, and judging from
//! another speaker's mark.

use super::*;

/// One mark serves every judge: a member gossip has down, already named
/// by another speaker's fresh mark, is not named again, and is judged
/// from that mark (a fast period and the margin after it showed, then
/// gone); without that mark this speaker names it itself. A suspicion
/// heard from others is named by nobody here; one of our own probes is.
#[test]
fn a_mark_serves_every_judge() {
    let nodes = [node("m"), node("me"), node("z")];
    let slow = |changed: f64| {
        lease(true, changed).map(|l| LeaseState {
            period: lease::SLOW_RENEW,
            ..l
        })
    };
    let marker = |changed: f64| {
        lease(true, changed).map(|l| LeaseState {
            period: lease::FAST_RENEW,
            trouble: true,
            ..l
        })
    };
    let view = |z: &str| {
        let mut v = View {
            alive: ["m", "me"].map(str::to_owned).into(),
            ..View::default()
        };
        match z {
            "down" => {
                v.down.insert(
                    "z".to_owned(),
                    crate::speaker::membership::Down {
                        since: Instant::now(),
                        left: false,
                    },
                );
            }
            "heard" => {
                v.alive.insert("z".to_owned());
                v.suspect.insert("z".to_owned());
            }
            _ => {
                v.alive.insert("z".to_owned());
                v.suspect.insert("z".to_owned());
                v.unanswered.insert("z".to_owned());
            }
        }
        v
    };
    let names_z = BTreeMap::from([("m".to_owned(), Mark::parse("z"))]);
    let pass = |judging: &mut Judging,
                now: f64,
                m_changed: f64,
                z: &str,
                marks: &BTreeMap<String, Mark>| {
        let leases: BTreeMap<String, LeaseState> = [
            ("m", marker(m_changed)),
            ("me", slow(now)),
            ("z", slow(9.5)),
        ]
        .into_iter()
        .filter_map(|(n, l)| Some((n.to_owned(), l?)))
        .collect();
        let v = view(z);
        assess(
            judging,
            &Inputs {
                view: Some(&v),
                marks,
                own_write_seen: Some(at(now)),
                ..inputs(at(now), &nodes, &leases)
            },
        )
    };
    let mut judging = Judging::default();
    let first = pass(&mut judging, 9.6, 9.0, "down", &names_z);
    assert!(first.doubts.is_empty(), "named already: {first:?}");
    assert!(
        first.alive.contains("z"),
        "within a fast period of the mark"
    );
    // The marker renewed since (its version first seen at 10.5): the
    // member was named from 9.0 on, so it is gone at 11.0 and the margin.
    let later = pass(&mut judging, 11.2, 10.5, "down", &names_z);
    assert_eq!(later.gone.get("z"), Some(&Gone::Failed), "{later:?}");
    let alone = pass(&mut Judging::default(), 9.6, 9.0, "down", &BTreeMap::new());
    assert_eq!(alone.doubts, BTreeSet::from(["z".to_owned()]));
    let heard = pass(&mut Judging::default(), 9.6, 9.0, "heard", &BTreeMap::new());
    assert!(heard.doubts.is_empty(), "{heard:?}");
    let probed = pass(
        &mut Judging::default(),
        9.6,
        9.0,
        "unanswered",
        &BTreeMap::new(),
    );
    assert_eq!(probed.doubts, BTreeSet::from(["z".to_owned()]));
}

/// A member named by a mark stays named while nothing new is known of
/// it: when the mark lapses (its marker's write failed) or is cleared
/// before the judge's deadline, a member whose lease has not changed and
/// that gossip still has down is judged from the first mark, not from its
/// own 15 s period; a renewal of its own, or gossip seeing it answer,
/// ends that.
#[test]
fn a_lapsed_mark_does_not_move_the_deadline_back() {
    let nodes = [node("m"), node("me"), node("z")];
    let with = |changed: f64, period: Duration, trouble: bool| {
        lease(true, changed).map(|l| LeaseState {
            period,
            trouble,
            ..l
        })
    };
    let names_z = BTreeMap::from([("m".to_owned(), Mark::parse("z"))]);
    // One pass at `now`: the marker last renewed at `m`, z at `z`, gossip
    // has z down unless `z_alive`.
    let pass = |judging: &mut Judging, now: f64, m: f64, z: f64, z_alive: bool| {
        let leases: BTreeMap<String, LeaseState> = [
            ("m", with(m, lease::FAST_RENEW, true)),
            ("me", with(now, lease::SLOW_RENEW, false)),
            ("z", with(z, lease::SLOW_RENEW, false)),
        ]
        .into_iter()
        .filter_map(|(n, l)| Some((n.to_owned(), l?)))
        .collect();
        let mut v = View {
            alive: ["m", "me"].map(str::to_owned).into(),
            ..View::default()
        };
        if z_alive {
            v.alive.insert("z".to_owned());
        } else {
            let down = crate::speaker::membership::Down {
                since: Instant::now(),
                left: false,
            };
            v.down.insert("z".to_owned(), down);
        }
        assess(
            judging,
            &Inputs {
                view: Some(&v),
                marks: &names_z,
                own_write_seen: Some(at(now)),
                ..inputs(at(now), &nodes, &leases)
            },
        )
    };
    let named = || {
        let mut judging = Judging::default();
        let first = pass(&mut judging, 9.6, 9.0, 8.0, false);
        assert!(first.alive.contains("z"), "{first:?}");
        judging
    };
    // The marker's next write failed: its mark is stale at 11.2 (fast
    // period and margin after 9.0), z is still judged from 9.0.
    let lapsed = pass(&mut named(), 11.2, 9.0, 8.0, false);
    assert_eq!(lapsed.gone.get("z"), Some(&Gone::Failed), "{lapsed:?}");
    // z renewed meanwhile: it is judged from that renewal again.
    let renewed = pass(&mut named(), 11.2, 9.0, 10.9, false);
    assert!(renewed.alive.contains("z"), "{renewed:?}");
    // Gossip sees z answer: alive, and no longer named from 9.0.
    let mut judging = named();
    let answered = pass(&mut judging, 11.2, 9.0, 8.0, true);
    assert!(answered.alive.contains("z"), "{answered:?}");
    let down_again = pass(&mut judging, 11.4, 9.0, 8.0, false);
    assert!(down_again.alive.contains("z"), "{down_again:?}");
}
