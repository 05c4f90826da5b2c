//! Upstream's allocator behaviours (internal/allocator's tests, pool
//! selection and sharing rules) as tables: each row builds a fresh allocator from a pool list,
//! runs setup steps that must all succeed, then one step whose output is
//! checked. Steps are one line each:
//!
//! ```text
//! assign KEY IP[,IP] [opts]     Assign          -> ok | error: ...
//! alloc KEY [opts]              Allocate        -> IPs (pool P) | error: ...
//! from POOL KEY [opts]          AllocateFromPool
//! extra POOL KEY IP [opts]      AllocateFromPoolForAdditionalFamily
//! release KEY                   Unassign        -> released | nothing
//! counters POOL                 -> v4 ASSIGNED/AVAILABLE v6 ASSIGNED/AVAILABLE
//! ```
//!
//! opts: `v6`, `dual`, `prefer`, `require`, `primary=v6`, `share=K`,
//! `backend=B`, `ports=tcp/80,udp/53`, `label:K=V`, `nslabel:K=V`.
//! A key is `ns/name` (a bare name lives in `default`).

use super::*;
use crate::api::v1beta1::IPAddressPool;
use crate::config::{Config, Options, Resources};
use crate::service_key::ServiceKey;
use rstest::rstest;

/// Pools from lines `name: ADDR... [avoidBuggy] [manual] [priority=N]
/// [ns=a,b] [nssel=K=V] [svcsel=K=V]`, through the real config builder;
/// lines `namespace NAME K=V` are the cluster's namespaces (what
/// namespaceSelectors are resolved against).
fn pools(spec: &str) -> BTreeMap<String, Pool> {
    let mut res = Resources::default();
    for line in spec.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("namespace ") {
            let (name, label) = rest.split_once(' ').expect("namespace NAME K=V");
            let (k, v) = label.split_once('=').expect("K=V");
            res.namespaces.push(
                serde_json::from_value(serde_json::json!({
                    "metadata": { "name": name, "labels": { k: v } },
                }))
                .expect("namespace"),
            );
            continue;
        }
        let (name, rest) = line.split_once(':').expect("name: ...");
        let mut addresses = Vec::new();
        let mut spec = serde_json::json!({});
        let mut alloc = serde_json::Map::new();
        for word in rest.split_whitespace() {
            if word == "avoidBuggy" {
                spec["avoidBuggyIPs"] = true.into();
            } else if word == "manual" {
                spec["autoAssign"] = false.into();
            } else if let Some(p) = word.strip_prefix("priority=") {
                alloc.insert(
                    "priority".into(),
                    p.parse::<i64>().expect("priority").into(),
                );
            } else if let Some(ns) = word.strip_prefix("ns=") {
                alloc.insert(
                    "namespaces".into(),
                    ns.split(',').collect::<Vec<_>>().into(),
                );
            } else if let Some(sel) = word.strip_prefix("nssel=") {
                let (k, v) = sel.split_once('=').expect("K=V");
                alloc.insert(
                    "namespaceSelectors".into(),
                    serde_json::json!([{ "matchLabels": { k: v } }]),
                );
            } else if let Some(sel) = word.strip_prefix("svcsel=") {
                let (k, v) = sel.split_once('=').expect("K=V");
                alloc.insert(
                    "serviceSelectors".into(),
                    serde_json::json!([{ "matchLabels": { k: v } }]),
                );
            } else {
                addresses.push(word.to_owned());
            }
        }
        spec["addresses"] = addresses.into();
        if !alloc.is_empty() {
            spec["serviceAllocation"] = alloc.into();
        }
        let pool: IPAddressPool = serde_json::from_value(serde_json::json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": { "name": name.trim(), "namespace": "metallb-system" },
            "spec": spec,
        }))
        .expect("pool object");
        res.pools.push(pool);
    }
    Config::build(&res, &Options::default())
        .expect("valid pools")
        .pools
}

