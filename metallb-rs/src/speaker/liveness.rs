//! Whose speaker counts as running, from three kinds of evidence: the
//! node (Ready, the `node.kubernetes.io/out-of-service` taint), the
//! speaker's presence Lease (renewed slowly while gossip agrees and
//! fast while anyone sees trouble: [`presence::mode`]; holder cleared on
//! SIGTERM) and, when membership is on, the gossip view. Pure: the runner
//! gathers the evidence, this decides.
//!
//! The rules, in order (the first that applies wins):
//!
//! 1. A node tainted `node.kubernetes.io/out-of-service` has no speaker
//!    (the admin says the node is gone; upstream #3116).
//! 2. A cleared lease holder means the speaker left (SIGTERM).
//! 3. Gossip says the member left or failed: gone once its lease has
//!    stopped too - or at once when this speaker cannot reach the API
//!    server (then gossip is all it knows). Stopped: overdue by its own
//!    renewal period, or, while this speaker's trouble mark is out
//!    ([`Context::trouble_since`]), not seen renewing for a fast period
//!    since the mark showed or since its last renewal, whichever is
//!    later (every live speaker renews fast while it sees the mark). A member that failed in
//!    gossip but keeps renewing its lease is cut off from us, not dead:
//!    it keeps its addresses, so a partition between speakers never makes
//!    two nodes answer for one address. A gossip leave is honoured the
//!    same way: a leaving speaker clears its lease right after saying
//!    goodbye (rule 2), and until the lease says so the member counts as
//!    alive for election - so a leave alone (one that raced a restart, or
//!    was forged) never moves addresses off a speaker that still renews.
//!    "Overdue" needs a lease watch shown to be current past the
//!    deadline (some lease changed after it): a speaker being cut off
//!    sees every lease in its frozen cache age, and until it notices the
//!    API server is gone (and, in the minority, falls silent) those ages
//!    must not hand it the others' addresses.
//! 4. Gossip says alive (or suspect): alive.
//! 5. No gossip evidence (membership off, or not seen yet): a NotReady
//!    node whose lease is overdue or missing has no speaker (#3116);
//!    otherwise the lease decides when there is one, and a node without
//!    lease counts as running one when membership is off (upstream's
//!    assumption) and not when it is on (upstream uses live members only).
//!
//! Partition safety ([`isolated`]): a speaker that cannot reach the API
//! server and sees at most half of the known speakers alive stops
//! answering altogether, because the majority side is taking its
//! addresses over.

use super::presence;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

/// A lease renewal this much later than due is overdue: the margin covers
/// a renewal in flight and its way to us through the watch (both on our
/// monotonic clock: no other node's clock is involved).
pub const OVERDUE_MARGIN: Duration = Duration::from_millis(500);

/// What the presence lease of a node says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseState {
    /// A holder is set (cleared on graceful leave).
    pub held: bool,
    /// When we first saw its current version (our monotonic clock; see
    /// `presence::states`).
    pub changed: Instant,
    /// How often its speaker says it renews (`leaseDurationSeconds` / 3).
    pub period: Duration,
    /// Its speaker sees trouble in gossip (the lease carries
    /// `presence::TROUBLE_ANNOTATION`).
    pub trouble: bool,
}

impl LeaseState {
    /// When its next renewal is overdue: one renewal period (its own)
    /// and the margin after it last changed.
    pub fn deadline(&self) -> Instant {
        self.changed + self.period + OVERDUE_MARGIN
    }

    /// When it counts as stopped: its own deadline or, while this
    /// speaker's trouble mark is out since `trouble_since`, a fast period
    /// and the margin after the later of the mark showing and its last
    /// renewal - whichever comes first.
    pub fn stop_deadline(&self, trouble_since: Option<Instant>) -> Instant {
        let own = self.deadline();
        match trouble_since {
            Some(since) => own.min(self.changed.max(since) + presence::FAST_RENEW + OVERDUE_MARGIN),
            None => own,
        }
    }

