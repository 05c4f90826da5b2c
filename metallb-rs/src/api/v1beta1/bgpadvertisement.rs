//! BGPAdvertisement: which pools are announced to which BGP peers, with
//! which aggregation, local preference and communities.

use super::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// BGPAdvertisementSpec defines the desired state of BGPAdvertisement.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "BGPAdvertisement",
    plural = "bgpadvertisements",
    namespaced,
    status = "BGPAdvertisementStatus",
    derive = "PartialEq",
    doc = "BGPAdvertisement allows to advertise the IPs coming from the selected IPAddressPools via BGP, setting the parameters of the BGP Advertisement.",
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
    printcolumn(name = "Peers", type_ = "string", json_path = ".spec.peers"),
    printcolumn(
        name = "Node Selectors",
        type_ = "string",
        json_path = ".spec.nodeSelectors",
        priority = "10"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.serviceSelectors) || self.serviceSelectors.size() == 0 || ((!has(self.aggregationLength) || self.aggregationLength == 32) && (!has(self.aggregationLengthV6) || self.aggregationLengthV6 == 128))",
    "message": "serviceSelectors and aggregationLength are mutually exclusive, can only be used together with default aggregationLength (32) and aggregationLengthV6 (128)"
}]))]
#[serde(remote = "Self")]
pub struct BGPAdvertisementSpec {
    /// The aggregation-length advertisement option lets you “roll up” the /32s into a larger prefix. Defaults to 32. Works for IPv4 addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 32))]
    pub aggregation_length: Option<i32>,

    /// The aggregation-length advertisement option lets you “roll up” the /128s into a larger prefix. Defaults to 128. Works for IPv6 addresses.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "aggregationLengthV6"
    )]
    #[schemars(extend("default" = 128))]
    pub aggregation_length_v6: Option<i32>,

    /// The BGP LOCAL_PREF attribute which is used by BGP best path algorithm,
    /// Path with higher localpref is preferred over one with lower localpref.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::int32")]
    pub local_pref: Option<u32>,

    /// The BGP communities to be associated with the announcement. Each item can be a standard community of the
    /// form 1234:1234, a large community of the form large:1234:1234:1234 or the name of an alias defined in the
    /// Community CRD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub communities: Option<Vec<String>>,

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

    /// Peers limits the bgppeer to advertise the ips of the selected pools to.
    /// When empty, the loadbalancer IP is announced to all the BGPPeers configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<String>>,

    /// ServiceSelectors restricts the advertisement to services matching one
    /// of the selectors; only allowed with the default aggregation lengths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_selectors: Option<Vec<LabelSelector>>,
}

/// BGPAdvertisementStatus defines the observed state of BGPAdvertisement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct BGPAdvertisementStatus {}

crate::api::spec_may_be_omitted!(BGPAdvertisementSpec);
