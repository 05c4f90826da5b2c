//! IPAddressPool: the addresses MetalLB may hand out.

use super::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// IPAddressPoolSpec defines the desired state of IPAddressPool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "IPAddressPool",
    plural = "ipaddresspools",
    namespaced,
    status = "IPAddressPoolStatus",
    derive = "PartialEq",
    doc = "IPAddressPool represents a pool of IP addresses that can be allocated to LoadBalancer services.",
    printcolumn(
        name = "Auto Assign",
        type_ = "boolean",
        json_path = ".spec.autoAssign"
    ),
    printcolumn(
        name = "Avoid Buggy IPs",
        type_ = "boolean",
        json_path = ".spec.avoidBuggyIPs"
    ),
    printcolumn(name = "Addresses", type_ = "string", json_path = ".spec.addresses")
)]
#[serde(rename_all = "camelCase")]
pub struct IPAddressPoolSpec {
    /// A list of IP address ranges over which MetalLB has authority.
    /// You can list multiple ranges in a single pool, they will all share the
    /// same settings. Each range can be either a CIDR prefix, or an explicit
    /// start-end range of IPs.
    pub addresses: Vec<String>,

    /// AutoAssign flag used to prevent MetallB from automatic allocation
    /// for a pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub auto_assign: Option<bool>,

    /// AvoidBuggyIPs prevents addresses ending with .0 and .255
    /// to be used by a pool.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "avoidBuggyIPs"
    )]
    #[schemars(extend("default" = false))]
    pub avoid_buggy_ips: Option<bool>,

    /// AllocateTo makes ip pool allocation to specific namespace and/or service.
    /// The controller will use the pool with lowest value of priority in case of
    /// multiple matches. A pool with no priority set will be used only if the
    /// pools with priority can't be used. If multiple matching IPAddressPools are
    /// available it will check for the availability of IPs sorting the matching
    /// IPAddressPools by priority, starting from the highest to the lowest. If
    /// multiple IPAddressPools have the same priority, the pool whose name sorts
    /// first is used (upstream picks at random).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_allocation: Option<ServiceAllocation>,
}

/// ServiceAllocation defines how services are allocated to a pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAllocation {
    /// Priority priority given for ip pool while ip allocation on a service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::int")]
    pub priority: Option<i64>,

    /// Namespaces list of namespace(s) on which ip pool can be attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,

    /// NamespaceSelectors list of label selectors to select namespace(s) for ip pool,
    /// an alternative to using namespace list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selectors: Option<Vec<LabelSelector>>,

    /// ServiceSelectors list of label selector to select service(s) for which ip pool
    /// can be used for ip allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_selectors: Option<Vec<LabelSelector>>,
}

/// IPAddressPoolStatus defines the observed state of IPAddressPool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPAddressPoolStatus {
    /// AssignedIPv4 is the number of assigned IPv4 addresses.
    #[serde(rename = "assignedIPv4")]
    pub assigned_ipv4: i64,
    /// AssignedIPv6 is the number of assigned IPv6 addresses.
    #[serde(rename = "assignedIPv6")]
    pub assigned_ipv6: i64,
    /// AvailableIPv4 is the number of available IPv4 addresses.
    #[serde(rename = "availableIPv4")]
    pub available_ipv4: i64,
    /// AvailableIPv6 is the number of available IPv6 addresses.
    #[serde(rename = "availableIPv6")]
    pub available_ipv6: i64,
}
