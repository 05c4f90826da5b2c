//! What this node announces over BGP for one service, and to which peers
//! (pure). Unlike layer 2 there is no election: every node that may
//! announce does, and the routers spread traffic over them (ECMP).
//!
//! Upstream's rule: the node must not be excluded (NetworkUnavailable, the
//! exclude-from-external-load-balancers label); the service needs a
//! serving endpoint (ExternalTrafficPolicy Local: one on this node); a
//! BGPAdvertisement must select the service's pool, the service
//! (serviceSelectors) and this node (nodeSelectors). Each address becomes
//! the prefix of the advertisement's aggregation length, sent to the
//! advertisement's peers (none named: every peer of this node) with its
//! LOCAL_PREF and communities. Advertisements that would send the service
//! with different LOCAL_PREFs (possible only through serviceSelectors,
//! which the configuration check skips) announce nothing.

use crate::config::{BgpAdvertisement, Community, Config, Peer, local_prefs_compatible};
use crate::speaker::election::{EXCLUDE_LB_LABEL, Endpoints, NodeInfo};
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// The attributes one prefix carries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteAttrs {
    /// LOCAL_PREF from the advertisement (sent on iBGP sessions only).
    pub local_pref: Option<u32>,
    /// Communities and large communities.
    pub communities: BTreeSet<Community>,
}

impl RouteAttrs {
    /// Two advertisements announce the same prefix to the same peer: the
    /// route carries both sets of communities and the higher preference.
    pub fn merge(&mut self, other: &RouteAttrs) {
        self.local_pref = self.local_pref.max(other.local_pref);
        self.communities.extend(other.communities.iter().copied());
    }
}

/// Prefixes per peer name.
pub type PeerRoutes = BTreeMap<String, BTreeMap<IpNet, RouteAttrs>>;

/// Why this node does not announce a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAnnounced {
    /// NetworkUnavailable is True on this node.
    NetworkUnavailable,
    /// The node carries the exclude-from-external-load-balancers label.
    Excluded,
    /// No endpoint is serving.
    NoServingEndpoints,
    /// ExternalTrafficPolicy Local and no serving endpoint here.
    NoLocalEndpoints,
    /// No BGPAdvertisement selects the pool, the service and this node.
    NoAdvertisement,
    /// Two advertisements for the service would send it with different
    /// LOCAL_PREFs (upstream's `checkBGPAdvConflicts`).
    ConflictingAdvertisements,
}

impl NotAnnounced {
    /// Whether the configuration is at fault (worth a warning, not a
    /// debug line).
    pub fn is_config_problem(self) -> bool {
        self == NotAnnounced::ConflictingAdvertisements
    }
}

impl std::fmt::Display for NotAnnounced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotAnnounced::NetworkUnavailable => "networkUnavailable",
            NotAnnounced::Excluded => "nodeExcludedFromLoadBalancers",
            NotAnnounced::NoServingEndpoints => "noServingEndpoints",
            NotAnnounced::NoLocalEndpoints => "noLocalEndpoints",
            NotAnnounced::NoAdvertisement => "noBGPAdvertisement",
            NotAnnounced::ConflictingAdvertisements => "conflictingAdvertisements",
        })
    }
}

/// One service as the rule sees it.
#[derive(Debug, Clone, Copy)]
pub struct Service<'a> {
    /// Its labels.
    pub labels: &'a BTreeMap<String, String>,
    /// ExternalTrafficPolicy Local.
    pub local: bool,
    /// Its ingress addresses.
    pub ips: &'a [IpAddr],
    /// The pool holding them.
    pub pool: &'a str,
    /// Its endpoints.
    pub endpoints: &'a Endpoints,
}

/// The peers whose sessions run on `node` (nodeSelectors; none = all).
pub fn peers_for_node<'a>(config: &'a Config, node: &NodeInfo) -> Vec<&'a Peer> {
    config
        .peers
        .iter()
        .filter(|p| {
            p.node_selectors.is_empty() || p.node_selectors.iter().any(|s| s.matches(&node.labels))
        })
        .collect()
}

fn selects(ad: &BgpAdvertisement, svc: &Service<'_>, node: &NodeInfo) -> bool {
    ad.pools.contains(svc.pool)
        && (ad.service_selectors.is_empty()
            || ad.service_selectors.iter().any(|s| s.matches(svc.labels)))
        && (ad.node_selectors.is_empty()
            || ad.node_selectors.iter().any(|s| s.matches(&node.labels)))
}

/// The routes `node` announces for `svc`, per peer; a peer named by an
/// advertisement but not running here gets nothing.
pub fn routes(
    config: &Config,
    node: &NodeInfo,
    svc: &Service<'_>,
    ignore_exclude_lb: bool,
) -> Result<PeerRoutes, NotAnnounced> {
    if node.network_unavailable {
        return Err(NotAnnounced::NetworkUnavailable);
    }
    if !ignore_exclude_lb && node.labels.contains_key(EXCLUDE_LB_LABEL) {
        return Err(NotAnnounced::Excluded);
    }
    if !svc.endpoints.any_serving {
        return Err(NotAnnounced::NoServingEndpoints);
    }
    if svc.local && !svc.endpoints.nodes.contains(&node.name) {
        return Err(NotAnnounced::NoLocalEndpoints);
    }
    let ads: Vec<&BgpAdvertisement> = config
        .bgp_advertisements
        .iter()
        .filter(|ad| selects(ad, svc, node))
        .collect();
    if ads.is_empty() {
        return Err(NotAnnounced::NoAdvertisement);
    }
    if let Some(pool) = config.pools.get(svc.pool) {
        for (i, a) in ads.iter().enumerate() {
            // All of them select this node: they share it.
            if ads[i + 1..]
                .iter()
                .any(|b| !local_prefs_compatible(a, b, pool, true))
            {
                return Err(NotAnnounced::ConflictingAdvertisements);
            }
        }
    }
    let peers = peers_for_node(config, node);
    let mut out = PeerRoutes::new();
    for ad in ads {
        let attrs = RouteAttrs {
            local_pref: ad.local_pref,
            communities: ad.communities.clone(),
        };
        for ip in svc.ips {
            let len = match ip {
                IpAddr::V4(_) => ad.aggregation_length,
                IpAddr::V6(_) => ad.aggregation_length_v6,
            };
            let Ok(prefix) = IpNet::new(*ip, len).map(|n| n.trunc()) else {
                continue;
            };
            for peer in peers
                .iter()
                .filter(|p| ad.peers.is_empty() || ad.peers.contains(&p.name))
            {
                out.entry(peer.name.clone())
                    .or_default()
                    .entry(prefix)
                    .and_modify(|a| a.merge(&attrs))
                    .or_insert_with(|| attrs.clone());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
