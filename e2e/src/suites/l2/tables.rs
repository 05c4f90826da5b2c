//! Two of upstream's `L2` tables with an entry per family
//! (`l2tests/l2.go`): "metrics should be exposed by the controller" and
//! "validate requesting a specific address pool for Loadbalancer
//! service". Upstream runs the IPv6 entries on an IPv6 cluster, where its
//! services are IPv6; here the cluster is dual-stack and each entry asks
//! for a single-stack service of its family.

use super::watch::Watch;
use super::{Net, backends, pool, reachable, web_service};
use crate::external;
use crate::metallb::{self, Config};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, bail, ensure};
use devenv::wait::eventually;
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use serde_json::json;
use std::net::IpAddr;
use std::time::Duration;

/// Upstream's waits here: 2 min for the metrics and connectivity.
const WAIT: Duration = Duration::from_secs(120);

pub(super) fn specs() -> Vec<Spec> {
    macro_rules! table {
        ($it:literal, $f:ident) => {{
            fn v4(ctx: &Ctx) -> Result<()> {
                $f(ctx, false)
            }
            fn v6(ctx: &Ctx) -> Result<()> {
                $f(ctx, true)
            }
            [
                Spec::new("L2", $it, &["IPV4"], v4),
                Spec::new("L2", $it, &["IPV6"], v6),
            ]
        }};
    }
    [
        table!(
            "metrics should be exposed by the controller - Checking service",
            metrics
        ),
        table!(
            "validate requesting a specific address pool for Loadbalancer service",
            requested_pool
        ),
    ]
    .into_iter()
    .flatten()
    .chain([Spec::new(
        "L2",
        "validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes AddressPool defined by address range",
        &["IPV4"],
        pool_by_range,
    )])
    .collect()
}

/// Upstream's range entry: a pool of the cluster's IPv4 and IPv6 ranges
/// (`FIRST-LAST`), an empty advertisement; the service's address lies in
/// the IPv4 range, one node alone answers for it, and it is reachable.
fn pool_by_range(ctx: &Ctx) -> Result<()> {
    let v4 = range(ctx, false)?;
    let mut addresses = vec![v4.clone()];
    addresses.extend(pool(ctx, Net::V6).ok());
    let mut config = Config::new(ctx)?;
    config.pool("l2-test", json!({ "addresses": addresses }))?;
    config.l2_advertisement("empty", json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "external-local-lb", json!({ "spec": family(false) }))?;
    let ip = ips[0];
    let count = in_range(&v4, 0)?.1;
    let within = (0..count).map(|i| in_range(&v4, i).map(|r| r.0));
    ensure!(
        within.collect::<Result<Vec<_>>>()?.contains(&ip),
        "{ip} is not in the pool's range {v4}"
    );
    let node = Watch::new(ctx, &ips, "eth0")?.settled()?;
    let body = reachable(ctx, ip)?;
    ensure!(
        super::names_a_node(ctx, &body),
        "{ip} (announced by {node}) served {body:?}, not a backend"
    );
    Ok(())
}

fn family(v6: bool) -> serde_json::Value {
    let family = if v6 { "IPv6" } else { "IPv4" };
    json!({ "ipFamilies": [family], "ipFamilyPolicy": "SingleStack" })
}

/// The cluster's range of the family, or a skip where it has none.
fn range(ctx: &Ctx, v6: bool) -> Result<String> {
    pool(ctx, if v6 { Net::V6 } else { Net::V4 }).map_err(|e| crate::skip(format!("{e:#}")))
}

/// The first address of `range` (`FIRST-LAST`, as the clusters give
/// their ranges) plus `i` (upstream's `config.GetIPFromRangeByIndex`),
/// and how many the range holds.
pub(super) fn in_range(range: &str, i: u32) -> Result<(IpAddr, u32)> {
    let Some((a, b)) = range.split_once('-') else {
        bail!("{range} is not FIRST-LAST");
    };
    let (a, b): (IpAddr, IpAddr) = (a.trim().parse()?, b.trim().parse()?);
    let n = |ip: IpAddr| match ip {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    };
    let (first, last) = (n(a), n(b));
    let want = first + u128::from(i);
    ensure!(want <= last, "{range} has no address number {i}");
    let ip = match a {
        IpAddr::V4(_) => IpAddr::V4(u32::try_from(want)?.into()),
        IpAddr::V6(_) => IpAddr::V6(want.into()),
    };
    Ok((ip, u32::try_from(last - first + 1)?))
}

