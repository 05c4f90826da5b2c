//! Presence: each speaker holds a Lease `metallb-speaker-<node>`, renews
//! it every [`RENEW_SECONDS`] and clears its holder on SIGTERM. Other
//! speakers drop a node whose speaker left from their candidates at once,
//! so a stopped speaker's addresses move immediately - without waiting for
//! its Node or endpoints to change (upstream without memberlist never
//! moves them). The renewals tell a crashed speaker from one that is only
//! cut off from the others; `liveness` weighs them with gossip.
//!
//! A renewal counts when we see the lease change, on our monotonic clock
//! ([`crate::k8s::observed`]): another node's renewTime is never compared
//! with ours, so a node whose wall clock is off neither loses its
//! addresses while it renews nor keeps them once it stops.

use super::liveness::LeaseState;
use crate::k8s::observed::{self, Observation, Version};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::collections::BTreeMap;
use std::time::Instant;

/// Lease name prefix.
pub const LEASE_PREFIX: &str = "metallb-speaker-";
/// Label on the leases (the speaker watches only these).
pub const COMPONENT_LABEL: &str = "metallb.io/component";
/// Renewal period (the lease is valid for three). Short because a missed
/// renewal is how the others tell a dead speaker from one that is only cut
/// off from them (see `liveness`); 0.5 writes/s per node.
pub const RENEW_SECONDS: i32 = 2;

fn lease_name(node: &str) -> String {
    format!("{LEASE_PREFIX}{node}")
}

/// What each node's presence lease says: held or cleared, and when (our
/// clock) we first saw its current version. `seen` carries the
/// observations from one call to the next (updated here; leases that
/// vanished are forgotten); a lease first seen now counts as renewed now.
pub fn states<'a>(
    leases: impl IntoIterator<Item = &'a Lease>,
    seen: &mut BTreeMap<String, Observation>,
    now: Instant,
) -> BTreeMap<String, LeaseState> {
    let mut next = BTreeMap::new();
    let states = leases
        .into_iter()
        .filter_map(|l| {
            let node = l.metadata.name.as_deref()?.strip_prefix(LEASE_PREFIX)?;
            let held = l
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                .is_some_and(|h| !h.is_empty());
            let o = observed::observe(seen.get(node), Version::of(l), now);
            let changed = o.since;
            next.insert(node.to_owned(), o);
            Some((node.to_owned(), LeaseState { held, changed }))
        })
        .collect();
    *seen = next;
    states
}

/// Marks `node`'s speaker present (creates or takes its lease).
pub async fn join(api: &Api<Lease>, node: &str) -> Result<(), kube::Error> {
    set(api, node, Some(node)).await
}

/// Marks `node`'s speaker gone.
pub async fn leave(api: &Api<Lease>, node: &str) -> Result<(), kube::Error> {
    set(api, node, None).await
}

