//! IP allocation bookkeeping with MetalLB's semantics: which service holds
//! which addresses from which pool, who may share an address, which pool a
//! service gets, and the per-pool counts. Pure: no I/O, no kube client,
//! not async; the controller feeds it plain [`ServiceInfo`]s.
//!
//! Cost: picking an address is O(log n) in the pool's size (free
//! addresses are intervals, [`freeset`]); only the pools and CIDRs of the
//! configuration and the addresses already shared under the same key are
//! walked, never the free addresses one by one.

mod error;
pub mod freeset;
mod select;
pub mod service;
pub mod space;

pub use error::AllocError;
pub use service::{FamilyPolicy, Port, ServiceFamily, ServiceInfo, SharingKey};
pub use space::Family;

use crate::config::Pool;
use crate::service_key::ServiceKey;
use freeset::to_u128;
use space::AddressSpace;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// The pool status counters upstream keeps in `IPAddressPool.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolCounters {
    /// IPv4 addresses in use (a shared address counts once).
    pub assigned_ipv4: i64,
    /// IPv6 addresses in use.
    pub assigned_ipv6: i64,
    /// IPv4 addresses still free.
    pub available_ipv4: i64,
    /// IPv6 addresses still free.
    pub available_ipv6: i64,
}

/// What one service holds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Alloc {
    pool: String,
    ips: Vec<IpAddr>,
    ports: Vec<Port>,
    key: SharingKey,
}

/// Who uses one address.
#[derive(Debug, Clone, Default)]
struct IpUse {
    /// The sharing key of its users (all equal, except while the sole
    /// user changes its own).
    key: SharingKey,
    /// Port -> the service using it on this address.
    ports: BTreeMap<Port, ServiceKey>,
    /// Services holding it.
    services: BTreeSet<ServiceKey>,
}

struct PoolState {
    pool: Pool,
    space: AddressSpace,
}

/// The allocator: pools, and every service's allocation.
#[derive(Default)]
pub struct Allocator {
    pools: BTreeMap<String, PoolState>,
    /// (family, first address) -> (last address, pool) for every CIDR:
    /// pools never overlap (config validation), so this finds an
    /// address's pool in O(log n).
    owners: BTreeMap<(Family, u128), (u128, String)>,
    allocated: HashMap<ServiceKey, Alloc>,
    ips: HashMap<IpAddr, IpUse>,
    /// Addresses currently held under each non-empty sharing key, in
    /// order: the only used addresses a new service may be handed.
    shareable: HashMap<SharingKey, BTreeSet<IpAddr>>,
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator")
            .field("pools", &self.pools.keys().collect::<Vec<_>>())
            .field("services", &self.allocated.len())
            .field("addresses", &self.ips.len())
            .finish()
    }
}

fn family_of_ips(ips: &[IpAddr]) -> Option<ServiceFamily> {
    let families: Vec<Family> = ips.iter().map(|ip| Family::of(*ip)).collect();
    ServiceFamily::from_families(&families)
}

impl Allocator {
    /// An allocator with no pools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Installs a new configuration's pools. Existing allocations move to
    /// the pool that now holds their addresses; those no pool holds any
    /// more are released and returned (sorted), for the caller to
    /// reprocess. Sharing is not re-checked: it only restricts new
    /// allocations.
    pub fn set_pools(&mut self, pools: &BTreeMap<String, Pool>) -> Vec<ServiceKey> {
        let mut old: Vec<(ServiceKey, Alloc)> =
            std::mem::take(&mut self.allocated).into_iter().collect();
        old.sort_by(|a, b| a.0.cmp(&b.0));
        self.ips.clear();
        self.shareable.clear();
        self.owners.clear();
        self.pools = pools
            .iter()
            .map(|(name, p)| {
                for c in &p.cidrs {
                    let fam = Family::of(c.addr());
                    self.owners.insert(
                        (fam, to_u128(c.network())),
                        (to_u128(c.broadcast()), name.clone()),
                    );
                }
                let state = PoolState {
                    pool: p.clone(),
                    space: AddressSpace::new(&p.cidrs, p.avoid_buggy_ips),
                };
                (name.clone(), state)
            })
            .collect();
        let mut released = Vec::new();
        for (svc, mut alloc) in old {
            match self.pool_for(&alloc.ips) {
                Some(pool) => {
                    alloc.pool = pool.to_owned();
                    self.record(&svc, alloc);
                }
                None => released.push(svc),
            }
        }
        released
    }

