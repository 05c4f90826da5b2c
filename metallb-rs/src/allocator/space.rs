//! A pool's address space: its CIDRs in declared order, each a
//! [`FreeSet`]; picks the lowest free address CIDR by CIDR (MetalLB's
//! order) and counts capacity per family, with avoidBuggyIPs removing
//! every .0 and .255 exactly (not "two per /24" rounded).

use super::freeset::{FreeSet, is_buggy_v4, saturating_i64, to_u128};

/// From this many host bits on, a CIDR's size is not counted (upstream).
const UNCOUNTED_HOST_BITS: u8 = 62;
use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The two IP families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of `ip`.
    pub fn of(ip: IpAddr) -> Self {
        if ip.is_ipv4() { Family::V4 } else { Family::V6 }
    }
}

/// Addresses of `[first, last]` congruent to `r` modulo 256.
fn count_congruent(first: u128, last: u128, r: u128) -> u128 {
    // Numbers <= n that are r mod 256: floor((n - r) / 256) + 1 when n >= r.
    let upto = |n: u128| if n >= r { (n - r) / 256 + 1 } else { 0 };
    upto(last) - if first == 0 { 0 } else { upto(first - 1) }
}

/// Buggy (.0/.255) IPv4 addresses within `cidr`.
pub fn buggy_count(cidr: IpNet) -> u128 {
    if !cidr.addr().is_ipv4() {
        return 0;
    }
    let (first, last) = (to_u128(cidr.network()), to_u128(cidr.broadcast()));
    count_congruent(first, last, 0) + count_congruent(first, last, 255)
}

/// One pool's CIDRs and what is used in them.
#[derive(Debug, Clone)]
pub struct AddressSpace {
    cidrs: Vec<(IpNet, FreeSet)>,
    avoid_buggy: bool,
}

fn from_u128(n: u128, family: Family) -> IpAddr {
    match family {
        // Callers only pass offsets taken from an IPv4 CIDR.
        Family::V4 => IpAddr::V4(Ipv4Addr::from(u32::try_from(n).unwrap_or(u32::MAX))),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(n)),
    }
}

impl AddressSpace {
    /// The space of `cidrs` (in declared order).
    pub fn new(cidrs: &[IpNet], avoid_buggy: bool) -> Self {
        Self {
            cidrs: cidrs.iter().map(|c| (*c, FreeSet::new(*c))).collect(),
            avoid_buggy,
        }
    }

