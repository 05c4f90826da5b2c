//! `Workloads`: what users run beside a Deployment, typed as a user types
//! it: a readinessProbe the lab backend answers (the Pod Ready, its
//! endpoint ready) and one nothing answers (the Pod and endpoint not
//! ready, an `Unhealthy` event), `kubectl logs` and `kubectl describe
//! pod` of a played Pod, a StatefulSet through `rollout status`, `scale`
//! and `delete`, and a Job through `kubectl wait --for=condition=complete`.

use super::devenv::kubectl;
use crate::{Ctx, Spec};
use anyhow::{Result, ensure};
use devenv::wait::eventually;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(90);

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![Spec::new(
        "Workloads",
        "should follow readinessProbes, show logs and events, and run StatefulSets and Jobs",
        &["IPV4"],
        probes_logs_statefulsets_jobs,
    )]
}

/// `kubectl` in the spec's namespace, each request bounded.
fn kc(ctx: &Ctx, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let mut all = vec!["--request-timeout=30s", "-n", ctx.namespace()];
    all.extend_from_slice(args);
    kubectl(ctx, &all, stdin)
}

/// A Deployment of one nginx Pod serving `port`, labelled `app=<name>`,
/// with `probe` as its readinessProbe.
fn deployment(name: &str, port: u16, probe: serde_json::Value) -> String {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": name },
        "spec": { "replicas": 1, "selector": { "matchLabels": { "app": name } },
                  "template": { "metadata": { "labels": { "app": name } },
                                "spec": { "containers": [{ "name": "nginx", "image": "nginx",
                                    "ports": [{ "name": "http", "containerPort": port }],
                                    "readinessProbe": probe }] } } },
    })
    .to_string()
}

/// A ClusterIP Service for `app=<name>` on `port`.
fn service(name: &str, port: u16) -> String {
    json!({
        "apiVersion": "v1", "kind": "Service", "metadata": { "name": name },
        "spec": { "selector": { "app": name }, "ports": [{ "port": port }] },
    })
    .to_string()
}

/// The Pods labelled `app=<app>`.
fn pods(ctx: &Ctx, app: &str) -> Result<Vec<Pod>> {
    let api: Api<Pod> = Api::namespaced(ctx.client()?, ctx.namespace());
    let lp = ListParams::default().labels(&format!("app={app}"));
    let list = ctx
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), api.list(&lp)).await })??;
    Ok(list.items)
}

fn pod_ready(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// The `ready` of every endpoint of Service `name`'s slices.
fn endpoints_ready(ctx: &Ctx, name: &str) -> Result<Vec<Option<bool>>> {
    let api: Api<EndpointSlice> = Api::namespaced(ctx.client()?, ctx.namespace());
    let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
    let list = ctx
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), api.list(&lp)).await })??;
    Ok(list
        .items
        .iter()
        .flat_map(|s| &s.endpoints)
        .map(|e| e.conditions.as_ref().and_then(|c| c.ready))
        .collect())
}

/// The one Pod of `app` once its Ready condition is `ready`, and its
/// Service's endpoint agrees.
fn settled(ctx: &Ctx, app: &str, ready: bool) -> Result<String> {
    let want = if ready { "True" } else { "False" };
    eventually(
        WAIT,
        &format!("{app}: pod Ready={want}, endpoint too"),
        || {
            let list = pods(ctx, app)?;
            let [p] = list.as_slice() else {
                return Ok(None);
            };
            let endpoints = endpoints_ready(ctx, app)?;
            Ok(
                (pod_ready(p).as_deref() == Some(want) && endpoints == [Some(ready)])
                    .then(|| p.metadata.name.clone().unwrap_or_default()),
            )
        },
    )
}

fn probes_logs_statefulsets_jobs(ctx: &Ctx) -> Result<()> {
    let (probed, unready) = probed_deployments(ctx)?;
    expect_logs_and_events(ctx, &probed, &unready)?;
    statefulset(ctx)?;
    job(ctx)
}

/// Two Deployments with a Service each: one whose readinessProbe the lab
/// backend answers, one whose probe nothing answers; once their Pods and
/// endpoints are ready and not ready, the two Pods' names.
fn probed_deployments(ctx: &Ctx) -> Result<(String, String)> {
    // Ports no other spec's pods serve: pods share their node's ports.
    let ready_probe = json!({ "httpGet": { "path": "/", "port": "http" }, "periodSeconds": 1 });
    kc(
        ctx,
        &["apply", "-f", "-"],
        Some(&deployment("probed", 8091, ready_probe)),
    )?;
    kc(ctx, &["apply", "-f", "-"], Some(&service("probed", 8091)))?;
    // Nothing listens on 8093: the probe never passes.
    let dead_probe = json!({ "tcpSocket": { "port": 8093 }, "periodSeconds": 1 });
    kc(
        ctx,
        &["apply", "-f", "-"],
        Some(&deployment("unready", 8092, dead_probe)),
    )?;
    kc(ctx, &["apply", "-f", "-"], Some(&service("unready", 8092)))?;
    let probed = settled(ctx, "probed", true)?;
    let unready = settled(ctx, "unready", false)?;
    let out = kc(
        ctx,
        &["rollout", "status", "deployment/probed", "--timeout=60s"],
        None,
    )?;
    ensure!(out.contains("successfully rolled out"), "{out}");
    Ok((probed, unready))
}

