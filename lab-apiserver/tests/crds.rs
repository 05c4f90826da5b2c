//! Applied CustomResourceDefinitions: custom objects served with their
//! schema's defaults, and 422s for what the schema refuses.

mod common;

use common::objects::status_code;
use common::{install_metallb_crds, start};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn applied_crds_serve_custom_objects_with_schema_defaults_and_422s() {
    let (_server, client) = start().await;
    install_metallb_crds(&client).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pools = common::pools(&client, "metallb-system");
    let pool: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": { "name": "p" }, "spec": { "addresses": ["172.30.0.100-172.30.0.120"], "unknownField": 1 },
    }))
    .expect("pool");
    let created = pools
        .create(&PostParams::default(), &pool)
        .await
        .expect("created");
    assert_eq!(
        created.data["spec"]["autoAssign"],
        json!(true),
        "schema default applied"
    );
    assert_eq!(created.data["spec"]["avoidBuggyIPs"], json!(false));
    assert!(created.data["spec"].get("unknownField").is_none(), "pruned");

    // Raw JSON, as kubectl would send it: addresses is not a list.
    let raw = pools.clone();
    let bad: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": { "name": "bad" }, "spec": { "addresses": "172.30.0.1/32", "autoAssign": "yes" },
    }))
    .expect("object");
    match raw
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("invalid")
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message.contains("spec.addresses: ") && s.message.contains("spec.autoAssign: "),
                "{}",
                s.message
            );
        }
        other => panic!("{other}"),
    }
    // Replacing a custom object that never had a status (as dev-env does
    // with its BGP objects) keeps it without one.
    let current = raw.get("p").await.expect("p");
    let mut replacement: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": { "name": "p", "resourceVersion": current.metadata.resource_version },
        "spec": { "addresses": ["172.30.0.100-172.30.0.110"] },
    }))
    .expect("object");
    replacement.metadata.namespace = None;
    let replaced = raw
        .replace("p", &PostParams::default(), &replacement)
        .await
        .expect("replaced");
    assert_eq!(
        replaced.data["spec"]["addresses"],
        json!(["172.30.0.100-172.30.0.110"])
    );
    assert!(replaced.data.get("status").is_none_or(|s| !s.is_null()));
    // Deleting the CRD removes its objects and stops serving it.
    crds.delete("ipaddresspools.metallb.io", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(
        status_code(pools.get("p").await.expect_err("not served")),
        404
    );
}
