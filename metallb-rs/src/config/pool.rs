//! IPAddressPool -> [`Pool`]: address entries parsed into CIDRs (ranges
//! summarised), overlap detection within and across pools, and
//! serviceAllocation selectors.

use super::error::{ConfigError, ObjectRef};
use super::selector::Selector;
use crate::api::v1beta1::IPAddressPool;
use ipnet::{IpNet, Ipv4Subnets, Ipv6Subnets};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// A validated address pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// The IPAddressPool's name.
    pub name: String,
    /// Its addresses as CIDRs, in declared order (a range becomes the CIDRs
    /// that exactly cover it, lowest first).
    pub cidrs: Vec<IpNet>,
    /// Whether services get addresses from it without asking for it.
    pub auto_assign: bool,
    /// Whether .0 and .255 addresses are skipped.
    pub avoid_buggy_ips: bool,
    /// serviceAllocation, when set.
    pub allocation: Option<Allocation>,
    /// The shortest BGP aggregation length allowed per family (IPv4, IPv6):
    /// for each address entry its least specific CIDR, the most specific
    /// over all entries (upstream's rule).
    pub aggregation_floor: (u8, u8),
}

/// Restrictions on which services a pool serves, and its priority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// Lower wins; 0 means "lowest priority" (negative values are
    /// accepted, as upstream accepts them, and come first).
    pub priority: i64,
    /// Namespaces named explicitly.
    pub namespaces: BTreeSet<String>,
    /// Namespace label selectors.
    pub namespace_selectors: Vec<Selector>,
    /// Whether the namespace selectors select at least one namespace of
    /// the cluster. Upstream resolves them to namespace names when the
    /// configuration loads; selectors that select none leave the pool
    /// without a namespace restriction (it then serves explicit requests
    /// from every namespace and is pinned to none).
    pub selectors_select_namespaces: bool,
    /// Service label selectors.
    pub service_selectors: Vec<Selector>,
}

impl Allocation {
    /// Whether the pool restricts namespaces (upstream: its resolved
    /// namespace set is not empty).
    pub fn restricts_namespaces(&self) -> bool {
        !self.namespaces.is_empty() || self.selectors_select_namespaces
    }

    /// Whether it sets only a priority: pinned for every service.
    pub fn priority_only(&self) -> bool {
        self.namespaces.is_empty()
            && self.namespace_selectors.is_empty()
            && self.service_selectors.is_empty()
    }
}

/// Parses one `spec.addresses` entry: a CIDR (host bits allowed and
/// cleared) or a range `start-end` of one family.
pub fn parse_entry(entry: &str) -> Result<Vec<IpNet>, String> {
    let entry = entry.trim();
    if let Some((start, end)) = entry.split_once('-') {
        let parse = |s: &str, which: &str| -> Result<IpAddr, String> {
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("invalid range {which} address {:?}", s.trim()))
        };
        let (start, end) = (parse(start, "start")?, parse(end, "end")?);
        return match (start, end) {
            (IpAddr::V4(s), IpAddr::V4(e)) if s <= e => {
                Ok(Ipv4Subnets::new(s, e, 0).map(IpNet::V4).collect())
            }
            (IpAddr::V6(s), IpAddr::V6(e)) if s <= e => {
                Ok(Ipv6Subnets::new(s, e, 0).map(IpNet::V6).collect())
            }
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                Err(format!("invalid range: start {start} is after end {end}"))
            }
            _ => Err(format!(
                "invalid range: {start} and {end} are of different IP families"
            )),
        };
    }
    if !entry.contains('/') {
        return Err("invalid address: expected a CIDR like 192.168.10.0/24 or a range like 192.168.10.1-192.168.10.20".into());
    }
    entry
        .parse::<IpNet>()
        .map(|net| vec![net.trunc()])
        .map_err(|_| format!("invalid CIDR: {}", cidr_problem(entry)))
}

fn cidr_problem(entry: &str) -> &'static str {
    match entry.split_once('/') {
        Some((addr, len)) if addr.parse::<IpAddr>().is_ok() => {
            match (addr.parse::<IpAddr>(), len.parse::<u8>()) {
                (Ok(IpAddr::V4(_)), Ok(l)) if l > 32 => "invalid prefix length (IPv4 allows 0-32)",
                (Ok(IpAddr::V6(_)), Ok(l)) if l > 128 => {
                    "invalid prefix length (IPv6 allows 0-128)"
                }
                _ => "invalid prefix length",
            }
        }
        _ => "invalid IP address",
    }
}

