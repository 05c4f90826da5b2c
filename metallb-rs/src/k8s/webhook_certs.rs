//! Keeps the webhook's certificate: reads it from its Secret or makes one
//! ([`crate::certs`] decides), loads it into the server, and patches its CA
//! into the ValidatingWebhookConfiguration and into BGPPeer's CRD (its
//! conversion webhook, as upstream's cert-controller does); then checks
//! again every [`REFRESH`], which also picks up another replica's renewal.
//! Replicas converge on one Secret: writes carry the resourceVersion read,
//! and the loser of a race reads the winner's pair.
//!
//! The pair is read through the API and held in memory (no volume mount,
//! so no kubelet sync delay before serving). Readiness holds until the
//! server has a certificate and both carry its CA: the Service routes to
//! a replica only once the API server can verify it.

use super::call::{CallError, ErrorClass, call, classify};
use super::webhook::Options;
use crate::certs::{self, Decision};
use crate::metrics::Health;
use crate::tls::Resolver;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How often the Secret and the caBundle are checked once in place.
pub const REFRESH: Duration = Duration::from_secs(60);
/// The readiness gate this loop holds.
pub const GATE: &str = "webhook";
/// Retries after a failed round: from 1 s, doubling, at most this.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Why a round failed.
#[derive(Debug, thiserror::Error)]
pub enum CertLoopError {
    /// An API call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The pair could not be made or loaded.
    #[error(transparent)]
    Cert(#[from] certs::CertError),
    /// Other replicas kept rewriting the Secret.
    #[error("secret {0} kept changing while we renewed it: retrying")]
    Contended(String),
    /// The configuration or CRD could not be read as JSON.
    #[error("reading {0}: {1}")]
    Unreadable(String, serde_json::Error),
}

/// The pair in Secret `opts.secret`, made (or renewed) and stored when
/// missing, unreadable or near expiry.
pub async fn ensure_secret(
    client: &kube::Client,
    opts: &Options,
) -> Result<certs::Bundle, CertLoopError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &opts.namespace);
    let dns = certs::dns_name(&opts.service, &opts.namespace);
    for _ in 0..3 {
        let existing = call(api.get_opt(&opts.secret)).await?;
        let now = SystemTime::now();
        let reason = match certs::decide(existing.as_ref().and_then(|s| s.data.as_ref()), &dns, now)
        {
            Decision::Use(bundle) => return Ok(bundle),
            Decision::Renew { reason } => reason,
        };
        // Keeps the CA others trust where it can (certs::renew).
        let bundle = certs::renew(existing.as_ref().and_then(|s| s.data.as_ref()), &dns, now)?;
        let data = Some(certs::secret_data(&bundle));
        let written = match existing {
            None => {
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(opts.secret.clone()),
                        namespace: Some(opts.namespace.clone()),
                        labels: Some([("app".to_owned(), "metallb".to_owned())].into()),
                        ..ObjectMeta::default()
                    },
                    data,
                    type_: Some("Opaque".to_owned()),
                    ..Secret::default()
                };
                call(api.create(&PostParams::default(), &secret)).await
            }
            // The resourceVersion read makes a concurrent write a conflict.
            Some(mut secret) => {
                secret.data = data;
                secret.string_data = None;
                call(api.replace(&opts.secret, &PostParams::default(), &secret)).await
            }
        };
        match written {
            Ok(_) => {
                tracing::info!(secret = %opts.secret, %dns, %reason, "webhook certificate generated");
                return Ok(bundle);
            }
            // Another replica wrote first: read and use its pair.
            Err(e) if classify(&e) == ErrorClass::Conflict => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(CertLoopError::Contended(opts.secret.clone()))
}

/// Whether an object's webhooks carry the CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injected {
    /// Every webhook it calls carries it.
    Done,
    /// There is no such object, or it calls no webhook (webhooks not
    /// installed; a CRD applied without its conversion webhook).
    Absent,
}

/// Sets the caBundle of every webhook the cluster-scoped object `name` of
/// kind `K` calls (a ValidatingWebhookConfiguration, a CRD) to `bundle`.
pub async fn inject<K>(
    client: &kube::Client,
    name: &str,
    bundle: &str,
) -> Result<Injected, CertLoopError>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::all(client.clone());
    let what = format!("{} {name}", K::kind(&()).to_lowercase());
    let Some(object) = call(api.get_opt(name)).await? else {
        return Ok(Injected::Absent);
    };
    let value =
        serde_json::to_value(&object).map_err(|e| CertLoopError::Unreadable(what.clone(), e))?;
    match certs::ca_bundle_plan(&value, bundle) {
        certs::CaBundlePlan::NoWebhook => return Ok(Injected::Absent),
        certs::CaBundlePlan::Current => {}
        certs::CaBundlePlan::Patch(patch) => {
            call(api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))).await?;
            tracing::info!(object = %what, "webhook caBundle updated");
        }
    }
    Ok(Injected::Done)
}

/// What a round found: whether each object carries the CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Round {
    configuration: Injected,
    conversion: Injected,
}

/// One round: the pair into the server, its CA into the configuration
/// and the CRD.
async fn round(
    client: &kube::Client,
    opts: &Options,
    resolver: &Resolver,
) -> Result<Round, CertLoopError> {
    let bundle = ensure_secret(client, opts).await?;
    resolver.set(certs::certified_key(&bundle)?);
    let ca = certs::ca_bundle(&bundle);
    Ok(Round {
        configuration: inject::<ValidatingWebhookConfiguration>(client, &opts.configuration, &ca)
            .await?,
        conversion: inject::<CustomResourceDefinition>(client, &opts.conversion_crd, &ca).await?,
    })
}

/// Keeps the certificate current until the task is dropped; releases the
/// readiness gate [`GATE`] once the server can be verified.
pub async fn run(
    client: kube::Client,
    opts: Options,
    resolver: Arc<Resolver>,
    health: Arc<Health>,
) {
    let mut retry = Duration::from_secs(1);
    let mut warned = (false, false);
    loop {
        match round(&client, &opts, &resolver).await {
            Ok(found) => {
                retry = Duration::from_secs(1);
                if found.configuration == Injected::Absent && !warned.0 {
                    warned.0 = true;
                    tracing::warn!(configuration = %opts.configuration, "validatingwebhookconfiguration not found: serving webhooks nobody calls (apply the manifests to install it)");
                }
                if found.conversion == Injected::Absent && !warned.1 {
                    warned.1 = true;
                    tracing::warn!(crd = %opts.conversion_crd, "customresourcedefinition not found or without a conversion webhook: v1beta1 BGPPeers are not converted by MetalLB (apply metallb-native.yaml to install it)");
                }
                health.release(GATE);
                tokio::time::sleep(REFRESH).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?retry, "webhook certificate");
                health.hold_if_held(GATE, format!("webhook certificate: {e}"));
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(MAX_RETRY);
            }
        }
    }
}
