//! The controller's per-service decisions (upstream's controller_test.go
//! and its service handling), one fresh allocator per row: pools, services already
//! converged (their writes applied, as the API would), then the service
//! under test, summarised as text.

use super::*;
use crate::config::{Config, Options, Resources};
use crate::event::EventType;
use crate::service::ServiceKey;
use rstest::rstest;

const POOLS: &str = "
- {name: default, spec: {addresses: [10.0.0.0/30, 'fc00::/126']}}
- {name: other, spec: {addresses: [10.0.1.0/30]}}
- {name: manual, spec: {addresses: [10.0.2.0/30], autoAssign: false}}
- {name: v6only, spec: {addresses: ['fc00:1::/126']}}
";

fn allocator(pools: &str) -> Allocator {
    allocator_in(pools, &[])
}

/// `allocator` in a cluster with `namespaces` (name, label key, value).
fn allocator_in(pools: &str, namespaces: &[(&str, &str, &str)]) -> Allocator {
    let items: Vec<serde_json::Value> = serde_yaml::from_str(pools).expect("pools yaml");
    let mut res = Resources::default();
    for (name, k, v) in namespaces {
        res.namespaces.push(
            serde_json::from_value(
                serde_json::json!({ "metadata": { "name": name, "labels": { *k: v } } }),
            )
            .expect("namespace"),
        );
    }
    for mut item in items {
        item["apiVersion"] = "metallb.io/v1beta1".into();
        item["kind"] = "IPAddressPool".into();
        item["metadata"] =
            serde_json::json!({ "name": item["name"].clone(), "namespace": "metallb-system" });
        res.pools.push(serde_json::from_value(item).expect("pool"));
    }
    let mut a = Allocator::new();
    a.set_pools(
        &Config::build(&res, &Options::default())
            .expect("valid")
            .pools,
    );
    a
}

/// A LoadBalancer service `ns/name` with one IPv4 ClusterIP and TCP/80,
/// then `extra` YAML merged on top (JSON merge patch semantics).
fn service(name: &str, extra: &str) -> Service {
    let (ns, name) = name.split_once('/').unwrap_or(("default", name));
    let mut base = serde_json::json!({
        "metadata": { "name": name, "namespace": ns, "resourceVersion": "1" },
        "spec": { "type": "LoadBalancer", "clusterIPs": ["10.96.0.1"], "ports": [{ "port": 80, "protocol": "TCP" }] },
    });
    if !extra.is_empty() {
        let patch: serde_json::Value = serde_yaml::from_str(extra).expect("extra yaml");
        json_patch::merge(&mut base, &patch);
    }
    serde_json::from_value(base).expect("service")
}

/// Applies a decision's write to the service, as the API server would.
fn apply(svc: &mut Service, d: &Decision) {
    let Some(w) = &d.write else { return };
    if let Some(ips) = &w.ingress {
        let status = svc.status.get_or_insert_with(Default::default);
        let ingress = ips
            .iter()
            .map(|ip| LoadBalancerIngress {
                ip: Some(ip.to_string()),
                ..Default::default()
            })
            .collect::<Vec<_>>();
        status.load_balancer = Some(k8s_openapi::api::core::v1::LoadBalancerStatus {
            ingress: (!ingress.is_empty()).then_some(ingress),
        });
    }
    let anns = svc
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    for (k, v) in &w.annotations {
        match v {
            Some(v) => anns.insert(k.clone(), v.clone()),
            None => anns.remove(k),
        };
    }
}

