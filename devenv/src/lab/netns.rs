//! The lab's network: one network namespace per node, an `external`
//! namespace playing the outside client (and a BGP router), with a BGP lab
//! three more routers and their routed hop ([`multihop`]), and the
//! bridges joining them, which live in a namespace of their own
//! (`<name>-net`) so that the root namespace never gets an address or a link
//! on the lab segment (DESIGN.md, "Lab network rule").
//!
//! Deciding and doing are split: [`plan`] is a pure function from a
//! [`Topology`] to the namespaces, links, addresses and sysctls the lab
//! consists of; [`ensure`] makes the machine match that plan (creating only
//! what is missing, so a second call changes nothing), and [`destroy`]
//! removes every namespace whose name starts with `<name>-`, whatever state
//! a crash left behind.
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

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
pub use multihop::RoutePlan;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

/// Most nodes a lab can have (host numbers 10..=99 in each subnet).
pub const MAX_NODES: usize = 90;
/// Most bridges (NICs per node) a lab can have.
pub const MAX_BRIDGES: usize = 2;
/// Host number of the external namespace in each subnet.
pub const EXTERNAL_HOST: u32 = 2;
/// Host number of node 0; node *i* gets `FIRST_NODE_HOST + i`.
pub const FIRST_NODE_HOST: u32 = 10;
/// Where `ip netns` keeps its namespace handles.
pub use super::enter::NETNS_RUN_DIR;

/// Errors of the lab network.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The process may not create network namespaces.
    #[error(
        "the lab dev-env needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network \
         namespaces, bridges and veth links: {detail}; run it as root (e.g. `sudo -E cargo xtask dev-env`)"
    )]
    NeedsRoot {
        /// What was missing.
        detail: String,
    },
    /// The topology is inconsistent.
    #[error("invalid lab topology: {field}: {reason}")]
    Topology {
        /// The offending field of [`Topology`].
        field: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A tool the lab needs is not installed.
    #[error("`{program}` not found: the lab needs iproute2 (`ip`) and procps (`sysctl`) on PATH")]
    MissingTool {
        /// The program.
        program: String,
    },
    /// A command could not be started.
    #[error("could not run `{command}`: {source}")]
    Spawn {
        /// The command line (for display only; it was not run by a shell).
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// A command failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line (for display only; it was not run by a shell).
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// A command printed something we could not understand.
    #[error("could not parse the output of `{command}`: {reason}")]
    Parse {
        /// The command line.
        command: String,
        /// What was wrong.
        reason: String,
    },
}

/// Result of this module.
pub type Result<T, E = LabError> = std::result::Result<T, E>;

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

fn topology_error(field: &str, reason: impl Into<String>) -> LabError {
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
    let prefix = topology.prefix();
    let net_ns = net_namespace(name);
    let ext_ns = external_namespace(name);

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

    let kv = |k: String, v: &str| (k, v.to_string());
    // Nodes forward: the service proxy sends traffic for a Service on to
    // endpoints on other nodes (its forward chain passes only what it
    // DNATed). Such traffic leaves by the interface it came in on, which
    // is no reason to send the client ICMP redirects.
    let forwarding = |role: Role| if role == Role::Node { "1" } else { "0" };
    let host_sysctls = |role: Role| {
        let mut s = vec![kv("net.ipv4.ip_forward".into(), forwarding(role))];
        if role == Role::Node {
            for scope in ["all", "default"] {
                s.push(kv(format!("net.ipv4.conf.{scope}.arp_ignore"), "1"));
                s.push(kv(format!("net.ipv4.conf.{scope}.arp_announce"), "2"));
                s.push(kv(format!("net.ipv4.conf.{scope}.send_redirects"), "0"));
            }
        }
        if family.has_ipv6() {
            s.push(kv("net.ipv6.conf.all.forwarding".into(), forwarding(role)));
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
    };
    let iface_sysctls = |role: Role, ifname: &str| {
        let mut s = Vec::new();
        if role == Role::Node {
            s.push(kv(format!("net.ipv4.conf.{ifname}.arp_ignore"), "1"));
            s.push(kv(format!("net.ipv4.conf.{ifname}.arp_announce"), "2"));
        }
        if family.has_ipv6() {
            s.push(kv(format!("net.ipv6.conf.{ifname}.accept_dad"), "0"));
        }
        s
    };
    let interfaces = |role: Role, host: u32, peer_stem: &str| -> Result<Vec<InterfacePlan>> {
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
                    sysctls: iface_sysctls(role, &ifname),
                    name: ifname,
                })
            })
            .collect()
    };

    let mut hosts = Vec::new();
    for (i, node) in topology.nodes.iter().enumerate() {
        // MAX_NODES keeps `i` far below u32::MAX.
        let host = FIRST_NODE_HOST + u32::try_from(i).unwrap_or(u32::MAX - FIRST_NODE_HOST);
        hosts.push(HostPlan {
            name: node.clone(),
            namespace: node.clone(),
            role: Role::Node,
            sysctls: host_sysctls(Role::Node),
            interfaces: interfaces(Role::Node, host, &format!("n{i}"))?,
            routes: Vec::new(),
        });
    }
    hosts.push(HostPlan {
        name: "external".to_string(),
        namespace: ext_ns,
        role: Role::External,
        sysctls: host_sysctls(Role::External),
        interfaces: interfaces(Role::External, EXTERNAL_HOST, "x")?,
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

    // The bridge namespace takes no part in IP: without IPv6 there, its
    // ports send no router solicitations or MLD reports onto the segment.
    let net_sysctls = if family.has_ipv6() {
        vec![
            kv("net.ipv6.conf.all.disable_ipv6".into(), "1"),
            kv("net.ipv6.conf.default.disable_ipv6".into(), "1"),
            kv("net.ipv4.ip_forward".into(), "0"),
        ]
    } else {
        vec![kv("net.ipv4.ip_forward".into(), "0")]
    };

    Ok(Plan {
        name: name.to_string(),
        net_namespace: net_ns,
        net_sysctls,
        bridges,
        hosts,
        router_bridges,
    })
}

/// An Ethernet address: the one MAC type, the speaker's.
pub use metallb_rs::net::ethernet::Mac;

/// A NIC of a running lab host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabInterface {
    /// Name inside the host namespace (`eth0`, `eth1`).
    pub name: String,
    /// The bridge it is on (`br0`, `br1`).
    pub bridge: String,
    /// Its MAC address.
    pub mac: Mac,
    /// Its planned addresses, IPv4 first.
    pub addresses: Vec<IpNet>,
}

