//! What the allocator needs to know about a service, as plain data: the
//! controller fills it from the Kubernetes Service (see
//! `crate::service`), tests write it by hand.

use super::space::Family;
use crate::service_key::ServiceKey;
use std::collections::BTreeMap;
use std::fmt;

/// The address families a service's ClusterIPs say it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceFamily {
    /// One IPv4 ClusterIP.
    V4,
    /// One IPv6 ClusterIP.
    V6,
    /// One ClusterIP of each family.
    Dual,
}

impl ServiceFamily {
    /// The single family, if it is one.
    pub fn single(self) -> Option<Family> {
        match self {
            ServiceFamily::V4 => Some(Family::V4),
            ServiceFamily::V6 => Some(Family::V6),
            ServiceFamily::Dual => None,
        }
    }

    /// The family made of `families` (one or two, different), as upstream's
    /// `ipfamily.ForAddresses`.
    pub fn from_families(families: &[Family]) -> Option<Self> {
        match families {
            [Family::V4] => Some(ServiceFamily::V4),
            [Family::V6] => Some(ServiceFamily::V6),
            [a, b] if a != b => Some(ServiceFamily::Dual),
            _ => None,
        }
    }
}

impl fmt::Display for ServiceFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Upstream's ipfamily strings, which appear in its error messages.
        f.write_str(match self {
            ServiceFamily::V4 => "ipv4",
            ServiceFamily::V6 => "ipv6",
            ServiceFamily::Dual => "dual",
        })
    }
}

/// `spec.ipFamilyPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FamilyPolicy {
    /// SingleStack (also when unset).
    #[default]
    SingleStack,
    /// PreferDualStack: both families when a pool has both, else one.
    PreferDualStack,
    /// RequireDualStack: both families or nothing.
    RequireDualStack,
}

/// One port of a service; two services may share an IP only when no
/// (protocol, port) is common to both.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Port {
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// The service port.
    pub port: i32,
}

impl Port {
    /// A port of `protocol`.
    pub fn new(protocol: &str, port: i32) -> Self {
        Self {
            protocol: protocol.to_owned(),
            port,
        }
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.protocol, self.port)
    }
}

/// What decides whether two services may share an IP: the
/// `metallb.io/allow-shared-ip` value and, for ExternalTrafficPolicy
/// Local, the pod selector (services sharing an IP must reach the same
/// pods, or traffic would land on nodes without endpoints).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SharingKey {
    /// The allow-shared-ip value; empty means "does not share".
    pub sharing: String,
    /// The backend key: the selector as `k=v,...` for ETP Local, else empty.
    pub backend: String,
}

impl SharingKey {
    /// Key `sharing` with backend `backend`.
    pub fn new(sharing: &str, backend: &str) -> Self {
        Self {
            sharing: sharing.to_owned(),
            backend: backend.to_owned(),
        }
    }

    /// Why an IP held under `self` cannot be shared with a service
    /// holding `new`, or `None` when it can (upstream's `sharingOK`).
    pub fn conflict_with(&self, new: &SharingKey) -> Option<String> {
        if self.sharing.is_empty() {
            return Some("existing service does not allow sharing".into());
        }
        if new.sharing.is_empty() {
            return Some("new service does not allow sharing".into());
        }
        if self.sharing != new.sharing {
            return Some(format!(
                "sharing key {:?} does not match existing sharing key {:?}",
                new.sharing, self.sharing
            ));
        }
        if self.backend != new.backend {
            return Some(format!(
                "backend key {:?} does not match existing backend key {:?}",
                new.backend, self.backend
            ));
        }
        None
    }
}

/// A service as the allocator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceInfo {
    /// The allocation's key.
    pub key: ServiceKey,
    /// The service's namespace.
    pub namespace: String,
    /// The service's labels (for pools' serviceSelectors).
    pub labels: BTreeMap<String, String>,
    /// Its namespace's labels (for pools' namespaceSelectors).
    pub namespace_labels: BTreeMap<String, String>,
    /// Families from its ClusterIPs.
    pub family: ServiceFamily,
    /// `spec.ipFamilyPolicy`.
    pub policy: FamilyPolicy,
    /// `spec.ipFamilies[0]` (IPv4 when unset): preferred when only one
    /// family can be had under PreferDualStack.
    pub primary: Family,
    /// Its ports.
    pub ports: Vec<Port>,
    /// Its sharing key.
    pub sharing: SharingKey,
}

impl ServiceInfo {
    /// A single-stack IPv4 service `namespace`/`name` with one TCP port:
    /// the common case, for tests and benchmarks to adjust.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            key: ServiceKey::new(namespace, name),
            namespace: namespace.to_owned(),
            labels: BTreeMap::new(),
            namespace_labels: BTreeMap::new(),
            family: ServiceFamily::V4,
            policy: FamilyPolicy::SingleStack,
            primary: Family::V4,
            ports: vec![Port::new("TCP", 80)],
            sharing: SharingKey::default(),
        }
    }

    /// The same service with `family` (and the primary family it implies).
    pub fn with_family(mut self, family: ServiceFamily, policy: FamilyPolicy) -> Self {
        self.family = family;
        self.policy = policy;
        if family == ServiceFamily::V6 {
            self.primary = Family::V6;
        }
        self
    }

    /// The same service with sharing key `sharing` and these ports.
    pub fn sharing(mut self, sharing: &str, ports: &[(&str, i32)]) -> Self {
        self.sharing.sharing = sharing.to_owned();
        self.ports = ports.iter().map(|(p, n)| Port::new(p, *n)).collect();
        self
    }
}
