//! `lab-controller-manager`: the controllers kube-controller-manager runs
//! that the lab needs (EndpointSlices, node lifecycle, Deployments and
//! ReplicaSets) and the scheduler,
//! as one process in the root namespace beside the API server.

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Duration;

const USAGE: &str = "usage: lab-controller-manager --kubeconfig PATH";

fn main() -> Result<()> {
    metallb_rs::logging::init(
        metallb_rs::logging::LogFormat::Text,
        metallb_rs::logging::LogLevel::Info,
    );
    let mut kubeconfig: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--kubeconfig" => {
                kubeconfig = Some(
                    args.next()
                        .with_context(|| format!("--kubeconfig needs a value ({USAGE})"))?
                        .into(),
                )
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => anyhow::bail!("unknown argument {other:?} ({USAGE})"),
        }
    }
    let kubeconfig = kubeconfig.with_context(|| format!("--kubeconfig is required ({USAGE})"))?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let client = devenv::lab::cluster::client(&kubeconfig).await?;
        tokio::spawn(devenv::lab::endpoints::run(
            client.clone(),
            std::future::pending(),
        ));
        tokio::spawn(devenv::lab::workloads::run(
            client.clone(),
            std::future::pending(),
        ));
        tokio::spawn(devenv::lab::scheduler::run(
            client.clone(),
            std::future::pending(),
        ));
        tokio::spawn(devenv::lab::nodelifecycle::run(
            client,
            Duration::from_secs(10),
            std::future::pending(),
        ));
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
        anyhow::Ok(())
    })
}
