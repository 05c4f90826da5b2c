//! `cargo xtask bench allocator`: allocation and release cost of the
//! allocator against a naive linear-scan allocator (what upstream does:
//! walk the CIDR from its first address and check each one), measured in
//! the same run, over a /16 IPv4 pool and a /112 IPv6 pool.
//!
//! Services come in pairs sharing one address (same allow-shared-ip key,
//! ports 80 and 443), so 100k services fit the 65,536 addresses of each
//! pool and the shared-address path is measured too.
//!
//! For each size N: our allocator fills the pool with N services (timed),
//! then both allocators, holding the same N - 1,000 services, allocate and
//! then release the last 1,000 (timed): the per-operation cost at that
//! fill level, as a ratio. (Filling the naive one through its own scan
//! would take minutes at 100k: it is filled directly instead.)
//!
//! Run by `cargo test` (no `--bench` argument) it does a small smoke round
//! so the benchmark is checked to work without taking long; either way it
//! fails when the two allocators pick different addresses.

use metallb_rs::allocator::{
    Allocator, FamilyPolicy, Port, ServiceFamily, ServiceInfo, SharingKey,
};
use metallb_rs::config::Pool;
use metallb_rs::service::ServiceKey;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::Instant;

/// The service of index `i`: pairs share key `k{i/2}` on ports 80 / 443.
fn service(i: usize, family: ServiceFamily) -> ServiceInfo {
    let mut s =
        ServiceInfo::new("bench", &format!("s{i}")).with_family(family, FamilyPolicy::SingleStack);
    s.sharing = SharingKey::new(&format!("k{}", i / 2), "");
    s.ports = vec![Port::new("TCP", if i.is_multiple_of(2) { 80 } else { 443 })];
    s
}

/// One used address: (sharing key, (protocol, port)s in use, users).
type Use = (String, Vec<(String, i32)>, usize);

/// The naive allocator: a map of used addresses, scanned from the start of
/// the CIDR on every allocation.
struct Naive {
    first: u128,
    size: u128,
    v4: bool,
    used: HashMap<IpAddr, Use>,
    held: HashMap<ServiceKey, IpAddr>,
}

fn to_ip(n: u128, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::from(std::net::Ipv4Addr::from(
            u32::try_from(n).unwrap_or(u32::MAX),
        ))
    } else {
        IpAddr::from(std::net::Ipv6Addr::from(n))
    }
}

impl Naive {
    fn new(cidr: ipnet::IpNet) -> Self {
        let first = match cidr.network() {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        };
        Self {
            first,
            size: 1u128 << (cidr.max_prefix_len() - cidr.prefix_len()),
            v4: cidr.addr().is_ipv4(),
            used: HashMap::new(),
            held: HashMap::new(),
        }
    }

    fn fits(&self, ip: &IpAddr, s: &ServiceInfo) -> bool {
        match self.used.get(ip) {
            None => true,
            Some((key, ports, _)) => {
                *key == s.sharing.sharing
                    && !key.is_empty()
                    && s.ports
                        .iter()
                        .all(|p| !ports.contains(&(p.protocol.clone(), p.port)))
            }
        }
    }

    fn take(&mut self, ip: IpAddr, s: &ServiceInfo) {
        let entry = self
            .used
            .entry(ip)
            .or_insert_with(|| (s.sharing.sharing.clone(), Vec::new(), 0));
        entry
            .1
            .extend(s.ports.iter().map(|p| (p.protocol.clone(), p.port)));
        entry.2 += 1;
        self.held.insert(s.key.clone(), ip);
    }

    fn allocate(&mut self, s: &ServiceInfo) -> Option<IpAddr> {
        let ip = (0..self.size)
            .map(|off| to_ip(self.first + off, self.v4))
            .find(|ip| self.fits(ip, s))?;
        self.take(ip, s);
        Some(ip)
    }

    fn release(&mut self, key: &ServiceKey) {
        if let Some(ip) = self.held.remove(key)
            && let Some(entry) = self.used.get_mut(&ip)
        {
            entry.2 -= 1;
            if entry.2 == 0 {
                self.used.remove(&ip);
            }
        }
    }
}

