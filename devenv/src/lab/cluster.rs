//! Bringing a whole lab up and down: network (netns), API server (the
//! `lab-apiserver` crate's binary), the node-namespace forwarders, the
//! controller-manager stand-ins, node agents, metallb-rs controller and
//! speakers; and the [`Cluster`] handle the e2e suites drive it through.

use super::frr::LabRouter;
use super::netns::{self, Family, Topology};
use super::process::Processes;
use super::routers;
use crate::cluster::{Cluster, FreshCluster, NodeInfo, PoolRanges, Protocol, StopSignal};
use anyhow::{Context, Result, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::net::IpAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

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

/// The API server port of lab `name`: 6443 for the default lab, another
/// fixed port per name otherwise, so two labs (a developer's and a test
/// run's) can coexist.
pub fn api_port(name: &str) -> u16 {
    if name == "lab" {
        return 6443;
    }
    let hash = name.bytes().fold(2166136261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16777619)
    });
    6444 + (hash % 1000) as u16
}

/// The loopback port of the lab controller's metrics and probes: the
/// controller runs in the root namespace, so each lab needs its own (API
/// ports are 6443-7443, so these are 26443-27443).
pub fn controller_metrics_port(api_port: u16) -> u16 {
    api_port + 20000
}

/// The loopback port of the standby controller replica's metrics and
/// probes (36443-37443), which [`Cluster::controller_takeover`] starts.
fn standby_metrics_port(api_port: u16) -> u16 {
    api_port + 30000
}

/// The loopback port a controller replica serves its validating webhooks
/// on, by its metrics port: 61000-62000 for the controller, 62001-63001
/// for the standby (above Linux's ephemeral ports, so an outgoing
/// connection never holds one). The lab API server reaches the webhook
/// Service at both, the first that accepts.
fn webhook_port(metrics_port: u16, api_port: u16) -> u16 {
    let offset = api_port.saturating_sub(6443);
    if metrics_port == standby_metrics_port(api_port) {
        62001 + offset
    } else {
        61000 + offset
    }
}

/// The loopback port of a controller's HTTPS metrics, beside the plain
/// ones on `plain_port` (28443-29443 and 38443-39443: clear of both
/// ranges above).
pub fn secure_metrics_port(plain_port: u16) -> u16 {
    plain_port + 2000
}

/// The speaker's plain metrics inside its node's namespace, where the
/// suites and benchmarks scrape them (`curl http://127.0.0.1:9120`); its
/// HTTPS metrics listen on the node's address, the same port.
pub const SPEAKER_PLAIN_METRICS: &str = "127.0.0.1:9120";

/// The IPv4 addresses of the layer2 dev-env's pool `dev-env-l2`: on the
/// nodes' subnet, apart from the nodes (from .10), the e2e pools
/// ([`LabCluster::pool_ranges`], .100-.119) and the external host (.2).
pub const DEV_ENV_L2_V4: &str = "172.30.0.200-172.30.0.215";
/// The IPv6 addresses of `dev-env-l2` (the same host numbers).
pub const DEV_ENV_L2_V6: &str = "fc00:f853:ccd:e793::200-fc00:f853:ccd:e793::20f";

/// The process name of the standby controller replica.
const STANDBY: &str = "controller-standby";

/// Where the lab's container logs live (`kubectl logs`).
fn pod_log_dir(lab: &Path) -> PathBuf {
    lab.join("pods")
}

pub use super::paths::lab_dir;

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

fn healthy(port: u16) -> bool {
    answers_200(port, "/healthz")
}

/// Whether 127.0.0.1:`port` answers GET `path` with 200.
fn answers_200(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(
        &([127, 0, 0, 1], port).into(),
        Duration::from_millis(300),
    ) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 16];
    s.read(&mut buf).is_ok_and(|n| {
        buf[..n].starts_with(b"HTTP/1.0 200") || buf[..n].starts_with(b"HTTP/1.1 200")
    })
}