/// Builds a [`Pool`], pushing every problem into `errors`; `namespaces`
/// are the cluster's namespaces with their labels.
pub fn build(
    pool: &IPAddressPool,
    namespace: &str,
    namespaces: &[(String, BTreeMap<String, String>)],
    errors: &mut Vec<ConfigError>,
) -> Option<Pool> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let obj = ObjectRef::new("IPAddressPool", namespace, &name);
    let before = errors.len();
    let mut cidrs = Vec::new();
    let mut floor = (0u8, 0u8);
    if pool.spec.addresses.is_empty() {
        errors.push(ConfigError::new(
            &obj,
            "spec.addresses",
            "no addresses: list at least one CIDR or range",
        ));
    }
    for (i, entry) in pool.spec.addresses.iter().enumerate() {
        match parse_entry(entry) {
            Ok(nets) => {
                if let Some(least) = nets.iter().map(IpNet::prefix_len).min() {
                    let slot = if nets[0].addr().is_ipv4() {
                        &mut floor.0
                    } else {
                        &mut floor.1
                    };
                    *slot = (*slot).max(least);
                }
                cidrs.extend(nets);
            }
            Err(e) => errors.push(ConfigError::new(
                &obj,
                format!("spec.addresses[{i}] {entry:?}"),
                e,
            )),
        }
    }
    let allocation = pool.spec.service_allocation.as_ref().map(|a| {
        let namespace_selectors = super::selectors(
            &obj,
            "spec.serviceAllocation.namespaceSelectors",
            a.namespace_selectors.as_ref(),
            errors,
        );
        let service_selectors = super::selectors(
            &obj,
            "spec.serviceAllocation.serviceSelectors",
            a.service_selectors.as_ref(),
            errors,
        );
        super::duplicate::strings(
            &obj,
            "spec.serviceAllocation.namespaces",
            "namespace",
            a.namespaces.as_ref(),
            errors,
        );
        let selectors_select_namespaces = namespaces
            .iter()
            .any(|(_, labels)| namespace_selectors.iter().any(|s| s.matches(labels)));
        Allocation {
            priority: a.priority.unwrap_or(0),
            namespaces: a.namespaces.iter().flatten().cloned().collect(),
            namespace_selectors,
            selectors_select_namespaces,
            service_selectors,
        }
    });
    (errors.len() == before).then(|| Pool {
        name,
        cidrs,
        auto_assign: pool.spec.auto_assign.unwrap_or(true),
        avoid_buggy_ips: pool.spec.avoid_buggy_ips.unwrap_or(false),
        allocation,
        aggregation_floor: floor,
    })
}

/// Reports every pair of overlapping CIDRs, within one pool or across
/// pools. `pools` carries each pool's namespace for error messages.
pub fn check_overlaps(pools: &[(&IPAddressPool, &str)], errors: &mut Vec<ConfigError>) {
    // (first address, last address, pool index, entry index, entry text)
    let mut ranges: Vec<(IpAddr, IpAddr, usize, usize, &str)> = Vec::new();
    for (p, (pool, _)) in pools.iter().enumerate() {
        for (i, entry) in pool.spec.addresses.iter().enumerate() {
            for net in parse_entry(entry).unwrap_or_default() {
                ranges.push((net.network(), net.broadcast(), p, i, entry));
            }
        }
    }
    ranges.sort();
    let mut reported = BTreeSet::new();
    // Sweep: `open` holds the entries whose range may still reach later ones.
    let mut open: Vec<(IpAddr, IpAddr, usize, usize, &str)> = Vec::new();
    for r in ranges {
        open.retain(|o| o.1 >= r.0 && o.0.is_ipv4() == r.0.is_ipv4());
        for o in &open {
            if (o.2, o.3) == (r.2, r.3) || !reported.insert((o.2, o.3, r.2, r.3)) {
                continue;
            }
            let (pool, namespace) = pools[r.2];
            let obj = ObjectRef::new(
                "IPAddressPool",
                namespace,
                pool.metadata.name.as_deref().unwrap_or_default(),
            );
            let other_pool = pools[o.2].0.metadata.name.as_deref().unwrap_or_default();
            let whose = if o.2 == r.2 {
                format!("spec.addresses[{}] of the same pool", o.3)
            } else {
                format!("spec.addresses[{}] of ipaddresspool {other_pool:?}", o.3)
            };
            errors.push(ConfigError::new(
                &obj,
                format!("spec.addresses[{}] {:?}", r.3, r.4),
                format!(
                    "overlaps with {:?} ({whose}): an address may belong to one pool only",
                    o.4
                ),
            ));
        }
        open.push(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::cidr("10.0.0.0/24", &["10.0.0.0/24"])]
    #[case::host_bits_cleared("10.0.0.7/24", &["10.0.0.0/24"])]
    #[case::single_range("10.0.0.5-10.0.0.5", &["10.0.0.5/32"])]
    #[case::range_summarised("10.0.0.1-10.0.0.6", &["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"])]
    #[case::range_spaces(" 10.0.0.0 - 10.0.0.3 ", &["10.0.0.0/30"])]
    #[case::v6_cidr("fc00::1/120", &["fc00::/120"])]
    #[case::v6_range("fc00::-fc00::ff", &["fc00::/120"])]
    fn entries(#[case] entry: &str, #[case] expected: &[&str]) {
        let got: Vec<String> = parse_entry(entry)
            .expect("valid")
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(got, expected);
    }

    #[rstest]
    #[case::bad_prefix_v4("10.0.0.0/33", "invalid prefix length (IPv4")]
    #[case::bad_prefix_v6("fc00::/129", "invalid prefix length (IPv6")]
    #[case::bad_ip("10.0.0.300/24", "invalid IP address")]
    #[case::bare_ip("10.0.0.1", "expected a CIDR")]
    #[case::reversed("10.0.0.9-10.0.0.1", "start 10.0.0.9 is after end 10.0.0.1")]
    #[case::mixed("10.0.0.1-fc00::1", "different IP families")]
    #[case::bad_start("x-10.0.0.1", "invalid range start")]
    #[case::bad_end("10.0.0.1-y", "invalid range end")]
    fn bad_entries(#[case] entry: &str, #[case] message: &str) {
        let err = parse_entry(entry).expect_err("invalid");
        assert!(err.contains(message), "{err}");
    }
}