fn summary(d: &Decision) -> String {
    let mut out = Vec::new();
    match &d.write {
        None => out.push("no write".to_owned()),
        Some(w) => {
            if let Some(ips) = &w.ingress {
                out.push(format!(
                    "ingress={}",
                    ips.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
            for (k, v) in &w.annotations {
                out.push(format!("{k}={}", v.as_deref().unwrap_or("<removed>")));
            }
        }
    }
    for e in &d.events {
        out.push(format!("{:?} {}: {}", e.type_, e.reason, e.message));
    }
    if d.reprocess_all {
        out.push("reprocess all".into());
    }
    out.join("\n")
}

/// Converges `before` services (each must succeed), then `svc`.
fn check(before: &[Service], svc: Service, expected: &str) {
    let mut a = allocator(POOLS);
    let labels = BTreeMap::new();
    for s in before {
        let mut s = s.clone();
        let d = set_balancer(&mut a, &s, &labels);
        assert!(
            !d.events.iter().any(|e| e.type_ == EventType::Warning),
            "setup {:?} failed: {}",
            s.metadata.name,
            summary(&d)
        );
        apply(&mut s, &d);
    }
    let d = set_balancer(&mut a, &svc, &labels);
    assert_eq!(summary(&d), expected.trim());
}

const ASSIGNED_POOL: &str = "metallb.io/ip-allocated-from-pool";

#[rstest]
#[case::new_service(
    service("s", ""),
    "
ingress=10.0.0.0
metallb.io/ip-allocated-from-pool=default
Normal IPAllocated: Assigned IP [\"10.0.0.0\"]"
)]
#[case::already_converged(
    service(
        "s",
        "{metadata: {annotations: {metallb.io/ip-allocated-from-pool: default}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.2}]}}}"
    ),
    "no write"
)]
#[case::restart_missing_annotation_only(
    service("s", "{status: {loadBalancer: {ingress: [{ip: 10.0.0.2}]}}}"),
    "metallb.io/ip-allocated-from-pool=default"
)]
#[case::not_load_balancer(
    service(
        "s",
        "{spec: {type: ClusterIP}, metadata: {annotations: {metallb.io/ip-allocated-from-pool: default}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.2}]}}}"
    ),
    "
ingress=
metallb.io/ip-allocated-from-pool=<removed>"
)]
#[case::no_cluster_ip(
    service("s", "{spec: {clusterIPs: null, clusterIP: None}}"),
    "no write"
)]
#[case::ip_no_longer_in_config(service("s", "{status: {loadBalancer: {ingress: [{ip: 192.168.0.1}]}}}"), r#"
ingress=10.0.0.0
metallb.io/ip-allocated-from-pool=default
Normal ClearAssignment: current IP for "default/s" not allowed by config, will attempt for new IP assignment: ["192.168.0.1"] is not allowed in config: no IPAddressPool contains it
Normal IPAllocated: Assigned IP ["10.0.0.0"]"#)]
#[case::pool_annotation(
    service("s", "{metadata: {annotations: {metallb.io/address-pool: other}}}"),
    "
ingress=10.0.1.0
metallb.io/ip-allocated-from-pool=other
Normal IPAllocated: Assigned IP [\"10.0.1.0\"]"
)]
#[case::pool_annotation_changed(
    service(
        "s",
        "{metadata: {annotations: {metallb.io/address-pool: other, metallb.io/ip-allocated-from-pool: default}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.2}]}}}"
    ),
    "
ingress=10.0.1.0
metallb.io/ip-allocated-from-pool=other
Normal IPAllocated: Assigned IP [\"10.0.1.0\"]"
)]
#[case::manual_pool_needs_annotation(
    service("s", "{metadata: {annotations: {metallb.io/address-pool: manual}}}"),
    "
ingress=10.0.2.0
metallb.io/ip-allocated-from-pool=manual
Normal IPAllocated: Assigned IP [\"10.0.2.0\"]"
)]
#[case::unknown_pool(
    service("s", "{metadata: {annotations: {metallb.io/address-pool: nope}}}"),
    r#"
no write
Warning AllocationFailed: Failed to allocate IP for "default/s": unknown pool "nope""#
)]
#[case::spec_load_balancer_ip(
    service("s", "{spec: {loadBalancerIP: 10.0.1.3}}"),
    "
ingress=10.0.1.3
metallb.io/ip-allocated-from-pool=other
Normal IPAllocated: Assigned IP [\"10.0.1.3\"]"
)]
#[case::requested_ip_changed(
    service(
        "s",
        "{spec: {loadBalancerIP: 10.0.1.3}, metadata: {annotations: {metallb.io/ip-allocated-from-pool: default}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.2}]}}}"
    ),
    "
