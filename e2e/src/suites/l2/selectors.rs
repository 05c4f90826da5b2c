//! Upstream's layer 2 node and service selector specs
//! (`l2tests/node_selector.go`, `l2tests/service_selector.go`): which
//! nodes an L2Advertisement lets announce, and which services it
//! announces when it also selects pools or services.
//!
//! Who announces is read from the ServiceL2Status (upstream's
//! `L2ForService`) where upstream reads it, from the MAC that answers
//! where upstream resolves the address (`nodeForService`, `mac`), and the
//! other one is checked too ([`super::election`]). Services are of the
//! default (IPv4) family.

use super::election::{
    ELECTION_WAIT, NodeLabels, announced, announced_by, need_nodes, stays_unannounced, v4,
    withdrawn,
};
use super::tables::in_range;
use super::watch::Watch;
use super::{Net, backends, pool, web_service};
use crate::metallb::Config;
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::wait::eventually;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::Duration;

/// Upstream's waits in `service_selector.go` (30 s) and the `Consistently`
/// of its last spec (10 s).
const SELECTOR_WAIT: Duration = Duration::from_secs(30);
const CONSISTENTLY: Duration = super::election::CONSISTENTLY;
const LONG_CONSISTENTLY: Duration = Duration::from_secs(10);

pub(super) fn specs() -> Vec<Spec> {
    vec![
        v4(
            "L2",
            "Node Selector should work selecting one node",
            one_node_at_a_time,
        ),
        v4(
            "L2",
            "Node Selector should work with multiple node selectors",
            multiple_node_selectors,
        ),
        v4(
            "L2",
            "Node Selector should work when adding nodes",
            adding_nodes,
        ),
        v4(
            "L2-ServiceSelector",
            "Pool and Service Selectors together should only advertise services matching both pool and service selectors",
            pool_and_service,
        ),
        v4(
            "L2-ServiceSelector",
            "Service selector filters election candidate nodes should announce from exactly one node when both advertisements match the service",
            one_of_two_candidates,
        ),
        v4(
            "L2-ServiceSelector",
            "Service selector filters election candidate nodes should not announce when no advertisement matches both service and node",
            no_advertisement_matches_both,
        ),
    ]
}

/// Upstream's `k8s.SelectorsForNodes` for one node.
fn hostname(node: &str) -> Value {
    json!([{ "matchLabels": { "kubernetes.io/hostname": node } }])
}

/// The single-address ranges of upstream's pools: the `i`th address of
/// the cluster's IPv4 range and of its IPv6 range where it has one.
fn single_addresses(ctx: &Ctx, i: u32) -> Result<Vec<String>> {
    let mut out = vec![format!("{}/32", in_range(&pool(ctx, Net::V4)?, i)?.0)];
    if let Ok(v6) = pool(ctx, Net::V6) {
        out.push(format!("{}/128", in_range(&v6, i)?.0));
    }
    Ok(out)
}

/// Upstream's Node Selector BeforeEach: pool `l2-test` with the cluster's
/// ranges, no advertisement.
fn node_selector_base(ctx: &Ctx) -> Result<Config<'_>> {
    let mut addresses = vec![pool(ctx, Net::V4)?];
    addresses.extend(pool(ctx, Net::V6).ok());
    let mut config = Config::new(ctx)?;
    config.pool("l2-test", json!({ "addresses": addresses }))?;
    Ok(config)
}

fn one_node_at_a_time(ctx: &Ctx) -> Result<()> {
    let mut config = node_selector_base(ctx)?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "external-local-lb", json!({}))?;
    for (i, node) in super::nodes(ctx).iter().enumerate() {
        let spec = json!({ "nodeSelectors": hostname(node) });
        if i == 0 {
            config.l2_advertisement("with-selector", spec)?;
        } else {
            config.replace("L2Advertisement", "with-selector", spec)?;
        }
        announced_by(ctx, "external-local-lb", &ips, node)
            .with_context(|| format!("the advertisement selects {node} only"))?;
    }
    Ok(())
}

fn multiple_node_selectors(ctx: &Ctx) -> Result<()> {
    let all = need_nodes(ctx, 2)?;
    let mut config = node_selector_base(ctx)?;
    // The Local policy with the only endpoint on the first node: of the
    // advertisement for the second node and the one for all, only the
    // latter covers a node that may announce.
    backends(ctx, &[&all[0]])?;
    let ips = web_service(
        ctx,
        "svca",
        json!({ "spec": { "externalTrafficPolicy": "Local" } }),
    )?;
    crate::backend::wait_for_endpoints(ctx, "svca", &[&all[0]], ELECTION_WAIT)?;
    config.l2_advertisement(
        "with-selector",
        json!({ "nodeSelectors": hostname(&all[1]) }),
    )?;
    config.l2_advertisement("no-selector", json!({}))?;
    announced_by(ctx, "svca", &ips, &all[0])
}

