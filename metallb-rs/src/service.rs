//! Services as both components see them: [`ServiceKey`], the one way a
//! service is named (queues, allocations, status labels, metrics), and
//! reading a Kubernetes Service the way MetalLB does: its annotations
//! (each `metallb.io/*` also under the deprecated `metallb.universe.tf/*`),
//! families, ports, sharing key, requested IPs and current ingress. Pure.

use crate::allocator::{Family, FamilyPolicy, Port, ServiceFamily, ServiceInfo, SharingKey};
pub use crate::service_key::ServiceKey;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// The annotations MetalLB reads or writes, without prefix.
pub mod annotation {
    /// Current prefix.
    pub const PREFIX: &str = "metallb.io";
    /// Deprecated prefix, still honoured (with a Warning event).
    pub const DEPRECATED_PREFIX: &str = "metallb.universe.tf";
    /// Allocate from this pool.
    pub const ADDRESS_POOL: &str = "address-pool";
    /// Requested addresses, comma separated.
    pub const LOAD_BALANCER_IPS: &str = "loadBalancerIPs";
    /// The sharing key.
    pub const ALLOW_SHARED_IP: &str = "allow-shared-ip";
    /// Written by the controller: the pool the addresses came from.
    pub const IP_ALLOCATED_FROM_POOL: &str = "ip-allocated-from-pool";

    /// `metallb.io/<name>`.
    pub fn current(name: &str) -> String {
        format!("{PREFIX}/{name}")
    }

    /// `metallb.universe.tf/<name>`.
    pub fn deprecated(name: &str) -> String {
        format!("{DEPRECATED_PREFIX}/{name}")
    }
}

/// The value of annotation `name`, current prefix first (present wins,
/// even when empty), then the deprecated one.
pub fn annotation_value<'a>(svc: &'a Service, name: &str) -> Option<&'a str> {
    let anns = svc.metadata.annotations.as_ref()?;
    anns.get(&annotation::current(name))
        .or_else(|| anns.get(&annotation::deprecated(name)))
        .map(String::as_str)
}

/// Deprecated `metallb.universe.tf/*` annotations the service carries.
pub fn deprecated_annotations(svc: &Service) -> Vec<String> {
    let prefix = format!("{}/", annotation::DEPRECATED_PREFIX);
    svc.annotations()
        .keys()
        .filter(|k| k.starts_with(&prefix))
        .cloned()
        .collect()
}

/// Drops what the speaker never reads before its cache keeps `svc`:
/// annotations other than MetalLB's, owner references, ports, cluster
/// IPs, session affinity, conditions, and the pod selector unless the
/// sharing key needs it (ExternalTrafficPolicy Local). The speaker keeps
/// every Service of the cluster, so this is most of its Service cache.
pub fn trim_for_speaker(svc: &mut Service) {
    let ours = |k: &str| {
        [annotation::PREFIX, annotation::DEPRECATED_PREFIX]
            .iter()
            .any(|p| k.strip_prefix(p).is_some_and(|rest| rest.starts_with('/')))
    };
    if let Some(a) = svc.metadata.annotations.as_mut() {
        a.retain(|k, _| ours(k));
    }
    svc.metadata.owner_references = None;
    if let Some(spec) = svc.spec.as_mut() {
        let local = spec.external_traffic_policy.as_deref() == Some("Local");
        spec.ports = None;
        spec.cluster_ip = None;
        spec.cluster_ips = None;
        spec.external_ips = None;
        spec.session_affinity = None;
        spec.session_affinity_config = None;
        spec.load_balancer_source_ranges = None;
        if !local {
            spec.selector = None;
        }
    }
    if let Some(status) = svc.status.as_mut() {
        status.conditions = None;
    }
}

/// The key of `svc` (see [`ServiceKey`]).
pub fn key(svc: &Service) -> ServiceKey {
    ServiceKey::of(svc)
}

/// Whether it is of type LoadBalancer.
pub fn is_load_balancer(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_some_and(|t| t == "LoadBalancer")
}

/// Whether a controller started with `--lb-class lb_class` handles it:
/// without a flag only services without a class; with one, exact match.
pub fn class_matches(svc: &Service, lb_class: Option<&str>) -> bool {
    let class = svc
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_class.as_deref());
    class == lb_class
}

