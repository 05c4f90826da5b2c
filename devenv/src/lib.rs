//! Dev environments for metallb-rs, as a library behind `cargo xtask
//! dev-env`: the lab (network namespaces, an API server, node agents) and
//! kind (Docker containers as nodes). Both hand the e2e suites one
//! [`cluster::Cluster`] handle.

pub mod bench;
pub mod cluster;
pub mod docker;
pub mod image;
pub mod kind;
pub mod lab;
