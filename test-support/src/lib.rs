//! What the workspace's tests share: the lab API server in process with
//! an admin client, objects created as `kubectl create -f` would, and a
//! guard that cleans up when a test ends, also by panic. Test code only:
//! every user takes it as a dev-dependency, and it panics instead of
//! returning errors.

use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use lab_apiserver::ApiServer;
use serde_json::Value;

/// A client for a kubeconfig (YAML text), such as the ones the lab API
/// server writes.
pub async fn client_for(kubeconfig: &str) -> Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig parses");
    metallb_rs::k8s::client_from(kubeconfig)
        .await
        .expect("client")
}

/// The lab API server on a free loopback port, and an admin client.
pub async fn start() -> (ApiServer, Client) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let server = ApiServer::start(listener).await.expect("starts");
    let client = client_for(&server.kubeconfig("lab")).await;
    (server, client)
}

/// Creates every object (JSON with `apiVersion` and `kind`) as `kubectl
/// create -f` would: in the namespace its metadata names, else at cluster
/// scope. Panics naming the object the server refused.
pub async fn create_all(client: &Client, objects: impl IntoIterator<Item = Value>) {
    for object in objects {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let what = format!("{kind} {name}");
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let object: DynamicObject = serde_json::from_value(object).expect("an object");
        if let Err(e) = api.create(&PostParams::default(), &object).await {
            panic!("creating {what}: {e}");
        }
    }
}

/// Creates the CRDs and then `namespace`, as applying MetalLB's CRDs and
/// namespace would.
pub async fn install_crds(client: &Client, crds: impl IntoIterator<Item = Value>, namespace: &str) {
    create_all(client, crds).await;
    create_all(
        client,
        [serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": { "name": namespace },
        })],
    )
    .await;
}

/// Runs `cleanup(name)` when dropped, so that a test removes what it made
/// (a lab, its namespaces) also when it fails; a cleanup error is printed,
/// since a drop cannot fail the test.
pub struct Guard {
    name: String,
    cleanup: Cleanup,
}

/// A guard's cleanup, its error already rendered.
type Cleanup = Box<dyn Fn(&str) -> Result<(), String>>;

impl Guard {
    /// Guards `name` with `cleanup` (`devenv::lab::netns::destroy`,
    /// `devenv::lab::cluster::down`, ...).
    pub fn new<T, E: std::fmt::Display>(
        name: &str,
        cleanup: impl Fn(&str) -> Result<T, E> + 'static,
    ) -> Self {
        Self {
            name: name.to_owned(),
            // `{:#}`: an anyhow error with its causes.
            cleanup: Box::new(move |name| cleanup(name).map(drop).map_err(|e| format!("{e:#}"))),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = (self.cleanup)(&self.name) {
            eprintln!("cleanup of {}: {e}", self.name);
        }
    }
}
