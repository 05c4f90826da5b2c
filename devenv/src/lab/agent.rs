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
//! Deciding is in pure functions ([`node_object`], [`status_patch`],
//! [`taint_removal_patch`], [`desired_vips`]); [`run`] does the I/O and
//! survives API server outages: it logs, backs off and retries, and only
//! returns when told to shut down.

use crate::lab::nodelifecycle::UNREACHABLE_TAINT;
use crate::lab::{healthcheck, proxy};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Service,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

/// How often the agent heartbeats unless told otherwise (kubelet's
/// default is 10 s; the lab wants node failures noticed in seconds).
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(2);

/// The namespace holding one Lease per node.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The label EndpointSlices carry to name their Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The label marking control-plane nodes.
pub const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// Seconds a node Lease is valid for after each renewal (kubelet's value).
const LEASE_DURATION_SECONDS: i32 = 40;

/// What one node's agent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// The node name (also the Lease name and the hostname label).
    pub node: String,
    /// The node's addresses, published as `InternalIP`.
    pub addresses: Vec<IpAddr>,
    /// Extra labels, set on registration (they win over the defaults).
    pub labels: BTreeMap<String, String>,
    /// Time between heartbeats.
    pub heartbeat: Duration,
    /// Whether the node is the control plane (adds the role label).
    pub control_plane: bool,
    /// Whether to put LoadBalancer VIPs on `lo` (needs root in the node's
    /// network namespace).
    pub manage_vips: bool,
    /// Whether to run the service proxy: the nftables table and the health
    /// check node ports (needs root in the node's network namespace).
    pub manage_proxy: bool,
}

impl AgentConfig {
    /// A worker named `node` with no addresses, heartbeating every
    /// [`DEFAULT_HEARTBEAT`], not managing VIPs.
    pub fn new(node: impl Into<String>) -> Self {
        Self {
            node: node.into(),
            addresses: Vec::new(),
            labels: BTreeMap::new(),
            heartbeat: DEFAULT_HEARTBEAT,
            control_plane: false,
            manage_vips: false,
            manage_proxy: false,
        }
    }

    /// The labels the Node is registered with: kind's defaults, then
    /// [`AgentConfig::labels`].
    pub fn node_labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_owned(), self.node.clone()),
            ("kubernetes.io/os".to_owned(), "linux".to_owned()),
            ("kubernetes.io/arch".to_owned(), "amd64".to_owned()),
            ("beta.kubernetes.io/os".to_owned(), "linux".to_owned()),
            ("beta.kubernetes.io/arch".to_owned(), "amd64".to_owned()),
        ]);
        if self.control_plane {
            labels.insert(CONTROL_PLANE_LABEL.to_owned(), String::new());
        }
        labels.extend(self.labels.clone());
        labels
    }
}

/// The Node object the agent registers, with its status filled in.
pub fn node_object(cfg: &AgentConfig, now: Timestamp) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(cfg.node.clone()),
            labels: Some(cfg.node_labels()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(node_status(cfg, now, None)),
    }
}

/// The merge patch for `nodes/<node>/status` at `now`. It carries every
/// condition whole (a merge patch replaces lists), so it also undoes
/// [`super::nodelifecycle`]'s `Ready=Unknown`. Transition times are kept
/// from `current` where a condition's status does not change.
pub fn status_patch(cfg: &AgentConfig, now: Timestamp, current: Option<&Node>) -> Value {
    let status = node_status(cfg, now, current);
    json!({
        "status": {
            "conditions": status.conditions,
            "addresses": status.addresses,
            "nodeInfo": status.node_info,
        }
    })
}

/// The merge patch that removes the unreachable taint from `node`, or
/// `None` when it has none. It carries the node's resourceVersion, so a
/// concurrent taint change makes it fail (409) instead of being lost.
pub fn taint_removal_patch(node: &Node) -> Option<Value> {
    let taints = node.spec.as_ref()?.taints.as_ref()?;
    if !taints.iter().any(|t| t.key == UNREACHABLE_TAINT) {
        return None;
    }
    let kept: Vec<_> = taints
        .iter()
        .filter(|t| t.key != UNREACHABLE_TAINT)
        .collect();
    Some(json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": { "taints": kept },
    }))
}

/// The node's Lease as renewed at `now`.
pub fn lease_object(cfg: &AgentConfig, now: Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(cfg.node.clone()),
            namespace: Some(NODE_LEASE_NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(cfg.node.clone()),
            lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
            renew_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
    }
}