/// Waits until 127.0.0.1:`port` accepts connections inside `ns` (the
/// node's forwarder is up), so agents and speakers find the API at once.
fn wait_for_forwarder(ns: &str, port: u16, procs: &Processes, node: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let connected = super::enter::in_netns(ns, || {
            std::net::TcpStream::connect_timeout(
                &([127, 0, 0, 1], port).into(),
                Duration::from_millis(200),
            )
            .is_ok()
        })?;
        if connected {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the API forwarder of {node} did not listen within 5 s: see {}",
                procs.log_file(&format!("forward-{node}")).display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The file `node`'s forwarder takes its API latency from
/// ([`super::latency::follow`]).
fn latency_file(dir: &Path, node: &str) -> PathBuf {
    dir.join(format!("forward-{node}.latency"))
}

/// Creates lab `spec` or repairs and reuses it; returns once the API
/// server answers and every node agent and component runs.
pub fn up(spec: &LabSpec) -> Result<LabCluster> {
    netns::require_privileges()?;
    if spec.nodes == 0 {
        bail!("a lab needs at least one node (--nodes)");
    }
    let topology = Topology::new(&spec.name, spec.nodes - 1)
        .with_family(spec.family)
        .with_bridges(2)
        .with_routers(spec.protocol == Protocol::Bgp);
    let lab = netns::ensure(&topology)?;
    let dir = lab_dir(&spec.name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let procs = Processes::new(&dir);
    let kubeconfig = dir.join("kubeconfig");
    let bin = |b: &str| spec.bin_dir.join(b).display().to_string();
    // The routers first: a missing FRR fails before anything else starts.
    match spec.protocol {
        Protocol::Bgp => routers::start(&lab, &dir)?,
        Protocol::Layer2 => {
            routers::remove_all(&dir, &spec.name)?;
        }
    }
    // A recreated node namespace is a new namespace: what ran in the old
    // one (forwarder, agent, speaker) is stale.
    for node in &lab.nodes {
        if lab
            .changes
            .iter()
            .any(|c| c == &format!("created namespace {}", node.namespace))
        {
            for p in ["forward", "agent", "speaker"] {
                procs.stop(&format!("{p}-{}", node.name), Duration::from_secs(1));
            }
        }
    }

    if !healthy(spec.api_port) {
        procs.stop("apiserver", Duration::from_secs(1));
        let argv = vec![
            bin("lab-apiserver"),
            "--listen".into(),
            format!("127.0.0.1:{}", spec.api_port),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "--name".into(),
            spec.name.clone(),
            // Kept in the lab directory: kubeconfigs and tokens stay valid
            // when the API server restarts.
            "--token-key".into(),
            dir.join("token.key").display().to_string(),
            "--tls-dir".into(),
            dir.join("pki").display().to_string(),
            "--pod-log-dir".into(),
            pod_log_dir(&dir).display().to_string(),
            // The controller replicas' webhooks (no Service proxy here).
            "--webhook-service".into(),
            format!(
                "{}/{}=127.0.0.1:{},127.0.0.1:{}",
                metallb_rs::api::DEFAULT_NAMESPACE,
                metallb_rs::k8s::webhook::SERVICE,
                webhook_port(controller_metrics_port(spec.api_port), spec.api_port),
                webhook_port(standby_metrics_port(spec.api_port), spec.api_port),
            ),
        ];
        procs.ensure("apiserver", &argv, &[])?;
        let deadline = Instant::now() + Duration::from_secs(10);
        // It serves before it writes the kubeconfig: wait for both.
        while !healthy(spec.api_port) || kube::config::Kubeconfig::read_from(&kubeconfig).is_err() {
            if Instant::now() > deadline {
                bail!(
                    "the lab API server did not answer within 10 s: see {}",
                    procs.log_file("apiserver").display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // What kube-controller-manager would run (stateless: restarted when
    // rebuilt).
    procs.ensure_fresh(
        "controller-manager",
        &[
            bin("lab-controller-manager"),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
        ],
        &[],
    )?;
    // An API server started before the lab ran webhooks has no way to
    // reach them (its state lives in memory: restarting it would lose the
    // lab), so the webhooks stay uninstalled there rather than refuse
    // every write.
    let reaches_webhooks = procs
        .pid("apiserver")
        .and_then(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
        .is_some_and(|c| String::from_utf8_lossy(&c).contains("--webhook-service"));
    if spec.metallb == Metallb::Lab && !reaches_webhooks {
        eprintln!(
            "lab {}: its API server predates the webhooks and cannot call them: they stay uninstalled (recreate the lab to get them: cargo xtask dev-env-cleanup --name {0} && cargo xtask dev-env --name {0})",
            spec.name
        );
    }
    // Without MetalLB's controller nothing would answer them: every
    // write of a MetalLB object would be refused.
    let webhooks = if reaches_webhooks && spec.metallb == Metallb::Lab {
        Webhooks::Installed
    } else {
        Webhooks::Absent
    };
    if spec.metallb == Metallb::Chart {
        // A lab reused from another mode may still run its own.
        stop_own_metallb(&procs, &lab);
        crate::runtime()?
            .block_on(create_release_namespace(&kubeconfig))
            .context("creating the chart's namespace")?;
    } else {
        bootstrap_api(&kubeconfig, webhooks)
            .context("installing the MetalLB CRDs and namespace")?;
    }
    if spec.metallb == Metallb::Lab {
        let nodes: Vec<String> = lab.nodes.iter().map(|n| n.name.clone()).collect();
        write_component_kubeconfigs(&dir, &spec.name, spec.api_port, &kubeconfig, &nodes)
            .context("issuing the MetalLB components' ServiceAccount tokens")?;
    }
    let cluster = LabCluster {
        name: spec.name.clone(),
        dir: dir.clone(),
        kubeconfig: kubeconfig.clone(),
        lab,
        family: spec.family,
        bin_dir: spec.bin_dir.clone(),
        log_level: spec.log_level.clone(),
        api_port: spec.api_port,
        protocol: spec.protocol,
    };
    for (i, node) in cluster.lab.nodes.iter().enumerate() {
        // Node namespaces reach the API server on their own 127.0.0.1:PORT.
        // A new forwarder starts without latency, whatever an earlier run
        // left in its file.
        if procs.pid(&format!("forward-{}", node.name)).is_none() {
            let _ = std::fs::remove_file(latency_file(&dir, &node.name));
        }
        procs.ensure(
            &format!("forward-{}", node.name),
            &[
                bin("lab-forward"),
                "--listen".into(),
                format!("127.0.0.1:{}", spec.api_port),
                "--forward".into(),
                node.namespace.clone(),
                "--latency-file".into(),
                latency_file(&dir, &node.name).display().to_string(),
            ],
            &[],
        )?;
        wait_for_forwarder(&node.namespace, spec.api_port, &procs, &node.name)?;
        let mut argv = strings(&["ip", "netns", "exec", &node.namespace]);
        argv.extend([
            bin("lab-agent"),
            "--node".into(),
            node.name.clone(),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "--pod-log-dir".into(),
            pod_log_dir(&dir).display().to_string(),
            // Containers of the metallb-rs image (the chart's) run it.
            "--metallb-rs-binary".into(),
            bin("metallb-rs"),
            "--pod-token-dir".into(),
            dir.join("pod-tokens").display().to_string(),
        ]);
        for a in node.addresses() {
            argv.extend(["--address".into(), a.to_string()]);
        }
        if i == 0 {
            argv.push("--control-plane".into());
        }
        procs.ensure_fresh(&format!("agent-{}", node.name), &argv, &[])?;
        if spec.metallb == Metallb::Lab {
            cluster.start_speaker(&node.name)?;
        }
    }
    if spec.metallb == Metallb::Lab {
        cluster.start_controller()?;
    }
    Ok(cluster)
}

/// Stops the controller replicas and speakers the lab started itself.
fn stop_own_metallb(procs: &Processes, lab: &netns::Lab) {
    for name in ["controller", STANDBY]
        .into_iter()
        .map(str::to_owned)
        .chain(lab.nodes.iter().map(|n| format!("speaker-{}", n.name)))
    {
        procs.stop(&name, Duration::from_secs(5));
    }
}

/// Creates the namespace the chart's release lives in (so the chart
/// cannot own it), labelled for privileged pods as NOTES.txt asks: the
/// speakers need host networking and NET_RAW.
async fn create_release_namespace(kubeconfig: &Path) -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, PostParams};
    let client = client(kubeconfig).await?;
    let namespaces: Api<Namespace> = Api::all(client);
    let name = metallb_rs::api::DEFAULT_NAMESPACE;
    let existing = tokio::time::timeout(Duration::from_secs(10), namespaces.get_opt(name))
        .await
        .with_context(|| format!("reading namespace {name}: timed out"))??;
    if existing.is_none() {
        let ns: Namespace = serde_json::from_value(serde_json::json!({ "metadata": {
            "name": name,
            "labels": { "pod-security.kubernetes.io/enforce": "privileged" } } }))?;
        tokio::time::timeout(
            Duration::from_secs(10),
            namespaces.create(&PostParams::default(), &ns),
        )
        .await
        .with_context(|| format!("creating namespace {name}: timed out"))??;
    }
    Ok(())
}

/// Whether the lab's API server calls MetalLB's webhooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhooks {
    /// The validating webhooks and BGPPeer's conversion webhook: where
    /// MetalLB's controller runs to answer them.
    Installed,
    /// Neither: without a controller every MetalLB write would be refused
    /// and every read of a BGPPeer at v1beta1 would fail.
    Absent,
}

/// Applies the generated CRDs and creates the MetalLB namespace, as
/// `kubectl apply -f manifests/metallb-native.yaml` would: create, or
/// replace what differs.
fn bootstrap_api(kubeconfig: &Path, webhooks: Webhooks) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = client(kubeconfig).await?;
        install_metallb_api(&client, webhooks).await?;
        // At most three calls, each answered in milliseconds by a healthy
        // lab API server: a hung one fails the bootstrap instead of
        // stalling it.
        tokio::time::timeout(
            Duration::from_secs(30),
            install_webhook_configuration(&client, webhooks),
        )
        .await
        .map_err(|_| anyhow::anyhow!("installing the webhook configuration timed out after 30 s"))?
    })
}

/// The kubeconfig MetalLB component `component` (`controller`,
/// `speaker-<node>`) runs with in lab `dir`.
pub fn component_kubeconfig(dir: &Path, component: &str) -> PathBuf {
    dir.join(format!("kubeconfig-{component}"))
}

/// Writes a kubeconfig per MetalLB component (the controller, each
/// node's speaker) with a token of its ServiceAccount from the API
/// server's TokenRequest API, so every component runs with exactly the
/// manifests' RBAC.
fn write_component_kubeconfigs(
    dir: &Path,
    cluster: &str,
    api_port: u16,
    admin: &Path,
    nodes: &[String],
) -> Result<()> {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let ca_path = dir.join("pki").join("ca.crt");
    let endpoint = lab_apiserver::Endpoint {
        url: format!("https://127.0.0.1:{api_port}"),
        ca_pem: std::fs::read_to_string(&ca_path)
            .with_context(|| format!("reading {}", ca_path.display()))?,
    };
    let ns = metallb_rs::api::DEFAULT_NAMESPACE;
    let mut wanted = vec![("controller".to_owned(), "controller")];
    wanted.extend(nodes.iter().map(|n| (format!("speaker-{n}"), "speaker")));
    crate::runtime()?.block_on(async {
        let client = client(admin).await?;
        let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client, ns);
        for (component, account) in wanted {
            // A year: the lab's components never refresh their token.
            let request: TokenRequest = serde_json::from_value(
                serde_json::json!({ "spec": { "audiences": [], "expirationSeconds": 365 * 24 * 3600 } }),
            )?;
            let issued = tokio::time::timeout(
                Duration::from_secs(10),
                accounts.create_token_request(account, &Default::default(), &request),
            )
            .await
            .with_context(|| format!("requesting a token for {ns}/{account}: timed out"))?
            .with_context(|| format!("requesting a token for {ns}/{account}"))?;
            let token = issued.status.map(|s| s.token).unwrap_or_default();
            let user = format!("system:serviceaccount:{ns}:{account}");
            lab_apiserver::write_private(
                &component_kubeconfig(dir, &component),
                lab_apiserver::kubeconfig(&endpoint, cluster, &user, &token).as_bytes(),
            )?;
        }
        anyhow::Ok(())
    })
}

/// Installs (or updates) every MetalLB CRD and creates the MetalLB
/// namespace, ServiceAccounts and RBAC of the manifests: what a cluster
/// needs before metallb-rs runs in it. The CRDs are `metallb-native.yaml`'s
/// (BGPPeer's converted by the controller) with [`Webhooks::Installed`],
/// without conversion webhook otherwise.
pub async fn install_metallb_api(client: &kube::Client, webhooks: Webhooks) -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, PostParams};
    const TIMEOUT: Duration = Duration::from_secs(10);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in metallb_rs::manifests::native_objects(&Default::default())
        .into_iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        let mut crd: CustomResourceDefinition = serde_json::from_value(crd)?;
        if webhooks == Webhooks::Absent {
            crd.spec.conversion = None;
        }
        let name = crd.metadata.name.clone().unwrap_or_default();
        let existing = tokio::time::timeout(TIMEOUT, crds.get_opt(&name))
            .await
            .with_context(|| format!("reading CRD {name}: timed out"))??;
        match existing {
            None => {
                tokio::time::timeout(TIMEOUT, crds.create(&PostParams::default(), &crd))
                    .await
                    .with_context(|| format!("creating CRD {name}: timed out"))??;
            }
            Some(existing) => {
                keep_conversion_ca_bundle(&mut crd, &existing);
                if existing.spec != crd.spec {
                    crd.metadata.resource_version = existing.metadata.resource_version;
                    tokio::time::timeout(
                        TIMEOUT,
                        crds.replace(&name, &PostParams::default(), &crd),
                    )
                    .await
                    .with_context(|| format!("replacing CRD {name}: timed out"))??;
                }
            }
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(metallb_rs::api::DEFAULT_NAMESPACE)
        .await?
        .is_none()
    {
        let ns: Namespace = serde_json::from_value(
            serde_json::json!({ "metadata": { "name": metallb_rs::api::DEFAULT_NAMESPACE } }),
        )?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    let rbac: Vec<serde_json::Value> = metallb_rs::manifests::native_objects(&Default::default())
        .into_iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some(
                    "ServiceAccount"
                        | "ClusterRole"
                        | "ClusterRoleBinding"
                        | "Role"
                        | "RoleBinding"
                        | "ValidatingAdmissionPolicy"
                        | "ValidatingAdmissionPolicyBinding"
                )
            )
        })
        .collect();
    crate::kind::apply::create_or_replace_all(client, &rbac, Duration::from_secs(10)).await?;
    Ok(())
}

