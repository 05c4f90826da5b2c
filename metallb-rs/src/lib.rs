//! metallb-rs: a MetalLB-compatible load balancer for bare-metal Kubernetes.
//!
//! The library holds everything the `metallb-rs` binary runs, split along
//! the decide/do seam (see ARCHITECTURE.md): [`api`] describes the custom
//! resources, [`config`] turns a set of them into one validated [`config::Config`].

pub mod allocator;
pub mod api;
pub mod certs;
pub mod clock;
pub mod config;
pub mod controller;
pub mod event;
pub mod k8s;
pub mod logging;
pub mod manifests;
pub mod memory;
pub mod metrics;
pub mod net;
pub mod report;
pub mod service;
pub mod service_key;
pub mod speaker;
pub mod tls;
