//! Bringing a lab up (network, routers, API server, controller-manager,
//! bootstrap, then per node its forwarder, agent and speaker) and down
//! again, and the fresh lab beside another that a chart spec gets.

use super::bootstrap::{Webhooks, bootstrap_api, create_release_namespace};
use super::kubeconfigs::write_component_kubeconfigs;
use super::layout::{
    api_port, controller_metrics_port, latency_file, pod_log_dir, standby_metrics_port,
    webhook_port,
};
use super::scrape::healthy;
use super::{LabCluster, LabSpec, Metallb, STANDBY, lab_dir, netns, routers};
use crate::cluster::{Cluster, FreshCluster, Protocol};
use crate::lab::netns::Topology;
use crate::lab::process::Processes;
use anyhow::{Context, Result, bail};
use std::path::Path;
use std::time::{Duration, Instant};

/// Waits until 127.0.0.1:`port` accepts connections inside `ns` (the
/// node's forwarder is up), so agents and speakers find the API at once.
fn wait_for_forwarder(ns: &str, port: u16, procs: &Processes, node: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let connected = crate::lab::enter::in_netns(ns, || {
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

/// The path of binary `name` in the spec's `bin_dir`, as an argument.
fn bin(spec: &LabSpec, name: &str) -> String {
    spec.bin_dir.join(name).display().to_string()
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
    // The routers first: a missing FRR fails before anything else starts.
    match spec.protocol {
        Protocol::Bgp => routers::start(&lab, &dir)?,
        Protocol::Layer2 => {
            routers::remove_all(&dir, &spec.name)?;
        }
    }
    stop_in_recreated_namespaces(&procs, &lab);
    ensure_apiserver(spec, &procs, &dir, &kubeconfig)?;
    // What kube-controller-manager would run (stateless: restarted when
    // rebuilt).
    procs.ensure_fresh(
        "controller-manager",
        &[
            bin(spec, "lab-controller-manager"),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
        ],
        &[],
    )?;
    prepare_api(spec, &procs, &lab, &dir, &kubeconfig)?;
    let cluster = LabCluster {
        name: spec.name.clone(),
        dir: dir.clone(),
        kubeconfig,
        lab,
        family: spec.family,
        bin_dir: spec.bin_dir.clone(),
        log_level: spec.log_level.clone(),
        api_port: spec.api_port,
        protocol: spec.protocol,
    };
    for (i, node) in cluster.lab.nodes.iter().enumerate() {
        start_node(spec, &cluster, &procs, node, i == 0)?;
    }
    if spec.metallb == Metallb::Lab {
        cluster.start_controller()?;
    }
    Ok(cluster)
}

/// A recreated node namespace is a new namespace: what ran in the old one
/// (forwarder, agent, speaker) is stale, and stops.
fn stop_in_recreated_namespaces(procs: &Processes, lab: &netns::Lab) {
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
}

/// Starts the lab API server unless it answers, and waits until it
/// serves and has written the admin kubeconfig.
fn ensure_apiserver(
    spec: &LabSpec,
    procs: &Processes,
    dir: &Path,
    kubeconfig: &Path,
) -> Result<()> {
    if healthy(spec.api_port) {
        return Ok(());
    }
    procs.stop("apiserver", Duration::from_secs(1));
    let argv = vec![
        bin(spec, "lab-apiserver"),
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
        pod_log_dir(dir).display().to_string(),
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
    while !healthy(spec.api_port) || kube::config::Kubeconfig::read_from(kubeconfig).is_err() {
        if Instant::now() > deadline {
            bail!(
                "the lab API server did not answer within 10 s: see {}",
                procs.log_file("apiserver").display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// What the API server needs before MetalLB runs, by who runs it: the
/// chart's namespace only, or the CRDs, RBAC and (where the API server
/// can call them) webhooks, and the lab's own components' kubeconfigs.
fn prepare_api(
    spec: &LabSpec,
    procs: &Processes,
    lab: &netns::Lab,
    dir: &Path,
    kubeconfig: &Path,
) -> Result<()> {
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
        stop_own_metallb(procs, lab);
        crate::runtime()?
            .block_on(create_release_namespace(kubeconfig))
            .context("creating the chart's namespace")?;
    } else {
        bootstrap_api(kubeconfig, webhooks).context("installing the MetalLB CRDs and namespace")?;
    }
    if spec.metallb == Metallb::Lab {
        let nodes: Vec<String> = lab.nodes.iter().map(|n| n.name.clone()).collect();
        write_component_kubeconfigs(dir, &spec.name, spec.api_port, kubeconfig, &nodes)
            .context("issuing the MetalLB components' ServiceAccount tokens")?;
    }
    Ok(())
}

/// Starts `node`'s API forwarder, its agent and (when the lab runs
/// MetalLB itself) its speaker, unless they run.
fn start_node(
    spec: &LabSpec,
    cluster: &LabCluster,
    procs: &Processes,
    node: &netns::LabHost,
    control_plane: bool,
) -> Result<()> {
    let dir = &cluster.dir;
    // Node namespaces reach the API server on their own 127.0.0.1:PORT.
    // A new forwarder starts without latency, whatever an earlier run
    // left in its file.
    if procs.pid(&format!("forward-{}", node.name)).is_none() {
        let _ = std::fs::remove_file(latency_file(dir, &node.name));
    }
    procs.ensure(
        &format!("forward-{}", node.name),
        &[
            bin(spec, "lab-forward"),
            "--listen".into(),
            format!("127.0.0.1:{}", spec.api_port),
            "--forward".into(),
            node.namespace.clone(),
            "--latency-file".into(),
            latency_file(dir, &node.name).display().to_string(),
        ],
        &[],
    )?;
    wait_for_forwarder(&node.namespace, spec.api_port, procs, &node.name)?;
    let mut argv = strings(&["ip", "netns", "exec", &node.namespace]);
    argv.extend([
        bin(spec, "lab-agent"),
        "--node".into(),
        node.name.clone(),
        "--kubeconfig".into(),
        cluster.kubeconfig.display().to_string(),
        "--pod-log-dir".into(),
        pod_log_dir(dir).display().to_string(),
        // Containers of the metallb-rs image (the chart's) run it.
        "--metallb-rs-binary".into(),
        bin(spec, "metallb-rs"),
        "--pod-token-dir".into(),
        dir.join("pod-tokens").display().to_string(),
    ]);
    for a in node.addresses() {
        argv.extend(["--address".into(), a.to_string()]);
    }
    if control_plane {
        argv.push("--control-plane".into());
    }
    procs.ensure_fresh(&format!("agent-{}", node.name), &argv, &[])?;
    if spec.metallb == Metallb::Lab {
        cluster.start_speaker(&node.name)?;
    }
    Ok(())
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
    removed.extend(crate::lab::proxy::delete_tables(&netns::lab_namespaces(
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

/// Lab `<name>-chart` beside `outer`, made from scratch (a leftover of a
/// crashed run goes first): as many nodes and the same families, layer 2,
/// metallb-rs left to the chart.
pub(super) fn fresh_for_chart(outer: &LabCluster) -> Result<FreshCluster> {
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
