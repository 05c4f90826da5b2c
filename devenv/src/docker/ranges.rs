//! Free address blocks of a Docker network, for a MetalLB `IPAddressPool`
//! in a dev cluster. Pure: reads a recorded `docker network inspect`
//! ([`NetworkInspect`]), does no I/O, is not async; the tests feed it
//! fixtures.
//!
//! Differences from upstream's `get_available_ips` (tasks.py), each pinned
//! by a test: addresses are compared as [`IpAddr`]s (never as strings, where
//! ".10" sorts before ".4"); the block is the highest run of free addresses,
//! so it never overlaps a used one; a missing family is an error that says
//! what to do; empty `IPv6Address` strings are no addresses; and
//! [`conflicts`] finds containers started inside the block afterwards
//! (Docker reserves nothing for us). The network's name comes from
//! `KIND_EXPERIMENTAL_DOCKER_NETWORK` as kind's does (see
//! `docker::network_name`).

/// The network as ranges reads it: what `docker network inspect` answers,
/// bollard's plain model (no client in it), owned here so that deciding
/// needs nothing from the module that talks to the engine.
pub use bollard::models::NetworkInspect;
use ipnet::IpNet;
use metallb_rs::api::v1beta1::{IPAddressPool, IPAddressPoolSpec};
use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// How many addresses per family [`free_block`] takes for a dev pool by
/// default: enough for the e2e suites' services, small enough to fit a
/// /27.
pub const DEFAULT_BLOCK: u32 = 16;

/// An IP family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of `ip`.
    pub fn of(ip: IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}

/// The families a caller wants addresses of (kind's `ipFamily` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Families {
    /// IPv4 only.
    Ipv4,
    /// IPv6 only.
    Ipv6,
    /// Both: a block of each.
    Dual,
}

impl Families {
    /// The families, IPv4 first.
    pub fn members(self) -> &'static [Family] {
        match self {
            Families::Ipv4 => &[Family::V4],
            Families::Ipv6 => &[Family::V6],
            Families::Dual => &[Family::V4, Family::V6],
        }
    }
}

impl fmt::Display for Families {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Families::Ipv4 => "ipv4",
            Families::Ipv6 => "ipv6",
            Families::Dual => "dual",
        })
    }
}

impl FromStr for Families {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ipv4" => Ok(Families::Ipv4),
            "ipv6" => Ok(Families::Ipv6),
            "dual" => Ok(Families::Dual),
            other => Err(format!(
                "unknown IP family {other:?}: use ipv4, ipv6 or dual"
            )),
        }
    }
}

/// An inclusive range of addresses of one family, as an `IPAddressPool`
/// lists it: `first-last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddressRange {
    /// The lowest address of the range.
    pub first: IpAddr,
    /// The highest address of the range (inclusive).
    pub last: IpAddr,
}

impl AddressRange {
    /// The family of the range (that of `first`).
    pub fn family(&self) -> Family {
        Family::of(self.first)
    }

    /// How many addresses the range holds; 0 when `last` is below `first`
    /// or of another family. Saturates at `u128::MAX` for all of IPv6.
    pub fn len(&self) -> u128 {
        match (
            self.family() == Family::of(self.last),
            self.first <= self.last,
        ) {
            (true, true) => (to_u128(self.last) - to_u128(self.first)).saturating_add(1),
            _ => 0,
        }
    }

    /// Whether the range holds no address.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `ip` is in the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        Family::of(ip) == self.family()
            && Family::of(self.last) == self.family()
            && self.first <= ip
            && ip <= self.last
    }

    /// The top `n` addresses of the range and the rest below them; None
    /// unless the range holds more than `n`.
    pub fn split_top(&self, n: u128) -> Option<(AddressRange, AddressRange)> {
        if n == 0 || self.len() <= n {
            return None;
        }
        let cut = to_u128(self.last) - n + 1;
        let family = self.family();
        Some((
            AddressRange {
                first: from_u128(family, cut),
                last: self.last,
            },
            AddressRange {
                first: self.first,
                last: from_u128(family, cut - 1),
            },
        ))
    }
}

