//! The lab's node agent: the part of kubelet and kube-proxy that
//! metallb-rs and the e2e suites can observe.
//!
//! Like kubelet it registers the node's `Node` object, heartbeats its
//! `Ready` condition (a merge patch on `nodes/status` that rewrites the
//! whole condition list) and renews the node's `Lease` in
//! `kube-node-lease`. It also removes the `node.kubernetes.io/unreachable`
//! taint that [`super::nodelifecycle`] adds while heartbeats stop.
//!
//! Like kube-proxy in IPVS mode it puts LoadBalancer VIPs on the node's
//! `lo` ([`desired_vips`] decides which), so traffic for a VIP that the
//! speaker attracts to the node is accepted there; like kube-proxy in
//! nftables mode it then sends that traffic (and ClusterIP and NodePort
//! traffic) to the Service's endpoints ([`super::proxy`]) and serves the
//! health check node ports ([`super::healthcheck`]).
//!
//! Deciding is in pure functions, module `node` ([`node_object`],
//! [`status_patch`], [`taint_removal_patch`], [`lease_object`]) and
//! module `vips` ([`desired_vips`], beside the [`Vips`] that carries it
//! out); [`run`] does the I/O and survives API server outages: it logs,
//! backs off and retries, and only returns when told to shut down.

mod node;
mod vips;

pub use node::{
    AgentConfig, CONTROL_PLANE_LABEL, DEFAULT_HEARTBEAT, NODE_LEASE_NAMESPACE, lease_object,
    node_object, status_patch, taint_removal_patch,
};
pub use vips::{IpCommand, SERVICE_NAME_LABEL, VipExecutor, Vips, desired_vips};

use crate::lab::{healthcheck, proxy};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

/// The interface holding a lab node's InternalIPs.
const NODE_DEVICE: &str = "eth0";

/// Runs the agent until `shutdown` completes. Manages VIPs through
/// [`IpCommand`] when [`AgentConfig::manage_vips`] is set, and the service
/// proxy through [`proxy::Nft`] when [`AgentConfig::manage_proxy`] is.
pub async fn run(client: Client, cfg: AgentConfig, shutdown: impl Future<Output = ()>) {
    let vips = cfg
        .manage_vips
        .then(|| Vips::new(Box::new(IpCommand::default())));
    let proxy = cfg.manage_proxy.then(|| Proxy {
        rules: proxy::Applier::new(Box::new(proxy::Nft::new(
            cfg.addresses.clone(),
            NODE_DEVICE,
        ))),
        health: healthcheck::Server::default(),
    });
    run_with(client, cfg, vips, proxy, shutdown).await;
}

/// The service proxy's two halves.
pub struct Proxy {
    /// The nftables table.
    pub rules: proxy::Applier,
    /// The health check node ports.
    pub health: healthcheck::Server,
}

/// Like [`run`], with VIPs managed by `vips` and the proxy by `proxy` (or
/// not at all). On shutdown the VIPs it added are removed and the proxy's
/// table deleted.
pub async fn run_with(
    client: Client,
    cfg: AgentConfig,
    mut vips: Option<Vips>,
    mut proxy: Option<Proxy>,
    shutdown: impl Future<Output = ()>,
) {
    let agent = Agent::new(client, cfg);
    let heartbeat = agent.cfg.heartbeat.max(Duration::from_millis(10));
    let max_backoff = heartbeat.max(Duration::from_secs(5));
    let tick_timeout = (heartbeat * 5).max(Duration::from_secs(10));
    let mut delay = Duration::ZERO;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            () = tokio::time::sleep(delay) => {}
        }
        let result = tokio::select! {
            () = &mut shutdown => break,
            r = tokio::time::timeout(tick_timeout, agent.tick(vips.as_mut(), proxy.as_mut())) => r,
        };
        delay = match result {
            Ok(Ok(())) => heartbeat,
            Ok(Err(e)) => {
                let next = (delay * 2).clamp(heartbeat, max_backoff);
                tracing::warn!(node = %agent.cfg.node, error = %e, retry_in = ?next, "heartbeat failed");
                next
            }
            Err(_) => {
                let next = (delay * 2).clamp(heartbeat, max_backoff);
                tracing::warn!(node = %agent.cfg.node, timeout = ?tick_timeout, retry_in = ?next, "heartbeat timed out");
                next
            }
        };
    }
    if let Some(vips) = vips.as_mut() {
        vips.reconcile(&BTreeSet::new());
    }
    if let Some(proxy) = proxy.as_mut() {
        proxy.rules.clear();
    }
    tracing::info!(node = %agent.cfg.node, "agent stopped");
}

struct Agent {
    cfg: AgentConfig,
    nodes: Api<Node>,
    leases: Api<Lease>,
    services: Api<Service>,
    slices: Api<EndpointSlice>,
}

impl Agent {
    fn new(client: Client, cfg: AgentConfig) -> Self {
        Self {
            cfg,
            nodes: Api::all(client.clone()),
            leases: Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE),
            services: Api::all(client.clone()),
            slices: Api::all(client),
        }
    }

    async fn tick(
        &self,
        vips: Option<&mut Vips>,
        proxy: Option<&mut Proxy>,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let name = &self.cfg.node;
        let current = match self.nodes.get_opt(name).await? {
            Some(node) => node,
            None => {
                tracing::info!(node = %name, "registering node");
                match self
                    .nodes
                    .create(&PostParams::default(), &node_object(&self.cfg, now))
                    .await
                {
                    Ok(node) => node,
                    Err(kube::Error::Api(s)) if s.code == 409 => self.nodes.get(name).await?,
                    Err(e) => return Err(e),
                }
            }
        };
        let pp = PatchParams::default();
        // The taint patch is conditional on the resourceVersion: take it
        // from the node as the status patch left it.
        let current = self
            .nodes
            .patch_status(
                name,
                &pp,
                &Patch::Merge(status_patch(&self.cfg, now, Some(&current))),
            )
            .await?;
        if let Some(patch) = taint_removal_patch(&current) {
            tracing::info!(node = %name, "removing the unreachable taint");
            self.nodes.patch(name, &pp, &Patch::Merge(patch)).await?;
        }
        self.renew_lease(now).await?;
        if vips.is_none() && proxy.is_none() {
            return Ok(());
        }
        let lp = ListParams::default();
        let services = self.services.list(&lp).await?.items;
        let slices = self.slices.list(&lp).await?.items;
        if let Some(vips) = vips {
            vips.reconcile(&desired_vips(name, &services, &slices));
        }
        if let Some(proxy) = proxy {
            proxy.rules.reconcile(&proxy::ruleset(
                name,
                &self.cfg.addresses,
                &services,
                &slices,
            ));
            proxy
                .health
                .update(healthcheck::health_checks(name, &services, &slices))
                .await;
        }
        Ok(())
    }

    async fn renew_lease(&self, now: Timestamp) -> Result<(), kube::Error> {
        let lease = lease_object(&self.cfg, now);
        let name = &self.cfg.node;
        if self.leases.get_opt(name).await?.is_none() {
            match self.leases.create(&PostParams::default(), &lease).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        self.leases
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": lease.spec })),
            )
            .await?;
        Ok(())
    }
}