fn service(key: &str, opts: &[&str]) -> ServiceInfo {
    let (ns, name) = key.split_once('/').unwrap_or(("default", key));
    let mut svc = ServiceInfo::new(ns, name);
    for opt in opts {
        match *opt {
            "v6" => {
                svc.family = ServiceFamily::V6;
                svc.primary = Family::V6;
            }
            "dual" => svc.family = ServiceFamily::Dual,
            "prefer" => svc.policy = FamilyPolicy::PreferDualStack,
            "require" => svc.policy = FamilyPolicy::RequireDualStack,
            "primary=v6" => svc.primary = Family::V6,
            o if o.starts_with("share=") => svc.sharing.sharing = o[6..].to_owned(),
            o if o.starts_with("backend=") => svc.sharing.backend = o[8..].to_owned(),
            o if o.starts_with("ports=") => {
                svc.ports = o[6..]
                    .split(',')
                    .map(|p| {
                        let (proto, n) = p.split_once('/').expect("proto/port");
                        Port::new(&proto.to_uppercase(), n.parse().expect("port"))
                    })
                    .collect();
            }
            o if o.starts_with("label:") => {
                let (k, v) = o[6..].split_once('=').expect("K=V");
                svc.labels.insert(k.into(), v.into());
            }
            o if o.starts_with("nslabel:") => {
                let (k, v) = o[8..].split_once('=').expect("K=V");
                svc.namespace_labels.insert(k.into(), v.into());
            }
            other => panic!("unknown option {other:?}"),
        }
    }
    svc
}

fn show_ips(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs one step and describes its outcome.
fn step(a: &mut Allocator, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let got = |a: &Allocator, key: &ServiceKey, r: Result<Vec<IpAddr>, AllocError>| match r {
        Ok(ips) => format!("{} (pool {})", show_ips(&ips), a.pool(key).unwrap_or("?")),
        Err(e) => format!("error: {e}"),
    };
    match words.as_slice() {
        ["assign", key, ips, opts @ ..] => {
            let svc = service(key, opts);
            let ips: Vec<IpAddr> = ips.split(',').map(|i| i.parse().expect("ip")).collect();
            match a.assign(&svc, &ips) {
                Ok(()) => "ok".into(),
                Err(e) => format!("error: {e}"),
            }
        }
        ["alloc", key, opts @ ..] => {
            let svc = service(key, opts);
            let r = a.allocate(&svc);
            got(a, &svc.key, r)
        }
        ["from", pool, key, opts @ ..] => {
            let svc = service(key, opts);
            let r = a.allocate_from_pool(&svc, pool);
            got(a, &svc.key, r)
        }
        ["extra", pool, key, ip, opts @ ..] => {
            let svc = service(key, opts);
            match a.allocate_additional_family(&svc, ip.parse().expect("ip"), pool) {
                Ok(ip) => ip.to_string(),
                Err(e) => format!("error: {e}"),
            }
        }
        ["release", key] => {
            let key = service(key, &[]).key;
            if a.unassign(&key) {
                "released"
            } else {
                "nothing"
            }
            .into()
        }
        ["counters", pool] => {
            let c = a.counters(pool).expect("known pool");
            format!(
                "v4 {}/{} v6 {}/{}",
                c.assigned_ipv4, c.available_ipv4, c.assigned_ipv6, c.available_ipv6
            )
        }
        _ => panic!("bad step {line:?}"),
    }
}

/// Fresh allocator over `pool_spec`, `setup` steps (each must not fail),
/// then `last`, whose output is returned.
fn run(pool_spec: &str, setup: &str, last: &str) -> String {
    let mut a = Allocator::new();
    assert!(a.set_pools(&pools(pool_spec)).is_empty());
    for line in setup.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let out = step(&mut a, line);
        assert!(
            !out.starts_with("error"),
            "setup step {line:?} failed: {out}"
        );
    }
    step(&mut a, last)
}

fn check(pool_spec: &str, setup: &str, last: &str, expected: &str) {
    let out = run(pool_spec, setup, last);
    if let Some(prefix) = expected.strip_suffix("...") {
        assert!(
            out.starts_with(prefix),
            "{last}: got {out:?}, want {expected:?}"
        );
    } else {
        assert_eq!(out, expected, "{last}");
    }
}

