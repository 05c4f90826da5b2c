//! The dual-stack policies: which pools PreferDualStack and
//! RequireDualStack services take and keep as pools change, and the pool
//! status of a dual-stack pool.

use super::{
    HOLD, WAIT, create_in, ensure_in, ips_in, patch_service, pool, services, wait_for_count,
};
use crate::Ctx;
use crate::metallb::{self, Config};
use anyhow::{Result, ensure};
use devenv::wait::{eventually, throughout};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use metallb_rs::api::v1beta1::IPAddressPool;
use serde_json::{Value, json};

const V4_POOL: &str = "192.168.10.100/32";
const V6_POOL: &str = "fc00:f853:ccd:e799::/124";
const V4_POOL2: &str = "192.168.11.100/32";
const V6_POOL2: &str = "fc00:f853:ccd:e800::/124";

fn prefer_dual() -> Value {
    json!({ "spec": { "ipFamilyPolicy": "PreferDualStack" } })
}
pub(super) fn prefer_dual_pool(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("test-ns-ipv4-pool", pool(&[V4_POOL], Value::Null))?;
    config.pool("test-ns-ipv6-pool", pool(&[V6_POOL], Value::Null))?;
    config.pool(
        "test-ns-dualstack-pool",
        pool(&[V4_POOL2, V6_POOL2], Value::Null),
    )?;
    wait_pools_loaded(
        ctx,
        &[
            "test-ns-ipv4-pool",
            "test-ns-ipv6-pool",
            "test-ns-dualstack-pool",
        ],
    )?;
    create_in(ctx, ctx.namespace(), "svc-test-ns-pool-1", prefer_dual())?;
    let ips = wait_for_count(ctx, ctx.namespace(), "svc-test-ns-pool-1", 2)?;
    ensure_in("svc-test-ns-pool-1", &ips, &[V4_POOL2, V6_POOL2])
}
pub(super) fn prefer_primary_v4(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("test-ns-ipv6-pool", pool(&[V6_POOL], Value::Null))?;
    config.pool("test-ns-ipv4-pool", pool(&[V4_POOL], Value::Null))?;
    wait_pools_loaded(ctx, &["test-ns-ipv6-pool", "test-ns-ipv4-pool"])?;
    create_in(ctx, ctx.namespace(), "svc-test-ns-pool-2", prefer_dual())?;
    let ips = wait_for_count(ctx, ctx.namespace(), "svc-test-ns-pool-2", 1)?;
    ensure_in("svc-test-ns-pool-2", &ips, &[V4_POOL])
}
pub(super) fn prefer_primary_v6(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("test-ns-ipv4-pool", pool(&[V4_POOL], Value::Null))?;
    config.pool("test-ns-ipv6-pool", pool(&[V6_POOL], Value::Null))?;
    wait_pools_loaded(ctx, &["test-ns-ipv4-pool", "test-ns-ipv6-pool"])?;
    create_in(
        ctx,
        ctx.namespace(),
        "svc-test-ns-pool-2",
        json!({ "spec": { "ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv6", "IPv4"] } }),
    )?;
    let ips = wait_for_count(ctx, ctx.namespace(), "svc-test-ns-pool-2", 1)?;
    ensure_in("svc-test-ns-pool-2", &ips, &[V6_POOL])
}
pub(super) fn pool_becomes_dual(ctx: &Ctx) -> Result<()> {
    let ns = ctx.namespace();
    let mut config = Config::new(ctx)?;
    config.pool(
        "test-ns-dualstack-pool",
        pool(&[V4_POOL], json!({ "namespaces": [ns] })),
    )?;
    create_in(ctx, ns, "svc-test-ns-pool-1", prefer_dual())?;
    let first = wait_for_count(ctx, ns, "svc-test-ns-pool-1", 1)?;
    ensure_in("svc-test-ns-pool-1", &first, &[V4_POOL])?;
    config.replace(
        "IPAddressPool",
        "test-ns-dualstack-pool",
        pool(
            &["192.168.10.100/24", V6_POOL],
            json!({ "namespaces": [ns] }),
        ),
    )?;
    let both = wait_for_count(ctx, ns, "svc-test-ns-pool-1", 2)?;
    ensure!(
        both[0] == first[0],
        "the first address moved: {first:?} -> {both:?}"
    );
    ensure!(
        both[1].is_ipv6(),
        "the added address {} is not IPv6",
        both[1]
    );
    ensure_in("svc-test-ns-pool-1", &both[1..], &[V6_POOL])
}
pub(super) fn prefer_require_switch(ctx: &Ctx) -> Result<()> {
    let ns = ctx.namespace();
    let mut config = Config::new(ctx)?;
    config.pool(
        "test-ns-dualstack-pool",
        pool(&[V4_POOL], json!({ "namespaces": [ns] })),
    )?;
    create_in(ctx, ns, "svc-test-ns-pool-1", prefer_dual())?;
    let ips = wait_for_count(ctx, ns, "svc-test-ns-pool-1", 1)?;
    ensure_in("svc-test-ns-pool-1", &ips, &[V4_POOL])?;
    // RequireDualStack with one family missing from every pool: nothing.
    patch_service(
        ctx,
        ns,
        "svc-test-ns-pool-1",
        json!({ "spec": { "ipFamilyPolicy": "RequireDualStack" } }),
    )?;
    wait_for_count(ctx, ns, "svc-test-ns-pool-1", 0)?;
    patch_service(ctx, ns, "svc-test-ns-pool-1", prefer_dual())?;
    let ips = wait_for_count(ctx, ns, "svc-test-ns-pool-1", 1)?;
    ensure_in("svc-test-ns-pool-1", &ips, &[V4_POOL])
}
pub(super) fn no_jump_to_dual(ctx: &Ctx) -> Result<()> {
    let ns = ctx.namespace();
    let mut config = Config::new(ctx)?;
    config.pool("test-ns-ipv4-pool", pool(&[V4_POOL], Value::Null))?;
    create_in(ctx, ns, "svc-test-ns-pool-1", prefer_dual())?;
    let first = wait_for_count(ctx, ns, "svc-test-ns-pool-1", 1)?;
    ensure_in("svc-test-ns-pool-1", &first, &[V4_POOL])?;
    config.pool(
        "test-ns-dualstack-pool",
        pool(&[V4_POOL2, V6_POOL2], Value::Null),
    )?;
    // Positive control: the controller loaded the new pool.
    wait_pool_loaded(ctx, "test-ns-dualstack-pool")?;
    throughout(HOLD, "the service keeping its single address", || {
        let now = ips_in(ctx, ns, "svc-test-ns-pool-1")?;
        Ok((now != first).then(|| format!("moved from {first:?} to {now:?}")))
    })
}
/// Waits until the controller counts pool `name`'s addresses (it
/// loaded the pool).
fn wait_pool_loaded(ctx: &Ctx, name: &str) -> Result<()> {
    let pools: Api<IPAddressPool> = Api::namespaced(ctx.client()?, metallb::NAMESPACE);
    eventually(WAIT, &format!("pool {name} loaded"), || {
        let status = ctx.block_on(pools.get(name))?.status;
        Ok(status
            .filter(|s| s.available_ipv4 + s.available_ipv6 > 0)
            .map(|_| ()))
    })
}
/// Waits until the controller loaded every pool of `names`: a service
/// created while it knew only some would be given an address from those
/// (the choice among pools is what these specs check; a loaded machine
/// made one of them fail).
fn wait_pools_loaded(ctx: &Ctx, names: &[&str]) -> Result<()> {
    names.iter().try_for_each(|n| wait_pool_loaded(ctx, n))
}
pub(super) fn dual_pool_becomes_single(ctx: &Ctx) -> Result<()> {
    let ns = ctx.namespace();
    let mut config = Config::new(ctx)?;
    config.pool(
        "test-ns-dualstack-pool-to-edit",
        pool(&[V4_POOL, V6_POOL], Value::Null),
    )?;
    create_in(ctx, ns, "svc-test-ns-pool-1", prefer_dual())?;
    let original = wait_for_count(ctx, ns, "svc-test-ns-pool-1", 2)?;
    ensure_in("svc-test-ns-pool-1", &original, &[V4_POOL, V6_POOL])?;
    config.pool(
        "test-ns-dualstack-pool",
        pool(&[V4_POOL2, V6_POOL2], Value::Null),
    )?;
    wait_pool_loaded(ctx, "test-ns-dualstack-pool")?;
    config.replace(
        "IPAddressPool",
        "test-ns-dualstack-pool-to-edit",
        pool(&[V6_POOL], Value::Null),
    )?;
    let moved = eventually(WAIT, "two new addresses", || {
        let now = ips_in(ctx, ns, "svc-test-ns-pool-1")?;
        Ok((now.len() == 2 && now != original).then_some(now))
    })?;
    ensure_in("svc-test-ns-pool-1", &moved, &[V4_POOL2, V6_POOL2])
}
pub(super) fn pool_status_dual(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool(
        "status-pool",
        pool(
            &["192.168.10.0/30", "fc00:f853:ccd:e799::/126"],
            Value::Null,
        ),
    )?;
    let pools: Api<IPAddressPool> = Api::namespaced(ctx.client()?, metallb::NAMESPACE);
    // (available v4, available v6, assigned v4, assigned v6)
    let expect = |want: (i64, i64, i64, i64)| {
        eventually(WAIT, &format!("status-pool status {want:?}"), || {
            let got = ctx.block_on(pools.get("status-pool"))?.status.map(|s| {
                (
                    s.available_ipv4,
                    s.available_ipv6,
                    s.assigned_ipv4,
                    s.assigned_ipv6,
                )
            });
            ensure!(got == Some(want), "status {got:?}");
            Ok(Some(()))
        })
    };
    expect((4, 4, 0, 0))?;
    create_in(
        ctx,
        ctx.namespace(),
        "status-svc",
        json!({ "spec": { "ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv4", "IPv6"] } }),
    )?;
    wait_for_count(ctx, ctx.namespace(), "status-svc", 2)?;
    expect((3, 3, 1, 1))?;
    config.replace(
        "IPAddressPool",
        "status-pool",
        pool(
            &["192.168.10.0/29", "fc00:f853:ccd:e799::/125"],
            Value::Null,
        ),
    )?;
    expect((7, 7, 1, 1))?;
    ctx.block_on(services(ctx, ctx.namespace())?.delete("status-svc", &DeleteParams::default()))?;
    expect((8, 8, 0, 0))?;
    let edited = ctx.block_on(pools.patch_status(
        "status-pool",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": {
            "availableIPv4": 5, "availableIPv6": 5, "assignedIPv4": 5, "assignedIPv6": 5,
        } })),
    ))?;
    // Positive control: the edit was stored before it is reverted.
    ensure!(
        edited.status.as_ref().map(|s| s.assigned_ipv4) == Some(5),
        "the manual status edit did not take: {:?}",
        edited.status
    );
    expect((8, 8, 0, 0))
}