/// A host (node or external) of a running lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabHost {
    /// Node name, or `external`.
    pub name: String,
    /// Its network namespace.
    pub namespace: String,
    /// Its NICs, `eth0` first.
    pub interfaces: Vec<LabInterface>,
    /// Its planned static routes (see [`restore_routes`]).
    pub routes: Vec<RoutePlan>,
}

impl LabHost {
    /// The NIC called `name`.
    pub fn interface(&self, name: &str) -> Option<&LabInterface> {
        self.interfaces.iter().find(|i| i.name == name)
    }

    /// The addresses of `eth0` (a node's InternalIPs), IPv4 first.
    pub fn addresses(&self) -> Vec<IpAddr> {
        self.interfaces
            .first()
            .map(|i| i.addresses.iter().map(IpNet::addr).collect())
            .unwrap_or_default()
    }
}

/// A lab network as [`ensure`] left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lab {
    /// The lab's name.
    pub name: String,
    /// The namespace holding the bridges.
    pub net_namespace: String,
    /// The bridges with their subnets.
    pub bridges: Vec<BridgePlan>,
    /// The nodes, in topology order.
    pub nodes: Vec<LabHost>,
    /// The external host.
    pub external: LabHost,
    /// The BGP lab's other routers ([`multihop`]: gateway first), empty
    /// without them.
    pub routers: Vec<LabHost>,
    /// What this `ensure` call changed, one line per action; empty when the
    /// lab was already healthy.
    pub changes: Vec<String>,
}

impl Lab {
    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&LabHost> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Every namespace of the lab, net namespace first.
    pub fn namespaces(&self) -> Vec<String> {
        let mut all = vec![self.net_namespace.clone()];
        all.extend(self.nodes.iter().map(|n| n.namespace.clone()));
        all.push(self.external.namespace.clone());
        all.extend(self.routers.iter().map(|r| r.namespace.clone()));
        all
    }

