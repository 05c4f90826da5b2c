//! The lab's network: one network namespace per node, an `external`
//! namespace playing the outside client (and a BGP router), with a BGP lab
//! three more routers and their routed hop ([`multihop`]), and the
//! bridges joining them, which live in a namespace of their own
//! (`<name>-net`) so that the root namespace never gets an address or a link
//! on the lab segment (ARCHITECTURE.md, the lab's invariant).
//!
//! Deciding and doing are split, one module each: `plan` holds [`plan`],
//! a pure function from a [`Topology`] to the namespaces, links, addresses
//! and sysctls the lab consists of (the address plan and the names are
//! described there); `ensure` makes the machine match that plan (creating
//! only what is missing, so a second call changes nothing), and `destroy`
//! removes every namespace whose name starts with `<name>-`, whatever
//! state a crash left behind. Both run `ip` and read what it reports
//! through `ip`. This module keeps what they share: the error, and the
//! [`Lab`] that [`ensure`] returns.

mod destroy;
mod ensure;
mod ip;
mod plan;

pub use destroy::{destroy, kill_processes};
pub use ensure::{ensure, restore_routes};
pub use ip::{
    check_caps, lab_namespaces, list_namespaces, parse_netns_list, read_sysctls,
    require_privileges, run,
};
pub use plan::multihop::{self, RoutePlan};
pub use plan::{
    BridgePlan, BridgeSubnets, EXTERNAL_HOST, FIRST_NODE_HOST, Family, HostPlan, InterfacePlan,
    MAX_BRIDGES, MAX_NODES, Plan, Role, Topology, default_node_names, default_subnets,
    external_namespace, net_namespace, plan, validate_name,
};

use ipnet::IpNet;
use std::net::IpAddr;

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

    /// The lab `plan` describes, as [`ensure`] would return it but made
    /// without touching the machine: every MAC is `mac`. For deciding
    /// code and its tests.
    pub fn planned(plan: &Plan, mac: Mac) -> Result<Lab> {
        assemble(plan, |_, _| Ok(mac))
    }
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
        .ok_or_else(|| plan::topology_error("nodes", "empty plan"))?;
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
