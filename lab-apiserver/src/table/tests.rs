//! Table responses: the columns and cells of each kind, as kubectl reads
//! them.

use super::*;
use crate::registry::Registry;
use rstest::rstest;

fn now() -> jiff::Timestamp {
    "2026-01-01T12:00:00Z".parse().expect("time")
}

/// The rows of a table as `cell|cell|...` lines, `<nil>` for no cell.
fn rows(t: &ResourceType, objects: &[Value]) -> Vec<String> {
    let table = table(t, objects, 7, "v1", Include::Metadata, now());
    table["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            r["cells"]
                .as_array()
                .expect("cells")
                .iter()
                .map(|c| match c {
                    Value::String(s) => s.clone(),
                    Value::Null => "<nil>".into(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

fn headers(t: &ResourceType) -> Vec<String> {
    table(t, &[], 1, "v1", Include::None, now())["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| format!("{}:{}", c["name"].as_str().expect("name"), c["priority"]))
        .collect()
}

fn builtin(group: &str, plural: &str) -> ResourceType {
    let r = Registry::default();
    r.get(group, "v1", plural).expect("served").clone()
}

#[rstest]
#[case(0, "0s")]
#[case(-1, "0s")]
#[case(-5, "<invalid>")]
#[case(119, "119s")]
#[case(125, "2m5s")]
#[case(600, "10m")]
#[case(3 * 3600 + 5 * 60, "3h5m")]
#[case(47 * 3600, "47h")]
#[case(3 * 86400 + 4 * 3600, "3d4h")]
#[case(400 * 86400, "400d")]
#[case(3 * 365 * 86400 + 86400 * 10, "3y10d")]
#[case(10 * 365 * 86400, "10y")]
fn ages_read_like_kubectl(#[case] seconds: i64, #[case] expected: &str) {
    assert_eq!(human_duration(seconds), expected);
}

#[rstest]
#[case(
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
    Format::Table("v1")
)]
#[case(
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json",
    Format::Table("v1beta1")
)]
#[case(
    "application/json;as=Table;v=v2;g=meta.k8s.io,application/json",
    Format::Object
)]
#[case("application/json", Format::Object)]
#[case("", Format::Object)]
#[case(
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    Format::Object
)]
fn accept_headers(#[case] accept: &str, #[case] expected: Format) {
    assert_eq!(Format::from_accept(accept), expected);
}

