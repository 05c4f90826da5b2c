//! What every run derives from its seed and size alone: independent
//! numbers from one seed, the addresses, and upstream's election order
//! of the Nodes that exist for each address.

use crate::clock::NodeId;
use crate::node;
use metallb_rs::config::L2Advertisement;
use metallb_rs::speaker::election::{self, Endpoints, NodeInfo};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

/// The addresses: two per node, at least six.
pub fn addresses(n: usize) -> Vec<IpAddr> {
    (0..(2 * n).max(6))
        .map(|i| {
            let [_, _, x, y] = u32::try_from(i).unwrap_or(u32::MAX).to_be_bytes();
            IpAddr::V4(Ipv4Addr::new(192, 168, x, y))
        })
        .collect()
}

/// Every node in upstream's election order for each address, from
/// `election::ranking` (one L2Advertisement for all, every node serving).
pub fn election_order(infos: &[NodeInfo], addrs: &[IpAddr]) -> anyhow::Result<Vec<Vec<NodeId>>> {
    let ad = L2Advertisement {
        name: "sim".into(),
        pools: BTreeSet::from(["sim".to_owned()]),
        node_selectors: Vec::new(),
        interfaces: Vec::new(),
        service_selectors: Vec::new(),
        preferred_node_selectors: Vec::new(),
    };
    let ads = [ad];
    let endpoints = Endpoints {
        any_serving: true,
        nodes: BTreeSet::new(),
    };
    let labels = BTreeMap::new();
    addrs
        .iter()
        .map(|ip| {
            let input = election::Input {
                service_labels: &labels,
                shared: false,
                local: false,
                first_ip: *ip,
                pool: "sim",
                advertisements: &ads,
                nodes: infos,
                alive: None,
                endpoints: &endpoints,
                ignore_exclude_lb: false,
            };
            let (ranked, _) =
                election::ranking(&input).map_err(|e| anyhow::anyhow!("ranking {ip}: {e}"))?;
            ranked
                .iter()
                .map(|n| node::id_of(&n.name).ok_or_else(|| anyhow::anyhow!("no node {}", n.name)))
                .collect()
        })
        .collect()
}
