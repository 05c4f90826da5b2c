//! Which node announces a service's addresses in layer 2 (upstream's
//! `ShouldAnnounce`, with preferred node selectors). Every speaker
//! evaluates the same pure function on the same inputs and so agrees
//! without talking to the others.
//!
//! 1. No serving endpoint: nobody announces.
//! 2. The advertisements for the service: L2Advertisements of its pool
//!    whose serviceSelectors match it (none = all services). A service
//!    that shares its IP may not be selected by serviceSelectors (two
//!    sharing services could elect different nodes).
//! 3. Candidates: nodes with a speaker (membership, or every Node), minus
//!    NetworkUnavailable=True, minus the exclude-from-external-load-
//!    balancers label (unless ignored), covered by at least one of those
//!    advertisements' nodeSelectors; for ExternalTrafficPolicy Local only
//!    nodes with a serving endpoint.
//! 4. Order: summed preferredNodeSelectors weight (each advertisement
//!    scores only nodes it covers) descending, then
//!    sha256(node + "#" + first IP) ascending. The first announces.
//!    Hashing the IP keeps services sharing it, and both families of a
//!    dual-stack service, on one node.

use crate::config::L2Advertisement;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// The label that keeps a node out of load balancing.
pub const EXCLUDE_LB_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// What election needs of a Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// The NetworkUnavailable condition is True.
    pub network_unavailable: bool,
    /// The Ready condition is True (election ignores it, as upstream;
    /// `liveness` uses it to tell a lost node).
    pub ready: bool,
    /// Tainted `node.kubernetes.io/out-of-service` (`liveness`).
    pub out_of_service: bool,
}

/// The taint an admin puts on a node that is gone for good.
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

impl NodeInfo {
    /// From a Node object.
    pub fn from_node(node: &Node) -> Self {
        let condition = |kind: &str| {
            node.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == kind && c.status == "True"))
        };
        Self {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            network_unavailable: condition("NetworkUnavailable"),
            ready: condition("Ready"),
            out_of_service: node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT)),
        }
    }
}

/// A service's endpoints as election sees them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Endpoints {
    /// At least one endpoint is serving.
    pub any_serving: bool,
    /// Nodes with a serving endpoint.
    pub nodes: BTreeSet<String>,
}

impl Endpoints {
    /// From the service's EndpointSlices: an endpoint serves when `ready`
    /// is unset or true, or `serving` is true (terminating but serving).
    pub fn from_slices<'a>(slices: impl IntoIterator<Item = &'a EndpointSlice>) -> Self {
        let mut out = Endpoints::default();
        for ep in slices.into_iter().flat_map(|s| s.endpoints.iter()) {
            let c = ep.conditions.as_ref();
            let ready = c.and_then(|c| c.ready).unwrap_or(true);
            let serving = c.and_then(|c| c.serving).unwrap_or(false);
            if ready || serving {
                out.any_serving = true;
                if let Some(n) = &ep.node_name {
                    out.nodes.insert(n.clone());
                }
            }
        }
        out
    }

    /// A service's endpoints from those of each of its slices.
    pub fn merge(parts: &mut dyn Iterator<Item = &SliceEndpoints>) -> Self {
        let mut out = Endpoints::default();
        for p in parts {
            out.any_serving |= p.any_serving;
            out.nodes.extend(p.nodes.iter().cloned());
        }
        out
    }
}

/// One EndpointSlice as election reads it, kept per slice between
/// batches (a list of names, much smaller than a set of one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SliceEndpoints {
    any_serving: bool,
    nodes: Box<[String]>,
}

impl SliceEndpoints {
    /// What election reads of `slice`.
    pub fn of(slice: &EndpointSlice) -> Self {
        let e = Endpoints::from_slices([slice]);
        Self {
            any_serving: e.any_serving,
            nodes: e.nodes.into_iter().collect(),
        }
    }
}

/// Which interfaces to announce from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interfaces {
    /// Every eligible interface.
    All,
    /// Only these (those that exist).
    Named(BTreeSet<String>),
}

impl Interfaces {
    /// Whether interface `name` is selected.
    pub fn includes(&self, name: &str) -> bool {
        match self {
            Interfaces::All => true,
            Interfaces::Named(n) => n.contains(name),
        }
    }

    /// The union of two selections.
    pub fn union(self, other: Interfaces) -> Interfaces {
        match (self, other) {
            (Interfaces::Named(mut a), Interfaces::Named(b)) => {
                a.extend(b);
                Interfaces::Named(a)
            }
            _ => Interfaces::All,
        }
    }
}

