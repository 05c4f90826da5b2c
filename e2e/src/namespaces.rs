//! Per-test namespaces: naming, creating/deleting them, and the registry of
//! live ones that Ctrl-C cleans up.

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::runtime::Runtime;

/// Label put on every namespace the harness creates, so leftovers of a run
/// that was killed hard can be found (`kubectl get ns -l <label>`).
pub const MANAGED_BY_LABEL: (&str, &str) = ("app.kubernetes.io/managed-by", "metallb-rs-e2e");

/// Longest namespace name Kubernetes accepts (a DNS-1123 label).
pub const MAX_NAME_LEN: usize = 63;

/// Creates and deletes namespaces (the real one talks to the API server, the
/// fake one records calls).
pub trait Namespaces: Send + Sync {
    /// Creates namespace `name`.
    fn create(&self, name: &str) -> Result<()>;
    /// Deletes namespace `name`; deleting one that does not exist is not an error.
    fn delete(&self, name: &str) -> Result<()>;
}

/// The namespace name for a test: `e2e-<slug of the name>-<suffix>`, a
/// DNS-1123 label (lowercase alphanumerics and `-`, starting and ending
/// alphanumeric, at most 63 characters). The slug is cut to make room for the
/// suffix, which is what keeps names unique.
pub fn namespace_name(test_name: &str, suffix: &str) -> String {
    let suffix = slug(suffix);
    let prefix = "e2e";
    let room = MAX_NAME_LEN.saturating_sub(prefix.len() + suffix.len() + 2);
    let mut body = slug(test_name);
    body.truncate(room);
    let body = body.trim_end_matches('-');
    let name = [prefix, body, suffix.as_str()]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let mut name = name;
    name.truncate(MAX_NAME_LEN);
    name.trim_end_matches('-').to_owned()
}

/// Lowercases, turns every run of characters outside `[a-z0-9]` into one `-`,
/// and trims `-` from both ends.
fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// The set of namespaces created and not yet deleted; what an interrupt
/// cleans up.
#[derive(Debug, Default)]
pub struct LiveNamespaces {
    names: Mutex<BTreeSet<String>>,
}

/// What happened to one namespace during [`LiveNamespaces::cleanup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleaned {
    /// The namespace.
    pub namespace: String,
    /// `Err(message)` when deleting it failed.
    pub result: Result<(), String>,
}

impl LiveNamespaces {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeSet<String>> {
        self.names.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `name` as live (call before creating it, so an interrupt
    /// during creation still cleans it up).
    pub fn register(&self, name: &str) {
        self.lock().insert(name.to_owned());
    }

    /// Forgets `name`; returns whether it was registered.
    pub fn unregister(&self, name: &str) -> bool {
        self.lock().remove(name)
    }

    /// The live namespaces, sorted.
    pub fn names(&self) -> Vec<String> {
        self.lock().iter().cloned().collect()
    }

    /// Whether none is live.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Deletes every live namespace through `namespaces`, unregistering the
    /// ones deleted, and says what happened to each.
    pub fn cleanup(&self, namespaces: &dyn Namespaces) -> Vec<Cleaned> {
        self.names()
            .into_iter()
            .map(|namespace| {
                let result = namespaces.delete(&namespace).map_err(|e| format!("{e:#}"));
                if result.is_ok() {
                    self.unregister(&namespace);
                }
                Cleaned { namespace, result }
            })
            .collect()
    }
}

/// Namespaces on a real API server, through kube, on a tokio runtime the
/// harness owns (the calls block).
pub struct KubeNamespaces {
    runtime: Arc<Runtime>,
    client: kube::Client,
}

impl KubeNamespaces {
    /// A client for the cluster behind `kubeconfig`.
    pub fn from_kubeconfig(kubeconfig: &Path, runtime: Arc<Runtime>) -> Result<Self> {
        let client = runtime.block_on(metallb_rs::k8s::client_for(kubeconfig))?;
        Ok(Self { runtime, client })
    }

    /// The kube client (suites use it for everything else).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    fn api(&self) -> Api<Namespace> {
        Api::all(self.client.clone())
    }
}

impl Namespaces for KubeNamespaces {
    fn create(&self, name: &str) -> Result<()> {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(BTreeMap::from([(
                    MANAGED_BY_LABEL.0.to_owned(),
                    MANAGED_BY_LABEL.1.to_owned(),
                )])),
                ..Default::default()
            },
            ..Default::default()
        };
        self.runtime
            .block_on(self.api().create(&PostParams::default(), &ns))
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(())
    }

    fn delete(&self, name: &str) -> Result<()> {
        match self
            .runtime
            .block_on(self.api().delete(name, &DeleteParams::background()))
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(e) => Err(e).with_context(|| format!("deleting namespace {name}")),
        }
    }
}

