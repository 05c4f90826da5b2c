//! Bringing a kind dev cluster up and down, and the
//! [`Cluster`](crate::cluster::Cluster) handle the e2e suites drive it
//! through. Upstream's dev-env, step by step: kind
//! cluster (1 control plane + 2 workers), a second docker network on every
//! node, our image built and loaded, `metallb-native.yaml` applied, the
//! exclude-from-LB label removed, wait for the controller and speakers,
//! then the layer2 pool (computed from the docker network, never
//! overlapping an address in use) or the FRR router for bgp.
//!
//! This module is that sequence ([`up`], [`down`]); what it calls lives
//! in one module per concern: `ranges` (the address ranges and the
//! layer2 objects, pure), `containers` (networks, the FRR container,
//! addresses), `components` (node labels and readiness through the API)
//! and `handle` (the `Cluster` implementation).

mod components;
mod containers;
mod handle;
mod ranges;

pub use components::components_ready;
pub use containers::{attach_secondary_network, bridge_name, choose_ranges};
pub use ranges::{Ranges, layer2_objects, split_block};

use super::config::{IpFamily, KindConfig};
use super::{apply, cli, frr};
use crate::cluster::NodeInfo;
use crate::docker;
use anyhow::{Context, Result, bail};
use components::{remove_exclude_label, wait_for_components};
use containers::start_frr;
use ranges::parse_ranges;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::cluster::Protocol;

/// Label on every object and container dev-env makes (value: cluster name).
pub const DEV_ENV_LABEL: &str = "metallb-rs.dev/dev-env";
/// Upstream's second network for the interface-selector tests.
const SECONDARY_V6_SUBNET: &str = "fc00:f853:ccd:e791::/64";
const NAMESPACE: &str = metallb_rs::api::DEFAULT_NAMESPACE;

/// What `cargo xtask dev-env --provider kind` builds.
#[derive(Debug, Clone)]
pub struct KindSpec {
    /// Cluster name (`kind create cluster --name`).
    pub name: String,
    /// Address families of the cluster.
    pub ip_family: IpFamily,
    /// layer2 or bgp.
    pub protocol: Protocol,
    /// Node image; kind's default when absent.
    pub node_image: Option<String>,
    /// Build our image and load it (false: it is already loaded, as CI does
    /// after building images once).
    pub build_images: bool,
    /// The image reference the manifests run.
    pub image: String,
    /// `--log-level` of both components.
    pub log_level: String,
    /// Workers besides the control plane.
    pub workers: usize,
}

/// Where cluster `name` keeps its kubeconfig, config and ranges.
pub fn state_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join("metallb-rs-kind").join(name)
}

/// The second docker network of cluster `name`.
pub fn secondary_network(name: &str) -> String {
    format!("{name}-net2")
}

/// A running kind dev cluster.
pub struct KindCluster {
    name: String,
    kubeconfig: PathBuf,
    nodes: Vec<NodeInfo>,
    ranges: Ranges,
    /// Bridge of the kind network and of the second network.
    bridges: (String, Option<String>),
    /// Address of the API server (the control plane's, port 6443).
    api_address: Option<IpAddr>,
    /// Default gateways of the kind network (restored by `node_up`).
    gateways: Vec<IpAddr>,
    /// The FRR container's addresses on the kind network; empty without
    /// `--protocol bgp`.
    router_addresses: Vec<IpAddr>,
}

/// Creates (or reuses) kind cluster `spec.name` and installs metallb-rs.
pub fn up(spec: &KindSpec) -> Result<KindCluster> {
    crate::runtime()?.block_on(up_async(spec))
}

