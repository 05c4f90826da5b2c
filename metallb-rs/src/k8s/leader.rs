//! Leader election over a coordination.k8s.io Lease, as client-go's
//! leaderelection does it: read the Lease, then take or renew it with an
//! update that carries the read resourceVersion, so of two candidates
//! racing for it exactly one wins (the other gets 409 Conflict).
//!
//! Why not a crate: kube-leader-election is built on an older kube, and
//! kube-lease-manager takes the lock with server-side apply conflicts,
//! which the lab API server does not implement; optimistic concurrency
//! works on every API server.
//!
//! Safety during a rolling update: the leader stops acting as soon as it
//! has not renewed for `renew_deadline`, which is shorter than
//! `lease_duration` - the time another candidate waits, after it last
//! saw the lease change, before taking over. Both are measured on each
//! process's own monotonic clock ([`super::observed`], client-go's
//! `observedTime`): the holder's renewTime is never compared with the
//! candidate's wall clock, so clocks set apart by any amount neither let
//! a candidate take over from a leader that renews nor make it wait for
//! one that stopped. What remains is clock *rate*: two leaders never act
//! at once as long as the clocks' rates differ by less than
//! `lease_duration - renew_deadline` over a lease duration, and no write
//! of the old leader outlives its step-down by more than the API call
//! timeout, which is shorter than that margin (see the tests).

use super::observed::{self, Observation, Version};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Timings, client-go's defaults.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// How long a lease stays valid after its last renewal.
    pub lease_duration: Duration,
    /// The leader gives up acting when it has not renewed for this long.
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Whether a candidate may act, and until when (its step-down time if
/// no renewal succeeds meanwhile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acting {
    /// Not leading.
    No,
    /// Leading until this instant (the last renewal's start plus
    /// `renew_deadline`) unless renewed again.
    Until(Instant),
    /// No election: always acting.
    Always,
}

impl Acting {
    /// Leading at `now`.
    pub fn leading(&self, now: Instant) -> bool {
        self.write_budget(now, Duration::MAX).is_some()
    }

    /// How long a write started at `now` may take: none when not leading,
    /// otherwise `cap` cut at the step-down, so that no write of ours is
    /// still waiting once another candidate may have taken over.
    pub fn write_budget(&self, now: Instant, cap: Duration) -> Option<Duration> {
        match *self {
            Acting::No => None,
            Acting::Always => Some(cap),
            Acting::Until(t) => {
                let left = t.checked_duration_since(now).filter(|d| !d.is_zero())?;
                Some(left.min(cap))
            }
        }
    }
}

/// What a candidate should do with the lease it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// We hold it: renew.
    Renew,
    /// Nobody holds it, or the holder let it expire: take it.
    Acquire,
    /// Someone else holds it and it is still valid.
    Wait {
        /// The holder.
        holder: String,
    },
}

/// Decides from a lease's spec and when we first saw its current version
/// (`seen`, from [`observed::observe`]; our monotonic clock), at `now` on
/// the same clock, a holder's lease lasting our own `duration` (as
/// client-go's leader election: the `leaseDurationSeconds` written in the
/// lease is not trusted - anyone who may write a Lease in the namespace,
/// a speaker among them, could otherwise stop assignment cluster-wide
/// with a huge one). Pure, so it is tested without a cluster or a clock.
pub fn decide(
    spec: Option<&LeaseSpec>,
    seen: &Observation,
    me: &str,
    duration: Duration,
    now: std::time::Instant,
) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder == me {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::Acquire;
    }
    if observed::unchanged_for(seen, duration, now) {
        Decision::Acquire
    } else {
        Decision::Wait {
            holder: holder.to_owned(),
        }
    }
}

/// The lease `name` held by `me`, as written when acquiring or renewing.
fn held_spec(
    old: Option<&LeaseSpec>,
    me: &str,
    timings: &Timings,
    now: Timestamp,
    acquiring: bool,
) -> LeaseSpec {
    let mut spec = old.cloned().unwrap_or_default();
    let secs = i32::try_from(timings.lease_duration.as_secs()).unwrap_or(i32::MAX);
    spec.holder_identity = Some(me.to_owned());
    spec.lease_duration_seconds = Some(secs);
    spec.renew_time = Some(MicroTime(now));
    if acquiring {
        spec.acquire_time = Some(MicroTime(now));
        let had_holder = old
            .and_then(|s| s.holder_identity.as_deref())
            .is_some_and(|h| !h.is_empty());
        let transitions = old.and_then(|s| s.lease_transitions).unwrap_or(0);
        spec.lease_transitions = Some(if had_holder {
            transitions + 1
        } else {
            transitions
        });
    }
    spec
}