/// An in-memory [`Namespaces`] that records every call (for unit tests of the
/// harness and of suites).
#[derive(Debug, Default)]
pub struct FakeNamespaces {
    state: Mutex<FakeState>,
}

#[derive(Debug, Default)]
struct FakeState {
    existing: BTreeSet<String>,
    created: Vec<String>,
    deleted: Vec<String>,
    fail_create: bool,
    fail_delete: bool,
}

impl FakeNamespaces {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes every later `create` fail.
    pub fn fail_create(&self, fail: bool) {
        self.lock().fail_create = fail;
    }

    /// Makes every later `delete` fail.
    pub fn fail_delete(&self, fail: bool) {
        self.lock().fail_delete = fail;
    }

    /// Every name passed to a successful `create`, in order.
    pub fn created(&self) -> Vec<String> {
        self.lock().created.clone()
    }

    /// Every name passed to a successful `delete`, in order.
    pub fn deleted(&self) -> Vec<String> {
        self.lock().deleted.clone()
    }

    /// The namespaces that exist now (created, not deleted).
    pub fn existing(&self) -> Vec<String> {
        self.lock().existing.iter().cloned().collect()
    }
}

impl Namespaces for FakeNamespaces {
    fn create(&self, name: &str) -> Result<()> {
        let mut state = self.lock();
        if state.fail_create {
            bail!("creating namespace {name}: injected failure");
        }
        if !state.existing.insert(name.to_owned()) {
            bail!("creating namespace {name}: already exists");
        }
        state.created.push(name.to_owned());
        Ok(())
    }

    fn delete(&self, name: &str) -> Result<()> {
        let mut state = self.lock();
        if state.fail_delete {
            bail!("deleting namespace {name}: injected failure");
        }
        state.existing.remove(name);
        state.deleted.push(name.to_owned());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn is_dns1123_label(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= MAX_NAME_LEN
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    }

    #[rstest]
    #[case(
        "L2 should work for ExternalTrafficPolicy=Cluster [IPV4]",
        "ab12-1",
        "e2e-l2-should-work-for-externaltrafficpolicy-cluster-ipv-ab12-1"
    )]
    #[case("BGP  --  peers [IPV6]", "x", "e2e-bgp-peers-ipv6-x")]
    #[case("L2 [IPV4]", "ab12-1", "e2e-l2-ipv4-ab12-1")]
    #[case("[Disruptive]", "1", "e2e-disruptive-1")]
    #[case("", "1", "e2e-1")]
    #[case("!!!", "1", "e2e-1")]
    #[case("Ünïcode Straße", "1", "e2e-n-code-stra-e-1")]
    #[case("a", "Bad Suffix!", "e2e-a-bad-suffix")]
    fn slug_rules(#[case] test: &str, #[case] suffix: &str, #[case] want: &str) {
        let got = namespace_name(test, suffix);
        assert_eq!(got, want);
        assert!(is_dns1123_label(&got), "{got}");
    }

    #[test]
    fn long_names_are_cut_to_63_keeping_the_suffix() {
        let long = "L2 should work for ExternalTrafficPolicy=Cluster when the pool has many many ranges [IPV4] [Disruptive]";
        let a = namespace_name(long, "k3f9a-1");
        let b = namespace_name(long, "k3f9a-2");
        assert!(is_dns1123_label(&a), "{a}");
        assert!(a.len() <= MAX_NAME_LEN);
        assert!(a.ends_with("-k3f9a-1"), "{a}");
        assert_ne!(a, b);
        // A cut landing right after a separator must not leave "--".
        for n in 0..80 {
            let name = namespace_name(&format!("{} x", "a".repeat(n)), "s-1");
            assert!(is_dns1123_label(&name), "{name}");
            assert!(!name.contains("--"), "{name}");
        }
    }

    #[test]
    fn live_registry_cleans_what_is_still_registered() {
        let live = LiveNamespaces::new();
        live.register("e2e-a-1");
        live.register("e2e-b-2");
        live.register("e2e-c-3");
        assert!(live.unregister("e2e-b-2"));
        assert!(!live.unregister("e2e-b-2"));
        assert_eq!(live.names(), ["e2e-a-1", "e2e-c-3"]);

        let fake = FakeNamespaces::new();
        let cleaned = live.cleanup(&fake);
        assert_eq!(
            cleaned,
            [
                Cleaned {
                    namespace: "e2e-a-1".into(),
                    result: Ok(())
                },
                Cleaned {
                    namespace: "e2e-c-3".into(),
                    result: Ok(())
                },
            ]
        );
        assert_eq!(fake.deleted(), ["e2e-a-1", "e2e-c-3"]);
        assert!(live.is_empty());
    }

    #[test]
    fn failed_cleanup_keeps_the_namespace_registered() {
        let live = LiveNamespaces::new();
        live.register("e2e-a-1");
        let fake = FakeNamespaces::new();
        fake.fail_delete(true);
        let cleaned = live.cleanup(&fake);
        assert_eq!(cleaned.len(), 1);
        assert!(
            cleaned[0]
                .result
                .as_ref()
                .is_err_and(|e| e.contains("injected"))
        );
        assert_eq!(live.names(), ["e2e-a-1"]);
    }

    #[test]
    fn fake_records_calls() {
        let fake = FakeNamespaces::new();
        fake.create("a").expect("create");
        assert!(fake.create("a").is_err());
        fake.delete("a").expect("delete");
        fake.delete("never-existed").expect("delete is idempotent");
        assert_eq!(fake.created(), ["a"]);
        assert_eq!(fake.deleted(), ["a", "never-existed"]);
        assert!(fake.existing().is_empty());
    }
}

