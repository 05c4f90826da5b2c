//! Upstream's "BGP Node Selector" tables (`bgptests/node_selector.go`),
//! the entries its native CI runs: which nodes announce a service when
//! BGPAdvertisements select nodes (fixed sets, a label added at runtime,
//! a selector changed to match none) and which nodes run sessions when
//! BGPPeers select nodes ("Peer selector"). Every entry peers with every
//! router of its family and checks each router, as upstream loops over
//! its FRR containers.
//!
//! Upstream's entries name nodes by index into its kind cluster's node
//! list (three nodes: the control plane and two workers, each running a
//! speaker; "two on first" is nodes 0 and 1). The lab has three nodes
//! too: index `i` is the `i`-th node of `Cluster::nodes`, so every entry
//! keeps its node sets; a cluster with fewer nodes than an entry names
//! skips it, as upstream's `nodesForSelection` does. The peer selector
//! entries name routers by index the same way: index `i` is the `i`-th
//! router of [`routers::routers`] (the lab: `ibgp-single-hop`,
//! `ebgp-single-hop`, `ibgp-multi-hop`, `ebgp-multi-hop`; upstream's
//! container order is its map's, arbitrary); routers past the entry's
//! list select no node, as upstream's tweak gives them a selector no node
//! matches.

use super::routers::{
    self, ABSENT_FOR, Passwords, advertised, advertised_from, peered, stays_unadvertised, withdrawn,
};
use super::{WAIT, all_hops, node_addresses, service, two_pools};
use crate::metallb::Config;
use crate::suites::l2::{NodeLabels, backends};
use crate::{Ctx, Spec};
use anyhow::{Context, Result};
use devenv::wait::throughout;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// Upstream's `CommunityNoAdv` (NO_ADVERTISE), which its labelling table
/// sets on the advertisement.
const COMMUNITY_NO_ADVERTISE: &str = "65535:65282";

/// The label upstream's labelling table selects nodes by.
const TEST_LABEL: &str = "bgp-node-selector-test";

/// A spec per upstream entry: `BGP Node Selector <table> <entry words>`
/// with upstream's family word as the tag, running `f(ctx, args...)`.
macro_rules! entry {
    ($tag:literal, $it:literal, $f:ident($($arg:expr),*)) => {{
        fn run(ctx: &Ctx) -> Result<()> {
            $f(ctx, $($arg),*)
        }
        Spec::new("BGP", concat!("Node Selector ", $it), &[$tag], run)
    }};
}

/// Upstream's native entries, in its order.
pub fn specs() -> Vec<Spec> {
    let mut specs = vec![
        entry!(
            "IPV4",
            "Two services, two distinct advertisements with different node selectors - two on first, two on second",
            two_services(false, &[0, 1], &[0, 1])
        ),
        entry!(
            "IPV4",
            "Two services, two distinct advertisements with different node selectors - one on first, two on second",
            two_services(false, &[0], &[0, 1])
        ),
        entry!(
            "IPV4",
            "Two services, two distinct advertisements with different node selectors - zero on first, two on second",
            two_services(false, &[], &[0, 1])
        ),
        entry!(
            "IPV6",
            "Two services, two distinct advertisements with different node selectors - one on first, two on second",
            two_services(true, &[0], &[1, 2])
        ),
    ];
    specs.extend(family_table!(
        "Node Selector",
        "One service, one advertisement with node selector, labeling node",
        labeling_node
    ));
    specs.extend(family_table!(
        "Node Selector",
        "Two advertisements - updating one nodeSelector to non-matching withdraws its service without affecting the other",
        selector_to_non_matching
    ));
    specs.extend([
        entry!(
            "IPV4",
            "Peer selector Should work with a limited set of nodes First to one, second to two",
            limited_nodes(&[&[0], &[1, 2]])
        ),
        entry!(
            "IPV4",
            "Peer selector Should work with a limited set of nodes First to one, second to one, third to three",
            limited_nodes(&[&[0], &[1], &[0, 1, 2]])
        ),
        entry!(
            "IPV4",
            "Peer selector Should work with a limited set of nodes First to one, second to one, third to same as first",
            limited_nodes(&[&[0], &[1], &[0]])
        ),
    ]);
    specs
}

