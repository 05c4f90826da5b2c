//! A small kube-apiserver: HTTPS (a CA of its own) on a loopback address,
//! with bearer tokens and RBAC, serving the
//! part of the Kubernetes API that metallb-rs, kubectl and the e2e suites
//! use, with real semantics ([`DEVIATIONS`] lists what differs from
//! kube-apiserver). The lab (`devenv`) runs it as the `lab-apiserver`
//! process; tests start it in process with [`ApiServer::start`].
//!
//! Knows nothing about MetalLB: custom resources come from the CRDs that
//! clients apply.

mod admission;
mod apply;
mod auth;
mod builtins;
mod client;
mod conversion;
mod error;
mod events;
mod fanout;
mod gate;
mod http;
mod page;
mod patch;
pub mod podlog;
mod proto;
mod registry;
mod render;
mod reviews;
mod scale;
mod schema;
mod selector;
mod state;
mod store;
mod table;
mod tls;
mod traffic;
mod watch;
mod write;

pub use tls::Identity;

use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The IPv4 range ClusterIPs are allocated from.
pub const SERVICE_CIDR_V4: &str = "10.96.0.0/16";
/// The IPv6 range ClusterIPs are allocated from.
pub const SERVICE_CIDR_V6: &str = "fd00:10:96::/112";

