//! What an API server gets before MetalLB runs in it: the MetalLB CRDs
//! (with or without BGPPeer's conversion webhook), namespace,
//! ServiceAccounts and RBAC of the manifests, the validating webhook
//! configuration, or only the chart's release namespace.

use super::client;
use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::path::Path;
use std::time::Duration;

/// Creates the namespace the chart's release lives in (so the chart
/// cannot own it), labelled for privileged pods as NOTES.txt asks: the
/// speakers need host networking and NET_RAW.
pub(super) async fn create_release_namespace(kubeconfig: &Path) -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, PostParams};
    let client = client(kubeconfig).await?;
    let namespaces: Api<Namespace> = Api::all(client);
    let name = metallb_rs::api::DEFAULT_NAMESPACE;
    let existing = tokio::time::timeout(Duration::from_secs(10), namespaces.get_opt(name))
        .await
        .with_context(|| format!("reading namespace {name}: timed out"))??;
    if existing.is_none() {
        let ns: Namespace = serde_json::from_value(serde_json::json!({ "metadata": {
            "name": name,
            "labels": { "pod-security.kubernetes.io/enforce": "privileged" } } }))?;
        tokio::time::timeout(
            Duration::from_secs(10),
            namespaces.create(&PostParams::default(), &ns),
        )
        .await
        .with_context(|| format!("creating namespace {name}: timed out"))??;
    }
    Ok(())
}

/// Whether the lab's API server calls MetalLB's webhooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhooks {
    /// The validating webhooks and BGPPeer's conversion webhook: where
    /// MetalLB's controller runs to answer them.
    Installed,
    /// Neither: without a controller every MetalLB write would be refused
    /// and every read of a BGPPeer at v1beta1 would fail.
    Absent,
}

/// Applies the generated CRDs and creates the MetalLB namespace, as
/// `kubectl apply -f manifests/metallb-native.yaml` would: create, or
/// replace what differs.
pub(super) fn bootstrap_api(kubeconfig: &Path, webhooks: Webhooks) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = client(kubeconfig).await?;
        install_metallb_api(&client, webhooks).await?;
        // At most three calls, each answered in milliseconds by a healthy
        // lab API server: a hung one fails the bootstrap instead of
        // stalling it.
        tokio::time::timeout(
            Duration::from_secs(30),
            install_webhook_configuration(&client, webhooks),
        )
        .await
        .map_err(|_| anyhow::anyhow!("installing the webhook configuration timed out after 30 s"))?
    })
}

/// Installs (or updates) every MetalLB CRD and creates the MetalLB
/// namespace, ServiceAccounts and RBAC of the manifests: what a cluster
/// needs before metallb-rs runs in it. The CRDs are `metallb-native.yaml`'s
/// (BGPPeer's converted by the controller) with [`Webhooks::Installed`],
/// without conversion webhook otherwise.
pub async fn install_metallb_api(client: &kube::Client, webhooks: Webhooks) -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, PostParams};
    const TIMEOUT: Duration = Duration::from_secs(10);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in metallb_rs::manifests::native_objects(&Default::default())
        .into_iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        let mut crd: CustomResourceDefinition = serde_json::from_value(crd)?;
        if webhooks == Webhooks::Absent {
            crd.spec.conversion = None;
        }
        let name = crd.metadata.name.clone().unwrap_or_default();
        let existing = tokio::time::timeout(TIMEOUT, crds.get_opt(&name))
            .await
            .with_context(|| format!("reading CRD {name}: timed out"))??;
        match existing {
            None => {
                tokio::time::timeout(TIMEOUT, crds.create(&PostParams::default(), &crd))
                    .await
                    .with_context(|| format!("creating CRD {name}: timed out"))??;
            }
            Some(existing) => {
                keep_conversion_ca_bundle(&mut crd, &existing);
                if existing.spec != crd.spec {
                    crd.metadata.resource_version = existing.metadata.resource_version;
                    tokio::time::timeout(
                        TIMEOUT,
                        crds.replace(&name, &PostParams::default(), &crd),
                    )
                    .await
                    .with_context(|| format!("replacing CRD {name}: timed out"))??;
                }
            }
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(metallb_rs::api::DEFAULT_NAMESPACE)
        .await?
        .is_none()
    {
        let ns: Namespace = serde_json::from_value(
            serde_json::json!({ "metadata": { "name": metallb_rs::api::DEFAULT_NAMESPACE } }),
        )?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    let rbac: Vec<serde_json::Value> = metallb_rs::manifests::native_objects(&Default::default())
        .into_iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some(
                    "ServiceAccount"
                        | "ClusterRole"
                        | "ClusterRoleBinding"
                        | "Role"
                        | "RoleBinding"
                        | "ValidatingAdmissionPolicy"
                        | "ValidatingAdmissionPolicyBinding"
                )
            )
        })
        .collect();
    crate::kind::apply::create_or_replace_all(client, &rbac, Duration::from_secs(10)).await?;
    Ok(())
}

/// Gives `wanted`'s conversion webhook the caBundle `existing`'s carries,
/// which the controller put there (without it every read of a BGPPeer at
/// v1beta1 would fail x509 until the controller's next certificate round).
fn keep_conversion_ca_bundle(
    wanted: &mut CustomResourceDefinition,
    existing: &CustomResourceDefinition,
) {
    let bundle = existing.spec.conversion.as_ref().and_then(|c| {
        c.webhook
            .as_ref()?
            .client_config
            .as_ref()?
            .ca_bundle
            .clone()
    });
    if let Some(config) = wanted
        .spec
        .conversion
        .as_mut()
        .and_then(|c| c.webhook.as_mut()?.client_config.as_mut())
    {
        config.ca_bundle = bundle;
    }
}

/// The manifests' ValidatingWebhookConfiguration with
/// [`Webhooks::Installed`] (else removed): created when missing, replaced
/// when its webhooks changed - keeping each webhook's caBundle, which the
/// controller put there (without it every review would fail x509 until
/// the controller's next certificate round).
async fn install_webhook_configuration(client: &kube::Client, webhooks: Webhooks) -> Result<()> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use kube::api::{Api, DeleteParams, PostParams};
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let name = metallb_rs::k8s::webhook::CONFIGURATION;
    if webhooks == Webhooks::Absent {
        if api.get_opt(name).await?.is_some() {
            api.delete(name, &DeleteParams::default()).await?;
        }
        return Ok(());
    }
    let Some(wanted) = metallb_rs::manifests::native_objects(&Default::default())
        .into_iter()
        .find(|o| o["kind"] == "ValidatingWebhookConfiguration")
    else {
        return Ok(());
    };
    let mut wanted: ValidatingWebhookConfiguration = serde_json::from_value(wanted)?;
    match api.get_opt(name).await? {
        None => {
            api.create(&PostParams::default(), &wanted).await?;
        }
        Some(existing) => {
            let bundles: std::collections::BTreeMap<String, _> = existing
                .webhooks
                .iter()
                .flatten()
                .map(|w| (w.name.clone(), w.client_config.ca_bundle.clone()))
                .collect();
            for w in wanted.webhooks.iter_mut().flatten() {
                w.client_config.ca_bundle = bundles.get(&w.name).cloned().flatten();
            }
            if existing.webhooks != wanted.webhooks {
                wanted.metadata.resource_version = existing.metadata.resource_version;
                api.replace(name, &PostParams::default(), &wanted).await?;
            }
        }
    }
    Ok(())
}