impl fmt::Display for AddressRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// Reads the `FIRST-LAST` form [`fmt::Display`] writes (and IPAddressPool
/// uses): both addresses of one family, `FIRST` not above `LAST`.
impl FromStr for AddressRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, b) = s
            .split_once('-')
            .ok_or_else(|| format!("range {s:?} is not FIRST-LAST"))?;
        let parse = |v: &str| {
            v.trim()
                .parse::<IpAddr>()
                .map_err(|e| format!("range {s:?}: {v:?}: {e}"))
        };
        let range = AddressRange {
            first: parse(a)?,
            last: parse(b)?,
        };
        if range.is_empty() {
            return Err(format!(
                "range {s:?} is empty: both ends must be of one family, the first not above the last"
            ));
        }
        Ok(range)
    }
}

/// Why no block of free addresses could be chosen.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RangeError {
    /// A block of zero addresses was asked for.
    #[error("asked for 0 addresses per family: ask for at least 1")]
    EmptyBlock,
    /// The network has no subnet of a requested family.
    #[error("network {network} has no {family} subnet: {}", missing_family_hint(*.family))]
    NoSubnet {
        /// The network's name.
        network: String,
        /// The family asked for.
        family: Family,
    },
    /// No subnet of the family has enough contiguous free addresses.
    #[error("network {network}: {}", too_small(.subnets, *.need))]
    TooSmall {
        /// The network's name.
        network: String,
        /// Each subnet of the family with its longest run of free addresses.
        subnets: Vec<(IpNet, u128)>,
        /// The block size asked for.
        need: u32,
    },
    /// The engine reported a subnet that is not a CIDR.
    #[error(
        "network {network}: IPAM subnet {value:?} is not a CIDR: check `docker network inspect {network}`"
    )]
    BadSubnet {
        /// The network's name.
        network: String,
        /// The string reported.
        value: String,
    },
    /// The engine reported an address that is not one.
    #[error(
        "network {network}: {owner} {value:?} is not an IP address: check `docker network inspect {network}`"
    )]
    BadAddress {
        /// The network's name.
        network: String,
        /// Whose address, e.g. `container kind-worker IPv4Address`.
        owner: String,
        /// The string reported.
        value: String,
    },
}

fn missing_family_hint(family: Family) -> &'static str {
    match family {
        Family::V4 => "recreate it with an IPv4 subnet or use --ip-family ipv6",
        Family::V6 => "recreate it with IPv6 or use --ip-family ipv4",
    }
}

fn too_small(subnets: &[(IpNet, u128)], need: u32) -> String {
    match subnets {
        [(net, free)] => format!(
            "subnet {net} has only {free} free contiguous addresses, need {need}: \
             use a bigger subnet or ask for fewer addresses"
        ),
        _ => {
            let each: Vec<String> = subnets
                .iter()
                .map(|(net, free)| format!("{net} has {free}"))
                .collect();
            format!(
                "no subnet has {need} free contiguous addresses ({}): use a bigger subnet or ask \
                 for fewer addresses",
                each.join(", ")
            )
        }
    }
}