/// What the lab API server does differently from kube-apiserver.
pub const DEVIATIONS: &str = "\
- authentication by bearer tokens this server signs only (the admin kubeconfig's, and ServiceAccount tokens from the TokenRequest API, bound to the account's UID; not JWTs, not bound to a pod; no client certificates, OIDC or webhook); aggregated ClusterRoles are not expanded
- JSON bodies, and protobuf only where real clients send nothing else (the review kinds, TokenRequest, `kubectl create deployment`'s Deployment, Helm's release Secrets and Namespaces, DeleteOptions); other protobuf and CBOR bodies get 415, so other `kubectl create <kind>` generators fail: use `kubectl apply -f`
- Table responses (`kubectl get`) have kube-apiserver's columns for nodes, services, pods, deployments, replicasets, daemonsets, statefulsets, jobs, endpointslices, leases, events, namespaces, configmaps, secrets and CRDs' additionalPrinterColumns; other built-in kinds get the default NAME and CREATED AT; pod STATUS is simplified (container reasons, phase, Terminating)
- /openapi/v3 lists paths only (so kubectl validates on the server); no component schemas, no /openapi/v2
- server-side apply (`application/apply-patch+yaml`, YAML or JSON, `force`, `dryRun`) merges, removes what its manager dropped, records `managedFields` and reports conflicts as kube-apiserver does, except: built-in kinds' lists are keyed by the strategic merge keys below (one key each: a container's ports by `containerPort`, a Service's by `port`, without `protocol`), other built-in lists are atomic and `metadata.finalizers` a set; a custom resource's lists are atomic unless its schema says `x-kubernetes-list-type: map` (with `x-kubernetes-list-map-keys`) or `set`; maps are never atomic; the `scale` subresource takes no apply; `managedFields` a client sends are ignored (so kubectl's move of client-side apply ownership to server-side apply does not happen), updates share one entry per manager whatever their apiVersion, and a manager without `fieldManager` is named by its User-Agent up to the first `/`. Strategic merge patch merges lists by the merge keys of the kinds served here, told apart by field name (and `ports` by its elements), applies `$setElementOrder` and `$deleteFromPrimitiveList`, and ignores `$retainKeys`
- field selectors take the fields kube-apiserver selects each built-in kind by (others are refused as it refuses them); custom resources only by metadata.name and metadata.namespace (a CRD's selectableFields are not served)
- list pages with limit/continue, later pages showing the store as it is then (kube-apiserver keeps the first page's snapshot); core/v1 Events lists also hold the events.k8s.io Events (converted, so `kubectl describe` shows them), watches do not
- `pods/log` serves what the node agent logged for the container (the lab backend's requests); `follow` and `previous` get what is there now
- validating admission webhooks (ValidatingWebhookConfiguration) are called as kube-apiserver calls them; ValidatingAdmissionPolicy with its bindings is evaluated as kube-apiserver does (`admission::policy`: no params, variables, audit annotations or messageExpression; the lab's tokens carry no extra attributes); not served: MutatingWebhookConfiguration and the built-in admission plugins; matchConditions are ignored; only AdmissionReview and ConversionReview v1 are sent (admissionReviewVersions and conversionReviewVersions must list v1); sideEffects Some and Unknown are accepted (kube-apiserver's v1 API refuses them) and refuse dry runs
- a webhook Service is reached at the address given for it (`--webhook-service NS/NAME=HOST:PORT[,HOST:PORT...]`, `Options::webhook_services`: the first address that accepts a connection), else at the first ready endpoint of its EndpointSlices, never through its cluster IP; an empty caBundle trusts nothing (no system roots); connection and TLS causes in errors are worded by the OS and rustls (an unknown or wrong CA reads as Go's `x509: certificate signed by unknown authority`)
- what the server deletes itself (namespace contents, garbage collection, a removed CRD's objects), reviews and TokenRequests are not sent to webhooks
- CRD conversion strategy Webhook stores objects in the storage version and converts through the webhook (30s bound; a list or watch backlog in one ConversionReview); status.storedVersions is not updated
- openAPIV3Schema is enforced with defaults and pruning, and CEL rules (x-kubernetes-validations, the `crd-cel` crate) are evaluated, transition rules on updates; messageExpression, fieldPath, reason and CEL cost limits are not, and list items are not correlated for transition rules
- apps/v1 Deployments, ReplicaSets, DaemonSets and StatefulSets and batch/v1 Jobs get kube-apiserver's defaults (a Job its uid selector), a `scale` subresource (not DaemonSets and Jobs) and the check that the selector matches the template's labels, nothing more (a selector may change); their controllers and the scheduler are the lab's `lab-controller-manager`, not this server
- namespace deletion is immediate (no Terminating phase); ownerReference garbage collection is background-only
- state lives in memory: it survives restarts of every other lab process, not of the API server itself
- /metrics serves only apiserver_request_total{user,verb,resource} and apiserver_watch_events_total{user} (watch lines sent, bookmarks included); the user label is ours (kube-apiserver labels by resource, verb and code, not user)
";

/// How a server starts.
#[derive(Debug, Clone)]
pub struct Options {
    /// How many changes watches can resume from (older resourceVersions
    /// get 410 Gone).
    pub history: usize,
    /// The key tokens are signed with (random when `None`). Keep it to
    /// keep tokens valid across restarts.
    pub token_key: Option<Vec<u8>>,
    /// The CA and serving certificate (fresh when `None`).
    pub tls: Option<Identity>,
    /// Where webhook Services are reached: `namespace/name` ->
    /// `host:port[,host:port...]` (one per replica, tried in order: the
    /// first that accepts a connection answers, as a Service sends to a
    /// running endpoint). The lab has no Service proxy, so a webhook's
    /// `clientConfig.service` is reached here first, else at a ready
    /// endpoint of the Service's EndpointSlices.
    pub webhook_services: std::collections::BTreeMap<String, String>,
    /// Where the node agents keep container logs ([`podlog`]), which
    /// `pods/log` serves; without it every log is empty.
    pub pod_logs: Option<std::path::PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            history: 10_000,
            token_key: None,
            tls: None,
            webhook_services: Default::default(),
            pod_logs: None,
        }
    }
}

/// The admin user of [`ApiServer::kubeconfig`] (in `system:masters`).
pub const ADMIN: &str = "kubernetes-admin";

/// A running API server.
pub struct ApiServer {
    addr: SocketAddr,
    signer: auth::token::Signer,
    ca_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl ApiServer {
    /// Starts serving on `listener` (e.g. bound to 127.0.0.1:0).
    pub async fn start(listener: tokio::net::TcpListener) -> Result<Self> {
        Self::start_with(listener, Options::default()).await
    }

    /// Like [`ApiServer::start`], keeping only the last `history` changes
    /// for watches to resume from (older resourceVersions get 410 Gone).
    pub async fn start_with_history(
        listener: tokio::net::TcpListener,
        history: usize,
    ) -> Result<Self> {
        Self::start_with(
            listener,
            Options {
                history,
                ..Options::default()
            },
        )
        .await
    }

    /// Starts serving on `listener` with `options`.
    pub async fn start_with(listener: tokio::net::TcpListener, options: Options) -> Result<Self> {
        let addr = listener.local_addr()?;
        let key = options
            .token_key
            .unwrap_or_else(|| auth::token::Signer::random_secret().to_vec());
        let identity = match options.tls {
            Some(id) => id,
            None => Identity::generate()?,
        };
        let acceptor = identity.acceptor()?;
        let mut state = state::State::with_key(options.history, &key);
        state.webhook_services = options.webhook_services;
        state.pod_logs = options.pod_logs;
        state.bootstrap();
        let shared: state::Shared = Arc::new(Mutex::new(state));
        let app = axum::Router::new()
            .fallback(http::handle)
            .with_state(shared);
        let task = tokio::spawn(tls::serve(listener, acceptor, app));
        Ok(Self {
            addr,
            signer: auth::token::Signer::new(&key),
            ca_pem: identity.ca_pem,
            task,
        })
    }

    /// Starts on `addr`.
    pub async fn bind(addr: SocketAddr, options: Options) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding the lab API server to {addr}"))?;
        Self::start_with(listener, options).await
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (YAML) that reaches this server as [`ADMIN`], in
    /// `system:masters`.
    pub fn kubeconfig(&self, cluster: &str) -> String {
        self.kubeconfig_as(cluster, ADMIN, &[auth::MASTERS])
    }

    /// A kubeconfig for user `user` in `groups` (a token that never
    /// expires; `system:authenticated` is implied).
    pub fn kubeconfig_as(&self, cluster: &str, user: &str, groups: &[&str]) -> String {
        let token = self.signer.sign(&auth::token::Claims::user(user, groups));
        kubeconfig(&Endpoint::of(self), cluster, user, &token)
    }

    /// The HTTPS URL clients use.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA certificate (PEM) that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Writes [`ApiServer::kubeconfig`] to `path` (readable by its owner
    /// only: it holds the admin token).
    pub fn write_kubeconfig(&self, cluster: &str, path: &Path) -> Result<()> {
        write_private(path, self.kubeconfig(cluster).as_bytes())
    }

    /// Stops serving.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Writes a file only its owner can read.
pub fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(contents)
        .with_context(|| format!("writing {}", path.display()))
}

/// The token key in `path`, made (32 random bytes) when missing.
pub fn load_or_create_token_key(path: &Path) -> Result<Vec<u8>> {
    match std::fs::read(path) {
        Ok(key) if key.len() >= 32 => Ok(key),
        Ok(_) => anyhow::bail!(
            "{} holds fewer than 32 bytes: remove it to get a new key",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = auth::token::Signer::random_secret().to_vec();
            write_private(path, &key)?;
            Ok(key)
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Where a server is and how to trust it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `https://HOST:PORT`.
    pub url: String,
    /// The CA certificate (PEM).
    pub ca_pem: String,
}

impl Endpoint {
    /// The endpoint of a running server.
    pub fn of(server: &ApiServer) -> Self {
        Self {
            url: server.url(),
            ca_pem: server.ca_pem.clone(),
        }
    }
}

/// A kubeconfig for `endpoint` with one context named `cluster`, as
/// `user` with bearer `token`.
pub fn kubeconfig(endpoint: &Endpoint, cluster: &str, user: &str, token: &str) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(&endpoint.ca_pem);
    let url = &endpoint.url;
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\ncontexts:\n- name: {cluster}\n  context:\n    cluster: {cluster}\n    user: {user:?}\n    namespace: default\nusers:\n- name: {user:?}\n  user:\n    token: {token:?}\ncurrent-context: {cluster}\n"
    )
}