/// Upstream reads every value both from the pod's `/metrics` and from
/// Prometheus; the clusters here run no Prometheus, so the pods' own
/// `/metrics` are read (the controller's and each speaker's).
fn metrics(ctx: &Ctx, v6: bool) -> Result<()> {
    range(ctx, v6)?;
    let mut config = Config::new(ctx)?;
    let (ipv4, ipv6) = metrics_pool(ctx, &mut config)?;
    expect_allocator_gauges(
        ctx,
        &[
            ("addresses_in_use_total", 0),
            ("addresses_total", ipv4 + ipv6),
            ("ipv4_addresses_in_use_total", 0),
            ("ipv4_addresses_total", ipv4),
            ("ipv6_addresses_in_use_total", 0),
            ("ipv6_addresses_total", ipv6),
        ],
    )?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, METRICS_SVC, json!({ "spec": family(v6) }))?;
    let ip = ips[0];
    expect_allocator_gauges(ctx, &[("addresses_in_use_total", 1)])?;
    // Address resolution and connectivity, then the announcing node by
    // the MAC that answers.
    let body = reachable(ctx, ip)?;
    ensure!(
        super::names_a_node(ctx, &body),
        "{ip} served {body:?}, not a backend"
    );
    let node = Watch::new(ctx, &ips, "eth0")?.settled()?;
    let service = format!("service=\"{}/{METRICS_SVC}\"", ctx.namespace());
    expect_layer2_metrics(ctx, &node, &service, ip)?;
    expect_only_announcer(ctx, &node, &service, ip)?;
    metallb::delete_service(ctx, METRICS_SVC)?;
    eventually(
        Duration::from_secs(60),
        &format!("metallb_speaker_announced gone from {node}"),
        || {
            let text = external::speaker_metrics(ctx, &node)?;
            Ok(
                external::sample(&text, "metallb_speaker_announced", &[&service])
                    .is_none()
                    .then_some(()),
            )
        },
    )
}

/// The pool [`metrics`] reads the gauges of.
const METRICS_POOL: &str = "l2-metrics-test";
/// The service [`metrics`] reads the speakers' metrics of.
const METRICS_SVC: &str = "external-local-lb";

/// A pool of the cluster's ranges (IPv6 where it has one) and an empty
/// advertisement; how many IPv4 and IPv6 addresses the pool holds.
fn metrics_pool(ctx: &Ctx, config: &mut Config<'_>) -> Result<(u32, u32)> {
    let (v4_range, v6_range) = (pool(ctx, Net::V4)?, pool(ctx, Net::V6).ok());
    let ipv4 = in_range(&v4_range, 0)?.1;
    let ipv6 = match &v6_range {
        Some(r) => in_range(r, 0)?.1,
        None => 0,
    };
    let mut addresses = vec![v4_range];
    addresses.extend(v6_range);
    config.pool(METRICS_POOL, json!({ "addresses": addresses }))?;
    config.l2_advertisement("empty", json!({}))?;
    Ok((ipv4, ipv6))
}

