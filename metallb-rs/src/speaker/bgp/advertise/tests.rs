//! Which prefixes a node announces to which peers, as a table over
//! configurations, nodes and services.

use super::*;
use crate::config::load::{Loaded, Schemas};
use crate::config::{Config, Options};
use crate::speaker::election::tests::node;
use rstest::rstest;
use std::path::Path;

fn config(yaml: &str) -> Config {
    let mut loaded = Loaded::default();
    loaded.add_text(Path::new("t.yaml"), yaml, &Schemas::compile());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    Config::build(
        &loaded.resources,
        &Options {
            namespace: "metallb-system".into(),
        },
    )
    .expect("valid configuration")
}

const BASE: &str = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pool, namespace: metallb-system}
spec: {addresses: [192.168.10.0/24, "fc00:f853:ccd:e799::/124"]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: other, namespace: metallb-system}
spec: {addresses: [10.9.0.0/24]}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: frr-v4, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64512, peerAddress: 10.0.0.2}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: rack-a, namespace: metallb-system}
spec:
  myASN: 64512
  peerASN: 64513
  peerAddress: 10.0.0.3
  nodeSelectors: [{matchLabels: {rack: a}}]
---
apiVersion: metallb.io/v1beta1
kind: Community
metadata: {name: aliases, namespace: metallb-system}
spec:
  communities: [{name: no-export, value: "65535:65281"}]
"#;

fn with(ads: &str) -> Config {
    config(&format!("{BASE}\n---\n{ads}"))
}

fn endpoints(nodes: &[&str]) -> Endpoints {
    Endpoints {
        any_serving: !nodes.is_empty(),
        nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
    }
}

fn ips() -> Vec<IpAddr> {
    vec![
        "192.168.10.5".parse().expect("ip"),
        "fc00:f853:ccd:e799::5".parse().expect("ip"),
    ]
}

fn run(cfg: &Config, n: &NodeInfo, local: bool, eps: &[&str]) -> Result<PeerRoutes, NotAnnounced> {
    let labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
    let ips = ips();
    let eps = endpoints(eps);
    routes(
        cfg,
        n,
        &Service {
            labels: &labels,
            local,
            ips: &ips,
            pool: "pool",
            endpoints: &eps,
        },
        false,
    )
}

fn prefixes(r: &PeerRoutes, peer: &str) -> Vec<String> {
    r.get(peer)
        .map(|m| m.keys().map(ToString::to_string).collect())
        .unwrap_or_default()
}

const PLAIN: &str = r#"
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: ad, namespace: metallb-system}
spec: {ipAddressPools: [pool]}
"#;

#[test]
fn every_address_goes_as_a_host_route_to_every_peer_of_the_node() {
    let cfg = with(PLAIN);
    let r = run(&cfg, &node("n1", &[]), false, &["n2"]).expect("announced");
    assert_eq!(
        prefixes(&r, "frr-v4"),
        ["192.168.10.5/32", "fc00:f853:ccd:e799::5/128"]
    );
    // rack-a's session does not run on n1.
    assert!(!r.contains_key("rack-a"));
    let r = run(&cfg, &node("n2", &[("rack", "a")]), false, &["n2"]).expect("announced");
    assert_eq!(r.keys().collect::<Vec<_>>(), ["frr-v4", "rack-a"]);
}

#[rstest]
#[case::cluster_any_endpoint(false, &["n2"], None)]
#[case::cluster_no_endpoint(false, &[], Some(NotAnnounced::NoServingEndpoints))]
#[case::local_endpoint_here(true, &["n1"], None)]
#[case::local_endpoint_elsewhere(true, &["n2"], Some(NotAnnounced::NoLocalEndpoints))]
#[case::local_no_endpoint(true, &[], Some(NotAnnounced::NoServingEndpoints))]
fn endpoints_rule(#[case] local: bool, #[case] eps: &[&str], #[case] want: Option<NotAnnounced>) {
    let cfg = with(PLAIN);
    assert_eq!(run(&cfg, &node("n1", &[]), local, eps).err(), want);
}

#[test]
fn excluded_and_unavailable_nodes_announce_nothing() {
    let cfg = with(PLAIN);
    let excluded = node("n1", &[(EXCLUDE_LB_LABEL, "")]);
    assert_eq!(
        run(&cfg, &excluded, false, &["n1"]).err(),
        Some(NotAnnounced::Excluded)
    );
    let mut down = node("n1", &[]);
    down.network_unavailable = true;
    assert_eq!(
        run(&cfg, &down, false, &["n1"]).err(),
        Some(NotAnnounced::NetworkUnavailable)
    );
}

