//! What the controller decides for one service (upstream's
//! `convergeBalancer` and `SetBalancer`): which addresses it should show,
//! from which pool, which events to emit, and whether other services must
//! be reprocessed. Pure: the allocator is the only state it touches; the
//! runner does the writes.

use crate::allocator::{
    AllocError, Allocator, FamilyPolicy, ServiceFamily, ServiceInfo, SharingKey,
};
use crate::event::EventSpec;
use crate::service::{self, ServiceKey, annotation};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// What the service should show.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Desired {
    /// `status.loadBalancer.ingress[].ip`; empty clears it.
    pub ingress: Vec<IpAddr>,
    /// `metallb.io/ip-allocated-from-pool`; None removes it.
    pub pool: Option<String>,
}

/// The writes that bring a service to its desired state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// New `status.loadBalancer.ingress`, when it changes.
    pub ingress: Option<Vec<IpAddr>>,
    /// Annotation changes: key -> new value (None deletes).
    pub annotations: BTreeMap<String, Option<String>>,
}

/// The outcome for one service.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// Events to publish about the service.
    pub events: Vec<EventSpec>,
    /// What to write, if the service differs from what it should be.
    pub write: Option<Write>,
    /// Other services may now be served differently: reprocess them all.
    pub reprocess_all: bool,
}

struct Converged {
    desired: Desired,
    events: Vec<EventSpec>,
    /// Leave the service exactly as it is (upstream returns before
    /// touching it).
    untouched: bool,
}

fn quoted(ips: &[IpAddr]) -> String {
    service::go_quoted(ips)
}

/// Whether held addresses of family `held` no longer fit the service's
/// ClusterIPs (upstream's `serviceFamilyChanged`).
fn family_changed(
    held: Option<ServiceFamily>,
    cluster: ServiceFamily,
    policy: FamilyPolicy,
) -> bool {
    match held {
        None => true,
        Some(h) if h == cluster => false,
        Some(_) => !(cluster == ServiceFamily::Dual && policy == FamilyPolicy::PreferDualStack),
    }
}

/// Why a service that holds nothing got no addresses; the texts are
/// upstream's, shown in the AllocationFailed event.
#[derive(Debug, thiserror::Error)]
enum AllocateError {
    /// The addresses it asks for are unusable.
    #[error(transparent)]
    Requested(#[from] service::RequestError),
    /// It asks for addresses of another family than its ClusterIPs'.
    #[error(
        "requested loadBalancer IP(s) {} does not match the ipFamily of the service",
        quoted(.0)
    )]
    FamilyMismatch(Vec<IpAddr>),
    /// The addresses it asks for are not in the pool it asks for.
    #[error(
        "requested loadBalancer IP(s) {} is not compatible with requested address pool {pool}",
        quoted(.ips)
    )]
    PoolMismatch {
        /// The addresses asked for.
        ips: Vec<IpAddr>,
        /// The pool asked for.
        pool: String,
    },
    /// The allocator refused.
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

/// Allocates for a service that holds nothing (upstream's `allocateIPs`).
fn allocate(
    alloc: &mut Allocator,
    svc: &Service,
    info: &ServiceInfo,
) -> Result<Vec<IpAddr>, AllocateError> {
    let requested = service::requested_ips(svc)?;
    let pool = service::annotation_value(svc, annotation::ADDRESS_POOL).filter(|p| !p.is_empty());
    if let Some((ips, family)) = requested {
        if family != info.family {
            return Err(AllocateError::FamilyMismatch(ips));
        }
        alloc.assign(info, &ips)?;
        if let Some(pool) = pool
            && alloc.pool(&info.key) != Some(pool)
        {
            alloc.unassign(&info.key);
            return Err(AllocateError::PoolMismatch {
                ips,
                pool: pool.to_owned(),
            });
        }
        return Ok(ips);
    }
    let r = match pool {
        Some(pool) => alloc.allocate_from_pool(info, pool),
        None => alloc.allocate(info),
    };
    Ok(r?)
}