const ASSIGN_POOLS: &str = "
    test: 1.2.3.4/31 1000::4/127
    test2: 1.2.4.0/24 1000::4:0/120 avoidBuggy
    test3: 1.2.5.0/24 1000::5:0/120 avoidBuggy ns=test-ns1
    test4: 1.2.6.0/24 1000::6:0/120 avoidBuggy svcsel=team=metallb
    test5: 1.2.7.0/24 1000::7:0/120 avoidBuggy priority=20 ns=test-ns1 svcsel=team=metallb
    test6: 1.2.8.0/24 1000::9:0/120 avoidBuggy priority=20 ns=test-ns2 svcsel=foo=bar
";

#[rstest]
#[case::assign("", "assign s1 1.2.3.4", "ok")]
#[case::idempotent("assign s1 1.2.3.4", "assign s1 1.2.3.4", "ok")]
#[case::cannot_grab_used("assign s1 1.2.3.4", "assign s2 1.2.3.4",
    r#"error: can't change sharing key for "default/s2", address also in use by default/s1 (existing service does not allow sharing)"#)]
#[case::freed_ip_is_free("assign s1 1.2.3.4\nrelease s1", "assign s2 1.2.3.4", "ok")]
#[case::buggy_zero(
    "",
    "assign s3 1.2.4.0",
    r#"error: ["1.2.4.0"] is not allowed in config..."#
)]
#[case::buggy_255(
    "",
    "assign s3 1.2.4.255",
    "error: [\"1.2.4.255\"] is not allowed in config..."
)]
#[case::not_in_any_pool(
    "",
    "assign s3 9.9.9.9",
    "error: [\"9.9.9.9\"] is not allowed in config: no IPAddressPool contains it"
)]
#[case::change_key_in_place(
    "assign s4 1.2.4.3 ports=tcp/80 share=sharing backend=b",
    "assign s4 1.2.4.3 ports=tcp/80 share=share backend=b",
    "ok"
)]
#[case::port_conflict(
    "assign s4 1.2.4.3 ports=tcp/80 share=share",
    "assign s3 1.2.4.3 ports=tcp/80 share=share",
    r#"error: port TCP/80 is already in use on "1.2.4.3""#
)]
#[case::wrong_key("assign s4 1.2.4.3 ports=tcp/80 share=share", "assign s3 1.2.4.3 ports=tcp/443 share=other",
    r#"error: can't change sharing key for "default/s3", address also in use by default/s4 (sharing key "other" does not match existing sharing key "share")"#)]
#[case::wrong_backend(
    "assign s4 1.2.4.3 ports=tcp/80 share=share backend=a",
    "assign s3 1.2.4.3 ports=tcp/443 share=share backend=b",
    "error: can't change sharing key for \"default/s3\", address also in use by default/s4 (backend key..."
)]
#[case::shares(
    "assign s4 1.2.4.3 ports=tcp/80 share=share",
    "assign s3 1.2.4.3 ports=tcp/443 share=share",
    "ok"
)]
#[case::change_ports_keep_ip(
    "assign s4 1.2.4.3 ports=tcp/80 share=share\nassign s3 1.2.4.3 ports=tcp/443 share=share",
    "assign s3 1.2.4.3 ports=udp/53 share=share",
    "ok"
)]
#[case::cannot_change_shared_key(
    "assign s4 1.2.4.3 ports=tcp/80 share=share\nassign s3 1.2.4.3 ports=tcp/443 share=share",
    "assign s3 1.2.4.3 ports=tcp/443 share=other",
    "error: can't change sharing key..."
)]
#[case::v6_assign("", "assign s1 1000::4", "ok")]
#[case::v6_taken(
    "assign s1 1000::4",
    "assign s2 1000::4",
    "error: can't change sharing key..."
)]
#[case::v6_no_buggy_rule("", "assign s1 1000::4:ff", "ok")]
#[case::dual("", "assign s1 1.2.3.4,1000::4", "ok")]
#[case::dual_across_pools(
    "",
    "assign s1 1.2.4.5,1000::4",
    "error: [\"1.2.4.5\" \"1000::4\"] is not allowed in config..."
)]
#[case::same_family_twice(
    "",
    "assign s1 1.2.3.4,1.2.3.5",
    "error: \"1.2.3.4\" \"1.2.3.5\" has the same family"
)]
#[case::three_ips(
    "",
    "assign s1 1.2.3.4,1.2.3.5,1000::4",
    "error: a service takes one or two addresses, not 3"
)]
#[case::pinned_same_ns("", "assign test-ns1/s1 1.2.5.10", "ok")]
#[case::pinned_other_ns(
    "",
    "assign other/s1 1.2.5.10",
    "error: pool test3 not compatible for ip assignment..."
)]
#[case::pinned_label("", "assign other/s1 1.2.6.10 label:team=metallb", "ok")]
#[case::pinned_other_label(
    "",
    "assign other/s1 1.2.6.10 label:team=red",
    "error: pool test4 not compatible..."
)]
#[case::pinned_ns_and_label("", "assign test-ns1/s1 1.2.7.10 label:team=metallb", "ok")]
#[case::pinned_ns_wrong_label(
    "",
    "assign test-ns2/s1 1.2.8.10 label:team=metallb",
    "error: pool test6 not compatible..."
)]
#[case::pinned_label_wrong_ns(
    "",
    "assign other/s1 1.2.8.10 label:foo=bar",
    "error: pool test6 not compatible..."
)]
fn assignment(#[case] setup: &str, #[case] last: &str, #[case] expected: &str) {
    check(ASSIGN_POOLS, setup, last, expected);
}

