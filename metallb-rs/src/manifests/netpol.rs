//! `metallb-native-networkpolicies.yaml`: the controller's traffic, for
//! clusters that default-deny. Ingress only to what it serves - the
//! webhooks (the API server calls them from an address no selector can
//! name), its HTTPS metrics (every scrape authenticated and authorized)
//! and its health port (the kubelet's probes) - and egress only to the
//! API server (the `kubernetes` Service's port 443 and the usual
//! endpoint ports behind it; the controller resolves no names). The
//! speakers run on the host network, where NetworkPolicies do not apply:
//! their gossip port is the node's to firewall.

use super::{labels, ports};
use crate::k8s::webhook;
use serde_json::{Value, json};

/// The name of the controller's NetworkPolicy.
pub const CONTROLLER: &str = "metallb-controller";

/// Ports the API server serves on, behind the `kubernetes` Service (443
/// before the Service's translation; 6443 most distributions' endpoint).
const API_SERVER_PORTS: [u16; 2] = [443, 6443];

/// The NetworkPolicies, in apply order.
pub fn objects(namespace: &str) -> Vec<Value> {
    let tcp = |port: Value| json!({ "protocol": "TCP", "port": port });
    let served = [
        json!(webhook::PORT),
        json!(ports::METRICS),
        json!(ports::HEALTH),
    ]
    .map(tcp);
    let api = API_SERVER_PORTS.map(|p| tcp(json!(p)));
    vec![json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": { "name": CONTROLLER, "namespace": namespace, "labels": labels("controller") },
        "spec": {
            "podSelector": { "matchLabels": labels("controller") },
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{ "ports": served }],
            "egress": [{ "ports": api }],
        },
    })]
}
