//! Upstream's "BGP Service Selector" tables (`bgptests/service_selector.go`):
//! which services a BGPAdvertisement announces when it selects services by
//! label, alone or beside pool selectors, other advertisements of the same
//! pool (communities, aggregation) and later changes to the selectors or
//! the labels. Every entry peers with every router of its family and
//! checks each router, as upstream loops over its FRR containers.

use super::routers::{self, advertised, holders, peered, stays_unadvertised, withdrawn};
use super::{WAIT, all_hops, host_route, service, service_with, two_pools};
use crate::metallb::Config;
use crate::suites::l2::backends;
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::frr::BgpRouter;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use std::net::IpAddr;

/// A spec per table and family, named as upstream's `DescribeTable` and
/// `Entry`.
pub fn specs() -> Vec<Spec> {
    [
        family_table!(
            "Service Selector",
            "Pool and service selectors together",
            pool_and_service
        ),
        family_table!(
            "Service Selector",
            "Multiple service selectors",
            multiple_selectors
        ),
        family_table!(
            "Service Selector",
            "Service selector updates propagate to BGP routes by updating BGPAdvertisement ServiceSelectors",
            advertisement_update
        ),
        family_table!(
            "Service Selector",
            "Service selector updates propagate to BGP routes by updating Service labels",
            label_update
        ),
        family_table!(
            "Service Selector",
            "Service selectors with split aggregation length advertisements",
            split_aggregation
        ),
        family_table!(
            "Service Selector",
            "Overlapping BGP advertisements where selected service gets all communities and staged gets shared only",
            overlapping_communities
        ),
        family_table!(
            "Service Selector",
            "Non-overlapping BGP advertisements apply distinct communities by service selector",
            distinct_communities
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Merges `labels` into service `name`'s labels.
fn relabel(ctx: &Ctx, name: &str, labels: Value) -> Result<()> {
    let api: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": labels } })),
    ))
    .with_context(|| format!("relabelling service {name}"))?;
    Ok(())
}

pub(super) fn env(value: &str) -> Value {
    json!({ "environment": value })
}

pub(super) fn env_selector(value: &str) -> Value {
    json!([{ "matchLabels": { "environment": value } }])
}

fn pool_and_service(ctx: &Ctx, v6: bool) -> Result<()> {
    let (mut config, routers) = peered(ctx, v6)?;
    let [a, b] = two_pools(v6);
    config.pool_labelled(
        "pool-a",
        json!({ "pool": "a" }),
        json!({ "addresses": [a] }),
    )?;
    config.pool_labelled(
        "pool-b",
        json!({ "pool": "b" }),
        json!({ "addresses": [b] }),
    )?;
    config.bgp_advertisement(
        "adv-pool-a-expose-true",
        json!({
            "ipAddressPoolSelectors": [{ "matchLabels": { "pool": "a" } }],
            "serviceSelectors": [{ "matchLabels": { "expose": "true" } }],
        }),
    )?;
    backends(ctx, &[])?;
    let matching = service(
        ctx,
        "svc-matching",
        v6,
        json!({ "expose": "true" }),
        Some("pool-a"),
    )?;
    advertised(ctx, &routers, matching)?;
    for (name, expose, pool, why) in [
        ("svc-wrong-pool", "true", "pool-b", "pool selector mismatch"),
        (
            "svc-no-label",
            "false",
            "pool-a",
            "service selector mismatch",
        ),
        ("svc-neither", "false", "pool-b", "both selectors mismatch"),
    ] {
        let ip = service(ctx, name, v6, json!({ "expose": expose }), Some(pool))?;
        stays_unadvertised(ctx, &routers, ip, why)?;
    }
    advertised(ctx, &routers, matching)
}

fn multiple_selectors(ctx: &Ctx, v6: bool) -> Result<()> {
    let (mut config, routers) = peered(ctx, v6)?;
    config.pool("bgp-test-pool", json!({ "addresses": [two_pools(v6)[0]] }))?;
    config.bgp_advertisement(
        "with-multiple-selectors",
        json!({ "serviceSelectors": [
            { "matchLabels": { "tier": "frontend" } },
            { "matchLabels": { "tier": "backend" } },
        ] }),
    )?;
    backends(ctx, &[])?;
    let frontend = service(ctx, "frontend-svc", v6, json!({ "tier": "frontend" }), None)?;
    let backend = service(ctx, "backend-svc", v6, json!({ "tier": "backend" }), None)?;
    let other = service(ctx, "other-svc", v6, json!({ "tier": "other" }), None)?;
    advertised(ctx, &routers, frontend)?;
    advertised(ctx, &routers, backend)?;
    stays_unadvertised(ctx, &routers, other, "no selector matches tier=other")
}

/// Creates the production and staged services of the update tables
/// under an advertisement selecting production; checks only production
/// is announced; returns both addresses.
fn prod_and_staged(
    ctx: &Ctx,
    config: &mut Config<'_>,
    routers: &[BgpRouter],
    v6: bool,
) -> Result<(IpAddr, IpAddr)> {
    config.pool(
        "bgp-update-pool",
        json!({ "addresses": [two_pools(v6)[0]] }),
    )?;
    config.bgp_advertisement(
        "adv-environment-selector",
        json!({ "serviceSelectors": env_selector("production") }),
    )?;
    backends(ctx, &[])?;
    let prod = service(ctx, "svc-update-prod", v6, env("production"), None)?;
    let staged = service(ctx, "svc-update-staged", v6, env("staged"), None)?;
    advertised(ctx, routers, prod)?;
    stays_unadvertised(
        ctx,
        routers,
        staged,
        "staged must not match production selector",
    )?;
    Ok((prod, staged))
}

fn advertisement_update(ctx: &Ctx, v6: bool) -> Result<()> {
    let (mut config, routers) = peered(ctx, v6)?;
    let (prod, staged) = prod_and_staged(ctx, &mut config, &routers, v6)?;
    config.replace(
        "BGPAdvertisement",
        "adv-environment-selector",
        json!({ "serviceSelectors": env_selector("staged") }),
    )?;
    advertised(ctx, &routers, staged)?;
    withdrawn(ctx, &routers, prod)
}

fn label_update(ctx: &Ctx, v6: bool) -> Result<()> {
    let (mut config, routers) = peered(ctx, v6)?;
    let (prod, staged) = prod_and_staged(ctx, &mut config, &routers, v6)?;
    relabel(ctx, "svc-update-prod", env("staged"))?;
    relabel(ctx, "svc-update-staged", env("production"))?;
    advertised(ctx, &routers, staged)?;
    withdrawn(ctx, &routers, prod)
}

fn split_aggregation(ctx: &Ctx, v6: bool) -> Result<()> {
    let (mut config, routers) = peered(ctx, v6)?;
    let (pool, length, prod_ip, staged_ip) = if v6 {
        (
            super::POOL_V6,
            124,
            "fc00:f853:ccd:e799::1",
            "fc00:f853:ccd:e799::2",
        )
    } else {
        ("192.168.10.0/24", 24, "192.168.10.10", "192.168.10.20")
    };
    config.pool("selector-aggregation-pool", json!({ "addresses": [pool] }))?;
    config.bgp_advertisement(
        "adv-selector-only",
        json!({
            "ipAddressPools": ["selector-aggregation-pool"],
            "serviceSelectors": env_selector("production"),
        }),
    )?;
    let mut aggregating = json!({ "ipAddressPools": ["selector-aggregation-pool"] });
    let field = if v6 {
        "aggregationLengthV6"
    } else {
        "aggregationLength"
    };
    aggregating[field] = json!(length);
    config.bgp_advertisement("adv-aggregation-only", aggregating)?;
    backends(ctx, &[])?;
    let pinned = |ip: &str| json!({ "spec": { "loadBalancerIP": ip } });
    let prod = service_with(
        ctx,
        "selector-agg-svc-prod",
        v6,
        env("production"),
        Some("selector-aggregation-pool"),
        pinned(prod_ip),
    )?;
    let staged = service_with(
        ctx,
        "selector-agg-svc-staged",
        v6,
        env("staged"),
        Some("selector-aggregation-pool"),
        pinned(staged_ip),
    )?;
    ensure!(
        prod.to_string() == prod_ip && staged.to_string() == staged_ip,
        "the services got {prod} and {staged}, not the addresses they asked for"
    );
    advertised(ctx, &routers, prod)?;
    let aggregate = IpNet::new(staged, length)?.trunc();
    routers::wait_route(ctx, &routers, aggregate, &all_hops(ctx, v6), WAIT)?;
    // The staged service matches the aggregating advertisement only: it
    // is behind the aggregate and has no host route of its own.
    ensure!(
        holders(ctx, &routers, staged)?.is_empty(),
        "{staged} was announced as a host route though only the aggregating advertisement selects it"
    );
    Ok(())
}

/// Waits until every router holds `ip` with `community` among its
/// communities (`true`) or without it (`false`), as upstream's
/// `validateService(Not)InRoutesForCommunity`.
pub(super) fn community_on(
    ctx: &Ctx,
    routers: &[BgpRouter],
    ip: IpAddr,
    community: &str,
    present: bool,
) -> Result<()> {
    let what = format!(
        "{} community {community}",
        if present { "with" } else { "without" }
    );
    routers::paths_hold(ctx, routers, host_route(ip), &what, |_, paths| {
        let has: Vec<bool> = paths
            .iter()
            .map(|p| routers::has_community(p, community))
            .collect();
        ensure!(
            has.iter().all(|h| *h == present),
            "communities {:?}",
            paths.iter().map(|p| &p.communities).collect::<Vec<_>>()
        );
        Ok(())
    })
}

fn overlapping_communities(ctx: &Ctx, v6: bool) -> Result<()> {
    const PROD_ONLY: &str = "65000:300";
    const ALL: &str = "65000:400";
    let (mut config, routers) = peered(ctx, v6)?;
    let range = if v6 {
        two_pools(true)[0]
    } else {
        "192.168.10.50-192.168.10.200"
    };
    config.pool("merge-pool", json!({ "addresses": [range] }))?;
    config.bgp_advertisement(
        "adv-merge-prod-community",
        json!({
            "ipAddressPools": ["merge-pool"],
            "communities": [PROD_ONLY],
            "serviceSelectors": env_selector("production"),
        }),
    )?;
    config.bgp_advertisement(
        "adv-merge-all-community",
        json!({ "ipAddressPools": ["merge-pool"], "communities": [ALL] }),
    )?;
    routers::wait_sessions(ctx, &routers, &all_hops(ctx, v6), WAIT)?;
    backends(ctx, &[])?;
    let prod = service(
        ctx,
        "merge-svc-prod",
        v6,
        env("production"),
        Some("merge-pool"),
    )?;
    let staged = service(
        ctx,
        "merge-svc-staged",
        v6,
        env("staged"),
        Some("merge-pool"),
    )?;
    advertised(ctx, &routers, prod)?;
    advertised(ctx, &routers, staged)?;
    community_on(ctx, &routers, prod, PROD_ONLY, true)?;
    community_on(ctx, &routers, prod, ALL, true)?;
    community_on(ctx, &routers, staged, PROD_ONLY, false)?;
    community_on(ctx, &routers, staged, ALL, true)
}

fn distinct_communities(ctx: &Ctx, v6: bool) -> Result<()> {
    const PROD: &str = "65000:100";
    const STAGED: &str = "65000:200";
    let (mut config, routers) = peered(ctx, v6)?;
    let [prod_range, staged_range] = if v6 {
        two_pools(true)
    } else {
        [
            "192.168.10.50-192.168.10.120",
            "192.168.20.50-192.168.20.120",
        ]
    };
    config.pool("nonoverlap-pool-prod", json!({ "addresses": [prod_range] }))?;
    config.pool(
        "nonoverlap-pool-staged",
        json!({ "addresses": [staged_range] }),
    )?;
    for (ad, pool, community, environment) in [
        (
            "adv-nonoverlap-prod",
            "nonoverlap-pool-prod",
            PROD,
            "production",
        ),
        (
            "adv-nonoverlap-staged",
            "nonoverlap-pool-staged",
            STAGED,
            "staged",
        ),
    ] {
        config.bgp_advertisement(
            ad,
            json!({
                "ipAddressPools": [pool],
                "communities": [community],
                "serviceSelectors": env_selector(environment),
            }),
        )?;
    }
    routers::wait_sessions(ctx, &routers, &all_hops(ctx, v6), WAIT)?;
    backends(ctx, &[])?;
    let prod = service(
        ctx,
        "nonoverlap-svc-prod",
        v6,
        env("production"),
        Some("nonoverlap-pool-prod"),
    )?;
    let staged = service(
        ctx,
        "nonoverlap-svc-staged",
        v6,
        env("staged"),
        Some("nonoverlap-pool-staged"),
    )?;
    advertised(ctx, &routers, prod)?;
    advertised(ctx, &routers, staged)?;
    community_on(ctx, &routers, prod, PROD, true)?;
    community_on(ctx, &routers, prod, STAGED, false)?;
    community_on(ctx, &routers, staged, STAGED, true)?;
    community_on(ctx, &routers, staged, PROD, false)
}
