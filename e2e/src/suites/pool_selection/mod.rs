//! `IP Assignment`, continued: upstream's remaining cases of its
//! assignment suite (e2etest/l2tests/assignment.go and
//! loadbalancer_class.go) against the real controller: which pool a
//! service gets by namespace, namespace labels, service labels and
//! priority; what pool deletions, type changes and sharing conditions do
//! to held addresses; the dual-stack policies; the pool status of a
//! dual-stack pool; services of another load-balancer class.
//!
//! Pools here are never advertised (no L2Advertisement), so their
//! addresses need not be reachable: these specs are about assignment.

mod changes;
mod dual_stack;
mod priority;

use changes::{
    reallocates_after_pool_deletion, removes_all_pools, sharing_conditions, type_change_frees,
};
use dual_stack::{
    dual_pool_becomes_single, no_jump_to_dual, pool_becomes_dual, pool_status_dual,
    prefer_dual_pool, prefer_primary_v4, prefer_primary_v6, prefer_require_switch,
};
use priority::{
    unmatched_selectors_serve_requests, with_namespace, with_namespace_and_service_label,
    with_namespace_labels, with_namespaces_with_labels, with_priority, with_service_label,
};

use crate::metallb::{self, Config};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::wait::{eventually, throughout};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::Duration;

/// How long an assignment may take (upstream waits a minute).
const WAIT: Duration = Duration::from_secs(60);

