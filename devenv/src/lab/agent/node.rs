//! The node as kubelet shows it: the agent's configuration, the Node it
//! registers, the status patch of each heartbeat (every condition whole,
//! keeping transition times and conditions others own), the removal of
//! the unreachable taint and the node's Lease. Pure: objects in, objects
//! and patches out; `agent::run` sends them.

use crate::lab::nodelifecycle::UNREACHABLE_TAINT;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

/// How often the agent heartbeats unless told otherwise (kubelet's
/// default is 10 s; the lab wants node failures noticed in seconds).
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(2);

/// The namespace holding one Lease per node.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

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
/// [`crate::lab::nodelifecycle`]'s `Ready=Unknown`. Transition times are kept
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Taint;

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
}
