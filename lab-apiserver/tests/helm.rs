//! The Helm chart (`charts/metallb-rs`) installed, upgraded, rolled back
//! and uninstalled through Helm's own library (helm-sdkpy, driven by
//! `charts/tests/helm_action.py`) against the lab API server: a real
//! client that writes its release records as protobuf Secrets, patches
//! what an upgrade changes and deletes what an uninstall removes.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};
use std::path::Path;

const NS: &str = "metallb-system";

/// Runs one Helm action ([`devenv::helm::action`]) off the runtime's
/// threads; its JSON result, or Helm's error.
async fn try_helm(kubeconfig: &Path, action: &str, values: Option<Value>) -> Result<Value, String> {
    let (kubeconfig, action) = (kubeconfig.to_owned(), action.to_owned());
    tokio::task::spawn_blocking(move || {
        devenv::helm::action(&kubeconfig, &action, values.as_ref()).map_err(|e| format!("{e:#}"))
    })
    .await
    .expect("joined")
}

/// [`try_helm`], which must succeed.
async fn helm(kubeconfig: &Path, action: &str, values: Option<Value>) -> Value {
    try_helm(kubeconfig, action, values)
        .await
        .unwrap_or_else(|e| panic!("helm {action} failed: {e}"))
}

/// The release records Helm keeps, as (name, status label).
async fn releases(admin: &kube::Client) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Api::<Secret>::namespaced(admin.clone(), NS)
        .list(&ListParams::default().labels("owner=helm,name=metallb-rs"))
        .await
        .expect("secrets listed")
        .items
        .into_iter()
        .map(|s| {
            assert_eq!(s.type_.as_deref(), Some("helm.sh/release.v1"));
            let status = s.metadata.labels.unwrap_or_default()["status"].clone();
            (s.metadata.name.unwrap_or_default(), status)
        })
        .collect();
    found.sort();
    found
}

/// `objects` as text, one `kind namespace/name` each.
fn listed(objects: &[devenv::kind::apply::ObjectRef]) -> Vec<String> {
    objects.iter().map(ToString::to_string).collect()
}

/// Whether `r` is a CustomResourceDefinition (the chart keeps them on
/// uninstall, as upstream's does).
fn is_crd(r: &devenv::kind::apply::ObjectRef) -> bool {
    r.gvk.kind == "CustomResourceDefinition"
}

/// The speaker's `--log-level`.
fn log_level(ds: &DaemonSet) -> Option<String> {
    let args = speaker_args(ds);
    args.windows(2)
        .find(|w| w[0] == "--log-level")
        .map(|w| w[1].clone())
}

