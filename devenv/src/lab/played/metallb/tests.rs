//! Table tests of the metallb-rs player: each row a Pod (the chart's
//! containers, trimmed) and the one line the process it gets reads as.

use super::*;
use serde_json::{Value, json};

const NODE: &str = "lab-worker";

fn addresses() -> Vec<IpAddr> {
    vec![
        "172.30.0.3".parse().expect("v4"),
        "fc00:f853:ccd:e793::3".parse().expect("v6"),
    ]
}

/// A Pod `metallb-system/speaker-x` with `container` and `spec` beside it.
fn pod(container: Value, spec: Value) -> Pod {
    let mut spec_json = json!({ "containers": [container] });
    if let (Some(o), Some(extra)) = (spec_json.as_object_mut(), spec.as_object()) {
        o.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "metadata": { "name": "speaker-x", "namespace": "metallb-system", "uid": "u-1" },
        "spec": spec_json,
    }))
    .expect("pod")
}

/// The process as one line: args | env | account | grace, or the error.
fn check(pod: &Pod) -> String {
    let addresses = addresses();
    let at = Placement {
        node: NODE,
        addresses: &addresses,
    };
    let name = pod.spec.as_ref().expect("spec").containers[0].name.clone();
    match process(pod, &name, at) {
        Ok(p) => {
            let env: Vec<String> = p.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!(
                "{} | {} | {} | {}s",
                p.args.join(" "),
                env.join(" "),
                p.service_account.as_deref().unwrap_or("no token"),
                p.grace.as_secs()
            )
        }
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn images_are_recognised_whatever_their_registry_tag_or_digest() {
    let rows = [
        ("ghcr.io/metallb-rs/metallb-rs:v0.1.0", true),
        ("metallb-rs:dev", true),
        ("localhost:5000/metallb-rs", true),
        ("registry.example/x/metallb-rs@sha256:abcd", true),
        ("quay.io/metallb/speaker:v0.14.9", false),
        ("registry.k8s.io/e2e-test-images/agnhost:2.53", false),
        ("metallb-rs-tools:1", false),
        ("", false),
    ];
    for (image, want) in rows {
        assert_eq!(is_metallb_rs_image(image), want, "{image:?}");
    }
}

#[test]
fn processes() {
    let speaker_env = json!([
        { "name": "NODE_NAME", "valueFrom": { "fieldRef": { "fieldPath": "spec.nodeName" } } },
        { "name": "METALLB_NAMESPACE", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } },
        { "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
        { "name": "METALLB_ML_BIND_ADDR", "valueFrom": { "fieldRef": { "fieldPath": "status.podIP" } } },
        { "name": "METALLB_ML_SECRET_NAME", "value": "memberlist" },
    ]);
    let rows: Vec<(&str, Value, Value, &str)> = vec![
        (
            "the chart's speaker: its args, the downward API resolved, its account",
            json!({ "name": "speaker", "image": "ghcr.io/metallb-rs/metallb-rs:v0.1.0",
                    "args": ["speaker", "--log-level", "info"], "env": speaker_env }),
            json!({ "serviceAccountName": "speaker", "terminationGracePeriodSeconds": 2 }),
            "speaker --log-level info | NODE_NAME=lab-worker METALLB_NAMESPACE=metallb-system \
             POD_NAME=speaker-x METALLB_ML_BIND_ADDR=172.30.0.3 METALLB_ML_SECRET_NAME=memberlist \
             | speaker | 2s",
        ),
        (
            "a command naming the binary keeps its arguments before args",
            json!({ "name": "c", "image": "metallb-rs:dev", "command": ["/metallb-rs", "controller"],
                    "args": ["--leader-elect"] }),
            json!({}),
            "controller --leader-elect |  | default | 5s",
        ),
        (
            "a command running another program is refused",
            json!({ "name": "c", "image": "metallb-rs:dev", "command": ["/bin/sh", "-c", "x"] }),
            json!({}),
            "error: pod metallb-system/speaker-x container c: command [\"/bin/sh\", \"-c\", \"x\"] \
             does not run metallb-rs, the only program in the metallb-rs image",
        ),
        (
            "a Secret in the environment is refused by name",
            json!({ "name": "c", "image": "metallb-rs:dev", "args": ["speaker"], "env": [
                { "name": "KEY", "valueFrom": { "secretKeyRef": { "name": "s", "key": "k" } } }] }),
            json!({}),
            "error: pod metallb-system/speaker-x container c: env KEY: valueFrom.secretKeyRef \
             is not played by the lab (only literal values and fieldRef)",
        ),
        (
            "an unknown field is refused by name",
            json!({ "name": "c", "image": "metallb-rs:dev", "env": [
                { "name": "L", "valueFrom": { "fieldRef": { "fieldPath": "metadata.labels['app']" } } }] }),
            json!({}),
            "error: pod metallb-system/speaker-x container c: env L: fieldRef metadata.labels['app'] \
             is not played by the lab (metadata.name, metadata.namespace, metadata.uid, \
             spec.nodeName, spec.serviceAccountName, status.podIP, status.hostIP)",
        ),
        (
            "no token when the Pod turns it off; a long grace is cut to the drain",
            json!({ "name": "c", "image": "metallb-rs:dev", "args": ["controller"] }),
            json!({ "automountServiceAccountToken": false, "terminationGracePeriodSeconds": 3600 }),
            "controller |  | no token | 5s",
        ),
        (
            "a negative grace is none",
            json!({ "name": "c", "image": "metallb-rs:dev", "args": ["speaker"] }),
            json!({ "serviceAccount": "old-field", "terminationGracePeriodSeconds": -1 }),
            "speaker |  | old-field | 0s",
        ),
    ];
    for (name, container, spec, want) in rows {
        let want: String = want.split_whitespace().collect::<Vec<_>>().join(" ");
        let got: String = check(&pod(container, spec))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(got, want, "row: {name}");
    }
}

#[test]
fn the_image_entrypoint_is_the_binary() {
    assert!(is_the_binary(crate::image::BINARY_IN_IMAGE));
    assert!(is_the_binary("metallb-rs") && !is_the_binary("/bin/metallb-rs-tools"));
}
