//! The metric families: upstream names, gauges, rendering.

use super::*;
use crate::config::Pool;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[test]
fn allocator_gauges_use_upstream_names_and_drop_removed_pools() {
    let registry = Registry::new();
    let m = AllocatorMetrics::new(&registry);
    let mut pools = BTreeMap::new();
    pools.insert(
        "p".to_owned(),
        Pool {
            name: "p".into(),
            cidrs: vec![
                "10.0.0.0/30".parse().expect("cidr"),
                "fc00::/127".parse().expect("cidr"),
            ],
            auto_assign: true,
            avoid_buggy_ips: false,
            allocation: None,
            aggregation_floor: (30, 127),
        },
    );
    let mut a = Allocator::new();
    a.set_pools(&pools);
    a.allocate(&crate::allocator::ServiceInfo::new("ns", "s"))
        .expect("ip");
    m.update(&a, &[]);
    let text = render(&registry);
    assert!(
        text.contains("metallb_allocator_addresses_total{pool=\"p\"} 6"),
        "{text}"
    );
    assert!(
        text.contains("metallb_allocator_ipv4_addresses_total{pool=\"p\"} 4"),
        "{text}"
    );
    assert!(
        text.contains("metallb_allocator_ipv6_addresses_total{pool=\"p\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("metallb_allocator_addresses_in_use_total{pool=\"p\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("metallb_allocator_ipv4_addresses_in_use_total{pool=\"p\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("metallb_allocator_ipv6_addresses_in_use_total{pool=\"p\"} 0"),
        "{text}"
    );
    a.set_pools(&BTreeMap::new());
    m.update(&a, &["p".to_owned()]);
    assert!(!render(&registry).contains("pool=\"p\""));
}

/// Upstream's `updatePoolStats`/`poolCount`: gauges never exceed
/// int64's maximum, however large the pool (upstream's int64 counts).
#[test]
fn update_pool_stats_clamps_to_int64() {
    let registry = Registry::new();
    let m = AllocatorMetrics::new(&registry);
    let pool = |name: &str, cidrs: &[&str]| Pool {
        name: name.into(),
        cidrs: cidrs.iter().map(|c| c.parse().expect("cidr")).collect(),
        auto_assign: true,
        avoid_buggy_ips: false,
        allocation: None,
        aggregation_floor: (24, 32),
    };
    let mut pools = BTreeMap::new();
    pools.insert(
        "huge".to_owned(),
        pool("huge", &["10.0.0.0/24", "fc00::/32", "fd00::/48"]),
    );
    let mut a = Allocator::new();
    a.set_pools(&pools);
    m.update(&a, &[]);
    let max = i64::MAX as f64;
    for g in [&m.total, &m.total_v6] {
        assert_eq!(g.with_label_values(&["huge"]).get(), max);
    }
    assert_eq!(m.total_v4.with_label_values(&["huge"]).get(), 256.0);
}

/// Upstream's native `sendUpdates`: one per announced prefix, one per
/// batch of withdrawals.
#[test]
fn bgp_updates_counted_as_upstream() {
    assert_eq!(upstream_updates(0, 0), 0);
    assert_eq!(upstream_updates(3, 0), 3);
    assert_eq!(upstream_updates(0, 5), 1);
    assert_eq!(upstream_updates(2, 5), 3);
}

#[rstest::rstest]
#[case::before_the_first_beat(None, 1000, None)]
#[case::fresh(Some(0), 30, None)]
#[case::at_the_bound(Some(0), 60, None)]
#[case::stalled(Some(0), 61, Some(61))]
fn healthz_fails_once_the_loop_stalls(
    #[case] last: Option<u64>,
    #[case] now: u64,
    #[case] want: Option<u64>,
) {
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(
        stalled_for(last.map(at), at(now), STALL_BOUND),
        want.map(Duration::from_secs)
    );
}

#[test]
fn k8s_client_metrics_names() {
    let registry = Registry::new();
    let m = K8sClientMetrics::new(&registry);
    m.updates.inc();
    m.config_loaded.set(1);
    let text = render(&registry);
    for name in [
        "metallb_k8s_client_updates_total 1",
        "metallb_k8s_client_update_errors_total 0",
        "metallb_k8s_client_config_loaded_bool 1",
        "metallb_k8s_client_config_stale_bool 0",
    ] {
        assert!(text.contains(name), "{name} missing in {text}");
    }
}
