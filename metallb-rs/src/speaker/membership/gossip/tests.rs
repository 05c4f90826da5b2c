//! The gossip member on virtual time: joins, failures, leaves, reach.

use super::*;
use std::time::Duration;

/// Members on virtual time, every frame delivered 1 ms later unless
/// its sender or receiver is `cut` (which still runs); returns when it
/// stopped.
fn run(members: &mut [Gossip], start: Instant, secs: f64, cut: Option<usize>) -> Instant {
    run_observed(members, start, secs, cut, &mut |_| {})
}

/// [`run`], calling `observe` after every step.
fn run_observed(
    members: &mut [Gossip],
    start: Instant,
    secs: f64,
    cut: Option<usize>,
    observe: &mut dyn FnMut(&[Gossip]),
) -> Instant {
    let lost = |_: Instant, from: usize, to: usize, _: &[u8]| Some(to) == cut || Some(from) == cut;
    run_lossy(members, start, secs, &lost, observe)
}

/// Whether a frame (its bytes) from member `from` to `to` due at `now`
/// is lost: `(now, from, to, frame)`.
type Lost<'a> = &'a dyn Fn(Instant, usize, usize, &[u8]) -> bool;

/// [`run_observed`], a frame from member `from` to `to` due at `now`
/// dropped when `lost(now, from, to, frame)`.
fn run_lossy(
    members: &mut [Gossip],
    start: Instant,
    secs: f64,
    lost: Lost<'_>,
    observe: &mut dyn FnMut(&[Gossip]),
) -> Instant {
    let addrs: Vec<SocketAddr> = members.iter().map(|g| g.identity().addr).collect();
    let names: Vec<String> = members.iter().map(|g| g.node.clone()).collect();
    let mut now = start;
    let end = start + Duration::from_secs_f64(secs);
    let step = Duration::from_millis(1);
    let mut in_flight: Vec<(Instant, usize, usize, Vec<u8>)> = Vec::new();
    while now < end {
        now += step;
        for g in members.iter_mut() {
            g.tick(now);
        }
        let (due, later): (Vec<_>, Vec<_>) = in_flight.into_iter().partition(|f| f.0 <= now);
        in_flight = later;
        for (_, from, to, frame) in due {
            if !lost(now, from, to, &frame) {
                let _ = members[to].receive(&names[from], &frame, addrs[from], now);
            }
        }
        for (i, g) in members.iter_mut().enumerate() {
            for (to, frame) in g.take_outgoing() {
                if let Some(j) = addrs.iter().position(|a| *a == to) {
                    in_flight.push((now + step, i, j, frame));
                }
            }
        }
        observe(members);
    }
    now
}

/// Whether `frame` carries a SWIM ack.
fn is_ack(frame: &[u8]) -> bool {
    matches!(Frame::decode(frame), Ok(Frame::Foca(packet))
        if foca::Codec::<Identity>::decode_header(&mut PostcardCodec, packet)
            .is_ok_and(|h| matches!(h.message, Message::Ack(_))))
}

/// `n` members n0, n1, ... at 10.0.0.1, 10.0.0.2, ..., each given
/// every other as a seed at `start`.
fn joined(n: u8, start: Instant) -> Vec<Gossip> {
    let timing = Timing::default();
    let mut members: Vec<Gossip> = (0..n)
        .map(|i| {
            let addr = SocketAddr::from(([10, 0, 0, i + 1], 7946));
            Gossip::new(format!("n{i}"), addr, &timing, u64::from(i), 1, start)
                .expect("timing is valid")
        })
        .collect();
    let seeds: Vec<(String, SocketAddr)> = members
        .iter()
        .map(|g| (g.node.clone(), g.identity().addr))
        .collect();
    for g in &mut members {
        g.join(seeds.clone(), start);
    }
    members
}