const FROM_POOLS: &str = "
    not_this_one: 192.168.0.0/16 fc00::1:0/112
    test: 1.2.3.4/31 1.2.3.10/31 1000::/127 2000::/127
    test-v4: 1.2.3.20/31 1.2.3.30/31
    test-v6: 3000::/127 4000::/127
";

const FOUR_V4: &str = "from test s1\nfrom test s2\nfrom test s3\nfrom test s4";

#[rstest]
#[case::first("", "from test s1", "1.2.3.4 (pool test)")]
#[case::declared_order_then_lowest(
    "from test s1\nfrom test s2",
    "from test s3",
    "1.2.3.10 (pool test)"
)]
#[case::exhausted(
    FOUR_V4,
    "from test s5",
    "error: no available IPs in pool \"test\" for ipv4 IPFamily"
)]
#[case::freed_reused(&format!("{FOUR_V4}\nrelease s2"), "from test s5", "1.2.3.5 (pool test)")]
#[case::sharing_when_full(&format!("{FOUR_V4}\nrelease s1\nfrom test s5 share=share ports=tcp/80"), "from test s6 share=share ports=tcp/443", "1.2.3.4 (pool test)")]
#[case::shared_ip_before_free(
    "from test s1 share=k ports=tcp/80",
    "from test s2 share=k ports=tcp/443",
    "1.2.3.4 (pool test)"
)]
#[case::shared_ip_port_clash_skipped(
    "from test s1 share=k ports=tcp/80",
    "from test s2 share=k ports=tcp/80",
    "1.2.3.5 (pool test)"
)]
#[case::v6("", "from test s1 v6", "1000:: (pool test)")]
#[case::v6_exhausted(
    "from test s1 v6\nfrom test s2 v6\nfrom test s3 v6\nfrom test s4 v6",
    "from test s5 v6",
    "error: no available IPs in pool \"test\" for ipv6 IPFamily"
)]
#[case::wrong_family_held(
    "from test s1",
    "from test s1 v6",
    "error: IP for wrong family assigned ipv4 service family ipv6"
)]
#[case::require_dual("", "from test s1 dual require", "1.2.3.4,1000:: (pool test)")]
#[case::require_dual_exhausted(
    "from test s1 dual require\nfrom test s2 dual require\nfrom test s3 dual require\nfrom test s4 dual require",
    "from test s5 dual require",
    "error: no available IPs in pool \"test\" for dual IPFamily"
)]
#[case::require_dual_v4_pool(
    "",
    "from test-v4 s1 dual require",
    "error: no available IPs in pool \"test-v4\" for dual IPFamily"
)]
#[case::prefer_dual_both("", "from test s1 dual prefer", "1.2.3.4,1000:: (pool test)")]
#[case::prefer_dual_v4_only_pool("", "from test-v4 s2 dual prefer", "1.2.3.20 (pool test-v4)")]
#[case::prefer_dual_v6_only_pool("", "from test-v6 s3 dual prefer", "3000:: (pool test-v6)")]
#[case::unknown_pool(
    "",
    "from nonexistentpool s5",
    "error: unknown pool \"nonexistentpool\""
)]
fn allocate_from_pool(#[case] setup: &str, #[case] last: &str, #[case] expected: &str) {
    check(FROM_POOLS, setup, last, expected);
}

