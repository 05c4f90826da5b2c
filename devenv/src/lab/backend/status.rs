//! The status the pod runner writes for a played Pod, without I/O:
//! Running with each container's readiness, or (a Job's Pod) Succeeded
//! with every container exited 0.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use std::net::IpAddr;

/// A played Pod's status as the runner writes it.
pub(super) struct Status<'a> {
    pub(super) pod: &'a Pod,
    pub(super) addresses: &'a [IpAddr],
    pub(super) started: &'a str,
}

impl Status<'_> {
    /// The merge patch of the Pod's status with `ready[i]` the readiness
    /// of container `i` (lists are replaced whole, so it carries them all).
    pub(super) fn patch(&self, ready: &[bool]) -> serde_json::Value {
        let now = jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .map(|t| t.to_string())
            .unwrap_or_default();
        let ips: Vec<serde_json::Value> = self
            .addresses
            .iter()
            .map(|a| json!({ "ip": a.to_string() }))
            .collect();
        let containers: Vec<serde_json::Value> = self
            .pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .enumerate()
            .map(|(i, c)| {
                json!({
                    "name": c.name, "image": c.image, "imageID": "lab://backend",
                    "ready": ready.get(i).copied().unwrap_or(true), "started": true, "restartCount": 0,
                    "state": { "running": { "startedAt": self.started } },
                })
            })
            .collect();
        let all = if ready.iter().all(|r| *r) {
            "True"
        } else {
            "False"
        };
        json!({ "status": {
            "phase": "Running",
            "containerStatuses": containers,
            "hostIP": self.addresses.first().map(ToString::to_string),
            "podIP": self.addresses.first().map(ToString::to_string),
            "podIPs": ips,
            "startTime": self.started,
            "conditions": [
                { "type": "Ready", "status": all, "lastTransitionTime": now },
                { "type": "ContainersReady", "status": all, "lastTransitionTime": now },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": self.started },
            ],
        }})
    }
}

impl Status<'_> {
    /// The merge patch of a Pod whose containers all exited 0 at once.
    pub(super) fn completed(&self) -> serde_json::Value {
        let at = self.started;
        let containers: Vec<serde_json::Value> = self
            .pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| {
                json!({
                    "name": c.name, "image": c.image, "imageID": "lab://backend",
                    "ready": false, "started": false, "restartCount": 0,
                    "state": { "terminated": { "exitCode": 0, "reason": "Completed",
                                               "startedAt": at, "finishedAt": at } },
                })
            })
            .collect();
        json!({ "status": {
            "phase": "Succeeded",
            "containerStatuses": containers,
            "hostIP": self.addresses.first().map(ToString::to_string),
            "startTime": at,
            "conditions": [
                { "type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": at },
                { "type": "ContainersReady", "status": "False", "reason": "PodCompleted", "lastTransitionTime": at },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": at },
            ],
        }})
    }
}