    /// The pools, by name.
    pub fn pools(&self) -> impl Iterator<Item = &Pool> {
        self.pools.values().map(|s| &s.pool)
    }

    /// Whether any pool is configured.
    pub fn has_pools(&self) -> bool {
        !self.pools.is_empty()
    }

    /// The pool holding `ip` (usable there), if any.
    fn pool_of(&self, ip: IpAddr) -> Option<&str> {
        let fam = Family::of(ip);
        let n = to_u128(ip);
        let (&(f, _), (last, pool)) = self.owners.range(..=(fam, n)).next_back()?;
        (f == fam && n <= *last && self.pools.get(pool)?.space.usable(ip)).then_some(pool.as_str())
    }

    /// The one pool holding every address of `ips` (upstream's `poolFor`).
    pub fn pool_for(&self, ips: &[IpAddr]) -> Option<&str> {
        let (first, rest) = ips.split_first()?;
        let pool = self.pool_of(*first)?;
        rest.iter()
            .all(|ip| self.pool_of(*ip) == Some(pool))
            .then_some(pool)
    }

    /// Addresses held by service `key`.
    pub fn ips(&self, key: &ServiceKey) -> Option<&[IpAddr]> {
        self.allocated.get(key).map(|a| a.ips.as_slice())
    }

    /// The pool service `key`'s addresses come from.
    pub fn pool(&self, key: &ServiceKey) -> Option<&str> {
        self.allocated.get(key).map(|a| a.pool.as_str())
    }

    /// The sharing key service `key` holds its addresses under.
    pub fn sharing_key(&self, key: &ServiceKey) -> Option<&SharingKey> {
        self.allocated.get(key).map(|a| &a.key)
    }

    /// Services holding an allocation, sorted.
    pub fn services(&self) -> Vec<&ServiceKey> {
        let mut v: Vec<&ServiceKey> = self.allocated.keys().collect();
        v.sort_unstable();
        v
    }

    /// Services holding `ip`.
    pub fn users_of(&self, ip: IpAddr) -> Vec<&ServiceKey> {
        self.ips
            .get(&ip)
            .map(|u| u.services.iter().collect())
            .unwrap_or_default()
    }

    /// Counters of pool `name` (None for an unknown pool).
    pub fn counters(&self, name: &str) -> Option<PoolCounters> {
        let space = &self.pools.get(name)?.space;
        let (assigned_ipv4, available_ipv4) = space.status_counts(Family::V4);
        let (assigned_ipv6, available_ipv6) = space.status_counts(Family::V6);
        Some(PoolCounters {
            assigned_ipv4,
            assigned_ipv6,
            available_ipv4,
            available_ipv6,
        })
    }

    /// Capacity of pool `name` for `family` (saturating u128).
    pub fn capacity(&self, name: &str, family: Family) -> u128 {
        self.pools.get(name).map_or(0, |s| s.space.capacity(family))
    }

    /// Addresses of `family` in use in pool `name`.
    pub fn in_use(&self, name: &str, family: Family) -> u128 {
        self.pools.get(name).map_or(0, |s| s.space.in_use(family))
    }

    /// Whether service `svc` may use `ip`: free, or held only by services
    /// it may share with and on other ports (upstream's `checkSharing`).
    fn check_sharing(&self, svc: &ServiceInfo, ip: IpAddr) -> Result<(), AllocError> {
        let Some(used) = self.ips.get(&ip) else {
            return Ok(());
        };
        if let Some(reason) = used.key.conflict_with(&svc.sharing) {
            let others: Vec<String> = used
                .services
                .iter()
                .filter(|s| **s != svc.key)
                .map(ToString::to_string)
                .collect();
            if !others.is_empty() {
                return Err(AllocError::SharingConflict {
                    svc: svc.key.to_string(),
                    others,
                    reason,
                });
            }
        }
        for port in &svc.ports {
            if used.ports.get(port).is_some_and(|s| *s != svc.key) {
                return Err(AllocError::PortInUse {
                    port: port.clone(),
                    ip,
                });
            }
        }
        Ok(())
    }