/// The nodes at upstream's indexes (`nodesForSelection`): name and
/// address of the family; skips the spec when the cluster has too few.
fn pick(ctx: &Ctx, v6: bool, at: &[usize]) -> Result<Vec<(String, IpAddr)>> {
    let all = node_addresses(ctx, v6);
    at.iter()
        .map(|&i| {
            all.get(i).cloned().ok_or_else(|| {
                crate::skip(format!(
                    "the entry names node {i}; the cluster has {} nodes",
                    all.len()
                ))
            })
        })
        .collect()
}

/// Upstream's `SelectorsForNodes`: a `kubernetes.io/hostname` selector
/// per node, or, for none, one that no node matches.
fn selectors_for(nodes: &[(String, IpAddr)]) -> Value {
    if nodes.is_empty() {
        return json!([{ "matchLabels": { "non": "existent" } }]);
    }
    Value::Array(
        nodes
            .iter()
            .map(|(name, _)| json!({ "matchLabels": { "kubernetes.io/hostname": name } }))
            .collect(),
    )
}

/// The nodes' addresses: the next hops of their announcements, the
/// neighbors of their sessions.
fn hops(nodes: &[(String, IpAddr)]) -> BTreeSet<IpAddr> {
    nodes.iter().map(|(_, a)| *a).collect()
}

/// Two pools, `first-pool` and `second-pool`, each with an advertisement
/// selecting the nodes of `first` and `second`, and a service from each
/// (`first-lb`, `second-lb`); the configuration, the routers and the two
/// addresses.
fn two_advertisements<'a>(
    ctx: &'a Ctx,
    v6: bool,
    first: &[(String, IpAddr)],
    second: &[(String, IpAddr)],
) -> Result<(Config<'a>, Vec<devenv::frr::BgpRouter>, IpAddr, IpAddr)> {
    let (mut config, routers) = peered(ctx, v6)?;
    for (name, pool, nodes) in [
        ("first", two_pools(v6)[0], first),
        ("second", two_pools(v6)[1], second),
    ] {
        config.pool(&format!("{name}-pool"), json!({ "addresses": [pool] }))?;
        config.bgp_advertisement(
            &format!("{name}-adv"),
            json!({ "nodeSelectors": selectors_for(nodes), "ipAddressPools": [format!("{name}-pool")] }),
        )?;
    }
    backends(ctx, &[])?;
    let first = service(ctx, "first-lb", v6, json!({}), Some("first-pool"))?;
    let second = service(ctx, "second-lb", v6, json!({}), Some("second-pool"))?;
    Ok((config, routers, first, second))
}

/// "Two services, two distinct advertisements with different node
/// selectors": each pool's advertisement selects `first` / `second` (node
/// indexes); each service is announced from its advertisement's nodes
/// only (upstream's `checkServiceOnlyOnNodes`). Upstream checks nothing
/// for a service whose advertisement selects no node; here it must stay
/// unannounced, checked once the other one is seen announced.
fn two_services(ctx: &Ctx, v6: bool, first: &[usize], second: &[usize]) -> Result<()> {
    let first_nodes = pick(ctx, v6, first)?;
    let second_nodes = pick(ctx, v6, second)?;
    let (_config, routers, first_ip, second_ip) =
        two_advertisements(ctx, v6, &first_nodes, &second_nodes)?;
    let services = [(first_ip, &first_nodes), (second_ip, &second_nodes)];
    for (ip, nodes) in services {
        if !nodes.is_empty() {
            advertised_from(ctx, &routers, ip, &hops(nodes))?;
        }
    }
    for (ip, nodes) in services {
        if nodes.is_empty() {
            stays_unadvertised(ctx, &routers, ip, "its advertisement selects no node")?;
        }
    }
    Ok(())
}