/// Where convergence stopped before the end, and so what the service
/// shows.
enum Stop {
    /// Release what the service holds and clear it.
    Clear,
    /// Leave the service exactly as it is (upstream returns before
    /// touching it).
    Untouched,
    /// Show what the allocator holds for it now.
    Current,
    /// Show nothing, the allocator left as it is.
    Empty,
}

/// Upstream's `convergeBalancer`: the allocator is updated, the desired
/// state returned.
fn converge(
    alloc: &mut Allocator,
    svc: &Service,
    ns_labels: &BTreeMap<String, String>,
) -> Converged {
    let key = service::key(svc);
    let mut events = Vec::new();
    let desired = match converge_steps(alloc, svc, ns_labels, &key, &mut events) {
        Ok(desired) => desired,
        Err(Stop::Clear) => {
            alloc.unassign(&key);
            Desired::default()
        }
        Err(Stop::Untouched) => {
            return Converged {
                desired: Desired::default(),
                events,
                untouched: true,
            };
        }
        Err(Stop::Current) => current_desired(alloc, svc),
        Err(Stop::Empty) => Desired::default(),
    };
    Converged {
        desired,
        events,
        untouched: false,
    }
}

/// The steps of `converge` in upstream's order: whether the service is
/// served at all, what it holds, whether that is still allowed, a second
/// family, a new allocation, and the pool it came from.
fn converge_steps(
    alloc: &mut Allocator,
    svc: &Service,
    ns_labels: &BTreeMap<String, String>,
    key: &ServiceKey,
    events: &mut Vec<EventSpec>,
) -> Result<Desired, Stop> {
    served(alloc, svc, key, events)?;
    let info = service::service_info(svc, ns_labels);
    let mut ips = held(alloc, svc, key, info.as_ref(), events)?;
    let info = info.map_err(|e| {
        events.push(EventSpec::warning(
            "AllocationFailed",
            format!("Failed to allocate IP for \"{key}\": {e}"),
        ));
        Stop::Clear
    })?;
    if !ips.is_empty() {
        ips = still_allowed(alloc, svc, key, &info, ips, events)?;
    }
    if ips.len() == 1 && info.policy == FamilyPolicy::PreferDualStack {
        add_second_family(alloc, key, &info, &mut ips, events);
    }
    if ips.is_empty() {
        ips = allocate_new(alloc, svc, key, &info, events)?;
    }
    let Some(pool) = alloc.pool(key).map(str::to_owned) else {
        events.push(EventSpec::warning(
            "InternalError",
            "allocated an IP that has no pool",
        ));
        return Err(Stop::Clear);
    };
    Ok(Desired {
        ingress: ips,
        pool: Some(pool),
    })
}

/// Whether MetalLB serves the service at all: a LoadBalancer, pools to
/// allocate from, and the ClusterIPs its family policy needs.
fn served(
    alloc: &Allocator,
    svc: &Service,
    key: &ServiceKey,
    events: &mut Vec<EventSpec>,
) -> Result<(), Stop> {
    if !service::is_load_balancer(svc) || !alloc.has_pools() {
        return Err(Stop::Clear);
    }
    let cluster_ips = service::cluster_ips(svc);
    if cluster_ips.is_empty() {
        tracing::info!(service = %key, "clearing assignment: no ClusterIPs");
        return Err(Stop::Clear);
    }
    if service::family_policy(svc) == FamilyPolicy::RequireDualStack && cluster_ips.len() < 2 {
        events.push(EventSpec::warning(
            "not enough clusterips",
            format!("Service requires dual stack but not enough clusterips {cluster_ips:?}"),
        ));
        return Err(Stop::Clear);
    }
    Ok(())
}