/// Picks `per_family` contiguous free addresses of each family in
/// `families` on `network`, one [`AddressRange`] per family, IPv4 first.
///
/// A subnet's usable addresses are all but its network address, its
/// broadcast address (IPv4 prefixes up to /30), its gateway (the first host
/// address when IPAM reports none, as Docker then picks it), the IPAM
/// auxiliary addresses and every endpoint's address. Docker hands out
/// addresses bottom-up, so the block is the highest run of `per_family`
/// free addresses: as far as possible from the next container Docker
/// starts. With several subnets of a family, the first in IPAM order where
/// the block fits wins (kind's node addresses come from the first).
/// `IPRange` is not looked at: Docker only allocates dynamically inside it,
/// static addresses may be anywhere in the subnet.
pub fn free_block(
    network: &NetworkInspect,
    families: Families,
    per_family: u32,
) -> Result<Vec<AddressRange>, RangeError> {
    if per_family == 0 {
        return Err(RangeError::EmptyBlock);
    }
    let name = network_label(network);
    let subnets = subnets(network)?;
    let used = used_addresses(network)?;
    families
        .members()
        .iter()
        .map(|&family| {
            let candidates: Vec<&Subnet> = subnets
                .iter()
                .filter(|s| Family::of(s.net.addr()) == family)
                .collect();
            if candidates.is_empty() {
                return Err(RangeError::NoSubnet {
                    network: name.clone(),
                    family,
                });
            }
            let mut tried = Vec::new();
            for subnet in candidates {
                match top_block(subnet, &used, u128::from(per_family)) {
                    Ok(range) => return Ok(range),
                    Err(longest) => tried.push((subnet.net, longest)),
                }
            }
            Err(RangeError::TooSmall {
                network: name.clone(),
                subnets: tried,
                need: per_family,
            })
        })
        .collect()
}

/// The endpoints on `network` whose address is inside one of `ranges`,
/// as (container name, address), sorted. Containers started after the
/// ranges were chosen (with a static address, or when Docker's bottom-up
/// allocation reaches the top) show up here. Unparsable addresses are
/// skipped: [`free_block`] reports them.
pub fn conflicts(ranges: &[AddressRange], network: &NetworkInspect) -> Vec<(String, IpAddr)> {
    let mut found: Vec<(String, IpAddr)> = endpoints(network)
        .filter_map(|(owner, _, value)| Some((owner, parse_addr(value).ok()??)))
        .filter(|(_, ip)| ranges.iter().any(|r| r.contains(*ip)))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// An `IPAddressPool` named `name` in `namespace` holding `ranges`, the way
/// a dev environment applies it.
pub fn address_pool(name: &str, namespace: &str, ranges: &[AddressRange]) -> IPAddressPool {
    let mut pool = IPAddressPool::new(
        name,
        IPAddressPoolSpec {
            addresses: ranges.iter().map(ToString::to_string).collect(),
            ..Default::default()
        },
    );
    pool.metadata.namespace = Some(namespace.to_owned());
    pool
}

/// One IPAM subnet with the gateway Docker uses on it.
struct Subnet {
    net: IpNet,
    gateway: Option<IpAddr>,
}

fn network_label(network: &NetworkInspect) -> String {
    network
        .name
        .clone()
        .or_else(|| network.id.clone())
        .unwrap_or_else(|| "(unnamed)".to_owned())
}

fn subnets(network: &NetworkInspect) -> Result<Vec<Subnet>, RangeError> {
    let name = network_label(network);
    let configs = network
        .ipam
        .as_ref()
        .and_then(|ipam| ipam.config.as_deref())
        .unwrap_or_default();
    let mut out = Vec::new();
    for config in configs {
        let Some(value) = config.subnet.as_deref().filter(|s| !s.trim().is_empty()) else {
            continue;
        };
        let net: IpNet = value.trim().parse().map_err(|_| RangeError::BadSubnet {
            network: name.clone(),
            value: value.to_owned(),
        })?;
        let gateway = match config.gateway.as_deref() {
            Some(g) => parse_addr(g).map_err(|()| RangeError::BadAddress {
                network: name.clone(),
                owner: format!("gateway of subnet {net}"),
                value: g.to_owned(),
            })?,
            None => None,
        };
        out.push(Subnet {
            net: net.trunc(),
            gateway,
        });
    }
    Ok(out)
}

/// Every address Docker reports as taken but gateways (which [`Subnet`]
/// holds, implicit ones included): auxiliary addresses and endpoints.
fn used_addresses(network: &NetworkInspect) -> Result<BTreeSet<IpAddr>, RangeError> {
    let name = network_label(network);
    let mut used = BTreeSet::new();
    let bad = |owner: String, value: &str| RangeError::BadAddress {
        network: name.clone(),
        owner,
        value: value.to_owned(),
    };
    for config in network
        .ipam
        .as_ref()
        .and_then(|ipam| ipam.config.as_deref())
        .unwrap_or_default()
    {
        for (key, value) in config.auxiliary_addresses.iter().flatten() {
            used.extend(
                parse_addr(value)
                    .map_err(|()| bad(format!("IPAM auxiliary address {key}"), value))?,
            );
        }
    }
    for (owner, field, value) in endpoints(network) {
        used.extend(
            parse_addr(value).map_err(|()| bad(format!("container {owner} {field}"), value))?,
        );
    }
    Ok(used)
}

/// Each endpoint address string: (container name, field, value).
fn endpoints(network: &NetworkInspect) -> impl Iterator<Item = (String, &'static str, &str)> {
    network
        .containers
        .iter()
        .flatten()
        .flat_map(|(id, endpoint)| {
            let owner = endpoint
                .name
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| id.clone());
            [
                ("IPv4Address", endpoint.ipv4_address.as_deref()),
                ("IPv6Address", endpoint.ipv6_address.as_deref()),
            ]
            .into_iter()
            .filter_map(move |(field, value)| Some((owner.clone(), field, value?)))
        })
}

