//! BGPPeer between v1beta1 and v1beta2, as upstream's conversion webhook
//! converts it (`api/v1beta1/bgppeer_conversion.go`: `ConvertTo`,
//! `ConvertFrom`, `labelsToLegacySelector`), and [`convert`], the one
//! object conversion the controller's `/convert` endpoint runs.
//!
//! v1beta1 -> v1beta2 is lossless. v1beta2 -> v1beta1 keeps every field
//! v1beta1 has and, as upstream, silently drops those it has not
//! ([`V1BETA2_ONLY`]); a peer without `peerASN` (dynamicASN) or without
//! `peerAddress` (interface) reads as `peerASN: 0` / `peerAddress: ""`.
//! Where upstream differs: a v1beta1 peer without holdTime or
//! keepaliveTime stays without it in v1beta2 (upstream writes `0s`), so
//! v1beta1 -> v1beta2 -> v1beta1 is the identity.
//!
//! Pure: no I/O; the wire format is `k8s::conversion_review`'s.

use super::v1beta1::{self, LabelSelector};
use super::v1beta2;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use serde_json::Value;

/// The v1beta2 spec fields v1beta1 cannot hold: v1beta2 -> v1beta1 drops
/// them.
pub const V1BETA2_ONLY: &[&str] = &[
    "dynamicASN",
    "localASN",
    "interface",
    "connectTime",
    "passwordSecret",
    "enableGracefulRestart",
    "vrf",
    "disableMP",
    "dualStackAddressFamily",
];

impl From<v1beta1::NodeSelector> for LabelSelector {
    fn from(s: v1beta1::NodeSelector) -> Self {
        LabelSelector {
            match_labels: s.match_labels,
            match_expressions: s.match_expressions.map(|exprs| {
                exprs
                    .into_iter()
                    .map(|e| LabelSelectorRequirement {
                        key: e.key,
                        operator: e.operator,
                        values: Some(e.values),
                    })
                    .collect()
            }),
        }
    }
}

impl From<LabelSelector> for v1beta1::NodeSelector {
    fn from(s: LabelSelector) -> Self {
        v1beta1::NodeSelector {
            match_labels: s.match_labels,
            match_expressions: s.match_expressions.map(|exprs| {
                exprs
                    .into_iter()
                    .map(|e| v1beta1::MatchExpression {
                        key: e.key,
                        operator: e.operator,
                        // v1beta1 requires the list; upstream writes it empty.
                        values: e.values.unwrap_or_default(),
                    })
                    .collect()
            }),
        }
    }
}

impl From<v1beta1::BGPPeerSpec> for v1beta2::BGPPeerSpec {
    fn from(s: v1beta1::BGPPeerSpec) -> Self {
        v1beta2::BGPPeerSpec {
            my_asn: s.my_asn,
            peer_asn: Some(s.peer_asn),
            peer_address: Some(s.peer_address),
            source_address: s.source_address,
            peer_port: s.peer_port,
            hold_time: s.hold_time,
            keepalive_time: s.keepalive_time,
            router_id: s.router_id,
            node_selectors: s
                .node_selectors
                .map(|list| list.into_iter().map(LabelSelector::from).collect()),
            password: s.password,
            bfd_profile: s.bfd_profile,
            ebgp_multi_hop: s.ebgp_multi_hop,
            ..Default::default()
        }
    }
}

impl From<v1beta2::BGPPeerSpec> for v1beta1::BGPPeerSpec {
    fn from(s: v1beta2::BGPPeerSpec) -> Self {
        // Spelled out field by field (no `..`): a field added to v1beta2
        // must be placed here or in V1BETA2_ONLY.
        let v1beta2::BGPPeerSpec {
            my_asn,
            peer_asn,
            dynamic_asn: _,
            local_asn: _,
            peer_address,
            interface: _,
            source_address,
            peer_port,
            hold_time,
            keepalive_time,
            connect_time: _,
            router_id,
            node_selectors,
            password,
            password_secret: _,
            bfd_profile,
            enable_graceful_restart: _,
            ebgp_multi_hop,
            vrf: _,
            disable_mp: _,
            dual_stack_address_family: _,
        } = s;
        v1beta1::BGPPeerSpec {
            my_asn,
            peer_asn: peer_asn.unwrap_or_default(),
            peer_address: peer_address.unwrap_or_default(),
            source_address,
            peer_port,
            hold_time,
            keepalive_time,
            router_id,
            node_selectors: node_selectors
                .map(|list| list.into_iter().map(v1beta1::NodeSelector::from).collect()),
            password,
            bfd_profile,
            ebgp_multi_hop,
        }
    }
}

