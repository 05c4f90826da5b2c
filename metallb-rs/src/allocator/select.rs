//! Which pools may serve a service, in which order, and which addresses of
//! a pool a service's families and policy take.
//!
//! Order (upstream's, with ties made deterministic): first the "pinned"
//! pools - autoAssign pools whose serviceAllocation selects the service by
//! namespace (names or namespaceSelectors) or by serviceSelectors, or has
//! only a priority - sorted by priority (lower first, 0 last; upstream
//! leaves negative priorities in no defined order, here they come first),
//! then by name; then every autoAssign pool without serviceAllocation, by
//! name.
//!
//! namespaceSelectors that select no namespace of the cluster do not
//! restrict the pool, as upstream resolves them to an empty namespace
//! list: such a pool serves explicit requests (address-pool annotation,
//! loadBalancerIPs) from any namespace and is pinned to none.

use super::Allocator;
use super::error::AllocError;
use super::service::{FamilyPolicy, ServiceFamily, ServiceInfo};
use super::space::Family;
use crate::config::{Allocation, Pool};
use std::net::IpAddr;

/// Whether `alloc` restricts namespaces, and if so whether it admits `svc`'s.
fn namespace_admits(alloc: &Allocation, svc: &ServiceInfo) -> Option<bool> {
    if !alloc.restricts_namespaces() {
        return None;
    }
    Some(
        alloc.namespaces.contains(&svc.namespace)
            || alloc
                .namespace_selectors
                .iter()
                .any(|s| s.matches(&svc.namespace_labels)),
    )
}

/// Whether `alloc` restricts services by label, and if so whether it
/// admits `svc` (selectors are ORed).
fn selectors_admit(alloc: &Allocation, svc: &ServiceInfo) -> Option<bool> {
    if alloc.service_selectors.is_empty() {
        return None;
    }
    Some(
        alloc
            .service_selectors
            .iter()
            .any(|s| s.matches(&svc.labels)),
    )
}

/// Whether `pool` may serve `svc` at all (upstream's
/// `isPoolCompatibleWithService`): every restriction its serviceAllocation
/// sets must admit the service.
pub fn compatible(pool: &Pool, svc: &ServiceInfo) -> bool {
    let Some(alloc) = &pool.allocation else {
        return true;
    };
    namespace_admits(alloc, svc) != Some(false) && selectors_admit(alloc, svc) != Some(false)
}

/// Whether `pool` is pinned to `svc`: compatible, autoAssign, and
/// selecting it by namespace or labels (or by priority alone).
fn pinned(pool: &Pool, svc: &ServiceInfo) -> bool {
    let Some(alloc) = &pool.allocation else {
        return false;
    };
    if !pool.auto_assign || !compatible(pool, svc) {
        return false;
    }
    namespace_admits(alloc, svc) == Some(true)
        || selectors_admit(alloc, svc) == Some(true)
        || alloc.priority_only()
}

/// Sort key: priority > 0 ascending, then priority 0, then name.
fn priority_key(pool: &Pool) -> (bool, i64, &str) {
    let p = pool.allocation.as_ref().map_or(0, |a| a.priority);
    (p == 0, p, pool.name.as_str())
}

impl Allocator {
    /// Whether pool `name` may serve `svc`.
    pub(super) fn compatible(&self, name: &str, svc: &ServiceInfo) -> bool {
        self.pools
            .get(name)
            .is_some_and(|s| compatible(&s.pool, svc))
    }

    /// The pinned pools for `svc`, best first.
    pub fn pinned_pools(&self, svc: &ServiceInfo) -> Vec<String> {
        let mut pools: Vec<&Pool> = self.pools().filter(|p| pinned(p, svc)).collect();
        pools.sort_by(|a, b| priority_key(a).cmp(&priority_key(b)));
        pools.into_iter().map(|p| p.name.clone()).collect()
    }

    /// The autoAssign pools without serviceAllocation, by name.
    pub fn general_pools(&self) -> Vec<String> {
        self.pools()
            .filter(|p| p.auto_assign && p.allocation.is_none())
            .map(|p| p.name.clone())
            .collect()
    }
}

/// The pool to take addresses from, given each candidate pool's first
/// takeable IPv4 and IPv6 (upstream's `findBestPoolForService`): the first
/// that has the service's family or, for dual stack, both; under
/// PreferDualStack failing that the first with the primary family, then
/// the first with the other one.
pub fn best_pool<'a>(
    candidates: &'a [(String, Option<IpAddr>, Option<IpAddr>)],
    svc: &ServiceInfo,
) -> Option<(&'a str, Option<IpAddr>, Option<IpAddr>)> {
    let get = |f: Family, v4: Option<IpAddr>, v6: Option<IpAddr>| match f {
        Family::V4 => v4,
        Family::V6 => v6,
    };
    let secondary = match svc.primary {
        Family::V4 => Family::V6,
        Family::V6 => Family::V4,
    };
    let prefer_dual =
        svc.policy == FamilyPolicy::PreferDualStack && svc.family == ServiceFamily::Dual;
    let (mut first_primary, mut first_secondary) = (None, None);
    for (pool, v4, v6) in candidates {
        let found = Some((pool.as_str(), *v4, *v6));
        if let Some(f) = svc.family.single() {
            if get(f, *v4, *v6).is_some() {
                return found;
            }
            continue;
        }
        let (p, s) = (get(svc.primary, *v4, *v6), get(secondary, *v4, *v6));
        if p.is_some() && s.is_some() {
            return found;
        }
        if !prefer_dual {
            continue;
        }
        if p.is_some() && first_primary.is_none() {
            first_primary = found;
        }
        if s.is_some() && first_secondary.is_none() {
            first_secondary = found;
        }
    }
    first_primary.or(first_secondary)
}

/// The addresses a service of `family` and `policy` takes out of a pool
/// offering `v4` and `v6` (upstream's `selectIPsForFamilyAndPolicy`).
pub fn for_family_and_policy(
    pool: &str,
    v4: Option<IpAddr>,
    v6: Option<IpAddr>,
    family: ServiceFamily,
    policy: FamilyPolicy,
) -> Result<Vec<IpAddr>, AllocError> {
    let picked: Option<Vec<IpAddr>> = match (family, policy) {
        (ServiceFamily::V4, _) => v4.map(|a| vec![a]),
        (ServiceFamily::V6, _) => v6.map(|a| vec![a]),
        (ServiceFamily::Dual, FamilyPolicy::PreferDualStack) => match (v4, v6) {
            (Some(a), Some(b)) => Some(vec![a, b]),
            (Some(a), None) | (None, Some(a)) => Some(vec![a]),
            (None, None) => None,
        },
        (ServiceFamily::Dual, FamilyPolicy::RequireDualStack) => {
            v4.zip(v6).map(|(a, b)| vec![a, b])
        }
        // Two ClusterIPs under SingleStack cannot happen in Kubernetes.
        (ServiceFamily::Dual, FamilyPolicy::SingleStack) => None,
    };
    picked.ok_or_else(|| AllocError::PoolExhausted {
        pool: pool.to_owned(),
        family,
    })
}
