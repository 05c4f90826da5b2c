//! Helm actions on the chart (`charts/metallb-rs`) through Helm's own
//! library for Python (PyPI `helm-sdkpy`), driven by
//! `charts/tests/helm_action.py`: the one way the repository's tests and
//! e2e specs install, upgrade, roll back and uninstall the chart (no Helm
//! CLI is needed).

use crate::kind::apply::{ObjectRef, object_ref};
use anyhow::{Context, Result, bail};
use kube::api::{Api, DynamicObject};
use kube::discovery::{Scope, pinned_kind};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The release `helm_action.py` makes.
pub const RELEASE: &str = "metallb-rs";

/// The release's namespace (`helm_action.py`'s): where Helm puts the
/// chart's namespaced objects.
pub const NAMESPACE: &str = "metallb-system";

/// What installs the library where it is missing (`cargo xtask test`
/// does so).
pub const INSTALL_HINT: &str = "pip install --ignore-requires-python helm-sdkpy==0.1.32 pyyaml";

/// The most one action may take (an install writes some forty objects;
/// the lab answers each in milliseconds).
const TIMEOUT: Duration = Duration::from_secs(120);

/// The script driving the library.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/tests/helm_action.py")
}

/// Whether Helm's library for Python loads here.
pub fn available() -> bool {
    Command::new("python3")
        .args(["-c", "import helm_sdkpy, yaml"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Reads all of `r` on a thread (a pipe left unread would stall the
/// child once full: an install prints its whole manifest).
fn drain(r: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut out = String::new();
        if let Some(mut r) = r {
            let _ = r.read_to_string(&mut out);
        }
        out
    })
}

/// Runs `action` (`install`, `upgrade`, `status`, `history`, `rollback`,
/// `uninstall`) with `values` against the API server of `kubeconfig`;
/// Helm's result as JSON, or its error.
pub fn action(
    kubeconfig: &Path,
    action: &str,
    values: Option<&serde_json::Value>,
) -> Result<serde_json::Value> {
    let mut cmd = Command::new("python3");
    cmd.arg(script()).arg(kubeconfig).arg(action);
    if let Some(v) = values {
        cmd.arg(v.to_string());
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running python3 (Helm's library for Python runs in it)")?;
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("helm {action}: no result within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    if !status.success() {
        bail!("helm {action} failed: {}{}", out.trim(), err.trim());
    }
    serde_json::from_str(&out).with_context(|| format!("helm {action}: not JSON: {out}"))
}

/// The values a lab needs beside the chart's defaults. The image stays
/// the chart's: the lab pulls nothing and runs its own binary for it
/// ([`crate::lab::played::metallb`]).
pub fn lab_values() -> serde_json::Value {
    let control_plane = crate::lab::agent::CONTROL_PLANE_LABEL;
    serde_json::json!({
        "controller": {
            // The lab API server calls webhooks only at the root
            // namespace's loopback addresses it was started with; the
            // chart's controller serves them in a node's namespace, so
            // with failurePolicy Fail every pool write would be refused.
            "webhookMode": "disabled",
            // A lab Pod shares its node's network namespace (in a cluster
            // the controller has its own), so the controller and a speaker
            // on one node would both bind 0.0.0.0:9120 and :17472: the
            // controller runs on the control plane, the speakers elsewhere.
            "nodeSelector": { control_plane: "" },
        },
        "speaker": {
            "tolerateMaster": false,
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{ "matchExpressions": [
                    { "key": control_plane, "operator": "DoesNotExist" }] }] } } },
        },
    })
}

/// Installs the chart with [`lab_values`] into the lab of `kubeconfig`
/// (a lab made with [`crate::lab::cluster::Metallb::Chart`]), or upgrades
/// the release it already holds; Helm's result.
pub fn install_in_lab(kubeconfig: &Path) -> Result<serde_json::Value> {
    let values = lab_values();
    let verb = if action(kubeconfig, "status", None).is_ok() {
        "upgrade"
    } else {
        "install"
    };
    let done = action(kubeconfig, verb, Some(&values))?;
    if done["info"]["status"] != "deployed" {
        bail!("helm {verb}: the release is not deployed: {done}");
    }
    Ok(done)
}

/// The objects a release holds: each document of `release`'s `manifest`
/// (Helm's result of an install, upgrade or status carries the rendered
/// chart).
pub fn manifest_objects(release: &serde_json::Value) -> Result<Vec<ObjectRef>> {
    let manifest = release["manifest"]
        .as_str()
        .with_context(|| format!("helm release {RELEASE} without a manifest: {release}"))?;
    let mut objects = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(manifest) {
        let doc: serde_json::Value = serde::Deserialize::deserialize(doc)
            .with_context(|| format!("helm release {RELEASE}: a manifest document"))?;
        if !doc.is_null() {
            objects.push(object_ref(&doc).with_context(|| format!("helm release {RELEASE}"))?);
        }
    }
    Ok(objects)
}

/// Of `objects` (from [`manifest_objects`]), those the API server of
/// `client` still holds. A namespaced object the chart names without a
/// namespace is looked for in [`NAMESPACE`], where Helm put it.
pub async fn still_present(client: &kube::Client, objects: &[ObjectRef]) -> Result<Vec<ObjectRef>> {
    let mut present = Vec::new();
    for r in objects {
        let (resource, caps) = pinned_kind(client, &r.gvk)
            .await
            .with_context(|| format!("{r}: its kind is not served"))?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                r.namespace.as_deref().unwrap_or(NAMESPACE),
                &resource,
            ),
        };
        if api
            .get_opt(&r.name)
            .await
            .with_context(|| format!("reading {r}"))?
            .is_some()
        {
            present.push(r.clone());
        }
    }
    Ok(present)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_objects_are_the_documents_of_the_release_s_manifest() {
        // As Helm renders it: each template's documents after a
        // `# Source:` comment, and a template that renders to nothing.
        let manifest = "---\n# Source: metallb-rs/templates/a.yaml\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: speaker\n---\n# Source: metallb-rs/templates/empty.yaml\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: controller\n  namespace: metallb-system\n";
        let objects =
            manifest_objects(&serde_json::json!({ "manifest": manifest })).expect("parsed");
        let listed: Vec<String> = objects.iter().map(ToString::to_string).collect();
        assert_eq!(
            listed,
            ["ServiceAccount speaker", "Role metallb-system/controller"]
        );
        let err = manifest_objects(&serde_json::json!({ "info": {} })).expect_err("no manifest");
        assert!(err.to_string().contains("without a manifest"), "{err}");
    }
}
