//! Small objects and answers the suites driving the server through kube's
//! client share: a namespace created, a ConfigMap to write, an error's
//! status code.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

/// Creates namespace `name`.
pub async fn namespace(client: &Client, name: &str) {
    let ns: Namespace =
        serde_json::from_value(json!({ "metadata": { "name": name } })).expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
}

/// A ConfigMap `name` with `labels` and one data key.
pub fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(
        json!({ "metadata": { "name": name, "labels": labels }, "data": { "k": "v" } }),
    )
    .expect("cm")
}

/// The HTTP status of an API error; anything else fails the test.
pub fn status_code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other}"),
    }
}
