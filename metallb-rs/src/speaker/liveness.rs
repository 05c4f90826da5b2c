//! Whose speaker counts as running, from three kinds of evidence: the
//! node (Ready, the `node.kubernetes.io/out-of-service` taint), the
//! speaker's presence Lease (renewed slowly while gossip agrees and
//! fast while anyone sees trouble: [`lease::mode`](super::lease::mode);
//! holder cleared on SIGTERM) and, when membership is on, the gossip
//! view. Pure: the runner gathers the evidence, this decides.
//!
//! The rules, in order (the first that applies wins):
//!
//! 1. A node tainted `node.kubernetes.io/out-of-service` has no speaker
//!    (the admin says the node is gone; upstream #3116).
//! 2. A cleared lease holder means the speaker left (SIGTERM).
//! 3. A held lease marked link-down
//!    (`presence::LINK_DOWN_ANNOTATION`) means its node's data-plane
//!    link failed while its API path works: it cannot answer, and says
//!    so through the API, so it is gone at once - the others take its
//!    addresses over, and it stops electing itself. Without the mark
//!    such a node is "cut off, not dead" under rule 4 and keeps its
//!    addresses, unanswered.
//! 4. Gossip says the member left or failed: gone once its lease has
//!    stopped too - or at once when this speaker cannot reach the API
//!    server (then gossip is all it knows) - unless gossip declared it
//!    while this speaker was itself cut off: such a verdict is judged as
//!    rule 6 (by the lease). Stopped: overdue by its own
//!    renewal period, or, while a fresh trouble mark names it
//!    ([`Evidence::doubted_since`]: this speaker's own mark or another's),
//!    not seen renewing for a fast period since such a mark showed or
//!    since its last renewal, whichever is later (a live speaker renews
//!    fast while it sees a mark naming it). A member that failed in
//!    gossip but keeps renewing its lease is cut off from us, not dead:
//!    it keeps its addresses, so a partition between speakers never makes
//!    two nodes answer for one address. A gossip leave is honoured the
//!    same way: a leaving speaker clears its lease right after saying
//!    goodbye (rule 2), and until the lease says so the member counts as
//!    alive for election - so a leave alone (one that raced a restart, or
//!    was forged) never moves addresses off a speaker that still renews.
//!    "Overdue" needs the lease watch shown current past the deadline: a
//!    write of this speaker's own, sent after it, seen back (a watch that
//!    froze or fell behind shows other leases' old changes late; a
//!    speaker being cut off sees every lease in its cache age).
//! 5. Gossip says alive (or suspect): alive.
//! 6. No gossip evidence: a NotReady node whose lease is overdue or
//!    missing has no speaker (#3116). With membership off, every other
//!    node counts (upstream's assumption). With membership on, a node
//!    without lease has no speaker (upstream uses live members only);
//!    until this speaker's gossip has settled ([`Context::gossip_settled`])
//!    a held lease counts; after that, gossip not knowing a member is
//!    evidence too - it is neither alive nor suspect anywhere we hear
//!    from (a restarted speaker's join feed lists only live members; a
//!    down member is forgotten after an hour) - so it counts only while
//!    its lease is seen renewing, judged as in rule 4. A speaker that
//!    hangs or crash-loops on a Ready node is then not elected again by
//!    a restarted speaker while the others elect someone else.
//!
//! Partition safety ([`isolated`], [`voters`]): a speaker that cannot
//! reach the API server and sees at most half of the speakers that
//! could be on the other side alive stops answering altogether, because
//! the majority side is taking its addresses over. Speakers known to
//! have departed ([`departed`]: judged gone while this speaker still
//! reached the API server, or gone gracefully) are on no side: after a
//! scale-down an API blip must not silence the survivors.

use super::election::NodeInfo;
use super::lease::Mark;
pub use super::lease::{LeaseState, OVERDUE_MARGIN};
use super::membership::view::View;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

impl LeaseState {
    /// Overdue, as a watch that is still delivering shows it: only once
    /// this speaker has seen some lease change after the deadline. A
    /// speaker cut off from the API server sees its watch stall, and every
    /// lease in its cache ages as if its holder had died, its own
    /// included; until it notices the API is gone, those ages prove
    /// nothing.
    pub fn overdue_seen(&self, ctx: &Context) -> bool {
        self.overdue(ctx.now) && ctx.leases_seen.is_some_and(|t| t > self.deadline())
    }

    /// Stopped ([`Self::stop_deadline`], named by a fresh mark since
    /// `doubted_since`), as a watch that is still delivering shows it
    /// (see [`Self::overdue_seen`]).
    pub fn stopped_seen(&self, ctx: &Context, doubted_since: Option<Instant>) -> bool {
        let deadline = self.stop_deadline(doubted_since, ctx.api_latency);
        ctx.now > deadline && ctx.leases_seen.is_some_and(|t| t > deadline)
    }
}