#[test]
fn advertisement_selectors_pick_pool_service_and_node() {
    let other_pool = with(
        "apiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: ad, namespace: metallb-system}\nspec: {ipAddressPools: [other]}\n",
    );
    assert_eq!(
        run(&other_pool, &node("n1", &[]), false, &["n1"]).err(),
        Some(NotAnnounced::NoAdvertisement)
    );
    let by_node = with(
        "apiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: ad, namespace: metallb-system}\nspec: {ipAddressPools: [pool], nodeSelectors: [{matchLabels: {bgp: 'yes'}}]}\n",
    );
    assert!(run(&by_node, &node("n1", &[]), false, &["n1"]).is_err());
    assert!(run(&by_node, &node("n1", &[("bgp", "yes")]), false, &["n1"]).is_ok());
    let by_service = with(
        "apiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: ad, namespace: metallb-system}\nspec: {ipAddressPools: [pool], serviceSelectors: [{matchLabels: {app: db}}]}\n",
    );
    assert_eq!(
        run(&by_service, &node("n1", &[]), false, &["n1"]).err(),
        Some(NotAnnounced::NoAdvertisement)
    );
}

#[test]
fn aggregation_communities_local_pref_and_peer_lists() {
    let cfg = with(
        r#"
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: agg, namespace: metallb-system}
spec:
  ipAddressPools: [pool]
  aggregationLength: 24
  aggregationLengthV6: 124
  localPref: 150
  communities: [no-export, "64512:100", "large:64512:1:2"]
  peers: [frr-v4]
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: host, namespace: metallb-system}
spec:
  ipAddressPools: [pool]
  aggregationLength: 24
  aggregationLengthV6: 124
  localPref: 150
  communities: ["64512:200"]
"#,
    );
    let r = run(&cfg, &node("n2", &[("rack", "a")]), false, &["n2"]).expect("announced");
    assert_eq!(
        prefixes(&r, "frr-v4"),
        ["192.168.10.0/24", "fc00:f853:ccd:e799::/124"]
    );
    let v4: IpNet = "192.168.10.0/24".parse().expect("net");
    let merged = &r["frr-v4"][&v4];
    // Both advertisements reach frr-v4: communities united (their
    // preferences agree, or the configuration would be invalid).
    assert_eq!(merged.local_pref, Some(150));
    let names: Vec<String> = merged.communities.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        ["64512:100", "64512:200", "65535:65281", "large:64512:1:2"]
    );
    // rack-a is not in agg's peer list: only the second advertisement.
    let only = &r["rack-a"][&v4];
    assert_eq!(only.local_pref, Some(150));
    assert_eq!(only.communities.len(), 1);
}

/// Upstream's speaker-side `checkBGPAdvConflicts`: advertisements with
/// serviceSelectors escape the configuration's LOCAL_PREF check, so the
/// speaker checks those that select one service and does not announce it
/// when they conflict.
#[rstest]
#[case::conflict(
    "app: web",
    "app: web",
    "localPref: 200",
    Some(NotAnnounced::ConflictingAdvertisements)
)]
#[case::other_service("app: web", "app: db", "localPref: 200", None)]
#[case::same_preference("app: web", "app: web", "localPref: 100", None)]
#[case::disjoint_peers("app: web", "app: web", "localPref: 200, peers: [rack-a]", None)]
fn check_bgp_adv_conflicts(
    #[case] first: &str,
    #[case] second: &str,
    #[case] second_extra: &str,
    #[case] want: Option<NotAnnounced>,
) {
    let cfg = with(&format!(
        "apiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: a1, namespace: metallb-system}}\nspec: {{ipAddressPools: [pool], localPref: 100, peers: [frr-v4], serviceSelectors: [{{matchLabels: {{{first}}}}}]}}\n---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {{name: a2, namespace: metallb-system}}\nspec: {{ipAddressPools: [pool], {second_extra}, serviceSelectors: [{{matchLabels: {{{second}}}}}]}}\n"
    ));
    assert_eq!(
        run(&cfg, &node("n2", &[("rack", "a")]), false, &["n2"]).err(),
        want
    );
}

#[test]
fn peers_follow_their_node_selectors() {
    let cfg = with(PLAIN);
    let names = |n: &NodeInfo| -> Vec<String> {
        peers_for_node(&cfg, n)
            .iter()
            .map(|p| p.name.clone())
            .collect()
    };
    assert_eq!(names(&node("n1", &[])), ["frr-v4"]);
    assert_eq!(names(&node("n1", &[("rack", "a")])), ["frr-v4", "rack-a"]);
}
