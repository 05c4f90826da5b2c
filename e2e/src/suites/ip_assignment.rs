//! `IP Assignment`: upstream's controller e2e cases against the real
//! controller process: release and hand-over, restart safety, requested
//! pools, and the pool status counters (4/4 -> 3/3 -> 7/7 -> 8/8 with
//! manual edits reverted).

use crate::metallb::{self, Config, create_service, wait_for_ips};
use crate::{Ctx, Spec};
use anyhow::{Result, ensure};
use devenv::wait::{eventually, throughout};
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use metallb_rs::api::v1beta1::IPAddressPool;
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![
        Spec::new(
            "IP Assignment",
            "should release the IP when the service is deleted and hand it to a waiting service",
            &["IPV4"],
            release_and_hand_over,
        ),
        Spec::new(
            "IP Assignment",
            "should preserve every IP across a controller restart",
            &["IPV4"],
            restart_preserves,
        ),
        Spec::new(
            "IP Assignment",
            "should preseve the same external ip after controller restart",
            &["IPV4"],
            restart_keeps_holders,
        ),
        Spec::new(
            "IP Assignment",
            "should assign from the pool requested by annotation, autoAssign or not",
            &["IPV4"],
            requested_pool,
        ),
        Spec::new(
            "IP Assignment",
            "should keep the pool status counters exact and revert manual edits",
            &["IPV4"],
            pool_counters,
        ),
    ]
}

fn release_and_hand_over(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("e2e-single", json!({ "addresses": ["192.168.10.7/32"] }))?;
    create_service(ctx, "first", json!({}))?;
    let ips = wait_for_ips(ctx, "first", WAIT)?;
    ensure!(
        ips == ["192.168.10.7".parse::<std::net::IpAddr>()?],
        "first got {ips:?}"
    );
    let svc = metallb::get_service(ctx, "first")?;
    ensure!(
        svc.annotations()
            .get("metallb.io/ip-allocated-from-pool")
            .map(String::as_str)
            == Some("e2e-single"),
        "annotation missing: {:?}",
        svc.annotations()
    );
    create_service(ctx, "second", json!({}))?;
    let failed = eventually(WAIT, "AllocationFailed on second", || {
        let e = metallb::events(ctx, "second", "AllocationFailed")?;
        Ok((!e.is_empty()).then_some(e))
    })?;
    ensure!(failed[0].contains("no available IPs"), "{failed:?}");
    let api: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(api.delete("first", &DeleteParams::default()))?;
    let ips = wait_for_ips(ctx, "second", WAIT)?;
    ensure!(
        ips == ["192.168.10.7".parse::<std::net::IpAddr>()?],
        "second got {ips:?}"
    );
    Ok(())
}

fn restart_preserves(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("e2e-restart", json!({ "addresses": ["192.168.11.0/29"] }))?;
    let mut before = Vec::new();
    for i in 0..4 {
        create_service(ctx, &format!("s{i}"), json!({}))?;
        before.push(wait_for_ips(ctx, &format!("s{i}"), WAIT)?);
    }
    ctx.cluster().restart_controller()?;
    // A service created after the restart must not take a held address.
    create_service(ctx, "after", json!({}))?;
    let after = wait_for_ips(ctx, "after", WAIT)?;
    ensure!(
        !before.contains(&after),
        "new service got a held address {after:?}"
    );
    for (i, ips) in before.iter().enumerate() {
        let now = metallb::ingress(&metallb::get_service(ctx, &format!("s{i}"))?);
        ensure!(&now == ips, "s{i} moved from {ips:?} to {now:?}");
    }
    Ok(())
}