    /// Gives `ips` to `svc` if the configuration and sharing rules allow
    /// it (replacing what it held). Idempotent for a consistent state.
    pub fn assign(&mut self, svc: &ServiceInfo, ips: &[IpAddr]) -> Result<(), AllocError> {
        if ips.is_empty() || ips.len() > 2 {
            return Err(AllocError::BadAddresses(format!(
                "a service takes one or two addresses, not {}",
                ips.len()
            )));
        }
        if ips.len() == 2 && Family::of(ips[0]) == Family::of(ips[1]) {
            return Err(AllocError::BadAddresses(format!(
                "\"{}\" \"{}\" has the same family",
                ips[0], ips[1]
            )));
        }
        let pool = self
            .pool_for(ips)
            .ok_or_else(|| AllocError::NotAllowed(ips.to_vec()))?
            .to_owned();
        if !self.compatible(&pool, svc) {
            return Err(AllocError::Incompatible(pool));
        }
        for ip in ips {
            self.check_sharing(svc, *ip)?;
        }
        self.record(
            &svc.key,
            Alloc {
                pool,
                ips: ips.to_vec(),
                ports: svc.ports.clone(),
                key: svc.sharing.clone(),
            },
        );
        Ok(())
    }

    /// Records `alloc` for `svc` unconditionally (the caller checked it).
    fn record(&mut self, svc: &ServiceKey, alloc: Alloc) {
        self.unassign(svc);
        for ip in &alloc.ips {
            let is_new = !self.ips.contains_key(ip);
            if is_new && let Some(state) = self.pools.get_mut(&alloc.pool) {
                state.space.take(*ip);
            }
            let used = self.ips.entry(*ip).or_default();
            if is_new || used.key != alloc.key {
                if let Some(set) = self.shareable.get_mut(&used.key) {
                    set.remove(ip);
                }
                if !alloc.key.sharing.is_empty() {
                    self.shareable
                        .entry(alloc.key.clone())
                        .or_default()
                        .insert(*ip);
                }
                used.key = alloc.key.clone();
            }
            for port in &alloc.ports {
                used.ports.insert(port.clone(), svc.clone());
            }
            used.services.insert(svc.clone());
        }
        self.allocated.insert(svc.clone(), alloc);
    }

    /// Frees what service `key` holds; false when it held nothing.
    pub fn unassign(&mut self, key: &ServiceKey) -> bool {
        let Some(alloc) = self.allocated.remove(key) else {
            return false;
        };
        for ip in &alloc.ips {
            let Some(used) = self.ips.get_mut(ip) else {
                continue;
            };
            used.ports.retain(|_, s| s != key);
            used.services.remove(key);
            if used.services.is_empty() {
                let key = used.key.clone();
                self.ips.remove(ip);
                if let Some(set) = self.shareable.get_mut(&key) {
                    set.remove(ip);
                    if set.is_empty() {
                        self.shareable.remove(&key);
                    }
                }
                if let Some(state) = self.pools.get_mut(&alloc.pool) {
                    state.space.release(*ip);
                }
            }
        }
        true
    }

    /// Allocates from the best pool for `svc` (or confirms what it holds).
    pub fn allocate(&mut self, svc: &ServiceInfo) -> Result<Vec<IpAddr>, AllocError> {
        if let Some(ips) = self.ips(&svc.key).map(<[IpAddr]>::to_vec) {
            self.assign(svc, &ips)?;
            return Ok(ips);
        }
        let mut tried = Vec::new();
        let pinned = self.pinned_pools(svc);
        match self.allocate_from_pools(&pinned, svc) {
            Ok(ips) => return Ok(ips),
            Err(e) => tried.extend(e),
        }
        let general = self.general_pools();
        match self.allocate_from_pools(&general, svc) {
            Ok(ips) => Ok(ips),
            Err(e) => {
                tried.extend(e);
                Err(AllocError::NoAvailableIps(tried))
            }
        }
    }

    /// Allocates from pool `pool` (the `metallb.io/address-pool`
    /// annotation: autoAssign does not matter, compatibility does).
    pub fn allocate_from_pool(
        &mut self,
        svc: &ServiceInfo,
        pool: &str,
    ) -> Result<Vec<IpAddr>, AllocError> {
        if let Some(ips) = self.ips(&svc.key).map(<[IpAddr]>::to_vec) {
            let held = family_of_ips(&ips).ok_or_else(|| {
                AllocError::BadAddresses(format!("unknown allocated IP family of {ips:?}"))
            })?;
            if svc.policy != FamilyPolicy::PreferDualStack && held != svc.family {
                return Err(AllocError::WrongFamily {
                    assigned: held,
                    wanted: svc.family,
                });
            }
            self.assign(svc, &ips)?;
            return Ok(ips);
        }
        if !self.pools.contains_key(pool) {
            return Err(AllocError::UnknownPool(pool.to_owned()));
        }
        let (v4, v6) = self.free_ips_in_pool(pool, svc);
        let ips = select::for_family_and_policy(pool, v4, v6, svc.family, svc.policy)?;
        self.assign(svc, &ips)?;
        Ok(ips)
    }

