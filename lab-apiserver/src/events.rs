//! Events through both APIs: components write events.k8s.io/v1 Events,
//! while `kubectl describe` lists core/v1 Events of the object
//! (`fieldSelector=involvedObject.name=...`). kube-apiserver stores both
//! as one; the lab stores them apart and lists an events.k8s.io Event
//! also as core/v1 ([`core_of`]), as kube-apiserver would serve it.

use serde_json::{Value, json};

/// Whether `(group, plural)` is core/v1 Events.
pub fn is_core_events(group: &str, plural: &str) -> bool {
    group.is_empty() && plural == "events"
}

/// The core/v1 form of an events.k8s.io/v1 Event (kube-apiserver's
/// conversion: `regarding` is `involvedObject`, `note` is `message`, the
/// reporting controller is the source component, `deprecated*` fields
/// are the old timestamps and count).
pub fn core_of(ev: &Value) -> Value {
    let mut out = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": ev["metadata"],
        "involvedObject": ev["regarding"],
        "reason": ev["reason"],
        "message": ev["note"],
        "type": ev["type"],
        "action": ev["action"],
        "eventTime": ev["eventTime"],
        "reportingComponent": ev["reportingController"],
        "reportingInstance": ev["reportingInstance"],
        "source": {
            "component": ev["deprecatedSource"]["component"].as_str()
                .or(ev["reportingController"].as_str()),
            "host": ev["deprecatedSource"]["host"],
        },
        "firstTimestamp": ev["deprecatedFirstTimestamp"],
        "lastTimestamp": ev["deprecatedLastTimestamp"],
        "count": ev["deprecatedCount"],
        "series": ev["series"],
        "related": ev["related"],
    });
    if let Some(map) = out.as_object_mut() {
        map.retain(|_, v| !v.is_null());
        if let Some(source) = map.get_mut("source").and_then(Value::as_object_mut) {
            source.retain(|_, v| !v.is_null());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::FieldSelector;

    #[test]
    fn a_new_event_reads_as_a_core_event() {
        let ev = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": { "name": "web-0.1", "namespace": "default" },
            "regarding": { "kind": "Pod", "namespace": "default", "name": "web-0", "uid": "u1" },
            "reason": "PlayedByLabBackend", "note": "played", "type": "Normal",
            "action": "Play", "eventTime": "2026-12-06T15:00:00.000000Z",
            "reportingController": "kubelet", "reportingInstance": "lab-worker",
        });
        let core = core_of(&ev);
        assert_eq!(
            core,
            json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": { "name": "web-0.1", "namespace": "default" },
                "involvedObject": { "kind": "Pod", "namespace": "default", "name": "web-0", "uid": "u1" },
                "reason": "PlayedByLabBackend", "message": "played", "type": "Normal",
                "action": "Play", "eventTime": "2026-12-06T15:00:00.000000Z",
                "reportingComponent": "kubelet", "reportingInstance": "lab-worker",
                "source": { "component": "kubelet" },
            })
        );
        // What `kubectl describe pod web-0` asks for.
        let describe = FieldSelector::parse(
            "involvedObject.name=web-0,involvedObject.namespace=default,involvedObject.kind=Pod,involvedObject.uid=u1",
        )
        .expect("selector");
        assert!(describe.matches(&core));
    }
}
