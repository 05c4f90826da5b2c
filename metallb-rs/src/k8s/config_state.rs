//! ConfigurationState objects: whether a component's view of the MetalLB
//! configuration is valid (`controller`, `speaker-<node>`), and what in a
//! valid one is ignored (warnings: a second condition, `<reconciler>Warnings`,
//! status True, reason `ConfigurationWarning`; it never makes the result
//! Invalid, since upstream's rule counts only False conditions with
//! reason ConfigurationError).

use super::call::{CallError, call};
use crate::api::v1beta1::{ConfigurationResult, ConfigurationState};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The type of the warnings condition beside validity condition
/// `condition` (`configReconcilerValid` -> `configReconcilerWarnings`).
pub fn warnings_condition(condition: &str) -> String {
    format!(
        "{}Warnings",
        condition.strip_suffix("Valid").unwrap_or(condition)
    )
}

/// The status conditions: validity, plus the warnings of a valid
/// configuration when there are any. `summary` is the errors (invalid)
/// or the warnings (valid), one per line.
pub fn conditions(
    condition: &str,
    result: &ConfigurationResult,
    summary: &str,
    now: &str,
) -> Value {
    let valid = *result == ConfigurationResult::Valid;
    let mut list = vec![json!({
        "type": condition,
        "status": if valid { "True" } else { "False" },
        "reason": if valid { "Reconciled" } else { "ConfigurationError" },
        "message": if valid { "" } else { summary },
        "lastTransitionTime": now,
    })];
    if valid && !summary.is_empty() {
        list.push(json!({
            "type": warnings_condition(condition),
            "status": "True",
            "reason": "ConfigurationWarning",
            "message": summary,
            "lastTransitionTime": now,
        }));
    }
    Value::Array(list)
}

/// Creates ConfigurationState `name` (with `labels`) if missing and sets
/// its status: `result`, the error summary, and the [`conditions`].
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
            "conditions": conditions(condition, result, summary, &now),
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

    /// The latest configuration is valid and in force; `warnings` name
    /// what it ignores (logged when they change, shown as a condition).
    pub async fn valid(&mut self, warnings: &[crate::config::ConfigWarning]) {
        self.metrics.config_loaded.set(1);
        self.metrics.config_stale.set(0);
        let summary = warnings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        let changed = self
            .last
            .as_ref()
            .is_none_or(|(r, s)| *r != ConfigurationResult::Valid || *s != summary);
        if changed {
            for w in warnings {
                tracing::warn!(warning = %w, "configuration loaded with a warning");
            }
        }
        self.write(ConfigurationResult::Valid, summary).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// The conditions written for each outcome: (type, status, reason,
    /// message) per condition.
    #[rstest]
    #[case::valid(ConfigurationResult::Valid, "", &[("configReconcilerValid", "True", "Reconciled", "")])]
    #[case::valid_with_warnings(ConfigurationResult::Valid, "w1\nw2", &[
        ("configReconcilerValid", "True", "Reconciled", ""),
        ("configReconcilerWarnings", "True", "ConfigurationWarning", "w1\nw2"),
    ])]
    #[case::invalid(ConfigurationResult::Invalid, "e1", &[("configReconcilerValid", "False", "ConfigurationError", "e1")])]
    fn condition_per_outcome(
        #[case] result: ConfigurationResult,
        #[case] summary: &str,
        #[case] expected: &[(&str, &str, &str, &str)],
    ) {
        let got = conditions("configReconcilerValid", &result, summary, "now");
        let got: Vec<(String, String, String, String)> = got
            .as_array()
            .expect("list")
            .iter()
            .map(|c| {
                let f = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
                (f("type"), f("status"), f("reason"), f("message"))
            })
            .collect();
        let want: Vec<(String, String, String, String)> = expected
            .iter()
            .map(|(a, b, c, d)| ((*a).into(), (*b).into(), (*c).into(), (*d).into()))
            .collect();
        assert_eq!(got, want);
        // Upstream's ConfigurationState reconciler: Invalid only from a
        // False condition with reason ConfigurationError.
        let invalid = got
            .iter()
            .any(|(_, status, reason, _)| status == "False" && reason == "ConfigurationError");
        assert_eq!(invalid, result == ConfigurationResult::Invalid);
    }

    #[test]
    fn warnings_condition_names() {
        assert_eq!(
            warnings_condition("poolReconcilerValid"),
            "poolReconcilerWarnings"
        );
        assert_eq!(
            warnings_condition("configReconcilerValid"),
            "configReconcilerWarnings"
        );
    }
}
