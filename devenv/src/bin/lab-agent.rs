//! `lab-agent`: the lab's kubelet + kube-proxy stand-in for one node. Runs
//! inside the node's network namespace: registers and heartbeats the Node,
//! puts LoadBalancer VIPs on `lo` where the service may be served here,
//! programs the node's service proxy (nftables) and health check node
//! ports, and runs the node's backend Pods.

use anyhow::Result;
use clap::Parser;
use devenv::lab::agent::{self, AgentConfig};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// One lab node's agent.
#[derive(Parser, Debug)]
#[command(name = "lab-agent")]
struct Args {
    /// Node name
    #[arg(long)]
    node: String,
    /// Kubeconfig reaching the lab API server from this namespace
    #[arg(long)]
    kubeconfig: PathBuf,
    /// InternalIP addresses of the node (repeat per family)
    #[arg(long = "address")]
    addresses: Vec<IpAddr>,
    /// The node is the control plane
    #[arg(long)]
    control_plane: bool,
    /// Heartbeat interval in milliseconds
    #[arg(long, default_value_t = 2000)]
    heartbeat_ms: u64,
    /// Do not manage VIPs on lo (for runs without root)
    #[arg(long)]
    no_vips: bool,
    /// Do not run the service proxy (for runs without root)
    #[arg(long)]
    no_proxy: bool,
    /// Where container logs are written (the API server's `pods/log`
    /// reads them there)
    #[arg(long)]
    pod_log_dir: PathBuf,
    /// The metallb-rs binary that plays containers of the metallb-rs
    /// image (the chart's controller and speakers)
    #[arg(long, requires = "pod_token_dir")]
    metallb_rs_binary: Option<PathBuf>,
    /// Where the kubeconfigs of those processes (their ServiceAccount
    /// tokens) are written
    #[arg(long)]
    pod_token_dir: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    metallb_rs::logging::init(
        metallb_rs::logging::LogFormat::Text,
        metallb_rs::logging::LogLevel::Info,
    );
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let client = devenv::lab::cluster::client(&args.kubeconfig).await?;
        let mut cfg = AgentConfig::new(args.node.clone());
        cfg.addresses = args.addresses.clone();
        cfg.control_plane = args.control_plane;
        cfg.heartbeat = Duration::from_millis(args.heartbeat_ms);
        cfg.manage_vips = !args.no_vips;
        cfg.manage_proxy = !args.no_proxy;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let pods = tokio::spawn(devenv::lab::backend::run(
            client.clone(),
            args.node.clone(),
            args.addresses.clone(),
            args.pod_log_dir.clone(),
            args.metallb_rs_binary
                .clone()
                .zip(args.pod_token_dir.clone())
                .map(|(binary, token_dir)| devenv::lab::backend::MetallbRs {
                    binary,
                    kubeconfig: args.kubeconfig.clone(),
                    token_dir,
                }),
            stopped(stop_rx.clone()),
        ));
        let node = tokio::spawn(agent::run(client, cfg, stopped(stop_rx)));
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
        let _ = stop_tx.send(true);
        // The agent removes the VIPs it added and the proxy's table before
        // returning.
        let _ = tokio::time::timeout(Duration::from_secs(2), node).await;
        pods.abort();
        anyhow::Ok(())
    })
}
