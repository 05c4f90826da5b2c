//! BGPPeer v1beta2: one BGP session per selected node.

use crate::api::v1beta1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// BGPPeerSpec defines the desired state of Peer.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metallb.io",
    version = "v1beta2",
    kind = "BGPPeer",
    plural = "bgppeers",
    namespaced,
    status = "BGPPeerStatus",
    derive = "PartialEq",
    storage = true,
    served = true,
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
    /// ASN and DynamicASN are mutually exclusive and one of them must be specified.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "peerASN")]
    #[schemars(range(max = 4294967295u32), extend("format" = "int64"))]
    pub peer_asn: Option<u32>,

    /// DynamicASN detects the AS number to use for the remote end of the session
    /// without explicitly setting it via the ASN field. Limited to:
    /// internal - if the neighbor's ASN is different than MyASN connection is denied.
    /// external - if the neighbor's ASN is the same as MyASN the connection is denied.
    /// ASN and DynamicASN are mutually exclusive and one of them must be specified.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "dynamicASN"
    )]
    pub dynamic_asn: Option<DynamicASNMode>,

    /// AS number to use for the local end of the session instead of myASN
    /// towards this peer (FRR `local-as`).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "localASN")]
    #[schemars(range(min = 1, max = 4294967295u32), extend("format" = "int64"))]
    pub local_asn: Option<u32>,

    /// Address to dial when establishing the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_address: Option<String>,

    /// Interface is the node interface over which the unnumbered BGP peering will
    /// be established. No API or K8S validation is performed, even if the interface
    /// does not exist on the node. PeerAddress and Interface are mutually exclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,

    /// Source address to use when establishing the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_address: Option<String>,

    /// Port to dial when establishing the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 16384), extend("default" = 179))]
    pub peer_port: Option<u16>,

    /// Requested BGP hold time, per RFC4271.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_time: Option<String>,

    /// Requested BGP keepalive time, per RFC4271.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive_time: Option<String>,

    /// Requested BGP connect time, controls how long BGP waits between connection attempts to a neighbor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "duration(self).getSeconds() >= 1 && duration(self).getSeconds() <= 65535",
        "message": "connect time should be between 1 seconds to 65535"
    }, {
        "rule": "duration(self).getMilliseconds() % 1000 == 0",
        "message": "connect time should contain a whole number of seconds"
    }]))]
    pub connect_time: Option<String>,

    /// BGP router ID to advertise to the peer
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "routerID")]
    pub router_id: Option<String>,

    /// Only connect to this peer on nodes that match one of these
    /// selectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selectors: Option<Vec<LabelSelector>>,

    /// Authentication password for routers enforcing TCP MD5 authenticated sessions
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,

    /// passwordSecret is name of the authentication secret for BGP Peer.
    /// the secret must be of type "kubernetes.io/basic-auth", and created in the
    /// same namespace as the MetalLB deployment. The password is stored in the
    /// secret as the key "password".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub password_secret: Option<SecretReference>,

    /// The name of the BFD Profile to be used for the BFD session associated to the BGP session.
    /// If not set, the BFD session won't be set up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd_profile: Option<String>,

    /// EnableGracefulRestart allows BGP peer to continue to forward data packets
    /// along known routes while the routing protocol information is being
    /// restored. This field is immutable because it requires restart of the BGP
    /// session. Supported for BGP mode FRR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "EnableGracefulRestart cannot be changed after creation"}]))]
    pub enable_graceful_restart: Option<bool>,

    /// To set if the BGPPeer is multi-hops away. Needed for FRR mode only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebgp_multi_hop: Option<bool>,

    /// To set if we want to peer with the BGPPeer using an interface belonging to
    /// a host vrf
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vrf: Option<String>,

    /// To set if we want to disable MP BGP that will separate IPv4 and IPv6 route exchanges into distinct BGP sessions.
    /// Deprecated: DisableMP is deprecated in favor of dualStackAddressFamily.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "disableMP")]
    #[schemars(extend("default" = false))]
    pub disable_mp: Option<bool>,

    /// To set if we want to enable the neighbor not only for the ipfamily related to its session,
    /// but also the other one. This allows to advertise/receive IPv4 prefixes over IPv6 sessions and vice versa.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub dual_stack_address_family: Option<bool>,
}

/// How the remote AS number is learned when `peerASN` is not set.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DynamicASNMode {
    /// The peer must use myASN (iBGP).
    Internal,
    /// The peer must use an AS other than myASN (eBGP).
    External,
}

/// SecretReference represents a Secret Reference. It has enough information to retrieve secret
/// in any namespace
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretReference {
    /// name is unique within a namespace to reference a secret resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// namespace defines the space within which the secret name must be unique.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// BGPPeerStatus defines the observed state of Peer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct BGPPeerStatus {}