    /// The router host called `name`.
    pub fn router(&self, name: &str) -> Option<&LabHost> {
        self.routers.iter().find(|r| r.name == name)
    }
}

// ---------------------------------------------------------------------------
// Doing.

fn display_command(program: &str, args: &[&str]) -> String {
    let mut s = program.to_string();
    for a in args {
        s.push(' ');
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
            s.push_str(&format!("{a:?}"));
        } else {
            s.push_str(a);
        }
    }
    s
}

/// Runs `program` with `args` (each a separate argument, no shell) and
/// returns its standard output; errors name the command and its stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let command = display_command(program, args);
    let out = duct::cmd(program, args)
        .stdin_null()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                LabError::MissingTool {
                    program: program.to_string(),
                }
            } else {
                LabError::Spawn {
                    command: command.clone(),
                    source,
                }
            }
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if stderr.contains("Operation not permitted") || stderr.contains("Permission denied") {
            return Err(LabError::NeedsRoot {
                detail: format!("`{command}`: {stderr}"),
            });
        }
        return Err(LabError::Command {
            command,
            status: out.status.to_string(),
            stderr,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> Result<String> {
    run("ip", args)
}

/// Deletes `dev` in `ns`; `false` when it was already gone (a link the
/// kernel is tearing down with its namespace can vanish at any moment).
fn del_link(ns: &str, dev: &str) -> Result<bool> {
    match ip(&["-n", ns, "link", "del", dev]) {
        Ok(_) => Ok(true),
        Err(LabError::Command { ref stderr, .. }) if stderr.contains("Cannot find device") => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

fn ip_json(args: &[&str]) -> Result<Vec<serde_json::Value>> {
    let mut full = vec!["-j"];
    full.extend_from_slice(args);
    let out = ip(&full)?;
    if out.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(&out).map_err(|e| LabError::Parse {
        command: display_command("ip", &full),
        reason: e.to_string(),
    })
}

/// Whether the effective capabilities (`CapEff:` line of
/// `/proc/self/status`) include CAP_NET_ADMIN and CAP_SYS_ADMIN; `Err`
/// names what is missing.
pub fn check_caps(proc_status: &str) -> std::result::Result<(), String> {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    let caps = proc_status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .ok_or_else(|| "cannot read CapEff from /proc/self/status".to_string())?;
    let missing: Vec<&str> = [
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
    ]
    .into_iter()
    .filter(|(bit, _)| caps & (1 << bit) == 0)
    .map(|(_, name)| name)
    .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("this process lacks {}", missing.join(" and ")))
    }
}

/// Fails with [`LabError::NeedsRoot`] unless the process may manage
/// network namespaces.
pub fn require_privileges() -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| LabError::NeedsRoot {
        detail: format!("cannot read /proc/self/status: {e}"),
    })?;
    check_caps(&status).map_err(|detail| LabError::NeedsRoot { detail })
}

/// Parses `ip netns list` output (`name (id: 3)` or `name` per line).
pub fn parse_netns_list(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Every network namespace `ip netns` knows.
pub fn list_namespaces() -> Result<Vec<String>> {
    Ok(parse_netns_list(&ip(&["netns", "list"])?))
}

/// The namespaces among `all` that belong to lab `name`: those starting
/// with `<name>-`, except those of another lab whose name starts with
/// `<name>-` (recognised by its `<other>-net` namespace).
pub fn lab_namespaces(name: &str, all: &[String]) -> Vec<String> {
    let prefix = format!("{name}-");
    let others: Vec<String> = all
        .iter()
        .filter_map(|ns| ns.strip_suffix("-net"))
        .filter(|other| other.starts_with(&prefix))
        .map(|other| format!("{other}-"))
        .collect();
    all.iter()
        .filter(|ns| ns.starts_with(&prefix))
        .filter(|ns| !others.iter().any(|o| ns.starts_with(o.as_str())))
        .cloned()
        .collect()
}

/// A link as `ip -j -d link show` reports it.
#[derive(Debug, Clone)]
struct Link {
    name: String,
    mac: Option<Mac>,
    up: bool,
    master: Option<String>,
    kind: Option<String>,
}

fn links(ns: &str) -> Result<Vec<Link>> {
    let rows = ip_json(&["-d", "-n", ns, "link", "show"])?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let name = r.get("ifname")?.as_str()?.to_string();
            let up = r
                .get("flags")
                .and_then(|f| f.as_array())
                .is_some_and(|f| f.iter().any(|x| x.as_str() == Some("UP")));
            Some(Link {
                name,
                mac: r
                    .get("address")
                    .and_then(|a| a.as_str())
                    .and_then(|a| a.parse().ok()),
                up,
                master: r.get("master").and_then(|m| m.as_str()).map(str::to_string),
                kind: r
                    .get("linkinfo")
                    .and_then(|l| l.get("info_kind"))
                    .and_then(|k| k.as_str())
                    .map(str::to_string),
            })
        })
        .collect())
}

