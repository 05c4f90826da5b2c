//! What the Docker tests share: their runtime, the engine client, the
//! image of this tree (built once), containers of it, test networks, and
//! the [`Cleanup`] of what testcontainers cannot own.

use bollard::Docker;
use bollard::models::{
    EndpointIpamConfig, EndpointSettings, Ipam, IpamConfig, NetworkConnectRequest,
    NetworkCreateRequest,
};
use bollard::query_parameters::{
    ListNetworksOptions, RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder,
};
use devenv::docker;
use devenv::image::{self, BuiltImage};
use ipnet::IpNet;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};
use testcontainers::core::WaitFor;
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, ContainerRequest, GenericImage, ImageExt};
use tokio::sync::OnceCell;

/// Marks what these tests create, so leftovers are easy to find
/// (`docker ps -a --filter label=dev.metallb-rs.test`).
const TEST_LABEL: &str = "dev.metallb-rs.test";

/// A running container of the image; testcontainers removes it (forced)
/// when this drops.
pub(crate) type Container = ContainerAsync<GenericImage>;

/// Runs one test on the runtime every test of this binary shares.
/// testcontainers hands all containers alive at once one engine client,
/// and a client's connections live on the runtime that opened them: with
/// a runtime per test (`#[tokio::test]`), a test whose runtime ended
/// would leave the others a client with dead connections.
pub(crate) fn run(test: impl Future<Output = ()>) {
    static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("the tests' runtime")
    });
    RUNTIME.block_on(test)
}

/// A client, or `None` after recording why the test is skipped.
pub(crate) async fn engine() -> Option<Docker> {
    match docker::available().await {
        Ok(docker) => Some(docker),
        Err(e) => {
            devenv::prereq::skip(format!("no Docker engine: {e}"));
            None
        }
    }
}

/// The image of this tree, built once per test binary.
pub(crate) struct Built {
    pub(crate) image: BuiltImage,
    /// The static binary in it.
    pub(crate) binary: PathBuf,
    /// Binary and image build time.
    pub(crate) took: Duration,
}

pub(crate) async fn built_image() -> &'static Built {
    static BUILT: OnceCell<Built> = OnceCell::const_new();
    BUILT
        .get_or_init(|| async {
            let started = Instant::now();
            let root = devenv::project_root();
            let binary = tokio::task::spawn_blocking(move || image::build_static_binary(&root))
                .await
                .expect("the build thread")
                .unwrap_or_else(|e| panic!("static build: {e:#}"));
            let docker = docker::connect()
                .await
                .expect("the engine answered a moment ago");
            let reference = image::reference(image::DEFAULT_REGISTRY, "test");
            let image = image::build_image(
                &docker,
                &binary,
                &reference,
                &image::labels(&devenv::project_root()),
            )
            .await
            .unwrap_or_else(|e| panic!("image build: {e}"));
            let took = started.elapsed();
            println!(
                "built {} ({}) in {took:.1?}: {:.1} MiB",
                image.reference,
                image.id,
                image.size_bytes as f64 / (1024.0 * 1024.0)
            );
            Built {
                image,
                binary,
                took,
            }
        })
        .await
}

/// What testcontainers cannot own, removed when dropped: networks made
/// with a chosen IPAM subnet and IPv6 (testcontainers makes networks by
/// name only, with the engine's default addresses) and images (it never
/// removes one). Declare it before the containers: locals drop in
/// reverse order, so the containers are gone when their networks go.
/// Removal runs on its own thread and runtime, since the test's runtime
/// may be the one unwinding.
#[derive(Default)]
pub(crate) struct Cleanup {
    networks: Mutex<Vec<String>>,
    images: Mutex<Vec<String>>,
}

impl Cleanup {
    /// Registers a network by name; call before creating it.
    pub(crate) fn network(&self, name: &str) {
        if let Ok(mut list) = self.networks.lock() {
            list.push(name.to_owned());
        }
    }

    /// Registers an image by reference or ID.
    pub(crate) fn image(&self, name: &str) {
        if let Ok(mut list) = self.images.lock() {
            list.push(name.to_owned());
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let take = |list: &Mutex<Vec<String>>| list.lock().map(|l| l.clone()).unwrap_or_default();
        let (networks, images) = (take(&self.networks), take(&self.images));
        if networks.is_empty() && images.is_empty() {
            return;
        }
        let lists = (networks.clone(), images.clone());
        let removed = std::thread::spawn(move || remove(&lists.0, &lists.1))
            .join()
            .unwrap_or_else(|_| Err("the cleanup thread panicked".into()));
        if let Err(e) = removed {
            eprintln!(
                "cleanup failed ({e}): remove by hand with `docker network rm {}` and `docker rmi -f {}`",
                networks.join(" "),
                images.join(" ")
            );
        }
    }
}

/// Removes networks, then images; what is already gone is fine.
fn remove(networks: &[String], images: &[String]) -> Result<(), String> {
    let gone = |result: Result<(), bollard::errors::Error>, what: &str| match result {
        Ok(())
        | Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Err(e) => Err(format!("removing {what}: {e}")),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let docker = docker::connect().await.map_err(|e| e.to_string())?;
        for name in networks {
            gone(
                docker.remove_network(name).await,
                &format!("network {name}"),
            )?;
        }
        for name in images {
            let force = RemoveImageOptionsBuilder::default().force(true).build();
            let result = docker.remove_image(name, Some(force), None).await;
            gone(result.map(drop), &format!("image {name}"))?;
        }
        Ok(())
    })
}