ingress=10.0.1.3
metallb.io/ip-allocated-from-pool=other
Normal IPAllocated: Assigned IP [\"10.0.1.3\"]"
)]
#[case::requested_ip_outside_pools(service("s", "{spec: {loadBalancerIP: 1.1.1.1}}"), r#"
no write
Warning AllocationFailed: Failed to allocate IP for "default/s": ["1.1.1.1"] is not allowed in config: no IPAddressPool contains it"#)]
#[case::requested_ip_and_pool_disagree(service("s", "{spec: {loadBalancerIP: 10.0.1.3}, metadata: {annotations: {metallb.io/address-pool: default}}}"), r#"
no write
Warning AllocationFailed: Failed to allocate IP for "default/s": requested loadBalancer IP(s) ["10.0.1.3"] is not compatible with requested address pool default"#)]
#[case::requested_ip_wrong_family(service("s", "{spec: {loadBalancerIP: 'fc00::1'}}"), r#"
no write
Warning AllocationFailed: Failed to allocate IP for "default/s": requested loadBalancer IP(s) ["fc00::1"] does not match the ipFamily of the service"#)]
#[case::both_annotation_and_spec_while_holding(service("s", "{spec: {loadBalancerIP: 10.0.0.2}, metadata: {annotations: {metallb.io/loadBalancerIPs: 10.0.0.2, metallb.io/ip-allocated-from-pool: default}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.2}]}}}"), "
no write
Warning LoadBalancerFailed: invalid requested loadbalancer IPs: service can not have both metallb.io/loadBalancerIPs and svc.Spec.LoadBalancerIP: remove spec.loadBalancerIP")]
#[case::require_dual_single_cluster_ip(
    service("s", "{spec: {ipFamilyPolicy: RequireDualStack}}"),
    "
no write
Warning not enough clusterips: Service requires dual stack but not enough clusterips [\"10.96.0.1\"]"
)]
#[case::dual_stack(
    service(
        "s",
        "{spec: {ipFamilyPolicy: RequireDualStack, clusterIPs: [10.96.0.1, 'fd00::1']}}"
    ),
    "
ingress=10.0.0.0,fc00::
metallb.io/ip-allocated-from-pool=default
Normal IPAllocated: Assigned IP [\"10.0.0.0\" \"fc00::\"]"
)]
#[case::prefer_dual_tops_up(
    service(
        "s",
        "{spec: {ipFamilyPolicy: PreferDualStack, clusterIPs: [10.96.0.1, 'fd00::1']}, metadata: {annotations: {metallb.io/ip-allocated-from-pool: default}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.2}]}}}"
    ),
    "
ingress=10.0.0.2,fc00::
Normal IPAllocated: Assigned additional IP \"fc00::\""
)]
#[case::prefer_dual_cannot_top_up(service("s", "{spec: {ipFamilyPolicy: PreferDualStack, clusterIPs: [10.96.0.1, 'fd00::1']}, metadata: {annotations: {metallb.io/ip-allocated-from-pool: other}}, status: {loadBalancer: {ingress: [{ip: 10.0.1.2}]}}}"), "
no write
Normal AdditionalAssignFailed: cannot assign additional IP in PreferDualStack: no available IPs in pool \"other\" for ipv6 IPFamily")]
#[case::ingress_of_wrong_family(
    service(
        "s",
        "{metadata: {annotations: {metallb.io/ip-allocated-from-pool: v6only}}, status: {loadBalancer: {ingress: [{ip: 'fc00:1::1'}]}}}"
    ),
    "
ingress=10.0.0.0
metallb.io/ip-allocated-from-pool=default
Normal IPAllocated: Assigned IP [\"10.0.0.0\"]"
)]
#[case::deprecated_annotation_honoured_with_warning(
    service(
        "s",
        "{metadata: {annotations: {metallb.universe.tf/address-pool: other}}}"
    ),
    "
ingress=10.0.1.0
metallb.io/ip-allocated-from-pool=other
Normal IPAllocated: Assigned IP [\"10.0.1.0\"]
Warning deprecatedAnnotation: Service uses deprecated annotation metallb.universe.tf/address-pool"
)]
#[case::deprecated_quiet_when_converged(
    service(
        "s",
        "{metadata: {annotations: {metallb.universe.tf/address-pool: other, metallb.io/ip-allocated-from-pool: other}}, status: {loadBalancer: {ingress: [{ip: 10.0.1.1}]}}}"
    ),
    "no write"
)]
#[case::old_pool_annotation_kept(service("s", "{metadata: {annotations: {metallb.universe.tf/ip-allocated-from-pool: default}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.1}]}}}"), "
metallb.io/ip-allocated-from-pool=default
Warning deprecatedAnnotation: Service uses deprecated annotation metallb.universe.tf/ip-allocated-from-pool")]
#[case::deprecated_shared_key_kept(
    service(
        "s",
        "{metadata: {annotations: {metallb.universe.tf/allow-shared-ip: k}}}"
    ),
    "