/// The addresses the service shows and may keep: none (released) when it
/// shows none or they are of a family its ClusterIPs no longer have.
/// Unreadable ClusterIP families leave it untouched, as upstream.
fn held(
    alloc: &mut Allocator,
    svc: &Service,
    key: &ServiceKey,
    info: Result<&ServiceInfo, &service::FamilyError>,
    events: &mut Vec<EventSpec>,
) -> Result<Vec<IpAddr>, Stop> {
    let held = service::ingress_strings(svc);
    if held.is_empty() {
        alloc.unassign(key);
        return Ok(Vec::new());
    }
    let held_family = service::addresses_family(&held);
    if let Err(e) = &held_family {
        events.push(EventSpec::warning(
            "nolbIPsIPFamily",
            format!(
                "Failed to retrieve LBIPs IPFamily for {}: {e}",
                service::go_quoted(&held)
            ),
        ));
    }
    let info = match info {
        Ok(info) => info,
        Err(e) => {
            // Upstream gives up here and leaves the service as it is.
            let (list, single) = service::raw_cluster_ips(svc);
            events.push(EventSpec::warning(
                "noclusterIPsIPFamily",
                format!(
                    "Failed to retrieve ClusterIPs IPFamily for {} {single}: {e}",
                    service::go_quoted(&list)
                ),
            ));
            return Err(Stop::Untouched);
        }
    };
    match held_family {
        Ok(f) if !family_changed(Some(f), info.family, info.policy) => {
            Ok(service::ingress_ips(svc).unwrap_or_default())
        }
        _ => {
            alloc.unassign(key);
            Ok(Vec::new())
        }
    }
}

/// The held addresses the configuration, the requested pool and the
/// requested IPs still allow (all or none); invalid requested IPs stop
/// convergence with what the allocator holds.
fn still_allowed(
    alloc: &mut Allocator,
    svc: &Service,
    key: &ServiceKey,
    info: &ServiceInfo,
    mut ips: Vec<IpAddr>,
    events: &mut Vec<EventSpec>,
) -> Result<Vec<IpAddr>, Stop> {
    // Idempotent when the configuration still allows what it holds.
    if let Err(e) = alloc.assign(info, &ips) {
        events.push(EventSpec::normal(
            "ClearAssignment",
            format!("current IP for \"{key}\" not allowed by config, will attempt for new IP assignment: {e}"),
        ));
        alloc.unassign(key);
        ips.clear();
    }
    let wanted_pool =
        service::annotation_value(svc, annotation::ADDRESS_POOL).filter(|p| !p.is_empty());
    if !ips.is_empty() && wanted_pool.is_some_and(|p| alloc.pool(key) != Some(p)) {
        tracing::info!(service = %key, "clearing assignment: a different pool was requested");
        alloc.unassign(key);
        ips.clear();
    }
    match service::requested_ips(svc) {
        Err(e) => {
            events.push(EventSpec::warning(
                "LoadBalancerFailed",
                format!("invalid requested loadbalancer IPs: {e}"),
            ));
            return Err(Stop::Current);
        }
        Ok(Some((wanted, _))) if !same_set(&wanted, &ips) && !ips.is_empty() => {
            tracing::info!(service = %key, "clearing assignment: different IPs were requested");
            alloc.unassign(key);
            ips.clear();
        }
        Ok(_) => {}
    }
    Ok(ips)
}

/// PreferDualStack with one address: an address of the other family from
/// the same pool, when it has one (its absence is only an event).
fn add_second_family(
    alloc: &mut Allocator,
    key: &ServiceKey,
    info: &ServiceInfo,
    ips: &mut Vec<IpAddr>,
    events: &mut Vec<EventSpec>,
) {
    let pool = alloc.pool(key).unwrap_or_default().to_owned();
    match alloc.allocate_additional_family(info, ips[0], &pool) {
        Ok(extra) => {
            events.push(EventSpec::normal(
                "IPAllocated",
                format!("Assigned additional IP \"{extra}\""),
            ));
            ips.push(extra);
        }
        Err(e) => events.push(EventSpec::normal(
            "AdditionalAssignFailed",
            format!("cannot assign additional IP in PreferDualStack: {e}"),
        )),
    }
}

