//! `metallb.io/v1beta2`: BGPPeer's storage version.

mod bgppeer;

pub use bgppeer::*;
