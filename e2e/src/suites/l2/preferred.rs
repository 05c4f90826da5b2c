//! Upstream's "L2 Preferred Node Selector" specs
//! (`l2tests/preferred_node.go`): preferredNodeSelectors order the
//! election (summed weights first, the hash after), nodeSelectors filter
//! it, and label, exclusion and advertisement changes re-elect.
//!
//! Every spec starts from upstream's BeforeEach: pool `l2-test` with the
//! cluster's ranges, services of the default (IPv4) family with the
//! Cluster policy. Who announces is read from the ServiceL2Status, as
//! upstream does, and checked with the prober ([`super::election`]).
//! The lab's three nodes meet every spec's need (two or three).

use super::election::{NodeLabels, announced_by, need_nodes, other_node, stays_on, v4, winner};
use super::{Net, backends, pool, web_service};
use crate::metallb::Config;
use crate::{Ctx, Spec};
use anyhow::Result;
use serde_json::{Value, json};
use std::net::IpAddr;

/// Upstream's `preferredLabel`.
const PREFERRED: &str = "l2-preferred-node-test";
/// What upstream's failover spec puts on the preferred node
/// (`corev1.LabelNodeExcludeBalancers`).
const EXCLUDE_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

pub(super) fn specs() -> Vec<Spec> {
    let spec = |it, run| v4("L2", it, run);
    vec![
        spec(
            "Preferred Node Selector should prefer the labeled node and fall back to the baseline election when the label is removed",
            prefer_then_fall_back,
        ),
        spec(
            "Preferred Node Selector should behave like the baseline advertisement when no node matches the preferred selector",
            no_match_is_baseline,
        ),
        spec(
            "Preferred Node Selector should fail over when the preferred node becomes unschedulable and reclaim when it returns",
            fail_over_and_reclaim,
        ),
        spec(
            "Preferred Node Selector should re-elect when the L2Advertisement spec changes at runtime",
            runtime_change,
        ),
        spec(
            "Preferred Node Selector should respect nodeSelectors as a hard filter while preferredNodeSelectors orders the eligible set",
            hard_filter_then_order,
        ),
        spec(
            "Preferred Node Selector should announce from the nodeSelectors set when it is disjoint from preferredNodeSelectors",
            disjoint_sets,
        ),
        spec(
            "Preferred Node Selector should sum weights across multiple L2Advertisements targeting the same pool",
            summed_weights,
        ),
        spec(
            "Preferred Node Selector should scope preferredNodeSelectors to services matching serviceSelectors",
            scoped_by_service,
        ),
    ]
}

/// Upstream's BeforeEach: the pool `l2-test` with both of the cluster's
/// ranges (IPv6 where it has one), no advertisement yet; backends on
/// every node.
fn base(ctx: &Ctx) -> Result<Config<'_>> {
    let mut addresses = vec![pool(ctx, Net::V4)?];
    addresses.extend(pool(ctx, Net::V6).ok());
    let mut config = Config::new(ctx)?;
    config.pool("l2-test", json!({ "addresses": addresses }))?;
    backends(ctx, &[])?;
    Ok(config)
}

/// One weighted preference on `labels`.
fn prefer(weight: i32, labels: Value) -> Value {
    json!({ "weight": weight, "preference": { "matchLabels": labels } })
}

/// A service (Cluster policy, as upstream's `CreateWithBackend`) with
/// `labels`; its addresses.
fn service(ctx: &Ctx, name: &str, labels: Value) -> Result<Vec<IpAddr>> {
    web_service(ctx, name, json!({ "metadata": { "labels": labels } }))
}

/// Creates the advertisement `name` with no spec and returns the node
/// the election picks for `svc` without preferences.
fn baseline(
    ctx: &Ctx,
    config: &mut Config<'_>,
    svc: &str,
    ips: &[IpAddr],
    name: &str,
) -> Result<String> {
    config.l2_advertisement(name, json!({}))?;
    winner(ctx, svc, ips)
}