/// New addresses for a service that holds none; a failure shows none.
fn allocate_new(
    alloc: &mut Allocator,
    svc: &Service,
    key: &ServiceKey,
    info: &ServiceInfo,
    events: &mut Vec<EventSpec>,
) -> Result<Vec<IpAddr>, Stop> {
    match allocate(alloc, svc, info) {
        Ok(new) => {
            events.push(EventSpec::normal(
                "IPAllocated",
                format!("Assigned IP {}", quoted(&new)),
            ));
            Ok(new)
        }
        Err(e) => {
            events.push(EventSpec::warning(
                "AllocationFailed",
                format!("Failed to allocate IP for \"{key}\": {e}"),
            ));
            Err(Stop::Empty)
        }
    }
}

/// What the service shows now (kept when convergence stops early).
fn current_desired(alloc: &Allocator, svc: &Service) -> Desired {
    let key = service::key(svc);
    Desired {
        ingress: alloc.ips(&key).map(<[IpAddr]>::to_vec).unwrap_or_default(),
        pool: alloc.pool(&key).map(str::to_owned),
    }
}

fn same_set(a: &[IpAddr], b: &[IpAddr]) -> bool {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort();
    b.sort();
    a == b
}

/// The sharing key that makes other services' allocations depend on this
/// one (none when it does not share).
fn allocation_key(alloc: &Allocator, key: &ServiceKey) -> Option<SharingKey> {
    alloc
        .sharing_key(key)
        .filter(|k| !k.sharing.is_empty())
        .cloned()
}

fn observed_ingress(svc: &Service) -> Vec<LoadBalancerIngress> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.clone())
        .unwrap_or_default()
}

/// Upstream's `SetBalancer` for a service that exists.
pub fn set_balancer(
    alloc: &mut Allocator,
    svc: &Service,
    ns_labels: &BTreeMap<String, String>,
) -> Decision {
    let key = service::key(svc);
    let prev_ips = alloc.ips(&key).map(<[IpAddr]>::to_vec).unwrap_or_default();
    let prev_key = allocation_key(alloc, &key);
    let Converged {
        desired,
        mut events,
        untouched,
    } = converge(alloc, svc, ns_labels);
    let mut reprocess_all = prev_key != allocation_key(alloc, &key);
    if untouched {
        return Decision {
            events,
            write: None,
            reprocess_all,
        };
    }

    let desired_ingress: Vec<LoadBalancerIngress> = desired
        .ingress
        .iter()
        .map(|ip| LoadBalancerIngress {
            ip: Some(ip.to_string()),
            ..LoadBalancerIngress::default()
        })
        .collect();
    let ingress = (observed_ingress(svc) != desired_ingress).then(|| desired.ingress.clone());
    let mut annotations = BTreeMap::new();
    let anns = svc.metadata.annotations.clone().unwrap_or_default();
    let pool_key = annotation::current(annotation::IP_ALLOCATED_FROM_POOL);
    if anns.get(&pool_key) != desired.pool.as_ref() {
        annotations.insert(pool_key, desired.pool.clone());
    }
    let write = (ingress.is_some() || !annotations.is_empty()).then_some(Write {
        ingress,
        annotations,
    });
    if write.is_some() {
        // Only when something changes, as upstream, so steady state is
        // quiet. Deprecated annotations are honoured and kept: upstream
        // only warns (the user may still rely on them, say a shared key).
        for name in service::deprecated_annotations(svc) {
            events.push(EventSpec::warning(
                "deprecatedAnnotation",
                format!("Service uses deprecated annotation {name}"),
            ));
        }
        if !prev_ips.is_empty() && alloc.ips(&key).is_none() && alloc.pool_for(&prev_ips).is_some()
        {
            // It gave up addresses another service may be waiting for.
            reprocess_all = true;
        }
    }
    Decision {
        events,
        write,
        reprocess_all,
    }
}

/// A service that no longer exists (or left our load balancer class).
pub fn deleted(alloc: &mut Allocator, key: &ServiceKey) -> Decision {
    let reprocess_all = alloc.unassign(key);
    Decision {
        reprocess_all,
        ..Decision::default()
    }
}

#[cfg(test)]
mod tests;
