//! The events a speaker publishes about a service, with upstream's reasons
//! and texts (pure):
//!
//! 1. `nodeAssigned` (Normal) after every successful announcement of a
//!    service, as upstream's `handleService` emits it on every reconcile;
//!    the recorder's spam filter bounds how many reach the API.
//! 2. `announceFailed` (Warning), one per address, every time the
//!    interfaces a service's L2Advertisements name exist on none of this
//!    node's eligible interfaces (upstream's layer 2 `SetBalancer`).

use crate::event::EventSpec;
use std::net::IpAddr;

/// The protocols a speaker announces with, as upstream names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// ARP/NDP.
    Layer2,
    /// BGP.
    Bgp,
}

impl Protocol {
    /// Its name in events and metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Layer2 => "layer2",
            Protocol::Bgp => "bgp",
        }
    }
}

/// `announcing from node "<node>" with protocol "<protocol>"`.
pub fn node_assigned(node: &str, protocol: Protocol) -> EventSpec {
    EventSpec::normal(
        "nodeAssigned",
        format!(
            "announcing from node {node:?} with protocol {:?}",
            protocol.name()
        ),
    )
}

/// One `announceFailed` per address of a service none of whose
/// interfaces exist on `node`.
pub fn announce_failed(ips: &[IpAddr], node: &str) -> Vec<EventSpec> {
    ips.iter()
        .map(|ip| {
            EventSpec::warning(
                "announceFailed",
                format!(
                    "the interfaces specified by LB IP \"{ip}\" doesn't exist in assigned node {node:?} with protocol {:?}",
                    Protocol::Layer2.name()
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_assigned_texts() {
        assert_eq!(
            node_assigned("n1", Protocol::Layer2).message,
            r#"announcing from node "n1" with protocol "layer2""#
        );
        assert_eq!(
            node_assigned("n1", Protocol::Bgp).message,
            r#"announcing from node "n1" with protocol "bgp""#
        );
    }

    #[test]
    fn announce_failed_one_per_address() {
        let ips: Vec<IpAddr> = vec![
            "10.0.0.1".parse().expect("ip"),
            "fc00::1".parse().expect("ip"),
        ];
        let got: Vec<String> = announce_failed(&ips, "n1")
            .into_iter()
            .map(|e| format!("{:?} {}: {}", e.type_, e.reason, e.message))
            .collect();
        assert_eq!(
            got,
            [
                r#"Warning announceFailed: the interfaces specified by LB IP "10.0.0.1" doesn't exist in assigned node "n1" with protocol "layer2""#,
                r#"Warning announceFailed: the interfaces specified by LB IP "fc00::1" doesn't exist in assigned node "n1" with protocol "layer2""#,
            ]
        );
    }
}