fn adding_nodes(ctx: &Ctx) -> Result<()> {
    const LABEL: &str = "l2-node-selector-test";
    let mut config = node_selector_base(ctx)?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "external-local-lb", json!({}))?;
    // Upstream's AfterEach removes "bgp-node-selector-test", not the
    // label this spec sets; ours takes the right one off.
    let mut labels = NodeLabels::new(ctx, &[LABEL])?;
    config.l2_advertisement(
        "with-selector",
        json!({ "nodeSelectors": [{ "matchLabels": { LABEL: "true" } }] }),
    )?;
    let watch = Watch::new(ctx, &ips, "eth0")?;
    eventually(ELECTION_WAIT, "nobody answering (no node selected)", || {
        Ok(watch.expect_silent().ok())
    })?;
    let first = super::nodes(ctx).into_iter().next().context("no nodes")?;
    labels.add(&first, LABEL, "true")?;
    announced_by(ctx, "external-local-lb", &ips, &first)
}

/// A service with `labels` (and the pool annotation when `pool` is
/// given); its addresses.
fn labelled_service(
    ctx: &Ctx,
    name: &str,
    labels: Value,
    pool: Option<&str>,
) -> Result<Vec<IpAddr>> {
    let mut body = json!({ "metadata": { "labels": labels } });
    if let Some(pool) = pool {
        body["metadata"]["annotations"] = json!({ "metallb.io/address-pool": pool });
    }
    web_service(ctx, name, body)
}

/// Sets `expose=value` on service `name`.
fn expose(ctx: &Ctx, name: &str, value: &str) -> Result<()> {
    let api: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    let patch = json!({ "metadata": { "labels": { "expose": value } } });
    ctx.block_on(api.patch(name, &PatchParams::default(), &Patch::Merge(patch)))
        .with_context(|| format!("relabelling service {name}"))?;
    Ok(())
}

fn pool_and_service(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool_labelled(
        "pool-a",
        json!({ "pool": "a" }),
        json!({ "addresses": single_addresses(ctx, 0)? }),
    )?;
    config.pool_labelled(
        "pool-b",
        json!({ "pool": "b" }),
        json!({ "addresses": single_addresses(ctx, 1)? }),
    )?;
    config.l2_advertisement(
        "adv-pool-a-expose-true",
        json!({
            "ipAddressPoolSelectors": [{ "matchLabels": { "pool": "a" } }],
            "serviceSelectors": [{ "matchLabels": { "expose": "true" } }],
        }),
    )?;
    backends(ctx, &[])?;
    let a = labelled_service(
        ctx,
        "svc-pool-a",
        json!({ "expose": "true" }),
        Some("pool-a"),
    )?;
    announced(ctx, "svc-pool-a", &a, SELECTOR_WAIT).context("both selectors match")?;
    let b = labelled_service(
        ctx,
        "svc-pool-b",
        json!({ "expose": "true" }),
        Some("pool-b"),
    )?;
    stays_unannounced(ctx, "svc-pool-b", &b, CONSISTENTLY).context("pool selector mismatch")?;
    expose(ctx, "svc-pool-a", "false")?;
    withdrawn(ctx, "svc-pool-a", &a, SELECTOR_WAIT).context("service selector mismatch")?;
    stays_unannounced(ctx, "svc-pool-a", &a, CONSISTENTLY).context("service selector mismatch")?;
    expose(ctx, "svc-pool-b", "false")?;
    stays_unannounced(ctx, "svc-pool-b", &b, CONSISTENTLY).context("both selectors mismatch")?;
    expose(ctx, "svc-pool-a", "true")?;
    announced(ctx, "svc-pool-a", &a, SELECTOR_WAIT).context("both selectors match again")?;
    Ok(())
}

fn one_of_two_candidates(ctx: &Ctx) -> Result<()> {
    let all = need_nodes(ctx, 2)?;
    let (n0, n1) = (&all[0], &all[1]);
    let mut config = Config::new(ctx)?;
    config.pool("l2-test", json!({ "addresses": single_addresses(ctx, 0)? }))?;
    for (name, node) in [("adv-for-node0", n0), ("adv-for-node1", n1)] {
        config.l2_advertisement(
            name,
            json!({
                "nodeSelectors": hostname(node),
                "serviceSelectors": [{ "matchLabels": { "app": "test" } }],
            }),
        )?;
    }
    backends(ctx, &[])?;
    let ips = labelled_service(ctx, "svc-test", json!({ "app": "test" }), None)?;
    let node = announced(ctx, "svc-test", &ips, SELECTOR_WAIT)?;
    ensure!(
        node == *n0 || node == *n1,
        "svc-test is announced by {node}, neither of the selected {n0} and {n1}"
    );
    Ok(())
}

fn no_advertisement_matches_both(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("l2-test", json!({ "addresses": single_addresses(ctx, 0)? }))?;
    config.l2_advertisement(
        "adv-all-nodes-wrong-svc",
        json!({ "serviceSelectors": [{ "matchLabels": { "app": "other" } }] }),
    )?;
    config.l2_advertisement(
        "adv-right-svc-ghost-node",
        json!({
            "nodeSelectors": hostname("non-existing-node"),
            "serviceSelectors": [{ "matchLabels": { "app": "web" } }],
        }),
    )?;
    backends(ctx, &[])?;
    let ips = labelled_service(ctx, "svc-web", json!({ "app": "web" }), None)?;
    stays_unannounced(ctx, "svc-web", &ips, LONG_CONSISTENTLY)
}
