//! What one speaker validates (upstream's `filterBGPPeersByNode` and
//! `filterBGPAdvertisementsByNode` in the speaker's config reconciler):
//! only the BGPPeers and BGPAdvertisements that select its node, so a bad
//! peer or advertisement meant for other nodes never stops this node's
//! configuration, layer 2 included. Everything else is kept: L2
//! advertisements decide the candidates of every node's election, and
//! pools are the same for every node.
//!
//! An object without node selectors selects every node. An object whose
//! selectors cannot be parsed is kept, so that validation reports it
//! (upstream's reconcile fails on it too).

use super::Resources;
use super::selector::Selector;
use crate::api::v1beta1::LabelSelector;
use std::collections::BTreeMap;

/// Whether an object with `selectors` runs on a node labelled `labels`.
fn selects(selectors: Option<&Vec<LabelSelector>>, labels: &BTreeMap<String, String>) -> bool {
    let list = selectors.map(Vec::as_slice).unwrap_or_default();
    if list.is_empty() {
        return true;
    }
    let mut parsed = Vec::with_capacity(list.len());
    for s in list {
        match Selector::parse(s) {
            Ok(s) => parsed.push(s),
            Err(_) => return true,
        }
    }
    parsed.iter().any(|s| s.matches(labels))
}

/// `res` as the speaker of the node labelled `node_labels` validates it.
pub fn for_node(res: &Resources, node_labels: &BTreeMap<String, String>) -> Resources {
    Resources {
        peers: res
            .peers
            .iter()
            .filter(|p| selects(p.spec.node_selectors.as_ref(), node_labels))
            .cloned()
            .collect(),
        bgp_advertisements: res
            .bgp_advertisements
            .iter()
            .filter(|a| selects(a.spec.node_selectors.as_ref(), node_labels))
            .cloned()
            .collect(),
        ..res.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load::{Loaded, Schemas};
    use crate::config::{Config, Options};
    use rstest::rstest;
    use std::path::Path;

    const POOL: &str = "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: pool, namespace: metallb-system}\nspec: {addresses: [10.0.0.0/24]}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l2, namespace: metallb-system}\n";

    fn resources(docs: &str) -> Resources {
        let mut loaded = Loaded::default();
        loaded.add_text(Path::new("t.yaml"), docs, &Schemas::compile());
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        loaded.resources
    }

    fn peer(name: &str, spec: &str) -> String {
        format!(
            "---\napiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {{name: {name}, namespace: metallb-system}}\nspec: {{myASN: 64500, peerASN: 64501, {spec}}}\n"
        )
    }

    fn ad(name: &str, spec: &str) -> String {
        format!(
            "---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: {name}, namespace: metallb-system}}\nspec: {{{spec}}}\n"
        )
    }

    /// Mirrors upstream's filterByNode tables: which peers and
    /// advertisements node `rack=a` keeps, and whether its configuration
    /// is valid.
    #[rstest]
    #[case::no_selector_kept(&peer("all", "peerAddress: 10.1.0.1"), "peers=all ads= valid")]
    #[case::matching_kept(&peer("a", "peerAddress: 10.1.0.1, nodeSelectors: [{matchLabels: {rack: a}}]"), "peers=a ads= valid")]
    #[case::other_node_dropped(&peer("b", "peerAddress: 10.1.0.1, nodeSelectors: [{matchLabels: {rack: b}}]"), "peers= ads= valid")]
    #[case::any_selector_matches(&peer("ab", "peerAddress: 10.1.0.1, nodeSelectors: [{matchLabels: {rack: b}}, {matchLabels: {rack: a}}]"), "peers=ab ads= valid")]
    #[case::bad_peer_of_other_node_ignored(&peer("b", "peerAddress: not-an-ip, nodeSelectors: [{matchLabels: {rack: b}}]"), "peers= ads= valid")]
    #[case::bad_peer_of_this_node_invalid(&peer("a", "peerAddress: not-an-ip, nodeSelectors: [{matchLabels: {rack: a}}]"), "peers=a ads= invalid")]
    #[case::unparsable_selector_kept(&peer("x", "peerAddress: 10.1.0.1, nodeSelectors: [{matchExpressions: [{key: rack, operator: Near}]}]"), "peers=x ads= invalid")]
    #[case::ads_filtered_too(&format!("{}{}", ad("mine", "nodeSelectors: [{matchLabels: {rack: a}}]"), ad("theirs", "aggregationLength: 8, nodeSelectors: [{matchLabels: {rack: b}}]")), "peers= ads=mine valid")]
    fn filter_bgp_peers_and_advertisements_by_node(#[case] objects: &str, #[case] expected: &str) {
        let res = resources(&format!("{POOL}{objects}"));
        let labels = BTreeMap::from([("rack".to_owned(), "a".to_owned())]);
        let mine = for_node(&res, &labels);
        let names = |v: Vec<String>| v.join(",");
        let valid = if Config::build(&mine, &Options::default()).is_ok() {
            "valid"
        } else {
            "invalid"
        };
        let got = format!(
            "peers={} ads={} {valid}",
            names(
                mine.peers
                    .iter()
                    .map(|p| p.metadata.name.clone().unwrap_or_default())
                    .collect()
            ),
            names(
                mine.bgp_advertisements
                    .iter()
                    .map(|p| p.metadata.name.clone().unwrap_or_default())
                    .collect()
            ),
        );
        assert_eq!(got, expected);
        assert_eq!(mine.pools.len(), 1, "pools are never filtered");
        assert_eq!(
            mine.l2_advertisements.len(),
            1,
            "L2 advertisements are never filtered"
        );
    }
}