/// A member cut off until it declared every other member down comes
/// back as a fresh member: no healthy member has to take a new identity
/// (foca answers a member it holds down with "you are down", and the
/// answer resets the healthy one), none is ever declared down by
/// another, it keeps none of the verdicts it made while cut off (it
/// remembers whom they named, `forgotten`, until it sees them again),
/// and all see each other alive again within seconds (it asks the seeds
/// every second while alone).
#[test]
fn a_member_that_declared_everyone_down_comes_back_afresh() {
    let start = Instant::now();
    let mut members = joined(6, start);
    let settled = run(&mut members, start, 2.0, None);
    let healthy: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
    let cut = run(&mut members, settled, 10.0, Some(5));
    let alone = members[5].view();
    assert_eq!(alone.alive.len(), 1, "n5 saw everyone go: {alone:?}");
    assert!(members[5].identity().bump > 1, "n5 started afresh");
    assert!(
        alone.down.is_empty(),
        "its verdicts went with it: {alone:?}"
    );
    assert_eq!(
        alone.forgotten.iter().collect::<Vec<_>>(),
        healthy.iter().collect::<Vec<_>>(),
        "it remembers whom they named"
    );
    let back = run_observed(&mut members, cut, 3.0, None, &mut |members| {
        for g in &members[..5] {
            assert_eq!(g.identity().bump, 1, "{} kept its identity", g.node);
            let down: Vec<&String> = g.view().down.keys().collect();
            assert!(
                healthy.iter().all(|h| !g.view().down.contains_key(h)),
                "{} holds a healthy member down: {down:?}",
                g.node
            );
        }
    });
    assert!(back > cut);
    for g in &members {
        assert_eq!(g.view().alive.len(), 6, "{}: {:?}", g.node, g.view());
        assert!(g.view().forgotten.is_empty(), "{}: {:?}", g.node, g.view());
    }
}

/// Forgotten members are bounded by the seeds: a node removed from the
/// cluster while forgotten is forgotten for good at the next seed list.
#[test]
fn a_forgotten_member_whose_node_is_gone_is_dropped_with_its_seed() {
    let start = Instant::now();
    let mut members = joined(3, start);
    let settled = run(&mut members, start, 2.0, None);
    run(&mut members, settled, 10.0, Some(2));
    let alone = &mut members[2];
    assert!(alone.view().forgotten.contains("n0"), "{:?}", alone.view());
    let seeds: Vec<(String, SocketAddr)> = [("n1", 2), ("n2", 3)]
        .map(|(n, i)| (n.to_owned(), SocketAddr::from(([10, 0, 0, i], 7946))))
        .to_vec();
    let changes = alone.view_changes();
    alone.join(seeds, settled + Duration::from_secs(10));
    assert!(!alone.view().forgotten.contains("n0"), "{:?}", alone.view());
    assert!(alone.view().forgotten.contains("n1"), "n1 is still a seed");
    assert!(alone.view_changes() > changes);
}

/// A member one of our own probes found silent is `unanswered`; one
/// we only heard is suspect is not: the first to suspect a member
/// that stopped answering did so by its own probe, and another
/// heard of it before its own probe failed. The member cut off sees
/// its probes unanswered (its reach is at most half) within two
/// seconds; the others still reach most of the cluster.
#[test]
fn unanswered_is_our_own_probe_and_suspect_may_be_hearsay() {
    let start = Instant::now();
    let mut members = joined(6, start);
    let settled = run(&mut members, start, 2.0, None);
    let (mut first, mut hearsay) = (None, false);
    run_observed(&mut members, settled, 2.0, Some(5), &mut |members| {
        for g in &members[..5] {
            let v = g.view();
            assert!(v.unanswered.is_subset(&v.suspect), "{}: {v:?}", g.node);
            if v.suspect.contains("n5") {
                first.get_or_insert((g.node.clone(), v.unanswered.contains("n5")));
                hearsay |= !v.unanswered.contains("n5");
            }
        }
    });
    let cut_off = members[5].view().reach;
    assert!(cut_off.at_most_half(), "n5 hears no answer: {cut_off:?}");
    for g in &members[..5] {
        let reach = g.view().reach;
        assert!(!reach.at_most_half(), "{} reaches most: {reach:?}", g.node);
        assert!(reach.probed >= Reach::ENOUGH, "{}: {reach:?}", g.node);
    }
    let (who, own) = first.expect("n5 was suspected");
    assert!(own, "{who} suspected n5 first, by its own probe");
    assert!(hearsay, "the other member heard of the suspicion");
}