#[test]
fn nodes_show_status_roles_version_and_wide_columns() {
    let t = builtin("", "nodes");
    assert_eq!(
        headers(&t),
        [
            "Name:0",
            "Status:0",
            "Roles:0",
            "Age:0",
            "Version:0",
            "Internal-IP:1",
            "External-IP:1",
            "OS-Image:1",
            "Kernel-Version:1",
            "Container-Runtime:1"
        ]
    );
    let ready = json!({
        "metadata": { "name": "cp", "creationTimestamp": "2026-01-01T11:55:00Z",
            "labels": { "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "", "kubernetes.io/role": "edge" } },
        "spec": {},
        "status": {
            "conditions": [{ "type": "MemoryPressure", "status": "False" }, { "type": "Ready", "status": "True" }],
            "addresses": [{ "type": "Hostname", "address": "cp" }, { "type": "InternalIP", "address": "172.30.0.10" }, { "type": "InternalIP", "address": "fc00::10" }],
            "nodeInfo": { "kubeletVersion": "v1.35.0", "osImage": "Debian", "kernelVersion": "6.1", "containerRuntimeVersion": "lab://1" },
        },
    });
    let cordoned = json!({
        "metadata": { "name": "w", "creationTimestamp": "2026-01-01T09:00:00Z" },
        "spec": { "unschedulable": true },
        "status": { "conditions": [{ "type": "Ready", "status": "Unknown" }] },
    });
    let fresh = json!({ "metadata": { "name": "new" } });
    assert_eq!(
        rows(&t, &[ready, cordoned, fresh]),
        [
            "cp|Ready|control-plane,edge|5m|v1.35.0|172.30.0.10|<none>|Debian|6.1|lab://1",
            "w|NotReady,SchedulingDisabled|<none>|3h|<nil>|<none>|<none>|<unknown>|<unknown>|<unknown>",
            "new|Unknown|<none>|<unknown>|<nil>|<none>|<none>|<unknown>|<unknown>|<unknown>",
        ]
        .map(|r| r.replace("<nil>", ""))
    );
}

#[test]
fn services_show_type_ips_ports_and_selector() {
    let t = builtin("", "services");
    let lb = json!({
        "metadata": { "name": "web", "creationTimestamp": "2026-01-01T11:59:00Z" },
        "spec": { "type": "LoadBalancer", "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5", "fd00:10:96::5"],
            "ports": [{ "port": 80, "protocol": "TCP", "nodePort": 30001 }, { "port": 53, "protocol": "UDP", "nodePort": 30002 }],
            "selector": { "tier": "a", "app": "web" }, "externalIPs": ["192.0.2.1"] },
        "status": { "loadBalancer": { "ingress": [{ "ip": "172.30.0.100" }, { "hostname": "lb.example" }] } },
    });
    let pending = json!({
        "metadata": { "name": "p" },
        "spec": { "type": "LoadBalancer", "clusterIP": "10.96.0.6", "ports": [{ "port": 80, "protocol": "TCP" }] },
        "status": { "loadBalancer": {} },
    });
    let headless = json!({
        "metadata": { "name": "h" },
        "spec": { "type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"] },
    });
    let external = json!({ "metadata": { "name": "x" }, "spec": { "type": "ExternalName", "externalName": "example.com" } });
    assert_eq!(
        rows(&t, &[lb, pending, headless, external]),
        [
            "web|LoadBalancer|10.96.0.5|172.30.0.100,lb.example,192.0.2.1|80:30001/TCP,53:30002/UDP|60s|app=web,tier=a",
            "p|LoadBalancer|10.96.0.6|<pending>|80/TCP|<unknown>|<none>",
            "h|ClusterIP|None|<none>|<none>|<unknown>|<none>",
            "x|ExternalName|<none>|example.com|<none>|<unknown>|<none>",
        ]
    );
}

#[test]
fn pods_slices_leases_events_and_namespaces() {
    let pod = json!({
        "metadata": { "name": "web-1" },
        "spec": { "nodeName": "w1", "containers": [{ "name": "a" }, { "name": "b" }] },
        "status": { "phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
            { "ready": true, "restartCount": 1 }, { "ready": false, "restartCount": 2, "state": { "waiting": { "reason": "CrashLoopBackOff" } } }] },
    });
    assert_eq!(
        rows(&builtin("", "pods"), &[pod]),
        ["web-1|1/2|CrashLoopBackOff|3|<unknown>|10.0.0.5|w1|<none>|<none>"]
    );
    let mut slice_t = builtin("discovery.k8s.io", "endpointslices");
    slice_t.version = "v1".into();
    let slice = json!({
        "metadata": { "name": "web-ipv4" }, "addressType": "IPv4",
        "ports": [{ "port": 8080 }, { "name": "metrics" }],
        "endpoints": [{ "addresses": ["10.0.0.1"] }, { "addresses": ["10.0.0.2"] }, { "addresses": ["10.0.0.3"] }, { "addresses": ["10.0.0.4"] }],
    });
    let empty = json!({ "metadata": { "name": "e" }, "addressType": "IPv6" });
    assert_eq!(
        rows(&slice_t, &[slice, empty]),
        [
            "web-ipv4|IPv4|8080,metrics|10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...|<unknown>",
            "e|IPv6|<unset>|<unset>|<unknown>",
        ]
    );
    let lease =
        json!({ "metadata": { "name": "metallb-speaker-w1" }, "spec": { "holderIdentity": "w1" } });
    assert_eq!(
        rows(&builtin("coordination.k8s.io", "leases"), &[lease]),
        ["metallb-speaker-w1|w1|<unknown>"]
    );
    let core_event = json!({
        "metadata": { "name": "web.1" }, "type": "Normal", "reason": "IPAllocated", "message": "Assigned IP [\"172.30.0.100\"] ",
        "involvedObject": { "kind": "Service", "name": "web" }, "source": { "component": "metallb-controller" },
        "firstTimestamp": "2026-01-01T11:00:00Z", "lastTimestamp": "2026-01-01T11:58:00Z", "count": 3,
    });
    let new_event = json!({
        "metadata": { "name": "web.2" }, "type": "Warning", "reason": "X", "note": "n",
        "regarding": { "kind": "Service", "name": "web" }, "reportingController": "metallb-speaker", "reportingInstance": "w1",
        "eventTime": "2026-01-01T11:59:30.000000Z",
    });
    assert_eq!(
        rows(&builtin("", "events"), &[core_event, new_event]),
        [
            "2m|Normal|IPAllocated|service/web||metallb-controller|Assigned IP [\"172.30.0.100\"]|60m|3|web.1",
            "30s|Warning|X|service/web||metallb-speaker, w1|n|30s|1|web.2",
        ]
    );
    let ns = json!({ "metadata": { "name": "default", "creationTimestamp": "2026-01-01T10:00:00Z" }, "status": { "phase": "Active" } });
    assert_eq!(
        rows(&builtin("", "namespaces"), &[ns]),
        ["default|Active|120m"]
    );
}

