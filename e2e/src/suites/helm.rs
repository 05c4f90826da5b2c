//! `Helm`: metallb-rs installed the way most users install it, through
//! the chart (`charts/metallb-rs`, by Helm's own library), into a fresh
//! lab in which nothing else runs metallb-rs: the nodes play the chart's
//! controller Deployment and speaker DaemonSet Pods with the lab's
//! metallb-rs binary ([`devenv::lab::played::metallb`]). Then one of the
//! `L2` suite's specs runs on it, and the release is uninstalled.

use super::l2::{self, Net};
use crate::{Ctx, CtxFactory, Spec};
use anyhow::{Result, ensure};
use devenv::wait::eventually;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use std::time::Duration;

const NS: &str = metallb_rs::api::DEFAULT_NAMESPACE;
const WAIT: Duration = Duration::from_secs(90);

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![Spec::new(
        "Helm",
        "chart installs metallb-rs and a layer 2 service is answered",
        &["IPV4"],
        chart_l2,
    )]
}

fn chart_l2(ctx: &Ctx) -> Result<()> {
    if !devenv::helm::available() {
        return Err(crate::skip(format!(
            "Helm's library for Python is not installed ({})",
            devenv::helm::INSTALL_HINT
        )));
    }
    let Some(fresh) = ctx.cluster().fresh_for_chart()? else {
        return Err(crate::skip(
            "the chart is installed into a fresh lab, which only the lab provider makes",
        ));
    };
    let kubeconfig = fresh.cluster().kubeconfig().to_owned();
    devenv::helm::install_in_lab(&kubeconfig)?;
    let factory = CtxFactory::for_cluster(fresh.cluster().clone())?;
    let inner = factory.create(ctx.test_name())?;
    let checked = wait_for_metallb(&inner).and_then(|()| {
        l2::check_cluster_policy(&inner, &[l2::pool(&inner, Net::V4)?.as_str()], "IPv4")
    });
    // Uninstalled whether the check passed or not.
    let uninstalled =
        devenv::helm::action(&kubeconfig, "uninstall", None).and_then(|_| gone(&inner));
    checked?;
    uninstalled?;
    inner.finish()?;
    fresh.remove()
}

/// Waits until the chart's controller and every speaker it should run
/// (one per node but the control plane) are Ready.
fn wait_for_metallb(ctx: &Ctx) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(ctx.client()?, NS);
    let speakers = l2::nodes(ctx).len().saturating_sub(1);
    eventually(WAIT, "the chart's controller and speakers Ready", || {
        let list = ctx.block_on(pods.list(&ListParams::default().labels("app=metallb")))?;
        let ready = |component: &str| {
            list.items
                .iter()
                .filter(|p| {
                    p.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("component"))
                        .map(String::as_str)
                        == Some(component)
                })
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        })
                })
                .count()
        };
        Ok((ready("controller") == 1 && ready("speaker") == speakers).then_some(()))
    })
}

/// Fails unless the uninstall removed the chart's workloads, and with
/// them their Pods (so no metallb-rs process of theirs runs on).
fn gone(ctx: &Ctx) -> Result<()> {
    let client = ctx.client()?;
    let ds = ctx.block_on(Api::<DaemonSet>::namespaced(client.clone(), NS).get_opt("speaker"))?;
    let deploy =
        ctx.block_on(Api::<Deployment>::namespaced(client.clone(), NS).get_opt("controller"))?;
    ensure!(
        ds.is_none() && deploy.is_none(),
        "helm uninstall left the speaker DaemonSet ({}) or the controller Deployment ({})",
        ds.is_some(),
        deploy.is_some()
    );
    let pods: Api<Pod> = Api::namespaced(client, NS);
    eventually(WAIT, "the chart's Pods gone after helm uninstall", || {
        let left = ctx.block_on(pods.list(&ListParams::default().labels("app=metallb")))?;
        Ok(left.items.is_empty().then_some(()))
    })
}
