//! The BGP lab's four FRR routers, as upstream's e2e suite runs them:
//!
//! | router            | where                          | AS         | port | password    |
//! |-------------------|--------------------------------|------------|------|-------------|
//! | `ibgp-single-hop` | the external host (node net)   | 64512      | 179  | `ibgp-test` |
//! | `ebgp-single-hop` | node net + multi-hop net       | 4200000000 | 179  | `ebgp-test` |
//! | `ibgp-multi-hop`  | multi-hop net, a hop away      | 64512      | 180  | `ibgp-test` |
//! | `ebgp-multi-hop`  | multi-hop net, a hop away      | 4200000000 | 180  | `ebgp-test` |
//!
//! Upstream's `ebgp-single-hop` takes no password; here every router takes
//! one, so every kind of session also runs with TCP MD5. The first router
//! is the lab's original one: it keeps its files and process names, and
//! its routes give the external host (the client) its way to the
//! services. The network the others stand on is `netns::multihop`'s.
//!
//! Deciding ([`bgp_routers`], [`router_config`]) is pure; [`start`],
//! [`stop_all`] and [`remove_all`] run the daemons through
//! [`LabRouter`].

use super::frr::{LabRouter, lab_router_config};
use super::netns::{self, Lab, LabHost, multihop};
use crate::frr::{ASN, BGP_PORT, BgpRouter, EXTERNAL_ASN, RouterConfig};
use anyhow::{Context, Result};
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

/// One of the lab's routers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterSpec {
    /// Its name (upstream's container name).
    pub name: &'static str,
    /// Its ASN.
    pub asn: u32,
    /// The port its bgpd listens on.
    pub port: u16,
    /// The TCP MD5 password it expects.
    pub password: &'static str,
    /// A routed hop away from the nodes.
    pub multi_hop: bool,
}

/// The router in the external namespace.
pub const PRIMARY: &str = "ibgp-single-hop";

/// The four routers, [`PRIMARY`] first.
pub const ROUTERS: [RouterSpec; 4] = [
    RouterSpec {
        name: PRIMARY,
        asn: ASN,
        port: BGP_PORT,
        password: "ibgp-test",
        multi_hop: false,
    },
    RouterSpec {
        name: multihop::GATEWAY,
        asn: EXTERNAL_ASN,
        port: BGP_PORT,
        password: "ebgp-test",
        multi_hop: false,
    },
    RouterSpec {
        name: multihop::BEHIND[0],
        asn: ASN,
        port: 180,
        password: "ibgp-test",
        multi_hop: true,
    },
    RouterSpec {
        name: multihop::BEHIND[1],
        asn: EXTERNAL_ASN,
        port: 180,
        password: "ebgp-test",
        multi_hop: true,
    },
];

/// The router called `name`.
pub fn spec(name: &str) -> Option<&'static RouterSpec> {
    ROUTERS.iter().find(|r| r.name == name)
}

/// The host `router` runs on, if the lab has it.
fn host<'a>(lab: &'a Lab, router: &RouterSpec) -> Option<&'a LabHost> {
    if router.name == PRIMARY {
        Some(&lab.external)
    } else {
        lab.router(router.name)
    }
}

/// The routers `lab` has, as BGPPeers see them.
pub fn bgp_routers(lab: &Lab) -> Vec<BgpRouter> {
    ROUTERS
        .iter()
        .filter_map(|r| {
            let host = host(lab, r)?;
            Some(BgpRouter {
                name: r.name.to_owned(),
                addresses: host.addresses(),
                asn: r.asn,
                port: r.port,
                password: Some(r.password.to_owned()),
                multi_hop: r.multi_hop,
            })
        })
        .collect()
}

/// `router`'s FRR configuration on `lab`: a neighbor for every node
/// address, each with the router's password; eBGP routers name the
/// speakers' AS, the multi-hop one allows the extra hop. Router ids are
/// the routers' own IPv4 addresses (in an IPv6-only lab, the ones they
/// would have).
pub fn router_config(lab: &Lab, router: &RouterSpec) -> RouterConfig {
    let mut config = lab_router_config(lab).with_password_for_all(router.password);
    config.hostname = router.name.to_owned();
    config.asn = router.asn;
    config.peer_asn = ASN;
    config.ebgp_multihop = router.multi_hop && router.asn != ASN;
    if router.name != PRIMARY {
        let planned = host(lab, router)
            .and_then(|h| {
                h.addresses().into_iter().find_map(|a| match a {
                    IpAddr::V4(v4) => Some(v4),
                    IpAddr::V6(_) => None,
                })
            })
            .unwrap_or_else(|| would_be_router_id(router.name));
        config.router_id = Some(planned);
    }
    config
}

/// The IPv4 address a router has on its first network in a lab with IPv4.
fn would_be_router_id(router: &str) -> Ipv4Addr {
    let (net, host) = match multihop::BEHIND.iter().position(|b| *b == router) {
        Some(i) => (
            multihop::subnets().ipv4.network(),
            multihop::FIRST_BEHIND_HOST + u32::try_from(i).unwrap_or(0),
        ),
        None => (
            netns::default_subnets()[0].ipv4.network(),
            multihop::GATEWAY_HOST,
        ),
    };
    Ipv4Addr::from(u32::from(net) + host)
}

/// The daemons of `router` in lab `name`, whose state lives in `dir`.
pub fn lab_router(dir: &Path, name: &str, router: &RouterSpec) -> LabRouter {
    if router.name == PRIMARY {
        LabRouter::new(dir, &netns::external_namespace(name))
    } else {
        LabRouter::named(
            dir,
            &multihop::namespace(name, router.name),
            router.name,
            router.port,
        )
    }
}