/// Global addresses of `dev` in `ns`.
fn addresses(ns: &str, dev: &str) -> Result<Vec<IpNet>> {
    let rows = ip_json(&["-n", ns, "addr", "show", "dev", dev])?;
    let mut out = Vec::new();
    for r in &rows {
        let Some(infos) = r.get("addr_info").and_then(|a| a.as_array()) else {
            continue;
        };
        for a in infos {
            let local = a.get("local").and_then(|l| l.as_str());
            let len = a.get("prefixlen").and_then(|p| p.as_u64());
            if let (Some(local), Some(len)) = (local, len)
                && let (Ok(addr), Ok(len)) = (local.parse::<IpAddr>(), u8::try_from(len))
                && let Ok(net) = IpNet::new(addr, len)
            {
                out.push(net);
            }
        }
    }
    Ok(out)
}

/// Reads sysctls inside `ns`: from `/proc/sys` on a thread that entered
/// `ns` (no process started: a rerun on a healthy lab reads dozens), else
/// with `ip netns exec NS sysctl -n`.
pub fn read_sysctls(ns: &str, keys: &[&str]) -> Result<Vec<String>> {
    let from_proc = super::enter::in_netns(ns, || {
        keys.iter()
            .map(|k| {
                std::fs::read_to_string(format!("/proc/sys/{}", k.replace('.', "/")))
                    .map(|v| v.trim().to_owned())
            })
            .collect::<std::io::Result<Vec<String>>>()
    });
    match from_proc {
        Ok(Ok(values)) => Ok(values),
        _ => read_sysctls_with_command(ns, keys),
    }
}

fn read_sysctls_with_command(ns: &str, keys: &[&str]) -> Result<Vec<String>> {
    let mut args = vec!["netns", "exec", ns, "sysctl", "-n"];
    args.extend_from_slice(keys);
    let out = ip(&args)?;
    let values: Vec<String> = out.lines().map(|l| l.trim().to_string()).collect();
    if values.len() != keys.len() {
        return Err(LabError::Parse {
            command: display_command("ip", &args),
            reason: format!("expected {} values, got {}", keys.len(), values.len()),
        });
    }
    Ok(values)
}

/// Sets those of `sysctls` inside `ns` that differ; returns the changes.
fn apply_sysctls(ns: &str, sysctls: &[(String, String)]) -> Result<Vec<String>> {
    if sysctls.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<&str> = sysctls.iter().map(|(k, _)| k.as_str()).collect();
    let current = read_sysctls(ns, &keys)?;
    let assignments: Vec<String> = sysctls
        .iter()
        .zip(&current)
        .filter(|((_, want), have)| want != *have)
        .map(|((k, v), _)| format!("{k}={v}"))
        .collect();
    if assignments.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec!["netns", "exec", ns, "sysctl", "-q", "-w"];
    args.extend(assignments.iter().map(String::as_str));
    ip(&args)?;
    Ok(assignments
        .into_iter()
        .map(|a| format!("{ns}: sysctl {a}"))
        .collect())
}

fn find<'a>(links: &'a [Link], name: &str) -> Option<&'a Link> {
    links.iter().find(|l| l.name == name)
}