/// Why this node does not announce (upstream's reason strings in `Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotOwner {
    /// No serving endpoint anywhere.
    NoServingEndpoints,
    /// The pool has no L2Advertisement matching the service.
    NoAdvertisement,
    /// The service shares its IP and an advertisement selects services.
    SharedIpWithServiceSelector,
    /// No advertisement for the service covers this node.
    NoMatchingAdvertisement,
    /// Another node won.
    NotElected {
        /// The winner, if any node qualifies.
        winner: Option<String>,
    },
}

impl std::fmt::Display for NotOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotOwner::NoServingEndpoints => f.write_str("noServingEndpoints"),
            NotOwner::NoAdvertisement => f.write_str("noL2Advertisement"),
            NotOwner::SharedIpWithServiceSelector => f.write_str("sharedIPWithServiceSelector"),
            NotOwner::NoMatchingAdvertisement => f.write_str("noMatchingAdvertisement"),
            NotOwner::NotElected { winner: Some(w) } => write!(f, "notOwner (elected: {w})"),
            NotOwner::NotElected { winner: None } => f.write_str("notOwner (no eligible node)"),
        }
    }
}

/// The outcome for this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Announce, from these interfaces.
    Announce(Interfaces),
    /// Do not.
    NotOwner(NotOwner),
}

/// Everything election looks at for one service.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The service's labels.
    pub service_labels: &'a BTreeMap<String, String>,
    /// It has a non-empty allow-shared-ip key.
    pub shared: bool,
    /// ExternalTrafficPolicy Local.
    pub local: bool,
    /// Its first ingress address.
    pub first_ip: IpAddr,
    /// The pool holding its addresses.
    pub pool: &'a str,
    /// Every L2Advertisement of the configuration.
    pub advertisements: &'a [L2Advertisement],
    /// Every node.
    pub nodes: &'a [NodeInfo],
    /// Nodes with a live speaker (None: assume every node has one).
    pub alive: Option<&'a BTreeSet<String>>,
    /// Its endpoints.
    pub endpoints: &'a Endpoints,
    /// `--ignore-exclude-lb`.
    pub ignore_exclude_lb: bool,
}

fn covers(ad: &L2Advertisement, node: &NodeInfo) -> bool {
    ad.node_selectors.is_empty() || ad.node_selectors.iter().any(|s| s.matches(&node.labels))
}

/// The advertisements that apply to the service.
pub fn advertisements_for<'a>(input: &Input<'a>) -> Vec<&'a L2Advertisement> {
    input
        .advertisements
        .iter()
        .filter(|ad| ad.pools.contains(input.pool))
        .filter(|ad| {
            ad.service_selectors.is_empty()
                || ad
                    .service_selectors
                    .iter()
                    .any(|s| s.matches(input.service_labels))
        })
        .collect()
}

/// sha256(node + "#" + ip), without building the string: election
/// hashes every candidate of every service it decides.
fn hash_key(node: &str, ip: IpAddr) -> [u8; 32] {
    use std::io::Write;
    // The longest address text (an IPv4-mapped IPv6 address) is 45 bytes.
    let mut text = std::io::Cursor::new([0u8; 48]);
    let written = write!(text, "{ip}").is_ok();
    let len = usize::try_from(text.position()).unwrap_or(0);
    let mut h = Sha256::new();
    h.update(node.as_bytes());
    h.update(b"#");
    if written {
        h.update(&text.get_ref()[..len]);
    } else {
        h.update(ip.to_string().as_bytes());
    }
    h.finalize().into()
}

/// The advertisements that apply, or why no node may announce: the checks
/// that come before any node is looked at.
fn applicable<'a>(input: &Input<'a>) -> Result<Vec<&'a L2Advertisement>, NotOwner> {
    if !input.endpoints.any_serving {
        return Err(NotOwner::NoServingEndpoints);
    }
    let ads = advertisements_for(input);
    if ads.is_empty() {
        return Err(NotOwner::NoAdvertisement);
    }
    if input.shared && ads.iter().any(|ad| !ad.service_selectors.is_empty()) {
        return Err(NotOwner::SharedIpWithServiceSelector);
    }
    Ok(ads)
}

/// `n`'s preference score when it is a candidate (rule 3), None when not.
fn score(input: &Input<'_>, ads: &[&L2Advertisement], n: &NodeInfo) -> Option<i64> {
    let candidate = input.alive.is_none_or(|a| a.contains(&n.name))
        && !n.network_unavailable
        && (input.ignore_exclude_lb || !n.labels.contains_key(EXCLUDE_LB_LABEL))
        && ads.iter().any(|ad| covers(ad, n))
        && (!input.local || input.endpoints.nodes.contains(&n.name));
    candidate.then(|| {
        ads.iter()
            .filter(|ad| covers(ad, n))
            .flat_map(|ad| ad.preferred_node_selectors.iter())
            .filter(|(_, sel)| sel.matches(&n.labels))
            .map(|(w, _)| i64::from(*w))
            .sum()
    })
}