    /// PreferDualStack with one address: tries to add the missing family
    /// from the same pool, keeping `existing`.
    pub fn allocate_additional_family(
        &mut self,
        svc: &ServiceInfo,
        existing: IpAddr,
        pool: &str,
    ) -> Result<IpAddr, AllocError> {
        if !self.pools.contains_key(pool) {
            return Err(AllocError::UnknownPool(pool.to_owned()));
        }
        let (v4, v6) = self.free_ips_in_pool(pool, svc);
        let (missing, ip) = match Family::of(existing) {
            Family::V4 => (ServiceFamily::V6, v6),
            Family::V6 => (ServiceFamily::V4, v4),
        };
        let ip = ip.ok_or_else(|| AllocError::PoolExhausted {
            pool: pool.to_owned(),
            family: missing,
        })?;
        self.assign(svc, &[existing, ip])?;
        Ok(ip)
    }

    /// The lowest address of the `index`th CIDR of `pool` that `svc` may
    /// take: the lowest free one, unless an address already shared under
    /// `svc`'s key (or held by `svc` alone) comes first.
    fn candidate_in_cidr(&self, pool: &str, index: usize, svc: &ServiceInfo) -> Option<IpAddr> {
        let space = &self.pools.get(pool)?.space;
        let cidr = space.cidrs().nth(index)?;
        let mut best = space.lowest_free_in(index);
        let below_best = |ip: IpAddr, best: Option<IpAddr>| best.is_none_or(|b| ip < b);
        if !svc.sharing.sharing.is_empty()
            && let Some(set) = self.shareable.get(&svc.sharing)
        {
            for ip in set.range(cidr.network()..=cidr.broadcast()) {
                if !below_best(*ip, best) {
                    break;
                }
                if space.usable(*ip) && self.check_sharing(svc, *ip).is_ok() {
                    best = Some(*ip);
                    break;
                }
            }
        }
        for ip in self.ips(&svc.key).unwrap_or_default() {
            if cidr.contains(ip)
                && below_best(*ip, best)
                && space.usable(*ip)
                && self.check_sharing(svc, *ip).is_ok()
            {
                best = Some(*ip);
            }
        }
        best
    }

    /// The first address of each family `svc` may take from `pool`, CIDRs
    /// in declared order (upstream's `getFreeIPsFromPool`).
    fn free_ips_in_pool(&self, pool: &str, svc: &ServiceInfo) -> (Option<IpAddr>, Option<IpAddr>) {
        let Some(state) = self.pools.get(pool) else {
            return (None, None);
        };
        let (mut v4, mut v6) = (None, None);
        for (i, cidr) in state.space.cidrs().enumerate() {
            let slot = match Family::of(cidr.addr()) {
                Family::V4 => &mut v4,
                Family::V6 => &mut v6,
            };
            if slot.is_none() {
                *slot = self.candidate_in_cidr(pool, i, svc);
            }
            if v4.is_some() && v6.is_some() {
                break;
            }
        }
        (v4, v6)
    }

    /// Picks the best of `pools` for `svc` and assigns from it; on failure
    /// returns why each pool was rejected.
    fn allocate_from_pools(
        &mut self,
        pools: &[String],
        svc: &ServiceInfo,
    ) -> Result<Vec<IpAddr>, Vec<(String, AllocError)>> {
        let candidates: Vec<(String, Option<IpAddr>, Option<IpAddr>)> = pools
            .iter()
            .map(|p| {
                let (v4, v6) = self.free_ips_in_pool(p, svc);
                (p.clone(), v4, v6)
            })
            .collect();
        let Some((pool, v4, v6)) = select::best_pool(&candidates, svc) else {
            return Err(candidates
                .iter()
                .map(|(p, v4, v6)| {
                    let e = select::for_family_and_policy(p, *v4, *v6, svc.family, svc.policy)
                        .err()
                        .unwrap_or(AllocError::PoolExhausted {
                            pool: p.clone(),
                            family: svc.family,
                        });
                    (p.clone(), e)
                })
                .collect());
        };
        let pool = pool.to_owned();
        let ips = select::for_family_and_policy(&pool, v4, v6, svc.family, svc.policy)
            .map_err(|e| vec![(pool.clone(), e)])?;
        self.assign(svc, &ips).map_err(|e| vec![(pool, e)])?;
        Ok(ips)
    }
}

#[cfg(test)]
mod tests;
