//! BGPPeer v1beta1 -> v1beta2, what upstream's conversion webhook does.
//! v1beta2 is a superset, so the conversion is lossless.

use super::v1beta1::{self, LabelSelector};
use super::v1beta2;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

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

impl From<v1beta1::BGPPeer> for v1beta2::BGPPeer {
    fn from(p: v1beta1::BGPPeer) -> Self {
        v1beta2::BGPPeer {
            metadata: p.metadata,
            spec: p.spec.into(),
            status: p.status.map(|_| v1beta2::BGPPeerStatus {}),
        }
    }
}