ingress=10.0.0.0
metallb.io/ip-allocated-from-pool=default
Normal IPAllocated: Assigned IP [\"10.0.0.0\"]
Warning deprecatedAnnotation: Service uses deprecated annotation metallb.universe.tf/allow-shared-ip
reprocess all"
)]
#[case::foreign_ingress_fields_are_rewritten(
    service(
        "s",
        "{metadata: {annotations: {metallb.io/ip-allocated-from-pool: default}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.1, ipMode: Proxy}]}}}"
    ),
    "ingress=10.0.0.1"
)]
fn single_service(#[case] svc: Service, #[case] expected: &str) {
    check(&[], svc, expected);
}

/// Upstream's `convergeBalancer` when the families of the held addresses
/// or of the ClusterIPs cannot be told.
#[rstest]
#[case::lb_ips_same_family(service("s", "{metadata: {annotations: {metallb.io/ip-allocated-from-pool: default}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.1}, {ip: 10.0.0.2}]}}}"), r#"
ingress=10.0.0.0
Warning nolbIPsIPFamily: Failed to retrieve LBIPs IPFamily for ["10.0.0.1" "10.0.0.2"]: IPFamilyForAddresses: same address family ["10.0.0.1" "10.0.0.2"]
Normal IPAllocated: Assigned IP ["10.0.0.0"]"#)]
#[case::lb_ip_not_an_address(service("s", "{status: {loadBalancer: {ingress: [{ip: bogus}]}}}"), r#"
ingress=10.0.0.0
metallb.io/ip-allocated-from-pool=default
Warning nolbIPsIPFamily: Failed to retrieve LBIPs IPFamily for ["bogus"]: IPFamilyForAddresses: Invalid address ["bogus"]
Normal IPAllocated: Assigned IP ["10.0.0.0"]"#)]
#[case::cluster_ips_unusable_with_ip(service("s", "{spec: {clusterIPs: [10.96.0.1, 10.96.0.2]}, metadata: {annotations: {metallb.io/ip-allocated-from-pool: default}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.1}]}}}"), r#"
no write
Warning noclusterIPsIPFamily: Failed to retrieve ClusterIPs IPFamily for ["10.96.0.1" "10.96.0.2"] : IPFamilyForAddresses: same address family ["10.96.0.1" "10.96.0.2"]"#)]
#[case::cluster_ips_unusable_without_ip(service("s", "{spec: {clusterIPs: [10.96.0.1, 10.96.0.2]}}"), r#"
no write
Warning AllocationFailed: Failed to allocate IP for "default/s": IPFamilyForAddresses: same address family ["10.96.0.1" "10.96.0.2"]"#)]
fn converge_balancer_families(#[case] svc: Service, #[case] expected: &str) {
    check(&[], svc, expected);
}

#[test]
fn exhausted_pool_fails_and_names_every_pool() {
    let before: Vec<Service> = (0..8).map(|i| service(&format!("s{i}"), "")).collect();
    check(
        &before,
        service("late", ""),
        r#"
no write
Warning AllocationFailed: Failed to allocate IP for "default/late": no available IPs (pool "default": no available IPs in pool "default" for ipv4 IPFamily; pool "other": no available IPs in pool "other" for ipv4 IPFamily; pool "v6only": no available IPs in pool "v6only" for ipv4 IPFamily)"#,
    );
}