/// The node conditions kubelet (this agent) owns.
const KUBELET_CONDITIONS: &[&str] = &["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];

fn node_status(cfg: &AgentConfig, now: Timestamp, current: Option<&Node>) -> NodeStatus {
    let previous = |type_: &str| {
        current
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
    };
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        let since = previous(type_)
            .filter(|c| c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or(Time(now));
        NodeCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            last_heartbeat_time: Some(Time(now)),
            last_transition_time: Some(since),
        }
    };
    let mut addresses: Vec<NodeAddress> = cfg
        .addresses
        .iter()
        .map(|a| NodeAddress {
            type_: "InternalIP".to_owned(),
            address: a.to_string(),
        })
        .collect();
    addresses.push(NodeAddress {
        type_: "Hostname".to_owned(),
        address: cfg.node.clone(),
    });
    // Conditions other components own (NetworkUnavailable: the network
    // plugin; tests set it) are kept, as kubelet's patch keeps them.
    let foreign = current
        .and_then(|n| n.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .cloned();
    let mut conditions = vec![
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        condition(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        ),
    ];
    conditions.extend(foreign);
    NodeStatus {
        conditions: Some(conditions),
        addresses: Some(addresses),
        node_info: Some(NodeSystemInfo {
            architecture: "amd64".to_owned(),
            operating_system: "linux".to_owned(),
            os_image: "metallb-rs lab".to_owned(),
            kubelet_version: "v1.35.0-lab".to_owned(),
            kube_proxy_version: "v1.35.0-lab".to_owned(),
            container_runtime_version: "lab://0".to_owned(),
            kernel_version: String::new(),
            machine_id: cfg.node.clone(),
            system_uuid: cfg.node.clone(),
            boot_id: cfg.node.clone(),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    }
}

/// The LoadBalancer VIPs that belong on `node`'s `lo`: every ingress IP of
/// every LoadBalancer Service whose traffic the node may serve. With
/// `externalTrafficPolicy: Local` that takes an EndpointSlice of the
/// Service (by the `kubernetes.io/service-name` label) with a ready
/// endpoint on `node` (an unset `ready` counts as ready, as the API says);
/// otherwise every node serves it.
pub fn desired_vips(
    node: &str,
    services: &[Service],
    slices: &[EndpointSlice],
) -> BTreeSet<IpAddr> {
    let mut vips = BTreeSet::new();
    for svc in services {
        let Some(spec) = &svc.spec else { continue };
        if spec.type_.as_deref() != Some("LoadBalancer") {
            continue;
        }
        let local = spec.external_traffic_policy.as_deref() == Some("Local");
        if local && !has_local_endpoint(node, svc, slices) {
            continue;
        }
        let ingress = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref());
        for ing in ingress.into_iter().flatten() {
            if let Some(ip) = ing.ip.as_deref().and_then(|ip| ip.parse().ok()) {
                vips.insert(ip);
            }
        }
    }
    vips
}

fn has_local_endpoint(node: &str, svc: &Service, slices: &[EndpointSlice]) -> bool {
    slices
        .iter()
        .filter(|s| s.metadata.namespace == svc.metadata.namespace)
        .filter(|s| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                == svc.metadata.name.as_ref()
        })
        .flat_map(|s| &s.endpoints)
        .any(|e| {
            e.node_name.as_deref() == Some(node)
                && e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
        })
}

/// Puts VIPs on and takes them off the node. Injectable so tests need no
/// root.
pub trait VipExecutor: Send {
    /// Adds `ip` (idempotent: an address already there is success).
    fn add(&mut self, ip: IpAddr) -> anyhow::Result<()>;
    /// Removes `ip`.
    fn remove(&mut self, ip: IpAddr) -> anyhow::Result<()>;
}

/// [`VipExecutor`] running `ip addr add|del IP/32 dev DEVICE` (`/128` and
/// `nodad` for IPv6) in the agent's network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpCommand {
    /// The device holding the VIPs.
    pub device: String,
}

impl Default for IpCommand {
    fn default() -> Self {
        Self {
            device: "lo".to_owned(),
        }
    }
}

