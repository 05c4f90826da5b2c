//! `lab-apiserver`: the lab's API server as its own process, so it keeps
//! the cluster's state while every other lab process restarts.

use anyhow::Result;
use devenv::lab::apiserver::ApiServer;
use devenv::lab::forward::Forwarder;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Usage: lab-apiserver [--listen ADDR] [--kubeconfig PATH] [--name CLUSTER] [--forward NETNS]...
fn main() -> Result<()> {
    metallb_rs::logging::init(
        metallb_rs::logging::LogFormat::Text,
        metallb_rs::logging::LogLevel::Info,
    );
    let mut listen: SocketAddr = "127.0.0.1:6443".parse()?;
    let mut kubeconfig: Option<PathBuf> = None;
    let mut name = "lab".to_owned();
    let mut forward: Vec<String> = Vec::new();
    let mut forward_only = false;
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
            "--forward" => forward.push(value()?),
            "--forward-only" => forward_only = true,
            "-h" | "--help" => {
                println!(
                    "usage: lab-apiserver [--listen 127.0.0.1:6443] [--kubeconfig PATH] [--name lab]"
                );
                return Ok(());
            }
            other => anyhow::bail!("unknown argument {other:?} (see --help)"),
        }
    }
    if forward_only {
        // Just the forwarders (one lab process per node namespace, so a
        // recreated namespace gets a fresh one without restarting the API).
        let forwarders = forward
            .iter()
            .map(|ns| Forwarder::start(ns, listen.port(), listen))
            .collect::<Result<Vec<_>, _>>()?;
        println!(
            "forwarding 127.0.0.1:{} in {}",
            listen.port(),
            forward.join(", ")
        );
        wait_for_signal();
        forwarders.into_iter().for_each(Forwarder::stop);
        return Ok(());
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let server = ApiServer::bind(listen).await?;
        if let Some(path) = &kubeconfig {
            server.write_kubeconfig(&name, path)?;
        }
        println!("lab API server listening on http://{}", server.addr());
        // Node namespaces reach the server on their own 127.0.0.1:PORT.
        let mut forwarders = Vec::new();
        for ns in &forward {
            forwarders.push(Forwarder::start(ns, server.addr().port(), server.addr())?);
            println!("forwarding 127.0.0.1:{} in {ns}", server.addr().port());
        }
        // The controllers kube-controller-manager would run.
        let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig(&name))?;
        let client = devenv::lab::cluster::client_from(kc).await?;
        tokio::spawn(devenv::lab::endpoints::run(
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
        forwarders.into_iter().for_each(Forwarder::stop);
        server.stop();
        anyhow::Ok(())
    })
}

/// Blocks until SIGTERM or SIGINT.
fn wait_for_signal() {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
    });
}