fn prefer_then_fall_back(ctx: &Ctx) -> Result<()> {
    need_nodes(ctx, 2)?;
    let mut config = base(ctx)?;
    let ips = service(ctx, "external-local-lb", json!({}))?;
    let natural = baseline(ctx, &mut config, "external-local-lb", &ips, "preferred")?;
    let candidate = other_node(ctx, &[&natural])?;
    let mut labels = NodeLabels::new(ctx, &[PREFERRED])?;
    labels.add(&candidate, PREFERRED, "true")?;
    config.replace(
        "L2Advertisement",
        "preferred",
        json!({ "preferredNodeSelectors": [prefer(100, json!({ PREFERRED: "true" }))] }),
    )?;
    announced_by(ctx, "external-local-lb", &ips, &candidate)?;
    labels.remove(&candidate, PREFERRED)?;
    announced_by(ctx, "external-local-lb", &ips, &natural)
}

fn no_match_is_baseline(ctx: &Ctx) -> Result<()> {
    need_nodes(ctx, 2)?;
    let mut config = base(ctx)?;
    let ips = service(ctx, "no-match-lb", json!({}))?;
    let natural = baseline(ctx, &mut config, "no-match-lb", &ips, "preferred-nomatch")?;
    // A preference no node matches, and one every node matches (the empty
    // selector) with the same weight for all: nobody is preferred.
    config.replace(
        "L2Advertisement",
        "preferred-nomatch",
        json!({ "preferredNodeSelectors": [
            prefer(100, json!({ "l2-preferred-node-nomatch": "true" })),
            { "weight": 10, "preference": {} },
        ] }),
    )?;
    stays_on(ctx, "no-match-lb", &ips, &natural)
}

fn fail_over_and_reclaim(ctx: &Ctx) -> Result<()> {
    need_nodes(ctx, 2)?;
    let mut config = base(ctx)?;
    let ips = service(ctx, "failover-lb", json!({}))?;
    let natural = baseline(ctx, &mut config, "failover-lb", &ips, "preferred-failover")?;
    let candidate = other_node(ctx, &[&natural])?;
    let mut labels = NodeLabels::new(ctx, &[PREFERRED, EXCLUDE_LB])?;
    labels.add(&candidate, PREFERRED, "true")?;
    config.replace(
        "L2Advertisement",
        "preferred-failover",
        json!({ "preferredNodeSelectors": [prefer(100, json!({ PREFERRED: "true" }))] }),
    )?;
    announced_by(ctx, "failover-lb", &ips, &candidate)?;
    labels.add(&candidate, EXCLUDE_LB, "")?;
    announced_by(ctx, "failover-lb", &ips, &natural)?;
    labels.remove(&candidate, EXCLUDE_LB)?;
    announced_by(ctx, "failover-lb", &ips, &candidate)
}

fn runtime_change(ctx: &Ctx) -> Result<()> {
    const RT: &str = "l2-preferred-rt-test";
    need_nodes(ctx, 3)?;
    let mut config = base(ctx)?;
    let ips = service(ctx, "runtime-spec-lb", json!({}))?;
    let natural = baseline(ctx, &mut config, "runtime-spec-lb", &ips, "runtime-spec")?;
    let a = other_node(ctx, &[&natural])?;
    let b = other_node(ctx, &[&natural, &a])?;
    let mut labels = NodeLabels::new(ctx, &[RT])?;
    labels.add(&a, RT, "a")?;
    labels.add(&b, RT, "b")?;
    for (value, node) in [("a", &a), ("b", &b)] {
        config.replace(
            "L2Advertisement",
            "runtime-spec",
            json!({ "preferredNodeSelectors": [prefer(100, json!({ RT: value }))] }),
        )?;
        announced_by(ctx, "runtime-spec-lb", &ips, node)?;
    }
    config.replace("L2Advertisement", "runtime-spec", json!({}))?;
    announced_by(ctx, "runtime-spec-lb", &ips, &natural)
}

fn hard_filter_then_order(ctx: &Ctx) -> Result<()> {
    const ELIGIBLE: &str = "l2-ns-pref-test";
    const PREFERRED_HERE: &str = "l2-ns-preferred-test";
    let all = need_nodes(ctx, 2)?;
    let (a, b) = (&all[0], &all[1]);
    let mut config = base(ctx)?;
    let ips = service(ctx, "hard-soft-lb", json!({}))?;
    let mut labels = NodeLabels::new(ctx, &[ELIGIBLE, PREFERRED_HERE])?;
    labels.add(a, ELIGIBLE, "eligible")?;
    labels.add(a, PREFERRED_HERE, "true")?;
    labels.add(b, ELIGIBLE, "eligible")?;
    config.l2_advertisement(
        "hard-soft-filter",
        json!({
            "nodeSelectors": [{ "matchLabels": { ELIGIBLE: "eligible" } }],
            "preferredNodeSelectors": [prefer(100, json!({ PREFERRED_HERE: "true" }))],
        }),
    )?;
    announced_by(ctx, "hard-soft-lb", &ips, a)
}

