//! Bringing a kind dev cluster up and down, and the [`Cluster`] handle the
//! e2e suites drive it through. Upstream's dev-env, step by step: kind
//! cluster (1 control plane + 2 workers), a second docker network on every
//! node, our image built and loaded, `metallb-native.yaml` applied, the
//! exclude-from-LB label removed, wait for the controller and speakers,
//! then the layer2 pool (computed from the docker network, never
//! overlapping an address in use) or the FRR router for bgp.

use super::config::{IpFamily, KindConfig};
use super::{apply, cli, frr};
use crate::cluster::{Cluster, NodeInfo, PoolRanges, StopSignal};
use crate::docker::{self, AddressRange, Families};
use anyhow::{Context, Result, bail};
use bollard::Docker;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

pub use crate::cluster::Protocol;

/// Label on every object and container dev-env makes (value: cluster name).
pub const DEV_ENV_LABEL: &str = "metallb-rs.dev/dev-env";
/// Nodes carry it in kind; MetalLB would then skip them.
const EXCLUDE_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// Upstream's second network for the interface-selector tests.
const SECONDARY_V6_SUBNET: &str = "fc00:f853:ccd:e791::/64";
/// Addresses of the dev-env's own pool, per family.
const DEV_ENV_BLOCK: u32 = 16;
/// Addresses below it that the e2e suites use for their pools.
const E2E_BLOCK: u32 = 20;
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

/// Address ranges chosen at dev-env time, kept for e2e runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ranges {
    /// The dev-env's own pool (`dev-env-l2`), one range per family.
    pub dev_env: Vec<String>,
    /// Free ranges for the suites' pools on the kind network.
    pub e2e: Vec<String>,
    /// Free ranges on the second network.
    pub secondary: Vec<String>,
}

/// Splits the block taken from the top of a subnet: the top
/// [`DEV_ENV_BLOCK`] addresses for the dev-env pool, the rest for e2e.
pub fn split_block(block: &AddressRange) -> Result<(AddressRange, AddressRange)> {
    let want = u128::from(DEV_ENV_BLOCK + E2E_BLOCK);
    if block.len() < want {
        bail!("{block}: need {want} addresses to split");
    }
    block
        .split_top(u128::from(DEV_ENV_BLOCK))
        .with_context(|| format!("{block}: cannot split off {DEV_ENV_BLOCK} addresses"))
}

fn families(f: IpFamily) -> Families {
    match f {
        IpFamily::Ipv4 => Families::Ipv4,
        IpFamily::Ipv6 => Families::Ipv6,
        IpFamily::Dual => Families::Dual,
    }
}

/// The dev-env layer2 objects: pool `dev-env-l2` over `ranges` and an
/// L2Advertisement of every pool, labelled as dev-env's.
pub fn layer2_objects(cluster: &str, ranges: &[AddressRange]) -> Result<Vec<Value>> {
    let mut pool = serde_json::to_value(docker::address_pool("dev-env-l2", NAMESPACE, ranges))?;
    pool["metadata"]["labels"] = json!({ DEV_ENV_LABEL: cluster });
    Ok(vec![
        pool,
        json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
            "metadata": { "name": "empty", "namespace": NAMESPACE, "labels": { DEV_ENV_LABEL: cluster } },
            "spec": {},
        }),
    ])
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

/// The deployment is Available and the daemon set has every pod ready.
pub fn components_ready(deployment: &Deployment, daemonset: &DaemonSet) -> bool {
    let ds_ready = daemonset.status.as_ref().is_some_and(|s| {
        s.desired_number_scheduled > 0
            && s.number_ready == s.desired_number_scheduled
            && s.updated_number_scheduled.unwrap_or(0) == s.desired_number_scheduled
    });
    available(deployment) && ds_ready
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

fn parse_ranges(ranges: &[String]) -> Result<Vec<AddressRange>> {
    ranges
        .iter()
        .map(|r| r.parse().map_err(anyhow::Error::msg))
        .collect()
}

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

async fn remove_exclude_label(client: &kube::Client) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({ "metadata": { "labels": { EXCLUDE_LB: null } } });
    for node in nodes.list(&ListParams::default()).await? {
        let name = node.metadata.name.unwrap_or_default();
        nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("removing {EXCLUDE_LB} from node {name}"))?;
    }
    Ok(())
}

