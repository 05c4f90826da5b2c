//! The lab provider: a kind-shaped cluster made of network namespaces on
//! this machine, with its own API server. Runs anywhere Linux gives root.

pub mod agent;
pub mod backend;
pub mod cluster;
pub mod endpoints;
pub mod enter;
pub mod forward;
pub mod frr;
pub mod healthcheck;
pub mod latency;
pub mod netns;
pub mod nodelifecycle;
pub mod paths;
pub mod played;
pub mod probe;
pub mod process;
pub mod proxy;
pub mod rounds;
pub mod routers;
pub mod scheduler;
pub mod workloads;
