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

use crate::metallb::{self, Config};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::wait::{eventually, throughout};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use metallb_rs::api::v1beta1::IPAddressPool;
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

fn type_change_frees(ctx: &Ctx) -> Result<()> {
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

fn sharing_conditions(ctx: &Ctx) -> Result<()> {
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

fn removes_all_pools(ctx: &Ctx) -> Result<()> {
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

fn reallocates_after_pool_deletion(ctx: &Ctx) -> Result<()> {
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

fn with_namespace(ctx: &Ctx) -> Result<()> {
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

fn with_priority(ctx: &Ctx) -> Result<()> {
    by_priority(
        ctx,
        json!({ "priority": 20 }),
        json!({ "priority": 10 }),
        false,
        json!({}),
        "svc-test-priority",
    )
}

fn with_namespace_labels(ctx: &Ctx) -> Result<()> {
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

fn with_service_label(ctx: &Ctx) -> Result<()> {
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

fn with_namespace_and_service_label(ctx: &Ctx) -> Result<()> {
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

fn with_namespaces_with_labels(ctx: &Ctx) -> Result<()> {
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

fn unmatched_selectors_serve_requests(ctx: &Ctx) -> Result<()> {
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

const V4_POOL: &str = "192.168.10.100/32";
const V6_POOL: &str = "fc00:f853:ccd:e799::/124";
const V4_POOL2: &str = "192.168.11.100/32";
const V6_POOL2: &str = "fc00:f853:ccd:e800::/124";

fn prefer_dual() -> Value {
    json!({ "spec": { "ipFamilyPolicy": "PreferDualStack" } })
}

fn prefer_dual_pool(ctx: &Ctx) -> Result<()> {
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

fn prefer_primary_v4(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("test-ns-ipv6-pool", pool(&[V6_POOL], Value::Null))?;
    config.pool("test-ns-ipv4-pool", pool(&[V4_POOL], Value::Null))?;
    wait_pools_loaded(ctx, &["test-ns-ipv6-pool", "test-ns-ipv4-pool"])?;
    create_in(ctx, ctx.namespace(), "svc-test-ns-pool-2", prefer_dual())?;
    let ips = wait_for_count(ctx, ctx.namespace(), "svc-test-ns-pool-2", 1)?;
    ensure_in("svc-test-ns-pool-2", &ips, &[V4_POOL])
}

fn prefer_primary_v6(ctx: &Ctx) -> Result<()> {
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

fn pool_becomes_dual(ctx: &Ctx) -> Result<()> {
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

fn prefer_require_switch(ctx: &Ctx) -> Result<()> {
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

fn no_jump_to_dual(ctx: &Ctx) -> Result<()> {
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

fn dual_pool_becomes_single(ctx: &Ctx) -> Result<()> {
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

fn pool_status_dual(ctx: &Ctx) -> Result<()> {
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
