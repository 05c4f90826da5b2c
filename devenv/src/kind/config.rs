//! The kind cluster configuration (`kind.x-k8s.io/v1alpha4`) as typed
//! structs, rendered to the YAML `kind create cluster --config` reads.
//! Only the fields dev-env sets; kind rejects unknown fields, so nothing
//! is rendered that kind does not know.

use serde::{Deserialize, Serialize};

/// The API version kind's config files carry.
pub const API_VERSION: &str = "kind.x-k8s.io/v1alpha4";

/// Address families of the cluster network (`networking.ipFamily`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IpFamily {
    /// IPv4 only (kind's default).
    Ipv4,
    /// IPv6 only.
    Ipv6,
    /// Both.
    Dual,
}

/// A node's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Runs the API server (and, in kind, workloads tolerating its taint).
    ControlPlane,
    /// Runs workloads.
    Worker,
}

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Its role.
    pub role: Role,
    /// The node image (`kindest/node:vX.Y.Z`); kind's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// `networking`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Networking {
    /// Address families.
    pub ip_family: IpFamily,
}

/// A whole kind config file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KindConfig {
    /// Always `Cluster`.
    pub kind: String,
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Cluster networking.
    pub networking: Networking,
    /// Control plane first, then the workers.
    pub nodes: Vec<Node>,
}

impl KindConfig {
    /// Upstream's dev-env shape: one control plane and `workers` workers,
    /// every node on `node_image` when given.
    pub fn new(ip_family: IpFamily, workers: usize, node_image: Option<&str>) -> Self {
        let node = |role| Node {
            role,
            image: node_image.map(str::to_owned),
        };
        Self {
            kind: "Cluster".into(),
            api_version: API_VERSION.into(),
            networking: Networking { ip_family },
            nodes: std::iter::once(node(Role::ControlPlane))
                .chain(std::iter::repeat_with(|| node(Role::Worker)).take(workers))
                .collect(),
        }
    }

    /// The YAML kind reads.
    pub fn to_yaml(&self) -> Result<String, serde_yaml::Error> {
        serde_yaml::to_string(self)
    }

    /// The container (and Node object) names kind gives these nodes in
    /// cluster `cluster`: `<cluster>-control-plane`, `<cluster>-worker`,
    /// `<cluster>-worker2`, ...
    pub fn node_names(&self, cluster: &str) -> Vec<String> {
        let mut workers = 0;
        let mut planes = 0;
        self.nodes
            .iter()
            .map(|n| match n.role {
                Role::ControlPlane => {
                    planes += 1;
                    numbered(cluster, "control-plane", planes)
                }
                Role::Worker => {
                    workers += 1;
                    numbered(cluster, "worker", workers)
                }
            })
            .collect()
    }
}

/// kind's naming: the first of a role has no number, the rest 2, 3, ...
fn numbered(cluster: &str, role: &str, n: usize) -> String {
    if n == 1 {
        format!("{cluster}-{role}")
    } else {
        format!("{cluster}-{role}{n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use std::path::PathBuf;

    fn golden(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("kind")
            .join(name)
    }

    /// The rendered config equals the committed golden file (set
    /// `UPDATE_GOLDEN=1` to rewrite them after a deliberate change), and
    /// the golden file reads back into the same config.
    #[rstest]
    #[case::ipv4(IpFamily::Ipv4, None, "kind-config-ipv4.yaml")]
    #[case::ipv6(IpFamily::Ipv6, None, "kind-config-ipv6.yaml")]
    #[case::dual(IpFamily::Dual, None, "kind-config-dual.yaml")]
    #[case::node_image(
        IpFamily::Ipv4,
        Some("kindest/node:v1.31.0"),
        "kind-config-node-image.yaml"
    )]
    fn renders_exactly_the_golden_file(
        #[case] family: IpFamily,
        #[case] image: Option<&str>,
        #[case] file: &str,
    ) {
        let config = KindConfig::new(family, 2, image);
        let rendered = config.to_yaml().expect("render");
        let path = golden(file);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, &rendered).expect("write golden");
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
        assert_eq!(rendered, want, "{file} differs from the rendering");
        let parsed: KindConfig = serde_yaml::from_str(&want).expect("golden parses");
        assert_eq!(parsed, config);
    }

    #[test]
    fn node_names_follow_kinds_numbering() {
        let config = KindConfig::new(IpFamily::Dual, 3, None);
        assert_eq!(
            config.node_names("kind"),
            [
                "kind-control-plane",
                "kind-worker",
                "kind-worker2",
                "kind-worker3"
            ]
        );
    }

    #[test]
    fn an_unknown_ip_family_is_rejected_naming_it() {
        let bad = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  ipFamily: ipv5\nnodes: []\n";
        let err = serde_yaml::from_str::<KindConfig>(bad).expect_err("ipv5");
        assert!(err.to_string().contains("ipv5"), "{err}");
    }
}
