//! The webhook server every controller replica runs (not only the leader,
//! as upstream): HTTPS on `--webhook-bind-address`, one validating route
//! per [`WEBHOOKS`] entry, and [`CONVERT_PATH`], BGPPeer's conversion
//! ([`super::conversion_review`]: pure, no API call, answered at once).
//! Each validating review lists the current objects (a consistent read,
//! so an object created a moment ago by the same `kubectl apply` is
//! seen), hands them with the write to
//! [`config::admission::review`] and answers within [`REVIEW_BUDGET`] -
//! with a refusal saying why when the API server is slow, never by making
//! the API server time out. The certificate comes from `webhook_certs`
//! through a [`crate::tls::Resolver`], swapped in place on renewal; TLS
//! versions and suites follow the process' `--tls-*` flags.

use super::admission_review::{self, ReviewError};
use super::call::{CallError, call};
use super::conversion_review;
use crate::api::{v1beta1, v1beta2};
use crate::config::admission::{self, Verdict, WEBHOOKS, Webhook};
use crate::config::{self, Resources};
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The webhooks' Service (upstream's name).
pub const SERVICE: &str = "metallb-webhook-service";
/// The ValidatingWebhookConfiguration (upstream's name).
pub const CONFIGURATION: &str = "metallb-webhook-configuration";
/// The Secret holding the serving certificate (upstream's name).
pub const SECRET: &str = "metallb-webhook-cert";
/// The CRD whose conversion webhook this server is (upstream's).
pub const CONVERSION_CRD: &str = "bgppeers.metallb.io";
/// Where the API server posts its ConversionReviews (upstream's path).
pub const CONVERT_PATH: &str = "/convert";
/// The port the controller serves webhooks on (upstream's).
pub const PORT: u16 = 9443;
/// The controller's answer to a review comes within this, a refusal
/// when the current objects could not be read in time: under the
/// configuration's `timeoutSeconds` (5 s), so the user reads our reason
/// rather than the API server's "context deadline exceeded".
pub const REVIEW_BUDGET: Duration = Duration::from_secs(3);

/// Where and as what the webhooks are served.
#[derive(Debug, Clone)]
pub struct Options {
    /// Listening address.
    pub addr: SocketAddr,
    /// The MetalLB namespace (objects reviewed, Service, Secret).
    pub namespace: String,
    /// The Service the API server dials (the certificate's name).
    pub service: String,
    /// The Secret holding the certificate.
    pub secret: String,
    /// The ValidatingWebhookConfiguration whose caBundle is kept current.
    pub configuration: String,
    /// The CRD whose conversion webhook's caBundle is kept current.
    pub conversion_crd: String,
}

impl Options {
    /// Upstream's names in `namespace`, served on `addr`.
    pub fn new(addr: SocketAddr, namespace: &str) -> Self {
        Self {
            addr,
            namespace: namespace.to_owned(),
            service: SERVICE.to_owned(),
            secret: SECRET.to_owned(),
            configuration: CONFIGURATION.to_owned(),
            conversion_crd: CONVERSION_CRD.to_owned(),
        }
    }
}

struct Cx {
    client: kube::Client,
    namespace: String,
    options: config::Options,
}

/// The router: one POST route per webhook, and the conversion.
fn router(cx: Arc<Cx>) -> axum::Router {
    let mut router = axum::Router::new().route(
        CONVERT_PATH,
        axum::routing::post(|body: Bytes| async move { convert(&body) }),
    );
    for hook in &WEBHOOKS {
        let cx = cx.clone();
        router = router.route(
            hook.path,
            axum::routing::post(move |body: Bytes| {
                let cx = cx.clone();
                async move { answer(hook, &cx, &body).await }
            }),
        );
    }
    router
}

/// Serves the webhooks on `listener` until the task is dropped.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    client: kube::Client,
    namespace: String,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let app = router(Arc::new(Cx {
        client,
        options: config::Options {
            namespace: namespace.clone(),
        },
        namespace,
    }));
    crate::tls::serve_until(listener, tls, app, "webhook server", stop).await;
    Ok(())
}

async fn answer(hook: &'static Webhook, cx: &Cx, body: &[u8]) -> Response {
    let request = match admission_review::parse(hook, body) {
        Ok(r) => r,
        Err(ReviewError::Malformed(m)) => {
            return (
                StatusCode::BAD_REQUEST,
                format!(
                    "not an {} AdmissionReview: {m}",
                    admission_review::API_VERSION
                ),
            )
                .into_response();
        }
        Err(ReviewError::Unreadable { uid, message }) => {
            let verdict = Verdict::Denied {
                message,
                warnings: vec![],
            };
            return json(admission_review::response(&uid, &verdict));
        }
    };
    let verdict = match tokio::time::timeout(REVIEW_BUDGET, current(&cx.client, &cx.namespace))
        .await
    {
        Ok(Ok(res)) => admission::review(&request.proposal, &res, &cx.options),
        Ok(Err(e)) => Verdict::Denied {
            message: format!(
                "could not read the current MetalLB configuration to check this change: {e}; retry"
            ),
            warnings: vec![],
        },
        Err(_) => Verdict::Denied {
            message: format!(
                "could not read the current MetalLB configuration to check this change within {REVIEW_BUDGET:?}; retry"
            ),
            warnings: vec![],
        },
    };
    match &verdict {
        Verdict::Allowed { .. } => {
            tracing::debug!(webhook = hook.name, uid = %request.uid, "admitted")
        }
        Verdict::Denied { message, .. } => {
            tracing::info!(webhook = hook.name, uid = %request.uid, %message, "refused")
        }
    }
    json(admission_review::response(&request.uid, &verdict))
}

fn convert(body: &[u8]) -> Response {
    match conversion_review::answer(body) {
        Ok(answer) => {
            let result = &answer["response"]["result"];
            if result["status"] != "Success" {
                tracing::info!(message = %result["message"], "conversion refused");
            }
            json(answer)
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

fn json(value: serde_json::Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// The objects of the MetalLB namespace the configuration is built from,
/// and the nodes (labels only matter), read concurrently.
async fn current(client: &kube::Client, ns: &str) -> Result<Resources, CallError> {
    let lp = ListParams::default();
    let pools = Api::<v1beta1::IPAddressPool>::namespaced(client.clone(), ns);
    let l2 = Api::<v1beta1::L2Advertisement>::namespaced(client.clone(), ns);
    let bgp = Api::<v1beta1::BGPAdvertisement>::namespaced(client.clone(), ns);
    let peers = Api::<v1beta2::BGPPeer>::namespaced(client.clone(), ns);
    let bfd = Api::<v1beta1::BFDProfile>::namespaced(client.clone(), ns);
    let communities = Api::<v1beta1::Community>::namespaced(client.clone(), ns);
    let nodes = Api::<Node>::all(client.clone());
    let (pools, l2, bgp, peers, bfd, communities, nodes) = tokio::try_join!(
        call(pools.list(&lp)),
        call(l2.list(&lp)),
        call(bgp.list(&lp)),
        call(peers.list(&lp)),
        call(bfd.list(&lp)),
        call(communities.list(&lp)),
        call(nodes.list_metadata(&lp)),
    )?;
    Ok(Resources {
        pools: pools.items,
        l2_advertisements: l2.items,
        bgp_advertisements: bgp.items,
        peers: peers.items,
        bfd_profiles: bfd.items,
        communities: communities.items,
        nodes: nodes
            .items
            .into_iter()
            .map(|n| Node {
                metadata: n.metadata,
                ..Node::default()
            })
            .collect(),
        ..Resources::default()
    })
}
