//! The lab provider: a kind-shaped cluster made of network namespaces on
//! this machine, with its own API server. Runs anywhere Linux gives root.

pub mod apiserver;
pub mod cluster;
pub mod forward;
pub mod netns;
pub mod process;
