//! The node's interfaces and which of them may answer ARP/NDP
//! (upstream's rules): not excluded by name (the `metallb-excludel2`
//! list), UP, not enslaved to a bridge or bond, not NOARP; ARP needs
//! BROADCAST, NDP needs an IPv6 link-local address. Listing does I/O;
//! [`eligible`] is pure.

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

    #[test]
    fn listing_this_namespace_finds_loopback() {
        let all = list().expect("getifaddrs");
        let lo = all.iter().find(|i| i.name == "lo").expect("lo exists");
        assert!(lo.up && lo.index > 0);
    }
}