/// Two members alone probe each other, with no third to probe through:
/// a lost ack makes the prober's probe go unanswered, but the other's
/// own pings still come in, so that is loss, not doubt (which costs two
/// lease writes). One ack from n1 to n0 lost in every 700 ms makes n1
/// suspect at n0 now and then, never unanswered.
/// Once n1 stops for good, n0's probe finds it silent within two probe
/// periods and the quiet time.
#[test]
fn a_lost_ack_from_a_member_we_still_hear_is_no_doubt() {
    let start = Instant::now();
    let mut members = joined(2, start);
    let settled = run(&mut members, start, 2.0, None);
    let ms = |t: Instant| t.saturating_duration_since(settled).as_millis();
    // One of n1's acks lost in every 700 ms, at shifting offsets.
    let dropped = std::cell::Cell::new(u128::MAX);
    let lost = |now: Instant, from: usize, to: usize, frame: &[u8]| {
        let (t, period) = (ms(now), ms(now) / 700);
        let hit = from == 1
            && to == 0
            && dropped.get() != period
            && t % 700 >= period * 37 % 550
            && is_ack(frame);
        if hit {
            dropped.set(period);
        }
        hit
    };
    let (mut suspected, mut doubted) = (0, 0);
    let lossy = run_lossy(&mut members, settled, 28.0, &lost, &mut |m| {
        suspected += usize::from(m[0].view().suspect.contains("n1"));
        doubted += usize::from(m[0].view().unanswered.contains("n1"));
    });
    assert!(suspected > 0, "the losses hit n0's probes of n1");
    assert_eq!(
        doubted, 0,
        "n0 doubted n1 ({doubted} ms) though it heard it"
    );
    let timing = Timing::default();
    let within = 3 * timing.probe_period + timing.probe_rtt;
    let mut seen = false;
    run_lossy(
        &mut members,
        lossy,
        within.as_secs_f64(),
        &|_, from, to, _| from == 1 || to == 1,
        &mut |m| seen |= m[0].view().unanswered.contains("n1"),
    );
    assert!(seen, "n0 doubts n1 within {within:?} of its stop");
}

/// Three members, one stops: each survivor doubts it by its own probe
/// within a few probe periods, also the one that heard of the
/// suspicion from the other first (foca keeps a member already suspect
/// suspect without a change to see when our probe of it fails too).
/// Without that, the second survivor doubted the dead member only when
/// the first one's verdict reached it, seconds later, and failover
/// waited for it. The stop falls at ten offsets into the probe cycle.
#[test]
fn every_survivor_doubts_a_stopped_member_by_its_own_probe() {
    let timing = Timing::default();
    let within = 4 * timing.probe_period + timing.probe_rtt;
    let mut hearsay_first = 0;
    for offset in 0..10u64 {
        let start = Instant::now();
        let mut members = joined(3, start);
        let settled = run(&mut members, start, 2.0 + offset as f64 * 0.037, None);
        let mut heard_first = [false; 2];
        let mut doubted = [false; 2];
        run_observed(
            &mut members,
            settled,
            within.as_secs_f64(),
            Some(1),
            &mut |m| {
                for (k, g) in [&m[0], &m[2]].into_iter().enumerate() {
                    let v = g.view();
                    doubted[k] |= v.unanswered.contains("n1");
                    heard_first[k] |= !doubted[k] && v.suspect.contains("n1");
                }
            },
        );
        assert_eq!(
            doubted,
            [true, true],
            "stop at +{offset}: n0 and n2 doubt n1 by their own probes within {within:?}"
        );
        hearsay_first += heard_first.iter().filter(|h| **h).count();
    }
    assert!(
        hearsay_first > 0,
        "some survivor heard of the suspicion before its own probe failed"
    );
}

/// The sans-IO member on virtual time: three join and see each other
/// alive; one stops answering and the others declare it down within
/// the documented detection spread; the same seeds give the same
/// views.
#[test]
fn members_on_virtual_time_join_and_detect_a_failure() {
    let start = Instant::now();
    let timing = Timing::default();
    let mut members = joined(3, start);
    let settled = run(&mut members, start, 2.0, None);
    for g in &members {
        assert_eq!(g.view().alive.len(), 3, "{} sees {:?}", g.node, g.view());
    }
    let worst = timing.probe_period * 4 + timing.suspect_to_down_after + timing.gossip_period;
    run(&mut members, settled, worst.as_secs_f64(), Some(2));
    for g in &members[..2] {
        assert!(
            g.view().down.contains_key("n2"),
            "{} still counts n2 after {worst:?}: {:?}",
            g.node,
            g.view()
        );
    }
    let twice: Vec<Vec<(View, u64)>> = (0..2)
        .map(|_| {
            let mut again = joined(3, start);
            run(&mut again, start, 2.0, None);
            again
                .iter()
                .map(|g| (g.view().clone(), g.probes()))
                .collect()
        })
        .collect();
    assert_eq!(twice[0], twice[1], "same seeds, same run");
    // A sender is bound to its Node's address (the port may differ);
    // a name that is no seed or member speaks from nowhere.
    let n0 = &members[0];
    assert!(n0.speaks_from("n1", IpAddr::from([10, 0, 0, 2])));
    assert!(!n0.speaks_from("n1", IpAddr::from([10, 0, 0, 3])));
    assert!(!n0.speaks_from("ghost", IpAddr::from([10, 0, 0, 2])));
    assert!(n0.knows("n2") && !n0.knows("ghost"));
}