/// Makes the machine match `topology`'s [`plan`], creating only what is
/// missing or wrong: a second call on a healthy lab changes nothing (its
/// [`Lab::changes`] is empty). Namespaces of the lab that the plan does not
/// have (a node fewer than last time) are deleted; extra addresses or an
/// `eth1` left from an earlier topology are not. Needs root.
pub fn ensure(topology: &Topology) -> Result<Lab> {
    let plan = plan(topology)?;
    require_privileges()?;
    let mut changes = Vec::new();

    let existing = list_namespaces()?;
    // Namespaces of this lab that the plan no longer has (fewer nodes than
    // last time) go, with their processes.
    let wanted = plan.namespaces();
    for ns in lab_namespaces(&plan.name, &existing) {
        if !wanted.contains(&ns) {
            kill_processes(&ns, Duration::from_secs(2))?;
            ip(&["netns", "del", &ns])?;
            changes.push(format!("deleted stale namespace {ns}"));
        }
    }
    for ns in wanted {
        if !existing.contains(&ns) {
            ip(&["netns", "add", &ns])?;
            changes.push(format!("created namespace {ns}"));
        }
        let lo = links(&ns)?;
        if !find(&lo, "lo").is_some_and(|l| l.up) {
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            changes.push(format!("{ns}: lo up"));
        }
    }

    // Bridges.
    let net = plan.net_namespace.as_str();
    changes.extend(apply_sysctls(net, &plan.net_sysctls)?);
    let net_links = links(net)?;
    for bridge in plan.bridges.iter().chain(&plan.router_bridges) {
        let br = bridge.name.as_str();
        match find(&net_links, br) {
            Some(l) if l.kind.as_deref() == Some("bridge") => {
                if !l.up {
                    ip(&["-n", net, "link", "set", br, "up"])?;
                    changes.push(format!("{net}: {br} up"));
                }
            }
            other => {
                if other.is_some() {
                    ip(&["-n", net, "link", "del", br])?;
                    changes.push(format!("{net}: deleted {br} (not a bridge)"));
                }
                ip(&[
                    "-n",
                    net,
                    "link",
                    "add",
                    br,
                    "type",
                    "bridge",
                    "mcast_snooping",
                    "0",
                ])?;
                ip(&["-n", net, "link", "set", br, "up"])?;
                changes.push(format!("{net}: created bridge {br}"));
            }
        }
    }

    // Hosts. Links are read again only after something changed.
    let mut net_links = links(net)?;
    let mut net_links_at = changes.len();
    let mut host_links_seen = std::collections::BTreeMap::new();
    for host in &plan.hosts {
        let ns = host.namespace.as_str();
        changes.extend(apply_sysctls(ns, &host.sysctls)?);
        if changes.len() != net_links_at {
            net_links = links(net)?;
            net_links_at = changes.len();
        }
        let host_links = links(ns)?;
        let host_changes_at = changes.len();
        for iface in &host.interfaces {
            let (dev, peer, br) = (iface.name.as_str(), iface.peer.as_str(), &iface.bridge);
            let have_dev = find(&host_links, dev);
            let have_peer = find(&net_links, peer);
            let healthy_pair = have_dev.is_some_and(|l| l.kind.as_deref() == Some("veth"))
                && have_peer.is_some_and(|l| l.kind.as_deref() == Some("veth"));
            if !healthy_pair {
                if have_dev.is_some() {
                    ip(&["-n", ns, "link", "del", dev])?;
                    changes.push(format!("{ns}: deleted broken {dev}"));
                }
                // Deleting one end of a veth deletes the other: look again.
                // A peer whose namespace was just deleted is torn down by
                // the kernel in the background, so it may vanish between
                // the look and the delete.
                if find(&links(net)?, peer).is_some() && del_link(net, peer)? {
                    changes.push(format!("{net}: deleted stale {peer}"));
                }
                ip(&[
                    "-n", ns, "link", "add", dev, "type", "veth", "peer", "name", peer, "netns",
                    net,
                ])?;
                changes.push(format!("created veth {ns}/{dev} <-> {net}/{peer}"));
            }
            let peer_now = if healthy_pair {
                have_peer.cloned()
            } else {
                find(&links(net)?, peer).cloned()
            };
            let peer_now = peer_now.ok_or_else(|| LabError::Parse {
                command: format!("ip -n {net} link show"),
                reason: format!("{peer} missing right after creating it"),
            })?;
            if peer_now.master.as_deref() != Some(br.as_str()) {
                ip(&["-n", net, "link", "set", peer, "master", br])?;
                changes.push(format!("{net}: {peer} master {br}"));
            }
            if !peer_now.up {
                ip(&["-n", net, "link", "set", peer, "up"])?;
                changes.push(format!("{net}: {peer} up"));
            }
            changes.extend(apply_sysctls(ns, &iface.sysctls)?);
            let have_addrs = addresses(ns, dev)?;
            for addr in &iface.addresses {
                if !have_addrs.contains(addr) {
                    let a = addr.to_string();
                    let mut args = vec!["-n", ns, "addr", "add", &a, "dev", dev];
                    if addr.addr().is_ipv6() {
                        args.push("nodad");
                    }
                    ip(&args)?;
                    changes.push(format!("{ns}: {dev} address {a}"));
                }
            }
            let dev_up = healthy_pair && have_dev.is_some_and(|l| l.up);
            if !dev_up {
                ip(&["-n", ns, "link", "set", dev, "up"])?;
                changes.push(format!("{ns}: {dev} up"));
            }
        }
        changes.extend(ensure_routes(ns, &host.routes)?);
        if changes.len() == host_changes_at {
            host_links_seen.insert(ns.to_owned(), host_links);
        }
    }

    // Read back what is there now.
    let mut seen = std::collections::BTreeMap::new();
    for host in &plan.hosts {
        let host_links = match host_links_seen.remove(&host.namespace) {
            Some(unchanged) => unchanged,
            None => links(&host.namespace)?,
        };
        seen.insert(host.namespace.clone(), host_links);
    }
    let mut lab = assemble(&plan, |host, iface| {
        seen.get(&host.namespace)
            .and_then(|l| find(l, &iface.name))
            .and_then(|l| l.mac)
            .ok_or_else(|| LabError::Parse {
                command: format!("ip -j -n {} link show", host.namespace),
                reason: format!("no MAC address for {}", iface.name),
            })
    })?;
    lab.changes = changes;
    Ok(lab)
}

