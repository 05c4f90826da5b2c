//! The kind provider: a cluster of Docker containers made by the `kind`
//! CLI, with our image loaded, `metallb-native.yaml` applied through
//! kube's client and an address pool computed from the docker network.
//! It needs the `kind` binary, a Docker engine and registry access for
//! the node image, none of which the lab needs; the decisions (config,
//! argument lists, objects) are pure functions tested here, the rest is
//! a thin sequence of calls.

pub mod apply;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod frr;
pub mod metrics;

pub use cluster::{KindCluster, KindSpec, Protocol, down, up};

use anyhow::{Result, bail};
use serde_json::Value;

/// Checks `objects` the way the controller will (schema, then the whole
/// set: overlaps, references); dev-env never writes a config the cluster
/// would reject.
pub fn validate(objects: &[Value]) -> Result<()> {
    let schemas = metallb_rs::config::load::Schemas::compile();
    let mut loaded = metallb_rs::config::load::Loaded::default();
    for o in objects {
        loaded.add_value(std::path::Path::new("dev-env"), o.clone(), &schemas);
    }
    let mut problems: Vec<String> = loaded.errors.iter().map(|(_, e)| e.to_string()).collect();
    if let Err(errors) = metallb_rs::config::Config::build(
        &loaded.resources,
        &metallb_rs::config::Options::default(),
    ) {
        problems.extend(errors.0.iter().map(ToString::to_string));
    }
    if !problems.is_empty() {
        bail!(
            "dev-env built an invalid MetalLB config: {}",
            problems.join("; ")
        );
    }
    Ok(())
}