const AUTO_POOLS: &str = "
    test1: 1.2.3.4/31 1000::4/127
    test2: 1.2.3.10/31 1000::10/127
";

#[rstest]
#[case::first_pool_by_name("", "alloc s1", "1.2.3.4 (pool test1)")]
#[case::next_pool_when_full("alloc s1\nalloc s2", "alloc s3", "1.2.3.10 (pool test2)")]
#[case::all_full("alloc s1\nalloc s2\nalloc s3\nalloc s4", "alloc s5",
    r#"error: no available IPs (pool "test1": no available IPs in pool "test1" for ipv4 IPFamily; pool "test2": no available IPs in pool "test2" for ipv4 IPFamily)"#)]
#[case::sharing_across_full_pools(
    "alloc s1\nalloc s2\nalloc s3\nalloc s4 share=k ports=tcp/80",
    "alloc s5 share=k ports=tcp/443",
    "1.2.3.11 (pool test2)"
)]
#[case::already_allocated_is_stable("alloc s1\nalloc s2", "alloc s1", "1.2.3.4 (pool test1)")]
#[case::v6("", "alloc s1 v6", "1000::4 (pool test1)")]
#[case::dual_require("", "alloc s1 dual require", "1.2.3.4,1000::4 (pool test1)")]
#[case::prefer_falls_back_per_family(
    "alloc a v6\nalloc b v6\nalloc c v6\nalloc d v6",
    "alloc s1 dual prefer",
    "1.2.3.4 (pool test1)"
)]
fn allocate(#[case] setup: &str, #[case] last: &str, #[case] expected: &str) {
    check(AUTO_POOLS, setup, last, expected);
}

const PINNED_POOLS: &str = "
    general: 10.0.0.0/30
    manual: 10.0.1.0/30 manual
    ns-a: 10.0.2.0/30 ns=a
    ns-sel: 10.0.3.0/30 nssel=team=x
    by-label: 10.0.4.0/30 svcsel=app=web
    prio-10: 10.0.5.0/30 priority=10 ns=b
    prio-5: 10.0.6.0/30 priority=5 ns=b
    prio-0: 10.0.7.0/30 ns=b
    namespace x team=x
";

/// `n` allocations of services `NS/s0`... (setup lines).
fn allocs(ns: &str, n: usize) -> String {
    (0..n).map(|i| format!("alloc {ns}/s{i}\n")).collect()
}

#[rstest]
#[case::namespace_listed("", "alloc a/x", "10.0.2.0 (pool ns-a)")]
#[case::namespace_selector("", "alloc x/s nslabel:team=x", "10.0.3.0 (pool ns-sel)")]
#[case::service_selector("", "alloc c/x label:app=web", "10.0.4.0 (pool by-label)")]
#[case::no_pinned_pool_general("", "alloc c/x", "10.0.0.0 (pool general)")]
#[case::priority_lowest_number_first("", "alloc b/x", "10.0.6.0 (pool prio-5)")]
#[case::priority_then_next(&allocs("b", 4), "alloc b/x", "10.0.5.0 (pool prio-10)")]
#[case::priority_zero_last(&allocs("b", 8), "alloc b/x", "10.0.7.0 (pool prio-0)")]
#[case::general_after_pinned_full(&allocs("a", 4), "alloc a/x", "10.0.0.0 (pool general)")]
#[case::manual_never_auto(&allocs("c", 4), "alloc c/x", "error: no available IPs (pool \"general\"...")]
#[case::manual_by_annotation("", "from manual c/x", "10.0.1.0 (pool manual)")]
#[case::annotation_still_checks_compatibility(
    "",
    "from ns-a c/x",
    "error: pool ns-a not compatible for ip assignment..."
)]
#[case::namespace_selector_miss(
    "",
    "from ns-sel c/x nslabel:team=y",
    "error: pool ns-sel not compatible..."
)]
fn pool_selection(#[case] setup: &str, #[case] last: &str, #[case] expected: &str) {
    check(PINNED_POOLS, setup, last, expected);
}

