//! Community: named aliases for BGP community values.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// CommunitySpec defines the desired state of Community.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "Community",
    plural = "communities",
    namespaced,
    status = "CommunityStatus",
    derive = "PartialEq",
    doc = "Community is a collection of aliases for communities.\nUsers can define named aliases to be used in the BGPPeer CRD."
)]
#[serde(rename_all = "camelCase")]
#[serde(remote = "Self")]
pub struct CommunitySpec {
    /// The named aliases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub communities: Option<Vec<CommunityAlias>>,
}

/// One named community value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CommunityAlias {
    /// The name of the alias for the community.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The BGP community value corresponding to the given name. Can be a standard community of the form 1234:1234
    /// or a large community of the form large:1234:1234:1234.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// CommunityStatus defines the observed state of Community.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CommunityStatus {}

crate::api::spec_may_be_omitted!(CommunitySpec);
