//! `lab-forward`: the API forwarders of lab node namespaces (one process
//! per node, so a recreated namespace gets a fresh one without restarting
//! the API server). Each node namespace reaches the API server on its own
//! `127.0.0.1:PORT`. With `--latency-file`, what the namespaces send to
//! the API server waits as that file says (see `devenv::lab::latency`).

use anyhow::{Context, Result};
use devenv::lab::forward::Forwarder;
use devenv::lab::latency;
use std::net::SocketAddr;
use std::path::PathBuf;

const USAGE: &str =
    "usage: lab-forward --listen 127.0.0.1:6443 --forward NETNS... [--latency-file PATH]";

fn main() -> Result<()> {
    metallb_rs::logging::init(
        metallb_rs::logging::LogFormat::Text,
        metallb_rs::logging::LogLevel::Info,
    );
    let mut listen: Option<SocketAddr> = None;
    let mut namespaces: Vec<String> = Vec::new();
    let mut latency_file: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{arg} needs a value ({USAGE})"))
        };
        match arg.as_str() {
            "--listen" => listen = Some(value()?.parse()?),
            "--forward" => namespaces.push(value()?),
            "--latency-file" => latency_file = Some(value()?.into()),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => anyhow::bail!("unknown argument {other:?} ({USAGE})"),
        }
    }
    let listen = listen.with_context(|| format!("--listen is required ({USAGE})"))?;
    let forwarders = namespaces
        .iter()
        .map(|ns| Forwarder::start(ns, listen.port(), listen))
        .collect::<Result<Vec<_>, _>>()?;
    let _following = latency_file
        .map(|path| {
            let targets = forwarders.iter().map(Forwarder::latency).collect();
            latency::follow(path.clone(), targets)
                .with_context(|| format!("following {}", path.display()))
        })
        .transpose()?;
    println!(
        "forwarding 127.0.0.1:{} in {}",
        listen.port(),
        namespaces.join(", ")
    );
    wait_for_signal();
    forwarders.into_iter().for_each(Forwarder::stop);
    Ok(())
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