/// The last two members: one leaves, and foca's gossip of the leave
/// reaches the other before the first-hand leave does (it is queued
/// first). The gossip alone makes the other the last member, which
/// starts afresh and drops verdicts it did not hear first-hand; the
/// first-hand leave must still count, or the leaver is unknown to
/// gossip and judged by its lease alone (15 s while it renews slowly).
#[test]
fn a_leave_counts_when_it_leaves_one_member_alone() {
    let start = Instant::now();
    let mut members = joined(2, start);
    let settled = run(&mut members, start, 2.0, None);
    assert_eq!(members[0].view().alive.len(), 2, "{:?}", members[0].view());
    members[1].leave(settled);
    run(&mut members, settled, 0.1, None);
    let view = members[0].view();
    assert!(
        view.down.get("n1").is_some_and(|d| d.left) && !view.alive.contains("n1"),
        "n1 left: {view:?}"
    );
}

/// A datagram is stamped with its sender, not its receiver, so whoever
/// records one can send it to another member, where the stamp is fresh.
/// It must prove nothing there: n1 is cut off from both others, yet n2
/// receives every datagram n1 sends n0 (someone on the path redirects
/// them). Foca takes a SWIM packet only when addressed to its own
/// identity, so n2 declares n1 down as n0 does; a leave says the same
/// to every member, and a leave's acknowledgement counts only at the
/// leaver (`task::leave`).
#[test]
fn a_datagram_meant_for_another_member_proves_nothing() {
    let start = Instant::now();
    let timing = Timing::default();
    let mut members = joined(3, start);
    let mut now = run(&mut members, start, 2.0, None);
    assert!(members.iter().all(|g| g.view().alive.len() == 3));
    let addrs: Vec<SocketAddr> = members.iter().map(|g| g.identity().addr).collect();
    let worst = timing.probe_period * 4 + timing.suspect_to_down_after + timing.gossip_period;
    let end = now + worst;
    let step = Duration::from_millis(1);
    let mut in_flight: Vec<(Instant, usize, usize, Vec<u8>)> = Vec::new();
    let mut redirected = 0;
    while now < end {
        now += step;
        for g in members.iter_mut() {
            g.tick(now);
        }
        let (due, later): (Vec<_>, Vec<_>) = in_flight.into_iter().partition(|f| f.0 <= now);
        in_flight = later;
        for (_, from, to, frame) in due {
            let sender = members[from].node.clone();
            let _ = members[to].receive(&sender, &frame, addrs[from], now);
        }
        for (i, member) in members.iter_mut().enumerate() {
            for (to, frame) in member.take_outgoing() {
                let Some(j) = addrs.iter().position(|a| *a == to) else {
                    continue;
                };
                let cut = i == 1 || j == 1;
                if (i, j) == (1, 0) {
                    in_flight.push((now + step, 1, 2, frame.clone()));
                    redirected += 1;
                }
                if !cut {
                    in_flight.push((now + step, i, j, frame));
                }
            }
        }
    }
    assert!(redirected > 10, "n1 sent n0 {redirected} datagrams");
    assert!(
        members[2].view().down.contains_key("n1"),
        "n2 counts n1 on datagrams meant for n0: {:?}",
        members[2].view()
    );
    assert!(
        members[0].view().down.contains_key("n1"),
        "{:?}",
        members[0].view()
    );
}

/// A member cut off long enough to declare several others down, but
/// not everyone (so it does not start afresh), holds them down after
/// it is back while they see it alive and never hear its verdicts. It
/// reaches them all within one rejoin period: each gets an announce,
/// answers, is told it is held down, and rejoins under a new identity.
/// A live member held down is doubted and renews fast until then.
#[test]
fn members_held_down_after_a_cut_are_reached_within_a_rejoin_period() {
    let start = Instant::now();
    let mut members = joined(40, start);
    let settled = run(&mut members, start, 2.0, None);
    let cut = run(&mut members, settled, 3.5, Some(39));
    let held: Vec<String> = members[39].view().down.keys().cloned().collect();
    assert!(
        held.len() > super::super::DOWN_ANNOUNCE_FANOUT,
        "n39 should hold more members down than one period's announces reach: {held:?}"
    );
    assert_eq!(members[39].identity().bump, 1, "n39 did not start afresh");
    let period = Timing::default().rejoin_period;
    let mut steps = 0u32;
    let mut cleared = None;
    run_observed(
        &mut members,
        cut,
        2.0 * period.as_secs_f64(),
        None,
        &mut |members| {
            steps += 1;
            if cleared.is_none() && members[39].view().down.is_empty() {
                cleared = Some(Duration::from_millis(u64::from(steps)));
            }
        },
    );
    let cleared = cleared.expect("n39 still holds members down after two rejoin periods");
    assert!(
        cleared <= period + Duration::from_secs(1),
        "n39 held members down for {cleared:?}"
    );
    assert_eq!(
        members[39].view().alive.len(),
        40,
        "{:?}",
        members[39].view()
    );
}

