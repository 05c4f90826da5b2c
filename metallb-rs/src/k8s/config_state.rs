//! ConfigurationState objects: whether a component's view of the MetalLB
//! configuration is valid (`controller`, `speaker-<node>`).

use super::call::{CallError, call};
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
) -> Result<(), CallError> {
    let api: Api<ConfigurationState> = Api::namespaced(client.clone(), namespace);
    if call(api.get_opt(name)).await?.is_none() {
        let obj: ConfigurationState = serde_json::from_value(json!({
            "apiVersion": "metallb.io/v1beta1",
            "kind": "ConfigurationState",
            "metadata": { "name": name, "labels": labels },
        }))
        .map_err(|e| CallError::Api(kube::Error::SerdeError(e)))?;
        match call(api.create(&PostParams::default(), &obj)).await {
            // Created meanwhile by ourselves in an earlier attempt: fine.
            Ok(_) | Err(CallError::Api(kube::Error::Api(_))) => {}
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
    call(api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))).await?;
    Ok(())
}

/// Reports one component's configuration results: the
/// `metallb_k8s_client_config_*` gauges, an error log when the errors
/// change, and the ConfigurationState object, written only on change.
pub struct Reporter {
    client: kube::Client,
    namespace: String,
    name: String,
    labels: Value,
    condition: &'static str,
    metrics: crate::metrics::K8sClientMetrics,
    last: Option<(ConfigurationResult, String)>,
}

impl Reporter {
    /// The reporter of ConfigurationState `namespace/name`.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        labels: Value,
        condition: &'static str,
        metrics: crate::metrics::K8sClientMetrics,
    ) -> Self {
        Self {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            labels,
            condition,
            metrics,
            last: None,
        }
    }

    /// The latest configuration is valid and in force.
    pub async fn valid(&mut self) {
        self.metrics.config_loaded.set(1);
        self.metrics.config_stale.set(0);
        self.write(ConfigurationResult::Valid, String::new()).await;
    }

    /// The latest configuration is invalid (`summary` lists every error).
    /// As upstream, `config_stale_bool` turns 1 whether or not a valid one
    /// loaded before; `config_loaded_bool` tells the two cases apart.
    pub async fn invalid(&mut self, summary: String) {
        if self.last.as_ref().is_none_or(|(_, s)| *s != summary) {
            if self.metrics.config_loaded.get() == 1 {
                tracing::error!(errors = %summary, "invalid configuration: keeping the last valid one");
            } else {
                tracing::error!(errors = %summary, "invalid configuration and none loaded yet: changing nothing until a valid one arrives");
            }
        }
        self.metrics.config_stale.set(1);
        self.write(ConfigurationResult::Invalid, summary).await;
    }

    async fn write(&mut self, result: ConfigurationResult, summary: String) {
        let state = (result, summary);
        if self.last.as_ref() == Some(&state) {
            return;
        }
        match write(
            &self.client,
            &self.namespace,
            &self.name,
            self.labels.clone(),
            self.condition,
            &state.0,
            &state.1,
        )
        .await
        {
            Ok(()) => self.last = Some(state),
            Err(e) => tracing::warn!(error = %e, "could not write ConfigurationState"),
        }
    }
}
