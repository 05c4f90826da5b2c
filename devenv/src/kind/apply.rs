//! Server-side apply of arbitrary objects (the rendered manifests, the
//! dev-env pools) through kube's client: the kind of each object is looked
//! up in discovery, so CRDs applied a moment earlier work once the API
//! server serves them.

use anyhow::{Context, Result, bail};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{GroupVersionKind, TypeMeta};
use kube::discovery::{Scope, pinned_kind};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The field manager of everything dev-env applies.
pub const FIELD_MANAGER: &str = "metallb-rs-devenv";

/// What identifies one object to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// Group, version and kind.
    pub gvk: GroupVersionKind,
    /// metadata.name.
    pub name: String,
    /// metadata.namespace, when given.
    pub namespace: Option<String>,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.gvk.kind, self.name),
            None => write!(f, "{} {}", self.gvk.kind, self.name),
        }
    }
}

/// Reads apiVersion, kind, name and namespace of `object`; the error names
/// the missing field.
pub fn object_ref(object: &Value) -> Result<ObjectRef> {
    let field = |path: &[&str]| {
        path.iter()
            .try_fold(object, |v, k| v.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let api_version = field(&["apiVersion"]).context("object without apiVersion")?;
    let kind = field(&["kind"]).with_context(|| format!("{api_version} object without kind"))?;
    let name = field(&["metadata", "name"])
        .with_context(|| format!("{kind} without metadata.name: every applied object needs one"))?;
    let gvk = GroupVersionKind::try_from(&TypeMeta {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })
    .with_context(|| format!("{kind} {name}: bad apiVersion {api_version:?}"))?;
    Ok(ObjectRef {
        gvk,
        name,
        namespace: field(&["metadata", "namespace"]),
    })
}

/// Applies `objects` in order (server-side apply, forced, as
/// [`FIELD_MANAGER`]). A kind the API server does not serve yet (a CRD
/// applied just before) is retried for up to `discovery_wait`.
pub async fn apply_all(
    client: &kube::Client,
    objects: &[Value],
    discovery_wait: Duration,
) -> Result<()> {
    for object in objects {
        let r = object_ref(object)?;
        let deadline = Instant::now() + discovery_wait;
        let (resource, caps) = loop {
            match pinned_kind(client, &r.gvk).await {
                Ok(found) => break found,
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!("{r}: kind not served yet ({e}); retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => bail!(
                    "{r}: the API server does not serve {}/{} ({e}); are the CRDs installed?",
                    r.gvk.api_version(),
                    r.gvk.kind
                ),
            }
        };
        let api: Api<DynamicObject> = match (caps.scope, &r.namespace) {
            (Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
            (Scope::Namespaced, None) => Api::default_namespaced_with(client.clone(), &resource),
        };
        api.patch(
            &r.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .with_context(|| format!("applying {r}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_refs_name_group_version_kind_and_place() {
        let pool = json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": { "name": "dev-env-l2", "namespace": "metallb-system" },
        });
        let r = object_ref(&pool).expect("ref");
        assert_eq!(
            r.gvk,
            GroupVersionKind::gvk("metallb.io", "v1beta1", "IPAddressPool")
        );
        assert_eq!(r.to_string(), "IPAddressPool metallb-system/dev-env-l2");
        let ns = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "metallb-system" } });
        let r = object_ref(&ns).expect("core group");
        assert_eq!(r.gvk.group, "");
        assert_eq!(r.to_string(), "Namespace metallb-system");
    }

    #[test]
    fn objects_missing_identity_are_refused_naming_the_field() {
        let err = object_ref(&json!({ "kind": "X" })).expect_err("no apiVersion");
        assert!(err.to_string().contains("apiVersion"), "{err}");
        let err = object_ref(&json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": {} }))
            .expect_err("no name");
        assert!(err.to_string().contains("metadata.name"), "{err}");
    }

    #[test]
    fn every_manifest_object_has_an_identity() {
        let objects = metallb_rs::manifests::native_objects(&Default::default());
        assert!(objects.len() > 10);
        for o in &objects {
            object_ref(o).expect("manifest object");
        }
    }
}