async fn up_async(spec: &KindSpec) -> Result<KindCluster> {
    cli::require()?;
    let docker = docker::connect().await?;
    let dir = state_dir(&spec.name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let config = KindConfig::new(spec.ip_family, spec.workers, spec.node_image.as_deref());
    if cli::clusters()?.contains(&spec.name) {
        println!("kind cluster {:?} exists: reusing it", spec.name);
    } else {
        let path = dir.join("kind-config.yaml");
        std::fs::write(&path, config.to_yaml()?)
            .with_context(|| format!("writing {}", path.display()))?;
        cli::run(&cli::create_args(&spec.name, &path))?;
    }
    let kubeconfig = dir.join("kubeconfig");
    cli::run(&cli::export_kubeconfig_args(&spec.name, &kubeconfig))?;
    let node_names = config.node_names(&spec.name);
    attach_secondary_network(&docker, &spec.name, &node_names).await?;

    if spec.build_images {
        let built = crate::image::build_from_source(&crate::project_root(), &spec.image).await?;
        println!(
            "image {} ({:.1} MiB)",
            built.reference,
            mib(built.size_bytes)
        );
    }
    // With --no-build-images the image must already be in Docker (CI
    // loads the one its images job built).
    crate::image::load_into_kind(&spec.name, &spec.image)?;

    let client = metallb_rs::k8s::client_for(&kubeconfig).await?;
    let opts = metallb_rs::manifests::NativeOptions {
        image: spec.image.clone(),
        pull_policy: "IfNotPresent".into(),
        log_level: spec.log_level.clone(),
        ..Default::default()
    };
    apply::apply_all(
        &client,
        &metallb_rs::manifests::native_objects(&opts),
        Duration::from_secs(30),
    )
    .await?;
    remove_exclude_label(&client).await?;
    wait_for_components(&client, Duration::from_secs(300)).await?;

    let kind_net = docker::network_name();
    let ranges = choose_ranges(&docker, &kind_net, &spec.name, spec.ip_family).await?;
    let objects = match spec.protocol {
        Protocol::Layer2 => layer2_objects(&spec.name, &parse_ranges(&ranges.dev_env)?)?,
        Protocol::Bgp => {
            let routers = start_frr(&docker, &spec.name, &dir, &node_names).await?;
            frr::objects(
                NAMESPACE,
                &[crate::frr::BgpRouter::single("frr", &routers)],
                (DEV_ENV_LABEL, &spec.name),
            )
        }
    };
    super::validate(&objects)?;
    apply::apply_all(&client, &objects, Duration::from_secs(30)).await?;
    // Containers started after the ranges were chosen (FRR) must not sit
    // inside them: Docker reserves nothing for us (upstream #718).
    let network = docker::inspect(&docker, &kind_net).await?;
    let chosen = parse_ranges(&ranges.dev_env)?
        .into_iter()
        .chain(parse_ranges(&ranges.e2e)?)
        .collect::<Vec<_>>();
    let clashes = docker::conflicts(&chosen, &network);
    if !clashes.is_empty() {
        bail!(
            "containers took addresses inside the dev-env ranges after they were chosen: {clashes:?}; rerun dev-env to choose again"
        );
    }
    KindCluster::open_with(&docker, &spec.name, &kind_net).await
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Removes cluster `name`, its second network, its FRR container and its
/// state directory; returns what it removed.
pub fn down(name: &str) -> Result<Vec<String>> {
    crate::runtime()?.block_on(async {
        let mut removed = Vec::new();
        if cli::available() && cli::clusters()?.iter().any(|c| c == name) {
            cli::run(&cli::delete_args(name))?;
            removed.push(format!("kind cluster {name}"));
        }
        if let Ok(docker) = docker::connect().await {
            let filter = format!("{DEV_ENV_LABEL}={name}");
            let containers = docker
                .list_containers(Some(
                    bollard::query_parameters::ListContainersOptionsBuilder::default()
                        .all(true)
                        .filters(&[("label", vec![filter.as_str()])].into())
                        .build(),
                ))
                .await?;
            for c in containers {
                let id = c.id.unwrap_or_default();
                docker
                    .remove_container(
                        &id,
                        Some(
                            bollard::query_parameters::RemoveContainerOptionsBuilder::default()
                                .force(true)
                                .build(),
                        ),
                    )
                    .await?;
                removed.push(format!(
                    "container {}",
                    c.names.unwrap_or_default().join(",")
                ));
            }
            let net = secondary_network(name);
            if let Ok(inspected) = docker.inspect_network(&net, None).await {
                // Nodes still attached (kind delete failed or was not
                // run) would keep the network alive.
                for container in inspected.containers.unwrap_or_default().into_keys() {
                    docker
                        .disconnect_network(
                            &net,
                            bollard::models::NetworkDisconnectRequest {
                                container,
                                force: Some(true),
                            },
                        )
                        .await?;
                }
                docker.remove_network(&net).await?;
                removed.push(format!("docker network {net}"));
            }
        }
        let dir = state_dir(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
            removed.push(format!("directory {}", dir.display()));
        }
        Ok(removed)
    })
}
