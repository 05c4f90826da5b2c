//! ConfigurationState: whether the controller's and each speaker's view of
//! the MetalLB configuration is valid.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// ConfigurationStateSpec is empty: the object only carries status.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "ConfigurationState",
    plural = "configurationstates",
    namespaced,
    no_spec,
    status = "ConfigurationStateStatus",
    derive = "PartialEq",
    doc = "ConfigurationState is a status-only CRD that reports configuration validation results from MetalLB components.\nLabels:\n  - metallb.io/component-type: \"controller\" or \"speaker\"\n  - metallb.io/node-name: node name (only for speaker)",
    printcolumn(name = "Result", type_ = "string", json_path = ".status.result"),
    printcolumn(
        name = "ErrorSummary",
        type_ = "string",
        json_path = ".status.errorSummary"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct ConfigurationStateSpec {}

/// Result of validating a component's configuration.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConfigurationResult {
    /// Configuration is valid and active.
    Valid,
    /// Configuration has errors.
    Invalid,
    /// Validation status cannot be determined.
    Unknown,
}

/// ConfigurationStateStatus defines the observed state of ConfigurationState.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationStateStatus {
    /// Result indicates the configuration validation result.
    /// Possible values:
    /// - "Valid": Configuration is valid and active
    /// - "Invalid": Configuration has errors
    /// - "Unknown": Validation status cannot be determined
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ConfigurationResult>,
    /// ErrorSummary contains the aggregated error messages from reconciliation failures.
    /// This field is empty when Result is "Valid".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_summary: Option<String>,
    /// Conditions contains the status conditions from the reconcilers running in this component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}