impl IpCommand {
    /// The `ip` arguments that add (or delete) `ip`.
    pub fn args(&self, verb: &str, ip: IpAddr) -> Vec<String> {
        let prefix = if ip.is_ipv4() { 32 } else { 128 };
        let mut args = vec![
            "addr".to_owned(),
            verb.to_owned(),
            format!("{ip}/{prefix}"),
            "dev".to_owned(),
            self.device.clone(),
        ];
        if ip.is_ipv6() && verb == "add" {
            args.push("nodad".to_owned());
        }
        args
    }

    fn ip(&self, verb: &str, ip: IpAddr) -> anyhow::Result<std::process::Output> {
        let out = duct::cmd("ip", self.args(verb, ip))
            .stderr_capture()
            .stdout_null()
            .unchecked()
            .run()?;
        Ok(out)
    }
}

impl VipExecutor for IpCommand {
    fn add(&mut self, ip: IpAddr) -> anyhow::Result<()> {
        let out = self.ip("add", ip)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || stderr.contains("File exists") {
            Ok(())
        } else {
            anyhow::bail!("ip addr add {ip} dev {}: {}", self.device, stderr.trim())
        }
    }

    fn remove(&mut self, ip: IpAddr) -> anyhow::Result<()> {
        let out = self.ip("del", ip)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Already gone (someone else removed it) is what we wanted.
        if out.status.success() || stderr.contains("Cannot assign requested address") {
            Ok(())
        } else {
            anyhow::bail!("ip addr del {ip} dev {}: {}", self.device, stderr.trim())
        }
    }
}

/// Keeps the node's VIPs equal to a desired set, touching only the VIPs it
/// added itself.
pub struct Vips {
    exec: Box<dyn VipExecutor>,
    ours: BTreeSet<IpAddr>,
}

impl Vips {
    /// Manages VIPs through `exec`, starting with none.
    pub fn new(exec: Box<dyn VipExecutor>) -> Self {
        Self {
            exec,
            ours: BTreeSet::new(),
        }
    }

    /// The VIPs added and not yet removed.
    pub fn ours(&self) -> &BTreeSet<IpAddr> {
        &self.ours
    }

    /// Adds what `desired` has and we lack, removes what we added and
    /// `desired` lacks. Failures are logged and retried next time.
    pub fn reconcile(&mut self, desired: &BTreeSet<IpAddr>) {
        for ip in desired.difference(&self.ours.clone()) {
            match self.exec.add(*ip) {
                Ok(()) => {
                    tracing::info!(%ip, "VIP added");
                    self.ours.insert(*ip);
                }
                Err(e) => tracing::warn!(%ip, error = %e, "adding VIP failed"),
            }
        }
        for ip in self.ours.clone().difference(desired) {
            match self.exec.remove(*ip) {
                Ok(()) => {
                    tracing::info!(%ip, "VIP removed");
                    self.ours.remove(ip);
                }
                Err(e) => tracing::warn!(%ip, error = %e, "removing VIP failed"),
            }
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Taint;
    use rstest::rstest;
    use std::sync::{Arc, Mutex};

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn cfg() -> AgentConfig {
        AgentConfig {
            addresses: vec![
                "10.0.0.2".parse().expect("ip"),
                "fd00::2".parse().expect("ip"),
            ],
            ..AgentConfig::new("lab-worker")
        }
    }

    fn condition<'a>(node: &'a Node, type_: &str) -> &'a NodeCondition {
        node.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
            .expect("condition")
    }

