//! BGPPeer v1beta1: served for old manifests, deprecated in favour of
//! v1beta2 (the storage version).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// BGPPeerSpec defines the desired state of Peer.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "BGPPeer",
    plural = "bgppeers",
    namespaced,
    status = "BGPPeerStatus",
    derive = "PartialEq",
    storage = false,
    served = true,
    deprecated = "v1beta1 is deprecated, please use v1beta2",
    doc = "BGPPeer is the Schema for the peers API.",
    printcolumn(name = "Address", type_ = "string", json_path = ".spec.peerAddress"),
    printcolumn(name = "ASN", type_ = "string", json_path = ".spec.peerASN"),
    printcolumn(name = "BFD Profile", type_ = "string", json_path = ".spec.bfdProfile"),
    printcolumn(
        name = "Multi Hops",
        type_ = "string",
        json_path = ".spec.ebgpMultiHop"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BGPPeerSpec {
    /// AS number to use for the local end of the session.
    #[serde(rename = "myASN")]
    #[schemars(range(max = 4294967295u32), extend("format" = "int64"))]
    pub my_asn: u32,

    /// AS number to expect from the remote end of the session.
    #[serde(rename = "peerASN")]
    #[schemars(range(max = 4294967295u32), extend("format" = "int64"))]
    pub peer_asn: u32,

    /// Address to dial when establishing the session.
    pub peer_address: String,

    /// Source address to use when establishing the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_address: Option<String>,

    /// Port to dial when establishing the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 16384))]
    pub peer_port: Option<u16>,

    /// Requested BGP hold time, per RFC4271.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_time: Option<String>,

    /// Requested BGP keepalive time, per RFC4271.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive_time: Option<String>,

    /// BGP router ID to advertise to the peer
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "routerID")]
    pub router_id: Option<String>,

    /// Only connect to this peer on nodes that match one of these
    /// selectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selectors: Option<Vec<NodeSelector>>,

    /// Authentication password for routers enforcing TCP MD5 authenticated sessions
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,

    /// The name of the BFD Profile to be used for the BFD session associated to the BGP session.
    /// If not set, the BFD session won't be set up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd_profile: Option<String>,

    /// EBGP peer is multi-hops away
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebgp_multi_hop: Option<bool>,
}

/// v1beta1's node selector: label matches plus expressions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub match_labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub match_expressions: Option<Vec<MatchExpression>>,
}

/// One expression of a v1beta1 node selector.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MatchExpression {
    #[allow(missing_docs)]
    pub key: String,
    #[allow(missing_docs)]
    pub operator: String,
    #[schemars(length(min = 1))]
    #[allow(missing_docs)]
    pub values: Vec<String>,
}

/// BGPPeerStatus defines the observed state of Peer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct BGPPeerStatus {}
