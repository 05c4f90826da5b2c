//! Random operations against invariants a naive model can check.

use super::*;
use crate::allocator::freeset::is_buggy_v4;
use crate::service_key::ServiceKey;
use proptest::prelude::*;
use std::collections::BTreeSet;

const CONFIGS: [&str; 3] = [
    "p1: 10.0.0.0/29 fc00::/125\np2: 10.0.1.250-10.0.2.5 fc00::1:0/126 avoidBuggy\np3: 10.0.3.0/30 ns=ns1 priority=1",
    "q1: 10.0.0.0/29 fc00::/125\np2: 10.0.1.250-10.0.1.255 avoidBuggy\np4: 10.0.4.0/30 fc00::4:0/127",
    "p4: 10.0.4.0/30",
];

#[derive(Debug, Clone)]
enum Op {
    Alloc(ServiceInfo),
    FromPool(ServiceInfo, &'static str),
    Assign(ServiceInfo, Vec<IpAddr>),
    Release(ServiceKey),
    Config(usize),
}

fn svc_strategy() -> impl Strategy<Value = ServiceInfo> {
    (
        0..12usize,
        0..4usize,
        prop::sample::select(vec!["", "a", "b"]),
        prop::sample::select(vec!["", "x"]),
        prop::collection::btree_set(0..3usize, 0..=3),
    )
        .prop_map(|(n, fam, share, backend, ports)| {
            let ns = if n % 3 == 0 { "ns1" } else { "ns0" };
            let mut svc = ServiceInfo::new(ns, &format!("s{n}"));
            (svc.family, svc.policy) = match fam {
                0 => (ServiceFamily::V4, FamilyPolicy::SingleStack),
                1 => (ServiceFamily::V6, FamilyPolicy::SingleStack),
                2 => (ServiceFamily::Dual, FamilyPolicy::RequireDualStack),
                _ => (ServiceFamily::Dual, FamilyPolicy::PreferDualStack),
            };
            if svc.family == ServiceFamily::V6 {
                svc.primary = Family::V6;
            }
            svc.sharing = SharingKey::new(share, backend);
            let all = [
                Port::new("TCP", 80),
                Port::new("TCP", 443),
                Port::new("UDP", 53),
            ];
            svc.ports = ports.into_iter().map(|i| all[i].clone()).collect();
            svc
        })
}

fn ip_strategy() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        (0u8..5, 0u8..=255).prop_map(|(c, d)| IpAddr::from([10, 0, c, d])),
        (0u16..8).prop_map(|n| IpAddr::from([0xfc00, 0, 0, 0, 0, 0, 0, n])),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => svc_strategy().prop_map(Op::Alloc),
        2 => (svc_strategy(), prop::sample::select(vec!["p1", "p2", "q1", "p4", "nope"])).prop_map(|(s, p)| Op::FromPool(s, p)),
        2 => (svc_strategy(), prop::collection::vec(ip_strategy(), 1..=2)).prop_map(|(s, ips)| Op::Assign(s, ips)),
        4 => (0..12usize).prop_map(|n| Op::Release(ServiceKey::new(if n % 3 == 0 { "ns1" } else { "ns0" }, format!("s{n}")))),
        1 => (0..CONFIGS.len()).prop_map(Op::Config),
    ]
}

/// What each service holds, from the public API.
fn holdings(a: &Allocator) -> BTreeMap<ServiceKey, (String, Vec<IpAddr>)> {
    a.services()
        .into_iter()
        .map(|k| {
            let pool = a.pool(k).unwrap_or_default().to_owned();
            (k.clone(), (pool, a.ips(k).unwrap_or_default().to_vec()))
        })
        .collect()
}

/// The first takeable address of each family in `pool`, by scanning
/// every address: the model `free_ips_in_pool` must agree with.
fn naive_free(a: &Allocator, pool: &str, svc: &ServiceInfo) -> (Option<IpAddr>, Option<IpAddr>) {
    let state = &a.pools[pool];
    let (mut v4, mut v6) = (None, None);
    for cidr in state.space.cidrs() {
        let slot = if cidr.addr().is_ipv4() {
            &mut v4
        } else {
            &mut v6
        };
        if slot.is_some() {
            continue;
        }
        *slot = cidr.hosts_all().find(|ip| {
            let buggy = state.pool.avoid_buggy_ips && ip.is_ipv4() && is_buggy_v4(to_u128(*ip));
            !buggy && a.check_sharing(svc, *ip).is_ok()
        });
    }
    (v4, v6)
}

trait HostsAll {
    fn hosts_all(&self) -> Box<dyn Iterator<Item = IpAddr>>;
}
impl HostsAll for ipnet::IpNet {
    fn hosts_all(&self) -> Box<dyn Iterator<Item = IpAddr>> {
        let (first, last) = (to_u128(self.network()), to_u128(self.broadcast()));
        let v4 = self.addr().is_ipv4();
        Box::new((first..=last).map(move |n| {
            if v4 {
                IpAddr::from(std::net::Ipv4Addr::from(n as u32))
            } else {
                IpAddr::from(std::net::Ipv6Addr::from(n))
            }
        }))
    }
}

