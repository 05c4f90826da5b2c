//! The memo against election from scratch: whatever the nodes, their
//! changes and the services, a remembered winner is the winner.

use super::super::tests::{ads, node};
use super::super::{Endpoints, Input};
use super::*;
use proptest::prelude::*;

/// One step: which node (0..8) changes how, or a service input change.
#[derive(Debug, Clone)]
enum Step {
    Zone(usize, u8),
    Unavailable(usize, bool),
    Alive(usize, bool),
    Present(usize, bool),
    Local(bool),
    Endpoint(usize, bool),
    Decide,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..8, 0u8..3).prop_map(|(n, z)| Step::Zone(n, z)),
        (0usize..8, any::<bool>()).prop_map(|(n, b)| Step::Unavailable(n, b)),
        (0usize..8, any::<bool>()).prop_map(|(n, b)| Step::Alive(n, b)),
        (0usize..8, any::<bool>()).prop_map(|(n, b)| Step::Present(n, b)),
        any::<bool>().prop_map(Step::Local),
        (0usize..8, any::<bool>()).prop_map(|(n, b)| Step::Endpoint(n, b)),
        Just(Step::Decide),
    ]
}

/// The input for a service with first address 10.0.0.`octet`.
fn input<'a>(
    ads: &'a [L2Advertisement],
    nodes: &'a [NodeInfo],
    alive: &'a BTreeSet<String>,
    endpoints: &'a Endpoints,
    labels: &'a BTreeMap<String, String>,
    local: bool,
    octet: u8,
) -> Input<'a> {
    Input {
        service_labels: labels,
        shared: false,
        local,
        first_ip: std::net::IpAddr::from([10, 0, 0, octet]),
        pool: "p",
        advertisements: ads,
        nodes,
        alive: Some(alive),
        endpoints,
        ignore_exclude_lb: false,
    }
}

proptest! {
    #[test]
    fn remembered_winners_are_the_winners(
        steps in proptest::collection::vec(step(), 1..60),
        octets in proptest::collection::vec(1u8..255, 1..4),
    ) {
        let ads = ads(&[
            "{nodeSelectors: [{matchExpressions: [{key: zone, operator: NotIn, values: [z2]}]}], preferredNodeSelectors: [{weight: 5, preference: {matchLabels: {zone: z1}}}]}",
        ]);
        let applicable: Vec<&L2Advertisement> = ads.iter().collect();
        let zones = ["z0", "z1", "z2"];
        let mut zone = [0u8; 8];
        let mut unavailable = [false; 8];
        let mut alive = [true; 8];
        let mut present = [true; 8];
        let mut local = false;
        let mut endpoints: BTreeSet<String> = BTreeSet::new();
        let mut memo = Memo::new();
        let labels = BTreeMap::new();
        for s in steps {
            match s {
                Step::Zone(n, z) => zone[n] = z,
                Step::Unavailable(n, b) => unavailable[n] = b,
                Step::Alive(n, b) => alive[n] = b,
                Step::Present(n, b) => present[n] = b,
                Step::Local(b) => local = b,
                Step::Endpoint(n, b) => {
                    if b {
                        endpoints.insert(format!("n{n}"));
                    } else {
                        endpoints.remove(&format!("n{n}"));
                    }
                }
                Step::Decide => {}
            }
            let nodes: Vec<NodeInfo> = (0..8)
                .filter(|i| present[*i])
                .map(|i| {
                    let mut n = node(&format!("n{i}"), &[("zone", zones[usize::from(zone[i])])]);
                    n.network_unavailable = unavailable[i];
                    n
                })
                .collect();
            let alive_set: BTreeSet<String> = (0..8)
                .filter(|i| alive[*i])
                .map(|i| format!("n{i}"))
                .collect();
            memo.advance(&nodes, &alive_set);
            let eps = Endpoints { any_serving: true, nodes: endpoints.clone() };
            for o in &octets {
                let key = ServiceKey::new("ns", format!("s{o}"));
                let input = input(&ads, &nodes, &alive_set, &eps, &labels, local, *o);
                let fresh = winner(&input, &applicable).map(|(_, n)| n.name.clone());
                let (found, remembered) = memo.elect(&key, &input, &applicable);
                prop_assert_eq!(found.map(|n| n.name.clone()), fresh, "{:?}", key);
                memo.remember(&key, Some(remembered));
            }
        }
    }
}

#[test]
fn only_the_changed_nodes_are_looked_at_unless_the_winner_changed() {
    // 10.0.0.1's hash order is node-b, node-a, node-c.
    let ads = ads(&["{}"]);
    let applicable: Vec<&L2Advertisement> = ads.iter().collect();
    let nodes = vec![
        node("node-a", &[]),
        node("node-b", &[]),
        node("node-c", &[]),
    ];
    let labels = BTreeMap::new();
    let eps = Endpoints {
        any_serving: true,
        nodes: BTreeSet::new(),
    };
    let key = ServiceKey::new("ns", "s");
    let alive =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|s| (*s).to_owned()).collect() };
    let mut memo = Memo::new();

    let all = alive(&["node-a", "node-b", "node-c"]);
    memo.advance(&nodes, &all);
    let (w, r) = memo.elect(
        &key,
        &input(&ads, &nodes, &all, &eps, &labels, false, 1),
        &applicable,
    );
    assert_eq!(w.map(|n| n.name.as_str()), Some("node-b"));
    memo.remember(&key, Some(r.clone()));

    // node-c goes: the log names it alone; node-b stays the winner.
    let without_c = alive(&["node-a", "node-b"]);
    memo.advance(&nodes, &without_c);
    assert_eq!(
        memo.changed_since(r.epoch),
        Some(BTreeSet::from(["node-c"]))
    );
    let (w, _) = memo.elect(
        &key,
        &input(&ads, &nodes, &without_c, &eps, &labels, false, 1),
        &applicable,
    );
    assert_eq!(w.map(|n| n.name.as_str()), Some("node-b"));

    // node-b goes too: ranked again, node-a wins.
    let only_a = alive(&["node-a"]);
    memo.advance(&nodes, &only_a);
    let (w, _) = memo.elect(
        &key,
        &input(&ads, &nodes, &only_a, &eps, &labels, false, 1),
        &applicable,
    );
    assert_eq!(w.map(|n| n.name.as_str()), Some("node-a"));

    // Nothing changed: advancing logs nothing.
    let epoch = memo.epoch;
    memo.advance(&nodes, &only_a);
    assert_eq!(memo.epoch, epoch);
}