    #[test]
    fn node_object_is_kind_shaped() {
        let now = ts("2026-01-01T00:00:00Z");
        let node = node_object(&cfg(), now);
        let labels = node.metadata.labels.clone().expect("labels");
        assert_eq!(labels["kubernetes.io/hostname"], "lab-worker");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(labels["kubernetes.io/arch"], "amd64");
        assert!(!labels.contains_key(CONTROL_PLANE_LABEL));
        let status = node.status.clone().expect("status");
        let addrs: Vec<_> = status
            .addresses
            .expect("addresses")
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        assert_eq!(
            addrs,
            [
                ("InternalIP".to_owned(), "10.0.0.2".to_owned()),
                ("InternalIP".to_owned(), "fd00::2".to_owned()),
                ("Hostname".to_owned(), "lab-worker".to_owned()),
            ]
        );
        let ready = condition(&node, "Ready");
        assert_eq!(ready.status, "True");
        assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
        assert_eq!(ready.last_heartbeat_time, Some(Time(now)));
        for pressure in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
            assert_eq!(condition(&node, pressure).status, "False");
        }
    }

    #[test]
    fn control_plane_and_extra_labels() {
        let mut cfg = cfg();
        cfg.control_plane = true;
        cfg.labels.insert("kubernetes.io/os".into(), "plan9".into());
        cfg.labels.insert("zone".into(), "a".into());
        let labels = cfg.node_labels();
        assert_eq!(labels[CONTROL_PLANE_LABEL], "");
        assert_eq!(labels["kubernetes.io/os"], "plan9");
        assert_eq!(labels["zone"], "a");
    }

    #[test]
    fn status_patch_rewrites_ready_and_keeps_unchanged_transitions() {
        let then = ts("2026-01-01T00:00:00Z");
        let now = ts("2026-01-01T00:01:00Z");
        let mut node = node_object(&cfg(), then);
        // The lifecycle check marked Ready Unknown; pressure stays False.
        for c in node
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .expect("conditions")
        {
            if c.type_ == "Ready" {
                c.status = "Unknown".into();
                c.reason = Some("NodeStatusUnknown".into());
            }
        }
        let patch = status_patch(&cfg(), now, Some(&node));
        let mut patched = node.clone();
        patched.status = Some(serde_json::from_value(patch["status"].clone()).expect("status"));
        let ready = condition(&patched, "Ready");
        assert_eq!(ready.status, "True");
        assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
        assert_eq!(ready.last_heartbeat_time, Some(Time(now)));
        assert_eq!(ready.last_transition_time, Some(Time(now)));
        let memory = condition(&patched, "MemoryPressure");
        assert_eq!(memory.last_heartbeat_time, Some(Time(now)));
        assert_eq!(memory.last_transition_time, Some(Time(then)));
        assert_eq!(
            patch["status"]["conditions"].as_array().map(Vec::len),
            Some(4)
        );
    }

    #[test]
    fn heartbeat_keeps_conditions_owned_by_others() {
        let now = ts("2026-01-01T00:01:00Z");
        let mut node = node_object(&cfg(), now);
        node.status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .expect("conditions")
            .push(NodeCondition {
                type_: "NetworkUnavailable".into(),
                status: "True".into(),
                ..NodeCondition::default()
            });
        let patch = status_patch(&cfg(), now, Some(&node));
        let mut patched = node.clone();
        patched.status = Some(serde_json::from_value(patch["status"].clone()).expect("status"));
        assert_eq!(condition(&patched, "NetworkUnavailable").status, "True");
        assert_eq!(condition(&patched, "Ready").status, "True");
    }

    #[test]
    fn taint_removal_keeps_other_taints() {
        let mut node = node_object(&cfg(), ts("2026-01-01T00:00:00Z"));
        assert_eq!(taint_removal_patch(&node), None);
        node.metadata.resource_version = Some("7".into());
        let taint = |key: &str| Taint {
            key: key.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        node.spec = Some(NodeSpec {
            taints: Some(vec![taint("other"), taint(UNREACHABLE_TAINT)]),
            ..NodeSpec::default()
        });
        let patch = taint_removal_patch(&node).expect("patch");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(
            patch["spec"]["taints"],
            json!([{ "key": "other", "effect": "NoSchedule" }])
        );
    }

    #[test]
    fn lease_names_the_node() {
        let lease = lease_object(&cfg(), ts("2026-01-01T00:00:00Z"));
        assert_eq!(lease.metadata.name.as_deref(), Some("lab-worker"));
        assert_eq!(
            lease.metadata.namespace.as_deref(),
            Some(NODE_LEASE_NAMESPACE)
        );
        let spec = lease.spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("lab-worker"));
        assert!(spec.renew_time.is_some());
    }

    fn svc(name: &str, type_: &str, policy: &str, ips: &[&str]) -> Service {
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "default" },
            "spec": { "type": type_, "externalTrafficPolicy": policy },
            "status": { "loadBalancer": { "ingress":
                ips.iter().map(|ip| json!({ "ip": ip })).collect::<Vec<_>>() } },
        }))
        .expect("service")
    }

    fn slice(service: &str, endpoints: Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": { "name": format!("{service}-x"), "namespace": "default",
                          "labels": { SERVICE_NAME_LABEL: service } },
            "addressType": "IPv4",
            "endpoints": endpoints,
        }))
        .expect("slice")
    }

    fn ips(list: &[&str]) -> BTreeSet<IpAddr> {
        list.iter().map(|ip| ip.parse().expect("ip")).collect()
    }

    #[rstest]
    #[case::cluster_everywhere(
        vec![svc("a", "LoadBalancer", "Cluster", &["192.0.2.1", "2001:db8::1"])], vec![],
        &["192.0.2.1", "2001:db8::1"])]
    #[case::not_load_balancer(vec![svc("a", "ClusterIP", "Cluster", &["192.0.2.1"])], vec![], &[])]
    #[case::no_ingress_yet(vec![svc("a", "LoadBalancer", "Cluster", &[])], vec![], &[])]
    #[case::local_without_endpoints(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"])], vec![], &[])]
    #[case::local_endpoint_here(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"])],
        vec![slice("a", json!([{ "addresses": ["10.1.0.1"], "nodeName": "n1",
                                 "conditions": { "ready": true } }]))],
        &["192.0.2.1"])]
    #[case::local_ready_unset_counts(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"])],
        vec![slice("a", json!([{ "addresses": ["10.1.0.1"], "nodeName": "n1" }]))],
        &["192.0.2.1"])]
    #[case::local_endpoint_not_ready(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"])],
        vec![slice("a", json!([{ "addresses": ["10.1.0.1"], "nodeName": "n1",
                                 "conditions": { "ready": false } }]))],
        &[])]
    #[case::local_endpoint_elsewhere(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"])],
        vec![slice("a", json!([{ "addresses": ["10.1.0.1"], "nodeName": "n2" }]))],
        &[])]
    #[case::local_other_services_slice(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"]),
             svc("b", "LoadBalancer", "Local", &["192.0.2.2"])],
        vec![slice("b", json!([{ "addresses": ["10.1.0.1"], "nodeName": "n1" }]))],
        &["192.0.2.2"])]
    #[case::garbage_ip_ignored(
        vec![svc("a", "LoadBalancer", "Cluster", &["not-an-ip", "192.0.2.3"])], vec![],
        &["192.0.2.3"])]
    fn desired_vips_cases(
        #[case] services: Vec<Service>,
        #[case] slices: Vec<EndpointSlice>,
        #[case] expected: &[&str],
    ) {
        assert_eq!(desired_vips("n1", &services, &slices), ips(expected));
    }

    #[rstest]
    #[case("192.0.2.1", "add", &["addr", "add", "192.0.2.1/32", "dev", "lo"])]
    #[case("2001:db8::1", "add", &["addr", "add", "2001:db8::1/128", "dev", "lo", "nodad"])]
    #[case("2001:db8::1", "del", &["addr", "del", "2001:db8::1/128", "dev", "lo"])]
    fn ip_command_args(#[case] ip: &str, #[case] verb: &str, #[case] expected: &[&str]) {
        let args = IpCommand::default().args(verb, ip.parse().expect("ip"));
        assert_eq!(args, expected);
    }

    #[derive(Clone, Default)]
    struct Recorder {
        calls: Arc<Mutex<Vec<String>>>,
        fail: Option<IpAddr>,
    }

    impl VipExecutor for Recorder {
        fn add(&mut self, ip: IpAddr) -> anyhow::Result<()> {
            self.calls.lock().expect("lock").push(format!("add {ip}"));
            if Some(ip) == self.fail {
                anyhow::bail!("no");
            }
            Ok(())
        }
        fn remove(&mut self, ip: IpAddr) -> anyhow::Result<()> {
            self.calls.lock().expect("lock").push(format!("del {ip}"));
            Ok(())
        }
    }

    #[test]
    fn vips_touch_only_their_own_addresses() {
        let rec = Recorder {
            fail: Some("192.0.2.9".parse().expect("ip")),
            ..Recorder::default()
        };
        let calls = rec.calls.clone();
        let mut vips = Vips::new(Box::new(rec));
        vips.reconcile(&ips(&["192.0.2.1", "192.0.2.9"]));
        assert_eq!(vips.ours(), &ips(&["192.0.2.1"]));
        vips.reconcile(&ips(&["192.0.2.2"]));
        assert_eq!(vips.ours(), &ips(&["192.0.2.2"]));
        vips.reconcile(&ips(&["192.0.2.2"]));
        assert_eq!(
            *calls.lock().expect("lock"),
            [
                "add 192.0.2.1",
                "add 192.0.2.9",
                "add 192.0.2.2",
                "del 192.0.2.1"
            ]
        );
    }
}