/// Gives `wanted`'s conversion webhook the caBundle `existing`'s carries,
/// which the controller put there (without it every read of a BGPPeer at
/// v1beta1 would fail x509 until the controller's next certificate round).
fn keep_conversion_ca_bundle(
    wanted: &mut CustomResourceDefinition,
    existing: &CustomResourceDefinition,
) {
    let bundle = existing.spec.conversion.as_ref().and_then(|c| {
        c.webhook
            .as_ref()?
            .client_config
            .as_ref()?
            .ca_bundle
            .clone()
    });
    if let Some(config) = wanted
        .spec
        .conversion
        .as_mut()
        .and_then(|c| c.webhook.as_mut()?.client_config.as_mut())
    {
        config.ca_bundle = bundle;
    }
}

/// The manifests' ValidatingWebhookConfiguration with
/// [`Webhooks::Installed`] (else removed): created when missing, replaced
/// when its webhooks changed - keeping each webhook's caBundle, which the
/// controller put there (without it every review would fail x509 until
/// the controller's next certificate round).
async fn install_webhook_configuration(client: &kube::Client, webhooks: Webhooks) -> Result<()> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use kube::api::{Api, DeleteParams, PostParams};
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let name = metallb_rs::k8s::webhook::CONFIGURATION;
    if webhooks == Webhooks::Absent {
        if api.get_opt(name).await?.is_some() {
            api.delete(name, &DeleteParams::default()).await?;
        }
        return Ok(());
    }
    let Some(wanted) = metallb_rs::manifests::native_objects(&Default::default())
        .into_iter()
        .find(|o| o["kind"] == "ValidatingWebhookConfiguration")
    else {
        return Ok(());
    };
    let mut wanted: ValidatingWebhookConfiguration = serde_json::from_value(wanted)?;
    match api.get_opt(name).await? {
        None => {
            api.create(&PostParams::default(), &wanted).await?;
        }
        Some(existing) => {
            let bundles: std::collections::BTreeMap<String, _> = existing
                .webhooks
                .iter()
                .flatten()
                .map(|w| (w.name.clone(), w.client_config.ca_bundle.clone()))
                .collect();
            for w in wanted.webhooks.iter_mut().flatten() {
                w.client_config.ca_bundle = bundles.get(&w.name).cloned().flatten();
            }
            if existing.webhooks != wanted.webhooks {
                wanted.metadata.resource_version = existing.metadata.resource_version;
                api.replace(name, &PostParams::default(), &wanted).await?;
            }
        }
    }
    Ok(())
}

