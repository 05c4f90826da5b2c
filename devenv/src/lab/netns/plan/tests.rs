//! Table tests of the lab network plan: addresses, names, sysctls and
//! routes per topology, and the field each invalid topology names.

use super::*;

fn net(s: &str) -> IpNet {
    s.parse().expect("test address")
}

#[test]
fn default_names_follow_kind() {
    assert_eq!(
        default_node_names("lab", 2),
        ["lab-control-plane", "lab-worker", "lab-worker2"]
    );
}

#[test]
fn plan_dual_stack_one_bridge() {
    let p = plan(&Topology::new("lab", 2)).expect("valid");
    assert_eq!(p.net_namespace, "lab-net");
    assert_eq!(
        p.namespaces(),
        [
            "lab-net",
            "lab-control-plane",
            "lab-worker",
            "lab-worker2",
            "lab-external"
        ]
    );
    assert_eq!(p.bridges.len(), 1);
    assert_eq!(p.bridges[0].name, "br0");
    let cp = &p.hosts[0];
    assert_eq!(cp.role, Role::Node);
    assert_eq!(cp.interfaces.len(), 1);
    assert_eq!(cp.interfaces[0].name, "eth0");
    assert_eq!(cp.interfaces[0].peer, "n0e0");
    assert_eq!(
        cp.interfaces[0].addresses,
        [net("172.30.0.10/24"), net("fc00:f853:ccd:e793::10/64")]
    );
    assert_eq!(
        p.hosts[2].interfaces[0].addresses,
        [net("172.30.0.12/24"), net("fc00:f853:ccd:e793::12/64")]
    );
    let ext = &p.hosts[3];
    assert_eq!(ext.role, Role::External);
    assert_eq!(ext.name, "external");
    assert_eq!(ext.interfaces[0].peer, "xe0");
    assert_eq!(
        ext.interfaces[0].addresses,
        [net("172.30.0.2/24"), net("fc00:f853:ccd:e793::2/64")]
    );
}

#[test]
fn node_sysctls_hide_arp_forward_without_redirects_and_disable_dad() {
    let p = plan(&Topology::new("lab", 1)).expect("valid");
    let has = |list: &[(String, String)], k: &str, v: &str| {
        list.iter().any(|(key, val)| key == k && val == v)
    };
    let node = &p.hosts[0];
    for k in [
        "net.ipv4.conf.all.arp_ignore",
        "net.ipv4.conf.default.arp_ignore",
    ] {
        assert!(has(&node.sysctls, k, "1"), "{k}");
    }
    assert!(has(&node.sysctls, "net.ipv4.conf.all.arp_announce", "2"));
    assert!(has(&node.sysctls, "net.ipv4.ip_forward", "1"));
    assert!(has(&node.sysctls, "net.ipv6.conf.all.forwarding", "1"));
    for scope in ["all", "default"] {
        let k = format!("net.ipv4.conf.{scope}.send_redirects");
        assert!(has(&node.sysctls, &k, "0"), "{k}");
    }
    assert!(has(&node.sysctls, "net.ipv6.conf.default.accept_dad", "0"));
    assert!(has(
        &node.sysctls,
        "net.ipv6.conf.all.keep_addr_on_down",
        "1"
    ));
    let eth0 = &node.interfaces[0].sysctls;
    assert!(has(eth0, "net.ipv4.conf.eth0.arp_ignore", "1"));
    assert!(has(eth0, "net.ipv4.conf.eth0.arp_announce", "2"));
    assert!(has(eth0, "net.ipv6.conf.eth0.accept_dad", "0"));
    // The external host is an ordinary host, whose ECMP routes hash
    // ports.
    let ext = &p.hosts[2];
    assert!(!ext.sysctls.iter().any(|(k, _)| k.contains("arp_")));
    assert!(has(&ext.sysctls, "net.ipv4.ip_forward", "0"));
    assert!(has(&ext.sysctls, "net.ipv6.conf.all.forwarding", "0"));
    assert!(has(&ext.sysctls, "net.ipv4.fib_multipath_hash_policy", "1"));
    assert!(has(&ext.sysctls, "net.ipv6.fib_multipath_hash_policy", "1"));
    assert!(!node.sysctls.iter().any(|(k, _)| k.contains("multipath")));
}

#[test]
fn single_family_plans() {
    let p = plan(&Topology::new("lab", 0).with_family(Family::Ipv4)).expect("valid");
    assert_eq!(p.hosts[0].interfaces[0].addresses, [net("172.30.0.10/24")]);
    assert!(p.bridges[0].ipv6.is_none());
    assert!(
        !p.hosts[0]
            .sysctls
            .iter()
            .any(|(k, _)| k.starts_with("net.ipv6"))
    );
    let p = plan(&Topology::new("lab", 0).with_family(Family::Ipv6)).expect("valid");
    assert_eq!(
        p.hosts[0].interfaces[0].addresses,
        [net("fc00:f853:ccd:e793::10/64")]
    );
    assert!(p.bridges[0].ipv4.is_none());
}

