//! ServiceL2Status: which node announces a service over layer 2, written by
//! the speakers (one object per service and node).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// ServiceL2StatusSpec defines the desired state of ServiceL2Status.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "ServiceL2Status",
    plural = "servicel2statuses",
    namespaced,
    status = "MetalLBServiceL2Status",
    derive = "PartialEq",
    doc = "ServiceL2Status reveals the actual traffic status of loadbalancer services in layer2 mode.",
    printcolumn(name = "Allocated Node", type_ = "string", json_path = ".status.node"),
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
pub struct ServiceL2StatusSpec {}

/// MetalLBServiceL2Status defines the observed state of ServiceL2Status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetalLBServiceL2Status {
    /// Node indicates the node that receives the directed traffic
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "Value is immutable"}]))]
    pub node: Option<String>,
    /// ServiceName indicates the service this status represents
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "Value is immutable"}]))]
    pub service_name: Option<String>,
    /// ServiceNamespace indicates the namespace of the service
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "Value is immutable"}]))]
    pub service_namespace: Option<String>,
    /// Interfaces indicates the interfaces that receive the directed traffic
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<InterfaceInfo>>,
}

/// InterfaceInfo defines interface info of layer2 announcement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct InterfaceInfo {
    /// Name the name of network interface card
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

crate::api::spec_may_be_omitted!(ServiceL2StatusSpec);
