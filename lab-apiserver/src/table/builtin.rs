//! kube-apiserver's printer columns for the built-in kinds served here
//! (kubernetes' `pkg/printers/internalversion`), wide columns included
//! with priority 1. Kinds without a printer get the default table: `Name`
//! and `Created At`.

use super::{Cells, Column, age};
use serde_json::{Value, json};

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn or(v: &str, absent: &str) -> Value {
    json!(if v.is_empty() { absent } else { v })
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn cols(spec: &[(&str, i64)]) -> Vec<Column> {
    spec.iter()
        .map(|(name, priority)| {
            let kind = if *name == "Created At" {
                "date"
            } else {
                "string"
            };
            Column::new(name, kind, *priority)
        })
        .collect()
}

/// A workload's wide cells: its containers, their images and its
/// selector's matchLabels.
fn template_cells(o: &Value) -> [Value; 3] {
    let containers = list(&o["spec"]["template"]["spec"]["containers"]);
    let join = |key: &str| {
        containers
            .iter()
            .map(|c| s(&c[key]))
            .collect::<Vec<_>>()
            .join(",")
    };
    let selector: Vec<String> = o["spec"]["selector"]["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", s(v)))
        .collect();
    [
        json!(join("name")),
        json!(join("image")),
        json!(selector.join(",")),
    ]
}