fn check_invariants(
    a: &Allocator,
    sharing: &HashMap<ServiceKey, (SharingKey, Vec<Port>)>,
) -> Result<(), TestCaseError> {
    let held = holdings(a);
    // Every address's users may share it with each other.
    let mut users: BTreeMap<IpAddr, Vec<&ServiceKey>> = BTreeMap::new();
    for (k, (pool, ips)) in &held {
        prop_assert_eq!(
            a.pool_for(ips),
            Some(pool.as_str()),
            "{} holds {:?} outside its pool",
            k,
            ips
        );
        for ip in ips {
            users.entry(*ip).or_default().push(k);
        }
    }
    for (ip, svcs) in &users {
        for (i, x) in svcs.iter().enumerate() {
            for y in &svcs[i + 1..] {
                let (kx, px) = &sharing[*x];
                let (ky, py) = &sharing[*y];
                prop_assert!(
                    kx.conflict_with(ky).is_none(),
                    "{} and {} share {} with keys {:?} / {:?}",
                    x,
                    y,
                    ip,
                    kx,
                    ky
                );
                prop_assert!(
                    px.iter().all(|p| !py.contains(p)),
                    "{} and {} share {} on a common port",
                    x,
                    y,
                    ip
                );
            }
        }
    }
    // Counts equal a recount.
    for pool in a.pools().map(|p| p.name.clone()).collect::<Vec<_>>() {
        let distinct: BTreeSet<IpAddr> = held
            .values()
            .filter(|(p, _)| *p == pool)
            .flat_map(|(_, ips)| ips.clone())
            .collect();
        let v4 = distinct.iter().filter(|i| i.is_ipv4()).count() as i64;
        let v6 = distinct.len() as i64 - v4;
        let c = a.counters(&pool).expect("pool");
        let state = &a.pools[&pool];
        let cap = |fam_v4: bool| {
            state
                .space
                .cidrs()
                .filter(|c| c.addr().is_ipv4() == fam_v4)
                .flat_map(|c| c.hosts_all())
                .filter(|ip| {
                    !(state.pool.avoid_buggy_ips && ip.is_ipv4() && is_buggy_v4(to_u128(*ip)))
                })
                .count() as i64
        };
        prop_assert_eq!(
            (c.assigned_ipv4, c.assigned_ipv6),
            (v4, v6),
            "pool {}",
            pool
        );
        prop_assert_eq!(
            (c.available_ipv4, c.available_ipv6),
            (cap(true) - v4, cap(false) - v6),
            "pool {}",
            pool
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// 200 cases x 500 operations = 100k operations.
    #[test]
    fn random_operations_keep_the_invariants(ops in prop::collection::vec(op_strategy(), 500)) {
        let mut a = Allocator::new();
        a.set_pools(&pools(CONFIGS[0]));
        // The key and ports each service last allocated with.
        let mut sharing: HashMap<ServiceKey, (SharingKey, Vec<Port>)> = HashMap::new();
        for op in ops {
            let before = holdings(&a);
            match op {
                Op::Alloc(svc) => {
                    if a.ips(&svc.key).is_none() {
                        for pool in a.pools().map(|p| p.name.clone()).collect::<Vec<_>>() {
                            prop_assert_eq!(a.free_ips_in_pool(&pool, &svc), naive_free(&a, &pool, &svc));
                        }
                    }
                    let r = a.allocate(&svc);
                    if r.is_ok() { sharing.insert(svc.key.clone(), (svc.sharing.clone(), svc.ports.clone())); }
                    else { prop_assert_eq!(holdings(&a), before.clone(), "a failed allocate changed nothing"); }
                }
                Op::FromPool(svc, pool) => {
                    let r = a.allocate_from_pool(&svc, pool);
                    if r.is_ok() { sharing.insert(svc.key.clone(), (svc.sharing.clone(), svc.ports.clone())); }
                    else { prop_assert_eq!(holdings(&a), before.clone()); }
                }
                Op::Assign(svc, ips) => {
                    let r = a.assign(&svc, &ips);
                    if r.is_ok() {
                        prop_assert_eq!(a.ips(&svc.key), Some(&ips[..]));
                        sharing.insert(svc.key.clone(), (svc.sharing.clone(), svc.ports.clone()));
                    } else {
                        prop_assert_eq!(holdings(&a), before.clone());
                    }
                }
                Op::Release(key) => {
                    let had = before.get(&key).cloned();
                    prop_assert_eq!(a.unassign(&key), had.is_some());
                    let mut expected = before.clone();
                    expected.remove(&key);
                    prop_assert_eq!(holdings(&a), expected.clone(), "release touches only its service");
                    if let Some((pool, ips)) = had {
                        // Freed exactly the addresses nobody else holds.
                        let still: BTreeSet<IpAddr> = expected.values().flat_map(|(_, i)| i.clone()).collect();
                        for ip in ips {
                            let free = !a.ips.contains_key(&ip);
                            prop_assert_eq!(free, !still.contains(&ip), "{} in {}", ip, pool);
                        }
                    }
                }
                Op::Config(i) => {
                    let released = a.set_pools(&pools(CONFIGS[i]));
                    for k in &released {
                        prop_assert!(before.contains_key(k));
                        prop_assert!(a.ips(k).is_none());
                    }
                    prop_assert_eq!(holdings(&a).len() + released.len(), before.len());
                }
            }
            check_invariants(&a, &sharing)?;
        }
    }
}
