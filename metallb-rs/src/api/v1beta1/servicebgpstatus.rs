//! ServiceBGPStatus: which peers a node announces a service to, written by
//! the speakers (one object per service and node).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// ServiceBGPStatusSpec defines the desired state of ServiceBGPStatus.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "ServiceBGPStatus",
    plural = "servicebgpstatuses",
    namespaced,
    status = "MetalLBServiceBGPStatus",
    derive = "PartialEq",
    doc = "ServiceBGPStatus exposes the BGP peers a service is configured to be advertised to, per relevant node.",
    printcolumn(name = "Node", type_ = "string", json_path = ".status.node"),
    printcolumn(
        name = "Service Name",
        type_ = "string",
        json_path = ".status.serviceName"
    ),
    printcolumn(
        name = "Service Namespace",
        type_ = "string",
        json_path = ".status.serviceNamespace"
    )
)]
#[serde(remote = "Self")]
pub struct ServiceBGPStatusSpec {}

/// MetalLBServiceBGPStatus defines the observed state of ServiceBGPStatus.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetalLBServiceBGPStatus {
    /// Node indicates the node announcing the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "Value is immutable"}]))]
    pub node: Option<String>,
    /// ServiceName indicates the service this status represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "Value is immutable"}]))]
    pub service_name: Option<String>,
    /// ServiceNamespace indicates the namespace of the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "Value is immutable"}]))]
    pub service_namespace: Option<String>,
    /// Peers indicate the BGP peers for which the service is configured to be advertised to.
    /// The service being actually advertised to a given peer depends on the session state and is not indicated here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<String>>,
}

crate::api::spec_may_be_omitted!(ServiceBGPStatusSpec);
