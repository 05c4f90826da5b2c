//! The lab network as a plan: [`plan`] checks a [`Topology`] and computes
//! every namespace, bridge, interface, address, sysctl and route of the
//! lab, with the BGP lab's routed hop from [`multihop`]. Pure: no `ip`, no
//! files; `netns::ensure` carries the plan out.
//!
//! # Address plan
//!
//! Both ranges exist only inside the lab's namespaces.
//!
//! | bridge | interface | IPv4            | IPv6                      |
//! |--------|-----------|-----------------|---------------------------|
//! | `br0`  | `eth0`    | `172.30.0.0/24` | `fc00:f853:ccd:e793::/64` |
//! | `br1`  | `eth1`    | `172.30.1.0/24` | `fc00:f853:ccd:e794::/64` |
//!
//! In each subnet the external namespace has host number 2 (`172.30.0.2`,
//! `fc00:f853:ccd:e793::2`) and node *i* (0 = control-plane) has host number
//! 10 + *i* (`172.30.0.10`, `.11`, ...). An IPv6 address ends in the same
//! digits as its IPv4 sibling (`fc00:f853:ccd:e793::10`, `::11`, ...; the
//! decimal digits read as hex). At most [`MAX_NODES`] nodes, so `.100`-`.254`
//! (and `::100` and up) stay free for address pools (VIPs).
//!
//! # Names
//!
//! Namespaces: the node names (by default `<name>-control-plane`,
//! `<name>-worker`, `<name>-worker2`, ...), `<name>-external` and
//! `<name>-net`. Interfaces: `eth0`/`eth1` inside each host namespace; their
//! veth peers inside `<name>-net` are `n<i>e<b>` for node *i* and `xe<b>` for
//! the external host, attached to bridge `br<b>`. Every name stays far
//! below the kernel's 15-character interface name limit, whatever the lab
//! name.

pub mod multihop;

use super::{LabError, Result};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use multihop::RoutePlan;
use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Most nodes a lab can have (host numbers 10..=99 in each subnet).
pub const MAX_NODES: usize = 90;
/// Most bridges (NICs per node) a lab can have.
pub const MAX_BRIDGES: usize = 2;
/// Host number of the external namespace in each subnet.
pub const EXTERNAL_HOST: u32 = 2;
/// Host number of node 0; node *i* gets `FIRST_NODE_HOST + i`.
pub const FIRST_NODE_HOST: u32 = 10;

/// Which address families the lab's interfaces get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    /// IPv4 only.
    Ipv4,
    /// IPv6 only.
    Ipv6,
    /// Both.
    #[default]
    Dual,
}

impl Family {
    /// Whether interfaces get an IPv4 address.
    pub fn has_ipv4(self) -> bool {
        matches!(self, Family::Ipv4 | Family::Dual)
    }
    /// Whether interfaces get an IPv6 address.
    pub fn has_ipv6(self) -> bool {
        matches!(self, Family::Ipv6 | Family::Dual)
    }
}

/// The subnets of one bridge (one of them unused in a single-family lab).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BridgeSubnets {
    /// IPv4 subnet, at least a /24.
    pub ipv4: Ipv4Net,
    /// IPv6 subnet, at least a /120.
    pub ipv6: Ipv6Net,
}

/// The default subnets: `172.30.0.0/24` + `fc00:f853:ccd:e793::/64` for
/// `br0`, `172.30.1.0/24` + `fc00:f853:ccd:e794::/64` for `br1`.
pub fn default_subnets() -> Vec<BridgeSubnets> {
    let pair = |v4: [u8; 4], v6_last: u16| BridgeSubnets {
        ipv4: Ipv4Net::new_assert(Ipv4Addr::from(v4), 24),
        ipv6: Ipv6Net::new_assert(
            Ipv6Addr::new(0xfc00, 0xf853, 0xccd, v6_last, 0, 0, 0, 0),
            64,
        ),
    };
    vec![pair([172, 30, 0, 0], 0xe793), pair([172, 30, 1, 0], 0xe794)]
}