/// A suspicion that reaches a member but whose verdict never does (SWIM
/// lets only the prober declare down; foca also drops its own down
/// timers when it takes a new identity) is settled by the member
/// itself: n0 holds n1 suspect, hearsay nobody repeats to n1 (n0 does
/// not gossip it, and the member lists it sends to members announcing
/// themselves are lost), so n1 never refutes and nobody declares it
/// down. Left alone, n0 holds it
/// suspect for good (and its trouble mark keeps n1 renewing every
/// second); settled, n0 declares it down a refute time and a rejoin
/// period later, n1 hears so, rejoins as a new run, and every member
/// sees every other alive again.
#[test]
fn a_suspicion_nobody_settles_ends_within_a_rejoin_period() {
    let start = Instant::now();
    let mut members = joined(4, start);
    let settled = run(&mut members, start, 2.0, None);
    let n1 = members[0]
        .foca
        .iter_membership_state()
        .find(|m| &*m.id().node == "n1")
        .map(|m| (m.id().clone(), m.incarnation()))
        .expect("n0 knows n1");
    let n0 = &mut members[0];
    n0.foca
        .apply_many(
            std::iter::once(Member::new(n1.0, n1.1, foca::State::Suspect)),
            false,
            &mut n0.runtime,
        )
        .expect("applies");
    let timing = Timing::default();
    let limit = timing.suspect_to_down_after + timing.rejoin_period;
    let feed_of_n0 = |_: Instant, from: usize, _: usize, frame: &[u8]| {
        from == 0
            && matches!(Frame::decode(frame), Ok(Frame::Foca(packet))
                if foca::Codec::<Identity>::decode_header(&mut PostcardCodec, packet)
                    .is_ok_and(|h| matches!(h.message, Message::Feed)))
    };
    let mut steps = 0u32;
    let mut suspect_for = Duration::ZERO;
    run_lossy(&mut members, settled, 15.0, &feed_of_n0, &mut |members| {
        steps += 1;
        if members[0].view().suspect.contains("n1") {
            suspect_for = Duration::from_millis(u64::from(steps));
        }
    });
    assert!(suspect_for > Duration::ZERO, "n0 never held n1 suspect");
    assert!(
        suspect_for <= limit + timing.probe_period,
        "n0 held n1 suspect for {suspect_for:?}, past {limit:?}"
    );
    for g in &members {
        let v = g.view();
        assert_eq!(v.alive.len(), 4, "{}: {v:?}", g.node);
        assert!(
            v.suspect.is_empty() && v.down.is_empty(),
            "{}: {v:?}",
            g.node
        );
    }
}

/// A suspicion refuted in time leaves the member as it was: foca's
/// suspicion timer still tells a refuted member it is down, and a
/// member told so takes a new identity and stops probing and gossiping
/// until someone answers the new one (with two survivors, one lost
/// datagram then left it silent until the other declared it down). One
/// ack from n1 to n0 is lost: n0 suspects n1, n1 refutes, and the
/// notice is withheld, so n1 keeps its identity and both see each
/// other alive throughout.
#[test]
fn a_refuted_suspicion_is_no_verdict() {
    let start = Instant::now();
    let mut members = joined(2, start);
    let settled = run(&mut members, start, 2.0, None);
    let dropped = std::cell::Cell::new(false);
    let one_ack_of_n1 = |_: Instant, from: usize, _: usize, frame: &[u8]| {
        let hit = from == 1 && is_ack(frame) && !dropped.get();
        dropped.set(dropped.get() || hit);
        hit
    };
    let (mut suspected, mut apart) = (false, false);
    run_lossy(&mut members, settled, 3.0, &one_ack_of_n1, &mut |m| {
        suspected |= m[0].view().suspect.contains("n1");
        apart |= m.iter().any(|g| g.view().alive.len() != 2);
    });
    assert!(suspected, "the lost ack made n0 suspect n1");
    assert_eq!(members[1].identity().bump, 1, "n1 kept its identity");
    assert!(!apart, "both saw each other alive throughout");
}
