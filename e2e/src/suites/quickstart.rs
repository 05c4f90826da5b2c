//! `QuickStart`: the commands every MetalLB tutorial starts with, typed
//! as a user types them: `kubectl create deployment` of an image the lab
//! cannot pull (its Pods are played by the lab backend), `kubectl expose`
//! as a LoadBalancer, then HTTP to the address from the external host,
//! served by the Deployment's Pods spread over two nodes; and a `kubectl
//! rollout restart` during which the address keeps answering.

use super::devenv::kubectl;
use super::l2::{Net, pool};
use crate::external::{forget_neighbor, http_get};
use crate::metallb::{self, wait_for_ips};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::wait::eventually;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::json;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(90);

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![Spec::new(
        "QuickStart",
        "should serve kubectl create deployment and expose as a LoadBalancer over HTTP from the external host, also through a rollout restart",
        &["IPV4"],
        create_expose_curl,
    )]
}

/// `kubectl` in the spec's namespace, each request bounded.
fn kc(ctx: &Ctx, args: &[&str]) -> Result<String> {
    let mut all = vec!["--request-timeout=30s", "-n", ctx.namespace()];
    all.extend_from_slice(args);
    kubectl(ctx, &all, None)
}

/// The names and nodes of the Deployment `web`'s Pods.
fn web_pods(ctx: &Ctx) -> Result<(BTreeSet<String>, BTreeSet<String>)> {
    let pods: Api<Pod> = Api::namespaced(ctx.client()?, ctx.namespace());
    let list = ctx.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(10),
            pods.list(&ListParams::default().labels("app=web")),
        )
        .await
    })??;
    let names = list
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let nodes = list
        .items
        .iter()
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    Ok((names, nodes))
}

fn create_expose_curl(ctx: &Ctx) -> Result<()> {
    let mut config = metallb::Config::new(ctx)?;
    config.pool("quickstart", json!({ "addresses": [pool(ctx, Net::V4)?] }))?;
    config.l2_advertisement("quickstart", json!({}))?;
    let names = create_and_expose(ctx)?;
    let ip = wait_for_ips(ctx, "web", WAIT)?[0];
    forget_neighbor(ctx, ip)?;
    expect_every_pod_answers(ctx, ip, &names)?;

    // A rollout restart replaces both pods; the address answers all along.
    let probed = restart_while_probing(ctx, ip)?;
    let (after, nodes) = web_pods(ctx)?;
    ensure!(
        after.len() == 2 && after.is_disjoint(&names),
        "2 new pods expected after the restart: {after:?} (before {names:?})"
    );
    ensure!(nodes.len() == 2, "new pods on {nodes:?}");
    ensure!(
        probed.failures.is_empty(),
        "{} of {} requests failed during the rollout: {:?}",
        probed.failures.len(),
        probed.probes,
        probed.failures
    );
    eventually(WAIT, "HTTP from a new pod", || {
        Ok(http_get(ctx, ip, 80, "/")
            .ok()
            .filter(|b| after.contains(b)))
    })
    .context("after the restart")?;
    Ok(())
}

/// `kubectl create deployment web` with two replicas and `kubectl
/// expose` as a LoadBalancer, checked as the user sees them: the
/// commands' answers, two Pods on two nodes, the Deployment's row. The
/// Pods' names.
fn create_and_expose(ctx: &Ctx) -> Result<BTreeSet<String>> {
    let out = kc(
        ctx,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ],
    )?;
    ensure!(out.contains("deployment.apps/web created"), "{out}");
    let out = kc(
        ctx,
        &[
            "expose",
            "deployment",
            "web",
            "--type=LoadBalancer",
            "--port=80",
        ],
    )?;
    ensure!(out.contains("service/web exposed"), "{out}");
    let out = kc(
        ctx,
        &["rollout", "status", "deployment/web", "--timeout=90s"],
    )?;
    ensure!(out.contains("successfully rolled out"), "{out}");
    let (names, nodes) = web_pods(ctx)?;
    ensure!(
        names.len() == 2 && nodes.len() == 2,
        "2 pods on 2 nodes expected: pods {names:?} on {nodes:?}"
    );
    let out = kc(ctx, &["get", "deployment", "web"])?;
    let row: Vec<&str> = out
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    ensure!(
        row.get(..4) == Some(&["web", "2/2", "2", "2"][..]),
        "kubectl get deployment: {out}"
    );
    Ok(names)
}

/// HTTP to `ip` is answered by a Pod of `names`, then by every one of
/// them (the proxy spreads connections).
fn expect_every_pod_answers(ctx: &Ctx, ip: IpAddr, names: &BTreeSet<String>) -> Result<()> {
    // Pods share their node's addresses, so a pod of an earlier spec
    // still draining on port 80 may answer at first.
    eventually(WAIT, &format!("HTTP on {ip}:80 from a web pod"), || {
        Ok(http_get(ctx, ip, 80, "/")
            .ok()
            .filter(|b| names.contains(b)))
    })?;
    let mut answered = BTreeSet::new();
    let deadline = Instant::now() + WAIT;
    while !answered.is_superset(names) && Instant::now() < deadline {
        if let Ok(b) = http_get(ctx, ip, 80, "/") {
            answered.insert(b);
        }
    }
    ensure!(
        answered.is_superset(names),
        "answers from {answered:?}, pods {names:?}"
    );
    Ok(())
}

/// The requests sent to the address during a rollout restart, and those
/// that failed.
struct Probed {
    probes: usize,
    failures: Vec<String>,
}

/// `kubectl rollout restart` of the Deployment, with HTTP to `ip` between
/// checks of the rollout's status until it finishes (within [`WAIT`]).
fn restart_while_probing(ctx: &Ctx, ip: IpAddr) -> Result<Probed> {
    kc(ctx, &["rollout", "restart", "deployment", "web"])?;
    let mut failures = Vec::new();
    let mut probes = 0;
    let deadline = Instant::now() + WAIT;
    let done = loop {
        probes += 1;
        if let Err(e) = http_get(ctx, ip, 80, "/") {
            failures.push(format!("{e:#}"));
        }
        let status = kc(
            ctx,
            &["rollout", "status", "deployment/web", "--watch=false"],
        )?;
        if status.contains("successfully rolled out") {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
    };
    ensure!(done, "the rollout restart did not finish within {WAIT:?}");
    Ok(Probed { probes, failures })
}
