//! One row per rule behaviour, with the rules MetalLB's CRDs carry.

use super::*;
use serde_json::json;

fn schema() -> Value {
    json!({ "type": "object", "properties": { "spec": {
        "type": "object",
        "x-kubernetes-validations": [{
            "message": "serviceSelectors and aggregationLength are mutually exclusive",
            "rule": "!has(self.serviceSelectors) || self.serviceSelectors.size() == 0 || ((!has(self.aggregationLength) || self.aggregationLength == 32) && (!has(self.aggregationLengthV6) || self.aggregationLengthV6 == 128))",
        }],
        "properties": {
            "aggregationLength": { "type": "integer" },
            "aggregationLengthV6": { "type": "integer" },
            "serviceSelectors": { "type": "array", "items": { "type": "object" } },
            "connectTime": {
                "type": "string",
                "x-kubernetes-validations": [
                    { "message": "connect time should be between 1 seconds to 65535", "rule": "duration(self).getSeconds() >= 1 && duration(self).getSeconds() <= 65535" },
                    { "message": "connect time should contain a whole number of seconds", "rule": "duration(self).getMilliseconds() % 1000 == 0" },
                ],
            },
            "enableGracefulRestart": {
                "type": "boolean",
                "x-kubernetes-validations": [{ "message": "EnableGracefulRestart cannot be changed after creation", "rule": "self == oldSelf" }],
            },
            "peers": { "type": "array", "items": { "type": "string", "x-kubernetes-validations": [{ "rule": "self.size() > 1" }] } },
        },
    } } })
}

fn check(spec: Value, old: Option<Value>) -> String {
    let obj = json!({ "spec": spec });
    let old = old.map(|o| json!({ "spec": o }));
    validate(&obj, old.as_ref(), &schema())
        .iter()
        .map(|v| format!("{}: {}", v.field, v.message))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn rules_hold_or_name_the_field_with_the_crds_message() {
    let rows = [
        (json!({}), None, ""),
        (
            json!({ "serviceSelectors": [{}], "aggregationLength": 32 }),
            None,
            "",
        ),
        (
            json!({ "serviceSelectors": [{}], "aggregationLength": 24 }),
            None,
            "spec: Invalid value: \"object\": serviceSelectors and aggregationLength are mutually exclusive",
        ),
        (
            json!({ "serviceSelectors": [], "aggregationLength": 24 }),
            None,
            "",
        ),
        (json!({ "connectTime": "10s" }), None, ""),
        (
            json!({ "connectTime": "500ms" }),
            None,
            "spec.connectTime: Invalid value: \"string\": connect time should be between 1 seconds to 65535\n\
             spec.connectTime: Invalid value: \"string\": connect time should contain a whole number of seconds",
        ),
        (
            json!({ "connectTime": "1500ms" }),
            None,
            "spec.connectTime: Invalid value: \"string\": connect time should contain a whole number of seconds",
        ),
        (
            json!({ "connectTime": "20h" }),
            None,
            "spec.connectTime: Invalid value: \"string\": connect time should be between 1 seconds to 65535",
        ),
        // Transition rules: only on an update with an old value.
        (json!({ "enableGracefulRestart": true }), None, ""),
        (
            json!({ "enableGracefulRestart": true }),
            Some(json!({ "enableGracefulRestart": true })),
            "",
        ),
        (
            json!({ "enableGracefulRestart": true }),
            Some(json!({})),
            "",
        ),
        (
            json!({ "enableGracefulRestart": false }),
            Some(json!({ "enableGracefulRestart": true })),
            "spec.enableGracefulRestart: Invalid value: \"boolean\": EnableGracefulRestart cannot be changed after creation",
        ),
        // List items; a rule without a message.
        (
            json!({ "peers": ["ab", "c"] }),
            None,
            "spec.peers[1]: Invalid value: \"string\": failed rule: self.size() > 1",
        ),
    ];
    for (spec, old, want) in rows {
        assert_eq!(
            check(spec.clone(), old.clone()),
            want,
            "{spec} (old {old:?})"
        );
    }
}
