//! kube-scheduler's basic filters, one node and one Pod at a time: whether
//! the node is schedulable, matches the Pod's nodeSelector and required
//! node affinity, carries no taint the Pod does not tolerate (a node that
//! is not Ready counts as tainted not-ready) and has its host ports free;
//! and whether a Pod already on a node may stay. Pure: the scheduler's
//! `plan` and the DaemonSet controller both judge nodes with them.

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, Pod, Taint, Toleration};
use std::collections::{BTreeMap, BTreeSet};

/// The taint key a node that is not Ready is treated as carrying.
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// The taint key of cordoned nodes (`spec.unschedulable`).
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Why a node does not fit a Pod (kube-scheduler's per-node reasons).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Misfit {
    Unschedulable,
    Affinity,
    Taint(String),
    Ports,
}

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misfit::Unschedulable => f.write_str("node(s) were unschedulable"),
            Misfit::Affinity => f.write_str("node(s) didn't match Pod's node affinity/selector"),
            Misfit::Taint(t) => write!(f, "node(s) had untolerated taint {t}"),
            Misfit::Ports => {
                f.write_str("node(s) didn't have free ports for the requested pod ports")
            }
        }
    }
}

/// What is already on one node.
#[derive(Default, Clone)]
pub(super) struct Load {
    pub(super) pods: usize,
    pub(super) by_owner: BTreeMap<String, usize>,
    pub(super) ports: BTreeSet<(String, i32)>,
}

fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let effect = t.effect.as_deref().unwrap_or_default();
        let key = t.key.as_deref().unwrap_or_default();
        let exists = t.operator.as_deref() == Some("Exists");
        (effect.is_empty() || effect == taint.effect)
            && (key.is_empty() && exists || key == taint.key)
            && (exists
                || t.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default())
    })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => {
            matches!((value.and_then(number), values.first().and_then(|x| number(x))), (Some(v), Some(x)) if v > x)
        }
        "Lt" => {
            matches!((value.and_then(number), values.first().and_then(|x| number(x))), (Some(v), Some(x)) if v < x)
        }
        _ => false,
    }
}

/// nodeSelector and required node affinity (terms ORed, a term's
/// requirements ANDed; a term with none matches nothing).
fn affinity_matches(pod: &Pod, node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let name = node.metadata.name.as_deref();
    let spec = pod.spec.as_ref();
    let selector = spec.and_then(|s| s.node_selector.as_ref());
    if !selector
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let Some(required) = required else {
        return true;
    };
    required.node_selector_terms.iter().any(|term| {
        let exprs = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        (!exprs.is_empty() || !fields.is_empty())
            && exprs
                .iter()
                .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
            && fields
                .iter()
                .all(|r| r.key == "metadata.name" && requirement_matches(r, name))
    })
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether `node` fits `pod` on its own (every filter but free host
/// ports, which depend on the other Pods): what the DaemonSet controller
/// asks of each node.
pub fn fits(pod: &Pod, node: &Node) -> bool {
    misfit(pod, &BTreeSet::new(), node, &Load::default()).is_none()
}

/// Whether a Pod already on `node` may stay there: it still matches the
/// node's labels and tolerates its `NoExecute` taints (what keeps a
/// daemon Pod on a node that went NotReady).
pub fn may_stay(pod: &Pod, node: &Node) -> bool {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    affinity_matches(pod, node)
        && node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .all(|t| t.effect != "NoExecute" || tolerates(&tolerations, t))
}

/// The first reason `node` does not fit `pod`, or `None` when it fits.
pub(super) fn misfit(
    pod: &Pod,
    ports: &BTreeSet<(String, i32)>,
    node: &Node,
    load: &Load,
) -> Option<Misfit> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    let taint = |key: &str| Taint {
        key: key.to_owned(),
        effect: "NoSchedule".to_owned(),
        ..Taint::default()
    };
    let node_spec = node.spec.clone().unwrap_or_default();
    if node_spec.unschedulable == Some(true)
        && !tolerates(&tolerations, &taint(UNSCHEDULABLE_TAINT))
    {
        return Some(Misfit::Unschedulable);
    }
    if !affinity_matches(pod, node) {
        return Some(Misfit::Affinity);
    }
    // A node that is not Ready counts as tainted not-ready (the taint
    // kube-controller-manager adds), so Pods tolerating it still fit.
    let implicit = (!ready(node)).then(|| taint(NOT_READY_TAINT));
    let untolerated = node_spec
        .taints
        .iter()
        .flatten()
        .chain(implicit.as_ref())
        .find(|t| {
            matches!(t.effect.as_str(), "NoSchedule" | "NoExecute") && !tolerates(&tolerations, t)
        });
    if let Some(t) = untolerated {
        return Some(Misfit::Taint(format!(
            "{{{}: {}}}",
            t.key,
            t.value.as_deref().unwrap_or_default()
        )));
    }
    if !ports.is_disjoint(&load.ports) {
        return Some(Misfit::Ports);
    }
    None
}

/// The host ports `pod` declares, with their protocol.
pub(super) fn host_ports(pod: &Pod) -> BTreeSet<(String, i32)> {
    pod.spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|p| *p > 0)?;
            Some((p.protocol.clone().unwrap_or_else(|| "TCP".to_owned()), port))
        })
        .collect()
}
