//! The Docker side of a kind dev-env: the second network and its
//! attachments, the FRR container, the nodes' and routers' addresses and
//! bridges, and the ranges chosen on the networks.

use super::ranges::{DEV_ENV_BLOCK, E2E_BLOCK, Ranges, families, split_block};
use super::{DEV_ENV_LABEL, SECONDARY_V6_SUBNET, secondary_network, state_dir};
use crate::docker::{self, Families};
use crate::kind::config::IpFamily;
use crate::kind::frr;
use anyhow::{Context, Result};
use bollard::Docker;
use std::net::IpAddr;
use std::path::Path;

/// Creates the second network when missing and connects every node.
pub async fn attach_secondary_network(docker: &Docker, name: &str, nodes: &[String]) -> Result<()> {
    let net = secondary_network(name);
    if docker.inspect_network(&net, None).await.is_err() {
        docker
            .create_network(bollard::models::NetworkCreateRequest {
                name: net.clone(),
                driver: Some("bridge".into()),
                enable_ipv6: Some(true),
                ipam: Some(bollard::models::Ipam {
                    config: Some(vec![bollard::models::IpamConfig {
                        subnet: Some(SECONDARY_V6_SUBNET.into()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                labels: Some([(DEV_ENV_LABEL.to_owned(), name.to_owned())].into()),
                ..Default::default()
            })
            .await
            .with_context(|| format!("creating docker network {net}"))?;
    }
    for node in nodes {
        let inspected = docker
            .inspect_container(node, None)
            .await
            .with_context(|| format!("inspecting kind node container {node}"))?;
        let attached = inspected
            .network_settings
            .and_then(|s| s.networks)
            .is_some_and(|n| n.contains_key(&net));
        if !attached {
            docker
                .connect_network(
                    &net,
                    bollard::models::NetworkConnectRequest {
                        container: node.clone(),
                        endpoint_config: None,
                    },
                )
                .await
                .with_context(|| format!("connecting {node} to {net}"))?;
        }
    }
    Ok(())
}

/// Chooses the dev-env and e2e ranges on `kind_net` and the e2e ranges
/// on cluster `name`'s second network, and writes them where
/// [`KindCluster::open`](super::KindCluster::open) reads them.
pub async fn choose_ranges(
    docker: &Docker,
    kind_net: &str,
    name: &str,
    family: IpFamily,
) -> Result<Ranges> {
    let network = docker::inspect(docker, kind_net).await?;
    let mut ranges = Ranges::default();
    for block in docker::free_block(&network, families(family), DEV_ENV_BLOCK + E2E_BLOCK)? {
        let (dev, e2e) = split_block(&block)?;
        ranges.dev_env.push(dev.to_string());
        ranges.e2e.push(e2e.to_string());
    }
    let secondary = docker::inspect(docker, &secondary_network(name)).await?;
    // The second network has IPv6 always and IPv4 where Docker gave it a
    // subnet; take what is there.
    for f in [Families::Ipv4, Families::Ipv6] {
        if let Ok(blocks) = docker::free_block(&secondary, f, E2E_BLOCK) {
            ranges
                .secondary
                .extend(blocks.iter().map(ToString::to_string));
        }
    }
    let dir = state_dir(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("ranges.json"), serde_json::to_vec_pretty(&ranges)?)?;
    Ok(ranges)
}

/// Starts FRR on the kind network (once), configured to peer with every
/// node; returns its addresses.
pub(super) async fn start_frr(
    docker: &Docker,
    name: &str,
    dir: &Path,
    nodes: &[String],
) -> Result<Vec<IpAddr>> {
    let kind_net = docker::network_name();
    let mut node_addresses = Vec::new();
    for node in nodes {
        node_addresses.extend(container_addresses(docker, node, &kind_net).await?);
    }
    let conf_dir = dir.join("frr");
    std::fs::create_dir_all(&conf_dir)?;
    std::fs::write(conf_dir.join("daemons"), frr::daemons())?;
    std::fs::write(
        conf_dir.join("frr.conf"),
        crate::frr::frr_conf(&frr::router_config(&node_addresses))?,
    )?;
    std::fs::write(conf_dir.join("vtysh.conf"), "")?;
    let container = frr::container(name);
    if docker.inspect_container(&container, None).await.is_err() {
        docker
            .create_container(
                Some(
                    bollard::query_parameters::CreateContainerOptionsBuilder::default()
                        .name(&container)
                        .build(),
                ),
                bollard::models::ContainerCreateBody {
                    image: Some(frr::IMAGE.into()),
                    labels: Some([(DEV_ENV_LABEL.to_owned(), name.to_owned())].into()),
                    host_config: Some(bollard::models::HostConfig {
                        privileged: Some(true),
                        network_mode: Some(kind_net.clone()),
                        binds: Some(vec![format!("{}:/etc/frr", conf_dir.display())]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )
            .await
            .with_context(|| {
                format!(
                    "creating the FRR container from {} (does Docker reach its registry?)",
                    frr::IMAGE
                )
            })?;
        docker
            .start_container(&container, None)
            .await
            .with_context(|| format!("starting {container}"))?;
    }
    container_addresses(docker, &container, &kind_net).await
}

/// `container`'s addresses on `network`.
pub(super) async fn container_addresses(
    docker: &Docker,
    container: &str,
    network: &str,
) -> Result<Vec<IpAddr>> {
    let inspected = docker
        .inspect_container(container, None)
        .await
        .with_context(|| format!("inspecting container {container}"))?;
    let endpoint = inspected
        .network_settings
        .and_then(|s| s.networks)
        .and_then(|mut n| n.remove(network))
        .with_context(|| format!("container {container} is not on network {network}"))?;
    Ok([endpoint.ip_address, endpoint.global_ipv6_address]
        .into_iter()
        .flatten()
        .filter_map(|a| a.parse().ok())
        .collect())
}

/// The worker containers of cluster `name`, in kind's order.
pub(super) async fn worker_names(docker: &Docker, name: &str) -> Result<Vec<String>> {
    let filter = format!("io.x-k8s.kind.cluster={name}");
    let containers = docker
        .list_containers(Some(
            bollard::query_parameters::ListContainersOptionsBuilder::default()
                .filters(&[("label", vec![filter.as_str()])].into())
                .build(),
        ))
        .await?;
    let mut workers: Vec<String> = containers
        .into_iter()
        .flat_map(|c| c.names.unwrap_or_default())
        .map(|n| n.trim_start_matches('/').to_owned())
        .filter(|n| n.contains("-worker"))
        .collect();
    workers.sort_by_key(|n| (n.len(), n.clone()));
    Ok(workers)
}

/// The Linux bridge behind a docker bridge network: its
/// `com.docker.network.bridge.name` option, else `br-` and the first 12
/// characters of its id (what dockerd names it).
pub fn bridge_name(network: &bollard::models::NetworkInspect) -> Option<String> {
    if let Some(name) = network
        .options
        .as_ref()
        .and_then(|o| o.get("com.docker.network.bridge.name"))
    {
        return Some(name.clone());
    }
    let id = network.id.as_deref()?;
    Some(format!("br-{}", id.get(..12)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridge_names_follow_dockerd() {
        let mut net = bollard::models::NetworkInspect {
            id: Some("0123456789abcdef0123".into()),
            ..Default::default()
        };
        assert_eq!(bridge_name(&net).as_deref(), Some("br-0123456789ab"));
        net.options = Some(
            [(
                "com.docker.network.bridge.name".to_owned(),
                "kindbr".to_owned(),
            )]
            .into(),
        );
        assert_eq!(bridge_name(&net).as_deref(), Some("kindbr"));
        assert_eq!(bridge_name(&Default::default()), None);
    }
}
