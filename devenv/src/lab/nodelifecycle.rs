//! The lab's node-lifecycle check: the part of kube-controller-manager's
//! node lifecycle controller that metallb-rs reacts to. A node whose
//! `Ready` heartbeat is older than a grace period gets `Ready=Unknown` and
//! the `node.kubernetes.io/unreachable:NoSchedule` taint; the node's agent
//! ([`super::agent`]) undoes both when its heartbeats resume.
//!
//! [`stale_nodes`] decides; [`run`] does the I/O.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use std::future::Future;
use std::time::Duration;

/// The grace period unless told otherwise (kube-controller-manager's
/// default is 40 s; the lab wants failures noticed in seconds).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// The taint key of nodes whose agent stopped heartbeating.
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// The reason set on `Ready=Unknown`.
pub const UNKNOWN_REASON: &str = "NodeStatusUnknown";

/// The message set on `Ready=Unknown` (kube-controller-manager's words).
pub const UNKNOWN_MESSAGE: &str = "Kubelet stopped posting node status.";

/// How often [`run`] looks.
const INTERVAL: Duration = Duration::from_secs(1);

/// The nodes whose `Ready` heartbeat is older than `grace` at `now`, each
/// with whether its `Ready` status is still `True`. A node without a
/// `Ready` condition or heartbeat counts as stale.
///
/// Heartbeat times are stored with second precision (truncated), so a
/// heartbeat counts as stale only when its stored time is more than
/// `grace` plus one second old: a live node is never marked by rounding.
pub fn stale_nodes(nodes: &[Node], now: Timestamp, grace: Duration) -> Vec<(String, bool)> {
    let limit = grace.saturating_add(Duration::from_secs(1));
    nodes
        .iter()
        .filter_map(|node| {
            let name = node.metadata.name.clone()?;
            let ready = ready_condition(node);
            let heartbeat = ready.and_then(|c| c.last_heartbeat_time.as_ref());
            let stale = match heartbeat {
                None => true,
                Some(Time(t)) => now
                    .duration_since(*t)
                    .try_into()
                    .map(|age: Duration| age > limit)
                    .unwrap_or(false),
            };
            let was_ready = ready.is_some_and(|c| c.status == "True");
            stale.then_some((name, was_ready))
        })
        .collect()
}

fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// The merge patch for `nodes/<node>/status` that marks every condition
/// `Unknown` (as kube-controller-manager does), keeping heartbeat times.
/// It carries the node's resourceVersion, so a heartbeat landing meanwhile
/// makes it fail (409) instead of being overwritten.
pub fn unknown_patch(node: &Node, now: Timestamp) -> Value {
    let conditions: Vec<NodeCondition> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            let transition = if c.status == "Unknown" {
                c.last_transition_time.clone()
            } else {
                Some(Time(now))
            };
            NodeCondition {
                status: "Unknown".to_owned(),
                reason: Some(UNKNOWN_REASON.to_owned()),
                message: Some(UNKNOWN_MESSAGE.to_owned()),
                last_transition_time: transition,
                ..c
            }
        })
        .collect();
    json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "status": { "conditions": conditions },
    })
}

/// The merge patch that adds the unreachable taint to `node`, or `None`
/// when it has it already. Carries the resourceVersion like
/// [`unknown_patch`].
pub fn taint_patch(node: &Node, now: Timestamp) -> Option<Value> {
    let mut taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if taints.iter().any(|t| t.key == UNREACHABLE_TAINT) {
        return None;
    }
    taints.push(Taint {
        key: UNREACHABLE_TAINT.to_owned(),
        effect: "NoSchedule".to_owned(),
        time_added: Some(Time(now)),
        value: None,
    });
    Some(json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": { "taints": taints },
    }))
}

/// Checks every second until `shutdown` completes; errors are logged and
/// the next round retries.
pub async fn run(client: Client, grace: Duration, shutdown: impl Future<Output = ()>) {
    let nodes: Api<Node> = Api::all(client);
    super::rounds::every(
        "node lifecycle check",
        INTERVAL,
        Duration::from_secs(10),
        shutdown,
        || check(&nodes, grace),
    )
    .await;
}