/// Its ClusterIPs (`clusterIPs`, else `clusterIP`), "None" excluded.
pub fn cluster_ips(svc: &Service) -> Vec<String> {
    let spec = svc.spec.as_ref();
    let ips: Vec<String> = spec
        .and_then(|s| s.cluster_ips.clone())
        .filter(|v| !v.is_empty())
        .or_else(|| spec.and_then(|s| s.cluster_ip.clone()).map(|ip| vec![ip]))
        .unwrap_or_default();
    ips.into_iter()
        .filter(|ip| !ip.is_empty() && ip != "None")
        .collect()
}

/// Go's `%q` of a list: `["a" "b"]` (upstream's event texts use it).
pub fn go_quoted<T: std::fmt::Display>(items: &[T]) -> String {
    let inner: Vec<String> = items.iter().map(|i| format!("\"{i}\"")).collect();
    format!("[{}]", inner.join(" "))
}

/// Why addresses give no service family: upstream's
/// `ipfamily.ForAddresses` errors, with its texts (they reach users in
/// events), each with the addresses as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FamilyError {
    /// None, or more than two.
    #[error("IPFamilyForAddresses: invalid ips length {} {}", .0.len(), go_quoted(.0))]
    Length(Vec<String>),
    /// One is not an IP address.
    #[error("IPFamilyForAddresses: Invalid address {}", go_quoted(.0))]
    Invalid(Vec<String>),
    /// Two of one family.
    #[error("IPFamilyForAddresses: same address family {}", go_quoted(.0))]
    SameFamily(Vec<String>),
}

/// The family of one address, or two of different families (upstream's
/// `ipfamily.ForAddresses`).
pub fn addresses_family(ips: &[String]) -> Result<ServiceFamily, FamilyError> {
    let parsed: Vec<IpAddr> = ips.iter().filter_map(|ip| ip.parse().ok()).collect();
    if !(1..=2).contains(&ips.len()) {
        return Err(FamilyError::Length(ips.to_vec()));
    }
    if parsed.len() != ips.len() {
        return Err(FamilyError::Invalid(ips.to_vec()));
    }
    let families: Vec<Family> = parsed.iter().map(|ip| Family::of(*ip)).collect();
    ServiceFamily::from_families(&families).ok_or_else(|| FamilyError::SameFamily(ips.to_vec()))
}

/// The families its ClusterIPs give (upstream's `ipfamily.ForService`).
pub fn service_family(svc: &Service) -> Result<ServiceFamily, FamilyError> {
    addresses_family(&cluster_ips(svc))
}

/// `spec.clusterIPs` and `spec.clusterIP` as written (for messages).
pub fn raw_cluster_ips(svc: &Service) -> (Vec<String>, String) {
    let spec = svc.spec.as_ref();
    (
        spec.and_then(|s| s.cluster_ips.clone()).unwrap_or_default(),
        spec.and_then(|s| s.cluster_ip.clone()).unwrap_or_default(),
    )
}

/// The non-empty `status.loadBalancer.ingress[].ip` entries as written
/// (upstream's lbIPs, which it checks before trusting them).
pub fn ingress_strings(svc: &Service) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone().filter(|ip| !ip.is_empty()))
        .collect()
}

/// `spec.ipFamilyPolicy` (SingleStack when unset).
pub fn family_policy(svc: &Service) -> FamilyPolicy {
    match svc
        .spec
        .as_ref()
        .and_then(|s| s.ip_family_policy.as_deref())
    {
        Some("PreferDualStack") => FamilyPolicy::PreferDualStack,
        Some("RequireDualStack") => FamilyPolicy::RequireDualStack,
        _ => FamilyPolicy::SingleStack,
    }
}

/// Its ports as (protocol, port); protocol TCP when unset.
pub fn ports(svc: &Service) -> Vec<Port> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(|ports| {
            ports
                .iter()
                .map(|p| Port::new(p.protocol.as_deref().unwrap_or("TCP"), p.port))
                .collect()
        })
        .unwrap_or_default()
}

