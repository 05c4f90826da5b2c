//! `cargo xtask e2e`: picks the cluster (lab, kind or a kubeconfig) and
//! hands the selected suites to the e2e harness.

use crate::dev_env::{build_binaries, cluster_name, lab_spec, lab_up, resolve};
use crate::flags::{DevEnvArgs, E2eArgs, Protocol, Provider};
use anyhow::{Context, Result, bail};
use devenv::cluster::{Cluster, KubeconfigCluster};
use std::sync::Arc;

/// Runs the suites; fails when a test failed.
pub fn run(args: &E2eArgs) -> Result<()> {
    if args.upstream_map {
        for line in e2e::upstream::render(e2e::upstream::UPSTREAM, &e2e::suites::all())? {
            println!("{line}");
        }
        return Ok(());
    }
    let opts = e2e::Options {
        focus: args.focus.clone(),
        skip: args.skip.clone(),
        dry_run: args.dry_run || args.list,
        junit: args.junit.clone(),
        allow_empty: args.allow_empty,
        ..Default::default()
    };
    let provider = args.provider;
    let summary = e2e::run(e2e::suites::all(), &opts, || {
        let cluster: Arc<dyn Cluster> = match resolve(provider)? {
            Provider::Kubeconfig => {
                let path = args
                    .kubeconfig
                    .clone()
                    .context("--provider kubeconfig needs --kubeconfig PATH")?;
                Arc::new(KubeconfigCluster::new(&path))
            }
            Provider::Kind => {
                e2e::external::require_tools()?;
                let kind =
                    devenv::kind::KindCluster::open(&cluster_name(&args.name, Provider::Kind))?;
                for d in kind.remove_dev_env_config()? {
                    println!("e2e: deleted the dev-env's {d} (the suites bring their own pools)");
                }
                Arc::new(kind)
            }
            _ => {
                e2e::external::require_tools()?;
                let mut dev = DevEnvArgs {
                    name: args.name.clone(),
                    ..DevEnvArgs::default()
                };
                // The BGP suites need the router; the others do not mind it.
                if devenv::lab::frr::installed() {
                    dev.protocol = Protocol::Bgp;
                } else {
                    println!(
                        "e2e: FRR is not installed, so the lab runs no BGP router (`apt-get install frr`)"
                    );
                }
                let bin_dir = build_binaries()?;
                let lab = lab_up(&lab_spec(&dev, bin_dir))?;
                for d in lab.remove_dev_env_config()? {
                    println!("e2e: deleted the dev-env's {d} (the suites bring their own pools)");
                }
                Arc::new(lab)
            }
        };
        e2e::CtxFactory::for_cluster(cluster)
    })?;
    if !summary.success() {
        bail!(
            "{} of {} e2e tests failed",
            summary.failed,
            summary.selected
        );
    }
    if devenv::prereq::ci() && summary.skipped > 0 {
        bail!(
            "CI=true: {} of {} e2e tests skipped themselves (listed above); every suite must run here",
            summary.skipped,
            summary.selected
        );
    }
    Ok(())
}