/// What gossip says of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gossip {
    /// Seen alive.
    Alive,
    /// Alive, but someone's probe went unanswered (we heard of the
    /// suspicion): not yet failure.
    Suspect,
    /// Alive, but this speaker's own probe went unanswered: doubt, not
    /// yet failure ([`doubted`]).
    Unanswered,
    /// Declared down at `since` (this speaker's clock); `left` when it said
    /// goodbye.
    Down {
        /// When this speaker declared it down.
        since: Instant,
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
    /// Since when (our clock) a fresh trouble mark - this speaker's or
    /// another's - names it, while one does: from then on it renews fast
    /// if it is alive and reaches the API server.
    pub doubted_since: Option<Instant>,
    /// An earlier pass saw its lease, at this very version, stopped
    /// ([`LeaseState::stopped_seen`]): only a renewal undoes that.
    pub stopped_before: bool,
    /// Gossip declared it failed, then dropped the verdict, and its lease
    /// has not changed since ([`forgotten`]).
    pub verdict_forgotten: bool,
}

impl Evidence {
    /// Its lease is stopped, as a watch that is still delivering shows
    /// it, now or at an earlier pass at the same lease version. The
    /// deadline itself moves later with this speaker's write latency
    /// (the slack others' renewals may commit late by): without the
    /// memory, one slower write of ours made a member judged failed
    /// count as running again until our next write came back, and the
    /// addresses it had lost went unanswered meanwhile.
    fn stopped(&self, l: &LeaseState, ctx: &Context) -> bool {
        self.stopped_before || l.stopped_seen(ctx, self.doubted_since)
    }
}

/// Why a node's speaker is not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// Tainted out-of-service.
    OutOfService,
    /// Its speaker left gracefully.
    Left,
    /// Its speaker says through the API that its node's link is down.
    LinkDown,
    /// Gossip declared it failed and its lease stopped.
    Failed,
    /// NotReady, and its speaker stopped renewing its lease.
    NotReadyWithoutSpeaker,
    /// Gossip does not know it (after settling) and its lease stopped.
    Unknown,
    /// Membership is on and nothing shows a speaker there.
    NoSpeaker,
}

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Gone::OutOfService => "node tainted node.kubernetes.io/out-of-service",
            Gone::Left => "its speaker left",
            Gone::LinkDown => "its node's link is down (it said so through the API)",
            Gone::Failed => "its speaker failed (gossip) and stopped renewing its lease",
            Gone::NotReadyWithoutSpeaker => {
                "node NotReady and its speaker stopped renewing its lease"
            }
            Gone::Unknown => "gossip does not know its speaker and it stopped renewing its lease",
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
    /// Gossip has run long enough ([`GOSSIP_SETTLE`]) that a member it
    /// does not know is not merely one it has not heard from yet.
    pub gossip_settled: bool,
    /// How far this speaker's view of the leases is known to be current:
    /// when it sent the latest of its own writes its watch has shown back
    /// (a watch delivers in commit order). Another lease's change proves
    /// less: a watch falling behind shows old changes while the renewal
    /// that would keep a member is still queued behind them.
    pub leases_seen: Option<Instant>,
    /// How long this speaker's recent writes to the API server took
    /// (`renewal::Record::latency`): the others' writes go to the same
    /// server, so their renewals may commit that much later than due.
    pub api_latency: Duration,
}

/// Without a successful renewal for this long while renewing fast (this
/// much past its slow period while renewing slowly), or once a renewal
/// failed, a speaker considers the API server unreachable.
pub const API_TIMEOUT: Duration = Duration::from_secs(4);

/// How long gossip runs before a member it does not know counts as
/// evidence ([`Context::gossip_settled`]): a join feed comes back within
/// a round trip, and judging too early costs only a trouble episode (a
/// live member unknown to gossip renews at once when marked), while
/// every second here is a second a restarted speaker defers to a hung
/// one.
pub const GOSSIP_SETTLE: Duration = Duration::from_secs(1);