    /// Whether `ip` is one of the pool's addresses.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.cidrs.iter().any(|(c, _)| c.contains(&ip))
    }

    /// Whether `ip` may be handed out at all (in the pool, not buggy when
    /// the pool avoids buggy IPs).
    pub fn usable(&self, ip: IpAddr) -> bool {
        self.contains(ip) && !(self.avoid_buggy && ip.is_ipv4() && is_buggy_v4(to_u128(ip)))
    }

    /// The pool's CIDRs in declared order.
    pub fn cidrs(&self) -> impl Iterator<Item = IpNet> + '_ {
        self.cidrs.iter().map(|(c, _)| *c)
    }

    /// The lowest free usable address of the `index`th CIDR.
    pub fn lowest_free_in(&self, index: usize) -> Option<IpAddr> {
        let (cidr, set) = self.cidrs.get(index)?;
        set.lowest(self.avoid_buggy)
            .map(|n| from_u128(n, Family::of(cidr.addr())))
    }

    /// The lowest free usable address of `family`, CIDRs in declared order.
    pub fn lowest_free(&self, family: Family) -> Option<IpAddr> {
        self.cidrs
            .iter()
            .filter(|(c, _)| Family::of(c.addr()) == family)
            .find_map(|(_, set)| set.lowest(self.avoid_buggy).map(|n| from_u128(n, family)))
    }

    /// Marks `ip` used (first user of a shared address); false when it is
    /// outside the pool or already used.
    pub fn take(&mut self, ip: IpAddr) -> bool {
        let n = to_u128(ip);
        self.cidrs
            .iter_mut()
            .any(|(c, set)| c.contains(&ip) && set.take(n))
    }

    /// Marks `ip` free (its last user left); false when it was not used.
    pub fn release(&mut self, ip: IpAddr) -> bool {
        let n = to_u128(ip);
        self.cidrs
            .iter_mut()
            .any(|(c, set)| c.contains(&ip) && set.give_back(n))
    }

    /// Addresses of `family` the pool can hand out (saturating), counted
    /// as upstream's `poolCount` does: a CIDR of 62 host bits or more
    /// counts as int64's maximum ("never runs out").
    pub fn capacity(&self, family: Family) -> u128 {
        self.cidrs
            .iter()
            .filter(|(c, _)| Family::of(c.addr()) == family)
            .fold(0u128, |n, (c, set)| {
                let host_bits = c.max_prefix_len() - c.prefix_len();
                let usable = if host_bits >= UNCOUNTED_HOST_BITS {
                    i64::MAX as u128
                } else {
                    set.capacity() - if self.avoid_buggy { buggy_count(*c) } else { 0 }
                };
                n.saturating_add(usable)
            })
    }

    /// Used addresses of `family` (a shared address counts once).
    pub fn in_use(&self, family: Family) -> u128 {
        self.cidrs
            .iter()
            .filter(|(c, _)| Family::of(c.addr()) == family)
            .fold(0u128, |n, (_, set)| {
                n.saturating_add(set.capacity() - set.free_count())
            })
    }

    /// `(assigned, available)` for the IPAddressPool status, as int64.
    pub fn status_counts(&self, family: Family) -> (i64, i64) {
        let used = self.in_use(family);
        (
            saturating_i64(used),
            saturating_i64(self.capacity(family).saturating_sub(used)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rstest::rstest;

    fn space(cidrs: &[&str], avoid: bool) -> AddressSpace {
        let nets: Vec<IpNet> = cidrs.iter().map(|c| c.parse().expect("cidr")).collect();
        AddressSpace::new(&nets, avoid)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[rstest]
    #[case::slash24("10.0.0.0/24", 2)]
    #[case::slash23("10.0.0.0/23", 4)]
    #[case::slash25_low("10.0.0.0/25", 1)]
    #[case::slash25_high("10.0.0.128/25", 1)]
    #[case::slash30_middle("10.0.0.4/30", 0)]
    #[case::host_zero("10.0.1.0/32", 1)]
    #[case::slash16("10.0.0.0/16", 512)]
    #[case::ipv6("fc00::/120", 0)]
    fn buggy_addresses_counted_exactly(#[case] cidr: &str, #[case] expected: u128) {
        assert_eq!(buggy_count(cidr.parse().expect("cidr")), expected);
    }

    #[test]
    fn declared_order_then_lowest_first() {
        let mut s = space(&["10.0.1.0/30", "10.0.0.0/30", "fc00::/126"], true);
        assert_eq!(
            s.lowest_free(Family::V4),
            Some(ip("10.0.1.1")),
            "first CIDR first, .0 avoided"
        );
        for a in ["10.0.1.1", "10.0.1.2", "10.0.1.3"] {
            assert!(s.take(ip(a)));
        }
        assert_eq!(s.lowest_free(Family::V4), Some(ip("10.0.0.1")));
        assert_eq!(s.lowest_free(Family::V6), Some(ip("fc00::")));
        assert!(!s.take(ip("10.9.9.9")));
        assert_eq!(
            s.status_counts(Family::V4),
            (3, 3),
            "6 usable (2 buggy .0 avoided), 3 used"
        );
        assert!(s.release(ip("10.0.1.2")) && !s.release(ip("10.0.1.2")));
        assert_eq!(s.lowest_free(Family::V4), Some(ip("10.0.1.2")));
        assert!(!s.usable(ip("10.0.0.0")) && s.usable(ip("10.0.0.1")));
    }

    /// Upstream's `poolCount`: 62 host bits or more count as int64's
    /// maximum; 61 are counted exactly.
    #[test]
    fn pool_count_huge_cidrs() {
        let cap = |c: &str| space(&[c], false).status_counts(Family::V6).1;
        assert_eq!(cap("fc00::/67"), 1 << 61);
        assert_eq!(cap("fc00::/66"), i64::MAX);
        assert_eq!(cap("fc00::/65"), i64::MAX);
    }

    #[test]
    fn huge_pools_saturate() {
        let s = space(&["fc00::/64", "fd00::/8"], false);
        assert_eq!(s.status_counts(Family::V6), (0, i64::MAX));
        assert_eq!(s.capacity(Family::V4), 0);
    }

    proptest! {
        #[test]
        fn buggy_count_matches_enumeration(start in 0u32..70_000, len in 0u8..=20) {
            let prefix = 32 - (len % 17);
            let net: IpNet = IpNet::V4(ipnet::Ipv4Net::new(Ipv4Addr::from(start), prefix).expect("prefix").trunc());
            let naive = (to_u128(net.network())..=to_u128(net.broadcast())).filter(|a| is_buggy_v4(*a)).count() as u128;
            prop_assert_eq!(buggy_count(net), naive);
        }
    }
}
