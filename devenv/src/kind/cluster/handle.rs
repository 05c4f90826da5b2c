//! A running kind dev-env as the [`Cluster`] the e2e suites drive: opened
//! from its state directory and Docker, acting through `docker exec`,
//! the API and the FRR container.

use super::components::{pod_ready, speaker_pod};
use super::containers::{bridge_name, container_addresses, worker_names};
use super::ranges::Ranges;
use super::{DEV_ENV_LABEL, KindCluster, NAMESPACE, secondary_network, state_dir};
use crate::cluster::{Cluster, NodeInfo, PoolRanges, StopSignal};
use crate::docker;
use crate::kind::{apply, frr, metrics};
use anyhow::{Context, Result, bail};
use bollard::Docker;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use std::net::IpAddr;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

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
                &metrics::reader_objects(NAMESPACE),
                Duration::from_secs(5),
            )
            .await?;
            let request = TokenRequest::default();
            let answer = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
                .create_token_request(metrics::READER, &Default::default(), &request)
                .await?;
            answer
                .status
                .map(|s| s.token)
                .context("a TokenRequest without a token")
        })?;
        let argv = metrics::curl_argv(ip, &token);
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