/// Whether the speaker of a node with `e` counts, and if not, why.
pub fn judge(e: &Evidence, ctx: &Context) -> Result<(), Gone> {
    if e.out_of_service {
        return Err(Gone::OutOfService);
    }
    if e.lease.is_some_and(|l| !l.held) {
        return Err(Gone::Left);
    }
    if e.lease.is_some_and(|l| l.link_down) {
        return Err(Gone::LinkDown);
    }
    let lease_fresh = e.lease.is_some_and(|l| !e.stopped(&l, ctx));
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
        Some(Gossip::Alive | Gossip::Suspect | Gossip::Unanswered) => Ok(()),
        None => {
            let lease_gone = e.lease.is_none_or(|l| l.overdue(ctx.now));
            if !e.ready && lease_gone {
                Err(Gone::NotReadyWithoutSpeaker)
            } else if !ctx.membership {
                Ok(())
            } else {
                match e.lease {
                    None => Err(Gone::NoSpeaker),
                    // Stopped only as a current watch shows it: an API
                    // outage of ours freezes every lease and must not
                    // move addresses.
                    Some(l) if ctx.gossip_settled && e.stopped(&l, ctx) => Err(Gone::Unknown),
                    Some(_) => Ok(()),
                }
            }
        }
    }
}

/// Whether a renewal of this speaker's own lease, seen back through its
/// watch, would settle `e`: gossip says the member is down (or, once it
/// has settled, does not know it), its lease is past its stop deadline,
/// and only the watch shown current past it ([`Context::leases_seen`])
/// is missing to count it gone. Renewing at once saves waiting for the
/// next periodic renewal (failover time); a cut-off speaker's renewal
/// never comes back, so it settles nothing there. (Renewing already
/// while gossip only suspects it was slower in the simulator.)
pub fn awaits_evidence(e: &Evidence, ctx: &Context) -> bool {
    let judged_by_lease = match e.gossip {
        Some(Gossip::Down { .. }) => true,
        None => ctx.membership && ctx.gossip_settled,
        Some(_) => false,
    };
    judged_by_lease
        && ctx.api_ok
        && e.lease.is_some_and(|l| {
            l.held
                && ctx.now > l.stop_deadline(e.doubted_since, ctx.api_latency)
                && !e.stopped(&l, ctx)
        })
}

/// Whether this speaker doubts the member of `e` and must have it renew
/// fast (name it in its lease's mark, see `presence`): its own probe of
/// the member went unanswered (a suspicion heard from others is the
/// prober's to mark), or gossip has it down while its held lease is
/// still within its own renewal period - it may be alive and cut off
/// from us - or gossip does not know it and its held lease has not been
/// seen renewed (from the start: judging it once gossip settles needs
/// the fast renewals already under way; a restarted speaker cannot tell
/// a hung speaker from a slow renewer without them). A member whose
/// lease stopped by its own period is settled: a dead node does not
/// keep anyone renewing fast; one that renews once is no doubt; one
/// marked link-down is gone, not in doubt.
pub fn doubted(e: &Evidence, ctx: &Context) -> bool {
    match e.gossip {
        Some(Gossip::Unanswered) => true,
        // A member whose lease says its link is down is settled: it is
        // gone (rule 3), there is nothing to tell apart.
        Some(Gossip::Down { .. }) => e
            .lease
            .is_some_and(|l| l.held && !l.link_down && !l.overdue(ctx.now)),
        None => {
            ctx.membership
                && e.lease.is_some_and(|l| {
                    l.held && (!l.renewed || e.verdict_forgotten) && !l.overdue(ctx.now)
                })
        }
        Some(Gossip::Alive | Gossip::Suspect) => false,
    }
}

/// Whether this speaker doubts any of the members of `evidence`
/// ([`doubted`]).
pub fn troubled<'a>(evidence: impl IntoIterator<Item = &'a Evidence>, ctx: &Context) -> bool {
    evidence.into_iter().any(|e| doubted(e, ctx))
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

/// Since when a member has been named by a fresh mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Named {
    /// When the first mark naming it showed.
    since: Instant,
    /// Its lease's version at the last pass.
    version: Option<Instant>,
}

/// What judging liveness remembers from one pass to the next: a
/// speaker's memory at start is [`Judging::default`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judging {
    /// Since when each member has been named by a fresh mark, while it
    /// is ([`Evidence::doubted_since`]).
    doubted_since: BTreeMap<String, Named>,
    /// The members this speaker's mark names ([`Assessment::doubts`]).
    marked: BTreeSet<String>,
    /// When gossip membership started ([`GOSSIP_SETTLE`]).
    gossip_since: Option<Instant>,
    /// Speakers known to have departed ([`departed`]).
    departed: BTreeSet<String>,
    /// The members gossip held failed (not left) at the last pass.
    down: BTreeSet<String>,
    /// Members gossip declared failed while this speaker was cut off: its
    /// own probes went unanswered because it was the one cut off, so the
    /// verdicts say nothing of them. Until gossip sees them again they
    /// are judged as members gossip does not know (by their leases):
    /// back in touch, but before its next renewal gets through, a speaker
    /// must not take their addresses on those verdicts.
    distrusted: BTreeSet<String>,
    /// The members whose verdicts gossip dropped, each with its lease's
    /// version then ([`forgotten`]); bounded by the nodes.
    forgotten: BTreeMap<String, Option<Instant>>,
    /// The latest [`Inputs::own_write_seen`] ([`Context::leases_seen`]).
    watch_current: Option<Instant>,
    /// Alone in gossip, this speaker saw a member a mark named renew
    /// after the mark showed: the others live and it is the one cut off
    /// from them, so its own mark may not reach one whose watch lags
    /// ([`assess`]). Kept until it is no longer alone.
    marks_answered: bool,
    /// The nodes whose lease a pass saw stopped, with the lease's
    /// version then ([`Evidence::stopped_before`]); bounded by the nodes.
    stopped: BTreeMap<String, Instant>,
}