/// The columns and cell function for a built-in `group/plural`.
pub fn printer(group: &str, plural: &str) -> (Vec<Column>, Cells<'static>) {
    macro_rules! p {
        ($cols:expr, $f:expr) => {
            (cols($cols), Box::new($f))
        };
    }
    match (group, plural) {
        ("", "nodes") => p!(
            &[
                ("Name", 0),
                ("Status", 0),
                ("Roles", 0),
                ("Age", 0),
                ("Version", 0),
                ("Internal-IP", 1),
                ("External-IP", 1),
                ("OS-Image", 1),
                ("Kernel-Version", 1),
                ("Container-Runtime", 1),
            ],
            node
        ),
        ("", "services") => p!(
            &[
                ("Name", 0),
                ("Type", 0),
                ("Cluster-IP", 0),
                ("External-IP", 0),
                ("Port(s)", 0),
                ("Age", 0),
                ("Selector", 1),
            ],
            service
        ),
        ("", "pods") => p!(
            &[
                ("Name", 0),
                ("Ready", 0),
                ("Status", 0),
                ("Restarts", 0),
                ("Age", 0),
                ("IP", 1),
                ("Node", 1),
                ("Nominated Node", 1),
                ("Readiness Gates", 1),
            ],
            pod
        ),
        ("discovery.k8s.io", "endpointslices") => p!(
            &[
                ("Name", 0),
                ("AddressType", 0),
                ("Ports", 0),
                ("Endpoints", 0),
                ("Age", 0)
            ],
            endpoint_slice
        ),
        ("apps", "deployments") => p!(
            &[
                ("Name", 0),
                ("Ready", 0),
                ("Up-to-date", 0),
                ("Available", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1),
            ],
            deployment
        ),
        ("apps", "replicasets") => p!(
            &[
                ("Name", 0),
                ("Desired", 0),
                ("Current", 0),
                ("Ready", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1),
            ],
            replicaset
        ),
        ("apps", "statefulsets") => p!(
            &[
                ("Name", 0),
                ("Ready", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
            ],
            statefulset
        ),
        ("batch", "jobs") => p!(
            &[
                ("Name", 0),
                ("Status", 0),
                ("Completions", 0),
                ("Duration", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1),
            ],
            job
        ),
        ("apps", "daemonsets") => p!(
            &[
                ("Name", 0),
                ("Desired", 0),
                ("Current", 0),
                ("Ready", 0),
                ("Up-to-date", 0),
                ("Available", 0),
                ("Node Selector", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1),
            ],
            daemonset
        ),
        ("coordination.k8s.io", "leases") => {
            p!(&[("Name", 0), ("Holder", 0), ("Age", 0)], lease)
        }
        ("", "events") | ("events.k8s.io", "events") => p!(
            &[
                ("Last Seen", 0),
                ("Type", 0),
                ("Reason", 0),
                ("Object", 0),
                ("Subobject", 1),
                ("Source", 1),
                ("Message", 0),
                ("First Seen", 1),
                ("Count", 1),
                ("Name", 1),
            ],
            event
        ),
        ("", "namespaces") => p!(&[("Name", 0), ("Status", 0), ("Age", 0)], namespace),
        ("", "configmaps") => p!(&[("Name", 0), ("Data", 0), ("Age", 0)], configmap),
        ("", "secrets") => p!(&[("Name", 0), ("Type", 0), ("Data", 0), ("Age", 0)], secret),
        _ => p!(&[("Name", 0), ("Created At", 0)], default_cells),
    }
}

/// A count, 0 when absent.
fn n(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// READY as ready/desired replicas.
fn deployment(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let st = &o["status"];
    let mut cells = vec![
        o["metadata"]["name"].clone(),
        json!(format!(
            "{}/{}",
            n(&st["readyReplicas"]),
            n(&o["spec"]["replicas"])
        )),
        json!(n(&st["updatedReplicas"])),
        json!(n(&st["availableReplicas"])),
        age(&o["metadata"]["creationTimestamp"], now),
    ];
    cells.extend(template_cells(o));
    cells
}

fn replicaset(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let st = &o["status"];
    let mut cells = vec![
        o["metadata"]["name"].clone(),
        json!(n(&o["spec"]["replicas"])),
        json!(n(&st["replicas"])),
        json!(n(&st["readyReplicas"])),
        age(&o["metadata"]["creationTimestamp"], now),
    ];
    cells.extend(template_cells(o));
    cells
}

/// The wide cells are containers and images only: no selector column.
fn statefulset(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let [containers, images, _] = template_cells(o);
    vec![
        o["metadata"]["name"].clone(),
        json!(format!(
            "{}/{}",
            n(&o["status"]["readyReplicas"]),
            n(&o["spec"]["replicas"])
        )),
        age(&o["metadata"]["creationTimestamp"], now),
        containers,
        images,
    ]
}

/// STATUS from the Complete or Failed condition, else Running; DURATION
/// from the start to completion, or to now while running.
fn job(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let st = &o["status"];
    let condition = |type_: &str| {
        st["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == json!(type_) && c["status"] == json!("True"))
    };
    let status = if condition("Complete") {
        "Complete"
    } else if condition("Failed") {
        "Failed"
    } else {
        "Running"
    };
    let completions = o["spec"]["completions"]
        .as_i64()
        .map_or_else(|| "-".to_owned(), |c| c.to_string());
    let ended = st["completionTime"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .unwrap_or(now);
    let duration = if st["startTime"].is_string() {
        age(&st["startTime"], ended)
    } else {
        json!("")
    };
    let mut cells = vec![
        o["metadata"]["name"].clone(),
        json!(status),
        json!(format!("{}/{completions}", n(&st["succeeded"]))),
        duration,
        age(&o["metadata"]["creationTimestamp"], now),
    ];
    cells.extend(template_cells(o));
    cells
}

/// NODE SELECTOR from the Pod template's nodeSelector.
fn daemonset(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let st = &o["status"];
    let selector: Vec<String> = o["spec"]["template"]["spec"]["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", s(v)))
        .collect();
    let mut cells = vec![
        o["metadata"]["name"].clone(),
        json!(n(&st["desiredNumberScheduled"])),
        json!(n(&st["currentNumberScheduled"])),
        json!(n(&st["numberReady"])),
        json!(n(&st["updatedNumberScheduled"])),
        json!(n(&st["numberAvailable"])),
        or(&selector.join(","), "<none>"),
        age(&o["metadata"]["creationTimestamp"], now),
    ];
    cells.extend(template_cells(o));
    cells
}

fn lease(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![
        o["metadata"]["name"].clone(),
        json!(s(&o["spec"]["holderIdentity"])),
        age(&o["metadata"]["creationTimestamp"], now),
    ]
}

fn namespace(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![
        o["metadata"]["name"].clone(),
        json!(s(&o["status"]["phase"])),
        age(&o["metadata"]["creationTimestamp"], now),
    ]
}

/// DATA counts the keys of data and binaryData.
fn configmap(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let keys = o["data"].as_object().map_or(0, |m| m.len())
        + o["binaryData"].as_object().map_or(0, |m| m.len());
    vec![
        o["metadata"]["name"].clone(),
        json!(keys),
        age(&o["metadata"]["creationTimestamp"], now),
    ]
}

fn secret(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![
        o["metadata"]["name"].clone(),
        json!(s(&o["type"])),
        json!(o["data"].as_object().map_or(0, |m| m.len())),
        age(&o["metadata"]["creationTimestamp"], now),
    ]
}

/// The default table's cells: the name and the creation time as stored.
fn default_cells(o: &Value, _now: jiff::Timestamp) -> Vec<Value> {
    vec![
        o["metadata"]["name"].clone(),
        o["metadata"]["creationTimestamp"].clone(),
    ]
}

/// STATUS from the Ready condition (`Unknown` without one), then
/// `SchedulingDisabled`; ROLES from `node-role.kubernetes.io/<role>` and
/// `kubernetes.io/role` labels, sorted.
fn node(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let mut status: Vec<&str> = list(&o["status"]["conditions"])
        .iter()
        .filter(|c| c["type"] == "Ready")
        .map(|c| {
            if c["status"] == "True" {
                "Ready"
            } else {
                "NotReady"
            }
        })
        .take(1)
        .collect();
    if status.is_empty() {
        status.push("Unknown");
    }
    if o["spec"]["unschedulable"] == json!(true) {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<&str> = o["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) if !role.is_empty() => Some(role),
            Some(_) => None,
            None if k == "kubernetes.io/role" && !s(v).is_empty() => Some(s(v)),
            None => None,
        })
        .collect();
    roles.sort_unstable();
    roles.dedup();
    let address = |kind: &str| {
        list(&o["status"]["addresses"])
            .iter()
            .find(|a| a["type"] == kind)
            .map_or("", |a| s(&a["address"]))
    };
    let info = &o["status"]["nodeInfo"];
    vec![
        o["metadata"]["name"].clone(),
        json!(status.join(",")),
        or(&roles.join(","), "<none>"),
        age(&o["metadata"]["creationTimestamp"], now),
        json!(s(&info["kubeletVersion"])),
        or(address("InternalIP"), "<none>"),
        or(address("ExternalIP"), "<none>"),
        or(s(&info["osImage"]), "<unknown>"),
        or(s(&info["kernelVersion"]), "<unknown>"),
        or(s(&info["containerRuntimeVersion"]), "<unknown>"),
    ]
}

/// `k=v,...` sorted by key, or `<none>`.
fn format_labels(map: &Value) -> Value {
    let mut pairs: Vec<String> = map
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", s(v)))
        .collect();
    pairs.sort();
    or(&pairs.join(","), "<none>")
}

fn service(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let spec = &o["spec"];
    let external_ips: Vec<&str> = list(&spec["externalIPs"]).iter().map(s).collect();
    let external = match s(&spec["type"]) {
        "LoadBalancer" => {
            let mut ips: Vec<&str> = list(&o["status"]["loadBalancer"]["ingress"])
                .iter()
                .map(|i| {
                    if i["ip"].is_string() {
                        s(&i["ip"])
                    } else {
                        s(&i["hostname"])
                    }
                })
                .filter(|i| !i.is_empty())
                .collect();
            ips.extend(&external_ips);
            or(&ips.join(","), "<pending>")
        }
        "ExternalName" => json!(s(&spec["externalName"])),
        _ => or(&external_ips.join(","), "<none>"),
    };
    let ports: Vec<String> = list(&spec["ports"])
        .iter()
        .map(|p| match p["nodePort"].as_i64().filter(|n| *n > 0) {
            Some(node_port) => format!("{}:{node_port}/{}", p["port"], s(&p["protocol"])),
            None => format!("{}/{}", p["port"], s(&p["protocol"])),
        })
        .collect();
    let cluster_ip = list(&spec["clusterIPs"])
        .first()
        .map_or(s(&spec["clusterIP"]), s);
    vec![
        o["metadata"]["name"].clone(),
        json!(s(&spec["type"])),
        or(cluster_ip, "<none>"),
        external,
        or(&ports.join(","), "<none>"),
        age(&o["metadata"]["creationTimestamp"], now),
        format_labels(&spec["selector"]),
    ]
}

/// READY counts ready containers; STATUS is the first waiting or
/// terminated container's reason, else the pod's reason or phase, and
/// `Terminating` once deleted.
fn pod(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let statuses = list(&o["status"]["containerStatuses"]);
    let total = list(&o["spec"]["containers"]).len();
    let ready = statuses
        .iter()
        .filter(|c| c["ready"] == json!(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c["restartCount"].as_i64())
        .sum();
    let container_reason = statuses.iter().find_map(|c| {
        let state = &c["state"];
        [&state["waiting"]["reason"], &state["terminated"]["reason"]]
            .into_iter()
            .map(s)
            .find(|r| !r.is_empty())
    });
    let mut status = container_reason
        .or(Some(s(&o["status"]["reason"])).filter(|r| !r.is_empty()))
        .unwrap_or(s(&o["status"]["phase"]));
    if !o["metadata"]["deletionTimestamp"].is_null() {
        status = "Terminating";
    }
    let gates = list(&o["spec"]["readinessGates"]);
    let gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let met = gates
            .iter()
            .filter(|g| {
                list(&o["status"]["conditions"])
                    .iter()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    vec![
        o["metadata"]["name"].clone(),
        json!(format!("{ready}/{total}")),
        json!(status),
        json!(restarts),
        age(&o["metadata"]["creationTimestamp"], now),
        or(s(&o["status"]["podIP"]), "<none>"),
        or(s(&o["spec"]["nodeName"]), "<none>"),
        or(s(&o["status"]["nominatedNodeName"]), "<none>"),
        json!(gates),
    ]
}

/// At most three entries, then ` + N more...`; `<unset>` for none.
fn with_more(items: Vec<String>) -> Value {
    const MAX: usize = 3;
    match items.len() {
        0 => json!("<unset>"),
        n if n > MAX => json!(format!("{} + {} more...", items[..MAX].join(","), n - MAX)),
        _ => json!(items.join(",")),
    }
}

fn endpoint_slice(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let ports = list(&o["ports"])
        .iter()
        .map(|p| match (&p["port"], s(&p["name"])) {
            (Value::Number(n), _) => n.to_string(),
            (_, name) if !name.is_empty() => name.to_owned(),
            _ => "*".to_owned(),
        })
        .collect();
    let addresses = list(&o["endpoints"])
        .iter()
        .flat_map(|e| list(&e["addresses"]).iter().map(|a| s(a).to_owned()))
        .collect();
    vec![
        o["metadata"]["name"].clone(),
        json!(s(&o["addressType"])),
        with_more(ports),
        with_more(addresses),
        age(&o["metadata"]["creationTimestamp"], now),
    ]
}

/// Both core/v1 and events.k8s.io/v1 shapes, as kube-apiserver prints
/// them after converting either to its internal Event.
fn event(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let first_field = |names: &[&str]| {
        names
            .iter()
            .map(|n| &o[*n])
            .find(|v| v.as_str().is_some_and(|t| !t.is_empty()))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let first_seen = age(
        &first_field(&["firstTimestamp", "deprecatedFirstTimestamp", "eventTime"]),
        now,
    );
    let mut last_seen = match first_field(&["lastTimestamp", "deprecatedLastTimestamp"]) {
        Value::Null => first_seen.clone(),
        t => age(&t, now),
    };
    let mut count = o["count"]
        .as_i64()
        .or(o["deprecatedCount"].as_i64())
        .unwrap_or(0);
    if o["series"].is_object() {
        last_seen = age(&o["series"]["lastObservedTime"], now);
        count = o["series"]["count"].as_i64().unwrap_or(count);
    } else if count == 0 {
        count = 1;
    }
    let object = if o["involvedObject"].is_object() {
        &o["involvedObject"]
    } else {
        &o["regarding"]
    };
    let kind = s(&object["kind"]).to_lowercase();
    let target = match s(&object["name"]) {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let source = &o["source"];
    let component = if s(&source["component"]).is_empty() {
        s(&o["reportingController"])
    } else {
        s(&source["component"])
    };
    let host = if s(&source["host"]).is_empty() {
        s(&o["reportingInstance"])
    } else {
        s(&source["host"])
    };
    let source = match (component, host) {
        (c, "") => c.to_owned(),
        (c, h) => format!("{c}, {h}"),
    };
    let message = if o["message"].is_string() {
        s(&o["message"])
    } else {
        s(&o["note"])
    };
    vec![
        last_seen,
        json!(s(&o["type"])),
        json!(s(&o["reason"])),
        json!(target),
        json!(s(&object["fieldPath"])),
        json!(source),
        json!(message.trim()),
        first_seen,
        json!(count),
        o["metadata"]["name"].clone(),
    ]
}
