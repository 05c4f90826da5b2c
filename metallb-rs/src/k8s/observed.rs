//! Lease expiry on the local monotonic clock, as client-go's leader
//! election judges it (its `observedTime`): a lease is expired when it
//! has not changed for its duration of *our* time since we first saw
//! its current value. Another node's renewTime is never compared with
//! our clock, so nodes whose wall clocks disagree by any amount neither
//! take over from a holder that renews nor wait for one that stopped.
//!
//! The price: a lease first seen (a restart) counts as fresh for one
//! duration, even if its holder died long ago.

use k8s_openapi::api::coordination::v1::Lease;
use std::time::{Duration, Instant};

/// What identifies one value of a lease: any renewal or change of
/// holder changes it (the resourceVersion alone would do on a real API
/// server; renewTime and holder also cover a server that reuses it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    resource_version: Option<String>,
    renew_time: Option<String>,
    holder: Option<String>,
}

impl Version {
    /// The version of `lease`.
    pub fn of(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        Self {
            resource_version: lease.metadata.resource_version.clone(),
            renew_time: spec
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0.to_string()),
            holder: spec.and_then(|s| s.holder_identity.clone()),
        }
    }
}

/// A lease's current version and when (our monotonic clock) we first
/// saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The version seen.
    pub version: Version,
    /// When we first saw it.
    pub since: Instant,
    /// We have seen the lease change at least once (not only its first
    /// value): its holder was seen renewing while we watched.
    pub renewed: bool,
}

/// The observation after seeing `version` at `now`: unchanged since
/// `previous` keeps its time, anything else starts anew.
pub fn observe(previous: Option<&Observation>, version: Version, now: Instant) -> Observation {
    match previous {
        Some(p) if p.version == version => p.clone(),
        Some(_) => Observation {
            version,
            since: now,
            renewed: true,
        },
        None => Observation {
            version,
            since: now,
            renewed: false,
        },
    }
}

/// The lease has not changed for longer than `duration` of our time.
pub fn unchanged_for(o: &Observation, duration: Duration, now: Instant) -> bool {
    now.saturating_duration_since(o.since) > duration
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use k8s_openapi::jiff::Timestamp;

    fn lease(rv: &str, renewed: i64, holder: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(Timestamp::from_second(renewed).expect("ts"))),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn any_change_restarts_the_clock_and_none_keeps_it() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let first = observe(None, Version::of(&lease("1", 100, "a")), t0);
        assert_eq!(first.since, t0);
        assert!(!first.renewed, "a first value is not a renewal");
        let same = observe(Some(&first), Version::of(&lease("1", 100, "a")), t0 + s(5));
        assert_eq!(same.since, t0, "nothing changed");
        for changed in [
            lease("2", 100, "a"),
            lease("1", 101, "a"),
            lease("1", 100, "b"),
        ] {
            let o = observe(Some(&first), Version::of(&changed), t0 + s(5));
            assert_eq!(o.since, t0 + s(5), "{changed:?}");
            assert!(o.renewed, "{changed:?}");
            let again = observe(Some(&o), Version::of(&changed), t0 + s(6));
            assert!(again.renewed, "a renewal seen stays seen");
        }
        assert!(!same.renewed);
        assert!(!unchanged_for(&first, s(15), t0 + s(15)));
        assert!(unchanged_for(&first, s(15), t0 + s(16)));
    }
}