impl From<v1beta1::BGPPeer> for v1beta2::BGPPeer {
    fn from(p: v1beta1::BGPPeer) -> Self {
        v1beta2::BGPPeer {
            metadata: p.metadata,
            spec: p.spec.into(),
            status: p.status.map(|_| v1beta2::BGPPeerStatus {}),
        }
    }
}

impl From<v1beta2::BGPPeer> for v1beta1::BGPPeer {
    fn from(p: v1beta2::BGPPeer) -> Self {
        v1beta1::BGPPeer {
            metadata: p.metadata,
            spec: p.spec.into(),
            status: p.status.map(|_| v1beta1::BGPPeerStatus {}),
        }
    }
}

/// A version BGPPeer is served at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1beta1,
    V1beta2,
}

impl Version {
    fn parse(api_version: &str) -> Option<Self> {
        match api_version.strip_prefix(super::GROUP)?.strip_prefix('/')? {
            "v1beta1" => Some(Self::V1beta1),
            "v1beta2" => Some(Self::V1beta2),
            _ => None,
        }
    }
}

/// Why an object could not be converted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConversionError {
    /// The requested version is not one BGPPeer has.
    #[error(
        "desiredAPIVersion {0:?} is not a BGPPeer version (metallb.io/v1beta1, metallb.io/v1beta2)"
    )]
    DesiredVersion(String),
    /// Not a BGPPeer of a version MetalLB converts.
    #[error(
        "{object}: {field} {value:?} is not converted by MetalLB (only BGPPeer metallb.io/v1beta1, metallb.io/v1beta2)"
    )]
    NotConverted {
        /// `kind "ns/name"` of the object.
        object: String,
        /// `kind` or `apiVersion`.
        field: &'static str,
        /// What the object says.
        value: String,
    },
    /// The object does not read as its version.
    #[error("{object}: not a valid {api_version} BGPPeer: {message}")]
    Unreadable {
        /// `bgppeer "ns/name"`.
        object: String,
        /// The object's apiVersion.
        api_version: String,
        /// Field path and serde's complaint.
        message: String,
    },
}

/// `kind "namespace/name"` of a raw object, for messages.
fn describe(object: &Value) -> String {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or("<no name>");
    let kind = object["kind"].as_str().unwrap_or("object").to_lowercase();
    match meta["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => format!("{kind} \"{ns}/{name}\""),
        _ => format!("{kind} \"{name}\""),
    }
}

/// `object` (a BGPPeer, as the API server stores or serves it) at
/// `desired`. The metadata comes back exactly as it came: the API server
/// refuses a conversion that changes anything in it but labels and
/// annotations, and upstream copies it whole.
pub fn convert(object: &Value, desired: &str) -> Result<Value, ConversionError> {
    let to = Version::parse(desired)
        .ok_or_else(|| ConversionError::DesiredVersion(desired.to_owned()))?;
    let not_converted = |field: &'static str| ConversionError::NotConverted {
        object: describe(object),
        field,
        value: object[field].as_str().unwrap_or_default().to_owned(),
    };
    if object["kind"] != "BGPPeer" {
        return Err(not_converted("kind"));
    }
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let from = Version::parse(api_version).ok_or_else(|| not_converted("apiVersion"))?;
    if from == to {
        return Ok(object.clone());
    }
    let unreadable =
        |e: serde_path_to_error::Error<serde_json::Error>| ConversionError::Unreadable {
            object: describe(object),
            api_version: api_version.to_owned(),
            message: format!("{}: {}", e.path(), e.inner()),
        };
    let mut converted = match from {
        Version::V1beta1 => {
            let peer: v1beta1::BGPPeer =
                serde_path_to_error::deserialize(object).map_err(unreadable)?;
            serde_json::to_value(v1beta2::BGPPeer::from(peer))
        }
        Version::V1beta2 => {
            let peer: v1beta2::BGPPeer =
                serde_path_to_error::deserialize(object).map_err(unreadable)?;
            serde_json::to_value(v1beta1::BGPPeer::from(peer))
        }
    }
    .expect("API types serialize");
    if let Some(meta) = object.get("metadata") {
        converted["metadata"] = meta.clone();
    }
    Ok(converted)
}

#[cfg(test)]
mod tests;