/// Upstream's five restarts: two services hold the pool's two addresses,
/// two wait for one; after each restart the holders keep theirs and the
/// waiting ones get none (held for 10 s, as upstream's `Consistently`).
fn restart_keeps_holders(ctx: &Ctx) -> Result<()> {
    const RESTARTS: usize = 5;
    let mut config = Config::new(ctx)?;
    config.pool(
        "assignment-controller-reset-test-pool",
        json!({ "addresses": ["192.168.10.100/32", "192.168.20.200/32"] }),
    )?;
    let holders = [
        ("service-a", "192.168.10.100"),
        ("service-b", "192.168.20.200"),
    ];
    for (svc, want) in holders {
        create_service(ctx, svc, json!({}))?;
        let ips = wait_for_ips(ctx, svc, WAIT)?;
        ensure!(
            ips == [want.parse::<std::net::IpAddr>()?],
            "{svc} got {ips:?}"
        );
    }
    let waiting = ["service-c", "service-d"];
    for svc in waiting {
        create_service(ctx, svc, json!({}))?;
        eventually(WAIT, &format!("AllocationFailed on {svc}"), || {
            let e = metallb::events(ctx, svc, "AllocationFailed")?;
            Ok((!e.is_empty()).then_some(()))
        })?;
    }
    for round in 1..=RESTARTS {
        ctx.cluster().restart_controller()?;
        throughout(
            Duration::from_secs(10),
            &format!("the addresses after restart {round}"),
            || {
                for (svc, want) in holders {
                    let now = metallb::ingress(&metallb::get_service(ctx, svc)?);
                    if now != [want.parse::<std::net::IpAddr>()?] {
                        return Ok(Some(format!("{svc} has {now:?}, not {want}")));
                    }
                }
                for svc in waiting {
                    let now = metallb::ingress(&metallb::get_service(ctx, svc)?);
                    if !now.is_empty() {
                        return Ok(Some(format!("{svc}, waiting, got {now:?}")));
                    }
                }
                Ok(None)
            },
        )?;
    }
    Ok(())
}

fn requested_pool(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("e2e-auto", json!({ "addresses": ["192.168.12.0/30"] }))?;
    config.pool(
        "e2e-manual",
        json!({ "addresses": ["192.168.13.0/30"], "autoAssign": false }),
    )?;
    for (svc, pool, prefix) in [
        ("to-auto", "e2e-auto", "192.168.12."),
        ("to-manual", "e2e-manual", "192.168.13."),
    ] {
        create_service(
            ctx,
            svc,
            json!({ "metadata": { "annotations": { "metallb.io/address-pool": pool } } }),
        )?;
        let ips = wait_for_ips(ctx, svc, WAIT)?;
        ensure!(
            ips.iter().all(|ip| ip.to_string().starts_with(prefix)),
            "{svc}: {ips:?} not from {pool}"
        );
        let got = metallb::get_service(ctx, svc)?;
        ensure!(
            got.annotations()
                .get("metallb.io/ip-allocated-from-pool")
                .map(String::as_str)
                == Some(pool),
            "{svc}: annotation {:?}",
            got.annotations()
        );
    }
    // The IP stays put while nothing changes.
    let before = metallb::ingress(&metallb::get_service(ctx, "to-manual")?);
    throughout(Duration::from_secs(2), "to-manual's address", || {
        let now = metallb::ingress(&metallb::get_service(ctx, "to-manual")?);
        Ok((now != before).then(|| format!("{before:?} became {now:?}")))
    })
}

fn pool_counters(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool(
        "e2e-counters",
        json!({ "addresses": ["192.168.14.0/30", "fc00:f853:ccd:e799::/126"] }),
    )?;
    let pools: Api<IPAddressPool> = Api::namespaced(ctx.client()?, metallb::NAMESPACE);
    let expect = |want: (i64, i64, i64, i64)| {
        eventually(WAIT, &format!("pool status {want:?}"), || {
            let s = ctx.block_on(pools.get("e2e-counters"))?.status;
            let got = s.map(|s| {
                (
                    s.assigned_ipv4,
                    s.available_ipv4,
                    s.assigned_ipv6,
                    s.available_ipv6,
                )
            });
            Ok((got == Some(want)).then_some(()))
        })
    };
    expect((0, 4, 0, 4))?;
    create_service(
        ctx,
        "v4",
        json!({ "metadata": { "annotations": { "metallb.io/address-pool": "e2e-counters" } } }),
    )?;
    wait_for_ips(ctx, "v4", WAIT)?;
    expect((1, 3, 0, 4))?;
    let edited = ctx.block_on(pools.patch_status(
        "e2e-counters",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": { "assignedIPv4": 0, "availableIPv4": 99 } })),
    ))?;
    // Positive control: the edit was stored, so what follows is a revert.
    let stored = edited.status.map(|s| (s.assigned_ipv4, s.available_ipv4));
    ensure!(
        stored == Some((0, 99)),
        "the manual status edit did not take: the API server stored {stored:?}"
    );
    expect((1, 3, 0, 4))?;
    let api: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(api.delete("v4", &DeleteParams::default()))?;
    expect((0, 4, 0, 4))?;
    Ok(())
}