/// A pool whose namespaceSelectors select no namespace (upstream's
/// `isPoolCompatibleWithService` with an empty resolved namespace list,
/// and `pinnedPoolsForService`): no namespace restriction for explicit
/// requests, pinned to nobody.
#[rstest]
#[case::not_pinned("", "alloc c/x", "10.0.0.0 (pool general)")]
#[case::pool_annotation_served("", "from ns-none c/x", "10.0.3.0 (pool ns-none)")]
#[case::requested_ip_served("", "assign c/x 10.0.3.2", "ok")]
#[case::service_selector_still_applies("", "from both c/x", "error: pool both not compatible...")]
#[case::service_selector_pins("", "alloc c/x label:app=web", "10.0.4.0 (pool both)")]
fn is_pool_compatible_with_service_unmatched_namespace_selectors(
    #[case] setup: &str,
    #[case] last: &str,
    #[case] expected: &str,
) {
    check(
        "general: 10.0.0.0/30\nns-none: 10.0.3.0/30 nssel=team=nobody\nboth: 10.0.4.0/30 nssel=team=nobody svcsel=app=web\nnamespace c team=x",
        setup,
        last,
        expected,
    );
}

/// Negative priorities are accepted, as upstream accepts them, and sort
/// before positive ones (upstream's `sortPools` leaves them unordered).
#[rstest]
#[case::negative_first("", "alloc b/x", "10.0.9.0 (pool neg)")]
#[case::then_positive(&allocs("b", 4), "alloc b/x", "10.0.6.0 (pool prio-5)")]
fn sort_pools_negative_priority(#[case] setup: &str, #[case] last: &str, #[case] expected: &str) {
    check(
        "prio-5: 10.0.6.0/30 priority=5 ns=b\nneg: 10.0.9.0/30 priority=-3 ns=b",
        setup,
        last,
        expected,
    );
}

#[rstest]
#[case::serves_every_namespace("", "alloc c/x", "10.0.8.0 (pool prio-only)")]
#[case::before_priority_zero_pins("", "alloc b/x", "10.0.8.0 (pool prio-only)")]
#[case::then_general(&allocs("c", 4), "alloc c/x", "10.0.0.0 (pool general)")]
fn priority_only_allocation(#[case] setup: &str, #[case] last: &str, #[case] expected: &str) {
    check(
        "general: 10.0.0.0/30\nprio-0: 10.0.7.0/30 ns=b\nprio-only: 10.0.8.0/30 priority=50",
        setup,
        last,
        expected,
    );
}

#[test]
fn no_pool_serves_says_so() {
    check(
        "pinned: 10.0.0.0/30 ns=a",
        "",
        "alloc c/x",
        "error: no available IPs: no IPAddressPool serves this service...",
    );
}

#[test]
fn additional_family_tops_up_from_the_same_pool() {
    // Only v6 left in "dual" at first; then a v4 frees up.
    let spec = "dual: 10.0.0.0/32 fc00::/127";
    let mut a = Allocator::new();
    a.set_pools(&pools(spec));
    assert_eq!(step(&mut a, "alloc hog"), "10.0.0.0 (pool dual)");
    assert_eq!(step(&mut a, "alloc s1 dual prefer"), "fc00:: (pool dual)");
    assert_eq!(
        step(&mut a, "extra dual s1 fc00:: dual prefer"),
        "error: no available IPs in pool \"dual\" for ipv4 IPFamily"
    );
    assert_eq!(step(&mut a, "release hog"), "released");
    assert_eq!(step(&mut a, "extra dual s1 fc00:: dual prefer"), "10.0.0.0");
    assert_eq!(
        a.ips(&ServiceKey::new("default", "s1")),
        Some(
            &[
                "fc00::".parse().expect("ip"),
                "10.0.0.0".parse().expect("ip")
            ][..]
        )
    );
}