/// Kind-style node names: `<name>-control-plane`, `<name>-worker`,
/// `<name>-worker2`, ... with `workers` workers.
pub fn default_node_names(name: &str, workers: usize) -> Vec<String> {
    let mut nodes = vec![format!("{name}-control-plane")];
    for i in 1..=workers {
        nodes.push(if i == 1 {
            format!("{name}-worker")
        } else {
            format!("{name}-worker{i}")
        });
    }
    nodes
}

/// What the lab network should look like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// The lab's name; every namespace it makes starts with `<name>-`.
    pub name: String,
    /// Node names, which are also their namespaces' names; each must start
    /// with `<name>-`.
    pub nodes: Vec<String>,
    /// Address families.
    pub family: Family,
    /// Number of bridges, i.e. NICs per host (`eth0`, `eth1`): 1 or 2.
    pub bridges: usize,
    /// Subnets per bridge; needs at least `bridges` entries.
    pub subnets: Vec<BridgeSubnets>,
    /// The BGP lab's extra routers and their routed hop ([`multihop`]).
    pub routers: bool,
}

impl Topology {
    /// A dual-stack, one-bridge lab with a control plane and `workers`
    /// workers, on the default subnets.
    pub fn new(name: &str, workers: usize) -> Topology {
        Topology {
            name: name.to_string(),
            nodes: default_node_names(name, workers),
            family: Family::Dual,
            bridges: 1,
            subnets: default_subnets(),
            routers: false,
        }
    }

    /// The same lab with (or without) the BGP lab's extra routers.
    pub fn with_routers(mut self, routers: bool) -> Topology {
        self.routers = routers;
        self
    }

    /// The same lab with other address families.
    pub fn with_family(mut self, family: Family) -> Topology {
        self.family = family;
        self
    }

    /// The same lab with `bridges` bridges (NICs per host).
    pub fn with_bridges(mut self, bridges: usize) -> Topology {
        self.bridges = bridges;
        self
    }

    /// `<name>-`: the prefix of everything the lab creates.
    pub fn prefix(&self) -> String {
        format!("{}-", self.name)
    }
}

/// The namespace holding a lab's bridges.
pub fn net_namespace(name: &str) -> String {
    format!("{name}-net")
}

/// The external host's namespace.
pub fn external_namespace(name: &str) -> String {
    format!("{name}-external")
}

/// What a host is in the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A Kubernetes node (runs a speaker).
    Node,
    /// The outside client / BGP router.
    External,
    /// One of the BGP lab's other routers ([`multihop`]).
    Router,
}

/// One bridge of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgePlan {
    /// Its name inside the net namespace (`br0`, `br1`).
    pub name: String,
    /// IPv4 subnet on it, if the family has IPv4.
    pub ipv4: Option<Ipv4Net>,
    /// IPv6 subnet on it, if the family has IPv6.
    pub ipv6: Option<Ipv6Net>,
}

/// One NIC of a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfacePlan {
    /// Name inside the host namespace (`eth0`, `eth1`).
    pub name: String,
    /// Name of its veth peer inside the net namespace.
    pub peer: String,
    /// The bridge the peer is attached to.
    pub bridge: String,
    /// Addresses (with prefix length), IPv4 first.
    pub addresses: Vec<IpNet>,
    /// Per-interface sysctls `(key, value)`.
    pub sysctls: Vec<(String, String)>,
}

/// One host (node or external) of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPlan {
    /// Node name, or `external`.
    pub name: String,
    /// Its network namespace.
    pub namespace: String,
    /// Node or external.
    pub role: Role,
    /// Namespace-wide sysctls `(key, value)`, set before the links exist so
    /// that `default` values are inherited.
    pub sysctls: Vec<(String, String)>,
    /// Its NICs, one per bridge (a router: on the bridges it stands on).
    pub interfaces: Vec<InterfacePlan>,
    /// Its static routes.
    pub routes: Vec<RoutePlan>,
}