/// Waits, with a spinner, until the controller is Available and every
/// speaker Ready.
async fn wait_for_components(client: &kube::Client, timeout: Duration) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(120));
    let deadline = Instant::now() + timeout;
    loop {
        let d = deployments.get_opt("controller").await?;
        let s = daemonsets.get_opt("speaker").await?;
        let ready_speakers = s
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .map(|s| (s.number_ready, s.desired_number_scheduled))
            .unwrap_or_default();
        spinner.set_message(format!(
            "waiting for metallb-rs: controller {}, speakers ready {}/{}",
            if d.as_ref().is_some_and(available) {
                "available"
            } else {
                "starting"
            },
            ready_speakers.0,
            ready_speakers.1
        ));
        if let (Some(d), Some(s)) = (&d, &s)
            && components_ready(d, s)
        {
            spinner.finish_with_message("metallb-rs: controller available, every speaker ready");
            return Ok(());
        }
        if Instant::now() > deadline {
            spinner.abandon();
            bail!(
                "metallb-rs did not become ready within {}s: see `kubectl -n {NAMESPACE} get pods` and `kubectl -n {NAMESPACE} logs -l app=metallb`",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn available(d: &Deployment) -> bool {
    d.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
        })
}

/// Chooses the dev-env and e2e ranges on `kind_net` and the e2e ranges
/// on cluster `name`'s second network, and writes them where
/// [`KindCluster::open`] reads them.
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
async fn start_frr(
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
async fn container_addresses(
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

impl KindCluster {
    /// The running cluster `name` that `dev-env --provider kind` made.
    pub fn open(name: &str) -> Result<Self> {
        crate::runtime()?.block_on(async {
            let docker = docker::connect().await?;
            Self::open_with(&docker, name, &docker::network_name()).await
        })
    }

    /// The cluster `name` whose nodes sit on docker network `kind_net`.
    pub async fn open_with(docker: &Docker, name: &str, kind_net: &str) -> Result<Self> {
        let dir = state_dir(name);
        let kubeconfig = dir.join("kubeconfig");
        let ranges: Ranges = std::fs::read(dir.join("ranges.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .with_context(|| {
                format!(
                    "no kind dev-env {name:?} here ({} is missing): run `cargo xtask dev-env --provider kind --name {name}` first",
                    dir.display()
                )
            })?;
        let network = docker::inspect(docker, kind_net).await?;
        let secondary = docker
            .inspect_network(&secondary_network(name), None)
            .await
            .ok();
        let mut nodes = Vec::new();
        let mut api_address = None;
        let workers = worker_names(docker, name).await?;
        for node in std::iter::once(format!("{name}-control-plane")).chain(workers) {
            let addresses = container_addresses(docker, &node, kind_net).await?;
            if node.ends_with("-control-plane") {
                api_address = addresses.first().copied();
            }
            nodes.push(NodeInfo {
                name: node,
                addresses,
            });
        }
        let gateways = network
            .ipam
            .as_ref()
            .and_then(|i| i.config.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|c| c.gateway.as_deref()?.parse().ok())
            .collect();
        // The router exists when dev-env ran with --protocol bgp.
        let router = frr::container(name);
        let router_addresses = if docker.inspect_container(&router, None).await.is_ok() {
            container_addresses(docker, &router, kind_net).await?
        } else {
            Vec::new()
        };
        Ok(Self {
            name: name.to_owned(),
            kubeconfig,
            nodes,
            ranges,
            router_addresses,
            bridges: (
                bridge_name(&network).context("the kind network has no bridge")?,
                secondary.as_ref().and_then(bridge_name),
            ),
            api_address,
            gateways,
        })
    }

    /// Deletes the dev-env's own MetalLB objects (its pool would otherwise
    /// hand the suites' services addresses first: pools are tried by
    /// name); returns what it deleted.
    pub fn remove_dev_env_config(&self) -> Result<Vec<String>> {
        let label = format!("{DEV_ENV_LABEL}={}", self.name);
        self.kube(async move |client| {
            apply::delete_metallb_config(&client, NAMESPACE, &label).await
        })
    }

    fn docker_exec(&self, node: &str, argv: &[&str]) -> Result<Output> {
        let mut full = vec!["docker", "exec", node];
        full.extend_from_slice(argv);
        crate::cluster::output(&full)
    }

    fn docker_exec_ok(&self, node: &str, argv: &[&str]) -> Result<()> {
        let out = self.docker_exec(node, argv)?;
        if !out.status.success() {
            bail!(
                "`{}` on {node} failed: {}",
                argv.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// `/metrics` at `ip` from inside `node`, with a token of the reader
    /// ServiceAccount (created with its binding when missing).
    fn scrape_metrics(&self, node: &str, ip: IpAddr) -> Result<String> {
        use k8s_openapi::api::authentication::v1::TokenRequest;
        use k8s_openapi::api::core::v1::ServiceAccount;
        let token = self.kube(async |client| {
            apply::apply_all(
                &client,
                &super::metrics::reader_objects(NAMESPACE),
                Duration::from_secs(5),
            )
            .await?;
            let request = TokenRequest::default();
            let answer = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
                .create_token_request(super::metrics::READER, &Default::default(), &request)
                .await?;
            answer
                .status
                .map(|s| s.token)
                .context("a TokenRequest without a token")
        })?;
        let argv = super::metrics::curl_argv(ip, &token);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let out = self.docker_exec(node, &argv)?;
        if !out.status.success() {
            bail!(
                "scraping https://{ip}/metrics on {node}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn kube<T>(&self, f: impl AsyncFnOnce(kube::Client) -> Result<T>) -> Result<T> {
        crate::runtime()?.block_on(async {
            let client = metallb_rs::k8s::client_for(&self.kubeconfig).await?;
            f(client).await
        })
    }
}

/// The worker containers of cluster `name`, in kind's order.
async fn worker_names(docker: &Docker, name: &str) -> Result<Vec<String>> {
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

/// The speaker pod on `node`.
async fn speaker_pod(client: &kube::Client, node: &str) -> Result<Option<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    Ok(pods
        .list(
            &ListParams::default()
                .labels("component=speaker")
                .fields(&format!("spec.nodeName={node}")),
        )
        .await?
        .items
        .into_iter()
        .next())
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Cluster for KindCluster {
    fn name(&self) -> &str {
        &self.name
    }
    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
    fn nodes(&self) -> Vec<NodeInfo> {
        self.nodes.clone()
    }
    fn exec_on_node(&self, node: &str, argv: &[&str]) -> Result<Output> {
        self.docker_exec(node, argv)
    }
    /// The external host is this machine, on the kind bridge (as upstream).
    fn exec_on_external(&self, argv: &[&str]) -> Result<Output> {
        crate::cluster::output(argv)
    }
    fn node_down(&self, node: &str) -> Result<()> {
        self.docker_exec_ok(node, &["ip", "link", "set", "eth0", "down"])
    }
    /// A kind node reaches the API server over eth0, the link this would
    /// take down: there is no data-plane link to cut alone.
    fn link_down(&self, node: &str) -> Result<()> {
        bail!(
            "kind cannot take {node}'s data-plane link down with its API path up: both are eth0 (use --provider lab)"
        )
    }
    fn link_up(&self, node: &str) -> Result<()> {
        bail!("kind cannot bring {node}'s data-plane link up alone: see link_down")
    }
    fn node_up(&self, node: &str) -> Result<()> {
        self.docker_exec_ok(node, &["ip", "link", "set", "eth0", "up"])?;
        // Link down dropped the default routes.
        for gw in &self.gateways {
            let family = if gw.is_ipv6() { "-6" } else { "-4" };
            self.docker_exec_ok(
                node,
                &[
                    "ip",
                    family,
                    "route",
                    "replace",
                    "default",
                    "via",
                    &gw.to_string(),
                ],
            )?;
        }
        Ok(())
    }
    /// Signals the speaker process on the node; the kubelet restarts the
    /// container after its back-off (kind has no way to keep it stopped
    /// without changing the DaemonSet for every node).
    fn stop_speaker(&self, node: &str, signal: StopSignal) -> Result<()> {
        let sig = match signal {
            StopSignal::Term => "-TERM",
            StopSignal::Kill => "-KILL",
            // Until the kubelet's liveness probe gives up on it.
            StopSignal::Pause => "-STOP",
        };
        self.docker_exec_ok(node, &["pkill", sig, "-f", "metallb-rs speaker"])
    }
    fn resume_speaker(&self, node: &str) -> Result<()> {
        self.docker_exec_ok(node, &["pkill", "-CONT", "-f", "metallb-rs speaker"])
    }
    fn start_speaker(&self, node: &str) -> Result<()> {
        let node = node.to_owned();
        self.kube(async move |client| {
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                if speaker_pod(&client, &node)
                    .await?
                    .is_some_and(|p| pod_ready(&p))
                {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    bail!("the speaker on {node} is not Ready after 120 s");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    }
    fn restart_controller(&self) -> Result<()> {
        self.kube(async |client| {
            let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
            let lp = ListParams::default().labels("component=controller");
            let old: Vec<String> = pods
                .list(&lp)
                .await?
                .items
                .into_iter()
                .filter_map(|p| p.metadata.uid)
                .collect();
            pods.delete_collection(&DeleteParams::default(), &lp)
                .await?;
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let list = pods.list(&lp).await?.items;
                if list.iter().any(|p| {
                    pod_ready(p) && p.metadata.uid.as_ref().is_some_and(|u| !old.contains(u))
                }) {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    bail!("no new controller pod is Ready 120 s after the restart");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    }
    /// Force-deletes the leader pod (no grace: it cannot release its
    /// lease) and waits until the Deployment's new pod holds the lease.
    fn controller_takeover(&self) -> Result<()> {
        self.kube(async |client| {
            let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
            let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
            let holder = async || -> Result<Option<String>> {
                Ok(leases
                    .get_opt(metallb_rs::controller::run::LEASE_NAME)
                    .await?
                    .and_then(|l| l.spec?.holder_identity))
            };
            let leader = holder().await?.context("no controller holds the lease")?;
            pods.delete(&leader, &DeleteParams::default().grace_period(0))
                .await?;
            // The lease outlives the killed leader by its duration (15 s).
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let now = holder().await?;
                if let Some(now) = now.filter(|h| *h != leader)
                    && pods.get_opt(&now).await?.as_ref().is_some_and(pod_ready)
                {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    bail!("no new controller pod took the lease 120 s after deleting {leader}");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    }
    /// Drops the node's traffic to the API server's port; the rest of its
    /// network keeps working.
    /// Not supported on kind: its nodes reach the API server straight over
    /// the kind network, with no forwarder of ours in the path to delay.
    fn set_api_latency(
        &self,
        node: &str,
        _: Option<std::ops::Range<std::time::Duration>>,
    ) -> Result<()> {
        bail!(
            "setting {node}'s API latency is not supported on kind: its nodes reach the API server directly, with no lab forwarder in the path (use --provider lab)"
        )
    }
    fn set_api_reachable(&self, node: &str, reachable: bool) -> Result<()> {
        let api = self
            .api_address
            .context("the control plane's address is unknown")?
            .to_string();
        let op = if reachable { "-D" } else { "-I" };
        let tool = if api.contains(':') {
            "ip6tables"
        } else {
            "iptables"
        };
        self.docker_exec_ok(
            node,
            &[
                tool, op, "OUTPUT", "-p", "tcp", "-d", &api, "--dport", "6443", "-j", "DROP",
            ],
        )
    }
    /// On the controller pod's node, with the reader's token.
    fn controller_metrics(&self) -> Result<String> {
        let (node, ip) = self.kube(async |client| {
            let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
            let pod = pods
                .list(&ListParams::default().labels("component=controller"))
                .await?
                .items
                .into_iter()
                .find(pod_ready)
                .context("no Ready controller pod")?;
            let node = pod.spec.and_then(|s| s.node_name);
            let ip = pod.status.and_then(|s| s.pod_ip);
            match (node, ip) {
                (Some(node), Some(ip)) => Ok((node, ip.parse::<IpAddr>()?)),
                _ => bail!("the controller pod has no node or IP yet"),
            }
        })?;
        self.scrape_metrics(&node, ip)
    }
    /// The speaker listens on every address of its node (host network).
    fn speaker_metrics(&self, node: &str) -> Result<String> {
        self.scrape_metrics(node, IpAddr::from([127, 0, 0, 1]))
    }
    fn pool_ranges(&self) -> PoolRanges {
        let pick = |list: &[String], v6: bool| list.iter().find(|r| r.contains(':') == v6).cloned();
        PoolRanges {
            v4: pick(&self.ranges.e2e, false),
            v6: pick(&self.ranges.e2e, true),
            secondary_v4: pick(&self.ranges.secondary, false),
        }
    }
    fn external_interface(&self, node_iface: &str) -> Result<String> {
        match node_iface {
            "eth0" => Ok(self.bridges.0.clone()),
            "eth1" => self
                .bridges
                .1
                .clone()
                .context("the second docker network is missing: rerun dev-env"),
            other => {
                bail!("kind nodes have eth0 (kind network) and eth1 (second network), not {other}")
            }
        }
    }
    /// This machine: the kind bridges are links of its own namespace.
    fn external_netns(&self) -> Result<Option<String>> {
        Ok(None)
    }
    fn router_addresses(&self) -> Vec<IpAddr> {
        self.router_addresses.clone()
    }
    /// The FRR container's namespace has no `ip netns` name; the BGP
    /// suite runs on the lab (see the CI matrix).
    fn router_netns(&self) -> Result<String> {
        bail!(
            "capturing what the router receives needs the lab's router namespace; run the BGP suite with --provider lab"
        )
    }
    fn vtysh(&self, command: &str) -> Result<String> {
        let container = self.router()?;
        let out = self.docker_exec(&container, &["vtysh", "-c", command])?;
        if !out.status.success() {
            bail!(
                "`vtysh -c {command:?}` in {container} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
    /// Restarts the FRR container and waits until bgpd answers again.
    fn restart_router(&self) -> Result<()> {
        let container = self.router()?;
        let out = duct::cmd("docker", ["restart", "-t", "5", container.as_str()])
            .stdout_capture()
            .stderr_capture()
            .unchecked()
            .run()?;
        if !out.status.success() {
            bail!(
                "docker restart {container} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        crate::wait::eventually(
            Duration::from_secs(30),
            &format!("bgpd in {container} answering vtysh"),
            || {
                self.vtysh(crate::frr::NEIGHBORS_COMMAND)
                    .map(|o| crate::frr::parse_neighbors(&o).ok())
            },
        )?;
        Ok(())
    }
    /// Runs in the FRR container, whose kernel table holds FRR's routes.
    fn exec_on_router(&self, argv: &[&str]) -> Result<Output> {
        let container = self.router()?;
        self.docker_exec(&container, argv)
    }
}

impl KindCluster {
    /// The FRR container, if dev-env made one.
    fn router(&self) -> Result<String> {
        if self.router_addresses.is_empty() {
            bail!(
                "kind cluster {:?} has no FRR router: run `cargo xtask dev-env --provider kind --protocol bgp`",
                self.name
            );
        }
        Ok(frr::container(&self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn range(a: &str, b: &str) -> AddressRange {
        AddressRange {
            first: a.parse().expect("first"),
            last: b.parse().expect("last"),
        }
    }

    #[rstest]
    #[case::v4(
        range("172.18.255.219", "172.18.255.254"),
        "172.18.255.239-172.18.255.254",
        "172.18.255.219-172.18.255.238"
    )]
    #[case::v6(
        range("fc00:f853:ccd:e793::ffdc", "fc00:f853:ccd:e793::ffff"),
        "fc00:f853:ccd:e793::fff0-fc00:f853:ccd:e793::ffff",
        "fc00:f853:ccd:e793::ffdc-fc00:f853:ccd:e793::ffef"
    )]
    fn the_top_of_the_block_is_dev_envs_the_rest_e2es(
        #[case] block: AddressRange,
        #[case] dev: &str,
        #[case] e2e: &str,
    ) {
        let (d, e) = split_block(&block).expect("split");
        assert_eq!((d.to_string().as_str(), e.to_string().as_str()), (dev, e2e));
    }

    #[test]
    fn a_block_too_small_to_split_is_refused() {
        let err = split_block(&range("10.0.0.1", "10.0.0.20")).expect_err("20 < 36");
        assert!(err.to_string().contains("need 36"), "{err}");
    }

    #[test]
    fn layer2_objects_are_a_valid_config() {
        let objects = layer2_objects(
            "kind",
            &[
                range("172.18.255.239", "172.18.255.254"),
                range("fc00:f853:ccd:e793::fff0", "fc00:f853:ccd:e793::ffff"),
            ],
        )
        .expect("objects");
        super::super::validate(&objects).expect("valid");
        assert_eq!(objects[0]["metadata"]["labels"][DEV_ENV_LABEL], "kind");
        assert_eq!(
            objects[0]["spec"]["addresses"],
            json!([
                "172.18.255.239-172.18.255.254",
                "fc00:f853:ccd:e793::fff0-fc00:f853:ccd:e793::ffff"
            ])
        );
        let bad =
            layer2_objects("kind", &[range("172.18.255.254", "172.18.255.239")]).expect("objects");
        assert!(
            super::super::validate(&bad).is_err(),
            "reversed range accepted"
        );
    }

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

    #[test]
    fn readiness_needs_an_available_controller_and_every_speaker() {
        let deployment = |available: &str| -> Deployment {
            serde_json::from_value(json!({ "status": { "conditions": [{ "type": "Available", "status": available }] } }))
                .expect("deployment")
        };
        let ds = |ready: i32, desired: i32| -> DaemonSet {
            serde_json::from_value(json!({ "status": {
                "numberReady": ready, "desiredNumberScheduled": desired, "updatedNumberScheduled": desired,
                "currentNumberScheduled": desired, "numberMisscheduled": 0 } }))
            .expect("daemonset")
        };
        assert!(components_ready(&deployment("True"), &ds(3, 3)));
        assert!(!components_ready(&deployment("True"), &ds(2, 3)));
        assert!(!components_ready(&deployment("False"), &ds(3, 3)));
        assert!(!components_ready(&deployment("True"), &ds(0, 0)));
    }

    #[test]
    fn ranges_read_back_as_typed_ranges() {
        let parsed = parse_ranges(&["10.0.0.5-10.0.0.9".into()]).expect("parse");
        assert_eq!(parsed, vec![range("10.0.0.5", "10.0.0.9")]);
        assert!(parse_ranges(&["10.0.0.5".into()]).is_err());
    }
}
