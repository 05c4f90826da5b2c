//! `Helm`: metallb-rs installed the way most users install it, through
//! the chart (`charts/metallb-rs`, by Helm's own library), into a fresh
//! lab in which nothing else runs metallb-rs: the nodes play the chart's
//! controller Deployment and speaker DaemonSet Pods with the lab's
//! metallb-rs binary ([`devenv::lab::played::metallb`]). Then one of the
//! `L2` suite's specs runs on it; an upgrade sets the speakers' log level
//! to debug, which the rolled speakers must run with (arguments and log)
//! while the L2 check passes again; a rollback brings info back; and the
//! uninstall must leave nothing of the release but its CRDs.

use super::l2::{self, Net};
use crate::metallb::Config;
use crate::{Ctx, CtxFactory, Spec};
use anyhow::{Context, Result, bail, ensure};
use devenv::kind::apply::ObjectRef;
use devenv::wait::eventually;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

const NS: &str = metallb_rs::api::DEFAULT_NAMESPACE;
const WAIT: Duration = Duration::from_secs(90);
/// The most a speaker roll may take: the DaemonSet replaces one speaker
/// at a time, each Ready after its probe's first passing period.
const ROLL: Duration = Duration::from_secs(180);

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![Spec::new(
        "Helm",
        "chart installs metallb-rs and a layer 2 service is answered; upgrade, rollback and uninstall reach the running speakers",
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
    let installed = devenv::helm::install_in_lab(&kubeconfig)?;
    let mut made = devenv::helm::manifest_objects(&installed)?;
    let factory = CtxFactory::for_cluster(fresh.cluster().clone())?;
    let inner = factory.create(ctx.test_name())?;
    let checked = wait_for_metallb(&inner)
        .and_then(|()| l2_check(&inner))
        .and_then(|()| upgrade_and_roll_back(&inner, &factory, &kubeconfig, &mut made));
    // Uninstalled whether the checks passed or not.
    let uninstalled =
        devenv::helm::action(&kubeconfig, "uninstall", None).and_then(|_| gone(&inner, &made));
    checked?;
    uninstalled?;
    inner.finish()?;
    fresh.remove()
}

/// The `L2` suite's check of a Cluster-policy service on the chart's
/// metallb-rs.
fn l2_check(ctx: &Ctx) -> Result<()> {
    l2::check_cluster_policy(ctx, &[l2::pool(ctx, Net::V4)?.as_str()], "IPv4")
}

/// Upgrades the release with the speakers' log level at debug, and checks
/// that the speakers run with it (their arguments and their log) and
/// still answer; then rolls back to the first revision and checks that
/// they are back at info. Adds the upgrade's objects to `made`.
fn upgrade_and_roll_back(
    ctx: &Ctx,
    factory: &CtxFactory,
    kubeconfig: &Path,
    made: &mut Vec<ObjectRef>,
) -> Result<()> {
    let count = speaker_count(ctx);
    let installed = revisions(&speaker_pods(ctx)?);
    // An address answered before the upgrade, to be answered after it.
    let mut held = Config::new(ctx)?;
    let range = l2::pool(ctx, Net::V4)?;
    held.pool("helm-upgrade", json!({ "addresses": [range] }))?;
    held.l2_advertisement("helm-upgrade", json!({}))?;
    let ip = l2::web_service(
        ctx,
        "across-upgrade",
        json!({ "spec": { "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack" } }),
    )?[0];
    answered(ctx, ip, "before the upgrade")?;
    let mut values = devenv::helm::lab_values();
    crate::metallb::merge(&mut values, &json!({ "speaker": { "logLevel": "debug" } }));
    let upgraded = devenv::helm::action(kubeconfig, "upgrade", Some(&values))?;
    ensure!(
        upgraded["info"]["status"] == "deployed",
        "helm upgrade: the release is not deployed: {}",
        upgraded["info"]
    );
    for r in devenv::helm::manifest_objects(&upgraded)? {
        if !made.contains(&r) {
            made.push(r);
        }
    }
    let debug = rolled(ctx, &installed, count, "the upgrade's")?;
    speakers_log_at(ctx, &debug, Level::Debug)?;
    // Every speaker is a new process now: the address is announced and
    // answered again, and the whole L2 check passes (in a namespace of
    // its own: the first check's service is still there, and its
    // configuration replaces the one held here).
    answered(ctx, ip, "after the speakers rolled")?;
    drop(held);
    let again = factory.create(ctx.test_name())?;
    l2_check(&again)?;
    again.finish()?;

    // helm-sdkpy (0.1.32, the newest) runs Helm v4's rollback without a
    // wait strategy, and Helm refuses to wait with none after it applied
    // the first revision's objects and recorded the new one: that error
    // alone means the rollback took place. The speakers' roll below
    // checks that it did.
    if let Err(e) = devenv::helm::action(kubeconfig, "rollback", None) {
        ensure!(
            format!("{e:#}").contains("wait strategy not set"),
            "helm rollback failed for another reason than helm-sdkpy's missing wait strategy: {e:#}"
        );
    }
    let info = rolled(ctx, &revisions(&debug), count, "the rollback's")?;
    speakers_log_at(ctx, &info, Level::Info)
}

/// Fails unless `ip` is answered by a backend (through whichever node
/// announces it) within the L2 suite's wait.
fn answered(ctx: &Ctx, ip: IpAddr, when: &str) -> Result<()> {
    let body = l2::reachable(ctx, ip).with_context(|| format!("{ip} {when}"))?;
    ensure!(
        l2::names_a_node(ctx, &body),
        "{ip} {when}: answered {body:?}, not by a backend"
    );
    Ok(())
}

/// The speakers the chart runs with [`devenv::helm::lab_values`]: one per
/// node but the control plane.
fn speaker_count(ctx: &Ctx) -> usize {
    l2::nodes(ctx).len().saturating_sub(1)
}

/// The chart's speaker Pods.
fn speaker_pods(ctx: &Ctx) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(ctx.client()?, NS);
    let list =
        ctx.block_on(pods.list(&ListParams::default().labels("app=metallb,component=speaker")))?;
    Ok(list.items)
}