/// Everything a lab network consists of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The lab's name.
    pub name: String,
    /// The namespace holding the bridges.
    pub net_namespace: String,
    /// Sysctls of the net namespace.
    pub net_sysctls: Vec<(String, String)>,
    /// The bridges.
    pub bridges: Vec<BridgePlan>,
    /// Nodes first (in topology order), then the external host, then the
    /// routers.
    pub hosts: Vec<HostPlan>,
    /// Bridges of the routers' networks (no node has a leg there).
    pub router_bridges: Vec<BridgePlan>,
}

impl Plan {
    /// Every namespace of the lab, net namespace first.
    pub fn namespaces(&self) -> Vec<String> {
        let mut all = vec![self.net_namespace.clone()];
        all.extend(self.hosts.iter().map(|h| h.namespace.clone()));
        all
    }
}

pub(super) fn topology_error(field: &str, reason: impl Into<String>) -> LabError {
    LabError::Topology {
        field: field.to_string(),
        reason: reason.into(),
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Validates a lab name: lowercase letters, digits and `-`, not starting or
/// ending with `-`, at most 40 characters.
pub fn validate_name(name: &str) -> Result<()> {
    if !valid_name(name) || name.len() > 40 {
        return Err(topology_error(
            "name",
            format!(
                "{name:?} is not a valid lab name: use 1-40 lowercase letters, digits and '-', \
                 not starting or ending with '-'"
            ),
        ));
    }
    Ok(())
}

fn v4_host(net: Ipv4Net, host: u32, field: &str) -> Result<IpNet> {
    let size = 1u64 << (32 - u32::from(net.prefix_len()));
    if u64::from(host) + 1 >= size {
        return Err(topology_error(
            field,
            format!("{net} is too small for host number {host}; use a /24 or larger"),
        ));
    }
    let addr = Ipv4Addr::from(u32::from(net.network()) + host);
    Ok(IpNet::V4(Ipv4Net::new_assert(addr, net.prefix_len())))
}

fn v6_host(net: Ipv6Net, host: u32, field: &str) -> Result<IpNet> {
    let bits = 128 - u32::from(net.prefix_len());
    if bits < 32 && u64::from(host) >= (1u64 << bits) {
        return Err(topology_error(
            field,
            format!("{net} is too small for host number {host}; use a /120 or larger"),
        ));
    }
    // Same digits as the IPv4 host number: 10 -> ::10.
    let host = u32::from_str_radix(&host.to_string(), 16).unwrap_or(host);
    let addr = Ipv6Addr::from(u128::from(net.network()) + u128::from(host));
    Ok(IpNet::V6(Ipv6Net::new_assert(addr, net.prefix_len())))
}

/// Computes the lab network for `topology`, validating it. Pure.
pub fn plan(topology: &Topology) -> Result<Plan> {
    let name = topology.name.as_str();
    validate_name(name)?;
    validate_nodes(topology)?;
    let subnets = validate_subnets(topology)?;
    let family = topology.family;
    let bridges: Vec<BridgePlan> = subnets
        .iter()
        .enumerate()
        .map(|(b, s)| BridgePlan {
            name: format!("br{b}"),
            ipv4: family.has_ipv4().then_some(s.ipv4),
            ipv6: family.has_ipv6().then_some(s.ipv6),
        })
        .collect();

    let mut hosts = Vec::new();
    for (i, node) in topology.nodes.iter().enumerate() {
        // MAX_NODES keeps `i` far below u32::MAX.
        let host = FIRST_NODE_HOST + u32::try_from(i).unwrap_or(u32::MAX - FIRST_NODE_HOST);
        hosts.push(HostPlan {
            name: node.clone(),
            namespace: node.clone(),
            role: Role::Node,
            sysctls: host_sysctls(family, Role::Node),
            interfaces: interfaces(family, subnets, Role::Node, host, &format!("n{i}"))?,
            routes: Vec::new(),
        });
    }
    hosts.push(HostPlan {
        name: "external".to_string(),
        namespace: external_namespace(name),
        role: Role::External,
        sysctls: host_sysctls(family, Role::External),
        interfaces: interfaces(family, subnets, Role::External, EXTERNAL_HOST, "x")?,
        routes: Vec::new(),
    });
    let mut router_bridges = Vec::new();
    if topology.routers {
        let hop = multihop::plan(name, family, &subnets[0])?;
        for h in hosts.iter_mut().filter(|h| h.role == Role::Node) {
            h.routes = hop.node_routes.clone();
        }
        hosts.extend(hop.hosts);
        router_bridges.push(hop.bridge);
    }

    Ok(Plan {
        name: name.to_string(),
        net_namespace: net_namespace(name),
        net_sysctls: net_sysctls(family),
        bridges,
        hosts,
        router_bridges,
    })
}

/// Checks the node names: at least one, at most [`MAX_NODES`], each
/// `<name>-...`, none taken by the lab's own namespaces, none twice.
fn validate_nodes(topology: &Topology) -> Result<()> {
    let name = topology.name.as_str();
    let prefix = topology.prefix();
    let (net_ns, ext_ns) = (net_namespace(name), external_namespace(name));
    if topology.nodes.is_empty() {
        return Err(topology_error("nodes", "a lab needs at least one node"));
    }
    if topology.nodes.len() > MAX_NODES {
        return Err(topology_error(
            "nodes",
            format!(
                "{} nodes; a lab has at most {MAX_NODES}",
                topology.nodes.len()
            ),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, node) in topology.nodes.iter().enumerate() {
        let field = format!("nodes[{i}]");
        if !valid_name(node) || !node.starts_with(&prefix) || node.len() == prefix.len() {
            return Err(topology_error(
                &field,
                format!(
                    "{node:?} must be `{prefix}` followed by lowercase letters, digits and '-' \
                     (at most 63 characters in all)"
                ),
            ));
        }
        if *node == net_ns
            || *node == ext_ns
            || std::iter::once(multihop::GATEWAY)
                .chain(multihop::BEHIND)
                .any(|r| *node == multihop::namespace(name, r))
        {
            return Err(topology_error(
                &field,
                format!("{node:?} is reserved for the lab's own namespaces"),
            ));
        }
        if !seen.insert(node.as_str()) {
            return Err(topology_error(&field, format!("{node:?} appears twice")));
        }
    }
    Ok(())
}

/// The subnets of the bridges the topology asks for, once the bridge
/// count is allowed and no two bridges share a subnet of a family in use.
fn validate_subnets(topology: &Topology) -> Result<&[BridgeSubnets]> {
    if topology.bridges == 0 || topology.bridges > MAX_BRIDGES {
        return Err(topology_error(
            "bridges",
            format!("{}; use 1 or {MAX_BRIDGES}", topology.bridges),
        ));
    }
    if topology.subnets.len() < topology.bridges {
        return Err(topology_error(
            "subnets",
            format!(
                "{} bridges need {} subnet pairs, got {}",
                topology.bridges,
                topology.bridges,
                topology.subnets.len()
            ),
        ));
    }
    let subnets = &topology.subnets[..topology.bridges];
    for (a, sa) in subnets.iter().enumerate() {
        for (b, sb) in subnets.iter().enumerate().skip(a + 1) {
            let v4_overlap = sa.ipv4.contains(&sb.ipv4) || sb.ipv4.contains(&sa.ipv4);
            let v6_overlap = sa.ipv6.contains(&sb.ipv6) || sb.ipv6.contains(&sa.ipv6);
            if (topology.family.has_ipv4() && v4_overlap)
                || (topology.family.has_ipv6() && v6_overlap)
            {
                return Err(topology_error(
                    &format!("subnets[{b}]"),
                    format!("overlaps subnets[{a}]; each bridge needs its own subnets"),
                ));
            }
        }
    }
    Ok(subnets)
}

fn kv(key: String, value: &str) -> (String, String) {
    (key, value.to_string())
}

/// The namespace-wide sysctls of a host.
fn host_sysctls(family: Family, role: Role) -> Vec<(String, String)> {
    // Nodes forward: the service proxy sends traffic for a Service on to
    // endpoints on other nodes (its forward chain passes only what it
    // DNATed). Such traffic leaves by the interface it came in on, which
    // is no reason to send the client ICMP redirects.
    let forwarding = if role == Role::Node { "1" } else { "0" };
    let mut s = vec![kv("net.ipv4.ip_forward".into(), forwarding)];
    if role == Role::Node {
        for scope in ["all", "default"] {
            s.push(kv(format!("net.ipv4.conf.{scope}.arp_ignore"), "1"));
            s.push(kv(format!("net.ipv4.conf.{scope}.arp_announce"), "2"));
            s.push(kv(format!("net.ipv4.conf.{scope}.send_redirects"), "0"));
        }
    }
    if family.has_ipv6() {
        s.push(kv("net.ipv6.conf.all.forwarding".into(), forwarding));
        for scope in ["all", "default"] {
            s.push(kv(format!("net.ipv6.conf.{scope}.accept_dad"), "0"));
            // A link taken down and up (the failover specs) keeps its
            // IPv6 addresses, as IPv4 ones are kept; Linux otherwise
            // flushes them and nothing here would add them back.
            s.push(kv(format!("net.ipv6.conf.{scope}.keep_addr_on_down"), "1"));
        }
    }
    if role == Role::External {
        // ECMP routes (BGP, through every announcing node) hash the
        // ports too: successive connections spread over the nodes.
        s.push(kv("net.ipv4.fib_multipath_hash_policy".into(), "1"));
        if family.has_ipv6() {
            s.push(kv("net.ipv6.fib_multipath_hash_policy".into(), "1"));
        }
    }
    s
}

/// The sysctls of a host's interface `ifname`.
fn iface_sysctls(family: Family, role: Role, ifname: &str) -> Vec<(String, String)> {
    let mut s = Vec::new();
    if role == Role::Node {
        s.push(kv(format!("net.ipv4.conf.{ifname}.arp_ignore"), "1"));
        s.push(kv(format!("net.ipv4.conf.{ifname}.arp_announce"), "2"));
    }
    if family.has_ipv6() {
        s.push(kv(format!("net.ipv6.conf.{ifname}.accept_dad"), "0"));
    }
    s
}

/// A host's NICs, one per bridge: host number `host` in each subnet, veth
/// peers named `<peer_stem>e<b>`.
fn interfaces(
    family: Family,
    subnets: &[BridgeSubnets],
    role: Role,
    host: u32,
    peer_stem: &str,
) -> Result<Vec<InterfacePlan>> {
    subnets
        .iter()
        .enumerate()
        .map(|(b, s)| {
            let field = format!("subnets[{b}]");
            let mut addresses = Vec::new();
            if family.has_ipv4() {
                addresses.push(v4_host(s.ipv4, host, &field)?);
            }
            if family.has_ipv6() {
                addresses.push(v6_host(s.ipv6, host, &field)?);
            }
            let ifname = format!("eth{b}");
            Ok(InterfacePlan {
                peer: format!("{peer_stem}e{b}"),
                bridge: format!("br{b}"),
                addresses,
                sysctls: iface_sysctls(family, role, &ifname),
                name: ifname,
            })
        })
        .collect()
}

/// The sysctls of the bridge namespace.
fn net_sysctls(family: Family) -> Vec<(String, String)> {
    // The bridge namespace takes no part in IP: without IPv6 there, its
    // ports send no router solicitations or MLD reports onto the segment.
    if family.has_ipv6() {
        vec![
            kv("net.ipv6.conf.all.disable_ipv6".into(), "1"),
            kv("net.ipv6.conf.default.disable_ipv6".into(), "1"),
            kv("net.ipv4.ip_forward".into(), "0"),
        ]
    } else {
        vec![kv("net.ipv4.ip_forward".into(), "0")]
    }
}

#[cfg(test)]
mod tests;
