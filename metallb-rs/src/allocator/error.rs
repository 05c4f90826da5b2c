//! Why an allocation or assignment failed. Messages keep upstream's wording
//! (users and scripts grep for it) and add what to do where upstream is
//! silent.

use super::service::{Port, ServiceFamily};
use std::fmt;
use std::net::IpAddr;

/// An allocation failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// No pool holds all of these addresses (or one is a .0/.255 address in
    /// a pool that avoids them).
    #[error("{} is not allowed in config: no IPAddressPool contains it", QuotedIps(.0))]
    NotAllowed(Vec<IpAddr>),
    /// The pool's serviceAllocation does not select the service.
    #[error(
        "pool {0} not compatible for ip assignment: its serviceAllocation does not select this service's namespace or labels"
    )]
    Incompatible(String),
    /// More than two addresses, or two of one family.
    #[error("{0}")]
    BadAddresses(String),
    /// The address is used by services the new one may not share it with.
    #[error("can't change sharing key for {svc:?}, address also in use by {} ({reason})", .others.join(","))]
    SharingConflict {
        /// The service asking.
        svc: String,
        /// The services holding the address.
        others: Vec<String>,
        /// Why the keys are incompatible.
        reason: String,
    },
    /// A port of the service is already used on the shared address.
    #[error("port {port} is already in use on {:?}", .ip.to_string())]
    PortInUse {
        /// The port.
        port: Port,
        /// The address.
        ip: IpAddr,
    },
    /// The named pool does not exist.
    #[error("unknown pool {0:?}")]
    UnknownPool(String),
    /// The pool has no free address of the family the service needs.
    #[error("no available IPs in pool {pool:?} for {family} IPFamily")]
    PoolExhausted {
        /// The pool.
        pool: String,
        /// The family asked for.
        family: ServiceFamily,
    },
    /// The service already holds addresses of another family.
    #[error("IP for wrong family assigned {assigned} service family {wanted}")]
    WrongFamily {
        /// Family of the held addresses.
        assigned: ServiceFamily,
        /// Family the service needs.
        wanted: ServiceFamily,
    },
    /// No pool could serve the service; says which pools were tried.
    #[error("no available IPs{}", Tried(.0))]
    NoAvailableIps(Vec<(String, AllocError)>),
}

/// `["10.0.0.1" "fc00::1"]`, as Go prints `%q` of a slice of IPs.
struct QuotedIps<'a>(&'a [IpAddr]);

impl fmt::Display for QuotedIps<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, ip) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "\"{ip}\"")?;
        }
        f.write_str("]")
    }
}

struct Tried<'a>(&'a [(String, AllocError)]);

impl fmt::Display for Tried<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str(
                ": no IPAddressPool serves this service (add an autoAssign pool without serviceAllocation, or one whose serviceAllocation selects it)",
            );
        }
        f.write_str(" (")?;
        for (i, (pool, e)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "pool {pool:?}: {e}")?;
        }
        f.write_str(")")
    }
}