#[test]
fn two_bridges_give_eth1_on_its_own_subnets() {
    let p = plan(&Topology::new("lab", 1).with_bridges(2)).expect("valid");
    assert_eq!(p.bridges.len(), 2);
    let worker = &p.hosts[1];
    assert_eq!(worker.interfaces.len(), 2);
    let eth1 = &worker.interfaces[1];
    assert_eq!(eth1.name, "eth1");
    assert_eq!(eth1.bridge, "br1");
    assert_eq!(eth1.peer, "n1e1");
    assert_eq!(
        eth1.addresses,
        [net("172.30.1.11/24"), net("fc00:f853:ccd:e794::11/64")]
    );
    assert_eq!(p.hosts[2].interfaces[1].peer, "xe1");
}

#[test]
fn interface_names_fit_the_kernel_limit() {
    let mut t = Topology::new("a-very-long-lab-name-indeed", 0).with_bridges(2);
    t.nodes = (0..MAX_NODES)
        .map(|i| format!("a-very-long-lab-name-indeed-n{i}"))
        .collect();
    let p = plan(&t).expect("valid");
    for h in &p.hosts {
        for i in &h.interfaces {
            assert!(i.name.len() <= 15 && i.peer.len() <= 15, "{i:?}");
        }
    }
    let last = &p.hosts[MAX_NODES - 1].interfaces[0].addresses[0];
    assert_eq!(*last, net("172.30.0.99/24"));
}

#[rstest::rstest]
#[case::bad_name(Topology::new("Lab", 1), "name")]
#[case::no_nodes(Topology { nodes: vec![], ..Topology::new("lab", 1) }, "nodes")]
#[case::foreign_node(Topology { nodes: vec!["other-x".into()], ..Topology::new("lab", 1) }, "nodes[0]")]
#[case::reserved(Topology { nodes: vec!["lab-net".into()], ..Topology::new("lab", 1) }, "nodes[0]")]
#[case::reserved_router(Topology { nodes: vec!["lab-ibgp-multi-hop".into()], ..Topology::new("lab", 1) }, "nodes[0]")]
#[case::duplicate(Topology { nodes: vec!["lab-a".into(), "lab-a".into()], ..Topology::new("lab", 1) }, "nodes[1]")]
#[case::no_bridge(Topology::new("lab", 1).with_bridges(0), "bridges")]
#[case::three_bridges(Topology::new("lab", 1).with_bridges(3), "bridges")]
#[case::missing_subnets(Topology { subnets: default_subnets()[..1].to_vec(), ..Topology::new("lab", 1).with_bridges(2) }, "subnets")]
#[case::overlap(Topology { subnets: vec![default_subnets()[0]; 2], ..Topology::new("lab", 1).with_bridges(2) }, "subnets[1]")]
#[case::small_v4(Topology { subnets: vec![BridgeSubnets { ipv4: "10.0.0.0/29".parse().expect("net"), ..default_subnets()[0] }], ..Topology::new("lab", 1) }, "subnets[0]")]
fn invalid_topologies_name_the_field(#[case] t: Topology, #[case] field: &str) {
    match plan(&t) {
        Err(LabError::Topology { field: f, .. }) => assert_eq!(f, field),
        other => panic!("expected a topology error on {field}, got {other:?}"),
    }
}

#[test]
fn overlap_is_fine_for_an_unused_family() {
    let mut t = Topology::new("lab", 1)
        .with_bridges(2)
        .with_family(Family::Ipv4);
    t.subnets[1].ipv6 = t.subnets[0].ipv6;
    assert!(plan(&t).is_ok());
}

#[test]
fn a_bgp_lab_adds_the_routers_their_bridge_and_the_nodes_routes() {
    let p = plan(&Topology::new("lab", 1).with_routers(true)).expect("plan");
    assert_eq!(
        p.namespaces(),
        [
            "lab-net",
            "lab-control-plane",
            "lab-worker",
            "lab-external",
            "lab-ebgp-single-hop",
            "lab-ibgp-multi-hop",
            "lab-ebgp-multi-hop"
        ]
    );
    assert_eq!(p.router_bridges.len(), 1);
    assert_eq!(p.router_bridges[0].name, multihop::BRIDGE);
    let routes = |h: &HostPlan| -> Vec<String> {
        h.routes
            .iter()
            .map(|r| format!("{} via {}", r.destination, r.gateway))
            .collect()
    };
    for node in p.hosts.iter().filter(|h| h.role == Role::Node) {
        assert_eq!(
            routes(node),
            [
                "172.30.8.0/24 via 172.30.0.3",
                "fc00:f853:ccd:e798::/64 via fc00:f853:ccd:e793::3"
            ]
        );
    }
    let external = p
        .hosts
        .iter()
        .find(|h| h.role == Role::External)
        .expect("external");
    assert!(external.routes.is_empty());
    // Without routers the lab is what it always was.
    let plain = plan(&Topology::new("lab", 1)).expect("plan");
    assert!(plain.router_bridges.is_empty());
    assert!(
        plain
            .hosts
            .iter()
            .all(|h| h.routes.is_empty() && h.role != Role::Router)
    );
}
