//! What the integration tests against the lab API server share: the
//! server in process and clients of it.

use kube::Client;
use lab_apiserver::ApiServer;

/// A client authenticated as the controller's ServiceAccount in
/// `namespace` (its groups included), so the manifests' RBAC applies.
#[allow(dead_code)] // not every test binary runs the controller
pub async fn controller_client(server: &ApiServer, namespace: &str) -> Client {
    account_client(server, namespace, "controller").await
}

/// A client with ServiceAccount `namespace/name`'s identity.
pub async fn account_client(server: &ApiServer, namespace: &str, name: &str) -> Client {
    test_support::client_for(&server.kubeconfig_as(
        "lab",
        &format!("system:serviceaccount:{namespace}:{name}"),
        &[
            "system:serviceaccounts",
            &format!("system:serviceaccounts:{namespace}"),
        ],
    ))
    .await
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
    let objects = metallb_rs::manifests::native_objects(&Default::default())
        .into_iter()
        .filter(|o| {
            let kind = o["kind"].as_str().unwrap_or_default();
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            let rbac = matches!(
                kind,
                "ClusterRole"
                    | "ClusterRoleBinding"
                    | "Role"
                    | "RoleBinding"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
            );
            rbac && name.contains(component)
        });
    test_support::create_all(client, objects).await;
}

/// The MetalLB CRDs and namespace, as `kubectl apply -f manifests/` would.
#[allow(dead_code)] // not every test binary installs MetalLB
pub async fn install_metallb_api(client: &Client) {
    let crds = metallb_rs::api::crds()
        .into_iter()
        .map(|crd| serde_json::to_value(crd).expect("CRD as JSON"));
    test_support::install_crds(client, crds, metallb_rs::api::DEFAULT_NAMESPACE).await;
}
