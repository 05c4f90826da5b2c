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
//! `lease_duration` - the time another candidate must wait after the last
//! renewal before taking over. So two leaders never act at once, unless a
//! clock runs more than `lease_duration - renew_deadline` apart.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
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

/// Decides from a lease's spec (pure, so it is tested without a cluster).
pub fn decide(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Decision {
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
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
    let expired = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .is_none_or(|t| t.0 + duration < now);
    if expired {
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
        }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// One attempt: true when we hold the lease afterwards.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, LeaseError> {
        let err = |source| LeaseError::Api {
            name: self.name.clone(),
            source,
        };
        let now = Timestamp::now();
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
        let acquiring = match decide(lease.spec.as_ref(), &self.identity, now) {
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
        spec.renew_time = Some(MicroTime(Timestamp::now()));
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
    /// this candidate may act now (true) or not (false). Leadership is
    /// dropped - false is sent - as soon as `renew_deadline` passes
    /// without a successful renewal, before anyone else can acquire it.
    pub fn run(self) -> (watch::Receiver<bool>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut last_renewed: Option<Instant> = None;
            loop {
                let attempt =
                    tokio::time::timeout(self.timings.retry_period, self.try_acquire_or_renew())
                        .await;
                match attempt {
                    Ok(Ok(true)) => {
                        if last_renewed.is_none() {
                            tracing::info!(lease = %self.name, identity = %self.identity, "became leader");
                        }
                        last_renewed = Some(Instant::now());
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
                let leading = last_renewed.is_some();
                if *tx.borrow() != leading {
                    tx.send_replace(leading);
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

    #[test]
    fn decisions() {
        assert_eq!(decide(None, "a", now()), Decision::Acquire);
        assert_eq!(
            decide(Some(&spec(Some("a"), 100, 15)), "a", now()),
            Decision::Renew
        );
        assert_eq!(
            decide(Some(&spec(Some("b"), 5, 15)), "a", now()),
            Decision::Wait { holder: "b".into() }
        );
        assert_eq!(
            decide(Some(&spec(Some("b"), 16, 15)), "a", now()),
            Decision::Acquire,
            "expired"
        );
        assert_eq!(
            decide(Some(&spec(None, 0, 15)), "a", now()),
            Decision::Acquire,
            "released"
        );
        assert_eq!(
            decide(Some(&spec(Some(""), 0, 15)), "a", now()),
            Decision::Acquire
        );
        let mut no_times = spec(Some("b"), 0, 15);
        no_times.renew_time = None;
        assert_eq!(decide(Some(&no_times), "a", now()), Decision::Acquire);
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
}
