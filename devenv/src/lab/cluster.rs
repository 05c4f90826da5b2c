//! Bringing a whole lab up and down: network (netns), API server (the
//! `lab-apiserver` crate's binary), the node-namespace forwarders, the
//! controller-manager stand-ins, node agents, metallb-rs controller and
//! speakers; and the [`Cluster`](crate::cluster::Cluster) handle the e2e
//! suites drive it through.
//!
//! One module per concern: `layout` (the ports and paths of a lab), `up`
//! (up, down, and the fresh lab a chart spec gets), `bootstrap` (the
//! MetalLB CRDs, namespace, RBAC and webhooks an API server gets first),
//! `kubeconfigs` (a kubeconfig per MetalLB component), `components`
//! (starting the controller replicas and speakers), `scrape` (GETs on a
//! loopback port: health, readiness, metrics), `dev_env` (the dev-env's
//! MetalLB configuration) and `handle` (the `Cluster` implementation).
//! This module keeps the spec and the handle's state.

mod bootstrap;
mod components;
mod dev_env;
mod handle;
mod kubeconfigs;
mod layout;
mod scrape;
mod up;

pub use super::paths::lab_dir;
pub use bootstrap::{Webhooks, install_metallb_api};
pub use kubeconfigs::component_kubeconfig;
pub use layout::{
    DEV_ENV_L2_V4, DEV_ENV_L2_V6, SPEAKER_PLAIN_METRICS, api_port, controller_metrics_port,
    secure_metrics_port,
};
pub use up::{down, up};

use super::frr::LabRouter;
use super::netns::{self, Family};
use super::process::Processes;
use super::routers;
use crate::cluster::Protocol;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// A kube client for the kubeconfig at `path`, and for a parsed one:
/// metallb-rs's, the one every tool uses.
pub use metallb_rs::k8s::{client_for as client, client_from};

/// What `cargo xtask dev-env --provider lab` builds.
#[derive(Debug, Clone)]
pub struct LabSpec {
    /// Lab name: prefix of every namespace.
    pub name: String,
    /// Number of nodes (control plane included).
    pub nodes: usize,
    /// Address families.
    pub family: Family,
    /// Directory with `metallb-rs`, `lab-apiserver`, `lab-forward`,
    /// `lab-controller-manager` and `lab-agent`.
    pub bin_dir: PathBuf,
    /// API server port on 127.0.0.1 (root and every node namespace).
    pub api_port: u16,
    /// Log level for metallb-rs.
    pub log_level: String,
    /// Who runs metallb-rs in it.
    pub metallb: Metallb,
    /// Bgp: upstream's four FRR routers, one in the external namespace,
    /// each peering with every node (see [`super::routers`]); Layer2: no
    /// router (those left running are stopped).
    pub protocol: Protocol,
}

impl LabSpec {
    /// The defaults: lab "lab", 3 nodes, dual stack, port 6443.
    pub fn new(bin_dir: &Path) -> Self {
        Self {
            name: "lab".into(),
            nodes: 3,
            family: Family::Dual,
            bin_dir: bin_dir.to_owned(),
            api_port: 6443,
            log_level: "info".into(),
            metallb: Metallb::Lab,
            protocol: Protocol::Layer2,
        }
    }
}

/// Who runs metallb-rs in a lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metallb {
    /// The lab starts the controller (root namespace) and a speaker per
    /// node namespace itself, with the manifests' CRDs, RBAC and
    /// webhooks installed first.
    Lab,
    /// The Helm chart, installed later (`charts/tests/helm_action.py`):
    /// the lab makes only the release's namespace (the chart brings the
    /// CRDs, RBAC and workloads, and Helm refuses to adopt objects it did
    /// not make), and each node's pod runner plays the chart's controller
    /// and speaker Pods with the lab's metallb-rs binary.
    Chart,
    /// Nobody: only the cluster, with the MetalLB CRDs and RBAC.
    Off,
}

/// The process name of the standby controller replica.
const STANDBY: &str = "controller-standby";

/// A running lab.
pub struct LabCluster {
    name: String,
    dir: PathBuf,
    kubeconfig: PathBuf,
    lab: netns::Lab,
    family: Family,
    bin_dir: PathBuf,
    log_level: String,
    api_port: u16,
    protocol: Protocol,
}

impl LabCluster {
    /// The lab's state directory (logs, pid files, kubeconfig).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn namespace_of(&self, node: &str) -> Result<&str> {
        self.lab
            .node(node)
            .map(|n| n.namespace.as_str())
            .with_context(|| format!("no node {node:?} in lab {:?}", self.name))
    }

    fn procs(&self) -> Processes {
        Processes::new(&self.dir)
    }

    /// The external host's network namespace.
    pub fn external_namespace(&self) -> &str {
        &self.lab.external.namespace
    }

    /// Puts `node`'s routes to the BGP lab's multi-hop network back after
    /// its link came up again (the kernel dropped them with the link).
    fn restore_routes(&self, node: &str) -> Result<()> {
        let host = self
            .lab
            .node(node)
            .with_context(|| format!("no node {node:?} in lab {:?}", self.name))?;
        netns::restore_routes(host)?;
        Ok(())
    }

    /// The lab's BGP router; an error when the lab runs none (not brought
    /// up with `--protocol bgp`).
    pub fn bgp_router(&self) -> Result<LabRouter> {
        if self.protocol != Protocol::Bgp {
            bail!(
                "lab {:?} runs no BGP router: bring it up with `cargo xtask dev-env --protocol bgp`",
                self.name
            );
        }
        Ok(LabRouter::new(&self.dir, &self.lab.external.namespace))
    }

    /// The daemons of router `name` (one of [`routers::ROUTERS`]); an error
    /// when the lab runs no such router.
    pub fn bgp_router_named(&self, name: &str) -> Result<LabRouter> {
        self.bgp_router()?;
        let spec = routers::spec(name)
            .with_context(|| format!("lab {:?} has no BGP router {name:?}", self.name))?;
        Ok(routers::lab_router(&self.dir, &self.name, spec))
    }

    /// The pid of lab process `name` (`controller`, `speaker-<node>`, ...).
    pub fn pid_of(&self, name: &str) -> Option<i32> {
        self.procs().pid(name)
    }
}
