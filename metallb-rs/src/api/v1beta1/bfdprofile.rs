//! BFDProfile: BFD session parameters referenced by BGPPeers.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// BFDProfileSpec defines the desired state of BFDProfile.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metallb.io",
    version = "v1beta1",
    kind = "BFDProfile",
    plural = "bfdprofiles",
    namespaced,
    status = "BFDProfileStatus",
    derive = "PartialEq",
    doc = "BFDProfile represents the settings of the bfd session that can be optionally associated with a BGP session.",
    printcolumn(
        name = "Passive Mode",
        type_ = "boolean",
        json_path = ".spec.passiveMode"
    ),
    printcolumn(
        name = "Transmit Interval",
        type_ = "integer",
        json_path = ".spec.transmitInterval"
    ),
    printcolumn(
        name = "Receive Interval",
        type_ = "integer",
        json_path = ".spec.receiveInterval"
    ),
    printcolumn(
        name = "Multiplier",
        type_ = "integer",
        json_path = ".spec.detectMultiplier"
    )
)]
#[serde(rename_all = "camelCase")]
#[serde(remote = "Self")]
pub struct BFDProfileSpec {
    /// The minimum interval that this system is capable of
    /// receiving control packets in milliseconds.
    /// Defaults to 300ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 60000))]
    pub receive_interval: Option<u32>,

    /// The minimum transmission interval (less jitter)
    /// that this system wants to use to send BFD control packets in
    /// milliseconds. Defaults to 300ms
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 60000))]
    pub transmit_interval: Option<u32>,

    /// Configures the detection multiplier to determine
    /// packet loss. The remote transmission interval will be multiplied
    /// by this value to determine the connection loss detection timer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 255))]
    pub detect_multiplier: Option<u32>,

    /// Configures the minimal echo receive transmission
    /// interval that this system is capable of handling in milliseconds.
    /// Defaults to 50ms
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 60000))]
    pub echo_interval: Option<u32>,

    /// Enables or disables the echo transmission mode.
    /// This mode is disabled by default, and not supported on multi
    /// hops setups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo_mode: Option<bool>,

    /// Mark session as passive: a passive session will not
    /// attempt to start the connection and will wait for control packets
    /// from peer before it begins replying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passive_mode: Option<bool>,

    /// For multi hop sessions only: configure the minimum
    /// expected TTL for an incoming BFD control packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 254))]
    pub minimum_ttl: Option<u32>,
}

/// BFDProfileStatus defines the observed state of BFDProfile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct BFDProfileStatus {}

crate::api::spec_may_be_omitted!(BFDProfileSpec);