#[rstest]
#[case::empty("p: 10.0.0.0/30 fc00::/126", "", "v4 0/4 v6 0/4")]
#[case::one_each("p: 10.0.0.0/30 fc00::/126", "alloc s1 dual require", "v4 1/3 v6 1/3")]
#[case::shared_counts_once(
    "p: 10.0.0.0/30",
    "alloc s1 share=k ports=tcp/80\nalloc s2 share=k ports=tcp/443",
    "v4 1/3 v6 0/0"
)]
#[case::avoid_buggy_per_slash24("p: 10.0.0.0/23 avoidBuggy", "", "v4 0/508 v6 0/0")]
#[case::avoid_buggy_small_range("p: 10.0.0.250-10.0.1.3 avoidBuggy", "", "v4 0/8 v6 0/0")]
#[case::huge_v6_saturates(
    "p: fc00::/64 fd00::/8",
    "alloc s1 v6",
    "v4 0/0 v6 1/9223372036854775807"
)]
#[case::released_frees("p: 10.0.0.0/30", "alloc s1\nalloc s2\nrelease s1", "v4 1/3 v6 0/0")]
fn counting(#[case] spec: &str, #[case] setup: &str, #[case] expected: &str) {
    check(spec, setup, "counters p", expected);
}

#[test]
fn avoid_buggy_skips_zero_and_255_when_picking() {
    check(
        "p: 10.0.0.254/31 10.0.1.0/30 avoidBuggy",
        "alloc s1",
        "alloc s2",
        "10.0.1.1 (pool p)",
    );
}

#[test]
fn config_change_remaps_and_releases() {
    let mut a = Allocator::new();
    a.set_pools(&pools("old: 10.0.0.0/24\nother: 10.0.1.0/24"));
    assert_eq!(step(&mut a, "alloc s1"), "10.0.0.0 (pool old)");
    assert_eq!(step(&mut a, "from other s2"), "10.0.1.0 (pool other)");
    // Pool renamed (same addresses): the allocation follows; "other"
    // removed: s2 is released and reported.
    let released = a.set_pools(&pools("renamed: 10.0.0.0/24"));
    assert_eq!(released, ["default/s2"]);
    assert_eq!(a.pool(&ServiceKey::new("default", "s1")), Some("renamed"));
    assert_eq!(step(&mut a, "counters renamed"), "v4 1/255 v6 0/0");
    // avoidBuggyIPs switched on: 10.0.0.0 is no longer usable.
    let released = a.set_pools(&pools("renamed: 10.0.0.0/24 avoidBuggy"));
    assert_eq!(released, ["default/s1"]);
    assert_eq!(step(&mut a, "counters renamed"), "v4 0/254 v6 0/0");
}

#[test]
fn sharing_survives_a_config_change() {
    let mut a = Allocator::new();
    a.set_pools(&pools("p: 10.0.0.0/30"));
    step(&mut a, "alloc s1 share=k ports=tcp/80");
    step(&mut a, "alloc s2 share=k ports=tcp/443");
    assert!(a.set_pools(&pools("p: 10.0.0.0/29")).is_empty());
    assert_eq!(
        a.users_of("10.0.0.0".parse().expect("ip")),
        ["default/s1", "default/s2"]
    );
    assert_eq!(
        step(&mut a, "alloc s3 share=k ports=udp/53"),
        "10.0.0.0 (pool p)"
    );
    assert_eq!(step(&mut a, "counters p"), "v4 1/7 v6 0/0");
}

#[test]
fn sole_user_may_change_its_key_and_others_then_match_it() {
    let mut a = Allocator::new();
    a.set_pools(&pools("p: 10.0.0.0/30"));
    assert_eq!(
        step(&mut a, "alloc s1 share=a ports=tcp/80"),
        "10.0.0.0 (pool p)"
    );
    assert_eq!(
        step(&mut a, "assign s1 10.0.0.0 share=b ports=tcp/80"),
        "ok"
    );
    assert_eq!(
        step(&mut a, "alloc s2 share=a ports=tcp/443"),
        "10.0.0.1 (pool p)"
    );
    assert_eq!(
        step(&mut a, "alloc s3 share=b ports=tcp/443"),
        "10.0.0.0 (pool p)"
    );
}

mod random_ops;
