//! A kubeconfig per MetalLB component the lab runs itself, each with a
//! token of the component's ServiceAccount, so it runs with exactly the
//! manifests' RBAC.

use super::client;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The kubeconfig MetalLB component `component` (`controller`,
/// `speaker-<node>`) runs with in lab `dir`.
pub fn component_kubeconfig(dir: &Path, component: &str) -> PathBuf {
    dir.join(format!("kubeconfig-{component}"))
}

/// Writes a kubeconfig per MetalLB component (the controller, each
/// node's speaker) with a token of its ServiceAccount from the API
/// server's TokenRequest API, so every component runs with exactly the
/// manifests' RBAC.
pub(super) fn write_component_kubeconfigs(
    dir: &Path,
    cluster: &str,
    api_port: u16,
    admin: &Path,
    nodes: &[String],
) -> Result<()> {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let ca_path = dir.join("pki").join("ca.crt");
    let endpoint = lab_apiserver::Endpoint {
        url: format!("https://127.0.0.1:{api_port}"),
        ca_pem: std::fs::read_to_string(&ca_path)
            .with_context(|| format!("reading {}", ca_path.display()))?,
    };
    let ns = metallb_rs::api::DEFAULT_NAMESPACE;
    let mut wanted = vec![("controller".to_owned(), "controller")];
    wanted.extend(nodes.iter().map(|n| (format!("speaker-{n}"), "speaker")));
    crate::runtime()?.block_on(async {
        let client = client(admin).await?;
        let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client, ns);
        for (component, account) in wanted {
            // A year: the lab's components never refresh their token.
            let request: TokenRequest = serde_json::from_value(
                serde_json::json!({ "spec": { "audiences": [], "expirationSeconds": 365 * 24 * 3600 } }),
            )?;
            let issued = tokio::time::timeout(
                Duration::from_secs(10),
                accounts.create_token_request(account, &Default::default(), &request),
            )
            .await
            .with_context(|| format!("requesting a token for {ns}/{account}: timed out"))?
            .with_context(|| format!("requesting a token for {ns}/{account}"))?;
            let token = issued.status.map(|s| s.token).unwrap_or_default();
            let user = format!("system:serviceaccount:{ns}:{account}");
            lab_apiserver::write_private(
                &component_kubeconfig(dir, &component),
                lab_apiserver::kubeconfig(&endpoint, cluster, &user, &token).as_bytes(),
            )?;
        }
        anyhow::Ok(())
    })
}
