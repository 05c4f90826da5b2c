//! Simulated nodes for `bench scale --nodes N`: Node objects that
//! heartbeat as the lab's node agents do (status and node Lease), each
//! with a speaker presence Lease renewed as a speaker renews it. They have
//! no address, so no real speaker gossips with them: liveness judges them
//! by their leases alone. Nothing answers for the addresses they win:
//! the real speakers are what the benchmark measures.

use anyhow::{Context, Result};
use devenv::lab::agent::{self, AgentConfig};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use metallb_rs::speaker::presence;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The label on every simulated node (and what [`remove`] deletes).
pub const LABEL: (&str, &str) = ("metallb-rs.dev/simulated", "true");

/// Requests in flight at once while creating or renewing.
const IN_FLIGHT: usize = 32;

/// How often a simulated node posts its status and renews its node lease:
/// often enough for the lab's node lifecycle (10 s grace), and 2.5x less
/// than the real nodes' agents, so the simulation spends the API server
/// on what is measured (the speakers' own load).
pub const PERIOD: Duration = Duration::from_secs(5);

/// Every how many periods a simulated speaker renews its presence lease:
/// a speaker's slow period (gossip agrees: the simulated nodes have no
/// gossip, so they never see trouble).
const PRESENCE_EVERY: u64 = presence::SLOW_RENEW.as_secs() / PERIOD.as_secs();

/// The name of simulated node `i`.
pub fn name(i: usize) -> String {
    format!("sim-{i:04}")
}

fn config(node: &str) -> AgentConfig {
    let mut cfg = AgentConfig::new(node);
    cfg.labels.insert(LABEL.0.into(), LABEL.1.into());
    cfg
}

/// Registers `n` simulated nodes with their node and presence leases.
pub async fn create(client: &kube::Client, n: usize, namespace: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node_leases: Api<Lease> = Api::namespaced(client.clone(), agent::NODE_LEASE_NAMESPACE);
    let presence_api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let results = futures::stream::iter(0..n)
        .map(|i| {
            let (nodes, node_leases, presence_api) =
                (nodes.clone(), node_leases.clone(), presence_api.clone());
            async move {
                let node = name(i);
                let cfg = config(&node);
                let now = k8s_openapi::jiff::Timestamp::now();
                nodes
                    .create(&PostParams::default(), &agent::node_object(&cfg, now))
                    .await
                    .with_context(|| format!("creating node {node}"))?;
                node_leases
                    .create(&PostParams::default(), &agent::lease_object(&cfg, now))
                    .await
                    .with_context(|| format!("creating the node lease of {node}"))?;
                presence::join(&presence_api, &node, presence::Mode::Slow, None)
                    .await
                    .with_context(|| format!("creating the presence lease of {node}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    results.into_iter().collect()
}

/// Heartbeats and renews for `n` simulated nodes every [`PERIOD`] until
/// dropped (the caller aborts the task); counts in `late` the rounds that
/// took longer than a period (the simulation not keeping up: its leases
/// then look overdue to the real speakers).
pub async fn heartbeat(client: kube::Client, n: usize, namespace: String, late: Arc<AtomicU64>) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node_leases: Api<Lease> = Api::namespaced(client.clone(), agent::NODE_LEASE_NAMESPACE);
    let presence_api: Api<Lease> = Api::namespaced(client, &namespace);
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for round in 0u64.. {
        tick.tick().await;
        let started = std::time::Instant::now();
        let presence_round = round % PRESENCE_EVERY == 0;
        futures::stream::iter(0..n)
            .for_each_concurrent(IN_FLIGHT, |i| {
                let (nodes, node_leases, presence_api) =
                    (nodes.clone(), node_leases.clone(), presence_api.clone());
                async move {
                    let node = name(i);
                    let cfg = config(&node);
                    let now = k8s_openapi::jiff::Timestamp::now();
                    // Failures are the load showing: the next round retries.
                    {
                        let _ = nodes
                            .patch_status(
                                &node,
                                &PatchParams::default(),
                                &Patch::Merge(agent::status_patch(&cfg, now, None)),
                            )
                            .await;
                        let lease = agent::lease_object(&cfg, now);
                        let _ = node_leases
                            .patch(&node, &PatchParams::default(), &Patch::Merge(&lease))
                            .await;
                    }
                    if presence_round {
                        let _ =
                            presence::join(&presence_api, &node, presence::Mode::Slow, None).await;
                    }
                }
            })
            .await;
        if started.elapsed() > PERIOD {
            late.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Removes every simulated node and its leases.
pub async fn remove(client: &kube::Client, namespace: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let selector = format!("{}={}", LABEL.0, LABEL.1);
    let names: Vec<String> = nodes
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let presence_api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let node_leases: Api<Lease> = Api::namespaced(client.clone(), agent::NODE_LEASE_NAMESPACE);
    let results = futures::stream::iter(names)
        .map(|node| {
            let (nodes, presence_api, node_leases) =
                (nodes.clone(), presence_api.clone(), node_leases.clone());
            async move {
                let dp = DeleteParams::default();
                for r in [
                    presence_api
                        .delete(&format!("{}{node}", presence::LEASE_PREFIX), &dp)
                        .await
                        .map(drop),
                    node_leases.delete(&node, &dp).await.map(drop),
                    nodes.delete(&node, &dp).await.map(drop),
                ] {
                    match r {
                        Ok(()) => {}
                        Err(kube::Error::Api(e)) if e.code == 404 => {}
                        Err(e) => {
                            return Err(anyhow::Error::from(e).context(format!("removing {node}")));
                        }
                    }
                }
                Ok(())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    results.into_iter().collect()
}