/// Errors of one acquire/renew attempt.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The API call failed (conflicts are not errors: they mean "lost").
    #[error("lease {name}: {source}")]
    Api {
        /// The lease.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

/// One candidate for one lease.
#[derive(Clone)]
pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: Timings,
    /// The lease's version last read and when we first saw it.
    seen: Option<Observation>,
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

impl LeaseLock {
    /// Candidate `identity` for Lease `namespace/name`.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timings: Timings,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            timings,
            seen: None,
        }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// One attempt: true when we hold the lease afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaseError> {
        let name = self.name.clone();
        let err = |source| LeaseError::Api {
            name: name.clone(),
            source,
        };
        // Written into the lease (renewTime) only; decisions use `seen`.
        let now = crate::clock::wall_now();
        let current = self.api.get_opt(&self.name).await.map_err(err)?;
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(held_spec(None, &self.identity, &self.timings, now, true)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(e) if is_conflict(&e) => Ok(false),
                Err(e) => Err(err(e)),
            };
        };
        let seen = observed::observe(
            self.seen.as_ref(),
            Version::of(&lease),
            std::time::Instant::now(),
        );
        let decision = decide(
            lease.spec.as_ref(),
            &seen,
            &self.identity,
            self.timings.lease_duration,
            std::time::Instant::now(),
        );
        self.seen = Some(seen);
        let acquiring = match decision {
            Decision::Wait { .. } => return Ok(false),
            Decision::Renew => false,
            Decision::Acquire => true,
        };
        lease.spec = Some(held_spec(
            lease.spec.as_ref(),
            &self.identity,
            &self.timings,
            now,
            acquiring,
        ));
        // The resourceVersion read above makes this a compare-and-swap.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(err(e)),
        }
    }

    /// Gives the lease up (on shutdown) so another candidate takes over at
    /// once instead of waiting for it to expire.
    pub async fn release(&self) -> Result<(), LeaseError> {
        let err = |source| LeaseError::Api {
            name: self.name.clone(),
            source,
        };
        let Some(mut lease) = self.api.get_opt(&self.name).await.map_err(err)? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(crate::clock::wall_now()));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_conflict(&e) => Ok(()),
            Err(e) => Err(err(e)),
        }
    }

    /// Keeps trying to lead and publishes, on the returned channel, whether
    /// this candidate may act and until when. Leadership is dropped -
    /// [`Acting::No`] is sent - as soon as `renew_deadline` passes without
    /// a successful renewal, before anyone else can acquire it.
    ///
    /// A renewal counts from the moment its attempt *started*: the write
    /// that renewed the lease reached the API server after that, so every
    /// other candidate saw the lease change later still, and waits a whole
    /// `lease_duration` from then.
    pub fn run(mut self) -> (watch::Receiver<Acting>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(Acting::No);
        let task = tokio::spawn(async move {
            let mut last_renewed: Option<Instant> = None;
            loop {
                let started = Instant::now();
                let attempt =
                    tokio::time::timeout(self.timings.retry_period, self.try_acquire_or_renew())
                        .await;
                match attempt {
                    Ok(Ok(true)) => {
                        if last_renewed.is_none() {
                            tracing::info!(lease = %self.name, identity = %self.identity, "became leader");
                        }
                        last_renewed = Some(started);
                    }
                    Ok(Ok(false)) => {
                        if last_renewed.take().is_some() {
                            tracing::warn!(lease = %self.name, "lost the lease to another candidate");
                        }
                    }
                    Ok(Err(e)) => tracing::warn!(error = %e, "leader election attempt failed"),
                    Err(_) => {
                        tracing::warn!(lease = %self.name, "leader election attempt timed out")
                    }
                }
                if last_renewed.is_some_and(|t| t.elapsed() >= self.timings.renew_deadline) {
                    tracing::warn!(lease = %self.name, "could not renew within the deadline: stepping down");
                    last_renewed = None;
                }
                let acting = match last_renewed {
                    Some(t) => Acting::Until(t + self.timings.renew_deadline),
                    None => Acting::No,
                };
                if *tx.borrow() != acting {
                    tx.send_replace(acting);
                }
                let next = match last_renewed {
                    // Step down exactly at the deadline if renewals keep failing.
                    Some(t) => (t + self.timings.renew_deadline)
                        .min(Instant::now() + self.timings.retry_period),
                    None => Instant::now() + self.timings.retry_period,
                };
                tokio::time::sleep_until(next).await;
                if tx.is_closed() {
                    return;
                }
            }
        });
        (rx, task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::SignedDuration;
    use rstest::rstest;
    use std::time::Instant;

    fn spec(holder: Option<&str>, renewed_secs_ago: i64, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: Some(duration),
            renew_time: Some(MicroTime(
                now() - SignedDuration::from_secs(renewed_secs_ago),
            )),
            ..LeaseSpec::default()
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_000_000).expect("timestamp")
    }

    fn lease(spec: LeaseSpec, rv: u64) -> Lease {
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(rv.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        }
    }

    /// Decides on `l`, first seen `seen_secs_ago` seconds of our time ago.
    fn decide_seen(l: &Lease, seen_secs_ago: u64) -> Decision {
        let t = Instant::now();
        let seen = Observation {
            version: Version::of(l),
            since: t,
            renewed: false,
        };
        decide(
            l.spec.as_ref(),
            &seen,
            "a",
            Timings::default().lease_duration,
            t + Duration::from_secs(seen_secs_ago),
        )
    }

    #[test]
    fn decisions() {
        let t = Instant::now();
        let none = observed::observe(None, Version::of(&Lease::default()), t);
        let duration = Timings::default().lease_duration;
        assert_eq!(decide(None, &none, "a", duration, t), Decision::Acquire);
        assert_eq!(
            decide_seen(&lease(spec(Some("a"), 100, 15), 1), 100),
            Decision::Renew
        );
        assert_eq!(
            decide_seen(&lease(spec(Some("b"), 5, 15), 1), 5),
            Decision::Wait { holder: "b".into() }
        );
        assert_eq!(
            decide_seen(&lease(spec(Some("b"), 16, 15), 1), 16),
            Decision::Acquire,
            "expired"
        );
        // The renewTime says nothing: only how long we have seen it unchanged.
        assert_eq!(
            decide_seen(&lease(spec(Some("b"), 1000, 15), 1), 5),
            Decision::Wait { holder: "b".into() },
            "an old renewTime first seen now"
        );
        assert_eq!(
            decide_seen(&lease(spec(None, 0, 15), 1), 0),
            Decision::Acquire,
            "released"
        );
        assert_eq!(
            decide_seen(&lease(spec(Some(""), 0, 15), 1), 0),
            Decision::Acquire
        );
        // A forged duration changes nothing: ours (15 s) decides.
        assert_eq!(
            decide_seen(&lease(spec(Some("b"), 16, i32::MAX), 1), 16),
            Decision::Acquire,
            "a huge leaseDurationSeconds does not hold the lease"
        );
        assert_eq!(
            decide_seen(&lease(spec(Some("b"), 5, 1), 1), 5),
            Decision::Wait { holder: "b".into() },
            "a tiny one does not hand it over early"
        );
    }

    /// Holder `b` renews every 2 s of our time up to `last` seconds,
    /// stamping renewTime with its clock (ours plus `skew` seconds);
    /// candidate `a` reads the lease every retry period up to 60 s. The
    /// second at which `a` would take over, if it would.
    fn takeover_with_skew(skew: i64, last: Option<u64>) -> Option<u64> {
        let timings = Timings::default();
        let t0 = Instant::now();
        let retry = timings.retry_period.as_secs();
        let mut current: Option<Lease> = None;
        let mut seen: Option<Observation> = None;
        for now in 0..=60u64 {
            if now % 2 == 0 && last.is_none_or(|l| now <= l) {
                let stamp = now_plus(skew + now as i64);
                let held = held_spec(
                    current.as_ref().and_then(|l| l.spec.as_ref()),
                    "b",
                    &timings,
                    stamp,
                    current.is_none(),
                );
                current = Some(lease(held, now + 1));
            }
            if now % retry != 0 {
                continue;
            }
            let Some(l) = current.as_ref() else { continue };
            let at = t0 + Duration::from_secs(now);
            let o = observed::observe(seen.as_ref(), Version::of(l), at);
            let d = decide(l.spec.as_ref(), &o, "a", timings.lease_duration, at);
            seen = Some(o);
            if d == Decision::Acquire {
                return Some(now);
            }
        }
        None
    }

    fn now_plus(secs: i64) -> Timestamp {
        now() + SignedDuration::from_secs(secs)
    }

    #[rstest]
    #[case::in_step_renewing(0, None, None)]
    #[case::holder_ahead_renewing_no_takeover(30, None, None)]
    #[case::holder_behind_renewing_no_takeover(-30, None, None)]
    #[case::in_step_stopped(0, Some(10), Some(26))]
    #[case::holder_ahead_stopped_taken_over(30, Some(10), Some(26))]
    #[case::holder_behind_stopped_taken_over(-30, Some(10), Some(26))]
    fn skewed_clocks_neither_take_over_from_a_renewing_holder_nor_wait_for_a_stopped_one(
        #[case] skew: i64,
        #[case] stopped_after: Option<u64>,
        #[case] takeover_at: Option<u64>,
    ) {
        // Stopped at 10 s: last seen changing at 10 s, taken over on the
        // first read more than 15 s later.
        assert_eq!(takeover_with_skew(skew, stopped_after), takeover_at);
    }

    #[test]
    fn acquiring_counts_transitions_and_renewing_does_not() {
        let t = Timings::default();
        let old = spec(Some("b"), 20, 15);
        let taken = held_spec(Some(&old), "a", &t, now(), true);
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.lease_duration_seconds, Some(15));
        let renewed = held_spec(Some(&taken), "a", &t, now(), false);
        assert_eq!(renewed.lease_transitions, Some(1));
        assert_eq!(renewed.acquire_time, taken.acquire_time);
        let first = held_spec(None, "a", &t, now(), true);
        assert_eq!(first.lease_transitions, Some(0));
    }

    #[test]
    fn default_timings_step_down_before_anyone_may_take_over() {
        let t = Timings::default();
        assert!(t.renew_deadline < t.lease_duration);
        assert!(t.retry_period < t.renew_deadline);
    }

    #[test]
    fn api_calls_end_within_the_margin_between_step_down_and_takeover() {
        // A write started just before the leader steps down must be over
        // before anyone may take over: the margin is what is left of the
        // lease once the leader stopped acting.
        let t = Timings::default();
        let margin = t.lease_duration - t.renew_deadline;
        assert!(
            crate::k8s::call::API_CALL_TIMEOUT < margin,
            "API_CALL_TIMEOUT {:?} must stay under lease_duration - renew_deadline = {margin:?}",
            crate::k8s::call::API_CALL_TIMEOUT
        );
    }

    #[rstest]
    #[case::not_leading(Acting::No, 0, None)]
    #[case::no_election(Acting::Always, 0, Some(4))]
    #[case::fresh_renewal_capped(Acting::Until(base() + Duration::from_secs(10)), 0, Some(4))]
    #[case::near_step_down_cut(Acting::Until(base() + Duration::from_secs(10)), 9, Some(1))]
    #[case::at_step_down(Acting::Until(base() + Duration::from_secs(10)), 10, None)]
    #[case::after_step_down(Acting::Until(base() + Duration::from_secs(10)), 12, None)]
    fn writes_never_outlive_leadership(
        #[case] acting: Acting,
        #[case] at: u64,
        #[case] budget_secs: Option<u64>,
    ) {
        let now = base() + Duration::from_secs(at);
        let cap = Duration::from_secs(4);
        let budget = acting.write_budget(now, cap);
        assert_eq!(budget, budget_secs.map(Duration::from_secs));
        assert_eq!(acting.leading(now), budget.is_some());
        if let (Acting::Until(until), Some(b)) = (acting, budget) {
            assert!(now + b <= until, "a write would outlive the step-down");
        }
    }

    fn base() -> tokio::time::Instant {
        static BASE: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
        tokio::time::Instant::from_std(*BASE)
    }
}
