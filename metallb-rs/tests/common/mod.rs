//! What the integration tests against the lab API server share: the
//! server in process and clients of it.

use kube::api::PostParams;
use kube::config::Kubeconfig;
use kube::{Api, Client};
use lab_apiserver::ApiServer;

/// A client from a kubeconfig the lab API server wrote.
pub async fn client_from(kubeconfig: &str) -> Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig parses");
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("client config");
    Client::try_from(config).expect("client")
}

/// A client authenticated as the controller's ServiceAccount in
/// `namespace` (its groups included), so the manifests' RBAC applies.
#[allow(dead_code)] // not every test binary runs the controller
pub async fn controller_client(server: &ApiServer, namespace: &str) -> Client {
    account_client(server, namespace, "controller").await
}

/// A client with ServiceAccount `namespace/name`'s identity.
pub async fn account_client(server: &ApiServer, namespace: &str, name: &str) -> Client {
    client_from(&server.kubeconfig_as(
        "lab",
        &format!("system:serviceaccount:{namespace}:{name}"),
        &[
            "system:serviceaccounts",
            &format!("system:serviceaccounts:{namespace}"),
        ],
    ))
    .await
}

/// The lab API server on a free loopback port, and an admin client.
#[allow(dead_code)] // the webhook tests start theirs with options
pub async fn server_and_admin() -> (ApiServer, Client) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let server = ApiServer::start(listener).await.expect("starts");
    let client = client_from(&server.kubeconfig("lab")).await;
    (server, client)
}

/// The manifests' RBAC for the controller (ClusterRole, Role, bindings),
/// applied as `kubectl apply -f manifests/` would.
#[allow(dead_code)] // not every test binary installs MetalLB
pub async fn install_controller_rbac(client: &Client) {
    install_rbac(client, "controller").await;
}

/// The manifests' RBAC for `component` (ClusterRole, Role, bindings) and,
/// for the speaker, the admission policy that keeps it to its leases,
/// applied as `kubectl apply -f manifests/` would.
#[allow(dead_code)] // not every test binary installs MetalLB
pub async fn install_rbac(client: &Client, component: &str) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let objects = metallb_rs::manifests::native_objects(&Default::default());
    for o in objects {
        let kind = o["kind"].as_str().unwrap_or_default();
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let group = match kind {
            "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => {
                "rbac.authorization.k8s.io"
            }
            "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding" => {
                "admissionregistration.k8s.io"
            }
            _ => continue,
        };
        if !name.contains(component) {
            continue;
        }
        let gvk = GroupVersionKind::gvk(group, "v1", kind);
        let ar = ApiResource::from_gvk(&gvk);
        let namespaced = matches!(kind, "Role" | "RoleBinding");
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(client.clone(), metallb_rs::api::DEFAULT_NAMESPACE, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        let obj: DynamicObject = serde_json::from_value(o).expect("RBAC object");
        api.create(&PostParams::default(), &obj)
            .await
            .expect("RBAC object created");
    }
}

/// The MetalLB CRDs and namespace, as `kubectl apply -f manifests/` would.
#[allow(dead_code)] // not every test binary installs MetalLB
pub async fn install_metallb_api(client: &Client) {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in metallb_rs::api::crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD created");
    }
    let ns: Namespace = serde_json::from_value(
        serde_json::json!({ "metadata": { "name": metallb_rs::api::DEFAULT_NAMESPACE } }),
    )
    .expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
}
