//! A configuration mistake never takes an address away: specs that make
//! the MetalLB configuration invalid (a second pool overlapping the
//! first) and then restart components. A controller that has not loaded
//! a valid configuration (after a restart or a takeover) must leave every
//! service as it is; a speaker restarted meanwhile must not be elected
//! for addresses it cannot announce. Registered under `IP Assignment` and
//! `L2` like upstream's specs of the same concerns.

use super::l2::watch::Watch;
use super::l2::{self, Net};
use crate::external::{sample, speaker_metrics};
use crate::metallb::{self, Config, wait_for_configuration, wait_for_ips, wait_for_l2_node};
use crate::{Ctx, Spec};
use anyhow::{Result, ensure};
use devenv::cluster::StopSignal;
use devenv::wait::{eventually, throughout};
use kube::ResourceExt;
use metallb_rs::api::v1beta1::ConfigurationResult;
use serde_json::json;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
/// How long "nothing moves" is watched once the restarted component has
/// read the invalid configuration (its first pass follows at once).
const STILL: Duration = Duration::from_secs(5);

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![
        Spec::new(
            "IP Assignment",
            "should move no IP when the controller restarts while the configuration is invalid",
            &["IPV4"],
            controller_restart,
        ),
        Spec::new(
            "IP Assignment",
            "should move no IP when a standby controller takes over while the configuration is invalid",
            &["IPV4"],
            controller_takeover,
        ),
        Spec::new(
            "L2",
            "should keep answering from another node while a speaker restarts with an invalid configuration",
            &["IPV4"],
            speaker_restart,
        ),
    ]
}

/// How the controller's leadership changes.
#[derive(Clone, Copy)]
enum Handover {
    /// SIGTERM and start: the lease is released, the new process leads.
    Restart,
    /// The leader is killed; a standby waits out the lease and leads.
    Takeover,
}

fn controller_restart(ctx: &Ctx) -> Result<()> {
    moves_no_ip(ctx, Handover::Restart)
}

fn controller_takeover(ctx: &Ctx) -> Result<()> {
    moves_no_ip(ctx, Handover::Takeover)
}

/// Makes the configuration invalid by adding a pool that overlaps `pool`
/// at `ip`, and waits until the controller reports it (the positive
/// control that the change took effect).
fn add_overlap(ctx: &Ctx, config: &mut Config<'_>, ip: IpAddr) -> Result<()> {
    // The webhooks refuse the overlap at apply time where installed.
    let webhooks_off = metallb::without_webhooks(ctx)?;
    config.pool("e2e-overlap", json!({ "addresses": [format!("{ip}/32")] }))?;
    drop(webhooks_off);
    let summary = wait_for_configuration(ctx, "controller", ConfigurationResult::Invalid, WAIT)?;
    ensure!(
        summary.contains("e2e-overlap"),
        "the controller's error does not name the overlapping pool: {summary:?}"
    );
    Ok(())
}

/// The controller's gauges say it read the configuration and found it
/// invalid, with none loaded before (upstream's metric semantics).
fn controller_read_invalid(ctx: &Ctx) -> Result<Option<()>> {
    let m = ctx.cluster().controller_metrics()?;
    let stale = sample(&m, "metallb_k8s_client_config_stale_bool", &[]);
    let loaded = sample(&m, "metallb_k8s_client_config_loaded_bool", &[]);
    Ok((stale == Some(1.0) && loaded == Some(0.0)).then_some(()))
}