struct Row {
    label: &'static str,
    n: usize,
    fill_ns: f64,
    ours_alloc_ns: f64,
    ours_release_ns: f64,
    naive_alloc_ns: f64,
    naive_release_ns: f64,
}

fn ns_per(start: Instant, ops: usize) -> f64 {
    start.elapsed().as_nanos() as f64 / ops.max(1) as f64
}

fn measure(label: &'static str, cidr: &str, family: ServiceFamily, n: usize, window: usize) -> Row {
    let cidr: ipnet::IpNet = cidr.parse().expect("cidr");
    let pools = BTreeMap::from([(
        "bench".to_owned(),
        Pool {
            name: "bench".into(),
            cidrs: vec![cidr],
            auto_assign: true,
            avoid_buggy_ips: false,
            allocation: None,
            aggregation_floor: (32, 128),
        },
    )]);
    let services: Vec<ServiceInfo> = (0..n).map(|i| service(i, family)).collect();

    // Ours: fill completely, timed.
    let mut ours = Allocator::new();
    ours.set_pools(&pools);
    let start = Instant::now();
    for s in &services {
        ours.allocate(s).expect("room in the pool");
    }
    let fill_ns = ns_per(start, n);
    // The last `window` services: release, then allocate again, timed.
    let tail = &services[n - window..];
    let start = Instant::now();
    for s in tail {
        ours.unassign(&s.key);
    }
    let ours_release_ns = ns_per(start, window);
    let start = Instant::now();
    for s in tail {
        ours.allocate(s).expect("room in the pool");
    }
    let ours_alloc_ns = ns_per(start, window);

    // Naive: holding what ours held before the window, filled directly.
    let mut naive = Naive::new(cidr);
    for s in &services[..n - window] {
        let ip = ours
            .ips(&s.key)
            .and_then(|i| i.first().copied())
            .expect("allocated");
        naive.take(ip, s);
    }
    let start = Instant::now();
    for s in tail {
        naive.allocate(s).expect("room in the pool");
    }
    let naive_alloc_ns = ns_per(start, window);
    // Both are to pick exactly the same addresses: the ratio compares the
    // same work, and the scan is upstream's rule (lowest address that
    // fits), so this also checks ours follows it.
    for s in tail {
        let theirs = naive.held.get(&s.key).copied();
        let mine = ours.ips(&s.key).and_then(|i| i.first().copied());
        assert_eq!(
            mine, theirs,
            "{label}: {} got {mine:?} from ours, {theirs:?} from the linear scan",
            s.key
        );
    }
    let start = Instant::now();
    for s in tail {
        naive.release(&s.key);
    }
    let naive_release_ns = ns_per(start, window);
    Row {
        label,
        n,
        fill_ns,
        ours_alloc_ns,
        ours_release_ns,
        naive_alloc_ns,
        naive_release_ns,
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (sizes, window): (&[usize], usize) = if full {
        (&[10_000, 100_000], 1_000)
    } else {
        (&[2_000], 200)
    };
    println!(
        "allocator: allocate/release at fill level N (pairs of services share an address), ours vs naive linear scan{}",
        if full {
            ""
        } else {
            " [smoke run: cargo xtask bench allocator for the real one]"
        }
    );
    println!(
        "{:<10} {:>7} {:>12} {:>12} {:>12} {:>14} {:>14} {:>8}",
        "pool",
        "N",
        "fill ns/op",
        "alloc ns/op",
        "free ns/op",
        "naive alloc",
        "naive free",
        "ratio"
    );
    for &n in sizes {
        for (label, cidr, family) in [
            ("IPv4 /16", "10.0.0.0/16", ServiceFamily::V4),
            ("IPv6 /112", "fc00::/112", ServiceFamily::V6),
        ] {
            let r = measure(label, cidr, family, n, window);
            println!(
                "{:<10} {:>7} {:>12.0} {:>12.0} {:>12.0} {:>14.0} {:>14.0} {:>7.0}x",
                r.label,
                r.n,
                r.fill_ns,
                r.ours_alloc_ns,
                r.ours_release_ns,
                r.naive_alloc_ns,
                r.naive_release_ns,
                r.naive_alloc_ns / r.ours_alloc_ns.max(1.0),
            );
        }
    }
    println!("ratio = naive allocation ns/op / ours, same run, same addresses held");
}