/// Waits until the controller's `metallb_allocator_<name>` gauges of the
/// pool have the values of `want`.
fn expect_allocator_gauges(ctx: &Ctx, want: &[(&str, u32)]) -> Result<()> {
    let pool_label = format!("pool=\"{METRICS_POOL}\"");
    let mut last = String::new();
    eventually(WAIT, "the controller's allocator gauges", || {
        let text = ctx.cluster().controller_metrics()?;
        for (name, value) in want {
            let metric = format!("metallb_allocator_{name}");
            let got = external::sample(&text, &metric, &[&pool_label]);
            if got != Some(f64::from(*value)) {
                last = format!("{metric} is {got:?}, not {value}");
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .with_context(|| last.clone())
}

/// `metallb_speaker_announced` of `service` in layer 2 mode on `node`,
/// in its speaker's `/metrics` text.
fn speaker_announced(text: &str, node: &str, service: &str) -> Option<f64> {
    let node_label = format!("node=\"{node}\"");
    external::sample(
        text,
        "metallb_speaker_announced",
        &[&node_label, "protocol=\"layer2\"", service],
    )
}

/// Waits until `node`'s speaker says it announces `service` and has
/// counted requests, responses and gratuitous announcements for `ip`.
fn expect_layer2_metrics(ctx: &Ctx, node: &str, service: &str, ip: IpAddr) -> Result<()> {
    let ip_label = format!("ip=\"{ip}\"");
    let mut last = String::new();
    eventually(WAIT, &format!("layer 2 metrics on {node}"), || {
        let text = external::speaker_metrics(ctx, node)?;
        let announced = speaker_announced(&text, node, service);
        if announced != Some(1.0) {
            last = format!("metallb_speaker_announced is {announced:?}");
            return Ok(None);
        }
        for m in [
            "metallb_layer2_requests_received",
            "metallb_layer2_responses_sent",
            "metallb_layer2_gratuitous_sent",
        ] {
            let v = external::sample(&text, m, &[&ip_label]);
            if v.is_none_or(|v| v < 1.0) {
                last = format!("{m}{{{ip_label}}} is {v:?}");
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .with_context(|| last.clone())
}

/// The other speakers do not say they announce `service`.
fn expect_only_announcer(ctx: &Ctx, node: &str, service: &str, ip: IpAddr) -> Result<()> {
    for other in super::nodes(ctx).into_iter().filter(|n| *n != node) {
        let text = external::speaker_metrics(ctx, &other)?;
        let announced = speaker_announced(&text, &other, service);
        ensure!(
            announced != Some(1.0),
            "metallb_speaker_announced present on {other}, while {node} announces {ip}"
        );
    }
    Ok(())
}

/// Upstream runs the table with autoAssign true and false (two entries
/// of one name each): this spec runs both.
fn requested_pool(ctx: &Ctx, v6: bool) -> Result<()> {
    let range = range(ctx, v6)?;
    backends(ctx, &[])?;
    for auto_assign in [true, false] {
        requested_pool_entry(ctx, v6, &range, auto_assign)
            .with_context(|| format!("autoAssign {auto_assign}"))?;
    }
    Ok(())
}

fn requested_pool_entry(ctx: &Ctx, v6: bool, range: &str, auto_assign: bool) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.l2_advertisement("empty", json!({}))?;
    let mut made: Vec<(String, IpAddr)> = Vec::new();
    let result = (|| -> Result<()> {
        for i in 0..2u32 {
            let (ip, _) = in_range(range, i)?;
            let pool = format!("test-addresspool{}", i + 1);
            config.pool(
                &pool,
                json!({ "addresses": [format!("{ip}-{ip}")], "autoAssign": auto_assign }),
            )?;
            let svc = format!("test-service{}", i + 1);
            let mut spec = family(v6);
            spec["externalTrafficPolicy"] = json!("Cluster");
            let got = web_service(
                ctx,
                &svc,
                json!({
                    "metadata": { "annotations": { "metallb.io/address-pool": pool } },
                    "spec": spec,
                }),
            )?;
            ensure!(
                got == [ip],
                "{svc} got {got:?}, not {ip}, the only address of {pool}"
            );
            let annotations = metallb::get_service(ctx, &svc)?
                .metadata
                .annotations
                .unwrap_or_default();
            ensure!(
                annotations.get("metallb.io/ip-allocated-from-pool") == Some(&pool),
                "{svc} is not annotated as allocated from {pool}: {annotations:?}"
            );
            made.push((svc, ip));
            // Every service so far keeps its address and answers on it.
            for (svc, ip) in &made {
                let now = metallb::ingress(&metallb::get_service(ctx, svc)?);
                ensure!(now == [*ip], "{svc}'s address changed from {ip} to {now:?}");
                let body = reachable(ctx, *ip)?;
                ensure!(
                    super::names_a_node(ctx, &body),
                    "{svc} at {ip} served {body:?}, not a backend"
                );
            }
        }
        Ok(())
    })();
    // Upstream's deferred deletes; the next entry reuses the names.
    let api: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    for (svc, _) in &made {
        metallb::delete_service(ctx, svc)?;
    }
    for (svc, _) in &made {
        eventually(Duration::from_secs(60), &format!("{svc} gone"), || {
            Ok(ctx.block_on(api.get_opt(svc))?.is_none().then_some(()))
        })?;
    }
    result
}