/// The [`Lab`] of `plan` with each interface's MAC from `mac_of`.
fn assemble(
    plan: &Plan,
    mut mac_of: impl FnMut(&HostPlan, &InterfacePlan) -> Result<Mac>,
) -> Result<Lab> {
    let mut hosts = Vec::new();
    for host in &plan.hosts {
        let mut interfaces = Vec::new();
        for iface in &host.interfaces {
            interfaces.push(LabInterface {
                name: iface.name.clone(),
                bridge: iface.bridge.clone(),
                mac: mac_of(host, iface)?,
                addresses: iface.addresses.clone(),
            });
        }
        hosts.push((
            host.role,
            LabHost {
                name: host.name.clone(),
                namespace: host.namespace.clone(),
                interfaces,
                routes: host.routes.clone(),
            },
        ));
    }
    let of = |role: Role| -> Vec<LabHost> {
        hosts
            .iter()
            .filter(|(r, _)| *r == role)
            .map(|(_, h)| h.clone())
            .collect()
    };
    let external = of(Role::External)
        .pop()
        .ok_or_else(|| topology_error("nodes", "empty plan"))?;
    Ok(Lab {
        name: plan.name.clone(),
        net_namespace: plan.net_namespace.clone(),
        bridges: plan.bridges.clone(),
        nodes: of(Role::Node),
        external,
        routers: of(Role::Router),
        changes: Vec::new(),
    })
}

impl Lab {
    /// The lab `plan` describes, as [`ensure`] would return it but made
    /// without touching the machine: every MAC is `mac`. For deciding
    /// code and its tests.
    pub fn planned(plan: &Plan, mac: Mac) -> Result<Lab> {
        assemble(plan, |_, _| Ok(mac))
    }
}

/// Puts `host`'s planned routes back: the kernel drops a route through
/// a gateway when its link goes down, and does not restore it when the
/// link comes back up (the specs that take a node's link down and up).
/// Returns what it added.
pub fn restore_routes(host: &LabHost) -> Result<Vec<String>> {
    ensure_routes(&host.namespace, &host.routes)
}