/// Candidates in election order (best first), and the advertisements
/// that applied; `Err` when no node can announce at all. Sorts every
/// candidate: for diagnostics and tests; [`decide`] only finds the first.
pub fn ranking<'a>(
    input: &Input<'a>,
) -> Result<(Vec<&'a NodeInfo>, Vec<&'a L2Advertisement>), NotOwner> {
    let ads = applicable(input)?;
    let mut candidates: Vec<(i64, [u8; 32], &NodeInfo)> = input
        .nodes
        .iter()
        .filter_map(|n| Some((score(input, &ads, n)?, hash_key(&n.name, input.first_ip), n)))
        .collect();
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok((candidates.into_iter().map(|(_, _, n)| n).collect(), ads))
}

/// A candidate's place in the order: higher score first, then lower
/// hash.
pub type Rank = (i64, [u8; 32]);

/// The best of `nodes` by [`Rank`], starting from `best`: one pass, no
/// sort, no allocation per node, and no hash for a node whose score
/// already loses.
fn best_of<'a>(
    input: &Input<'_>,
    ads: &[&L2Advertisement],
    nodes: impl IntoIterator<Item = &'a NodeInfo>,
    mut best: Option<(Rank, &'a NodeInfo)>,
) -> Option<(Rank, &'a NodeInfo)> {
    for n in nodes {
        let Some(s) = score(input, ads, n) else {
            continue;
        };
        if best.as_ref().is_some_and(|((b, _), _)| s < *b) {
            continue;
        }
        let h = hash_key(&n.name, input.first_ip);
        if best.as_ref().is_none_or(|((b, bh), _)| s > *b || h < *bh) {
            best = Some(((s, h), n));
        }
    }
    best
}

/// The first of [`ranking`]'s order.
fn winner<'a>(input: &Input<'a>, ads: &[&L2Advertisement]) -> Option<(Rank, &'a NodeInfo)> {
    best_of(input, ads, input.nodes, None)
}

/// Whether `me` announces, and from which interfaces.
pub fn decide(input: &Input<'_>, me: &str) -> Decision {
    decide_with(input, me, |ads| winner(input, ads).map(|(_, n)| n))
}

/// [`decide`], with the winner found through `memo` (see [`memo::Memo`]):
/// the same decision, from what changed since the service was last
/// decided rather than from every node. Returns what to remember for
/// `key` (None: nothing, the service has no candidates to rank).
pub fn decide_remembering(
    input: &Input<'_>,
    me: &str,
    memo: &memo::Memo,
    key: &crate::service::ServiceKey,
) -> (Decision, Option<memo::Remembered>) {
    let mut remembered = None;
    let decision = decide_with(input, me, |ads| {
        let (winner, r) = memo.elect(key, input, ads);
        remembered = Some(r);
        winner
    });
    (decision, remembered)
}

/// The decision, with the winner found by `elect` from the applicable
/// advertisements.
fn decide_with<'a>(
    input: &Input<'a>,
    me: &str,
    elect: impl FnOnce(&[&'a L2Advertisement]) -> Option<&'a NodeInfo>,
) -> Decision {
    let ads = match applicable(input) {
        Ok(ads) => ads,
        Err(reason) => return Decision::NotOwner(reason),
    };
    let winner = elect(&ads);
    decide_for(input, me, &ads, winner)
}

fn decide_for(
    input: &Input<'_>,
    me: &str,
    ads: &[&L2Advertisement],
    winner: Option<&NodeInfo>,
) -> Decision {
    let Some(my_node) = input.nodes.iter().find(|n| n.name == me) else {
        return Decision::NotOwner(NotOwner::NoMatchingAdvertisement);
    };
    let mine: Vec<&&L2Advertisement> = ads.iter().filter(|ad| covers(ad, my_node)).collect();
    if mine.is_empty() {
        return Decision::NotOwner(NotOwner::NoMatchingAdvertisement);
    }
    match winner {
        Some(winner) if winner.name == me => {
            let interfaces = mine
                .iter()
                .map(|ad| {
                    if ad.interfaces.is_empty() {
                        Interfaces::All
                    } else {
                        Interfaces::Named(ad.interfaces.iter().cloned().collect())
                    }
                })
                .reduce(Interfaces::union)
                .unwrap_or(Interfaces::All);
            Decision::Announce(interfaces)
        }
        other => Decision::NotOwner(NotOwner::NotElected {
            winner: other.map(|n| n.name.clone()),
        }),
    }
}

pub mod memo;

#[cfg(test)]
pub(crate) mod tests;