/// Its sharing key: the allow-shared-ip value, and for
/// ExternalTrafficPolicy Local the pod selector as `k=v,...` (sorted).
pub fn sharing_key(svc: &Service) -> SharingKey {
    let sharing = annotation_value(svc, annotation::ALLOW_SHARED_IP).unwrap_or_default();
    let spec = svc.spec.as_ref();
    let local = spec
        .and_then(|s| s.external_traffic_policy.as_deref())
        .is_some_and(|p| p == "Local");
    let backend = if local {
        spec.and_then(|s| s.selector.as_ref())
            .map(|sel| {
                sel.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    } else {
        String::new()
    };
    SharingKey::new(sharing, &backend)
}

/// The allocator's view of `svc`; `namespace_labels` are its namespace's.
pub fn service_info(
    svc: &Service,
    namespace_labels: &BTreeMap<String, String>,
) -> Result<ServiceInfo, FamilyError> {
    let family = service_family(svc)?;
    let primary = svc
        .spec
        .as_ref()
        .and_then(|s| s.ip_families.as_ref())
        .and_then(|f| f.first())
        .map_or(Family::V4, |f| {
            if f == "IPv6" { Family::V6 } else { Family::V4 }
        });
    Ok(ServiceInfo {
        key: key(svc),
        namespace: svc.namespace().unwrap_or_default(),
        labels: svc.labels().clone(),
        namespace_labels: namespace_labels.clone(),
        family,
        policy: family_policy(svc),
        primary,
        ports: ports(svc),
        sharing: sharing_key(svc),
    })
}

/// An entry of `status.loadBalancer.ingress` that is not an IP address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ingress IP {0:?}")]
pub struct InvalidIngress(pub String);

/// The addresses in `status.loadBalancer.ingress`; `Err` names an entry
/// that is not an IP address.
pub fn ingress_ips(svc: &Service) -> Result<Vec<IpAddr>, InvalidIngress> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.as_deref().filter(|ip| !ip.is_empty()))
        .map(|ip| {
            ip.parse::<IpAddr>()
                .map_err(|_| InvalidIngress(ip.to_owned()))
        })
        .collect()
}

/// Why the addresses a service asks for cannot be used; the texts reach
/// users in events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Asked for in the annotation and in `spec.loadBalancerIP` both.
    #[error(
        "service can not have both {annotation} and svc.Spec.LoadBalancerIP: remove spec.loadBalancerIP"
    )]
    Both {
        /// The annotation's name (`metallb.io/loadBalancerIPs`).
        annotation: String,
    },
    /// The annotation holds something that is not a list of addresses.
    #[error("invalid {annotation}: {value:?}")]
    Annotation {
        /// The annotation's name.
        annotation: String,
        /// Its value as written.
        value: String,
    },
    /// `spec.loadBalancerIP` is not an address.
    #[error("invalid spec.loadBalancerIP {0:?}")]
    Spec(String),
    /// More than two addresses, or two of one family.
    #[error("invalid {field} {ips:?}: give at most two addresses, one per family")]
    Families {
        /// Where they were asked for.
        field: String,
        /// The addresses.
        ips: Vec<IpAddr>,
    },
}

