//! The BGP lab's routed hop, as upstream's e2e lays out its four FRR
//! routers: `ebgp-single-hop` stands on the node network and on a second
//! network of its own (the multi-hop network, bridge [`BRIDGE`] in the
//! lab's bridge namespace), forwarding between them; `ibgp-multi-hop` and
//! `ebgp-multi-hop` stand on the multi-hop network only, so the speakers
//! reach them one routed hop away. The nodes route the multi-hop network
//! through `ebgp-single-hop`, the multi-hop routers route the node network
//! back the same way. (The fourth router, `ibgp-single-hop`, is the
//! external host's: it needs nothing here.)
//!
//! Pure: [`plan`] adds hosts, a bridge and routes to the lab's plan;
//! `netns::ensure` makes them like every other part of it.
//!
//! | host              | node network (`eth0`)   | multi-hop network        |
//! |-------------------|-------------------------|--------------------------|
//! | `ebgp-single-hop` | host 3 (`172.30.0.3`)   | host 3 (`172.30.8.3`)    |
//! | `ibgp-multi-hop`  | -                       | host 4 (`172.30.8.4`)    |
//! | `ebgp-multi-hop`  | -                       | host 5 (`172.30.8.5`)    |
//!
//! IPv6 alike in `fc00:f853:ccd:e798::/64` (upstream's multi-hop network's
//! IPv6 subnet; its IPv4 one overlaps the lab's node network, so that one
//! is `172.30.8.0/24` here).

use super::{BridgePlan, BridgeSubnets, Family, HostPlan, InterfacePlan, Result, Role};
use super::{topology_error, v4_host, v6_host};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The router that forwards between the node network and the multi-hop
/// network (upstream's `nextHopContainerName`).
pub const GATEWAY: &str = "ebgp-single-hop";
/// The routers on the multi-hop network only.
pub const BEHIND: [&str; 2] = ["ibgp-multi-hop", "ebgp-multi-hop"];
/// The multi-hop network's bridge, in the lab's bridge namespace.
pub const BRIDGE: &str = "brmh";
/// [`GATEWAY`]'s host number on both networks.
pub const GATEWAY_HOST: u32 = 3;
/// The first of [`BEHIND`]'s host numbers.
pub const FIRST_BEHIND_HOST: u32 = 4;

/// The multi-hop network's subnets.
pub fn subnets() -> BridgeSubnets {
    BridgeSubnets {
        ipv4: Ipv4Net::new_assert(Ipv4Addr::new(172, 30, 8, 0), 24),
        ipv6: Ipv6Net::new_assert(Ipv6Addr::new(0xfc00, 0xf853, 0xccd, 0xe798, 0, 0, 0, 0), 64),
    }
}

/// The namespace of router `router` (one of [`GATEWAY`], [`BEHIND`]) in
/// lab `name`.
pub fn namespace(name: &str, router: &str) -> String {
    format!("{name}-{router}")
}

/// A static route of a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutePlan {
    /// The destination network.
    pub destination: IpNet,
    /// The next hop, on one of the host's networks.
    pub gateway: IpAddr,
}

/// What the routed hop adds to a lab plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiHopPlan {
    /// The multi-hop network's bridge.
    pub bridge: BridgePlan,
    /// [`GATEWAY`] then [`BEHIND`], in that order.
    pub hosts: Vec<HostPlan>,
    /// The route every node gets to the multi-hop network.
    pub node_routes: Vec<RoutePlan>,
}

fn addresses(family: Family, s: &BridgeSubnets, host: u32, field: &str) -> Result<Vec<IpNet>> {
    let mut out = Vec::new();
    if family.has_ipv4() {
        out.push(v4_host(s.ipv4, host, field)?);
    }
    if family.has_ipv6() {
        out.push(v6_host(s.ipv6, host, field)?);
    }
    Ok(out)
}

/// Routes to each of `networks` (one per family) through the address of
/// the same family among `via`.
fn routes(networks: &[IpNet], via: &[IpNet]) -> Vec<RoutePlan> {
    networks
        .iter()
        .filter_map(|net| {
            let gw = via
                .iter()
                .find(|v| v.addr().is_ipv6() == net.addr().is_ipv6())?;
            Some(RoutePlan {
                destination: net.trunc(),
                gateway: gw.addr(),
            })
        })
        .collect()
}

