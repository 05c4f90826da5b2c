//! Scraping the components' HTTPS metrics on kind, which only answer a
//! token allowed to `get` `/metrics`: a reader ServiceAccount bound to
//! such a ClusterRole, and the curl run on a node (the API server's pod
//! proxy cannot carry a token). Pure: the objects and the argument list.

use serde_json::{Value, json};
use std::net::{IpAddr, SocketAddr};

/// The reader ServiceAccount, ClusterRole and binding's name.
pub const READER: &str = "metallb-metrics-reader";

/// The reader's ServiceAccount (in `namespace`), its ClusterRole and the
/// binding, in the order to apply them.
pub fn reader_objects(namespace: &str) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": { "name": READER, "namespace": namespace },
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": READER },
            "rules": [{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": READER },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER },
            "subjects": [{ "kind": "ServiceAccount", "name": READER, "namespace": namespace }],
        }),
    ]
}

/// curl's arguments for `/metrics` at `ip` (the metrics port) with
/// `token`; `-k`: the certificate is self-signed.
pub fn curl_argv(ip: IpAddr, token: &str) -> Vec<String> {
    let url = format!(
        "https://{}/metrics",
        SocketAddr::new(ip, metallb_rs::manifests::ports::METRICS)
    );
    [
        "curl",
        "-sSfk",
        "-m",
        "5",
        "-H",
        &format!("Authorization: Bearer {token}"),
        &url,
    ]
    .map(str::to_owned)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_may_get_metrics_and_curl_sends_its_token_over_https() {
        let objects = reader_objects("metallb-system");
        assert_eq!(
            objects[1]["rules"][0]["nonResourceURLs"],
            json!(["/metrics"])
        );
        assert_eq!(objects[2]["subjects"][0]["namespace"], "metallb-system");
        assert_eq!(
            curl_argv("fc00::1".parse().expect("ip"), "t0k"),
            [
                "curl",
                "-sSfk",
                "-m",
                "5",
                "-H",
                "Authorization: Bearer t0k",
                "https://[fc00::1]:9120/metrics"
            ]
        );
    }
}