    /// The next renewal is overdue at `now`.
    pub fn overdue(&self, now: Instant) -> bool {
        now > self.deadline()
    }

    /// Overdue, as a watch that is still delivering shows it: only once
    /// this speaker has seen some lease change after the deadline. A
    /// speaker cut off from the API server sees its watch stall, and every
    /// lease in its cache ages as if its holder had died, its own
    /// included; until it notices the API is gone, those ages prove
    /// nothing.
    pub fn overdue_seen(&self, ctx: &Context) -> bool {
        self.overdue(ctx.now) && ctx.leases_seen.is_some_and(|t| t > self.deadline())
    }

    /// Stopped ([`Self::stop_deadline`]), as a watch that is still
    /// delivering shows it (see [`Self::overdue_seen`]).
    pub fn stopped_seen(&self, ctx: &Context) -> bool {
        let deadline = self.stop_deadline(ctx.trouble_since);
        ctx.now > deadline && ctx.leases_seen.is_some_and(|t| t > deadline)
    }
}

/// What gossip says of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gossip {
    /// Seen alive.
    Alive,
    /// Alive, but a probe went unanswered: trouble, not yet failure.
    Suspect,
    /// Declared down at `since` (this speaker's clock); `left` when it said
    /// goodbye.
    Down {
        /// When this speaker declared it down.
        since: SystemTime,
        /// It left gracefully.
        left: bool,
    },
}

/// The evidence about one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evidence {
    /// The node's Ready condition is True.
    pub ready: bool,
    /// It carries the out-of-service taint.
    pub out_of_service: bool,
    /// Its speaker's presence lease, if any.
    pub lease: Option<LeaseState>,
    /// Its gossip state, if membership is on and has heard of it.
    pub gossip: Option<Gossip>,
}

/// Why a node's speaker is not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// Tainted out-of-service.
    OutOfService,
    /// Its speaker left gracefully.
    Left,
    /// Gossip declared it failed and its lease stopped.
    Failed,
    /// NotReady, and its speaker stopped renewing its lease.
    NotReadyWithoutSpeaker,
    /// Membership is on and nothing shows a speaker there.
    NoSpeaker,
}

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Gone::OutOfService => "node tainted node.kubernetes.io/out-of-service",
            Gone::Left => "its speaker left",
            Gone::Failed => "its speaker failed (gossip) and stopped renewing its lease",
            Gone::NotReadyWithoutSpeaker => {
                "node NotReady and its speaker stopped renewing its lease"
            }
            Gone::NoSpeaker => "no speaker seen on it",
        })
    }
}

/// What this speaker knows besides the per-node evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    /// Now, on this speaker's monotonic clock.
    pub now: Instant,
    /// This speaker reached the API server recently (its own lease renewal
    /// succeeded within [`API_TIMEOUT`]).
    pub api_ok: bool,
    /// Gossip membership is on.
    pub membership: bool,
    /// When this speaker's lease watch last showed a change of any
    /// presence lease (its own renewals included): how far its view of
    /// the leases is known to be current.
    pub leases_seen: Option<Instant>,
    /// When this speaker first saw its own lease carry the trouble mark,
    /// while it still does: since then every live speaker renews fast.
    pub trouble_since: Option<Instant>,
}

/// Without a successful renewal for this long while renewing fast (this
/// much past its slow period while renewing slowly), or once a renewal
/// failed, a speaker considers the API server unreachable.
pub const API_TIMEOUT: Duration = Duration::from_secs(4);

