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
use std::sync::Arc;
use tokio::sync::Mutex;

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

/// The last result a [`Reporter`] wrote: what its object must show.
type Reported = Arc<Mutex<Option<(ConfigurationResult, String)>>>;

/// Where a [`Reporter`] writes: its object, labels and condition type.
#[derive(Clone)]
struct Target {
    client: kube::Client,
    namespace: String,
    name: String,
    labels: Value,
    condition: &'static str,
}

impl Target {
    async fn write(&self, state: &(ConfigurationResult, String)) -> Result<(), CallError> {
        write(
            &self.client,
            &self.namespace,
            &self.name,
            self.labels.clone(),
            self.condition,
            &state.0,
            &state.1,
        )
        .await
    }
}

/// Reports one component's configuration results: the
/// `metallb_k8s_client_config_*` gauges, an error log when the errors
/// change, and the ConfigurationState object, written on change and
/// repaired whenever someone deletes it or edits its status (as
/// upstream's reconcilers, which own the object).
pub struct Reporter {
    target: Target,
    metrics: crate::metrics::K8sClientMetrics,
    last: Reported,
    repair: tokio::task::JoinHandle<()>,
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.repair.abort();
    }
}

impl Reporter {
    /// The reporter of ConfigurationState `namespace/name`. Starts the
    /// watch that repairs the object (needs a tokio runtime).
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        labels: Value,
        condition: &'static str,
        metrics: crate::metrics::K8sClientMetrics,
    ) -> Self {
        let target = Target {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            labels,
            condition,
        };
        let last: Reported = Arc::default();
        let repair = tokio::spawn(repair(target.clone(), last.clone()));
        Self {
            target,
            metrics,
            last,
            repair,
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
            .lock()
            .await
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
        let changed = self
            .last
            .lock()
            .await
            .as_ref()
            .is_none_or(|(_, s)| *s != summary);
        if changed {
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
        // Held across the call so a repair never writes an older result
        // after this one.
        let mut last = self.last.lock().await;
        if last.as_ref() == Some(&state) {
            return;
        }
        match self.target.write(&state).await {
            Ok(()) => *last = Some(state),
            Err(e) => tracing::warn!(error = %e, "could not write ConfigurationState"),
        }
    }
}

/// Whether `object` (None: it does not exist) shows what was reported.
fn shows(object: Option<&ConfigurationState>, reported: &(ConfigurationResult, String)) -> bool {
    let Some(status) = object.and_then(|o| o.status.as_ref()) else {
        return false;
    };
    let summary = status.error_summary.as_deref().unwrap_or_default();
    status.result.as_ref() == Some(&reported.0)
        && (reported.0 == ConfigurationResult::Valid || summary == reported.1)
}

/// Watches the reporter's own object and writes the last reported result
/// again when the object is deleted or its status no longer shows it.
async fn repair(target: Target, last: Reported) {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let api: Api<ConfigurationState> = Api::namespaced(target.client.clone(), &target.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", target.name));
    let mut stream = std::pin::pin!(watcher(api, config).default_backoff());
    // Whether the object appeared in the list being received.
    let mut listed = false;
    while let Some(event) = stream.next().await {
        let object = match &event {
            Ok(watcher::Event::Init) => {
                listed = false;
                continue;
            }
            Ok(watcher::Event::InitApply(o)) => {
                listed = true;
                Some(o)
            }
            Ok(watcher::Event::InitDone) if listed => continue,
            Ok(watcher::Event::InitDone | watcher::Event::Delete(_)) => None,
            Ok(watcher::Event::Apply(o)) => Some(o),
            Err(e) => {
                tracing::warn!(error = %e, "ConfigurationState watch failed, retrying");
                continue;
            }
        };
        let last = last.lock().await;
        let Some(reported) = last.as_ref() else {
            continue;
        };
        if shows(object, reported) {
            continue;
        }
        tracing::info!(name = %target.name, "ConfigurationState deleted or edited: writing it again");
        if let Err(e) = target.write(reported).await {
            tracing::warn!(error = %e, "could not repair ConfigurationState");
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

    /// When the repair watch writes the object again: (object's result,
    /// object's summary, reported result, reported summary) -> shown.
    #[rstest]
    #[case::missing(None, ConfigurationResult::Valid, "", false)]
    #[case::same_valid(Some((ConfigurationResult::Valid, None)), ConfigurationResult::Valid, "", true)]
    #[case::valid_warnings_not_in_summary(Some((ConfigurationResult::Valid, None)), ConfigurationResult::Valid, "w1", true)]
    #[case::edited_to_invalid(Some((ConfigurationResult::Invalid, Some("x"))), ConfigurationResult::Valid, "", false)]
    #[case::edited_to_valid(Some((ConfigurationResult::Valid, None)), ConfigurationResult::Invalid, "e1", false)]
    #[case::same_invalid(Some((ConfigurationResult::Invalid, Some("e1"))), ConfigurationResult::Invalid, "e1", true)]
    #[case::summary_edited(Some((ConfigurationResult::Invalid, Some("e2"))), ConfigurationResult::Invalid, "e1", false)]
    fn repair_rewrites_unless_shown(
        #[case] object: Option<(ConfigurationResult, Option<&str>)>,
        #[case] reported: ConfigurationResult,
        #[case] summary: &str,
        #[case] expected: bool,
    ) {
        let object: Option<ConfigurationState> = object.map(|(result, summary)| {
            serde_json::from_value(json!({
                "metadata": { "name": "speaker-a" },
                "status": { "result": result, "errorSummary": summary },
            }))
            .expect("object")
        });
        assert_eq!(
            shows(object.as_ref(), &(reported, summary.to_owned())),
            expected
        );
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
