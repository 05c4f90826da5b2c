//! Against the Docker engine at `DOCKER_HOST` (or the default socket): the
//! image built from this tree, and free address blocks on a fresh network
//! with containers of that image on it.
//!
//! Each test skips with the reason (`devenv::prereq::skip`: listed at the
//! end of `cargo xtask test`, a failure under CI) when no engine answers.
//! The image is built once per test binary (minutes cold: a static release
//! build) and kept, tagged `ghcr.io/metallb-rs/metallb-rs:test`. The
//! containers are testcontainers' (`ContainerAsync`): removed when their
//! handle drops, also while a failing test unwinds. What testcontainers
//! cannot own (networks with chosen subnets, extra images) a [`Cleanup`]
//! removes after them.

use bollard::Docker;
use bollard::models::{
    EndpointIpamConfig, EndpointSettings, Ipam, IpamConfig, NetworkConnectRequest,
    NetworkCreateRequest,
};
use bollard::query_parameters::{
    ListNetworksOptions, RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder,
};
use devenv::docker::{self, AddressRange, DockerError, Families};
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
type Container = ContainerAsync<GenericImage>;

/// Runs one test on the runtime every test of this file shares.
/// testcontainers hands all containers alive at once one engine client,
/// and a client's connections live on the runtime that opened them: with
/// a runtime per test (`#[tokio::test]`), a test whose runtime ended
/// would leave the others a client with dead connections.
fn run(test: impl Future<Output = ()>) {
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
async fn engine() -> Option<Docker> {
    match docker::available().await {
        Ok(docker) => Some(docker),
        Err(e) => {
            devenv::prereq::skip(format!("no Docker engine: {e}"));
            None
        }
    }
}

/// The image of this tree, built once per test binary.
struct Built {
    image: BuiltImage,
    /// The static binary in it.
    binary: PathBuf,
    /// Binary and image build time.
    took: Duration,
}

async fn built_image() -> &'static Built {
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
struct Cleanup {
    networks: Mutex<Vec<String>>,
    images: Mutex<Vec<String>>,
}

impl Cleanup {
    /// Registers a network by name; call before creating it.
    fn network(&self, name: &str) {
        if let Ok(mut list) = self.networks.lock() {
            list.push(name.to_owned());
        }
    }

    /// Registers an image by reference or ID.
    fn image(&self, name: &str) {
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
async fn create_test_network(docker: &Docker, cleanup: &Cleanup, name: &str) -> (IpNet, IpNet) {
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
async fn pause(docker: &Docker, name: &str) -> ContainerRequest<GenericImage> {
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
async fn start(docker: &Docker, request: ContainerRequest<GenericImage>) -> Container {
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
async fn connect_at(docker: &Docker, name: &str, network: &str, ipv4: IpAddr, ipv6: IpAddr) {
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
async fn container_addresses(docker: &Docker, name: &str, network: &str) -> Vec<IpAddr> {
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

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{nanos:x}", std::process::id())
}

#[test]
fn image_has_the_labels_the_user_and_the_entrypoint() {
    run(async {
        let Some(docker) = engine().await else { return };
        let Built {
            image: built, took, ..
        } = built_image().await;
        println!(
            "image {} is {} bytes ({:.1} MiB), built in {took:.1?}",
            built.reference,
            built.size_bytes,
            built.size_bytes as f64 / (1024.0 * 1024.0)
        );
        let inspect = docker
            .inspect_image(&built.reference)
            .await
            .expect("inspect image");
        assert_eq!(inspect.id.as_deref(), Some(built.id.as_str()));
        let config = inspect.config.expect("image config");
        assert_eq!(config.user.as_deref(), Some(image::IMAGE_USER));
        assert_eq!(
            config.entrypoint,
            Some(vec![image::BINARY_IN_IMAGE.to_owned()])
        );
        let labels = config.labels.unwrap_or_default();
        for (key, value) in image::labels(&devenv::project_root()) {
            assert_eq!(labels.get(&key), Some(&value), "label {key}");
        }
        assert_eq!(
            labels
                .get("org.opencontainers.image.version")
                .map(String::as_str),
            Some(env!("CARGO_PKG_VERSION"))
        );
        // One layer: the binary.
        let layers = inspect.root_fs.and_then(|r| r.layers).unwrap_or_default();
        assert_eq!(layers.len(), 1, "{layers:?}");
        assert!(built.size_bytes > 1_000_000, "{}", built.size_bytes);
    })
}

#[test]
fn rebuilding_a_tag_removes_the_image_it_replaced() {
    run(async {
        let Some(docker) = engine().await else { return };
        let built = built_image().await;
        let cleanup = Cleanup::default();
        let reference = image::reference(image::DEFAULT_REGISTRY, &unique("test-rebuild"));
        cleanup.image(&reference);
        let mut labels = image::labels(&devenv::project_root());
        let mut ids = Vec::new();
        for run in ["first", "second"] {
            labels.insert("dev.metallb-rs.test.run".into(), run.into());
            let rebuilt = image::build_image(&docker, &built.binary, &reference, &labels)
                .await
                .unwrap_or_else(|e| panic!("{run} build: {e}"));
            cleanup.image(&rebuilt.id);
            ids.push(rebuilt.id);
        }
        assert_ne!(ids[0], ids[1], "the label differs, so does the image");
        assert!(
            docker.inspect_image(&ids[0]).await.is_err(),
            "{} is still there",
            ids[0]
        );
        assert!(docker.inspect_image(&reference).await.is_ok());
    })
}

#[test]
fn free_block_avoids_every_container_and_conflicts_find_latecomers() {
    run(async {
        let Some(docker) = engine().await else { return };
        let cleanup = Cleanup::default();
        let net = unique("devenv-test");
        let (v4, v6) = create_test_network(&docker, &cleanup, &net).await;
        let at = |subnet: &IpNet, offset: u128| -> IpAddr {
            match subnet.network() {
                IpAddr::V4(base) => IpAddr::V4((u32::from(base) + offset as u32).into()),
                IpAddr::V6(base) => IpAddr::V6((u128::from(base) + offset).into()),
            }
        };
        let v6_top = (1u128 << 64) - 1;

        // Two containers where Docker puts them (bottom-up), one pinned high:
        // the top blocks would hold it. The pinned one starts on the default
        // bridge and joins the test network at its address.
        let mut containers = Vec::new();
        let mut names = Vec::new();
        for i in 1..=2 {
            let name = format!("{net}-c{i}");
            containers.push(start(&docker, pause(&docker, &name).await.with_network(&net)).await);
            names.push(name);
        }
        let pinned = (at(&v4, 250), at(&v6, v6_top - 7));
        let name = format!("{net}-pinned");
        containers.push(start(&docker, pause(&docker, &name).await).await);
        connect_at(&docker, &name, &net, pinned.0, pinned.1).await;
        names.push(name);

        let network = docker::inspect(&docker, &net)
            .await
            .expect("inspect test network");
        let ranges = docker::free_block(&network, Families::Dual, docker::DEFAULT_BLOCK)
            .expect("blocks fit");
        println!(
            "{net}: {v4} {v6} -> {}",
            ranges
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert_eq!(
            ranges,
            [
                AddressRange {
                    first: at(&v4, 234),
                    last: at(&v4, 249)
                },
                AddressRange {
                    first: at(&v6, v6_top - 23),
                    last: at(&v6, v6_top - 8)
                },
            ]
        );

        let mut taken = vec![at(&v4, 0), at(&v4, 1), at(&v4, 255), at(&v6, 0), at(&v6, 1)];
        for name in &names {
            let addresses = container_addresses(&docker, name, &net).await;
            assert_eq!(addresses.len(), 2, "{name}: {addresses:?}");
            taken.extend(addresses);
        }
        assert!(taken.contains(&pinned.0) && taken.contains(&pinned.1));
        for address in &taken {
            for range in &ranges {
                assert!(!range.contains(*address), "{range} holds {address}");
            }
        }
        assert_eq!(docker::conflicts(&ranges, &network), []);

        // A container started afterwards inside the blocks is reported.
        let late = (at(&v4, 240), at(&v6, v6_top - 10));
        let late_name = format!("{net}-late");
        let _late = start(&docker, pause(&docker, &late_name).await).await;
        connect_at(&docker, &late_name, &net, late.0, late.1).await;
        let network = docker::inspect(&docker, &net)
            .await
            .expect("inspect test network");
        assert_eq!(
            docker::conflicts(&ranges, &network),
            [(late_name.clone(), late.0), (late_name, late.1)]
        );
    })
}

#[test]
fn a_missing_network_says_what_to_do() {
    run(async {
        let Some(docker) = engine().await else { return };
        let name = unique("devenv-test-missing");
        let err = docker::inspect(&docker, &name)
            .await
            .expect_err("no such network");
        assert!(
            matches!(err, DockerError::NetworkNotFound { .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "docker network {name} not found: is the kind cluster up? (set KIND_EXPERIMENTAL_DOCKER_NETWORK for another network)"
            )
        );
    })
}

/// CapEff of the process of container `name`, read from the host's /proc;
/// `None` when the engine runs elsewhere (or in another PID namespace).
async fn effective_capabilities(docker: &Docker, name: &str) -> Option<u64> {
    let pid = docker
        .inspect_container(name, None)
        .await
        .ok()?
        .state?
        .pid?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Why the speaker's container sets `runAsUser: 0`: the image runs as
/// 65534, and a capability added for a non-root user is not effective (no
/// ambient capabilities), so the speaker would lose its raw sockets.
#[test]
fn net_raw_is_effective_only_for_root() {
    run(async {
        let Some(docker) = engine().await else { return };
        let prefix = unique("devenv-test-caps");
        const CAP_NET_RAW: u64 = 1 << 13;
        // The speaker container's security context, without its host network.
        let speaker_like = |request: ContainerRequest<GenericImage>| {
            request
                .with_network("none")
                .with_cap_drop("ALL")
                .with_cap_add("NET_RAW")
        };
        let image_user = format!("{prefix}-image-user");
        let _image_user = start(&docker, speaker_like(pause(&docker, &image_user).await)).await;
        let root = format!("{prefix}-root");
        let _root = start(
            &docker,
            speaker_like(pause(&docker, &root).await).with_user("0:0"),
        )
        .await;
        let (Some(as_image_user), Some(as_root)) = (
            effective_capabilities(&docker, &image_user).await,
            effective_capabilities(&docker, &root).await,
        ) else {
            devenv::prereq::skip(
                "the containers' /proc/<pid>/status is not readable here (remote engine?)",
            );
            return;
        };
        assert_eq!(
            as_image_user & CAP_NET_RAW,
            0,
            "CapEff {as_image_user:x} as {}",
            image::IMAGE_USER
        );
        assert_eq!(
            as_root & CAP_NET_RAW,
            CAP_NET_RAW,
            "CapEff {as_root:x} as root"
        );
    })
}

/// The kind provider's Docker side, on containers of our image standing in
/// for kind's node containers (no kind binary here): the second network
/// attached to every node (twice: idempotent), ranges chosen and kept for
/// e2e, the cluster handle reading nodes, bridges and ranges back, running
/// commands on a node, and `down` removing what dev-env added.
#[test]
fn kind_provider_networks_ranges_and_handle_on_stand_in_nodes() {
    run(async {
        use devenv::cluster::Cluster;
        use devenv::kind::{self, KindCluster, config::IpFamily};
        let Some(docker) = engine().await else { return };
        let cleanup = Cleanup::default();
        let name = unique("kt");
        /// The state directory `choose_ranges` writes, removed also on failure.
        struct StateDir(std::path::PathBuf);
        impl Drop for StateDir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let _state = StateDir(kind::cluster::state_dir(&name));
        let net = format!("{name}-kind");
        create_test_network(&docker, &cleanup, &net).await;
        cleanup.network(&kind::cluster::secondary_network(&name));
        let nodes: Vec<String> = ["control-plane", "worker", "worker2"]
            .iter()
            .map(|role| format!("{name}-{role}"))
            .collect();
        let kind_label = name.clone();
        let mut containers = Vec::new();
        for node in &nodes {
            let request = pause(&docker, node)
                .await
                .with_network(&net)
                .with_label("io.x-k8s.kind.cluster", &kind_label);
            containers.push(start(&docker, request).await);
        }
        for _ in 0..2 {
            kind::cluster::attach_secondary_network(&docker, &name, &nodes)
                .await
                .expect("second network");
        }
        let secondary = kind::cluster::secondary_network(&name);
        for node in &nodes {
            assert_eq!(
                container_addresses(&docker, node, &secondary).await.len(),
                2,
                "{node} on {secondary}"
            );
        }

        let ranges = kind::cluster::choose_ranges(&docker, &net, &name, IpFamily::Dual)
            .await
            .expect("ranges");
        println!("ranges: {ranges:?}");
        assert_eq!(ranges.dev_env.len(), 2, "one per family");
        assert_eq!(ranges.e2e.len(), 2);
        assert_eq!(
            ranges.secondary.len(),
            2,
            "docker gave the second network IPv4 too"
        );
        let parse = |r: &String| -> AddressRange { r.parse().expect("FIRST-LAST") };
        for (dev, e2e) in ranges
            .dev_env
            .iter()
            .map(parse)
            .zip(ranges.e2e.iter().map(parse))
        {
            assert_eq!(dev.len(), 16);
            assert_eq!(e2e.len(), 20);
            assert!(
                e2e.last < dev.first,
                "the dev-env pool is the top of the block"
            );
        }
        let used: Vec<IpAddr> = {
            let mut all = Vec::new();
            for node in &nodes {
                all.extend(container_addresses(&docker, node, &net).await);
                all.extend(container_addresses(&docker, node, &secondary).await);
            }
            all
        };
        for r in ranges
            .dev_env
            .iter()
            .chain(&ranges.e2e)
            .chain(&ranges.secondary)
            .map(parse)
        {
            assert!(
                !used.iter().any(|ip| r.contains(*ip)),
                "{r} holds a node address"
            );
        }

        let cluster = KindCluster::open_with(&docker, &name, &net)
            .await
            .expect("open");
        let names: Vec<String> = cluster.nodes().into_iter().map(|n| n.name).collect();
        assert_eq!(names, nodes);
        for n in cluster.nodes() {
            assert_eq!(
                n.addresses,
                container_addresses(&docker, &n.name, &net).await
            );
        }
        let pools = cluster.pool_ranges();
        assert_eq!(
            pools.v4.as_ref(),
            ranges.e2e.iter().find(|r| !r.contains(':'))
        );
        assert_eq!(
            pools.v6.as_ref(),
            ranges.e2e.iter().find(|r| r.contains(':'))
        );
        assert_eq!(
            pools.secondary_v4.as_ref(),
            ranges.secondary.iter().find(|r| !r.contains(':'))
        );
        for iface in ["eth0", "eth1"] {
            let bridge = cluster.external_interface(iface).expect("bridge");
            assert!(
                std::path::Path::new("/sys/class/net")
                    .join(&bridge)
                    .exists(),
                "{iface}: no host interface {bridge}"
            );
        }
        assert!(cluster.external_interface("eth7").is_err());
        let out = tokio::task::block_in_place(|| {
            cluster.exec_on_node(&nodes[1], &[image::BINARY_IN_IMAGE, "--version"])
        })
        .expect("docker exec");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")),
            "{out:?}"
        );

        let removed = tokio::task::spawn_blocking({
            let name = name.clone();
            move || kind::down(&name)
        })
        .await
        .expect("down thread")
        .expect("down");
        println!("down removed: {removed:?}");
        assert!(
            removed.iter().any(|r| r.contains(&secondary)),
            "{removed:?}"
        );
        assert!(
            docker.inspect_network(&secondary, None).await.is_err(),
            "{secondary} left behind"
        );
        assert!(!kind::cluster::state_dir(&name).exists());
    })
}