fn disjoint_sets(ctx: &Ctx) -> Result<()> {
    const ELIGIBLE: &str = "l2-disjoint-eligible";
    const PREFERRED_HERE: &str = "l2-disjoint-preferred";
    let all = need_nodes(ctx, 2)?;
    let (eligible, preferred) = (&all[0], &all[1]);
    let mut config = base(ctx)?;
    let ips = service(ctx, "disjoint-lb", json!({}))?;
    let mut labels = NodeLabels::new(ctx, &[ELIGIBLE, PREFERRED_HERE])?;
    labels.add(eligible, ELIGIBLE, "true")?;
    labels.add(preferred, PREFERRED_HERE, "true")?;
    config.l2_advertisement(
        "disjoint",
        json!({
            "nodeSelectors": [{ "matchLabels": { ELIGIBLE: "true" } }],
            "preferredNodeSelectors": [prefer(100, json!({ PREFERRED_HERE: "true" }))],
        }),
    )?;
    announced_by(ctx, "disjoint-lb", &ips, eligible)?;
    // Upstream: Consistently not the preferred-only node; here the
    // stronger claim that the eligible one keeps it.
    stays_on(ctx, "disjoint-lb", &ips, eligible)
}

fn summed_weights(ctx: &Ctx) -> Result<()> {
    const ZONE: &str = "l2-pref-zone";
    const ROLE: &str = "l2-pref-role";
    let all = need_nodes(ctx, 3)?;
    let (double, single) = (&all[0], &all[1]);
    let mut config = base(ctx)?;
    let ips = service(ctx, "multi-ad-lb", json!({}))?;
    let mut labels = NodeLabels::new(ctx, &[ZONE, ROLE])?;
    labels.add(double, ZONE, "primary")?;
    labels.add(double, ROLE, "edge")?;
    labels.add(single, ZONE, "primary")?;
    config.l2_advertisement(
        "ad-zone",
        json!({ "preferredNodeSelectors": [prefer(60, json!({ ZONE: "primary" }))] }),
    )?;
    config.l2_advertisement(
        "ad-role",
        json!({ "preferredNodeSelectors": [prefer(50, json!({ ROLE: "edge" }))] }),
    )?;
    // 60 + 50 against 60.
    announced_by(ctx, "multi-ad-lb", &ips, double)?;
    labels.remove(double, ZONE)?;
    // 50 against 60.
    announced_by(ctx, "multi-ad-lb", &ips, single)
}

fn scoped_by_service(ctx: &Ctx) -> Result<()> {
    const SCOPED: &str = "l2-svc-pref-test";
    need_nodes(ctx, 3)?;
    let mut config = base(ctx)?;
    let matched = service(ctx, "svc-matched-lb", json!({ "app": "matched" }))?;
    let unmatched = service(ctx, "svc-unmatched-lb", json!({}))?;
    let natural_matched = baseline(
        ctx,
        &mut config,
        "svc-matched-lb",
        &matched,
        "svc-selector-baseline",
    )?;
    let natural_unmatched = winner(ctx, "svc-unmatched-lb", &unmatched)?;
    let preferred = other_node(ctx, &[&natural_matched, &natural_unmatched])?;
    let mut labels = NodeLabels::new(ctx, &[SCOPED])?;
    labels.add(&preferred, SCOPED, "true")?;
    config.l2_advertisement(
        "svc-selector-scope",
        json!({
            "serviceSelectors": [{ "matchLabels": { "app": "matched" } }],
            "preferredNodeSelectors": [prefer(100, json!({ SCOPED: "true" }))],
        }),
    )?;
    announced_by(ctx, "svc-matched-lb", &matched, &preferred)?;
    stays_on(ctx, "svc-unmatched-lb", &unmatched, &natural_unmatched)
}