/// `kubectl logs` of the probed Pod shows what plays it and the probe's
/// requests, `kubectl describe pod` the lab's event, and the unready
/// Pod's description an `Unhealthy` event.
fn expect_logs_and_events(ctx: &Ctx, probed: &str, unready: &str) -> Result<()> {
    // The probe's own requests are in the log, after what plays the pod.
    let log = eventually(WAIT, "kube-probe requests in the log", || {
        let log = kc(ctx, &["logs", probed], None)?;
        Ok(log.contains("\"GET / HTTP/1.1\" 200").then_some(log))
    })?;
    ensure!(
        log.lines()
            .next()
            .unwrap_or_default()
            .contains("played by the lab backend")
            && log.contains("kube-probe/"),
        "kubectl logs {probed}: {log}"
    );
    let described = kc(ctx, &["describe", "pod", probed], None)?;
    ensure!(
        described.contains("PlayedByLabBackend"),
        "kubectl describe pod {probed}: {described}"
    );
    let described = eventually(WAIT, "an Unhealthy event", || {
        let d = kc(ctx, &["describe", "pod", unready], None)?;
        Ok(d.contains("Readiness probe failed").then_some(d))
    })?;
    ensure!(described.contains("Unhealthy"), "{described}");
    Ok(())
}

/// A StatefulSet: ordered names, rollout status, scale, delete.
fn statefulset(ctx: &Ctx) -> Result<()> {
    let sts = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": { "name": "db" },
        "spec": { "replicas": 3, "serviceName": "db", "selector": { "matchLabels": { "app": "db" } },
                  "template": { "metadata": { "labels": { "app": "db" } },
                                "spec": { "containers": [{ "name": "db", "image": "redis",
                                    "ports": [{ "containerPort": 8094 }] }] } } },
    });
    kc(ctx, &["apply", "-f", "-"], Some(&sts.to_string()))?;
    let out = kc(ctx, &["rollout", "status", "sts/db", "--timeout=60s"], None)?;
    ensure!(out.contains("3 new pods have been updated"), "{out}");
    let names = |ctx: &Ctx| -> Result<Vec<String>> {
        let mut n: Vec<String> = pods(ctx, "db")?
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect();
        n.sort();
        Ok(n)
    };
    ensure!(names(ctx)? == ["db-0", "db-1", "db-2"], "{:?}", names(ctx)?);
    let out = kc(ctx, &["get", "sts", "db"], None)?;
    ensure!(
        out.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("db ") && l.contains("3/3")),
        "{out}"
    );
    kc(ctx, &["scale", "sts", "db", "--replicas=1"], None)?;
    eventually(WAIT, "db scaled down to db-0", || {
        Ok((names(ctx)? == ["db-0"]).then_some(()))
    })?;
    kc(ctx, &["delete", "sts", "db"], None)?;
    eventually(WAIT, "db's pods collected", || {
        Ok(names(ctx)?.is_empty().then_some(()))
    })?;
    Ok(())
}

/// A Job: its played container completes at once.
fn job(ctx: &Ctx) -> Result<()> {
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": { "name": "pi" },
        "spec": { "completions": 2, "template": { "metadata": { "labels": { "app": "pi" } },
                  "spec": { "restartPolicy": "Never", "containers": [{ "name": "pi", "image": "perl",
                      "command": ["perl", "-Mbignum=bpi", "-wle", "print bpi(20)"] }] } } },
    });
    kc(ctx, &["apply", "-f", "-"], Some(&job.to_string()))?;
    let out = kc(
        ctx,
        &[
            "wait",
            "--for=condition=complete",
            "job/pi",
            "--timeout=60s",
        ],
        None,
    )?;
    ensure!(out.contains("job.batch/pi condition met"), "{out}");
    let out = kc(ctx, &["get", "job", "pi"], None)?;
    ensure!(
        out.lines()
            .nth(1)
            .is_some_and(|l| l.contains("Complete") && l.contains("2/2")),
        "{out}"
    );
    let log = kc(ctx, &["logs", "job/pi"], None)?;
    ensure!(
        log.contains("completing at once with exit code 0"),
        "kubectl logs job/pi: {log}"
    );
    Ok(())
}