/// Adds or corrects `routes` in `ns` (`ip route replace` where the route
/// is missing or goes elsewhere); returns the changes.
fn ensure_routes(ns: &str, routes: &[RoutePlan]) -> Result<Vec<String>> {
    let mut changes = Vec::new();
    for r in routes {
        let family = if r.destination.addr().is_ipv6() {
            "-6"
        } else {
            "-4"
        };
        let dst = r.destination.to_string();
        let gw = r.gateway.to_string();
        let have = ip_json(&[family, "-n", ns, "route", "show", "exact", &dst])?;
        let right =
            have.len() == 1 && have[0].get("gateway").and_then(|g| g.as_str()) == Some(gw.as_str());
        if !right {
            ip(&[family, "-n", ns, "route", "replace", &dst, "via", &gw])?;
            changes.push(format!("{ns}: route {dst} via {gw}"));
        }
    }
    Ok(changes)
}

/// Parses `ip netns pids` output: one pid per line.
fn parse_pids(out: &str) -> Vec<i32> {
    out.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Kills every process living in `ns` (never this process): SIGTERM, then
/// SIGKILL after a grace period. Returns the pids it signalled.
pub fn kill_processes(ns: &str, grace: Duration) -> Result<Vec<i32>> {
    use super::process::alive;
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let me = std::process::id();
    let pids: Vec<i32> = parse_pids(&ip(&["netns", "pids", ns])?)
        .into_iter()
        .filter(|p| u32::try_from(*p).ok() != Some(me))
        .collect();
    for &pid in &pids {
        // Gone already is fine.
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &pid in pids.iter().filter(|&&p| alive(p)) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    Ok(pids)
}

/// Removes lab `name`: kills the processes in its namespaces, deletes every
/// namespace whose name starts with `<name>-` (with them go their links) and
/// any link in the root namespace with that prefix. Works on whatever a
/// crash left (also on nothing). Returns what it removed.
pub fn destroy(name: &str) -> Result<Vec<String>> {
    validate_name(name)?;
    require_privileges()?;
    let prefix = format!("{name}-");
    let mut removed = Vec::new();
    for ns in lab_namespaces(name, &list_namespaces()?) {
        kill_processes(&ns, Duration::from_secs(2))?;
        if let Err(e) = ip(&["netns", "del", &ns]) {
            // A concurrent destroy may have been faster.
            if list_namespaces()?.contains(&ns) {
                return Err(e);
            }
        }
        removed.push(format!("namespace {ns}"));
    }
    let root_links = ip_json(&["link", "show"])?;
    for l in root_links {
        if let Some(ifname) = l.get("ifname").and_then(|n| n.as_str())
            && ifname.starts_with(&prefix)
        {
            if let Err(e) = ip(&["link", "del", ifname]) {
                // Deleting one end of a veth pair already took the other.
                if ip(&["link", "show", "dev", ifname]).is_ok() {
                    return Err(e);
                }
            }
            removed.push(format!("link {ifname}"));
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
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
    fn lab_namespaces_spare_other_labs() {
        let all: Vec<String> = [
            "t1-net",
            "t1-control-plane",
            "t1-external",
            "t12-net",
            "t12-worker",
            "t1-x-net",
            "t1-x-worker",
            "other",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            lab_namespaces("t1", &all),
            ["t1-net", "t1-control-plane", "t1-external"]
        );
        assert_eq!(lab_namespaces("t1-x", &all), ["t1-x-net", "t1-x-worker"]);
    }

    #[test]
    fn parses_netns_list_and_pids() {
        assert_eq!(
            parse_netns_list("a-net (id: 2)\nb\n\n"),
            ["a-net".to_string(), "b".to_string()]
        );
        assert_eq!(parse_pids("12\n345\n"), [12, 345]);
    }

    #[test]
    fn caps_check_names_what_is_missing() {
        assert!(check_caps("Name:\tx\nCapEff:\t000001ffffffffff\n").is_ok());
        let err = check_caps("CapEff:\t0000000000000000\n").expect_err("no caps");
        assert!(err.contains("CAP_NET_ADMIN") && err.contains("CAP_SYS_ADMIN"));
        assert!(check_caps("nothing").is_err());
    }

    #[test]
    fn display_command_quotes_only_for_reading() {
        assert_eq!(
            display_command("ip", &["-n", "a b", "link"]),
            "ip -n \"a b\" link"
        );
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
}
