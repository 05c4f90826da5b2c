//! Graceful leave: each speaker holds a Lease `metallb-speaker-<node>`
//! while it runs and clears its holder on SIGTERM. Other speakers drop a
//! node whose speaker left from their candidates at once, so a stopped
//! speaker's addresses move immediately - without waiting for its Node or
//! endpoints to change (upstream without memberlist never moves them).
//!
//! A node without such a Lease counts as having a speaker, as upstream
//! assumes; detecting crashed speakers is the membership layer's job.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use std::collections::BTreeSet;

/// Lease name prefix.
pub const LEASE_PREFIX: &str = "metallb-speaker-";
/// Label on the leases (the speaker watches only these).
pub const COMPONENT_LABEL: &str = "metallb.io/component";
/// Renewal period and validity.
pub const RENEW_SECONDS: i32 = 5;

fn lease_name(node: &str) -> String {
    format!("{LEASE_PREFIX}{node}")
}

/// Nodes whose speaker left gracefully (lease present, holder cleared).
pub fn departed<'a>(leases: impl IntoIterator<Item = &'a Lease>) -> BTreeSet<String> {
    leases
        .into_iter()
        .filter_map(|l| {
            let node = l.metadata.name.as_deref()?.strip_prefix(LEASE_PREFIX)?;
            let holder = l
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                .unwrap_or_default();
            holder.is_empty().then(|| node.to_owned())
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
    fn only_cleared_leases_mean_departed() {
        let leases = [
            lease("a", Some("a")),
            lease("b", None),
            lease("c", Some("")),
        ];
        assert_eq!(departed(&leases), ["b".to_owned(), "c".to_owned()].into());
        let other = Lease {
            metadata: ObjectMeta {
                name: Some("metallb-controller".into()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        assert!(departed([&other]).is_empty());
    }
}
