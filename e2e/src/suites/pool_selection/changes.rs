//! What changes do to held addresses: a service turned ClusterIP frees
//! its address for the next, sharing ends and resumes as the sharing
//! conditions change, and deleted pools take their addresses back.

use super::{
    HOLD, WAIT, create_and_wait, create_in, ensure_in, ips_in, patch_service, pool, wait_for_count,
};
use crate::Ctx;
use crate::metallb::{self, Config};
use anyhow::{Result, ensure};
use devenv::wait::{eventually, throughout};
use serde_json::{Value, json};
use std::net::IpAddr;

pub(super) fn type_change_frees(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("singleip-pool", pool(&["192.168.5.7/32"], Value::Null))?;
    let first = create_and_wait(ctx, "singleip", json!({}))?;
    create_in(ctx, ctx.namespace(), "singleip1", json!({}))?;
    // Positive control: the controller saw the second service and had
    // nothing to give it.
    eventually(WAIT, "AllocationFailed on singleip1", || {
        Ok((!metallb::events(ctx, "singleip1", "AllocationFailed")?.is_empty()).then_some(()))
    })?;
    ensure!(
        ips_in(ctx, ctx.namespace(), "singleip1")?.is_empty(),
        "singleip1 got an address"
    );
    patch_service(
        ctx,
        ctx.namespace(),
        "singleip",
        json!({ "spec": { "type": "ClusterIP" } }),
    )?;
    let second = metallb::wait_for_ips(ctx, "singleip1", WAIT)?;
    ensure!(second == first, "singleip1 got {second:?}, want {first:?}");
    ensure!(
        ips_in(ctx, ctx.namespace(), "singleip")?.is_empty(),
        "the ClusterIP service kept its ingress"
    );
    Ok(())
}
pub(super) fn sharing_conditions(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("singleip-pool", pool(&["192.168.5.8/32"], Value::Null))?;
    let ip: IpAddr = "192.168.5.8".parse()?;
    let ns = ctx.namespace();
    let shared = |port: u16| {
        json!({
            "metadata": { "annotations": { "metallb.io/allow-shared-ip": "share" } },
            "spec": {
                "ports": [{ "port": port, "protocol": "TCP" }],
                "selector": { "app": "changesharing" },
                "externalTrafficPolicy": "Cluster",
            },
        })
    };
    let holds =
        |name: &str| -> Result<Option<()>> { Ok((ips_in(ctx, ns, name)? == [ip]).then_some(())) };
    let empty =
        |name: &str| -> Result<Option<()>> { Ok(ips_in(ctx, ns, name)?.is_empty().then_some(())) };
    create_in(ctx, ns, "changesharing", shared(80))?;
    create_in(ctx, ns, "changesharing1", shared(81))?;
    eventually(WAIT, "both services on the shared IP", || {
        Ok(holds("changesharing")?.and(holds("changesharing1")?))
    })?;

    // Local and Cluster traffic policies cannot share an address.
    patch_service(
        ctx,
        ns,
        "changesharing1",
        json!({ "spec": { "externalTrafficPolicy": "Local" } }),
    )?;
    eventually(WAIT, "changesharing1 losing the IP", || {
        empty("changesharing1")
    })?;
    throughout(HOLD, "changesharing keeping the IP", || {
        Ok(holds("changesharing")?
            .is_none()
            .then(|| "it lost the IP".to_owned()))
    })?;

    patch_service(
        ctx,
        ns,
        "changesharing",
        json!({ "spec": { "externalTrafficPolicy": "Local" } }),
    )?;
    eventually(WAIT, "both Local services on the shared IP", || {
        Ok(holds("changesharing")?.and(holds("changesharing1")?))
    })?;

    // Local services share only with the same selector.
    patch_service(
        ctx,
        ns,
        "changesharing",
        json!({ "spec": { "selector": { "foo": "bar", "app": null } } }),
    )?;
    eventually(WAIT, "changesharing losing the IP", || {
        empty("changesharing")
    })?;
    patch_service(
        ctx,
        ns,
        "changesharing1",
        json!({ "spec": { "selector": { "foo": "bar", "app": null } } }),
    )?;
    eventually(WAIT, "both services on the shared IP again", || {
        Ok(holds("changesharing")?.and(holds("changesharing1")?))
    })?;
    Ok(())
}
/// Upstream's "IPV4 removing pools" setup: a namespace pool of priority
/// 20 and a pool for everyone.
fn two_pools(ctx: &Ctx, config: &mut Config<'_>) -> Result<()> {
    config.pool(
        "test-ns-pool-1",
        pool(
            &["192.168.5.0/32"],
            json!({ "priority": 20, "namespaces": [ctx.namespace()] }),
        ),
    )?;
    config.pool("test-ns-pool-2", pool(&["192.168.6.0/32"], Value::Null))
}
pub(super) fn removes_all_pools(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    two_pools(ctx, &mut config)?;
    let ips = create_and_wait(ctx, "svc-test-ns-pool-1", json!({}))?;
    ensure_in("svc-test-ns-pool-1", &ips, &["192.168.5.0/32"])?;
    config.delete("IPAddressPool", "test-ns-pool-1")?;
    config.delete("IPAddressPool", "test-ns-pool-2")?;
    // A valid configuration without pools: the address is not in any pool
    // any more, so the service gives it up (as upstream).
    wait_for_count(ctx, ctx.namespace(), "svc-test-ns-pool-1", 0)?;
    Ok(())
}
pub(super) fn reallocates_after_pool_deletion(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    two_pools(ctx, &mut config)?;
    let ips = create_and_wait(ctx, "svc-test-ns-pool-1", json!({}))?;
    ensure_in("svc-test-ns-pool-1", &ips, &["192.168.5.0/32"])?;
    config.delete("IPAddressPool", "test-ns-pool-1")?;
    eventually(WAIT, "svc-test-ns-pool-1 moved to test-ns-pool-2", || {
        let ips = ips_in(ctx, ctx.namespace(), "svc-test-ns-pool-1")?;
        Ok(ensure_in("now", &ips, &["192.168.6.0/32"]).ok())
    })?;
    Ok(())
}
