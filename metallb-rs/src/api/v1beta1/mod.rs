//! `metallb.io/v1beta1`: every kind except BGPPeer's storage version.

mod bfdprofile;
mod bgpadvertisement;
mod bgppeer;
mod community;
mod configurationstate;
mod ipaddresspool;
mod l2advertisement;
mod servicebgpstatus;
mod servicel2status;

pub use bfdprofile::*;
pub use bgpadvertisement::*;
pub use bgppeer::*;
pub use community::*;
pub use configurationstate::*;
pub use ipaddresspool::*;
pub use l2advertisement::*;
pub use servicebgpstatus::*;
pub use servicel2status::*;

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
