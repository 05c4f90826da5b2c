//! L2Advertisement: which pools are announced over ARP/NDP, from which
//! nodes and interfaces.

use super::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// L2AdvertisementSpec defines the desired state of L2Advertisement.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "L2Advertisement",
    plural = "l2advertisements",
    namespaced,
    status = "L2AdvertisementStatus",
    derive = "PartialEq",
    doc = "L2Advertisement allows to advertise the LoadBalancer IPs provided by the selected pools via L2.",
    printcolumn(
        name = "IPAddressPools",
        type_ = "string",
        json_path = ".spec.ipAddressPools"
    ),
    printcolumn(
        name = "IPAddressPool Selectors",
        type_ = "string",
        json_path = ".spec.ipAddressPoolSelectors"
    ),
    printcolumn(name = "Interfaces", type_ = "string", json_path = ".spec.interfaces"),
    printcolumn(
        name = "Node Selectors",
        type_ = "string",
        json_path = ".spec.nodeSelectors",
        priority = "10"
    )
)]
#[serde(rename_all = "camelCase")]
#[serde(remote = "Self")]
pub struct L2AdvertisementSpec {
    /// The list of IPAddressPools to advertise via this advertisement, selected by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address_pools: Option<Vec<String>>,

    /// A selector for the IPAddressPools which would get advertised via this advertisement.
    /// If no IPAddressPool is selected by this or by the list, the advertisement is applied to all the IPAddressPools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address_pool_selectors: Option<Vec<LabelSelector>>,

    /// NodeSelectors allows to limit the nodes to announce as next hops for the LoadBalancer IP. When empty, all the nodes having  are announced as next hops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selectors: Option<Vec<LabelSelector>>,

    /// A list of interfaces to announce from. The LB IP will be announced only from these interfaces.
    /// If the field is not set, we advertise from all the interfaces on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<String>>,

    /// ServiceSelectors restricts the advertisement to services matching one of
    /// the selectors. Services matching a selector cannot share an IP with
    /// allow-shared-ip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_selectors: Option<Vec<LabelSelector>>,

    /// PreferredNodeSelectors orders the candidate nodes: the weights of the
    /// terms a node matches are summed and the highest sum announces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_node_selectors: Option<Vec<PreferredNodeSelector>>,
}

/// A weighted node preference for layer 2 announcements.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PreferredNodeSelector {
    /// Weight associated with matching the corresponding preference, in the range 1-100.
    #[schemars(range(min = 1, max = 100))]
    pub weight: i32,
    /// A node selector term, associated with the corresponding weight.
    pub preference: LabelSelector,
}

/// L2AdvertisementStatus defines the observed state of L2Advertisement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct L2AdvertisementStatus {}

crate::api::spec_may_be_omitted!(L2AdvertisementSpec);
