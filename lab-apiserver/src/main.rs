//! `lab-apiserver`: the API server as its own process, so it keeps the
//! cluster's state while every other lab process restarts.

use anyhow::{Context, Result};
use lab_apiserver::ApiServer;
use std::net::SocketAddr;
use std::path::PathBuf;

const USAGE: &str = "usage: lab-apiserver [--listen 127.0.0.1:6443] [--kubeconfig PATH] [--name lab] [--token-key PATH] [--tls-dir DIR] [--webhook-service NS/NAME=HOST:PORT[,HOST:PORT...]]... [--pod-log-dir DIR]";

fn main() -> Result<()> {
    // Text logs to stderr (the lab keeps them in a file); RUST_LOG refines.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let mut listen: SocketAddr = "127.0.0.1:6443".parse()?;
    let mut kubeconfig: Option<PathBuf> = None;
    let mut name = "lab".to_owned();
    let mut token_key: Option<PathBuf> = None;
    let mut tls_dir: Option<PathBuf> = None;
    let mut webhook_services = std::collections::BTreeMap::new();
    let mut pod_logs: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{arg} needs a value ({USAGE})"))
        };
        match arg.as_str() {
            "--listen" => listen = value()?.parse()?,
            "--kubeconfig" => kubeconfig = Some(value()?.into()),
            "--name" => name = value()?,
            "--token-key" => token_key = Some(value()?.into()),
            "--tls-dir" => tls_dir = Some(value()?.into()),
            "--pod-log-dir" => pod_logs = Some(value()?.into()),
            // The lab has no Service proxy: a webhook Service is reached
            // here (loopback ports of the root namespace, one per replica:
            // the first that accepts a connection answers).
            "--webhook-service" => {
                let v = value()?;
                let (service, addr) = v
                    .split_once('=')
                    .filter(|(s, a)| s.contains('/') && a.split(',').all(|a| a.contains(':')))
                    .with_context(|| {
                        format!(
                            "--webhook-service {v:?}: expected NAMESPACE/NAME=HOST:PORT[,HOST:PORT...]"
                        )
                    })?;
                webhook_services.insert(service.to_owned(), addr.to_owned());
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => anyhow::bail!("unknown argument {other:?} ({USAGE})"),
        }
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        // Tokens stay valid across restarts when the key is kept in a file.
        let options = lab_apiserver::Options {
            token_key: token_key
                .as_deref()
                .map(lab_apiserver::load_or_create_token_key)
                .transpose()?,
            tls: tls_dir
                .as_deref()
                .map(lab_apiserver::Identity::load_or_create)
                .transpose()?,
            webhook_services,
            pod_logs,
            ..Default::default()
        };
        let server = ApiServer::bind(listen, options).await?;
        if let Some(path) = &kubeconfig {
            server.write_kubeconfig(&name, path)?;
        }
        println!("lab API server listening on {}", server.url());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
        server.stop();
        anyhow::Ok(())
    })
}
