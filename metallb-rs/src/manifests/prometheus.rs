//! `metallb-native-prometheus.yaml`: what a cluster running the
//! Prometheus operator applies beside the native manifests to scrape and
//! alert on MetalLB, as upstream's chart renders it with
//! `prometheus.podMonitor` and `prometheus.prometheusRule` on - a
//! ServiceAccount whose token the scrapes carry (the metrics answer only
//! a token the API server authenticates and authorizes), the ClusterRole
//! that may read `/metrics`, a PodMonitor per component, and the alerts.

use super::labels;
use crate::metrics::names;
use serde_json::{Value, json};

/// The ServiceAccount the PodMonitors scrape as, and its ClusterRole.
pub const READER: &str = "metallb-metrics-reader";
/// The Secret holding its token, which the PodMonitors name.
pub const TOKEN_SECRET: &str = "metallb-metrics-token";
/// The usage percentages that raise `MetalLBAddressPoolUsage<N>Percent`,
/// with the severity each alert carries (upstream's, which alert
/// routing keys on).
pub const USAGE_THRESHOLDS: [(u8, &str); 3] = [(75, "warning"), (85, "warning"), (95, "critical")];

/// Every object, in apply order.
pub fn objects(namespace: &str) -> Vec<Value> {
    let mut out = vec![
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": { "name": READER, "namespace": namespace, "labels": { "app": "metallb" } },
        }),
        // A long-lived token the operator reads (PodMonitors take a
        // Secret, not a projected token).
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                "name": TOKEN_SECRET, "namespace": namespace, "labels": { "app": "metallb" },
                "annotations": { "kubernetes.io/service-account.name": READER },
            },
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": { "name": READER, "labels": { "app": "metallb" } },
            "rules": [{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": { "name": READER, "labels": { "app": "metallb" } },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER },
            "subjects": [{ "kind": "ServiceAccount", "name": READER, "namespace": namespace }],
        }),
    ];
    out.extend(["controller", "speaker"].map(|c| pod_monitor(namespace, c)));
    out.push(rules(namespace));
    out
}

fn pod_monitor(namespace: &str, component: &str) -> Value {
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {
            "name": format!("metallb-{component}"), "namespace": namespace,
            "labels": labels(component),
        },
        "spec": {
            "selector": { "matchLabels": labels(component) },
            "namespaceSelector": { "matchNames": [namespace] },
            "podMetricsEndpoints": [{
                "port": super::ports::METRICS_NAME,
                "path": "/metrics",
                "scheme": "https",
                "honorLabels": true,
                "authorization": { "credentials": { "name": TOKEN_SECRET, "key": "token" } },
                // Self-signed for the pod's hostname unless
                // --metrics-cert-dir names a certificate.
                "tlsConfig": { "insecureSkipVerify": true },
            }],
        },
    })
}

/// Upstream's alerts, on this project's metric names.
fn rules(namespace: &str) -> Value {
    let who = "{{ $labels.job }} - MetalLB {{ $labels.container }} on {{ $labels.pod }}";
    let mut rules = vec![
        json!({
            "alert": "MetalLBStaleConfig",
            "expr": format!("{} == 1", names::CONFIG_STALE),
            "for": "1m",
            "labels": { "severity": "warning" },
            "annotations": {
                "summary": "Stale config on {{ $labels.pod }}",
                "description": format!("{who} has a stale config for > 1 minute"),
            },
        }),
        json!({
            "alert": "MetalLBConfigNotLoaded",
            "expr": format!("{} == 0", names::CONFIG_LOADED),
            "for": "1m",
            "labels": { "severity": "warning" },
            "annotations": {
                "summary": "Config on {{ $labels.pod }} has not been loaded",
                "description": format!("{who} has not loaded for > 1 minute"),
            },
        }),
        json!({
            "alert": "MetalLBAddressPoolExhausted",
            "expr": format!("{} >= {}", names::ADDRESSES_IN_USE, names::ADDRESSES_TOTAL),
            "for": "1m",
            "labels": { "severity": "critical" },
            "annotations": {
                "summary": "Exhausted address pool on {{ $labels.pod }}",
                "description": format!("{who} has exhausted address pool {{{{ $labels.pool }}}} for > 1 minute"),
            },
        }),
    ];
    rules.extend(USAGE_THRESHOLDS.map(|(percent, severity)| {
        json!({
            "alert": format!("MetalLBAddressPoolUsage{percent}Percent"),
            "expr": format!("( {} / {} ) * 100 > {percent}", names::ADDRESSES_IN_USE, names::ADDRESSES_TOTAL),
            "for": "1m",
            "labels": { "severity": severity },
            "annotations": {
                "summary": "Address pool usage on {{ $labels.pod }}",
                "description": format!("{who} has address pool {{{{ $labels.pool }}}} past {percent}% usage for > 1 minute"),
            },
        })
    }));
    rules.push(json!({
        "alert": "MetalLBBGPSessionDown",
        "expr": format!("{} == 0", names::BGP_SESSION_UP),
        "for": "1m",
        "labels": { "severity": "critical" },
        "annotations": {
            "summary": "BGP session down on {{ $labels.pod }}",
            "description": format!("{who} has BGP session {{{{ $labels.peer }}}} down for > 1 minute"),
        },
    }));
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": { "name": "metallb", "namespace": namespace, "labels": { "app": "metallb" } },
        "spec": { "groups": [{ "name": "metallb.rules", "rules": rules }] },
    })
}