/// Whether the speaker of a node with `e` counts, and if not, why.
pub fn judge(e: &Evidence, ctx: &Context) -> Result<(), Gone> {
    if e.out_of_service {
        return Err(Gone::OutOfService);
    }
    if e.lease.is_some_and(|l| !l.held) {
        return Err(Gone::Left);
    }
    let lease_fresh = e.lease.is_some_and(|l| !l.stopped_seen(ctx));
    match e.gossip {
        Some(Gossip::Down { left, .. }) => {
            if ctx.api_ok && lease_fresh {
                Ok(())
            } else if left {
                Err(Gone::Left)
            } else {
                Err(Gone::Failed)
            }
        }
        Some(Gossip::Alive | Gossip::Suspect) => Ok(()),
        None => {
            let lease_gone = e.lease.is_none_or(|l| l.overdue(ctx.now));
            if !e.ready && lease_gone {
                Err(Gone::NotReadyWithoutSpeaker)
            } else if e.lease.is_some() || !ctx.membership {
                // Overdue lease on a Ready node without gossip evidence:
                // counted, as upstream counts every node (an API outage of
                // ours must not move addresses).
                Ok(())
            } else {
                Err(Gone::NoSpeaker)
            }
        }
    }
}

/// Whether a renewal of this speaker's own lease, seen back through its
/// watch, would settle `e`: gossip says the member is down, its lease is
/// past its stop deadline, and only a lease change after that deadline is
/// missing to count it gone. Renewing at once then saves waiting for the
/// next periodic renewal (failover time); a cut-off speaker's renewal
/// never comes back, so it settles nothing there.
pub fn awaits_evidence(e: &Evidence, ctx: &Context) -> bool {
    matches!(e.gossip, Some(Gossip::Down { .. }))
        && ctx.api_ok
        && e.lease.is_some_and(|l| {
            l.held && ctx.now > l.stop_deadline(ctx.trouble_since) && !l.stopped_seen(ctx)
        })
}

/// Whether this speaker sees trouble in gossip and must mark its lease
/// (see `presence`): a member suspect, or down while its held lease is
/// still within its own renewal period - it may be alive and cut off
/// from us, and judging it needs everyone renewing fast. A member whose
/// lease stopped by its own period is settled: a dead node does not keep
/// the cluster renewing fast.
pub fn troubled<'a>(evidence: impl IntoIterator<Item = &'a Evidence>, now: Instant) -> bool {
    evidence.into_iter().any(|e| match e.gossip {
        Some(Gossip::Suspect) => true,
        Some(Gossip::Down { .. }) => e.lease.is_some_and(|l| l.held && !l.overdue(now)),
        Some(Gossip::Alive) | None => false,
    })
}

/// The nodes whose speaker counts, and why the others do not.
pub fn alive<'a>(
    evidence: impl IntoIterator<Item = (&'a str, Evidence)>,
    ctx: &Context,
) -> (BTreeSet<String>, BTreeMap<String, Gone>) {
    let mut alive = BTreeSet::new();
    let mut gone = BTreeMap::new();
    for (node, e) in evidence {
        match judge(&e, ctx) {
            Ok(()) => {
                alive.insert(node.to_owned());
            }
            Err(why) => {
                gone.insert(node.to_owned(), why);
            }
        }
    }
    (alive, gone)
}

