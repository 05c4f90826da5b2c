//! ConfigurationState objects: whether a component's view of the MetalLB
//! configuration is valid (`controller`, `speaker-<node>`).

use crate::api::v1beta1::{ConfigurationResult, ConfigurationState};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Creates ConfigurationState `name` (with `labels`) if missing and sets
/// its status: `result`, the error summary, and condition `condition`.
pub async fn write(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    labels: Value,
    condition: &str,
    result: &ConfigurationResult,
    summary: &str,
) -> Result<(), kube::Error> {
    let api: Api<ConfigurationState> = Api::namespaced(client.clone(), namespace);
    if api.get_opt(name).await?.is_none() {
        let obj: ConfigurationState = serde_json::from_value(json!({
            "apiVersion": "metallb.io/v1beta1",
            "kind": "ConfigurationState",
            "metadata": { "name": name, "labels": labels },
        }))
        .map_err(kube::Error::SerdeError)?;
        match api.create(&PostParams::default(), &obj).await {
            // Created meanwhile by ourselves in an earlier attempt: fine.
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let valid = *result == ConfigurationResult::Valid;
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let patch = json!({
        "status": {
            "result": result,
            "errorSummary": if valid { Value::Null } else { json!(summary) },
            "conditions": [{
                "type": condition,
                "status": if valid { "True" } else { "False" },
                "reason": if valid { "Reconciled" } else { "ConfigurationError" },
                "message": if valid { "" } else { summary },
                "lastTransitionTime": now,
            }],
        }
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}