fn moves_no_ip(ctx: &Ctx, how: Handover) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool(
        "e2e-held",
        json!({ "addresses": [l2::pool(ctx, Net::V4)?] }),
    )?;
    config.l2_advertisement("e2e-held", json!({}))?;
    l2::backends(ctx, &[])?;
    let mut held: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
    for i in 0..3 {
        let name = format!("held{i}");
        let ips = l2::web_service(ctx, &name, json!({}))?;
        held.insert(name, ips);
    }
    let probe = held["held0"][0];
    l2::reachable(ctx, probe)?;

    add_overlap(ctx, &mut config, probe)?;
    let _restore = matches!(how, Handover::Takeover).then(|| metallb::OneController(ctx));
    match how {
        Handover::Restart => ctx.cluster().restart_controller()?,
        Handover::Takeover => ctx.cluster().controller_takeover()?,
    }
    eventually(
        WAIT,
        "the new controller to read the invalid configuration",
        || controller_read_invalid(ctx),
    )?;

    l2::create_web_service(ctx, "waiting", json!({}))?;
    throughout(STILL, "every held address", || {
        for (name, ips) in &held {
            let svc = metallb::get_service(ctx, name)?;
            let now = metallb::ingress(&svc);
            if now != *ips {
                return Ok(Some(format!("{name} moved from {ips:?} to {now:?}")));
            }
            let pool = svc.annotations().get("metallb.io/ip-allocated-from-pool");
            if pool.map(String::as_str) != Some("e2e-held") {
                return Ok(Some(format!("{name}'s pool annotation is now {pool:?}")));
            }
        }
        let waiting = metallb::ingress(&metallb::get_service(ctx, "waiting")?);
        Ok((!waiting.is_empty())
            .then(|| format!("a controller without a valid configuration assigned {waiting:?}")))
    })?;
    l2::reachable(ctx, probe)?;

    // Fixed: allocation resumes around the held addresses.
    config.delete("IPAddressPool", "e2e-overlap")?;
    wait_for_configuration(ctx, "controller", ConfigurationResult::Valid, WAIT)?;
    let got = wait_for_ips(ctx, "waiting", WAIT)?;
    for (name, ips) in &held {
        ensure!(
            !ips.contains(&got[0]),
            "waiting got {got:?}, held by {name}"
        );
        let now = metallb::ingress(&metallb::get_service(ctx, name)?);
        ensure!(now == *ips, "{name} moved from {ips:?} to {now:?}");
    }
    Ok(())
}

/// A speaker started while the configuration is invalid is not elected:
/// another node answers for its address until the configuration is
/// fixed, then the address comes back (the hash did not change).
fn speaker_restart(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool(
        "e2e-held",
        json!({ "addresses": [l2::pool(ctx, Net::V4)?] }),
    )?;
    config.l2_advertisement("e2e-held", json!({}))?;
    l2::backends(ctx, &[])?;
    let ip = l2::web_service(ctx, "web", json!({}))?[0];
    let owner = wait_for_l2_node(ctx, "web", WAIT)?;
    let watch = Watch::new(ctx, &[ip], "eth0")?;
    watch.wait_only(&owner)?;

    add_overlap(ctx, &mut config, ip)?;
    let state = format!("speaker-{owner}");
    wait_for_configuration(ctx, &state, ConfigurationResult::Invalid, WAIT)?;
    ctx.cluster().stop_speaker(&owner, StopSignal::Term)?;
    ctx.cluster().start_speaker(&owner)?;
    eventually(
        WAIT,
        &format!("the restarted speaker on {owner} to read the invalid configuration"),
        || {
            let m = speaker_metrics(ctx, &owner)?;
            let stale = sample(&m, "metallb_k8s_client_config_stale_bool", &[]);
            let loaded = sample(&m, "metallb_k8s_client_config_loaded_bool", &[]);
            Ok((stale == Some(1.0) && loaded == Some(0.0)).then_some(()))
        },
    )?;
    // Another node alone answers, and the restarted one is never heard
    // over the prober's window; its status says the same.
    let other = watch.wait_moved(&owner)?;
    eventually(WAIT, &format!("a ServiceL2Status naming {other}"), || {
        Ok(metallb::l2_statuses(ctx, "web")?
            .into_iter()
            .filter_map(|s| s.status?.node)
            .any(|n| n == other)
            .then_some(()))
    })?;
    l2::reachable(ctx, ip)?;

    config.delete("IPAddressPool", "e2e-overlap")?;
    wait_for_configuration(ctx, &state, ConfigurationResult::Valid, WAIT)?;
    eventually(WAIT, &format!("the address back on {owner}"), || {
        let node = wait_for_l2_node(ctx, "web", WAIT)?;
        Ok((node == owner).then_some(()))
    })?;
    watch.wait_only(&owner)
}
