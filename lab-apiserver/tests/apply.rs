//! Server-side apply over HTTP: the real `kubectl apply --server-side`
//! (create, change, conflict, `--force-conflicts`), and kube's
//! `Patch::Apply` for keyed lists, dry runs and the RBAC a create
//! through apply needs.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// `managedFields` as `manager operation fieldsV1` lines.
fn managers(object: &Value) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{} {} {}",
                e["manager"].as_str().unwrap_or_default(),
                e["operation"].as_str().unwrap_or_default(),
                e["fieldsV1"]
            )
        })
        .collect()
}

/// The ConfigMap the kubectl test applies, with its managedFields.
async fn get(kc: &std::path::Path) -> Value {
    let args = [
        "get",
        "configmap",
        "settings",
        "-o",
        "json",
        "--show-managed-fields",
    ];
    let (ok, out) = kubectl_async(kc, &args, None).await;
    assert!(ok, "{out}");
    serde_json::from_str(&out).expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_owns_fields_and_conflicts() {
    if !kubectl_or_skip() {
        return;
    }
    let (server, _admin) = start().await;
    let dir = tempfile::tempdir().expect("tmp");
    let kc = dir.path().join("kubeconfig");
    server.write_kubeconfig("lab", &kc).expect("kubeconfig");
    let cm = |data: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: default}}\ndata: {data}\n"
        )
    };
    let (ok, out) = kubectl_async(
        &kc,
        &["apply", "--server-side", "-f", "-"],
        Some(&cm("{a: '1', b: '2'}")),
    )
    .await;
    assert!(
        ok && out.contains("configmap/settings serverside-applied"),
        "{out}"
    );
    let (ok, out) = kubectl_async(
        &kc,
        &["apply", "--server-side", "-f", "-"],
        Some(&cm("{a: '3'}")),
    )
    .await;
    assert!(ok && out.contains("serverside-applied"), "{out}");
    let live = get(&kc).await;
    assert_eq!(
        live["data"],
        json!({ "a": "3" }),
        "b, dropped by its only manager, is gone"
    );
    assert_eq!(managers(&live), [r#"kubectl Apply {"f:data":{"f:a":{}}}"#]);
    let entry = &live["metadata"]["managedFields"][0];
    assert_eq!(
        (
            &entry["apiVersion"],
            &entry["fieldsType"],
            entry["time"].is_string()
        ),
        (&json!("v1"), &json!("FieldsV1"), true)
    );

    let other = ["apply", "--server-side", "--field-manager=other", "-f", "-"];
    let (ok, out) = kubectl_async(&kc, &other, Some(&cm("{a: '9'}"))).await;
    assert!(
        !ok && out.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .data.a"#),
        "{out}"
    );
    assert_eq!(
        get(&kc).await["data"],
        json!({ "a": "3" }),
        "a conflict changes nothing"
    );
    let forced = [&other[..], &["--force-conflicts"]].concat();
    let (ok, out) = kubectl_async(&kc, &forced, Some(&cm("{a: '9'}"))).await;
    assert!(ok, "{out}");
    let live = get(&kc).await;
    assert_eq!(live["data"], json!({ "a": "9" }));
    assert_eq!(
        managers(&live),
        [r#"other Apply {"f:data":{"f:a":{}}}"#],
        "kubectl lost its only field, and with it its entry"
    );
    server.stop();
}

#[tokio::test]
async fn patch_apply_merges_keyed_lists_and_honours_dry_run() {
    let (server, admin) = start().await;
    let services: Api<Service> = Api::namespaced(admin.clone(), "default");
    let svc = |ports: Value| {
        Patch::Apply(json!({
            "apiVersion": "v1", "kind": "Service", "metadata": { "name": "web" },
            "spec": { "selector": { "app": "web" }, "ports": ports },
        }))
    };
    services
        .patch(
            "web",
            &PatchParams::apply("one"),
            &svc(json!([{ "port": 80, "name": "http" }])),
        )
        .await
        .expect("created by apply");
    let dry = PatchParams::apply("two").dry_run();
    let answered = services
        .patch("web", &dry, &svc(json!([{ "port": 443, "name": "https" }])))
        .await
        .expect("dry run");
    assert_eq!(
        answered.spec.and_then(|s| s.ports).map(|p| p.len()),
        Some(2)
    );
    let ports = |s: Service| -> Vec<i32> {
        s.spec
            .and_then(|s| s.ports)
            .unwrap_or_default()
            .iter()
            .map(|p| p.port)
            .collect()
    };
    assert_eq!(
        ports(services.get("web").await.expect("get")),
        [80],
        "dry run stored nothing"
    );
    let merged = services
        .patch(
            "web",
            &PatchParams::apply("two"),
            &svc(json!([{ "port": 443, "name": "https" }])),
        )
        .await
        .expect("second manager adds a port");
    assert_eq!(ports(merged), [80, 443], "ports merge by port");
    let conflict = services
        .patch(
            "web",
            &PatchParams::apply("two"),
            &svc(json!([{ "port": 80, "name": "web" }])),
        )
        .await
        .expect_err("one owns port 80's name");
    let kube::Error::Api(status) = conflict else {
        panic!("an API error: {conflict}");
    };
    assert_eq!(
        (status.code, status.reason.as_str(), status.message.as_str()),
        (
            409,
            "Conflict",
            r#"Apply failed with 1 conflict: conflict with "one": .spec.ports[port=80].name"#
        )
    );
    server.stop();
}

#[tokio::test]
async fn apply_that_creates_needs_create_as_well_as_patch() {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let (server, admin) = start().await;
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "patcher" },
        "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"] }],
    }))
    .expect("role");
    Api::<Role>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "patcher" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "patcher" },
        "subjects": [{ "kind": "User", "name": "alice" }],
    }))
    .expect("binding");
    Api::<RoleBinding>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
    let alice: Api<ConfigMap> = Api::namespaced(
        client_for(&server.kubeconfig_as("lab", "alice", &[])).await,
        "default",
    );
    let cm = Patch::Apply(
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "c" }, "data": { "k": "v" } }),
    );
    let refused = alice
        .patch("c", &PatchParams::apply("alice"), &cm)
        .await
        .expect_err("no create");
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403 && s.message.contains("cannot create resource \"configmaps\"")),
        "{refused}"
    );
    let created: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "c" } })).expect("cm");
    Api::<ConfigMap>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &created)
        .await
        .expect("created by the admin");
    let applied = alice
        .patch("c", &PatchParams::apply("alice"), &cm)
        .await
        .expect("patch is enough for an object that is there");
    assert_eq!(
        applied.data.and_then(|d| d.get("k").cloned()).as_deref(),
        Some("v")
    );
    server.stop();
}
