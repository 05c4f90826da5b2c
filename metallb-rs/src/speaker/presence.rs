//! Presence: each speaker holds a Lease `metallb-speaker-<node>`, renews
//! it every [`RENEW_SECONDS`] and clears its holder on SIGTERM. Other
//! speakers drop a node whose speaker left from their candidates at once,
//! so a stopped speaker's addresses move immediately - without waiting for
//! its Node or endpoints to change (upstream without memberlist never
//! moves them). The renewals tell a crashed speaker from one that is only
//! cut off from the others; `liveness` weighs them with gossip.

use super::liveness::LeaseState;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use std::collections::BTreeMap;
use std::time::SystemTime;

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

/// What each node's presence lease says: held or cleared, and when it was
/// last renewed (a lease without renewTime counts as renewed long ago).
pub fn states<'a>(leases: impl IntoIterator<Item = &'a Lease>) -> BTreeMap<String, LeaseState> {
    leases
        .into_iter()
        .filter_map(|l| {
            let node = l.metadata.name.as_deref()?.strip_prefix(LEASE_PREFIX)?;
            let spec = l.spec.as_ref();
            let held = spec
                .and_then(|s| s.holder_identity.as_deref())
                .is_some_and(|h| !h.is_empty());
            let renewed = spec
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| SystemTime::from(t.0))
                .unwrap_or(SystemTime::UNIX_EPOCH);
            Some((node.to_owned(), LeaseState { held, renewed }))
        })
        .collect()
}

/// Marks `node`'s speaker present (creates or takes its lease).
pub async fn join(api: &Api<Lease>, node: &str) -> Result<(), kube::Error> {
    set(api, node, Some(node)).await
}

/// Marks `node`'s speaker gone.
pub async fn leave(api: &Api<Lease>, node: &str) -> Result<(), kube::Error> {
    set(api, node, None).await
}

async fn set(api: &Api<Lease>, node: &str, holder: Option<&str>) -> Result<(), kube::Error> {
    let name = lease_name(node);
    let spec = LeaseSpec {
        holder_identity: holder.map(str::to_owned),
        lease_duration_seconds: Some(3 * RENEW_SECONDS),
        renew_time: Some(MicroTime(Timestamp::now())),
        ..LeaseSpec::default()
    };
    match api.get_opt(&name).await? {
        Some(mut lease) => {
            lease.spec = Some(spec);
            api.replace(&name, &PostParams::default(), &lease).await?;
        }
        None => {
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
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn states_say_held_or_cleared_and_when_renewed() {
        let mut renewed = lease("a", Some("a"));
        let at = Timestamp::from_second(1_700_000_000).expect("timestamp");
        if let Some(spec) = renewed.spec.as_mut() {
            spec.renew_time = Some(MicroTime(at));
        }
        let leases = [renewed, lease("b", None), lease("c", Some(""))];
        let states = states(&leases);
        assert_eq!(
            states.get("a"),
            Some(&LeaseState {
                held: true,
                renewed: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000)
            })
        );
        assert!(!states["b"].held && !states["c"].held);
        assert_eq!(states["b"].renewed, SystemTime::UNIX_EPOCH);
        let other = Lease {
            metadata: ObjectMeta {
                name: Some("metallb-controller".into()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        assert!(super::states([&other]).is_empty());
    }
}
