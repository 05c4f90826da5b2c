//! What kube-apiserver's own registries do for built-in kinds: what they
//! fill in on create (Namespace phase and finalizer, Job selector, CRD
//! status) and the checks beyond a schema (ValidatingWebhookConfiguration
//! defaults and validation in [`webhooks`], a CRD's versions compiling).
//!
//! Pure, and below the server state, which calls it: a Service's cluster
//! IPs and node ports come from the state's counters, so they are
//! `state::allocate`'s.

mod webhooks;

use crate::error::ApiError;
use crate::registry::{Registry, ResourceType};
use serde_json::{Value, json};

fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Whether `t` is CustomResourceDefinition.
pub fn is_crd(t: &ResourceType) -> bool {
    t.group == "apiextensions.k8s.io" && t.plural == "customresourcedefinitions"
}

/// A Secret's `stringData` is write-only: kube-apiserver folds it into
/// `data` (base64, over a `data` key of the same name) and never stores
/// it.
fn fold_string_data(obj: &mut Value) {
    use base64::Engine as _;
    let Some(strings) = obj
        .as_object_mut()
        .and_then(|o| o.remove("stringData"))
        .and_then(|v| v.as_object().cloned())
    else {
        return;
    };
    if !obj["data"].is_object() {
        obj["data"] = serde_json::json!({});
    }
    for (key, value) in strings {
        let text = value.as_str().unwrap_or_default();
        obj["data"][key] =
            serde_json::json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

/// Defaults and checks of built-in kinds, on every create and update of
/// the object (after the schema, before webhooks).
pub fn check(t: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match (t.group.as_str(), t.plural.as_str()) {
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            webhooks::default_webhooks(obj);
            let causes = webhooks::validate(obj);
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    &format!("{}.{}", t.kind, t.group),
                    &name,
                    causes,
                ));
            }
        }
        ("", "secrets") => fold_string_data(obj),
        ("apps", "deployments" | "replicasets" | "daemonsets" | "statefulsets")
        | ("batch", "jobs") => {
            workload_defaults(t, obj);
            if let Some(cause) = selector_mismatch(obj) {
                return Err(ApiError::invalid(
                    &format!("{}.{}", t.kind, t.group),
                    &name,
                    vec![cause],
                ));
            }
        }
        _ if is_crd(t) => {
            Registry::check_crd(obj)
                .map_err(|e| ApiError::invalid(&t.kind, &name, vec![("spec".into(), e)]))?;
        }
        _ => {}
    }
    Ok(())
}