#[test]
fn sharing_services_get_the_same_ip_and_reprocess_others() {
    let first = service(
        "a",
        "{metadata: {annotations: {metallb.io/allow-shared-ip: k}}}",
    );
    check(
        &[first],
        service(
            "b",
            "{metadata: {annotations: {metallb.io/allow-shared-ip: k}}, spec: {ports: [{port: 443, protocol: TCP}]}}",
        ),
        "
ingress=10.0.0.0
metallb.io/ip-allocated-from-pool=default
Normal IPAllocated: Assigned IP [\"10.0.0.0\"]
reprocess all",
    );
}

#[test]
fn same_port_cannot_share() {
    let first = service(
        "a",
        "{metadata: {annotations: {metallb.io/allow-shared-ip: k}}}",
    );
    check(
        &[first],
        service(
            "b",
            "{metadata: {annotations: {metallb.io/allow-shared-ip: k}}, spec: {loadBalancerIP: 10.0.0.0}}",
        ),
        r#"
no write
Warning AllocationFailed: Failed to allocate IP for "default/b": port TCP/80 is already in use on "10.0.0.0""#,
    );
}

#[test]
fn release_hands_the_ip_to_a_waiting_service() {
    let mut a = allocator("- {name: one, spec: {addresses: [10.0.0.7/32]}}");
    let labels = BTreeMap::new();
    let mut first = service("first", "");
    let d = set_balancer(&mut a, &first, &labels);
    apply(&mut first, &d);
    let waiting = service("waiting", "");
    let d = set_balancer(&mut a, &waiting, &labels);
    assert!(
        d.events.iter().any(|e| e.reason == "AllocationFailed"),
        "{}",
        summary(&d)
    );
    // Deleting the holder asks for a full pass, in which the waiting one gets it.
    assert!(deleted(&mut a, &ServiceKey::new("default", "first")).reprocess_all);
    assert!(
        !deleted(&mut a, &ServiceKey::new("default", "first")).reprocess_all,
        "second delete is a no-op"
    );
    let d = set_balancer(&mut a, &waiting, &labels);
    assert_eq!(
        d.write.and_then(|w| w.ingress),
        Some(vec!["10.0.0.7".parse().expect("ip")])
    );
}

#[test]
fn restart_keeps_every_ip_when_held_services_go_first() {
    // After a restart the allocator is empty; services that hold addresses
    // are converged first, so a new service never takes one of theirs.
    let mut a = allocator("- {name: p, spec: {addresses: [10.0.0.0/30]}}");
    let labels = BTreeMap::new();
    let held = service(
        "held",
        &format!(
            "{{metadata: {{annotations: {{{ASSIGNED_POOL}: p}}}}, status: {{loadBalancer: {{ingress: [{{ip: 10.0.0.0}}]}}}}}}"
        ),
    );
    assert_eq!(set_balancer(&mut a, &held, &labels).write, None);
    let d = set_balancer(&mut a, &service("new", ""), &labels);
    assert_eq!(
        d.write.and_then(|w| w.ingress),
        Some(vec!["10.0.0.1".parse().expect("ip")])
    );
}

#[test]
fn turning_into_cluster_ip_frees_for_others() {
    let mut a = allocator("- {name: one, spec: {addresses: [10.0.0.7/32]}}");
    let labels = BTreeMap::new();
    let mut s = service("s", "");
    let d = set_balancer(&mut a, &s, &labels);
    apply(&mut s, &d);
    let mut changed = s.clone();
    changed.spec.as_mut().expect("spec").type_ = Some("ClusterIP".into());
    let d = set_balancer(&mut a, &changed, &labels);
    assert!(d.reprocess_all, "{}", summary(&d));
    assert_eq!(a.ips(&ServiceKey::new("default", "s")), None);
}

#[test]
fn no_pools_clears_and_fails() {
    let mut a = Allocator::new();
    let d = set_balancer(
        &mut a,
        &service(
            "s",
            "{metadata: {annotations: {metallb.io/ip-allocated-from-pool: p}}, status: {loadBalancer: {ingress: [{ip: 10.0.0.1}]}}}",
        ),
        &BTreeMap::new(),
    );
    assert_eq!(
        summary(&d),
        "ingress=\nmetallb.io/ip-allocated-from-pool=<removed>"
    );
}

#[test]
fn namespace_labels_select_pools() {
    let mut a = allocator_in(
        "- {name: team, spec: {addresses: [10.0.5.0/30], serviceAllocation: {namespaceSelectors: [{matchLabels: {team: x}}]}}}\n- {name: any, spec: {addresses: [10.0.6.0/30]}}",
        &[("ns1", "team", "x")],
    );
    let x = BTreeMap::from([("team".to_owned(), "x".to_owned())]);
    let d = set_balancer(&mut a, &service("ns1/s", ""), &x);
    assert_eq!(
        d.write
            .and_then(|w| w.annotations.get(ASSIGNED_POOL).cloned().flatten()),
        Some("team".into())
    );
    let d = set_balancer(&mut a, &service("ns2/s", ""), &BTreeMap::new());
    assert_eq!(
        d.write
            .and_then(|w| w.annotations.get(ASSIGNED_POOL).cloned().flatten()),
        Some("any".into())
    );
}