/// How long "stays as it is" is watched, after its positive control.
const HOLD: Duration = Duration::from_secs(5);

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    let ipv4 = |name, run| Spec::new("IP Assignment", name, &["IPV4"], run);
    let dual = |name, run| Spec::new("IP Assignment", name, &["DUALSTACK"], run);
    vec![
        ipv4(
            "should remove the ip from a service and assign it to a free one when changing the service type to clusterIP",
            type_change_frees,
        ),
        ipv4(
            "should reconsider services when sharing the ip and conditions change",
            sharing_conditions,
        ),
        ipv4("removing pools removes all pools", removes_all_pools),
        ipv4(
            "removing pools reallocates svc after deleting a pool",
            reallocates_after_pool_deletion,
        ),
        ipv4("allocation in address pools with namespace", with_namespace),
        ipv4(
            "allocation in address pools with only priority",
            with_priority,
        ),
        ipv4(
            "allocation in address pools with namespace and namespace labels",
            with_namespace_labels,
        ),
        ipv4(
            "allocation in address pools with service label",
            with_service_label,
        ),
        ipv4(
            "allocation in address pools with namespace and service label",
            with_namespace_and_service_label,
        ),
        ipv4(
            "allocation in address pools with namespace with labels",
            with_namespaces_with_labels,
        ),
        ipv4(
            "should serve explicit requests from a pool whose namespaceSelectors match no namespace",
            unmatched_selectors_serve_requests,
        ),
        dual(
            "PreferDualStack should select dual-stack pool if available",
            prefer_dual_pool,
        ),
        dual(
            "PreferDualStack should prefer primary ipv4 family among single-stack pools by default",
            prefer_primary_v4,
        ),
        dual(
            "PreferDualStack should prefer primary ipv6 family among single-stack pools",
            prefer_primary_v6,
        ),
        dual(
            "PreferDualStack additional ip should be assigned when the assigned single-stack pool becomes dual-stack",
            pool_becomes_dual,
        ),
        dual(
            "single-stack pool should assign based on svc changes between PreferDualStack and RequireDualStack",
            prefer_require_switch,
        ),
        dual(
            "PreferDualStack svc assigned from single-stack pool should not jump to dual-stack pool when it's available",
            no_jump_to_dual,
        ),
        dual(
            "PreferDualStack when current dual-stack pool becomes single-stack, svc should pick another dual-stack pool",
            dual_pool_becomes_single,
        ),
        dual("Pool Status DUALSTACK", pool_status_dual),
        Spec::new(
            "LoadBalancer class",
            "a service with loadbalancer class should not get an ip",
            &["IPV4"],
            other_class_ignored,
        ),
    ]
}
fn services(ctx: &Ctx, namespace: &str) -> Result<Api<Service>> {
    Ok(Api::namespaced(ctx.client()?, namespace))
}
/// Creates LoadBalancer service `name` in `namespace` (TCP/80 unless
/// `extra`, merged into the object, says otherwise).
fn create_in(ctx: &Ctx, namespace: &str, name: &str, extra: Value) -> Result<()> {
    let mut svc = json!({
        "metadata": { "name": name },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP" }] },
    });
    metallb::merge(&mut svc, &extra);
    let svc: Service = serde_json::from_value(svc)?;
    ctx.block_on(services(ctx, namespace)?.create(&PostParams::default(), &svc))
        .with_context(|| format!("creating service {namespace}/{name}"))?;
    Ok(())
}
fn ips_in(ctx: &Ctx, namespace: &str, name: &str) -> Result<Vec<IpAddr>> {
    let svc = ctx
        .block_on(services(ctx, namespace)?.get(name))
        .with_context(|| format!("reading service {namespace}/{name}"))?;
    Ok(metallb::ingress(&svc))
}
/// Waits until `name` holds exactly `count` addresses; returns them.
fn wait_for_count(ctx: &Ctx, namespace: &str, name: &str, count: usize) -> Result<Vec<IpAddr>> {
    eventually(WAIT, &format!("{count} address(es) on {name}"), || {
        let ips = ips_in(ctx, namespace, name)?;
        Ok((ips.len() == count).then_some(ips))
    })
}
/// Creates `name` in the test's namespace and waits for its address(es).
fn create_and_wait(ctx: &Ctx, name: &str, extra: Value) -> Result<Vec<IpAddr>> {
    create_in(ctx, ctx.namespace(), name, extra)?;
    metallb::wait_for_ips(ctx, name, WAIT)
}
/// Fails unless every address is in one of `cidrs` (a pool's addresses).
fn ensure_in(what: &str, ips: &[IpAddr], cidrs: &[&str]) -> Result<()> {
    let nets: Vec<IpNet> = cidrs
        .iter()
        .map(|c| c.parse().with_context(|| format!("pool cidr {c}")))
        .collect::<Result<_>>()?;
    for ip in ips {
        ensure!(
            nets.iter().any(|n| n.contains(ip)),
            "{what}: {ip} is not in {cidrs:?}"
        );
    }
    ensure!(!ips.is_empty(), "{what}: no address");
    Ok(())
}
fn patch_service(ctx: &Ctx, namespace: &str, name: &str, patch: Value) -> Result<()> {
    ctx.block_on(services(ctx, namespace)?.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    ))
    .with_context(|| format!("patching service {namespace}/{name}"))?;
    Ok(())
}
fn label_namespace(ctx: &Ctx, namespace: &str, labels: Value) -> Result<()> {
    let api: Api<Namespace> = Api::all(ctx.client()?);
    ctx.block_on(api.patch(
        namespace,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "metadata": { "labels": labels } })),
    ))
    .with_context(|| format!("labelling namespace {namespace}"))?;
    Ok(())
}
fn pool(addresses: &[&str], allocate_to: Value) -> Value {
    let mut spec = json!({ "addresses": addresses });
    if !allocate_to.is_null() {
        spec["serviceAllocation"] = allocate_to;
    }
    spec
}
fn other_class_ignored(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("l2-test", pool(&["192.168.5.32/30"], Value::Null))?;
    config.l2_advertisement("empty", json!({}))?;
    create_in(
        ctx,
        ctx.namespace(),
        "lbclass",
        json!({ "spec": { "loadBalancerClass": "foo" } }),
    )?;
    // Positive control: a service of no class created after it gets an
    // address, so the controller has seen both.
    create_and_wait(ctx, "no-class", json!({}))?;
    throughout(HOLD, "lbclass without an address", || {
        let ips = ips_in(ctx, ctx.namespace(), "lbclass")?;
        Ok((!ips.is_empty()).then(|| format!("it got {ips:?}")))
    })?;
    ensure!(
        metallb::l2_statuses(ctx, "lbclass")?.is_empty(),
        "a speaker announced the other class's service"
    );
    Ok(())
}