impl Judging {
    /// Gossip membership started at `now`.
    pub fn gossip_started(&mut self, now: Instant) {
        self.gossip_since = Some(now);
    }

    /// Whether an earlier pass saw `node`'s lease stopped at `lease`'s
    /// version.
    fn stopped_before(&self, node: &str, lease: Option<&LeaseState>) -> bool {
        lease.is_some_and(|l| self.stopped.get(node) == Some(&l.changed))
    }

    /// Keeps the nodes judged by their lease (gossip holds them down or
    /// does not know them) whose lease this pass sees stopped
    /// (`evidence`), at their lease's version; a renewed or removed
    /// lease is forgotten. Only those: another's lease timing decides
    /// nothing, and passes are skipped while it changes
    /// ([`memo::stands_until`]).
    fn note_stopped(&mut self, evidence: &[(&str, Evidence)], ctx: &Context) {
        self.stopped = evidence
            .iter()
            .filter(|(_, e)| matches!(e.gossip, Some(Gossip::Down { .. }) | None))
            .filter_map(|(node, e)| {
                let l = e.lease?;
                e.stopped(&l, ctx).then(|| ((*node).to_owned(), l.changed))
            })
            .collect();
    }
}

/// Everything one assessment looks at.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// Now, on this speaker's monotonic clock.
    pub now: Instant,
    /// This speaker's node.
    pub me: &'a str,
    /// This speaker reached the API server recently (`renewal::Record::api_ok`).
    pub api_ok: bool,
    /// How long its recent writes took (`renewal::Record::latency`).
    pub api_latency: Duration,
    /// The gossip view, when membership runs.
    pub view: Option<&'a View>,
    /// The nodes, as election sees them.
    pub nodes: &'a [NodeInfo],
    /// Each node's presence lease (`presence::states`).
    pub leases: &'a BTreeMap<String, LeaseState>,
    /// The marks the leases carry (`presence::marks`).
    pub marks: &'a BTreeMap<String, Mark>,
    /// When the write that made the version of this speaker's lease its
    /// watch shows was sent, if known (`renewal::Record::sent_of`).
    pub own_write_seen: Option<Instant>,
    /// When this speaker's newest successful write was sent: one sent
    /// after a deadline is on its way back through the watch.
    pub last_write_sent: Option<Instant>,
}

/// What one assessment decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    /// The nodes whose speaker counts.
    pub alive: BTreeSet<String>,
    /// Why the others do not.
    pub gone: BTreeMap<String, Gone>,
    /// Cut off from the API server and most speakers: answer nothing.
    pub isolated: bool,
    /// The speakers partition safety weighed ([`voters`]), for the guard;
    /// `None` without membership.
    pub voters: Option<BTreeSet<String>>,
    /// The members this speaker names in its lease's mark: those it
    /// doubts ([`doubted`]) that no other speaker's fresh mark names
    /// already (one mark serves every judge), keeping those it named
    /// before while it doubts them, at most `lease::MARK_NAMES_MAX`.
    pub doubts: BTreeSet<String>,
    /// A renewal of our own lease now would settle a member gossip
    /// declared down ([`awaits_evidence`]).
    pub renew_now: bool,
}

impl Assessment {
    /// This speaker doubts members and marks its lease.
    pub fn trouble(&self) -> bool {
        !self.doubts.is_empty()
    }

    /// The mark its lease carries, if any.
    pub fn mark(&self) -> Option<Mark> {
        Mark::naming(&self.doubts)
    }
}

mod forgotten;
mod memo;
mod partition;
mod pass;
pub use memo::{lease_change_matters, stands_until};
pub use partition::{departed, gossip_minority, isolated, isolated_among, isolated_in, voters};
pub use pass::assess;

#[cfg(test)]
mod tests;