/// Partition safety: this speaker cannot reach the API server and sees at
/// most half of the `known` speakers (itself included) alive in gossip, so
/// the majority is taking its addresses over: it must stop answering.
/// Never with membership off (nothing to compare with) or alone.
pub fn isolated(api_ok: bool, alive_in_gossip: usize, known: usize) -> bool {
    !api_ok && known > 1 && alive_in_gossip * 2 <= known
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// Our monotonic clock's origin in these tests.
    static T0: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

    /// The renewal period of the leases in these tests (an older
    /// release's, or a fast one's plus a second).
    const PERIOD: Duration = Duration::from_secs(2);

    fn at(secs_after: f64) -> Instant {
        *T0 + Duration::from_secs_f64(secs_after)
    }

    /// A lease held or cleared, seen changing `changed` seconds after T0.
    fn lease(held: bool, changed: f64) -> Option<LeaseState> {
        Some(LeaseState {
            held,
            changed: at(changed),
            period: PERIOD,
            trouble: false,
        })
    }

    fn down(since: f64, left: bool) -> Option<Gossip> {
        Some(Gossip::Down {
            since: SystemTime::UNIX_EPOCH + Duration::from_secs_f64(1_000_000.0 + since),
            left,
        })
    }

    fn ev(ready: bool, oos: bool, lease: Option<LeaseState>, gossip: Option<Gossip>) -> Evidence {
        Evidence {
            ready,
            out_of_service: oos,
            lease,
            gossip,
        }
    }

    /// `now` is 10 s after T0; renewals are due every PERIOD (2 s)
    /// and overdue one margin (0.5 s) later, so a lease renewed at 7.5 is
    /// fresh, one renewed at 6.9 is overdue.
    #[rstest]
    #[case::alive_in_gossip(ev(true, false, lease(true, 9.0), Some(Gossip::Alive)), true, true, Ok(()))]
    #[case::out_of_service_beats_everything(
        ev(true, true, lease(true, 9.0), Some(Gossip::Alive)),
        true,
        true,
        Err(Gone::OutOfService)
    )]
    #[case::left_by_lease(
        ev(true, false, lease(false, 9.0), Some(Gossip::Alive)),
        true,
        true,
        Err(Gone::Left)
    )]
    #[case::left_in_gossip_lease_still_held_counts_alive(
        ev(true, false, lease(true, 9.5), down(9.6, true)),
        true,
        true,
        Ok(())
    )]
    #[case::left_in_gossip_and_lease_cleared(
        ev(true, false, lease(false, 9.7), down(9.6, true)),
        true,
        true,
        Err(Gone::Left)
    )]
    #[case::left_in_gossip_lease_overdue(
        ev(true, false, lease(true, 6.9), down(9.6, true)),
        true,
        true,
        Err(Gone::Left)
    )]
    #[case::left_in_gossip_without_lease(
        ev(true, false, None, down(9.6, true)),
        true,
        true,
        Err(Gone::Left)
    )]
    #[case::left_in_gossip_and_we_lost_the_api_trust_gossip(
        ev(true, false, lease(true, 9.5), down(9.6, true)),
        false,
        true,
        Err(Gone::Left)
    )]
    #[case::failed_and_lease_overdue(
        ev(true, false, lease(true, 6.9), down(9.0, false)),
        true,
        true,
        Err(Gone::Failed)
    )]
    #[case::failed_but_still_renewing_is_a_partition(ev(true, false, lease(true, 9.5), down(9.0, false)), true, true, Ok(()))]
    #[case::failed_lease_not_yet_overdue_waits(ev(true, false, lease(true, 7.5), down(9.0, false)), true, true, Ok(()))]
    #[case::failed_and_we_lost_the_api_trust_gossip(
        ev(true, false, lease(true, 9.5), down(9.0, false)),
        false,
        true,
        Err(Gone::Failed)
    )]
    #[case::failed_without_lease(
        ev(true, false, None, down(9.0, false)),
        true,
        true,
        Err(Gone::Failed)
    )]
    #[case::unseen_with_fresh_lease(ev(true, false, lease(true, 9.0), None), true, true, Ok(()))]
    #[case::unseen_without_lease_membership_on(
        ev(true, false, None, None),
        true,
        true,
        Err(Gone::NoSpeaker)
    )]
    #[case::no_lease_membership_off_like_upstream(ev(true, false, None, None), true, false, Ok(()))]
    #[case::not_ready_and_lease_overdue(
        ev(false, false, lease(true, 3.0), None),
        true,
        false,
        Err(Gone::NotReadyWithoutSpeaker)
    )]
    #[case::not_ready_without_lease(
        ev(false, false, None, None),
        true,
        false,
        Err(Gone::NotReadyWithoutSpeaker)
    )]
    #[case::not_ready_but_speaker_renewing(ev(false, false, lease(true, 9.0), None), true, false, Ok(()))]
    #[case::ready_with_overdue_lease_is_kept(ev(true, false, lease(true, 3.0), None), true, false, Ok(()))]
    #[case::not_ready_alive_in_gossip(ev(false, false, lease(true, 3.0), Some(Gossip::Alive)), true, true, Ok(()))]
    fn judging(
        #[case] e: Evidence,
        #[case] api_ok: bool,
        #[case] membership: bool,
        #[case] want: Result<(), Gone>,
    ) {
        let ctx = Context {
            now: at(10.0),
            api_ok,
            membership,
            // The watch is live: it just showed a renewal.
            leases_seen: Some(at(10.0)),
            trouble_since: None,
        };
        assert_eq!(judge(&e, &ctx), want);
    }

    /// A member gossip declares failed, its lease last seen changing at
    /// 6.9 (overdue from 9.4), judged at 10 while the API still looks
    /// reachable, by how far the lease watch is known to be current: a
    /// stalled watch (this speaker is being cut off) proves nothing, so
    /// the member keeps its addresses until isolation silences this
    /// speaker; a watch that showed any change after 9.4 proves the lease
    /// stopped.
    #[rstest]
    #[case::watch_stalled_before_the_deadline(Some(8.9), Ok(()))]
    #[case::watch_stalled_at_the_deadline(Some(9.4), Ok(()))]
    #[case::never_saw_a_change(None, Ok(()))]
    #[case::watch_showed_a_later_renewal(Some(9.5), Err(Gone::Failed))]
    fn overdue_leases_count_only_as_far_as_the_watch_is_current(
        #[case] leases_seen: Option<f64>,
        #[case] want: Result<(), Gone>,
    ) {
        let ctx = Context {
            now: at(10.0),
            api_ok: true,
            membership: true,
            leases_seen: leases_seen.map(at),
            trouble_since: None,
        };
        let e = ev(true, false, lease(true, 6.9), down(9.0, false));
        assert_eq!(judge(&e, &ctx), want);
    }

    #[test]
    fn overdue_uses_the_renewal_period_and_margin() {
        let l = LeaseState {
            held: true,
            changed: at(1.0),
            period: PERIOD,
            trouble: false,
        };
        let period = PERIOD.as_secs_f64();
        assert!(!l.overdue(at(1.0 + period)));
        assert!(!l.overdue(at(1.0 + period + 0.4)));
        assert!(l.overdue(at(1.0 + period + 0.6)));
        // Seen changing after `now` (a tick that raced the watch): fresh.
        assert!(!l.overdue(at(0.5)));
    }

    /// A renewal of our own is worth sending exactly while it would
    /// settle a member gossip declared down.
    #[rstest]
    #[case::overdue_but_watch_not_past_the_deadline(
        lease(true, 6.9),
        down(9.0, false),
        true,
        Some(8.0),
        true
    )]
    #[case::already_settled(lease(true, 6.9), down(9.0, false), true, Some(9.5), false)]
    #[case::lease_not_overdue(lease(true, 9.0), down(9.0, false), true, Some(9.5), false)]
    #[case::alive_in_gossip(lease(true, 6.9), Some(Gossip::Alive), true, Some(8.0), false)]
    #[case::no_api_gossip_decides(lease(true, 6.9), down(9.0, false), false, Some(8.0), false)]
    fn renewing_at_once_when_it_settles_a_suspect(
        #[case] lease: Option<LeaseState>,
        #[case] gossip: Option<Gossip>,
        #[case] api_ok: bool,
        #[case] leases_seen: Option<f64>,
        #[case] want: bool,
    ) {
        let ctx = Context {
            now: at(10.0),
            api_ok,
            membership: true,
            leases_seen: leases_seen.map(at),
            trouble_since: None,
        };
        assert_eq!(awaits_evidence(&ev(true, false, lease, gossip), &ctx), want);
    }

    /// A slow lease (15 s) last seen changing at `changed`, of a member
    /// gossip declared down at 9.0, judged at 10 with the watch current:
    /// while our trouble mark is out (since `since`), a member that has
    /// not renewed within a fast period and the margin of the later of
    /// the mark and its last renewal has stopped; before the mark shows
    /// (or without it), only its own period counts.
    #[rstest]
    #[case::no_mark_yet_slow_lease_waits(1.0, None, Ok(()))]
    #[case::mark_out_long_enough_and_no_renewal(1.0, Some(8.0), Err(Gone::Failed))]
    #[case::mark_out_but_not_yet_a_fast_period(1.0, Some(8.6), Ok(()))]
    #[case::renewed_fast_after_the_mark(9.2, Some(8.0), Ok(()))]
    #[case::renewed_after_the_mark_then_stopped(8.4, Some(8.0), Err(Gone::Failed))]
    #[case::slow_lease_overdue_by_its_own_period(-6.0, None, Err(Gone::Failed))]
    fn a_trouble_mark_shortens_the_wait_to_a_fast_period(
        #[case] changed: f64,
        #[case] since: Option<f64>,
        #[case] want: Result<(), Gone>,
    ) {
        let slow = Some(LeaseState {
            held: true,
            changed: if changed < 0.0 {
                T0.checked_sub(Duration::from_secs_f64(-changed))
                    .unwrap_or(*T0)
            } else {
                at(changed)
            },
            period: presence::SLOW_RENEW,
            trouble: false,
        });
        let ctx = Context {
            now: at(10.0),
            api_ok: true,
            membership: true,
            leases_seen: Some(at(10.0)),
            trouble_since: since.map(at),
        };
        assert_eq!(judge(&ev(true, false, slow, down(9.0, false)), &ctx), want);
    }

    /// Trouble: what makes a speaker mark its lease, judged at 10 with a
    /// 2 s period (a lease changed at 9 is within it, one at 3 is not).
    #[rstest]
    #[case::all_alive(ev(true, false, lease(true, 3.0), Some(Gossip::Alive)), false)]
    #[case::a_suspect(ev(true, false, lease(true, 9.0), Some(Gossip::Suspect)), true)]
    #[case::down_with_a_live_lease(ev(true, false, lease(true, 9.0), down(9.5, false)), true)]
    #[case::down_and_its_lease_stopped_is_settled(
        ev(true, false, lease(true, 3.0), down(9.5, false)),
        false
    )]
    #[case::down_and_left(ev(true, false, lease(false, 9.0), down(9.5, true)), false)]
    #[case::down_without_lease(ev(true, false, None, down(9.5, false)), false)]
    #[case::no_gossip(ev(true, false, lease(true, 9.0), None), false)]
    fn trouble(#[case] e: Evidence, #[case] want: bool) {
        assert_eq!(troubled([&e], at(10.0)), want);
    }

    #[test]
    fn a_suspect_counts_alive() {
        let ctx = Context {
            now: at(10.0),
            api_ok: false,
            membership: true,
            leases_seen: None,
            trouble_since: None,
        };
        let e = ev(true, false, lease(true, 1.0), Some(Gossip::Suspect));
        assert_eq!(judge(&e, &ctx), Ok(()));
    }

    #[test]
    fn alive_splits_nodes_and_says_why() {
        let ctx = Context {
            now: at(10.0),
            api_ok: true,
            membership: true,
            leases_seen: Some(at(10.0)),
            trouble_since: None,
        };
        let (alive, gone) = alive(
            [
                ("a", ev(true, false, lease(true, 9.0), Some(Gossip::Alive))),
                ("b", ev(true, true, lease(true, 9.0), Some(Gossip::Alive))),
                ("c", ev(true, false, lease(true, 1.0), down(8.0, false))),
            ],
            &ctx,
        );
        assert_eq!(alive, BTreeSet::from(["a".to_owned()]));
        assert_eq!(gone.get("b"), Some(&Gone::OutOfService));
        assert_eq!(gone.get("c"), Some(&Gone::Failed));
        assert!(Gone::Failed.to_string().contains("gossip"));
    }

    #[rstest]
    #[case::api_ok_never(true, 1, 3, false)]
    #[case::minority_without_api(false, 1, 3, true)]
    #[case::half_without_api(false, 2, 4, true)]
    #[case::majority_without_api(false, 2, 3, false)]
    #[case::alone_is_not_isolated(false, 1, 1, false)]
    fn isolation(
        #[case] api_ok: bool,
        #[case] alive: usize,
        #[case] known: usize,
        #[case] want: bool,
    ) {
        assert_eq!(isolated(api_ok, alive, known), want);
    }
}