/// Starts (or keeps, or reconfigures) every router `lab` has; a router
/// whose namespace this `ensure` created starts afresh.
pub fn start(lab: &Lab, dir: &Path) -> Result<()> {
    for router in &ROUTERS {
        let Some(host) = host(lab, router) else {
            continue;
        };
        let daemons = lab_router(dir, &lab.name, router);
        if lab
            .changes
            .iter()
            .any(|c| *c == format!("created namespace {}", host.namespace))
        {
            daemons.stop();
        }
        daemons
            .start(&router_config(lab, router))
            .with_context(|| {
                format!("starting FRR router {} in {}", router.name, host.namespace)
            })?;
    }
    Ok(())
}

/// Stops every router of lab `name` (state in `dir`), whatever is left of
/// it; returns what it stopped.
pub fn stop_all(dir: &Path, name: &str) -> Vec<String> {
    ROUTERS
        .iter()
        .flat_map(|r| lab_router(dir, name, r).stop())
        .collect()
}

/// [`stop_all`], and their state directories removed.
pub fn remove_all(dir: &Path, name: &str) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for r in &ROUTERS {
        removed.extend(lab_router(dir, name, r).remove()?);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frr::frr_conf;

    fn lab(routers: bool) -> Lab {
        let topology = netns::Topology::new("lab", 1).with_routers(routers);
        let plan = netns::plan(&topology).expect("plan");
        Lab::planned(&plan, netns::Mac([2, 0, 0, 0, 0, 1])).expect("lab")
    }

    #[test]
    fn the_bgp_lab_has_upstreams_four_routers() {
        let shown: Vec<String> = bgp_routers(&lab(true))
            .iter()
            .map(|r| {
                let addrs: Vec<String> = r.addresses.iter().map(ToString::to_string).collect();
                format!(
                    "{} AS {} port {} {}{} {}",
                    r.name,
                    r.asn,
                    r.port,
                    r.password.as_deref().unwrap_or("-"),
                    if r.ebgp_multi_hop() {
                        " ebgpMultiHop"
                    } else {
                        ""
                    },
                    addrs.join(" ")
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                "ibgp-single-hop AS 64512 port 179 ibgp-test 172.30.0.2 fc00:f853:ccd:e793::2",
                "ebgp-single-hop AS 4200000000 port 179 ebgp-test 172.30.0.3 fc00:f853:ccd:e793::3",
                "ibgp-multi-hop AS 64512 port 180 ibgp-test 172.30.8.4 fc00:f853:ccd:e798::4",
                "ebgp-multi-hop AS 4200000000 port 180 ebgp-test ebgpMultiHop 172.30.8.5 fc00:f853:ccd:e798::5",
            ]
        );
        // A layer 2 lab has the external host's router position only.
        assert_eq!(bgp_routers(&lab(false)).len(), 1);
    }

    #[test]
    fn each_router_peers_with_every_node_with_its_password_and_as() {
        let lab = lab(true);
        let conf = |name: &str| {
            frr_conf(&router_config(&lab, spec(name).expect("router"))).expect("renders")
        };
        let ebgp = conf("ebgp-multi-hop");
        for line in [
            "hostname ebgp-multi-hop\n",
            "router bgp 4200000000\n bgp router-id 172.30.8.5\n",
            " neighbor 172.30.0.10 remote-as 64512\n neighbor 172.30.0.10 ebgp-multihop\n neighbor 172.30.0.10 password ebgp-test\n",
            " neighbor fc00:f853:ccd:e793::11 remote-as 64512\n neighbor fc00:f853:ccd:e793::11 ebgp-multihop\n",
        ] {
            assert!(ebgp.contains(line), "{line:?} missing:\n{ebgp}");
        }
        let single = conf("ebgp-single-hop");
        assert!(!single.contains("ebgp-multihop"), "{single}");
        assert!(single.contains(" bgp router-id 172.30.0.3\n"), "{single}");
        let ibgp = conf("ibgp-multi-hop");
        assert!(
            ibgp.contains("router bgp 64512\n bgp router-id 172.30.8.4\n"),
            "{ibgp}"
        );
        assert!(
            ibgp.contains(" neighbor 172.30.0.11 password ibgp-test\n"),
            "{ibgp}"
        );
        assert!(!ibgp.contains("ebgp-multihop"), "{ibgp}");
        let primary = conf(PRIMARY);
        assert!(
            primary.contains("hostname ibgp-single-hop\n bgp")
                || primary.contains("hostname ibgp-single-hop\n")
        );
        assert!(primary.contains(" bgp router-id 172.30.0.2\n"), "{primary}");
    }

    #[test]
    fn routers_keep_their_files_and_processes_apart() {
        let dir = Path::new("/tmp/metallb-rs-lab/lab");
        let dirs: Vec<String> = ROUTERS
            .iter()
            .map(|r| lab_router(dir, "lab", r).dir().display().to_string())
            .collect();
        assert_eq!(
            dirs,
            [
                "/tmp/metallb-rs-lab/lab/frr",
                "/tmp/metallb-rs-lab/lab/frr-ebgp-single-hop",
                "/tmp/metallb-rs-lab/lab/frr-ibgp-multi-hop",
                "/tmp/metallb-rs-lab/lab/frr-ebgp-multi-hop",
            ]
        );
        let namespaces: Vec<String> = ROUTERS
            .iter()
            .map(|r| lab_router(dir, "lab", r).namespace().to_owned())
            .collect();
        assert_eq!(
            namespaces,
            [
                "lab-external",
                "lab-ebgp-single-hop",
                "lab-ibgp-multi-hop",
                "lab-ebgp-multi-hop"
            ]
        );
    }
}
