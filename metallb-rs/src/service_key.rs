//! [`ServiceKey`], the one way either component names a service (queues,
//! allocations, status labels, metrics). Below both `service` (which reads
//! a Kubernetes Service into the allocator's types) and `allocator` (which
//! keys its bookkeeping by it), so neither imports the other back. Pure.

use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;

/// A service's namespace and name. Shown as `namespace/name`, which is
/// never parsed back: whoever needs the parts keeps the key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceKey {
    /// The namespace (empty for an object that names none).
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ServiceKey {
    /// The key of `namespace`/`name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of `svc`.
    pub fn of(svc: &Service) -> Self {
        Self::new(svc.namespace().unwrap_or_default(), svc.name_any())
    }

    /// The reference a reflector store looks the service up by.
    pub fn object_ref(&self) -> kube::runtime::reflector::ObjectRef<Service> {
        kube::runtime::reflector::ObjectRef::new(&self.name).within(&self.namespace)
    }
}

/// Tests compare keys with their `namespace/name` text.
#[cfg(test)]
impl PartialEq<str> for ServiceKey {
    fn eq(&self, other: &str) -> bool {
        other.split_once('/') == Some((self.namespace.as_str(), self.name.as_str()))
    }
}

#[cfg(test)]
impl PartialEq<&str> for ServiceKey {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

impl std::fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