/// An address as Docker prints it: `172.18.0.2/16`, `fc00::1` or `""` (no
/// address of that family).
fn parse_addr(value: &str) -> Result<Option<IpAddr>, ()> {
    let value = value.trim();
    if value.is_empty() {
        Ok(None)
    } else if value.contains('/') {
        value
            .parse::<IpNet>()
            .map(|n| Some(n.addr()))
            .map_err(|_| ())
    } else {
        value.parse::<IpAddr>().map(Some).map_err(|_| ())
    }
}

/// The highest run of `need` free addresses of `subnet`, or the length of
/// its longest free run when none is long enough.
fn top_block(subnet: &Subnet, used: &BTreeSet<IpAddr>, need: u128) -> Result<AddressRange, u128> {
    let family = Family::of(subnet.net.addr());
    let (network, broadcast) = (
        to_u128(subnet.net.network()),
        to_u128(subnet.net.broadcast()),
    );
    let (lo, hi) = match (family, subnet.net.prefix_len()) {
        (Family::V4, 0..=30) => (network + 1, broadcast - 1),
        (Family::V6, 0..=126) => (network + 1, broadcast),
        _ => (network, broadcast),
    };
    let mut taken: BTreeSet<u128> = used
        .iter()
        .filter(|ip| subnet.net.contains(*ip))
        .map(|&ip| to_u128(ip))
        .collect();
    taken.insert(match subnet.gateway {
        Some(gateway) => to_u128(gateway),
        None => lo,
    });
    // Walk the free runs from the top: each taken address closes the run
    // above it.
    let mut top = Some(hi);
    let mut longest = 0;
    for &t in taken.range(lo..=hi).rev() {
        let Some(run_top) = top else { break };
        let run = run_top - t;
        if run >= need {
            return Ok(range(family, run_top - need + 1, run_top));
        }
        longest = longest.max(run);
        top = t.checked_sub(1).filter(|&next| next >= lo);
    }
    if let Some(run_top) = top {
        let run = run_top - lo + 1;
        if run >= need {
            return Ok(range(family, run_top - need + 1, run_top));
        }
        longest = longest.max(run);
    }
    Err(longest)
}

fn range(family: Family, first: u128, last: u128) -> AddressRange {
    AddressRange {
        first: from_u128(family, first),
        last: from_u128(family, last),
    }
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The address of `family` numbered `n`; IPv4 keeps the low 32 bits (the
/// callers only pass numbers that came from IPv4 addresses).
fn from_u128(family: Family, n: u128) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::from((n & u128::from(u32::MAX)) as u32)),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(n)),
    }
}
