//! `L2` presence renewal spec: speakers renew their presence leases
//! slowly while gossip agrees (docs/src/differences-full.md, Failover) and fast while any
//! speaker's lease carries a fresh trouble mark - which is what lets the
//! others tell a speaker cut off from them from a dead one within the
//! failover bound. The mark is planted by the spec on a lease of its own
//! and renewed like a speaker in trouble renews it, then left to go
//! stale, as the mark of a speaker that died would. While no Node of
//! that name exists the mark is nobody's and nobody follows it; then the
//! spec adds the Node, tainted out-of-service so nothing is elected there.

use crate::metallb::NAMESPACE;
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::wait::eventually;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use metallb_rs::speaker::election::OUT_OF_SERVICE_TAINT;
use metallb_rs::speaker::presence::{
    COMPONENT_LABEL, FAST_RENEW, LEASE_PREFIX, SLOW_RENEW, TROUBLE_ANNOTATION,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The node named by the planted lease.
const MARKER: &str = "e2e-trouble-marker";
/// How long the planted mark is renewed.
const MARKED: Duration = Duration::from_secs(6);
/// After the mark shows, every speaker renews fast within this long: it
/// looks for marks five times a second, then writes.
const FOLLOW_BOUND: Duration = Duration::from_secs(2);

/// The suite's presence spec.
pub(super) fn specs() -> Vec<Spec> {
    vec![Spec::new(
        "L2",
        "should renew presence leases slowly while gossip agrees and fast while a speaker's lease carries a fresh trouble mark",
        &["IPV4"],
        follows_the_mark,
    )]
}

/// The renewal period each real node's presence lease declares
/// (`leaseDurationSeconds` / 3) and its renewTime, by node.
type Renewals = BTreeMap<String, (Duration, Option<MicroTime>)>;

/// The [`Renewals`] the real nodes' leases show now.
fn periods(ctx: &Ctx, api: &Api<Lease>) -> Result<Renewals> {
    let mut out = BTreeMap::new();
    for node in ctx.cluster().nodes() {
        let name = format!("{LEASE_PREFIX}{}", node.name);
        let lease = ctx.block_on(api.get_opt(&name))?.with_context(|| {
            format!(
                "{name} does not exist: is the speaker of {} running?",
                node.name
            )
        })?;
        let spec = lease.spec.unwrap_or_default();
        let secs = spec.lease_duration_seconds.unwrap_or(0) / 3;
        out.insert(
            node.name,
            (
                Duration::from_secs(u64::try_from(secs).unwrap_or(0)),
                spec.renew_time,
            ),
        );
    }
    Ok(out)
}

/// Every node's lease declares `period`: `Some` with the leases, else
/// `None` (for `eventually`).
fn all_at(ctx: &Ctx, api: &Api<Lease>, period: Duration) -> Result<Option<Renewals>> {
    let now = periods(ctx, api)?;
    Ok(now.values().all(|(p, _)| *p == period).then_some(now))
}

/// Creates the marked lease (replacing one an interrupted run left).
fn plant(ctx: &Ctx, api: &Api<Lease>) -> Result<()> {
    remove(ctx, api)?;
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(format!("{LEASE_PREFIX}{MARKER}")),
            labels: Some([(COMPONENT_LABEL.to_owned(), "speaker".to_owned())].into()),
            annotations: Some([(TROUBLE_ANNOTATION.to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(MARKER.to_owned()),
            lease_duration_seconds: Some(3),
            ..LeaseSpec::default()
        }),
    };
    ctx.block_on(api.create(&PostParams::default(), &lease))?;
    Ok(())
}

fn remove(ctx: &Ctx, api: &Api<Lease>) -> Result<()> {
    gone(ctx.block_on(api.delete(&format!("{LEASE_PREFIX}{MARKER}"), &DeleteParams::default())))
}

/// A delete's outcome: done, or nothing was there.
fn gone<T>(deleted: kube::Result<T>) -> Result<()> {
    match deleted {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Adds the Node the marked lease belongs to, out of service: its mark
/// counts, and no address is elected there.
fn add_marker_node(ctx: &Ctx, nodes: &Api<Node>) -> Result<()> {
    gone(ctx.block_on(nodes.delete(MARKER, &DeleteParams::default())))?;
    let node = Node {
        metadata: ObjectMeta {
            name: Some(MARKER.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: Some(vec![Taint {
                key: OUT_OF_SERVICE_TAINT.to_owned(),
                value: Some("nodeshutdown".to_owned()),
                effect: "NoExecute".to_owned(),
                ..Taint::default()
            }]),
            ..NodeSpec::default()
        }),
        status: None,
    };
    ctx.block_on(nodes.create(&PostParams::default(), &node))?;
    Ok(())
}

fn renew_mark(ctx: &Ctx, api: &Api<Lease>) -> Result<()> {
    let patch = json!({ "spec": { "renewTime": MicroTime(k8s_openapi::jiff::Timestamp::now()) } });
    ctx.block_on(api.patch(
        &format!("{LEASE_PREFIX}{MARKER}"),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    ))?;
    Ok(())
}

fn follows_the_mark(ctx: &Ctx) -> Result<()> {
    let api: Api<Lease> = Api::namespaced(ctx.client()?, NAMESPACE);
    // Earlier specs may have left trouble behind (a killed speaker): it
    // settles within a slow period.
    eventually(
        SLOW_RENEW * 3,
        "every speaker renewing slowly (gossip agrees)",
        || all_at(ctx, &api, SLOW_RENEW),
    )?;
    let nodes: Api<Node> = Api::all(ctx.client()?);
    plant(ctx, &api)?;
    let result = (|| -> Result<()> {
        // A mark on the lease of a node that does not exist is anyone's
        // who can write a Lease: nobody follows it.
        let nobodys = Instant::now();
        while nobodys.elapsed() < FOLLOW_BOUND + FAST_RENEW {
            renew_mark(ctx, &api)?;
            std::thread::sleep(FAST_RENEW / 2);
        }
        ensure!(
            all_at(ctx, &api, SLOW_RENEW)?.is_some(),
            "a mark on the lease of a node that does not exist was followed: {:?}",
            periods(ctx, &api)?
        );
        add_marker_node(ctx, &nodes)?;
        let planted = Instant::now();
        let mut followed: Option<Duration> = None;
        let mut first_fast = None;
        while planted.elapsed() < MARKED {
            renew_mark(ctx, &api)?;
            if followed.is_none()
                && let Some(leases) = all_at(ctx, &api, FAST_RENEW)?
            {
                followed = Some(planted.elapsed());
                first_fast = Some(leases);
            }
            std::thread::sleep(FAST_RENEW / 2);
        }
        let (Some(after), Some(first)) = (followed, first_fast) else {
            anyhow::bail!(
                "not every speaker renewed fast within {MARKED:?} of a fresh trouble mark: {:?}",
                periods(ctx, &api)?
            );
        };
        eprintln!("e2e: every speaker renewed fast {after:?} after the mark was planted");
        ensure!(
            after <= FOLLOW_BOUND,
            "the speakers followed the mark only after {after:?} (bound {FOLLOW_BOUND:?})"
        );
        // Fast means renewed while the mark stayed fresh, not only
        // declared (the loop above left at least two fast periods).
        let later = periods(ctx, &api)?;
        for (node, (_, renewed)) in &first {
            ensure!(
                later.get(node).map(|(_, r)| r) != Some(renewed),
                "{node} declared fast renewals but did not renew while the mark was fresh"
            );
        }
        // A mark nobody renews any more (its speaker died) is not followed.
        let stale = Instant::now();
        eventually(
            SLOW_RENEW,
            "every speaker renewing slowly again once the mark went stale",
            || all_at(ctx, &api, SLOW_RENEW),
        )?;
        eprintln!(
            "e2e: back to slow renewals {:?} after the mark stopped",
            stale.elapsed()
        );
        Ok(())
    })();
    let removed = remove(ctx, &api);
    let node_removed = gone(ctx.block_on(nodes.delete(MARKER, &DeleteParams::default())));
    result?;
    removed?;
    node_removed
}