#[test]
fn custom_resources_use_the_crd_printer_columns() {
    let mut r = Registry::default();
    r.add_crd(&json!({
        "spec": { "group": "example.com", "scope": "Namespaced",
            "names": { "plural": "pools", "kind": "Pool" },
            "versions": [
                { "name": "v1", "served": true, "storage": true, "additionalPrinterColumns": [
                    { "name": "Auto Assign", "type": "boolean", "jsonPath": ".spec.autoAssign" },
                    { "name": "Addresses", "type": "string", "jsonPath": ".spec.addresses" },
                    { "name": "First", "type": "string", "jsonPath": ".spec.addresses[0]" },
                    { "name": "Count", "type": "integer", "jsonPath": ".status.count", "priority": 1 },
                    { "name": "Since", "type": "date", "jsonPath": ".metadata.creationTimestamp" },
                ] },
                { "name": "v2", "served": true, "storage": false },
            ] },
    }))
    .expect("crd");
    let v1 = r.get("example.com", "v1", "pools").expect("v1").clone();
    assert_eq!(
        headers(&v1),
        [
            "Name:0",
            "Auto Assign:0",
            "Addresses:0",
            "First:0",
            "Count:1",
            "Since:0"
        ]
    );
    let pool = json!({ "metadata": { "name": "prod", "creationTimestamp": "2026-01-01T11:00:00Z" },
        "spec": { "autoAssign": false, "addresses": ["10.0.0.0/24", "fc00::/120"] }, "status": { "count": 3 } });
    let bare = json!({ "metadata": { "name": "bare" }, "spec": {} });
    assert_eq!(
        rows(&v1, &[pool.clone(), bare]),
        [
            "prod|false|[\"10.0.0.0/24\",\"fc00::/120\"]|10.0.0.0/24|3|60m",
            "bare|<nil>|<nil>|<nil>|<nil>|<nil>",
        ]
    );
    // A version without columns gets Age, as kube-apiserver serves it.
    let v2 = r.get("example.com", "v2", "pools").expect("v2").clone();
    assert_eq!(headers(&v2), ["Name:0", "Age:0"]);
    assert_eq!(rows(&v2, &[pool]), ["prod|60m"]);
}

#[test]
fn rows_carry_metadata_or_the_object_as_asked() {
    let t = builtin("", "namespaces");
    let ns = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "a", "labels": { "x": "y" } } });
    let meta = table(
        &t,
        std::slice::from_ref(&ns),
        9,
        "v1beta1",
        Include::Metadata,
        now(),
    );
    assert_eq!(meta["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(meta["metadata"]["resourceVersion"], "9");
    assert_eq!(meta["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(meta["rows"][0]["object"]["metadata"]["labels"]["x"], "y");
    let whole = table(
        &t,
        std::slice::from_ref(&ns),
        9,
        "v1",
        Include::Object,
        now(),
    );
    assert_eq!(whole["rows"][0]["object"], ns);
    let none = table(&t, &[ns], 9, "v1", Include::None, now());
    assert!(none["rows"][0].get("object").is_none());
}
