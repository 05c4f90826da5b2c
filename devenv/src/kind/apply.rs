//! Server-side apply of arbitrary objects (the rendered manifests, the
//! dev-env pools) through kube's client: the kind of each object is looked
//! up in discovery, so CRDs applied a moment earlier work once the API
//! server serves them.

use anyhow::{Context, Result, bail};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
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

/// An API for `r`'s kind, found through discovery; a kind the API server
/// does not serve yet (a CRD applied just before) is retried for up to
/// `discovery_wait`.
async fn dynamic_api(
    client: &kube::Client,
    r: &ObjectRef,
    discovery_wait: Duration,
) -> Result<Api<DynamicObject>> {
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
    Ok(match (caps.scope, &r.namespace) {
        (Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        (Scope::Namespaced, None) => Api::default_namespaced_with(client.clone(), &resource),
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
        let api = dynamic_api(client, &r, discovery_wait).await?;
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

/// Creates each of `objects`, or replaces the one of that name (for API
/// servers without server-side apply: the lab's). Returns one line per
/// object: `created <ref>`, `replaced <ref>` or `unchanged <ref>` (same
/// labels, and every field it sets already so (the server adds defaults):
/// not written, so watchers see no change).
pub async fn create_or_replace_all(
    client: &kube::Client,
    objects: &[Value],
    discovery_wait: Duration,
) -> Result<Vec<String>> {
    let mut done = Vec::new();
    for object in objects {
        let r = object_ref(object)?;
        let api = dynamic_api(client, &r, discovery_wait).await?;
        let mut wanted: DynamicObject =
            serde_json::from_value(object.clone()).with_context(|| format!("reading {r}"))?;
        match api
            .get_opt(&r.name)
            .await
            .with_context(|| format!("reading {r}"))?
        {
            None => {
                api.create(&PostParams::default(), &wanted)
                    .await
                    .with_context(|| format!("creating {r}"))?;
                done.push(format!("created {r}"));
            }
            Some(existing)
                if contains(&existing.data, &wanted.data)
                    && existing.metadata.labels == wanted.metadata.labels =>
            {
                done.push(format!("unchanged {r}"));
            }
            Some(existing) => {
                wanted.metadata.resource_version = existing.metadata.resource_version;
                api.replace(&r.name, &PostParams::default(), &wanted)
                    .await
                    .with_context(|| format!("replacing {r}"))?;
                done.push(format!("replaced {r}"));
            }
        }
    }
    Ok(done)
}

/// Whether `have` holds everything `want` sets: objects key by key (extra
/// keys in `have` allowed), anything else equal.
fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| h.get(k).is_some_and(|hv| contains(hv, wv))),
        _ => have == want,
    }
}

/// Deletes the MetalLB configuration objects (pools, advertisements,
/// BGPPeers) in `namespace` that match `label_selector`; returns `<Kind>
/// <name>` of each.
pub async fn delete_metallb_config(
    client: &kube::Client,
    namespace: &str,
    label_selector: &str,
) -> Result<Vec<String>> {
    delete_metallb_config_except(client, namespace, label_selector, &[]).await
}

/// [`delete_metallb_config`], keeping the objects `keep` names (same kind
/// and name): what a rerun is about to create again stays untouched, so
/// no address moves.
pub async fn delete_metallb_config_except(
    client: &kube::Client,
    namespace: &str,
    label_selector: &str,
    keep: &[Value],
) -> Result<Vec<String>> {
    use kube::api::{DeleteParams, ListParams};
    use metallb_rs::api::{v1beta1, v1beta2};
    let lp = ListParams::default().labels(label_selector);
    let kept = |kind: &str, name: &str| {
        keep.iter().any(|o| {
            o["kind"].as_str() == Some(kind) && o["metadata"]["name"].as_str() == Some(name)
        })
    };
    let mut deleted = Vec::new();
    macro_rules! delete_all {
        ($kind:ty) => {{
            let api: Api<$kind> = Api::namespaced(client.clone(), namespace);
            for o in api.list(&lp).await?.items {
                let name = o.metadata.name.clone().unwrap_or_default();
                let kind = <$kind as kube::Resource>::kind(&());
                if kept(&kind, &name) {
                    continue;
                }
                api.delete(&name, &DeleteParams::default()).await?;
                deleted.push(format!("{kind} {name}"));
            }
        }};
    }
    delete_all!(v1beta1::IPAddressPool);
    delete_all!(v1beta1::L2Advertisement);
    delete_all!(v1beta1::BGPAdvertisement);
    delete_all!(v1beta2::BGPPeer);
    // After the peers that name them.
    delete_all!(v1beta1::BFDProfile);
    Ok(deleted)
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
    fn server_defaults_do_not_make_an_object_differ() {
        let have = json!({ "spec": { "addresses": ["a"], "autoAssign": true } });
        assert!(contains(&have, &json!({ "spec": { "addresses": ["a"] } })));
        assert!(contains(&have, &json!({})));
        assert!(!contains(&have, &json!({ "spec": { "addresses": ["b"] } })));
        assert!(!contains(
            &have,
            &json!({ "spec": { "autoAssign": false } })
        ));
        assert!(!contains(&have, &json!({ "status": {} })));
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