/// Removes lab `name`: every process, namespace and link it made, and its
/// state directory. Works on a half-made or crashed lab; returns what it
/// removed.
pub fn down(name: &str) -> Result<Vec<String>> {
    netns::require_privileges()?;
    let dir = lab_dir(name);
    let procs = Processes::new(&dir);
    // The fresh lab a chart spec made beside this one goes with it, also
    // when the spec was interrupted ([`fresh_for_chart`]).
    let chart = format!("{name}-chart");
    let mut removed = if lab_dir(&chart).exists() {
        down(&chart)?
    } else {
        Vec::new()
    };
    // bgpd before zebra, and what a crashed zebra left in the kernel.
    removed.extend(routers::stop_all(&dir, name));
    for p in procs.names() {
        procs.stop(&p, Duration::from_secs(2));
        removed.push(format!("process {p}"));
    }
    // The agents delete their proxy tables when stopped; this catches a
    // crashed one.
    removed.extend(super::proxy::delete_tables(&netns::lab_namespaces(
        name,
        &netns::list_namespaces()?,
    )));
    // destroy() already says what each removed item is.
    removed.extend(netns::destroy(name)?);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        removed.push(format!("directory {}", dir.display()));
    }
    Ok(removed)
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

    /// Creates (or replaces) the dev-env's BGP configuration: one BGPPeer
    /// per router address, the pool `dev-env-bgp` of the lab's families
    /// and a BGPAdvertisement; returns what it did, one line per object.
    pub fn apply_bgp_dev_env(&self) -> Result<Vec<String>> {
        let routers = self.bgp_routers();
        if routers.is_empty() {
            self.bgp_router()?;
        }
        let objects = crate::frr::objects(
            metallb_rs::api::DEFAULT_NAMESPACE,
            &routers,
            (crate::kind::cluster::DEV_ENV_LABEL, &self.name),
        );
        self.apply_dev_env(&objects)
    }

    /// Creates (or replaces) the dev-env's layer2 configuration: the pool
    /// `dev-env-l2` over [`DEV_ENV_L2_V4`] / [`DEV_ENV_L2_V6`] (the lab's
    /// families; addresses the e2e suites do not use) and an
    /// L2Advertisement of every pool; returns what it did, one line per
    /// object, and the pool's ranges.
    pub fn apply_l2_dev_env(&self) -> Result<(Vec<String>, Vec<String>)> {
        let node = self.lab.nodes.first().context("the lab has no node")?;
        let ranges: Vec<String> = [(false, DEV_ENV_L2_V4), (true, DEV_ENV_L2_V6)]
            .into_iter()
            .filter(|(v6, _)| node.addresses().iter().any(|a| a.is_ipv6() == *v6))
            .map(|(_, r)| r.to_owned())
            .collect();
        let parsed = ranges
            .iter()
            .map(|r| r.parse().map_err(anyhow::Error::msg))
            .collect::<Result<Vec<_>>>()?;
        let objects = crate::kind::cluster::layer2_objects(&self.name, &parsed)?;
        Ok((self.apply_dev_env(&objects)?, ranges))
    }

    /// Makes `objects` the dev-env's configuration: deletes what an earlier
    /// dev-env left that is not among them, creates or replaces the rest
    /// (unchanged objects are not written).
    fn apply_dev_env(&self, objects: &[serde_json::Value]) -> Result<Vec<String>> {
        crate::kind::validate(objects)?;
        let label = format!("{}={}", crate::kind::cluster::DEV_ENV_LABEL, self.name);
        crate::runtime()?.block_on(async {
            let client = client(&self.kubeconfig).await?;
            let mut done = crate::kind::apply::delete_metallb_config_except(
                &client,
                metallb_rs::api::DEFAULT_NAMESPACE,
                &label,
                objects,
            )
            .await?
            .into_iter()
            .map(|d| format!("deleted {d}"))
            .collect::<Vec<_>>();
            done.extend(
                crate::kind::apply::create_or_replace_all(
                    &client,
                    objects,
                    Duration::from_secs(10),
                )
                .await?,
            );
            Ok(done)
        })
    }

    /// Deletes the MetalLB objects dev-env made on this lab (the BGP pool,
    /// peers and advertisement); returns `<Kind> <name>` of each.
    pub fn remove_dev_env_config(&self) -> Result<Vec<String>> {
        let label = format!("{}={}", crate::kind::cluster::DEV_ENV_LABEL, self.name);
        crate::runtime()?.block_on(async {
            let client = client(&self.kubeconfig).await?;
            crate::kind::apply::delete_metallb_config(
                &client,
                metallb_rs::api::DEFAULT_NAMESPACE,
                &label,
            )
            .await
        })
    }

    /// The pid of lab process `name` (`controller`, `speaker-<node>`, ...).
    pub fn pid_of(&self, name: &str) -> Option<i32> {
        self.procs().pid(name)
    }

    /// Starts the metallb-rs controller (root namespace) unless it runs,
    /// and waits until it is ready: its webhooks answer, and an apply
    /// right after (failurePolicy Fail) is reviewed, not refused.
    pub fn start_controller(&self) -> Result<()> {
        let port = controller_metrics_port(self.api_port);
        self.start_controller_replica("controller", port)?;
        self.wait_ready("controller", port)
    }

    /// Waits up to 30 s for replica `name`'s `/readyz` on `port`.
    fn wait_ready(&self, name: &str, port: u16) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !answers_200(port, "/readyz") {
            if Instant::now() > deadline {
                bail!(
                    "{name} was not ready within 30 s (its webhooks' certificate?): see {}",
                    self.procs().log_file(name).display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Starts controller replica `name` with its plain metrics and probes
    /// on 127.0.0.1:`port` (what the lab scrapes) and its HTTPS metrics
    /// on [`secure_metrics_port`], unless it runs.
    fn start_controller_replica(&self, name: &str, port: u16) -> Result<()> {
        let metrics = format!("127.0.0.1:{port}");
        let argv = vec![
            self.bin_dir.join("metallb-rs").display().to_string(),
            "controller".into(),
            // As in the manifests: the lease makes restarts and a second
            // replica safe.
            "--leader-elect".into(),
            "--ml-secret-name".into(),
            metallb_rs::k8s::memberlist::DEFAULT_SECRET_NAME.into(),
            "--metrics-bind-address".into(),
            format!("127.0.0.1:{}", secure_metrics_port(port)),
            "--insecure-metrics-bind-address".into(),
            metrics.clone(),
            "--health-bind-address".into(),
            metrics,
            // Both replicas share the root namespace: upstream's
            // 0.0.0.0:9443 would collide between them (and listen on the
            // host).
            "--webhook-mode".into(),
            "enabled".into(),
            "--webhook-bind-address".into(),
            format!("127.0.0.1:{}", webhook_port(port, self.api_port)),
            "--log-format".into(),
            "text".into(),
            "--log-level".into(),
            self.log_level.clone(),
        ];
        self.procs().ensure_fresh(
            name,
            &argv,
            &[(
                "KUBECONFIG",
                component_kubeconfig(&self.dir, "controller")
                    .display()
                    .to_string(),
            )],
        )?;
        Ok(())
    }
}

/// `/metrics` of the process serving it on 127.0.0.1:`port`.
fn metrics_at(port: u16) -> Result<String> {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .with_context(|| format!("connecting to the controller's metrics at {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default())
}

/// Whether a controller's metrics show that it read the configuration
/// (loaded a valid one, or found it invalid): then it has made its first
/// pass over the services.
fn read_configuration(metrics: &str) -> bool {
    metrics.lines().any(|l| {
        matches!(
            l.split_once(' '),
            Some((
                "metallb_k8s_client_config_loaded_bool" | "metallb_k8s_client_config_stale_bool",
                "1"
            ))
        )
    })
}

impl Cluster for LabCluster {
    fn name(&self) -> &str {
        &self.name
    }

    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    fn nodes(&self) -> Vec<NodeInfo> {
        self.lab
            .nodes
            .iter()
            .map(|n| NodeInfo {
                name: n.name.clone(),
                addresses: n.addresses(),
            })
            .collect()
    }

    fn exec_on_node(&self, node: &str, argv: &[&str]) -> Result<Output> {
        let ns = self.namespace_of(node)?;
        let mut full = vec!["ip", "netns", "exec", ns];
        full.extend_from_slice(argv);
        crate::cluster::output(&full)
    }

    fn exec_on_external(&self, argv: &[&str]) -> Result<Output> {
        let mut full = vec!["ip", "netns", "exec", self.lab.external.namespace.as_str()];
        full.extend_from_slice(argv);
        crate::cluster::output(&full)
    }

    /// The node's link goes down and its forwarder to the API server is
    /// frozen (SIGSTOP): like a real node off the network, its agent and
    /// speaker lose the API too, so it turns NotReady after the grace period.
    fn node_down(&self, node: &str) -> Result<()> {
        let ns = self.namespace_of(node)?;
        netns::run("ip", &["-n", ns, "link", "set", "eth0", "down"])?;
        self.procs().signal(
            &format!("forward-{node}"),
            nix::sys::signal::Signal::SIGSTOP,
        );
        Ok(())
    }

    fn node_up(&self, node: &str) -> Result<()> {
        let ns = self.namespace_of(node)?;
        netns::run("ip", &["-n", ns, "link", "set", "eth0", "up"])?;
        self.restore_routes(node)?;
        self.procs().signal(
            &format!("forward-{node}"),
            nix::sys::signal::Signal::SIGCONT,
        );
        Ok(())
    }

    /// Only eth0 goes down: the forwarder to the API server listens on
    /// the node namespace's loopback and connects from the root
    /// namespace, so the node's agent and speaker keep the API.
    fn link_down(&self, node: &str) -> Result<()> {
        let ns = self.namespace_of(node)?;
        netns::run("ip", &["-n", ns, "link", "set", "eth0", "down"])?;
        Ok(())
    }

    fn link_up(&self, node: &str) -> Result<()> {
        let ns = self.namespace_of(node)?;
        netns::run("ip", &["-n", ns, "link", "set", "eth0", "up"])?;
        self.restore_routes(node)
    }

    fn stop_speaker(&self, node: &str, signal: StopSignal) -> Result<()> {
        use nix::sys::signal::Signal;
        let name = format!("speaker-{node}");
        let sig = match signal {
            StopSignal::Term => Signal::SIGTERM,
            StopSignal::Kill => Signal::SIGKILL,
            StopSignal::Pause => Signal::SIGSTOP,
        };
        // The pid file names `ip netns exec`, which execs the speaker: one process.
        if !self.procs().signal(&name, sig) {
            bail!("no speaker runs on {node}");
        }
        match signal {
            // Still running: a start finds it so and starts nothing.
            StopSignal::Pause => {}
            StopSignal::Term => {
                // A paused speaker acts on SIGTERM only once it runs again.
                self.procs().signal(&name, Signal::SIGCONT);
                self.procs().mark_stopping(&name);
            }
            StopSignal::Kill => self.procs().mark_stopping(&name),
        }
        Ok(())
    }

    fn resume_speaker(&self, node: &str) -> Result<()> {
        if !self.procs().signal(
            &format!("speaker-{node}"),
            nix::sys::signal::Signal::SIGCONT,
        ) {
            bail!("no speaker runs on {node}");
        }
        Ok(())
    }

    /// Freezes (SIGSTOP) or thaws the node's API forwarder: its agent and
    /// speaker lose the API server while its network stays up.
    fn set_api_reachable(&self, node: &str, reachable: bool) -> Result<()> {
        self.namespace_of(node)?;
        let signal = if reachable {
            nix::sys::signal::Signal::SIGCONT
        } else {
            nix::sys::signal::Signal::SIGSTOP
        };
        if !self.procs().signal(&format!("forward-{node}"), signal) {
            bail!("no API forwarder runs for {node}");
        }
        Ok(())
    }

    /// Through the node's forwarder: its setting file, which the forwarder
    /// follows and acknowledges (waited for up to 2 s).
    fn set_api_latency(&self, node: &str, latency: Option<Range<Duration>>) -> Result<()> {
        self.namespace_of(node)?;
        super::latency::apply(
            &latency_file(&self.dir, node),
            latency.as_ref(),
            Duration::from_secs(2),
        )
        .with_context(|| format!("setting {node}'s API latency"))
    }

    /// The leading replica's metrics: the standby's after a takeover.
    fn controller_metrics(&self) -> Result<String> {
        let port = if self.procs().pid(STANDBY).is_some() {
            standby_metrics_port(self.api_port)
        } else {
            controller_metrics_port(self.api_port)
        };
        metrics_at(port)
    }

    /// Starts a standby replica, waits until it is up, SIGKILLs the
    /// leader (no hand-over: the standby waits out the lease, as after a
    /// node loss) and waits until the standby leads and has read the
    /// configuration. The standby stays the leader until
    /// [`Cluster::restart_controller`].
    fn controller_takeover(&self) -> Result<()> {
        let port = standby_metrics_port(self.api_port);
        self.start_controller_replica(STANDBY, port)?;
        // Ready: it serves the webhooks the leader's end leaves to it.
        self.wait_ready(STANDBY, port)?;
        if !self
            .procs()
            .signal("controller", nix::sys::signal::Signal::SIGKILL)
        {
            bail!("no controller runs to take over from");
        }
        self.procs().wait_exit("controller", Duration::from_secs(5));
        self.procs().stop("controller", Duration::ZERO);
        // The lease lasts 15 s after the killed leader's last renewal.
        let deadline = Instant::now() + Duration::from_secs(45);
        loop {
            if metrics_at(port).is_ok_and(|m| read_configuration(&m)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the standby controller did not lead and read the configuration within 45 s");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    /// Host numbers 100-119 of the node subnets (nodes use 10+, the
    /// external host 2; see `netns`).
    fn pool_ranges(&self) -> PoolRanges {
        PoolRanges {
            v4: Some("172.30.0.100-172.30.0.119".into()),
            v6: Some("fc00:f853:ccd:e793::100-fc00:f853:ccd:e793::11f".into()),
            secondary_v4: Some("172.30.1.100-172.30.1.119".into()),
        }
    }
    /// The external namespace has one leg on each bridge, named like the
    /// nodes' legs.
    fn external_interface(&self, node_iface: &str) -> Result<String> {
        match node_iface {
            "eth0" | "eth1" => Ok(node_iface.to_owned()),
            other => bail!("the lab has eth0 and eth1, not {other}"),
        }
    }

    fn external_netns(&self) -> Result<Option<String>> {
        Ok(Some(self.lab.external.namespace.clone()))
    }

    /// The external host's `eth0` addresses, when FRR runs there.
    fn router_addresses(&self) -> Vec<IpAddr> {
        if self.protocol == Protocol::Bgp {
            self.lab.external.addresses()
        } else {
            Vec::new()
        }
    }

    fn vtysh(&self, command: &str) -> Result<String> {
        self.bgp_router()?.vtysh(command)
    }

    fn bgp_routers(&self) -> Vec<crate::frr::BgpRouter> {
        if self.protocol == Protocol::Bgp {
            routers::bgp_routers(&self.lab)
        } else {
            Vec::new()
        }
    }

    fn vtysh_on(&self, router: &str, command: &str) -> Result<String> {
        self.bgp_router_named(router)?.vtysh(command)
    }

    /// Stops bgpd and zebra (SIGTERM: peers get a Cease) and starts them
    /// again from `<lab dir>/frr/frr.conf`.
    fn restart_router(&self) -> Result<()> {
        self.bgp_router()?.restart()
    }

    /// FRR runs in the external namespace.
    fn exec_on_router(&self, argv: &[&str]) -> Result<Output> {
        self.bgp_router()?;
        self.exec_on_external(argv)
    }

    /// FRR runs in the external namespace.
    fn router_netns(&self) -> Result<String> {
        self.bgp_router()?;
        Ok(self.lab.external.namespace.clone())
    }

    fn restart_controller(&self) -> Result<()> {
        // SIGTERM: it releases its lease, so the new process leads at once.
        // A standby left by a takeover goes too: the lab runs one replica.
        self.procs().stop(STANDBY, Duration::from_secs(5));
        self.procs().stop("controller", Duration::from_secs(5));
        self.start_controller()
    }

    fn start_speaker(&self, node: &str) -> Result<()> {
        self.start_speaker_env(node, None)
    }

    fn fresh_for_chart(&self) -> Result<Option<FreshCluster>> {
        fresh_for_chart(self).map(Some)
    }

    fn start_speaker_with_clock_offset(&self, node: &str, offset_secs: i64) -> Result<bool> {
        self.start_speaker_env(node, Some(offset_secs))?;
        Ok(true)
    }
}

/// Lab `<name>-chart` beside `outer`, made from scratch (a leftover of a
/// crashed run goes first): as many nodes and the same families, layer 2,
/// metallb-rs left to the chart.
fn fresh_for_chart(outer: &LabCluster) -> Result<FreshCluster> {
    let name = format!("{}-chart", outer.name);
    let mut spec = LabSpec::new(&outer.bin_dir);
    spec.name = name.clone();
    spec.api_port = api_port(&name);
    if spec.api_port == outer.api_port {
        // `up` would take the outer lab's API server for its own.
        bail!(
            "lab {name} would get the API port {} of lab {} (the ports are hashed from the names): run the outer lab under another --name",
            spec.api_port,
            outer.name
        );
    }
    spec.nodes = outer.lab.nodes.len();
    spec.family = outer.family;
    spec.log_level = outer.log_level.clone();
    spec.metallb = Metallb::Chart;
    down(&name).with_context(|| format!("removing lab {name} left by an earlier run"))?;
    let lab = match up(&spec) {
        Ok(lab) => lab,
        Err(e) => {
            let _ = down(&name);
            return Err(e).with_context(|| format!("bringing up lab {name}"));
        }
    };
    Ok(FreshCluster::new(std::sync::Arc::new(lab), move || {
        down(&name).map(drop)
    }))
}

impl LabCluster {
    /// Starts `node`'s speaker, with the wall-clock test hook when
    /// `clock_offset` is set.
    fn start_speaker_env(&self, node: &str, clock_offset: Option<i64>) -> Result<()> {
        let ns = self.namespace_of(node)?.to_owned();
        // A speaker stopped a moment ago may still be saying goodbye; a
        // start now would find it "running" and start nothing.
        let name = format!("speaker-{node}");
        if self.procs().take_stopping(&name)
            && !self.procs().wait_exit(&name, Duration::from_secs(5))
        {
            bail!("the stopped speaker on {node} did not exit within 5 s");
        }
        let bin = self.bin_dir.join("metallb-rs").display().to_string();
        // Gossip on the node's first address, as the manifests do with
        // the pod (= node) IP.
        let gossip_addr = self
            .nodes()
            .into_iter()
            .find(|n| n.name == node)
            .and_then(|n| n.addresses.first().copied())
            .with_context(|| format!("node {node} has no address"))?;
        let argv = vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            ns,
            bin,
            "speaker".into(),
            "--node-name".into(),
            node.to_owned(),
            "--ml-bindaddr".into(),
            gossip_addr.to_string(),
            // Upstream's 0.0.0.0:9120 would take the loopback port the
            // plain metrics need.
            "--metrics-bind-address".into(),
            std::net::SocketAddr::new(gossip_addr, metallb_rs::manifests::ports::METRICS)
                .to_string(),
            "--insecure-metrics-bind-address".into(),
            SPEAKER_PLAIN_METRICS.into(),
            "--log-format".into(),
            "text".into(),
            "--log-level".into(),
            self.log_level.clone(),
        ];
        let mut env = vec![(
            "KUBECONFIG",
            component_kubeconfig(&self.dir, &format!("speaker-{node}"))
                .display()
                .to_string(),
        )];
        if let Some(offset) = clock_offset {
            env.push((metallb_rs::clock::OFFSET_ENV, offset.to_string()));
        }
        self.procs()
            .ensure_fresh(&format!("speaker-{node}"), &argv, &env)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::read_configuration;

    #[test]
    fn a_controller_has_read_the_configuration_once_either_gauge_is_set() {
        let fresh =
            "metallb_k8s_client_config_loaded_bool 0\nmetallb_k8s_client_config_stale_bool 0\n";
        assert!(!read_configuration(fresh));
        assert!(read_configuration(
            "# HELP x\nmetallb_k8s_client_config_loaded_bool 0\nmetallb_k8s_client_config_stale_bool 1\n"
        ));
        assert!(read_configuration(
            "metallb_k8s_client_config_loaded_bool 1\nmetallb_k8s_client_config_stale_bool 0\n"
        ));
        assert!(!read_configuration(
            "metallb_k8s_client_config_loaded_bool_other 1\n"
        ));
    }
}