/// One write per renewal: a merge patch of the spec (the lease is this
/// speaker's alone, so there is nothing to read first and nothing to
/// conflict with), a create when the lease does not exist yet.
async fn set(api: &Api<Lease>, node: &str, holder: Option<&str>) -> Result<(), kube::Error> {
    let name = lease_name(node);
    let spec = LeaseSpec {
        holder_identity: holder.map(str::to_owned),
        lease_duration_seconds: Some(3 * RENEW_SECONDS),
        renew_time: Some(MicroTime(crate::clock::wall_now())),
        ..LeaseSpec::default()
    };
    // A cleared holder is written as null, which a merge patch deletes.
    let patch = serde_json::json!({ "spec": {
        "holderIdentity": spec.holder_identity,
        "leaseDurationSeconds": spec.lease_duration_seconds,
        "renewTime": spec.renew_time,
    } });
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 404 => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name),
                    labels: Some([(COMPONENT_LABEL.to_owned(), "speaker".to_owned())].into()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            api.create(&PostParams::default(), &lease).await?;
        }
        other => {
            other?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speaker::liveness::{self, Context, Evidence, Gone, Gossip};
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    use rstest::rstest;
    use std::time::{Duration, SystemTime};

    fn lease(node: &str, holder: Option<&str>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(lease_name(node)),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn states_say_held_or_cleared_and_when_seen_changing() {
        let t0 = Instant::now();
        let mut seen = BTreeMap::new();
        let leases = [
            lease("a", Some("a")),
            lease("b", None),
            lease("c", Some("")),
        ];
        let first = states(&leases, &mut seen, t0);
        assert_eq!(
            first.get("a"),
            Some(&LeaseState {
                held: true,
                changed: t0
            })
        );
        assert!(!first["b"].held && !first["c"].held);
        // Unchanged: still the time it was first seen.
        let later = t0 + Duration::from_secs(3);
        assert_eq!(states(&leases, &mut seen, later)["a"].changed, t0);
        // Renewed: seen changing now.
        let mut renewed = lease("a", Some("a"));
        renewed.metadata.resource_version = Some("2".into());
        assert_eq!(states([&renewed], &mut seen, later)["a"].changed, later);
        assert_eq!(seen.len(), 1, "vanished leases are forgotten");
        let other = Lease {
            metadata: ObjectMeta {
                name: Some("metallb-controller".into()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        assert!(super::states([&other], &mut seen, later).is_empty());
    }

    /// The renewals node `x` writes, every RENEW_SECONDS of our time from
    /// 0 up to `last` seconds, stamped by its clock: ours plus `skew`
    /// seconds. What we make of them `at` seconds, with gossip saying
    /// `x` failed (so the lease decides: a partition keeps the
    /// addresses, a dead speaker loses them).
    fn judged_with_skew(skew: i64, last: u64, at: u64) -> Result<(), Gone> {
        let t0 = Instant::now();
        let wall0 = Timestamp::from_second(1_700_000_000).expect("timestamp");
        let mut seen = BTreeMap::new();
        let mut view = BTreeMap::new();
        let period = RENEW_SECONDS as u64;
        let renewal = |n: u64| {
            let mut l = lease("x", Some("x"));
            l.metadata.resource_version = Some(n.to_string());
            let stamp = wall0 + SignedDuration::from_secs(skew + (n * period) as i64);
            if let Some(s) = l.spec.as_mut() {
                s.renew_time = Some(MicroTime(stamp));
            }
            l
        };
        // Observed on every liveness tick (every second here).
        let mut current = renewal(0);
        for now in 0..=at {
            if now % period == 0 && now <= last {
                current = renewal(now / period);
            }
            view = states([&current], &mut seen, t0 + Duration::from_secs(now));
        }
        let e = Evidence {
            ready: true,
            out_of_service: false,
            lease: view.get("x").copied(),
            gossip: Some(Gossip::Down {
                since: SystemTime::UNIX_EPOCH,
                left: false,
            }),
        };
        let ctx = Context {
            now: t0 + Duration::from_secs(at),
            api_ok: true,
            membership: true,
            // Our own renewals keep the watch visibly current.
            leases_seen: Some(t0 + Duration::from_secs(at)),
        };
        liveness::judge(&e, &ctx)
    }

    #[rstest]
    #[case::in_step_renewing(0, 20, 21, Ok(()))]
    #[case::ahead_renewing_keeps(30, 20, 21, Ok(()))]
    #[case::behind_renewing_keeps(-30, 20, 21, Ok(()))]
    #[case::in_step_stopped(0, 10, 21, Err(Gone::Failed))]
    #[case::ahead_stopped_loses(30, 10, 21, Err(Gone::Failed))]
    #[case::behind_stopped_loses(-30, 10, 21, Err(Gone::Failed))]
    #[case::ahead_just_stopped_not_yet(30, 20, 22, Ok(()))]
    #[case::behind_just_stopped_not_yet(-30, 20, 22, Ok(()))]
    #[case::ahead_stopped_one_period_and_margin_ago(30, 20, 23, Err(Gone::Failed))]
    fn skewed_clocks_neither_lose_nor_keep_addresses_wrongly(
        #[case] skew: i64,
        #[case] last: u64,
        #[case] at: u64,
        #[case] want: Result<(), Gone>,
    ) {
        assert_eq!(judged_with_skew(skew, last, at), want);
    }
}