/// Addresses the user asked for (`metallb.io/loadBalancerIPs` or
/// `spec.loadBalancerIP`) and their family (upstream's
/// `getDesiredLbIPs`); `Ok(None)` when none were asked for.
pub fn requested_ips(svc: &Service) -> Result<Option<(Vec<IpAddr>, ServiceFamily)>, RequestError> {
    let from_annotation = annotation_value(svc, annotation::LOAD_BALANCER_IPS).unwrap_or_default();
    let from_spec = svc
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_ip.as_deref())
        .unwrap_or_default();
    let name = annotation::current(annotation::LOAD_BALANCER_IPS);
    let (ips, what) = match (from_annotation.is_empty(), from_spec.is_empty()) {
        (true, true) => return Ok(None),
        (false, false) => {
            return Err(RequestError::Both { annotation: name });
        }
        (false, true) => (
            from_annotation
                .split(',')
                .map(|s| s.trim().parse::<IpAddr>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| RequestError::Annotation {
                    annotation: name.clone(),
                    value: from_annotation.to_owned(),
                })?,
            name.as_str(),
        ),
        (true, false) => (
            vec![
                from_spec
                    .parse::<IpAddr>()
                    .map_err(|_| RequestError::Spec(from_spec.to_owned()))?,
            ],
            "spec.loadBalancerIP",
        ),
    };
    let families: Vec<Family> = ips.iter().map(|ip| Family::of(*ip)).collect();
    let Some(family) = ServiceFamily::from_families(&families) else {
        return Err(RequestError::Families {
            field: what.to_owned(),
            ips,
        });
    };
    Ok(Some((ips, family)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn svc(yaml: &str) -> Service {
        serde_yaml::from_str(yaml).expect("service yaml")
    }

    const BASE: &str = "metadata: {name: s, namespace: ns}\nspec: {type: LoadBalancer, clusterIPs: [10.96.0.1], ports: [{port: 80}]}";

    #[rstest]
    #[case::single_v4("spec: {clusterIPs: [10.96.0.1]}", Ok(ServiceFamily::V4))]
    #[case::single_v6("spec: {clusterIPs: ['fd00::1']}", Ok(ServiceFamily::V6))]
    #[case::dual("spec: {clusterIPs: [10.96.0.1, 'fd00::1']}", Ok(ServiceFamily::Dual))]
    #[case::legacy_cluster_ip("spec: {clusterIP: 10.96.0.1}", Ok(ServiceFamily::V4))]
    #[case::none("spec: {clusterIP: None}", Err("IPFamilyForAddresses: invalid ips length 0 []".to_owned()))]
    #[case::same_family_twice("spec: {clusterIPs: [10.96.0.1, 10.96.0.2]}", Err("IPFamilyForAddresses: same address family [\"10.96.0.1\" \"10.96.0.2\"]".to_owned()))]
    #[case::not_an_address("spec: {clusterIPs: [10.96.0.300]}", Err("IPFamilyForAddresses: Invalid address [\"10.96.0.300\"]".to_owned()))]
    #[case::three("spec: {clusterIPs: [10.96.0.1, 'fd00::1', 10.96.0.2]}", Err("IPFamilyForAddresses: invalid ips length 3 [\"10.96.0.1\" \"fd00::1\" \"10.96.0.2\"]".to_owned()))]
    fn families(#[case] yaml: &str, #[case] expected: Result<ServiceFamily, String>) {
        let got = service_family(&svc(yaml)).map_err(|e| e.to_string());
        assert_eq!(got, expected);
    }

    #[rstest]
    #[case::none(BASE, Ok(None))]
    #[case::annotation("metadata: {annotations: {metallb.io/loadBalancerIPs: '10.0.0.1, fc00::1'}}", Ok(Some((vec!["10.0.0.1".parse().expect("ip"), "fc00::1".parse().expect("ip")], ServiceFamily::Dual))))]
    #[case::deprecated("metadata: {annotations: {metallb.universe.tf/loadBalancerIPs: '10.0.0.1'}}", Ok(Some((vec!["10.0.0.1".parse().expect("ip")], ServiceFamily::V4))))]
    #[case::spec("spec: {loadBalancerIP: 'fc00::1'}", Ok(Some((vec!["fc00::1".parse().expect("ip")], ServiceFamily::V6))))]
    #[case::both("metadata: {annotations: {metallb.io/loadBalancerIPs: 10.0.0.1}}\nspec: {loadBalancerIP: 10.0.0.2}", Err("service can not have both metallb.io/loadBalancerIPs and svc.Spec.LoadBalancerIP: remove spec.loadBalancerIP".to_owned()))]
    #[case::bad_annotation("metadata: {annotations: {metallb.io/loadBalancerIPs: 'x'}}", Err("invalid metallb.io/loadBalancerIPs: \"x\"".to_owned()))]
    #[case::bad_spec("spec: {loadBalancerIP: '10.0.0.300'}", Err("invalid spec.loadBalancerIP \"10.0.0.300\"".to_owned()))]
    #[case::two_v4("metadata: {annotations: {metallb.io/loadBalancerIPs: '10.0.0.1,10.0.0.2'}}", Err("invalid metallb.io/loadBalancerIPs [10.0.0.1, 10.0.0.2]: give at most two addresses, one per family".to_owned()))]
    fn requested(
        #[case] yaml: &str,
        #[case] expected: Result<Option<(Vec<IpAddr>, ServiceFamily)>, String>,
    ) {
        let got = requested_ips(&svc(yaml)).map_err(|e| e.to_string());
        assert_eq!(got, expected);
    }

    /// What the speaker reads of a service.
    fn speaker_view(s: &Service) -> String {
        format!(
            "{:?} lb={} class={} ingress={:?} sharing={:?} labels={:?} pool={:?} shared={:?}",
            key(s),
            is_load_balancer(s),
            class_matches(s, Some("c")),
            ingress_ips(s),
            sharing_key(s),
            s.labels(),
            annotation_value(s, annotation::ADDRESS_POOL),
            annotation_value(s, annotation::ALLOW_SHARED_IP),
        )
    }

    #[rstest]
    #[case::cluster_policy("Cluster")]
    #[case::local_policy("Local")]
    fn trimming_keeps_what_the_speaker_reads(#[case] policy: &str) {
        let full = svc(&format!(
            "metadata: {{name: s, namespace: ns, labels: {{app: web}}, \
               ownerReferences: [{{apiVersion: v1, kind: X, name: o, uid: u}}], \
               annotations: {{metallb.io/allow-shared-ip: k, metallb.universe.tf/address-pool: p, \
                 metallb.io.evil/x: y, helm.sh/chart: big}}}}\n\
             spec: {{type: LoadBalancer, loadBalancerClass: c, externalTrafficPolicy: {policy}, \
               selector: {{app: web}}, clusterIP: 10.96.0.1, clusterIPs: [10.96.0.1], \
               ports: [{{port: 80}}, {{port: 443}}], sessionAffinity: ClientIP}}\n\
             status: {{loadBalancer: {{ingress: [{{ip: 192.0.2.1}}]}}, conditions: [{{type: T, \
               status: 'True', reason: R, message: M, lastTransitionTime: '2026-01-01T00:00:00Z'}}]}}"
        ));
        let mut trimmed = full.clone();
        trim_for_speaker(&mut trimmed);
        assert_eq!(speaker_view(&trimmed), speaker_view(&full));
        assert_eq!(
            trimmed.annotations().keys().collect::<Vec<_>>(),
            [
                "metallb.io/allow-shared-ip",
                "metallb.universe.tf/address-pool"
            ],
            "other annotations are not kept"
        );
        let spec = trimmed.spec.as_ref().expect("spec");
        assert!(spec.ports.is_none() && spec.cluster_ips.is_none());
        assert_eq!(spec.selector.is_some(), policy == "Local");
    }

    #[test]
    fn current_annotation_wins_over_deprecated() {
        let s = svc(
            "metadata: {annotations: {metallb.io/address-pool: new, metallb.universe.tf/address-pool: old}}",
        );
        assert_eq!(annotation_value(&s, annotation::ADDRESS_POOL), Some("new"));
        assert_eq!(
            deprecated_annotations(&s),
            ["metallb.universe.tf/address-pool"]
        );
    }

    #[test]
    fn sharing_key_has_backend_only_for_local() {
        let cluster = svc(
            "metadata: {annotations: {metallb.io/allow-shared-ip: k}}\nspec: {selector: {b: '2', a: '1'}}",
        );
        assert_eq!(sharing_key(&cluster), SharingKey::new("k", ""));
        let local = svc(
            "metadata: {annotations: {metallb.io/allow-shared-ip: k}}\nspec: {externalTrafficPolicy: Local, selector: {b: '2', a: '1'}}",
        );
        assert_eq!(sharing_key(&local), SharingKey::new("k", "a=1,b=2"));
    }

    #[test]
    fn info_reads_everything_the_allocator_needs() {
        let s = svc(
            "metadata: {name: web, namespace: shop, labels: {app: web}}\nspec: {type: LoadBalancer, clusterIPs: ['fd00::1', 10.96.0.1], ipFamilies: [IPv6, IPv4], ipFamilyPolicy: RequireDualStack, ports: [{port: 80}, {port: 53, protocol: UDP}]}",
        );
        let labels = BTreeMap::from([("team".to_owned(), "x".to_owned())]);
        let info = service_info(&s, &labels).expect("info");
        assert_eq!(info.key, "shop/web");
        assert_eq!(info.family, ServiceFamily::Dual);
        assert_eq!(info.policy, FamilyPolicy::RequireDualStack);
        assert_eq!(info.primary, Family::V6);
        assert_eq!(info.ports, [Port::new("TCP", 80), Port::new("UDP", 53)]);
        assert_eq!(info.namespace_labels, labels);
        assert_eq!(info.labels["app"], "web");
    }

    #[rstest]
    #[case::no_flag_no_class("spec: {}", None, true)]
    #[case::no_flag_with_class("spec: {loadBalancerClass: x}", None, false)]
    #[case::flag_match("spec: {loadBalancerClass: x}", Some("x"), true)]
    #[case::flag_mismatch("spec: {loadBalancerClass: y}", Some("x"), false)]
    #[case::flag_no_class("spec: {}", Some("x"), false)]
    fn lb_class(#[case] yaml: &str, #[case] flag: Option<&str>, #[case] expected: bool) {
        assert_eq!(class_matches(&svc(yaml), flag), expected);
    }

    #[test]
    fn ingress_parsing() {
        let s = svc("status: {loadBalancer: {ingress: [{ip: 10.0.0.1}, {hostname: x}]}}");
        assert_eq!(ingress_ips(&s), Ok(vec!["10.0.0.1".parse().expect("ip")]));
        let bad = svc("status: {loadBalancer: {ingress: [{ip: nope}]}}");
        assert_eq!(
            ingress_ips(&bad).map_err(|e| e.to_string()),
            Err("invalid ingress IP \"nope\"".to_owned())
        );
    }
}
