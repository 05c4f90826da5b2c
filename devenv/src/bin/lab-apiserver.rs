//! `lab-apiserver`: the lab's API server as its own process, so it keeps
//! the cluster's state while every other lab process restarts.

use anyhow::Result;
use devenv::lab::apiserver::ApiServer;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Usage: lab-apiserver [--listen ADDR] [--kubeconfig PATH] [--name CLUSTER]
fn main() -> Result<()> {
    let mut listen: SocketAddr = "127.0.0.1:6443".parse()?;
    let mut kubeconfig: Option<PathBuf> = None;
    let mut name = "lab".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--listen" => listen = value()?.parse()?,
            "--kubeconfig" => kubeconfig = Some(value()?.into()),
            "--name" => name = value()?,
            "-h" | "--help" => {
                println!(
                    "usage: lab-apiserver [--listen 127.0.0.1:6443] [--kubeconfig PATH] [--name lab]"
                );
                return Ok(());
            }
            other => anyhow::bail!("unknown argument {other:?} (see --help)"),
        }
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let server = ApiServer::bind(listen).await?;
        if let Some(path) = &kubeconfig {
            server.write_kubeconfig(&name, path)?;
        }
        println!("lab API server listening on http://{}", server.addr());
        tokio::signal::ctrl_c().await?;
        server.stop();
        anyhow::Ok(())
    })
}