/// Sets each `(key, value)` on `obj` where `obj` has no value yet.
fn fill(obj: &mut Value, defaults: impl IntoIterator<Item = (&'static str, Value)>) {
    for (key, value) in defaults {
        if obj[key].is_null() {
            obj[key] = value;
        }
    }
}

/// kube-apiserver's defaults of Deployments, ReplicaSets and DaemonSets
/// and of their Pod templates, applied on every write so a template's hash does not
/// change because a client sent a field the server would fill in.
fn workload_defaults(t: &ResourceType, obj: &mut Value) {
    let spec = &mut obj["spec"];
    if spec["replicas"].is_null() && !matches!(t.plural.as_str(), "daemonsets" | "jobs") {
        spec["replicas"] = json!(1);
    }
    match t.plural.as_str() {
        "statefulsets" => statefulset_defaults(spec),
        "jobs" => fill(
            spec,
            [
                ("parallelism", json!(1)),
                ("completions", json!(1)),
                ("backoffLimit", json!(6)),
                ("completionMode", json!("NonIndexed")),
                ("suspend", json!(false)),
            ],
        ),
        "daemonsets" => daemonset_defaults(spec),
        "deployments" => deployment_defaults(spec),
        _ => {}
    }
    let restart = if t.plural == "jobs" {
        "Never"
    } else {
        "Always"
    };
    pod_template_defaults(&mut spec["template"]["spec"], restart);
}

/// A StatefulSet's update strategy (rolling, from ordinal 0), pod
/// management and history.
fn statefulset_defaults(spec: &mut Value) {
    if spec["updateStrategy"]["type"].is_null() {
        spec["updateStrategy"]["type"] = json!("RollingUpdate");
    }
    if spec["updateStrategy"]["type"] == json!("RollingUpdate")
        && spec["updateStrategy"]["rollingUpdate"]["partition"].is_null()
    {
        spec["updateStrategy"]["rollingUpdate"]["partition"] = json!(0);
    }
    fill(
        spec,
        [
            ("podManagementPolicy", json!("OrderedReady")),
            ("revisionHistoryLimit", json!(10)),
        ],
    );
}

/// A DaemonSet's update strategy (rolling, one unavailable, no surge)
/// and history.
fn daemonset_defaults(spec: &mut Value) {
    if spec["updateStrategy"]["type"].is_null() {
        spec["updateStrategy"]["type"] = json!("RollingUpdate");
    }
    if spec["updateStrategy"]["type"] == json!("RollingUpdate") {
        fill(
            &mut spec["updateStrategy"]["rollingUpdate"],
            [("maxUnavailable", json!(1)), ("maxSurge", json!(0))],
        );
    }
    fill(spec, [("revisionHistoryLimit", json!(10))]);
}

/// A Deployment's strategy (rolling, 25% surge and unavailable), history
/// and progress deadline.
fn deployment_defaults(spec: &mut Value) {
    if spec["strategy"]["type"].is_null() {
        spec["strategy"]["type"] = json!("RollingUpdate");
    }
    if spec["strategy"]["type"] == json!("RollingUpdate") {
        fill(
            &mut spec["strategy"]["rollingUpdate"],
            [("maxSurge", json!("25%")), ("maxUnavailable", json!("25%"))],
        );
    }
    fill(
        spec,
        [
            ("revisionHistoryLimit", json!(10)),
            ("progressDeadlineSeconds", json!(600)),
        ],
    );
}

/// A Pod template's spec (`restart` its restart policy) and each of its
/// containers: the image pull policy follows the tag (`Always` for
/// `latest` or none, unless pinned by digest), ports are TCP.
fn pod_template_defaults(pod: &mut Value, restart: &str) {
    fill(
        pod,
        [
            ("restartPolicy", json!(restart)),
            ("terminationGracePeriodSeconds", json!(30)),
            ("dnsPolicy", json!("ClusterFirst")),
            ("schedulerName", json!("default-scheduler")),
            ("securityContext", json!({})),
        ],
    );
    for c in pod["containers"].as_array_mut().into_iter().flatten() {
        let image = c["image"].as_str().unwrap_or_default();
        let tag = image
            .rsplit('/')
            .next()
            .and_then(|last| last.split_once(':'));
        let latest = !image.contains('@') && tag.is_none_or(|(_, tag)| tag == "latest");
        fill(
            c,
            [
                ("terminationMessagePath", json!("/dev/termination-log")),
                ("terminationMessagePolicy", json!("File")),
                (
                    "imagePullPolicy",
                    json!(if latest { "Always" } else { "IfNotPresent" }),
                ),
                ("resources", json!({})),
            ],
        );
        for p in c["ports"].as_array_mut().into_iter().flatten() {
            fill(p, [("protocol", json!("TCP"))]);
        }
    }
}

/// kube-apiserver's Job selector on create (unless `manualSelector`):
/// the Job's uid, also put on its Pod template with the Job's name.
fn job_selector(obj: &mut Value) {
    if obj["spec"]["manualSelector"] == json!(true) {
        return;
    }
    let uid = obj["metadata"]["uid"].clone();
    let name = obj["metadata"]["name"].clone();
    obj["spec"]["selector"] =
        json!({ "matchLabels": { "batch.kubernetes.io/controller-uid": uid } });
    let labels = &mut obj["spec"]["template"]["metadata"]["labels"];
    for (key, value) in [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("job-name", &name),
    ] {
        labels[key] = value.clone();
    }
}

/// kube-apiserver's check that a workload's selector selects its own
/// template (`matchLabels` only).
fn selector_mismatch(obj: &Value) -> Option<(String, String)> {
    let labels = &obj["spec"]["template"]["metadata"]["labels"];
    let wanted = obj["spec"]["selector"]["matchLabels"].as_object()?;
    let selects = wanted.iter().all(|(k, v)| labels[k] == *v);
    (!selects).then(|| {
        (
            "spec.template.metadata.labels".to_owned(),
            "`selector` does not match template `labels`".to_owned(),
        )
    })
}

/// What kube-apiserver's own controllers fill in on create, but for
/// Services (whose cluster IPs and node ports come from the server's
/// counters: `State::service_defaults`).
pub fn on_create(t: &ResourceType, obj: &mut Value) {
    match (t.group.as_str(), t.plural.as_str()) {
        ("", "namespaces") => {
            obj["status"] = json!({ "phase": "Active" });
            obj["spec"]["finalizers"] = json!(["kubernetes"]);
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] =
                obj["metadata"]["name"].clone();
        }
        ("batch", "jobs") => job_selector(obj),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            obj["status"] = json!({
                "acceptedNames": obj["spec"]["names"],
                "storedVersions": obj["spec"]["versions"].as_array().into_iter().flatten()
                    .filter(|v| v["storage"] == json!(true)).map(|v| v["name"].clone()).collect::<Vec<_>>(),
                "conditions": [
                    { "type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now() },
                    { "type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now() },
                ],
            });
        }
        _ => {}
    }
}