/// Every subnet of every Docker network.
async fn docker_subnets(docker: &Docker) -> Vec<IpNet> {
    docker
        .list_networks(None::<ListNetworksOptions>)
        .await
        .expect("list networks")
        .into_iter()
        .flat_map(|n| n.ipam.and_then(|i| i.config).unwrap_or_default())
        .filter_map(|c| c.subnet?.parse().ok())
        .collect()
}

fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// A dual-stack network `name` on the first 10.250.X.0/24 +
/// fd00:250:X::/64 that overlaps no Docker network (another run may take
/// one between the check and the creation: then the next is tried).
pub(crate) async fn create_test_network(
    docker: &Docker,
    cleanup: &Cleanup,
    name: &str,
) -> (IpNet, IpNet) {
    let taken = docker_subnets(docker).await;
    cleanup.network(name);
    let mut last_error = None;
    for x in 200..=254u8 {
        let v4: IpNet = format!("10.250.{x}.0/24").parse().expect("cidr");
        let v6: IpNet = format!("fd00:250:{x}::/64").parse().expect("cidr");
        if taken.iter().any(|t| overlaps(t, &v4) || overlaps(t, &v6)) {
            continue;
        }
        let request = NetworkCreateRequest {
            name: name.to_owned(),
            driver: Some("bridge".into()),
            enable_ipv6: Some(true),
            ipam: Some(Ipam {
                config: Some(vec![
                    IpamConfig {
                        subnet: Some(v4.to_string()),
                        ..Default::default()
                    },
                    IpamConfig {
                        subnet: Some(v6.to_string()),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            labels: Some(HashMap::from([(TEST_LABEL.into(), "devenv-docker".into())])),
            ..Default::default()
        };
        match docker.create_network(request).await {
            Ok(_) => return (v4, v6),
            Err(e) => last_error = Some(e),
        }
    }
    panic!("no free 10.250.X.0/24 for a test network: {last_error:?}");
}

/// Container `name` of the image running `pause`, with the test label;
/// ready once `pause` says it waits for a signal. Further settings go on
/// with testcontainers' `ImageExt` (network, user, capabilities, labels).
///
/// testcontainers pulls an image only when creating the container
/// answers 404 (no such image). This machine cannot pull, and the image
/// is ours: it is built (and found) here before any container asks for
/// it, so creation finds it locally.
pub(crate) async fn pause(docker: &Docker, name: &str) -> ContainerRequest<GenericImage> {
    let reference = &built_image().await.image.reference;
    docker.inspect_image(reference).await.unwrap_or_else(|e| {
        panic!("{reference} is not in the engine (testcontainers would pull it): {e}")
    });
    let (repository, tag) = reference
        .rsplit_once(':')
        .expect("image::reference gives REPOSITORY:TAG");
    GenericImage::new(repository, tag)
        .with_wait_for(WaitFor::message_on_either_std("pausing until SIGTERM"))
        .with_container_name(name)
        .with_cmd(["pause"])
        .with_label(TEST_LABEL, "devenv-docker")
        .with_startup_timeout(Duration::from_secs(60))
}

/// Starts `request` (a [`pause`] container, which has a name). When the
/// engine created the container but could not start it, testcontainers
/// has no handle to drop and leaves it: removed here by name.
pub(crate) async fn start(docker: &Docker, request: ContainerRequest<GenericImage>) -> Container {
    let name = request.container_name().clone().unwrap_or_default();
    match request.start().await {
        Ok(container) => container,
        Err(e) => {
            let force = RemoveContainerOptionsBuilder::default().force(true).build();
            let _ = docker.remove_container(&name, Some(force)).await;
            panic!("start container {name}: {e}")
        }
    }
}

/// Connects running container `name` to `network` at `ipv4` and `ipv6`.
/// testcontainers attaches a container to a network by name only (the
/// engine picks the address), so a pinned address takes this one call.
pub(crate) async fn connect_at(
    docker: &Docker,
    name: &str,
    network: &str,
    ipv4: IpAddr,
    ipv6: IpAddr,
) {
    let request = NetworkConnectRequest {
        container: name.to_owned(),
        endpoint_config: Some(EndpointSettings {
            ipam_config: Some(EndpointIpamConfig {
                ipv4_address: Some(ipv4.to_string()),
                ipv6_address: Some(ipv6.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }),
    };
    docker
        .connect_network(network, request)
        .await
        .unwrap_or_else(|e| panic!("connect {name} to {network} at {ipv4}, {ipv6}: {e}"));
}

/// The addresses the engine gave container `name` on `network`, read from
/// the container (not from the network the code under test reads).
pub(crate) async fn container_addresses(docker: &Docker, name: &str, network: &str) -> Vec<IpAddr> {
    let inspect = docker
        .inspect_container(name, None)
        .await
        .unwrap_or_else(|e| panic!("inspect {name}: {e}"));
    let endpoint = inspect
        .network_settings
        .and_then(|s| s.networks)
        .and_then(|mut n| n.remove(network))
        .unwrap_or_else(|| panic!("{name} is not on {network}"));
    [endpoint.ip_address, endpoint.global_ipv6_address]
        .into_iter()
        .flatten()
        .filter_map(|a| a.parse().ok())
        .collect()
}

/// A name no other run uses: `prefix`, this process and the clock's
/// nanoseconds.
pub(crate) fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{nanos:x}", std::process::id())
}
