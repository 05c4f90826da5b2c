//! The free addresses of one CIDR as a set of disjoint intervals, so that
//! "the lowest free address" and "take / give back this address" cost
//! O(log n) in the number of intervals, whatever the CIDR's size (a /8 or
//! a /64 is as cheap as a /24: no linear scan of addresses).
//!
//! Addresses are `u128` offsets (IPv4 widened), so one type serves both
//! families. "Buggy" addresses (.0 and .255 of every /24, IPv4 only) are
//! skipped by [`FreeSet::lowest`] when asked, as MetalLB's avoidBuggyIPs.

use ipnet::IpNet;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// An address as a number (IPv4 in the low 32 bits).
pub fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// Whether `addr` (an IPv4 address as a number) ends in .0 or .255.
pub fn is_buggy_v4(addr: u128) -> bool {
    let last = addr & 0xff;
    last == 0 || last == 255
}

/// Free addresses of one CIDR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeSet {
    /// start -> end (inclusive) of each free interval; disjoint, not adjacent.
    free: BTreeMap<u128, u128>,
    first: u128,
    last: u128,
    ipv4: bool,
}

impl FreeSet {
    /// Every address of `cidr` free.
    pub fn new(cidr: IpNet) -> Self {
        let (first, last) = (to_u128(cidr.network()), to_u128(cidr.broadcast()));
        Self {
            free: BTreeMap::from([(first, last)]),
            first,
            last,
            ipv4: cidr.addr().is_ipv4(),
        }
    }

    /// Whether `addr` belongs to this CIDR.
    pub fn contains(&self, addr: u128) -> bool {
        (self.first..=self.last).contains(&addr)
    }

    /// Whether `addr` is in the CIDR and free.
    pub fn is_free(&self, addr: u128) -> bool {
        self.free
            .range(..=addr)
            .next_back()
            .is_some_and(|(_, &end)| addr <= end)
    }

    /// The lowest free address, skipping .0/.255 when `avoid_buggy`. Cost
    /// is the number of leading free intervals made only of buggy
    /// addresses (none, unless every other address below is used).
    pub fn lowest(&self, avoid_buggy: bool) -> Option<u128> {
        let skip = avoid_buggy && self.ipv4;
        for (&start, &end) in &self.free {
            // At most two candidates per interval can be buggy in a row
            // (x.255 then (x+1).0), so this inner loop is bounded.
            let mut a = start;
            while a <= end {
                if !skip || !is_buggy_v4(a) {
                    return Some(a);
                }
                if a == end {
                    break;
                }
                a += 1;
            }
        }
        None
    }

    /// Marks `addr` used; false when it was not free.
    pub fn take(&mut self, addr: u128) -> bool {
        let Some((&start, &end)) = self.free.range(..=addr).next_back() else {
            return false;
        };
        if addr > end {
            return false;
        }
        self.free.remove(&start);
        if start < addr {
            self.free.insert(start, addr - 1);
        }
        if addr < end {
            self.free.insert(addr + 1, end);
        }
        true
    }

    /// Marks `addr` free again; false when it was free or outside.
    pub fn give_back(&mut self, addr: u128) -> bool {
        if !self.contains(addr) || self.is_free(addr) {
            return false;
        }
        let mut start = addr;
        let mut end = addr;
        if let Some((&s, &e)) = self.free.range(..addr).next_back()
            && e + 1 == addr
        {
            self.free.remove(&s);
            start = s;
        }
        if let Some(next) = addr.checked_add(1)
            && let Some(e) = self.free.remove(&next)
        {
            end = e;
        }
        self.free.insert(start, end);
        true
    }

    /// Number of addresses in the CIDR (saturating at `u128::MAX` for ::/0).
    pub fn capacity(&self) -> u128 {
        (self.last - self.first).saturating_add(1)
    }

    /// Number of free addresses.
    pub fn free_count(&self) -> u128 {
        self.free.iter().fold(0u128, |n, (s, e)| {
            n.saturating_add((e - s).saturating_add(1))
        })
    }
}

/// Converts a count to the int64 the API's pool status holds, saturating
/// instead of overflowing (upstream BUG for >= 2^63 addresses).
pub fn saturating_i64(n: u128) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn set(cidr: &str) -> FreeSet {
        FreeSet::new(cidr.parse().expect("cidr"))
    }

    fn ip(s: &str) -> u128 {
        to_u128(s.parse().expect("ip"))
    }

    #[test]
    fn lowest_first_and_buggy_skipping() {
        let mut s = set("10.0.0.0/23");
        assert_eq!(s.lowest(false), Some(ip("10.0.0.0")));
        assert_eq!(s.lowest(true), Some(ip("10.0.0.1")));
        for a in 1..=254u128 {
            assert!(s.take(ip("10.0.0.0") + a));
        }
        // Left: 10.0.0.0, .255, 10.0.1.0 ... : buggy ones are skipped.
        assert_eq!(s.lowest(true), Some(ip("10.0.1.1")));
        assert_eq!(s.lowest(false), Some(ip("10.0.0.0")));
    }

    #[test]
    fn take_and_give_back_merge_intervals() {
        let mut s = set("10.0.0.0/30");
        assert!(s.take(ip("10.0.0.1")) && s.take(ip("10.0.0.2")));
        assert!(!s.take(ip("10.0.0.1")), "already used");
        assert_eq!(s.free_count(), 2);
        assert!(s.give_back(ip("10.0.0.2")) && s.give_back(ip("10.0.0.1")));
        assert!(!s.give_back(ip("10.0.0.1")), "already free");
        assert_eq!(s, set("10.0.0.0/30"), "back to one interval");
        assert!(
            !s.take(ip("10.0.0.9")) && !s.give_back(ip("10.0.0.9")),
            "outside"
        );
    }

    #[test]
    fn huge_ipv6_pools_count_without_overflow() {
        let s = set("::/0");
        assert_eq!(s.capacity(), u128::MAX);
        assert_eq!(saturating_i64(s.capacity()), i64::MAX);
        let mut s = set("fc00::/64");
        assert_eq!(s.capacity(), 1u128 << 64);
        assert_eq!(saturating_i64(s.capacity()), i64::MAX);
        assert!(s.take(ip("fc00::")));
        assert_eq!(
            s.lowest(true),
            Some(ip("fc00::1")),
            "no buggy rule for IPv6"
        );
    }

    proptest! {
        /// The interval set behaves like a plain set of used addresses.
        #[test]
        fn matches_a_naive_model(ops in proptest::collection::vec((any::<bool>(), 0u128..64), 1..400), avoid in any::<bool>()) {
            let mut s = set("10.0.0.192/26"); // .192 - .255: includes a buggy .255
            let base = ip("10.0.0.192");
            let mut used = BTreeSet::new();
            for (take, off) in ops {
                let a = base + off;
                if take {
                    prop_assert_eq!(s.take(a), used.insert(a));
                } else {
                    prop_assert_eq!(s.give_back(a), used.remove(&a));
                }
                let naive = (0..64u128).map(|o| base + o).find(|a| !used.contains(a) && (!avoid || !is_buggy_v4(*a)));
                prop_assert_eq!(s.lowest(avoid), naive);
                prop_assert_eq!(s.free_count(), 64 - used.len() as u128);
            }
        }
    }
}
