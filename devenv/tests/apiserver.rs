//! The lab's own pieces against its API server (the `lab-apiserver`
//! crate, in process, no root needed): the MetalLB API bootstrap that `up`
//! runs, and the EndpointSlice controller of `lab-controller-manager`.

use devenv::wait::eventually_async;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn the_metallb_api_bootstrap_is_idempotent() {
    use devenv::lab::cluster::{Webhooks, install_metallb_api};
    let (_server, client) = test_support::start().await;
    install_metallb_api(&client, Webhooks::Installed)
        .await
        .expect("installed");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let before = crds.list(&ListParams::default()).await.expect("list");
    assert_eq!(before.items.len(), metallb_rs::api::crds().len());
    install_metallb_api(&client, Webhooks::Installed)
        .await
        .expect("a second run changes nothing");
    let after = crds.list(&ListParams::default()).await.expect("list");
    let versions = |l: &kube::core::ObjectList<CustomResourceDefinition>| {
        l.items
            .iter()
            .map(|c| c.metadata.resource_version.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(versions(&before), versions(&after), "no CRD rewritten");
}

#[tokio::test]
async fn the_bootstrap_keeps_the_conversion_ca_bundle_the_controller_injected() {
    use devenv::lab::cluster::{Webhooks, install_metallb_api};
    let (_server, client) = test_support::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = metallb_rs::k8s::webhook::CONVERSION_CRD;
    let bundle = |crd: &CustomResourceDefinition| {
        let conversion = crd.spec.conversion.as_ref()?;
        let config = conversion.webhook.as_ref()?.client_config.as_ref()?;
        Some(
            config
                .ca_bundle
                .as_ref()
                .map(|b| b.0.clone())
                .unwrap_or_default(),
        )
    };
    install_metallb_api(&client, Webhooks::Installed)
        .await
        .expect("installed");
    let fresh = crds.get(name).await.expect("bgppeers");
    assert_eq!(bundle(&fresh), Some(vec![]), "converted, no caBundle yet");
    // What the controller's certificate loop does.
    crds.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": "Q0E="}}}}}),
        ),
    )
    .await
    .expect("caBundle set");
    let injected = crds.get(name).await.expect("bgppeers");
    install_metallb_api(&client, Webhooks::Installed)
        .await
        .expect("installed again");
    let kept = crds.get(name).await.expect("bgppeers");
    assert_eq!(bundle(&kept), Some(b"CA".to_vec()));
    assert_eq!(
        kept.metadata.resource_version, injected.metadata.resource_version,
        "not rewritten"
    );
    // A lab without the controller: BGPPeer converts by itself again.
    install_metallb_api(&client, Webhooks::Absent)
        .await
        .expect("installed without webhooks");
    let plain = crds.get(name).await.expect("bgppeers");
    assert_eq!(bundle(&plain), None);
}

#[tokio::test]
async fn the_endpointslice_controller_follows_pod_readiness() {
    let (_server, client) = test_support::start().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(devenv::lab::endpoints::run(client.clone(), async {
        let _ = stopped.await;
    }));
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "selector": { "app": "web" }, "ports": [{ "port": 80, "targetPort": 8080 }] },
    }))
    .expect("service");
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &svc)
        .await
        .expect("service created");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "web-1", "labels": { "app": "web" } },
        "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "x" }] },
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    pods.patch_status(
        "web-1",
        &PatchParams::default(),
        &Patch::Merge(
            json!({ "status": { "podIP": "10.0.0.5", "podIPs": [{ "ip": "10.0.0.5" }],
            "conditions": [{ "type": "Ready", "status": "True" }] } }),
        ),
    )
    .await
    .expect("status");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    eventually_async(
        Duration::from_secs(10),
        "one ready endpoint 10.0.0.5 for web",
        || async {
            let list = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
                .await?;
            let ready: Vec<String> = list
                .items
                .iter()
                .flat_map(|s| s.endpoints.iter())
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                .flat_map(|e| e.addresses.clone())
                .collect();
            if ready != ["10.0.0.5"] {
                anyhow::bail!("slices {:?}", list.items);
            }
            Ok(Some(()))
        },
    )
    .await
    .expect("the controller made the slice");
    let _ = stop.send(());
    controller.await.expect("controller stops");
}