/// "One service, one advertisement with node selector, labeling node":
/// the advertisement selects a label no node has; the service is not
/// announced until the first node gets it, then from that node only. The
/// label goes when the spec ends (upstream's `AfterEach`).
fn labeling_node(ctx: &Ctx, v6: bool) -> Result<()> {
    let (labelled, labelled_ip) = pick(ctx, v6, &[0])?
        .into_iter()
        .next()
        .context("no node picked")?;
    let (mut config, routers) = peered(ctx, v6)?;
    config.pool("test-pool", json!({ "addresses": [two_pools(v6)[0]] }))?;
    config.bgp_advertisement(
        "test-adv",
        json!({
            "communities": [COMMUNITY_NO_ADVERTISE],
            "ipAddressPools": ["test-pool"],
            "nodeSelectors": [{ "matchLabels": { TEST_LABEL: "true" } }],
        }),
    )?;
    // Every node peers (the BGPPeers select them all): only the
    // advertisement keeps the service back.
    routers::wait_sessions(ctx, &routers, &all_hops(ctx, v6), WAIT)?;
    backends(ctx, &[])?;
    let ip = service(ctx, "external-local-lb", v6, json!({}), Some("test-pool"))?;
    stays_unadvertised(ctx, &routers, ip, "no node has the selected label")?;
    let mut labels = NodeLabels::new(ctx, &[TEST_LABEL])?;
    labels.add(&labelled, TEST_LABEL, "true")?;
    advertised_from(ctx, &routers, ip, &BTreeSet::from([labelled_ip]))
}

/// "Two advertisements - updating one nodeSelector to non-matching
/// withdraws its service without affecting the other": both
/// advertisements select every node; the second's selector then matches
/// none: its service is withdrawn everywhere while the first's stays
/// announced from every node. (Upstream checks the first before the
/// withdrawal; here after it, once the update has taken effect.)
fn selector_to_non_matching(ctx: &Ctx, v6: bool) -> Result<()> {
    let every = node_addresses(ctx, v6);
    let (mut config, routers, first, second) = two_advertisements(ctx, v6, &every, &every)?;
    advertised(ctx, &routers, first)?;
    advertised(ctx, &routers, second)?;
    config.replace(
        "BGPAdvertisement",
        "second-adv",
        json!({
            "nodeSelectors": [{ "matchLabels": { "non-existing-label": "true" } }],
            "ipAddressPools": ["second-pool"],
        }),
    )?;
    withdrawn(ctx, &routers, second)?;
    advertised(ctx, &routers, first)
}

/// "Peer selector IPV4 Should work with a limited set of nodes":
/// `per_router[i]` are the node indexes router `i`'s BGPPeer selects
/// (routers past the list select none). Each router has sessions with
/// exactly its selected nodes (upstream's `validateFRRPeeredWithNodes`
/// and `validateFRRNotPeeredWithNodes`), and no other session comes up
/// over [`ABSENT_FOR`] after.
fn limited_nodes(ctx: &Ctx, per_router: &[&[usize]]) -> Result<()> {
    let v6 = false;
    let routers = routers::routers(ctx, v6)?;
    if per_router.len() > routers.len() {
        return Err(crate::skip(format!(
            "the entry names {} routers; the cluster has {}",
            per_router.len(),
            routers.len()
        )));
    }
    let mut picked = Vec::new();
    for i in 0..routers.len() {
        let at: &[usize] = per_router.get(i).copied().unwrap_or_default();
        picked.push(pick(ctx, v6, at)?);
    }
    let mut config = Config::new(ctx)?;
    for (r, nodes) in routers.iter().zip(&picked) {
        routers::add_peers(
            &mut config,
            std::slice::from_ref(r),
            &[v6],
            Passwords::OneSecret,
            &json!({ "nodeSelectors": selectors_for(nodes) }),
        )?;
    }
    let selected: Vec<BTreeSet<IpAddr>> =
        picked.iter().map(|nodes| hops(nodes.as_slice())).collect();
    for (r, want) in routers.iter().zip(&selected) {
        routers::wait_sessions(ctx, std::slice::from_ref(r), want, WAIT)?;
    }
    throughout(ABSENT_FOR, "sessions from the selected nodes only", || {
        for (r, want) in routers.iter().zip(&selected) {
            let up = routers::established(ctx, r)?;
            if up != *want {
                return Ok(Some(format!(
                    "{} has sessions from {up:?}; its BGPPeer selects {want:?}",
                    r.name
                )));
            }
        }
        Ok(None)
    })
}
