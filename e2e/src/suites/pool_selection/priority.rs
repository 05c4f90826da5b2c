//! Which pool a service gets: by namespace, namespace labels, service
//! labels and priority, and from a pool whose selectors match nobody
//! only when asked for by name or address.

use super::{WAIT, create_and_wait, create_in, ensure_in, ips_in, label_namespace, pool};
use crate::Ctx;
use crate::metallb::{self, Config};
use anyhow::{Result, ensure};
use devenv::wait::eventually;
use kube::api::Api;
use metallb_rs::api::v1beta1::IPAddressPool;
use serde_json::{Value, json};
use std::net::IpAddr;

/// Creates services `names` one after the other (each waits for its
/// address) and checks each got one from the pool beside it.
fn sequence(ctx: &Ctx, namespace: &str, extra: &Value, want: &[(&str, &str)]) -> Result<()> {
    for (name, cidr) in want {
        create_in(ctx, namespace, name, extra.clone())?;
        let ips = eventually(WAIT, &format!("an IP on {name}"), || {
            let ips = ips_in(ctx, namespace, name)?;
            Ok((!ips.is_empty()).then_some(ips))
        })?;
        ensure_in(name, &ips, &[cidr])?;
    }
    Ok(())
}
/// Upstream's pool-selection shape: a pool of priority 20 (`lower`) and
/// one of priority 10 (`higher`) that both serve the services, and with
/// `unprioritized` a pool of no priority for the test's namespace.
/// Services `<prefix>-1`, `-2`, `-3` (with `service` merged in), created
/// one after the other, take the priority-10 pool, then the priority-20
/// one, then the one of no priority (pools are /32s).
fn by_priority(
    ctx: &Ctx,
    lower: Value,
    higher: Value,
    unprioritized: bool,
    service: Value,
    prefix: &str,
) -> Result<()> {
    let ns = ctx.namespace();
    let mut config = Config::new(ctx)?;
    config.pool(
        &format!("{prefix}-pool-1"),
        pool(&["192.168.5.0/32"], lower),
    )?;
    config.pool(
        &format!("{prefix}-pool-2"),
        pool(&["192.168.6.0/32"], higher),
    )?;
    let mut want = vec![
        (format!("{prefix}-1"), "192.168.6.0/32"),
        (format!("{prefix}-2"), "192.168.5.0/32"),
    ];
    if unprioritized {
        config.pool(
            "ns-ip-pool",
            pool(&["192.168.7.0/32"], json!({ "namespaces": [ns] })),
        )?;
        want.push((format!("{prefix}-3"), "192.168.7.0/32"));
    }
    let want: Vec<(&str, &str)> = want.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    // The pools' and the services' watch events reach the controller in
    // no set order: a service seen before the pool it should get would
    // take another. Services come once the controller counts every pool.
    let mut pools = vec![format!("{prefix}-pool-1"), format!("{prefix}-pool-2")];
    if unprioritized {
        pools.push("ns-ip-pool".into());
    }
    loaded(ctx, &pools)?;
    sequence(ctx, ns, &service, &want)
}
/// Waits until the controller has written each of `pools`' status (it
/// has loaded them).
fn loaded(ctx: &Ctx, pools: &[String]) -> Result<()> {
    let api: Api<IPAddressPool> = Api::namespaced(ctx.client()?, metallb::NAMESPACE);
    for name in pools {
        eventually(WAIT, &format!("{name} loaded by the controller"), || {
            Ok(ctx.block_on(api.get(name))?.status.map(|_| ()))
        })?;
    }
    Ok(())
}
/// Services carrying the label the service-selecting pools select.
fn labelled() -> Value {
    json!({ "metadata": { "labels": { "test": "e2e" } } })
}
pub(super) fn with_namespace(ctx: &Ctx) -> Result<()> {
    let ns = ctx.namespace();
    by_priority(
        ctx,
        json!({ "priority": 20, "namespaces": [ns] }),
        json!({ "priority": 10, "namespaces": [ns] }),
        true,
        json!({}),
        "svc-test-ns",
    )
}
pub(super) fn with_priority(ctx: &Ctx) -> Result<()> {
    by_priority(
        ctx,
        json!({ "priority": 20 }),
        json!({ "priority": 10 }),
        false,
        json!({}),
        "svc-test-priority",
    )
}
pub(super) fn with_namespace_labels(ctx: &Ctx) -> Result<()> {
    let ns = ctx.namespace();
    label_namespace(ctx, ns, json!({ "foo1": "bar1", "foo2": "bar2" }))?;
    by_priority(
        ctx,
        json!({ "priority": 20, "namespaces": [ns] }),
        json!({ "priority": 10, "namespaceSelectors": [{ "matchLabels": { "foo1": "bar1", "foo2": "bar2" } }] }),
        true,
        json!({}),
        "svc-test-ns-label",
    )
}
pub(super) fn with_service_label(ctx: &Ctx) -> Result<()> {
    let selecting = |priority: i64| json!({ "priority": priority, "serviceSelectors": [{ "matchLabels": { "test": "e2e" } }] });
    by_priority(
        ctx,
        selecting(20),
        selecting(10),
        true,
        labelled(),
        "svc-test-svc-label",
    )
}
pub(super) fn with_namespace_and_service_label(ctx: &Ctx) -> Result<()> {
    let ns = ctx.namespace();
    by_priority(
        ctx,
        json!({ "priority": 20, "namespaces": [ns] }),
        json!({ "priority": 10, "serviceSelectors": [{ "matchLabels": { "test": "e2e" } }] }),
        true,
        labelled(),
        "svc-ns-svc-label",
    )
}
pub(super) fn with_namespaces_with_labels(ctx: &Ctx) -> Result<()> {
    let first = ctx.namespace().to_owned();
    let second = ctx.another_namespace("second")?;
    label_namespace(ctx, &first, json!({ "e2e-first": "true" }))?;
    label_namespace(ctx, &second, json!({ "e2e-second": "true" }))?;
    let selecting = |labels: Value, priority: i64| json!({ "priority": priority, "namespaceSelectors": [{ "matchLabels": labels }] });
    let mut config = Config::new(ctx)?;
    config.pool(
        "first-ns-labels-ip-pool",
        pool(
            &["192.168.20.0/32"],
            selecting(json!({ "e2e-first": "true" }), 10),
        ),
    )?;
    config.pool(
        "second-ns-labels-ip-pool",
        pool(
            &["192.168.30.0/32"],
            selecting(json!({ "e2e-second": "true" }), 10),
        ),
    )?;
    config.pool(
        "second-ns-labels-higher-priority-ip-pool",
        pool(
            &["192.168.50.0/32"],
            selecting(json!({ "e2e-second": "true", "newLabel": "true" }), 5),
        ),
    )?;
    config.pool(
        "no-ns-labels-ip-pool",
        pool(&["192.168.40.0/32"], Value::Null),
    )?;
    sequence(
        ctx,
        &second,
        &json!({}),
        &[("second-ns-service", "192.168.30.0/32")],
    )?;
    sequence(
        ctx,
        &first,
        &json!({}),
        &[
            ("default-ns-service", "192.168.20.0/32"),
            ("default-ns-service2", "192.168.40.0/32"),
        ],
    )?;
    // A namespace label change reaches the controller's pool selection.
    label_namespace(ctx, &second, json!({ "newLabel": "true" }))?;
    sequence(
        ctx,
        &second,
        &json!({}),
        &[("second-ns-service2", "192.168.50.0/32")],
    )
}
pub(super) fn unmatched_selectors_serve_requests(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool(
        "e2e-selects-nobody",
        pool(
            &["192.168.5.16/30"],
            json!({ "namespaceSelectors": [{ "matchLabels": { "e2e-no-such-label": "true" } }] }),
        ),
    )?;
    // Positive control: the pool is loaded (its status counts it) and an
    // ordinary service gets nothing from it.
    let pools: Api<IPAddressPool> = Api::namespaced(ctx.client()?, metallb::NAMESPACE);
    eventually(WAIT, "e2e-selects-nobody loaded", || {
        let status = ctx.block_on(pools.get("e2e-selects-nobody"))?.status;
        Ok(status.filter(|s| s.available_ipv4 == 4).map(|_| ()))
    })?;
    create_in(ctx, ctx.namespace(), "ordinary", json!({}))?;
    eventually(WAIT, "AllocationFailed on ordinary", || {
        Ok((!metallb::events(ctx, "ordinary", "AllocationFailed")?.is_empty()).then_some(()))
    })?;
    ensure!(
        ips_in(ctx, ctx.namespace(), "ordinary")?.is_empty(),
        "ordinary got an address"
    );
    let by_pool = create_and_wait(
        ctx,
        "by-pool",
        json!({ "metadata": { "annotations": { "metallb.io/address-pool": "e2e-selects-nobody" } } }),
    )?;
    ensure_in("by-pool", &by_pool, &["192.168.5.16/30"])?;
    let by_ip = create_and_wait(
        ctx,
        "by-ip",
        json!({ "metadata": { "annotations": { "metallb.io/loadBalancerIPs": "192.168.5.18" } } }),
    )?;
    ensure!(
        by_ip == ["192.168.5.18".parse::<IpAddr>()?],
        "by-ip got {by_ip:?}"
    );
    Ok(())
}
