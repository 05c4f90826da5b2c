//! The real speakers' CPU time, read from `/proc`: what one full pass
//! over every service and one single-service change cost a speaker, each
//! against the idle rate measured just before.

use super::super::cpu_seconds;
use anyhow::{Context, Result};
use devenv::cluster::Cluster;
use devenv::lab::cluster::LabCluster;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, Patch, PatchParams};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Single-service changes measured per size.
const CHANGES: usize = 100;

/// The window the speakers' idle CPU rate is measured over, right before
/// a measurement it is subtracted from.
const IDLE_WINDOW: Duration = Duration::from_secs(5);

/// Pids of the real speakers, by node.
pub(super) fn speakers(cluster: &LabCluster) -> BTreeMap<String, i32> {
    cluster
        .nodes()
        .into_iter()
        .filter_map(|n| {
            Some((
                n.name.clone(),
                cluster.pid_of(&format!("speaker-{}", n.name))?,
            ))
        })
        .collect()
}

/// The speakers' CPU seconds, summed.
fn speakers_cpu(pids: &BTreeMap<String, i32>) -> f64 {
    pids.values().filter_map(|p| cpu_seconds(*p)).sum()
}

/// A speaker's CPU seconds for one full pass (mean of the speakers): a
/// label change on the first of `real`, after which every speaker looks
/// at every service again.
pub(super) async fn full_pass(
    client: &kube::Client,
    pids: &BTreeMap<String, i32>,
    real: &[String],
    services: usize,
) -> Result<f64> {
    let idle = idle_rate(pids).await;
    let nodes_api: Api<Node> = Api::all(client.clone());
    let marked = real.first().context("the lab has no node")?;
    let before = speakers_cpu(pids);
    let t = Instant::now();
    nodes_api
        .patch(
            marked,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": { "metallb-rs.dev/bench-pass": format!("{services}") } } })),
        )
        .await?;
    let spent = settle(pids, idle).await;
    Ok((spent - before - idle * t.elapsed().as_secs_f64()).max(0.0) / pids.len().max(1) as f64)
}

/// A speaker's CPU seconds per single-service change: a label on one
/// service at a time, [`CHANGES`] of them spread over the `services`.
pub(super) async fn single_changes(
    svcs: &Api<Service>,
    pids: &BTreeMap<String, i32>,
    services: usize,
) -> Result<f64> {
    let idle = idle_rate(pids).await;
    let before = speakers_cpu(pids);
    let t = Instant::now();
    for i in 0..CHANGES {
        let name = format!("s{:05}", i * services / CHANGES);
        svcs.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": { "metallb-rs.dev/bench-change": "1" } } })),
        )
        .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let spent = settle(pids, idle).await;
    Ok((spent - before - idle * t.elapsed().as_secs_f64()).max(0.0)
        / pids.len().max(1) as f64
        / CHANGES as f64)
}

/// The speakers' CPU seconds per second over [`IDLE_WINDOW`], summed.
async fn idle_rate(pids: &BTreeMap<String, i32>) -> f64 {
    let (before, t) = (speakers_cpu(pids), Instant::now());
    tokio::time::sleep(IDLE_WINDOW).await;
    (speakers_cpu(pids) - before) / t.elapsed().as_secs_f64()
}

/// Waits until the speakers' CPU rate is back near `idle` for a second
/// (at most a minute); their CPU seconds then.
async fn settle(pids: &BTreeMap<String, i32>, idle: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = speakers_cpu(pids);
    let mut quiet = 0;
    while quiet < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = speakers_cpu(pids);
        // A clock tick is 10 ms: allow two above the idle rate.
        if now - last <= idle * 0.25 + 0.02 {
            quiet += 1;
        } else {
            quiet = 0;
        }
        last = now;
    }
    last
}