/// The routed hop for lab `name` whose node network (`br0`) has
/// `node_net`. Fails when the multi-hop network overlaps it.
pub fn plan(name: &str, family: Family, node_net: &BridgeSubnets) -> Result<MultiHopPlan> {
    let mh = subnets();
    if (family.has_ipv4() && (node_net.ipv4.contains(&mh.ipv4) || mh.ipv4.contains(&node_net.ipv4)))
        || (family.has_ipv6()
            && (node_net.ipv6.contains(&mh.ipv6) || mh.ipv6.contains(&node_net.ipv6)))
    {
        return Err(topology_error(
            "subnets[0]",
            format!(
                "overlaps the BGP lab's multi-hop network ({} {})",
                mh.ipv4, mh.ipv6
            ),
        ));
    }
    let kv = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    let sysctls = |forward: bool| {
        let f = if forward { "1" } else { "0" };
        let mut s = vec![kv("net.ipv4.ip_forward", f)];
        if family.has_ipv6() {
            s.push(kv("net.ipv6.conf.all.forwarding", f));
            for scope in ["all", "default"] {
                s.push(kv(&format!("net.ipv6.conf.{scope}.accept_dad"), "0"));
                s.push(kv(&format!("net.ipv6.conf.{scope}.keep_addr_on_down"), "1"));
            }
        }
        s
    };
    let iface = |ifname: &str, peer: String, bridge: &str, addresses: Vec<IpNet>| InterfacePlan {
        name: ifname.to_owned(),
        peer,
        bridge: bridge.to_owned(),
        addresses,
        sysctls: if family.has_ipv6() {
            vec![kv(&format!("net.ipv6.conf.{ifname}.accept_dad"), "0")]
        } else {
            Vec::new()
        },
    };
    let node_side = addresses(family, node_net, GATEWAY_HOST, "subnets[0]")?;
    let mh_side = addresses(family, &mh, GATEWAY_HOST, "multi-hop network")?;
    let node_nets: Vec<IpNet> = node_side.iter().map(IpNet::trunc).collect();
    let mh_nets: Vec<IpNet> = mh_side.iter().map(IpNet::trunc).collect();
    let mut hosts = vec![HostPlan {
        name: GATEWAY.to_owned(),
        namespace: namespace(name, GATEWAY),
        role: Role::Router,
        sysctls: sysctls(true),
        interfaces: vec![
            iface("eth0", "rge0".into(), "br0", node_side.clone()),
            iface("eth1", "rgm".into(), BRIDGE, mh_side.clone()),
        ],
        routes: Vec::new(),
    }];
    for (i, router) in (0u32..).zip(BEHIND) {
        let own = addresses(family, &mh, FIRST_BEHIND_HOST + i, "multi-hop network")?;
        hosts.push(HostPlan {
            name: router.to_owned(),
            namespace: namespace(name, router),
            role: Role::Router,
            sysctls: sysctls(false),
            interfaces: vec![iface("eth0", format!("r{i}m"), BRIDGE, own)],
            routes: routes(&node_nets, &mh_side),
        });
    }
    Ok(MultiHopPlan {
        bridge: BridgePlan {
            name: BRIDGE.to_owned(),
            ipv4: family.has_ipv4().then_some(mh.ipv4),
            ipv6: family.has_ipv6().then_some(mh.ipv6),
        },
        hosts,
        node_routes: routes(&mh_nets, &node_side),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(plan: &MultiHopPlan) -> String {
        let mut out = Vec::new();
        for h in &plan.hosts {
            for i in &h.interfaces {
                let addrs: Vec<String> = i.addresses.iter().map(ToString::to_string).collect();
                out.push(format!(
                    "{} {} ({} on {}): {}",
                    h.namespace,
                    i.name,
                    i.peer,
                    i.bridge,
                    addrs.join(" ")
                ));
            }
            for r in &h.routes {
                out.push(format!(
                    "{} route {} via {}",
                    h.namespace, r.destination, r.gateway
                ));
            }
        }
        for r in &plan.node_routes {
            out.push(format!("node route {} via {}", r.destination, r.gateway));
        }
        out.join("\n")
    }

    #[test]
    fn multi_hop_routers_sit_one_routed_hop_behind_the_gateway() {
        let plan = plan("lab", Family::Dual, &super::super::default_subnets()[0]).expect("plan");
        let expected = "\
lab-ebgp-single-hop eth0 (rge0 on br0): 172.30.0.3/24 fc00:f853:ccd:e793::3/64
lab-ebgp-single-hop eth1 (rgm on brmh): 172.30.8.3/24 fc00:f853:ccd:e798::3/64
lab-ibgp-multi-hop eth0 (r0m on brmh): 172.30.8.4/24 fc00:f853:ccd:e798::4/64
lab-ibgp-multi-hop route 172.30.0.0/24 via 172.30.8.3
lab-ibgp-multi-hop route fc00:f853:ccd:e793::/64 via fc00:f853:ccd:e798::3
lab-ebgp-multi-hop eth0 (r1m on brmh): 172.30.8.5/24 fc00:f853:ccd:e798::5/64
lab-ebgp-multi-hop route 172.30.0.0/24 via 172.30.8.3
lab-ebgp-multi-hop route fc00:f853:ccd:e793::/64 via fc00:f853:ccd:e798::3
node route 172.30.8.0/24 via 172.30.0.3
node route fc00:f853:ccd:e798::/64 via fc00:f853:ccd:e793::3";
        assert_eq!(show(&plan), expected);
        // Only the gateway forwards.
        let forwarding: Vec<bool> = plan
            .hosts
            .iter()
            .map(|h| {
                h.sysctls
                    .contains(&("net.ipv4.ip_forward".into(), "1".into()))
            })
            .collect();
        assert_eq!(forwarding, [true, false, false]);
    }

    #[test]
    fn a_single_family_lab_routes_that_family_only() {
        let plan = plan("lab", Family::Ipv6, &super::super::default_subnets()[0]).expect("plan");
        assert!(
            plan.node_routes
                .iter()
                .all(|r| r.destination.addr().is_ipv6())
        );
        assert_eq!(plan.node_routes.len(), 1);
        assert!(plan.bridge.ipv4.is_none());
    }

    #[test]
    fn a_node_network_overlapping_the_multi_hop_network_is_refused() {
        let node_net = BridgeSubnets {
            ipv4: "172.30.0.0/16".parse().expect("net"),
            ..super::super::default_subnets()[0]
        };
        assert!(plan("lab", Family::Ipv4, &node_net).is_err());
    }
}