async fn check(nodes: &Api<Node>, grace: Duration) -> Result<(), kube::Error> {
    let list = nodes.list(&ListParams::default()).await?.items;
    let now = Timestamp::now();
    let pp = PatchParams::default();
    for (name, was_ready) in stale_nodes(&list, now, grace) {
        let Some(node) = list
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(&name))
        else {
            continue;
        };
        let mut node = node.clone();
        if was_ready {
            tracing::info!(node = %name, "node stopped posting status: Ready=Unknown");
            match nodes
                .patch_status(&name, &pp, &Patch::Merge(unknown_patch(&node, now)))
                .await
            {
                Ok(n) => node = n,
                // A heartbeat or a deletion raced us: look again next round.
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => continue,
                Err(e) => return Err(e),
            }
        }
        if let Some(patch) = taint_patch(&node, now) {
            tracing::info!(node = %name, "tainting unreachable node");
            match nodes.patch(&name, &pp, &Patch::Merge(patch)).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn node(name: &str, ready: Option<(&str, &str)>) -> Node {
        let conditions: Vec<Value> = ready
            .into_iter()
            .map(|(status, heartbeat)| {
                json!({ "type": "Ready", "status": status, "lastHeartbeatTime": heartbeat,
                        "lastTransitionTime": "2026-01-01T00:00:00Z" })
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": { "name": name, "resourceVersion": "5" },
            "status": { "conditions": conditions },
        }))
        .expect("node")
    }

    #[rstest]
    #[case::fresh(Some(("True", "2026-01-01T00:00:10Z")), None)]
    #[case::rounding_tolerated(Some(("True", "2026-01-01T00:00:09Z")), None)]
    #[case::just_stale(Some(("True", "2026-01-01T00:00:08Z")), Some(true))]
    #[case::stale_ready(Some(("True", "2026-01-01T00:00:00Z")), Some(true))]
    #[case::stale_unknown(Some(("Unknown", "2026-01-01T00:00:00Z")), Some(false))]
    #[case::no_ready_condition(None, Some(false))]
    #[case::heartbeat_in_future(Some(("True", "2026-01-01T00:01:00Z")), None)]
    fn staleness(#[case] ready: Option<(&str, &str)>, #[case] expected: Option<bool>) {
        let nodes = [node("n", ready)];
        let now = ts("2026-01-01T00:00:11Z");
        let got = stale_nodes(&nodes, now, Duration::from_secs(1));
        let expected: Vec<_> = expected.map(|r| ("n".to_owned(), r)).into_iter().collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn grace_plus_one_second_is_the_limit() {
        let nodes = [node("n", Some(("True", "2026-01-01T00:00:00Z")))];
        let grace = Duration::from_secs(10);
        assert!(stale_nodes(&nodes, ts("2026-01-01T00:00:11Z"), grace).is_empty());
        assert_eq!(
            stale_nodes(&nodes, ts("2026-01-01T00:00:11.001Z"), grace),
            [("n".to_owned(), true)]
        );
    }

    #[test]
    fn unknown_patch_marks_ready_unknown() {
        let n = node("n", Some(("True", "2026-01-01T00:00:00Z")));
        let now = ts("2026-01-01T00:00:30Z");
        let patch = unknown_patch(&n, now);
        assert_eq!(patch["metadata"]["resourceVersion"], "5");
        let c = &patch["status"]["conditions"][0];
        assert_eq!(c["type"], "Ready");
        assert_eq!(c["status"], "Unknown");
        assert_eq!(c["reason"], UNKNOWN_REASON);
        assert_eq!(c["message"], UNKNOWN_MESSAGE);
        assert_eq!(c["lastHeartbeatTime"], "2026-01-01T00:00:00Z");
        assert_eq!(c["lastTransitionTime"], "2026-01-01T00:00:30Z");
    }

    #[test]
    fn taint_added_once() {
        let n = node("n", None);
        let now = ts("2026-01-01T00:00:30Z");
        let patch = taint_patch(&n, now).expect("patch");
        assert_eq!(
            patch["spec"]["taints"],
            json!([{ "key": UNREACHABLE_TAINT, "effect": "NoSchedule",
                     "timeAdded": "2026-01-01T00:00:30Z" }])
        );
        let mut tainted = n.clone();
        tainted.spec = Some(serde_json::from_value(patch["spec"].clone()).expect("spec"));
        assert_eq!(taint_patch(&tainted, now), None);
    }
}