/// The Pod's name.
fn pod_name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap_or_default()
}

/// The DaemonSet revision a Pod was made from.
fn revision(p: &Pod) -> Option<&str> {
    p.metadata
        .labels
        .as_ref()?
        .get("controller-revision-hash")
        .map(String::as_str)
}

fn revisions(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter_map(revision)
        .map(str::to_owned)
        .collect()
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The speaker container's `--log-level`.
fn log_level(p: &Pod) -> Option<String> {
    let c = p
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "speaker")?;
    let args = c.args.as_deref()?;
    args.windows(2)
        .find(|w| w[0] == "--log-level")
        .map(|w| w[1].clone())
}

/// Waits until the speakers have rolled: `count` speaker Pods, all of one
/// revision that is none of `old`, all Ready, and no other speaker Pod
/// left; the rolled Pods. `what` names the revision in the timeout's
/// error, which says where each speaker was.
fn rolled(ctx: &Ctx, old: &BTreeSet<String>, count: usize, what: &str) -> Result<Vec<Pod>> {
    let waited = format!("{count} speaker Pods at {what} revision (not {old:?}), all Ready");
    eventually(ROLL, &waited, || {
        let pods = speaker_pods(ctx)?;
        let new = revisions(&pods);
        let done = pods.len() == count
            && new.len() == 1
            && new.is_disjoint(old)
            && pods.iter().all(is_ready);
        if done {
            return Ok(Some(pods));
        }
        let seen: Vec<String> = pods
            .iter()
            .map(|p| {
                format!(
                    "{} revision {} {}",
                    pod_name(p),
                    revision(p).unwrap_or("none"),
                    if is_ready(p) { "Ready" } else { "not Ready" }
                )
            })
            .collect();
        bail!("speakers now: {}", seen.join(", "))
    })
}

/// A speaker log level the spec sets through the chart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Debug,
    Info,
}

impl Level {
    /// The chart's value, as the speaker's `--log-level`.
    fn arg(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
        }
    }
}

/// The levels of the speaker's own log lines (JSON, one object a line;
/// the lab's lines about the process are not JSON).
fn line_levels(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["level"].as_str().map(str::to_owned))
        .collect()
}

/// Fails unless every one of `pods` runs its speaker at `level`: its
/// container's `--log-level`, and its log, which shows a DEBUG line at
/// debug and shows INFO lines and no DEBUG line at info.
fn speakers_log_at(ctx: &Ctx, pods: &[Pod], level: Level) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(ctx.client()?, NS);
    for p in pods {
        let name = pod_name(p);
        let arg = log_level(p);
        ensure!(
            arg.as_deref() == Some(level.arg()),
            "speaker Pod {name}: --log-level {arg:?}, not {:?}",
            level.arg()
        );
        let params = LogParams {
            container: Some("speaker".to_owned()),
            ..LogParams::default()
        };
        let waited = format!("a {level:?} line in speaker Pod {name}'s log");
        let levels = eventually(WAIT, &waited, || {
            let levels = line_levels(&ctx.block_on(api.logs(name, &params))?);
            let want = match level {
                Level::Debug => "DEBUG",
                Level::Info => "INFO",
            };
            if levels.iter().any(|l| l == want) {
                return Ok(Some(levels));
            }
            let seen: BTreeSet<&str> = levels.iter().map(String::as_str).collect();
            bail!("{} JSON lines so far, of levels {seen:?}", levels.len())
        })?;
        ensure!(
            level == Level::Debug || !levels.iter().any(|l| l == "DEBUG"),
            "speaker Pod {name} at --log-level info logged a DEBUG line"
        );
    }
    Ok(())
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

/// Fails unless the uninstall removed every object the release made
/// (`made`, from its manifests) but the CRDs, which stay as upstream's
/// chart leaves them, and with the workloads their Pods (so no
/// metallb-rs process of theirs runs on).
fn gone(ctx: &Ctx, made: &[ObjectRef]) -> Result<()> {
    let client = ctx.client()?;
    let is_crd = |r: &ObjectRef| r.gvk.kind == "CustomResourceDefinition";
    let crds: Vec<String> = made
        .iter()
        .filter(|r| is_crd(r))
        .map(ToString::to_string)
        .collect();
    ensure!(
        !crds.is_empty(),
        "the release's manifest holds no CRDs: {made:?}"
    );
    let kept = eventually(
        WAIT,
        "every object of the release but its CRDs gone after helm uninstall",
        || {
            let present = ctx.block_on(devenv::helm::still_present(&client, made))?;
            let (kept, left): (Vec<_>, Vec<_>) = present.into_iter().partition(is_crd);
            ensure!(
                left.is_empty(),
                "left: {}",
                left.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Ok(Some(kept))
        },
    )?;
    let kept: Vec<String> = kept.iter().map(ToString::to_string).collect();
    ensure!(
        kept == crds,
        "helm uninstall should keep the CRDs {crds:?}; kept {kept:?}"
    );
    let pods: Api<Pod> = Api::namespaced(client, NS);
    eventually(WAIT, "the chart's Pods gone after helm uninstall", || {
        let left = ctx.block_on(pods.list(&ListParams::default().labels("app=metallb")))?;
        Ok(left.items.is_empty().then_some(()))
    })
}
