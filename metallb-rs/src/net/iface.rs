//! The node's interfaces and which of them may answer ARP/NDP
//! (upstream's rules): not excluded by name (the `metallb-excludel2`
//! list), UP, not enslaved to a bridge or bond, not NOARP; ARP needs
//! BROADCAST, NDP needs an IPv6 link-local address. Also which one is
//! the node's uplink (the interface gossip and the Node's InternalIP use)
//! and whether its link works. Listing does I/O; [`eligible`],
//! [`uplink`] and [`link_up`] are pure.

use super::ethernet::Mac;
use regex::Regex;
use std::net::{IpAddr, Ipv6Addr};

/// Upstream's default exclusion list (used when the `metallb-excludel2`
/// ConfigMap does not exist).
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "^docker.*",
    "^cbr.*",
    "^dummy.*",
    "^virbr.*",
    "^lxcbr.*",
    "^veth.*",
    "^lo$",
    "^cali.*",
    "^tunl.*",
    "^flannel.*",
    "^kube-ipvs.*",
    "^cni.*",
    "^nodelocaldns.*",
    "^lxc.*",
];

/// What the responders need to know about one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Name.
    pub name: String,
    /// Kernel index.
    pub index: u32,
    /// Hardware address.
    pub mac: Option<Mac>,
    /// IFF_UP.
    pub up: bool,
    /// IFF_RUNNING: the operational state (an admin down or a carrier
    /// loss clears it).
    pub running: bool,
    /// IFF_BROADCAST.
    pub broadcast: bool,
    /// IFF_NOARP.
    pub noarp: bool,
    /// Has a master (bridge port, bond slave).
    pub enslaved: bool,
    /// Its IPv6 link-local address, if any.
    pub link_local: Option<Ipv6Addr>,
    /// Its other addresses.
    pub addresses: Vec<IpAddr>,
}

/// An interface that may carry announcements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eligible {
    /// Name.
    pub name: String,
    /// Kernel index.
    pub index: u32,
    /// Hardware address.
    pub mac: Mac,
    /// May answer ARP.
    pub arp: bool,
    /// Its link-local address, when NDP is possible (upstream's rule: no
    /// link-local address, no NDP on the interface).
    pub ndp: Option<Ipv6Addr>,
}

/// Compiled exclusion patterns.
#[derive(Debug, Clone)]
pub struct Exclusions(Vec<Regex>);

