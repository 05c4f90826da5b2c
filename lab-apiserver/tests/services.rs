//! Services as kube-apiserver's registry makes them: cluster IPs, the
//! status subresource, and health check node ports while
//! `externalTrafficPolicy` is Local.

mod common;

use common::start;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn services_get_cluster_ips_and_a_status_subresource() {
    let (_server, client) = start().await;
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "generateName": "web-" },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80 }], "selector": { "app": "web" } },
    }))
    .expect("svc");
    let created = svcs
        .create(&PostParams::default(), &svc)
        .await
        .expect("created");
    let name = created.metadata.name.clone().expect("generated name");
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    let spec = created.spec.clone().expect("spec");
    assert!(
        spec.cluster_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("10.96."))
    );
    assert!(spec.ports.as_ref().expect("ports")[0].node_port.is_some());

    let status = json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "172.30.0.100" }] } } });
    let patched = svcs
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("status");
    let ingress = |s: &Service| {
        s.status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|l| l.ingress.clone())
            .unwrap_or_default()
    };
    assert_eq!(ingress(&patched)[0].ip.as_deref(), Some("172.30.0.100"));
    // A write to the main resource leaves status alone.
    let mut changed = patched.clone();
    changed.status = None;
    changed.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
    let replaced = svcs
        .replace(&name, &PostParams::default(), &changed)
        .await
        .expect("replaced");
    assert_eq!(ingress(&replaced).len(), 1, "status kept");
    assert_eq!(
        replaced
            .spec
            .as_ref()
            .and_then(|s| s.health_check_node_port),
        None,
        "no health check port with the Cluster policy"
    );
}

#[tokio::test]
async fn local_load_balancers_get_a_health_check_node_port_while_local() {
    let (_server, client) = start().await;
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{ "port": 80 }] },
    }))
    .expect("svc");
    let created = svcs
        .create(&PostParams::default(), &svc)
        .await
        .expect("created");
    let spec = created.spec.clone().expect("spec");
    let port = spec.health_check_node_port.expect("healthCheckNodePort");
    assert!((30000..=32767).contains(&port), "{port}");
    assert_ne!(Some(port), spec.ports.expect("ports")[0].node_port);
    // Kept by an update that leaves it out (as clusterIP is), gone with
    // the Local policy.
    let mut without = created.clone();
    if let Some(spec) = without.spec.as_mut() {
        spec.health_check_node_port = None;
    }
    let labelled = svcs
        .replace("web", &PostParams::default(), &without)
        .await
        .expect("replaced");
    assert_eq!(
        labelled
            .spec
            .as_ref()
            .and_then(|s| s.health_check_node_port),
        Some(port)
    );
    let cluster = svcs
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "externalTrafficPolicy": "Cluster" } })),
        )
        .await
        .expect("cluster");
    assert_eq!(
        cluster.spec.as_ref().and_then(|s| s.health_check_node_port),
        None
    );
}