fn speaker_args(ds: &DaemonSet) -> Vec<String> {
    ds.spec
        .as_ref()
        .expect("spec")
        .template
        .spec
        .as_ref()
        .expect("pod spec")
        .containers[0]
        .args
        .clone()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_installs_upgrades_rolls_back_and_uninstalls_the_chart() {
    if !devenv::helm::available() {
        devenv::prereq::skip(format!(
            "Helm's library for Python is not installed (cargo xtask test installs PyPI helm-sdkpy; by hand: {})",
            devenv::helm::INSTALL_HINT
        ));
        return;
    }
    let (server, admin) = start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig("lab")).expect("kubeconfig written");
    // The release lives in the namespace, so the chart cannot own it.
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": NS,
        "labels": { "pod-security.kubernetes.io/enforce": "privileged" } } }))
    .expect("namespace");
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");

    let installed = helm(&kubeconfig, "install", None).await;
    assert_eq!(installed["info"]["status"], "deployed", "{installed}");
    // Every object of the release's manifest, so the uninstall below is
    // checked on all of them, not a few kinds.
    let mut made = devenv::helm::manifest_objects(&installed).expect("the install's manifest");
    let present = devenv::helm::still_present(&admin, &made)
        .await
        .expect("manifest objects read");
    assert_eq!(
        listed(&present),
        listed(&made),
        "the install made its manifest"
    );
    assert!(
        made.iter().any(is_crd) && made.iter().any(|r| r.gvk.kind == "ClusterRoleBinding"),
        "the manifest holds the CRDs and the RBAC: {:?}",
        listed(&made)
    );
    assert_eq!(
        releases(&admin).await,
        [(
            "sh.helm.release.v1.metallb-rs.v1".to_owned(),
            "deployed".to_owned()
        )]
    );
    let speakers = Api::<DaemonSet>::namespaced(admin.clone(), NS);
    let speaker = speakers.get("speaker").await.expect("speaker DaemonSet");
    let annotations = speaker.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("meta.helm.sh/release-name")
            .map(String::as_str),
        Some("metallb-rs")
    );
    assert_eq!(
        speaker.metadata.labels.clone().unwrap_or_default()["app.kubernetes.io/managed-by"],
        "Helm"
    );
    assert_eq!(log_level(&speaker).as_deref(), Some("info"));

    let upgraded = helm(
        &kubeconfig,
        "upgrade",
        Some(json!({ "speaker": { "logLevel": "debug" } })),
    )
    .await;
    assert_eq!(upgraded["version"], 2, "{upgraded}");
    for r in devenv::helm::manifest_objects(&upgraded).expect("the upgrade's manifest") {
        if !made.contains(&r) {
            made.push(r);
        }
    }
    let speaker = speakers.get("speaker").await.expect("speaker DaemonSet");
    assert_eq!(log_level(&speaker).as_deref(), Some("debug"));
    assert_eq!(
        releases(&admin).await,
        [
            (
                "sh.helm.release.v1.metallb-rs.v1".to_owned(),
                "superseded".to_owned()
            ),
            (
                "sh.helm.release.v1.metallb-rs.v2".to_owned(),
                "deployed".to_owned()
            ),
        ]
    );
    let status = helm(&kubeconfig, "status", None).await;
    assert_eq!(
        (status["version"].clone(), status["info"]["status"].clone()),
        (json!(2), json!("deployed"))
    );

    // Back to revision 1: Helm applies its objects again (a patch of
    // every object the upgrade changed) and records revision 3.
    let rolled = try_helm(&kubeconfig, "rollback", None).await;
    let speaker = speakers.get("speaker").await.expect("speaker DaemonSet");
    assert_eq!(
        log_level(&speaker).as_deref(),
        Some("info"),
        "revision 1's speaker log level is back ({rolled:?})"
    );
    let records = releases(&admin).await;
    let names: Vec<&str> = records.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "sh.helm.release.v1.metallb-rs.v1",
            "sh.helm.release.v1.metallb-rs.v2",
            "sh.helm.release.v1.metallb-rs.v3"
        ],
        "{rolled:?}"
    );
    match rolled {
        Ok(_) => {
            let status = helm(&kubeconfig, "status", None).await;
            assert_eq!(
                (status["version"].clone(), status["info"]["status"].clone()),
                (json!(3), json!("deployed"))
            );
        }
        // FIXME: helm-sdkpy 0.1.32, the newest, runs Helm v4's rollback
        // without a wait strategy, and Helm refuses to wait with none
        // after applying the old objects; when a release of it sets one,
        // the arm above is the one that runs.
        Err(e) => assert!(
            e.contains("wait strategy not set"),
            "rollback failed for another reason than helm-sdkpy's: {e}"
        ),
    }

    helm(&kubeconfig, "uninstall", None).await;
    let left = devenv::helm::still_present(&admin, &made)
        .await
        .expect("manifest objects read");
    // As upstream's chart: the CRDs (and the users' pools) stay, and
    // nothing else the release made.
    let (kept, left): (Vec<_>, Vec<_>) = left.into_iter().partition(is_crd);
    assert_eq!(
        listed(&left),
        Vec::<String>::new(),
        "helm uninstall left these"
    );
    let crds: Vec<_> = made.iter().filter(|r| is_crd(r)).cloned().collect();
    assert_eq!(listed(&kept), listed(&crds), "helm uninstall kept the CRDs");
    assert_eq!(releases(&admin).await, []);
}