impl Exclusions {
    /// Compiles `patterns`; errors name the bad pattern.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, String> {
        patterns
            .iter()
            .map(|p| {
                Regex::new(p.as_ref())
                    .map_err(|e| format!("invalid interface pattern {:?}: {e}", p.as_ref()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Exclusions)
    }

    /// Upstream's defaults.
    pub fn defaults() -> Self {
        Self::new(DEFAULT_EXCLUDES).unwrap_or(Exclusions(Vec::new()))
    }

    /// Whether `name` is excluded.
    pub fn excludes(&self, name: &str) -> bool {
        self.0.iter().any(|r| r.is_match(name))
    }
}

/// Why an interface cannot announce (for logs).
pub fn ineligible_reason(i: &Interface, ex: &Exclusions) -> Option<&'static str> {
    if ex.excludes(&i.name) {
        Some("excluded by name")
    } else if !i.up {
        Some("down")
    } else if i.enslaved {
        Some("enslaved to a bridge or bond")
    } else if i.noarp {
        Some("NOARP")
    } else if i.mac.is_none_or(|m| m == Mac::ZERO) {
        Some("no hardware address")
    } else if !i.broadcast && i.link_local.is_none() {
        Some("neither BROADCAST nor an IPv6 link-local address")
    } else {
        None
    }
}

/// The interfaces that may announce, by name.
pub fn eligible(ifaces: &[Interface], ex: &Exclusions) -> Vec<Eligible> {
    let mut out: Vec<Eligible> = ifaces
        .iter()
        .filter(|i| ineligible_reason(i, ex).is_none())
        .filter_map(|i| {
            Some(Eligible {
                name: i.name.clone(),
                index: i.index,
                mac: i.mac?,
                arp: i.broadcast,
                ndp: i.link_local,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The node's uplink: the interface carrying `bind` (the gossip bind
/// address) or else one of `node_ips` (the Node's InternalIPs); its name,
/// to be remembered - an admin down may flush its IPv6 addresses, so it is
/// found by address once and by name after.
pub fn uplink(ifaces: &[Interface], bind: Option<IpAddr>, node_ips: &[IpAddr]) -> Option<String> {
    let carrying = |ip: &IpAddr| {
        ifaces
            .iter()
            .find(|i| !ip.is_unspecified() && i.addresses.contains(ip))
            .map(|i| i.name.clone())
    };
    bind.as_ref()
        .and_then(carrying)
        .or_else(|| node_ips.iter().find_map(carrying))
}

/// Whether the link of interface `name` works: it is listed, UP and
/// RUNNING. A vanished interface is a link down.
pub fn link_up(ifaces: &[Interface], name: &str) -> bool {
    ifaces
        .iter()
        .find(|i| i.name == name)
        .is_some_and(|i| i.up && i.running)
}

/// Lists this network namespace's interfaces (getifaddrs, plus
/// `/sys/class/net/<name>/master` for enslavement).
pub fn list() -> std::io::Result<Vec<Interface>> {
    use nix::net::if_::InterfaceFlags;
    use std::collections::BTreeMap;
    let mut by_name: BTreeMap<String, Interface> = BTreeMap::new();
    for ifa in nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)? {
        let entry = by_name
            .entry(ifa.interface_name.clone())
            .or_insert_with(|| Interface {
                name: ifa.interface_name.clone(),
                index: 0,
                mac: None,
                up: false,
                running: false,
                broadcast: false,
                noarp: false,
                enslaved: std::path::Path::new("/sys/class/net")
                    .join(&ifa.interface_name)
                    .join("master")
                    .exists(),
                link_local: None,
                addresses: Vec::new(),
            });
        entry.up |= ifa.flags.contains(InterfaceFlags::IFF_UP);
        entry.running |= ifa.flags.contains(InterfaceFlags::IFF_RUNNING);
        entry.broadcast |= ifa.flags.contains(InterfaceFlags::IFF_BROADCAST);
        entry.noarp |= ifa.flags.contains(InterfaceFlags::IFF_NOARP);
        let Some(addr) = ifa.address else { continue };
        if let Some(link) = addr.as_link_addr() {
            entry.index = u32::try_from(link.ifindex()).unwrap_or(0);
            entry.mac = link.addr().map(Mac);
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            let ip = v6.ip();
            if ip.is_unicast_link_local() {
                entry.link_local.get_or_insert(ip);
            } else {
                entry.addresses.push(IpAddr::V6(ip));
            }
        } else if let Some(v4) = addr.as_sockaddr_in() {
            entry.addresses.push(IpAddr::V4(v4.ip()));
        }
    }
    Ok(by_name.into_values().filter(|i| i.index != 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn iface(name: &str) -> Interface {
        Interface {
            name: name.into(),
            index: 2,
            mac: Some(Mac([2, 0, 0, 0, 0, 1])),
            up: true,
            running: true,
            broadcast: true,
            noarp: false,
            enslaved: false,
            link_local: Some("fe80::1".parse().expect("ip")),
            addresses: vec![],
        }
    }

    #[rstest]
    #[case::plain(iface("eth0"), None)]
    #[case::excluded_veth(iface("veth1234"), Some("excluded by name"))]
    #[case::excluded_lo(iface("lo"), Some("excluded by name"))]
    #[case::not_lo_prefix(iface("lox"), None)]
    #[case::down(Interface { up: false, ..iface("eth0") }, Some("down"))]
    #[case::enslaved(Interface { enslaved: true, ..iface("eth0") }, Some("enslaved to a bridge or bond"))]
    #[case::noarp(Interface { noarp: true, ..iface("eth0") }, Some("NOARP"))]
    #[case::no_mac(Interface { mac: None, ..iface("wg0") }, Some("no hardware address"))]
    #[case::neither(Interface { broadcast: false, link_local: None, ..iface("eth0") }, Some("neither BROADCAST nor an IPv6 link-local address"))]
    fn eligibility(#[case] i: Interface, #[case] reason: Option<&str>) {
        assert_eq!(ineligible_reason(&i, &Exclusions::defaults()), reason);
    }

    #[test]
    fn arp_needs_broadcast_ndp_needs_link_local() {
        let ex = Exclusions::defaults();
        let v4_only = Interface {
            link_local: None,
            ..iface("eth0")
        };
        let v6_only = Interface {
            broadcast: false,
            ..iface("eth1")
        };
        let e = eligible(&[v6_only, v4_only], &ex);
        assert_eq!(
            e.iter()
                .map(|e| (e.name.as_str(), e.arp, e.ndp.is_some()))
                .collect::<Vec<_>>(),
            [("eth0", true, false), ("eth1", false, true)]
        );
    }

    #[test]
    fn custom_exclusions_and_bad_patterns() {
        let ex = Exclusions::new(&["^eth1$"]).expect("valid");
        assert!(ex.excludes("eth1") && !ex.excludes("eth10") && !ex.excludes("veth0"));
        let err = Exclusions::new(&["(unclosed"]).expect_err("invalid");
        assert!(
            err.contains("invalid interface pattern \"(unclosed\""),
            "{err}"
        );
    }

    fn with_ip(name: &str, ip: &str) -> Interface {
        Interface {
            addresses: vec![ip.parse().expect("ip")],
            ..iface(name)
        }
    }

    /// The uplink is found by the gossip bind address first, the Node's
    /// InternalIP second; an unspecified bind address finds nothing.
    #[rstest]
    #[case::by_bind(Some("10.0.1.2"), &["10.0.0.2"], Some("eth1"))]
    #[case::by_node_ip(None, &["10.0.0.2"], Some("eth0"))]
    #[case::bind_not_here_node_ip_is(Some("10.9.9.9"), &["10.0.0.2"], Some("eth0"))]
    #[case::unspecified_bind(Some("0.0.0.0"), &[], None)]
    #[case::nowhere(None, &["10.9.9.9"], None)]
    fn finding_the_uplink(
        #[case] bind: Option<&str>,
        #[case] node_ips: &[&str],
        #[case] want: Option<&str>,
    ) {
        let ifaces = [with_ip("eth0", "10.0.0.2"), with_ip("eth1", "10.0.1.2")];
        let node_ips: Vec<IpAddr> = node_ips.iter().map(|i| i.parse().expect("ip")).collect();
        let bind = bind.map(|b| b.parse().expect("ip"));
        assert_eq!(uplink(&ifaces, bind, &node_ips).as_deref(), want);
    }

    /// A link works while UP and RUNNING: an admin down clears both, a
    /// carrier loss RUNNING alone; a vanished interface is down.
    #[rstest]
    #[case::up_and_running(true, true, "eth0", true)]
    #[case::admin_down(false, false, "eth0", false)]
    #[case::carrier_lost(true, false, "eth0", false)]
    #[case::vanished(true, true, "eth9", false)]
    fn link_state(#[case] up: bool, #[case] running: bool, #[case] name: &str, #[case] want: bool) {
        let i = Interface {
            up,
            running,
            ..iface("eth0")
        };
        assert_eq!(link_up(&[i], name), want);
    }

    #[test]
    fn listing_this_namespace_finds_loopback() {
        let all = list().expect("getifaddrs");
        let lo = all.iter().find(|i| i.name == "lo").expect("lo exists");
        assert!(lo.up && lo.index > 0);
    }
}