#[cfg(test)]
mod kube_tests {
    //! `KubeNamespaces` against a canned HTTP API server on loopback.

    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// (method, path with query, body) of one request.
    type Request = (String, String, String);

    fn respond(path: &str, method: &str) -> (u16, String) {
        let status = |code: u16, reason: &str, name: &str| {
            serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": reason, "code": code,
                "message": format!("namespaces {name:?} {reason}"),
                "details": {"name": name, "kind": "namespaces"},
            })
            .to_string()
        };
        let ns = |name: &str| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name}, "status": {"phase": "Terminating"},
            })
            .to_string()
        };
        let name = path
            .split('?')
            .next()
            .unwrap_or_default()
            .rsplit('/')
            .next()
            .unwrap_or_default();
        match (method, name) {
            ("POST", _) => (201, ns("e2e-a-1")),
            ("DELETE", "missing") => (404, status(404, "NotFound", name)),
            ("DELETE", "broken") => (500, status(500, "InternalError", name)),
            ("DELETE", _) => (200, ns(name)),
            _ => (405, status(405, "MethodNotAllowed", name)),
        }
    }

    fn serve(listener: TcpListener, requests: mpsc::Sender<Request>) {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or_default().to_owned();
            let path = parts.next().unwrap_or_default().to_owned();
            let mut len = 0;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = header.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            let _ = reader.read_exact(&mut body);
            let (code, reply) = respond(&path, &method);
            let _ = requests.send((method, path, String::from_utf8_lossy(&body).into_owned()));
            let mut stream = reader.into_inner();
            let _ = write!(
                stream,
                "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    }

    #[test]
    fn creates_and_deletes_through_the_api() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || serve(listener, tx));

        let dir = std::env::temp_dir().join(format!("e2e-kube-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: t\n\
                 clusters:\n- name: t\n  cluster:\n    server: http://127.0.0.1:{port}\n\
                 contexts:\n- name: t\n  context:\n    cluster: t\n    user: u\n\
                 users:\n- name: u\n  user: {{}}\n"
            ),
        )
        .expect("write kubeconfig");

        let runtime = Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("runtime"),
        );
        let kube = KubeNamespaces::from_kubeconfig(&kubeconfig, runtime).expect("client");

        kube.create("e2e-a-1").expect("create");
        let (method, path, body) = rx.recv().expect("request");
        assert_eq!(
            (method.as_str(), path.split('?').next()),
            ("POST", Some("/api/v1/namespaces"))
        );
        let body: serde_json::Value = serde_json::from_str(&body).expect("json body");
        assert_eq!(body["metadata"]["name"], "e2e-a-1");
        assert_eq!(
            body["metadata"]["labels"][MANAGED_BY_LABEL.0],
            MANAGED_BY_LABEL.1
        );

        kube.delete("e2e-a-1").expect("delete");
        let (method, path, body) = rx.recv().expect("request");
        assert_eq!(method, "DELETE");
        assert!(path.starts_with("/api/v1/namespaces/e2e-a-1"), "{path}");
        assert!(body.contains("Background"), "{body}");

        kube.delete("missing").expect("not found is fine");
        let err = kube.delete("broken").expect_err("500 is an error");
        assert!(
            format!("{err:#}").contains("deleting namespace broken"),
            "{err:#}"
        );

        let err = KubeNamespaces::from_kubeconfig(
            &dir.join("nope"),
            Arc::new(tokio::runtime::Runtime::new().expect("rt")),
        )
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default();
        assert!(err.contains("reading kubeconfig"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
