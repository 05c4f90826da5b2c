//! Backends for the suites: agnhost netexec Pods pinned to chosen nodes
//! (the lab's node agent runs them as echo servers answering with the
//! node name; kind runs the real image), plus waiting for their
//! EndpointSlices.

use crate::Ctx;
use anyhow::{Context, Result, bail};
use devenv::wait::eventually;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use std::time::Duration;

pub use devenv::lab::backend::NETEXEC_IMAGE;

/// Creates one netexec Pod named `<app>-<node>` per node, labelled
/// `app=<app>`, serving HTTP on `http_port` and UDP on `udp_port` (container
/// ports named `http` and `udp`, for named targetPorts).
pub fn create(ctx: &Ctx, app: &str, nodes: &[&str], http_port: u16, udp_port: u16) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(ctx.client()?, ctx.namespace());
    for node in nodes {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": format!("{app}-{node}"), "labels": { "app": app } },
            "spec": {
                "nodeName": node,
                "containers": [{
                    "name": "netexec",
                    "image": NETEXEC_IMAGE,
                    "args": ["netexec", format!("--http-port={http_port}"), format!("--udp-port={udp_port}")],
                    "ports": [
                        { "name": "http", "containerPort": http_port, "protocol": "TCP" },
                        { "name": "udp", "containerPort": udp_port, "protocol": "UDP" },
                    ],
                }],
            },
        }))?;
        ctx.block_on(pods.create(&PostParams::default(), &pod))
            .with_context(|| format!("creating backend on {node}"))?;
    }
    Ok(())
}

/// Deletes the backends [`create`] made for `app` on `nodes`.
pub fn delete(ctx: &Ctx, app: &str, nodes: &[String]) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(ctx.client()?, ctx.namespace());
    for node in nodes {
        ctx.block_on(pods.delete(&format!("{app}-{node}"), &DeleteParams::default()))
            .with_context(|| format!("deleting the backend on {node}"))?;
    }
    Ok(())
}

/// Waits until the Service `service`'s slices list ready endpoints on
/// exactly `nodes`; returns those node names.
pub fn wait_for_endpoints(
    ctx: &Ctx,
    service: &str,
    nodes: &[&str],
    timeout: Duration,
) -> Result<Vec<String>> {
    let slices: Api<EndpointSlice> = Api::namespaced(ctx.client()?, ctx.namespace());
    let mut want: Vec<String> = nodes.iter().map(|n| (*n).to_owned()).collect();
    want.sort();
    eventually(
        timeout,
        &format!("ready endpoints of {service} on {want:?}"),
        || {
            let list = ctx.block_on(slices.list(
                &ListParams::default().labels(&format!("kubernetes.io/service-name={service}")),
            ))?;
            let mut ready: Vec<String> = list
                .items
                .iter()
                .flat_map(|s| s.endpoints.iter())
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false))
                .filter_map(|e| e.node_name.clone())
                .collect();
            ready.sort();
            ready.dedup();
            if ready != want {
                bail!("ready on {ready:?}");
            }
            Ok(Some(ready))
        },
    )
}
