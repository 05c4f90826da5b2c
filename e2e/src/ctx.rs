//! The per-test context: the cluster handle plus a namespace of the test's
//! own, deleted when the test ends however it ends.

use crate::namespaces::{KubeNamespaces, LiveNamespaces, Namespaces, namespace_name};
use anyhow::{Context, Result};
use devenv::cluster::Cluster;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;
use tokio::runtime::Runtime;

/// What a running test gets: the cluster and a fresh namespace.
pub struct Ctx {
    test_name: String,
    namespace: String,
    cluster: Arc<dyn Cluster>,
    runtime: Arc<Runtime>,
    client: Option<kube::Client>,
    namespaces: Arc<dyn Namespaces>,
    live: Arc<LiveNamespaces>,
    cleaned: bool,
    /// Namespaces the test asked for beside its own, deleted with it.
    more: Mutex<Vec<String>>,
}

impl Ctx {
    /// The test's full name.
    pub fn test_name(&self) -> &str {
        &self.test_name
    }

    /// The test's own namespace (exists for the whole test).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The cluster under test.
    pub fn cluster(&self) -> &Arc<dyn Cluster> {
        &self.cluster
    }

    /// A kube client for the cluster (cheap to clone). Errors when the
    /// context was built without one (unit tests with fake namespaces).
    pub fn client(&self) -> Result<kube::Client> {
        self.client
            .clone()
            .context("this e2e context has no kube client (built over fake namespaces)")
    }

    /// Runs a future to completion on the harness's tokio runtime (specs are
    /// plain functions; use this for kube calls).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Creates one more namespace for the test (`<its namespace>-<suffix>`,
    /// for specs about namespaces other than the test's own) and returns its
    /// name; it is deleted with the test's own, also on interrupt.
    pub fn another_namespace(&self, suffix: &str) -> Result<String> {
        // The test's namespace ends in the run's unique suffix: keep that
        // end, cut the middle.
        let room = 63usize.saturating_sub(suffix.len() + 1);
        let own = &self.namespace;
        let keep = own.len().min(room.saturating_sub(1));
        let cut = own[..keep / 2].trim_end_matches('-').to_owned()
            + "-"
            + own[own.len() - (keep - keep / 2)..].trim_start_matches('-');
        let name = if own.len() <= room {
            format!("{own}-{suffix}")
        } else {
            format!("{cut}-{suffix}")
        };
        self.live.register(&name);
        if let Err(e) = self.namespaces.create(&name) {
            let _ = self.namespaces.delete(&name);
            self.live.unregister(&name);
            return Err(e);
        }
        self.more
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(name.clone());
        Ok(name)
    }

    /// Deletes the namespace now and reports whether that worked. Dropping
    /// a `Ctx` without calling this deletes it too, reporting errors on stderr.
    pub fn finish(mut self) -> Result<()> {
        self.cleanup()
    }

    fn cleanup(&mut self) -> Result<()> {
        if self.cleaned {
            return Ok(());
        }
        self.cleaned = true;
        let more = std::mem::take(self.more.get_mut().unwrap_or_else(PoisonError::into_inner));
        let mut result = Ok(());
        for name in more.iter().chain([&self.namespace]) {
            let deleted = self.namespaces.delete(name);
            if deleted.is_ok() {
                // On failure it stays live, for the interrupt handler to retry.
                self.live.unregister(name);
            }
            result = result.and(deleted);
        }
        result.with_context(|| format!("cleaning up after {:?}", self.test_name))
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            eprintln!("e2e: {e:#}");
        }
    }
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("test_name", &self.test_name)
            .field("namespace", &self.namespace)
            .field("cluster", &self.cluster.name())
            .finish_non_exhaustive()
    }
}

/// Makes a [`Ctx`] per test; owns the tokio runtime, the namespace backend
/// and the registry of live namespaces (which the interrupt handler cleans).
pub struct CtxFactory {
    cluster: Arc<dyn Cluster>,
    runtime: Arc<Runtime>,
    client: Option<kube::Client>,
    namespaces: Arc<dyn Namespaces>,
    live: Arc<LiveNamespaces>,
    run_id: String,
    counter: AtomicU64,
    handle_interrupts: bool,
    interrupt_installed: AtomicBool,
    cleanup_log: Mutex<()>,
}

impl CtxFactory {
    /// The real thing: namespaces over kube from the cluster's kubeconfig,
    /// with the Ctrl-C / SIGTERM handler enabled (installed by [`crate::run`]).
    pub fn for_cluster(cluster: Arc<dyn Cluster>) -> Result<Self> {
        let runtime = Arc::new(new_runtime()?);
        let kube = KubeNamespaces::from_kubeconfig(cluster.kubeconfig(), runtime.clone())?;
        let client = kube.client().clone();
        let mut factory = Self::build(cluster, runtime, Arc::new(kube));
        factory.client = Some(client);
        factory.handle_interrupts = true;
        Ok(factory)
    }

    /// A factory over any [`Namespaces`] (e.g. [`crate::FakeNamespaces`]);
    /// no kube client, no interrupt handler unless enabled.
    pub fn with_namespaces(
        cluster: Arc<dyn Cluster>,
        namespaces: Arc<dyn Namespaces>,
    ) -> Result<Self> {
        Ok(Self::build(cluster, Arc::new(new_runtime()?), namespaces))
    }

    fn build(
        cluster: Arc<dyn Cluster>,
        runtime: Arc<Runtime>,
        namespaces: Arc<dyn Namespaces>,
    ) -> Self {
        Self {
            cluster,
            runtime,
            client: None,
            namespaces,
            live: Arc::new(LiveNamespaces::new()),
            run_id: run_id(),
            counter: AtomicU64::new(0),
            handle_interrupts: false,
            interrupt_installed: AtomicBool::new(false),
            cleanup_log: Mutex::new(()),
        }
    }

    /// Whether [`crate::run`] installs the interrupt handler (default: only
    /// for [`CtxFactory::for_cluster`]).
    pub fn set_handle_interrupts(&mut self, on: bool) {
        self.handle_interrupts = on;
    }

    /// The namespaces created and not yet deleted.
    pub fn live(&self) -> &Arc<LiveNamespaces> {
        &self.live
    }

    /// The cluster under test.
    pub fn cluster(&self) -> &Arc<dyn Cluster> {
        &self.cluster
    }

    /// Creates the namespace for `test_name` and the context around it.
    pub fn create(&self, test_name: &str) -> Result<Ctx> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let namespace = namespace_name(test_name, &format!("{}-{n}", self.run_id));
        self.live.register(&namespace);
        if let Err(e) = self.namespaces.create(&namespace) {
            // It may half-exist (e.g. a timeout after the server acted).
            let _ = self.namespaces.delete(&namespace);
            self.live.unregister(&namespace);
            return Err(e).with_context(|| format!("setting up {test_name:?}"));
        }
        Ok(Ctx {
            test_name: test_name.to_owned(),
            namespace,
            cluster: self.cluster.clone(),
            runtime: self.runtime.clone(),
            client: self.client.clone(),
            namespaces: self.namespaces.clone(),
            live: self.live.clone(),
            cleaned: false,
            more: Mutex::default(),
        })
    }

    /// Deletes every live namespace and writes one line per namespace to
    /// `out` (what the interrupt handler does before exiting).
    pub fn cleanup_live(&self, out: &mut dyn std::io::Write) {
        let _serial = self
            .cleanup_log
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let cleaned = self.live.cleanup(&*self.namespaces);
        if cleaned.is_empty() {
            let _ = writeln!(out, "e2e: no namespaces to clean up");
        }
        for c in cleaned {
            let _ = match c.result {
                Ok(()) => writeln!(out, "e2e: deleted namespace {}", c.namespace),
                Err(e) => writeln!(out, "e2e: could not delete namespace {}: {e}", c.namespace),
            };
        }
    }

    /// Installs the handler (once; later calls do nothing) if enabled: on
    /// SIGINT (Ctrl-C) or SIGTERM it deletes every live namespace, says what
    /// it cleaned, and exits with 130 (SIGINT) or 143 (SIGTERM). A second
    /// signal during cleanup exits at once.
    pub fn install_interrupt_handler(self: &Arc<Self>) -> Result<()> {
        if !self.handle_interrupts || self.interrupt_installed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let factory = self.clone();
        devenv::interrupt::on_interrupt(self.runtime.clone(), "e2e", move || {
            factory.cleanup_live(&mut std::io::stderr());
        })
    }

    /// Whether this factory wants the interrupt handler.
    pub fn handles_interrupts(&self) -> bool {
        self.handle_interrupts
    }
}

impl std::fmt::Debug for CtxFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CtxFactory")
            .field("cluster", &self.cluster.name())
            .field("run_id", &self.run_id)
            .field("live", &self.live.names())
            .finish_non_exhaustive()
    }
}

fn new_runtime() -> Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("e2e-tokio")
        .build()
        .context("starting the e2e tokio runtime")
}

/// Five base-36 characters, different per process, so reruns never reuse a
/// namespace that is still terminating.
fn run_id() -> String {
    let mut h = RandomState::new().build_hasher();
    std::process::id().hash(&mut h);
    SystemTime::now().hash(&mut h);
    let mut v = h.finish();
    let mut id = String::new();
    for _ in 0..5 {
        let d = u32::try_from(v % 36).unwrap_or(0);
        id.push(char::from_digit(d, 36).unwrap_or('0'));
        v /= 36;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeNamespaces;
    use crate::testing::NoCluster;

    fn factory() -> (Arc<FakeNamespaces>, CtxFactory) {
        let fake = Arc::new(FakeNamespaces::new());
        let factory =
            CtxFactory::with_namespaces(Arc::new(NoCluster), fake.clone()).expect("factory");
        (fake, factory)
    }

    #[test]
    fn each_ctx_gets_its_own_namespace_deleted_on_finish() {
        let (fake, factory) = factory();
        let a = factory.create("L2 should work [IPV4]").expect("ctx");
        let b = factory.create("L2 should work [IPV4]").expect("ctx");
        assert_ne!(a.namespace(), b.namespace());
        assert!(a.namespace().starts_with("e2e-l2-should-work-ipv4-"));
        assert_eq!(a.test_name(), "L2 should work [IPV4]");
        assert_eq!(factory.live().names().len(), 2);
        assert_eq!(fake.existing().len(), 2);
        assert!(a.client().is_err());
        assert_eq!(a.block_on(async { 7 }), 7);

        let (na, nb) = (a.namespace().to_owned(), b.namespace().to_owned());
        a.finish().expect("cleanup");
        drop(b);
        assert_eq!(fake.deleted(), [na, nb]);
        assert!(fake.existing().is_empty());
        assert!(factory.live().is_empty());
    }

    #[test]
    fn another_namespace_is_deleted_with_the_test() {
        let (fake, factory) = factory();
        let ctx = factory
            .create("IP Assignment with namespace with labels and a long name to cut [IPV4]")
            .expect("ctx");
        let own = ctx.namespace().to_owned();
        let other = ctx.another_namespace("second").expect("another");
        assert!(other.len() <= 63, "{other}");
        assert!(other.ends_with("-second"), "{other}");
        assert_ne!(other, own);
        assert_eq!(factory.live().names().len(), 2);
        drop(ctx);
        assert_eq!(fake.deleted(), [other, own]);
        assert!(factory.live().is_empty());
    }

    #[test]
    fn namespace_is_deleted_when_the_body_panics() {
        let (fake, factory) = factory();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let ctx = factory.create("boom").expect("ctx");
            panic!("inside {}", ctx.namespace());
        }));
        assert!(result.is_err());
        assert_eq!(fake.created(), fake.deleted());
        assert_eq!(fake.deleted().len(), 1);
        assert!(factory.live().is_empty());
    }

    #[test]
    fn failed_create_leaves_nothing_registered() {
        let (fake, factory) = factory();
        fake.fail_create(true);
        let err = factory.create("x").expect_err("create fails");
        assert!(format!("{err:#}").contains("injected failure"), "{err:#}");
        assert!(factory.live().is_empty());
    }

    #[test]
    fn failed_delete_stays_live_for_the_interrupt_handler() {
        let (fake, factory) = factory();
        let ctx = factory.create("sticky").expect("ctx");
        let ns = ctx.namespace().to_owned();
        fake.fail_delete(true);
        let err = ctx.finish().expect_err("delete fails");
        assert!(
            format!("{err:#}").contains("cleaning up after \"sticky\""),
            "{err:#}"
        );
        assert_eq!(factory.live().names(), std::slice::from_ref(&ns));
        fake.fail_delete(false);
        factory.cleanup_live(&mut Vec::new());
        assert!(factory.live().is_empty());
        assert_eq!(fake.deleted(), [ns]);
    }

    #[test]
    fn cleanup_live_deletes_leftovers_and_says_so() {
        let (fake, factory) = factory();
        let ctx = factory.create("left over").expect("ctx");
        let ns = ctx.namespace().to_owned();
        std::mem::forget(ctx); // as if the process were interrupted mid-test
        let mut out = Vec::new();
        factory.cleanup_live(&mut out);
        let out = String::from_utf8(out).expect("utf8");
        assert_eq!(out, format!("e2e: deleted namespace {ns}\n"));
        assert_eq!(fake.deleted(), [ns]);
        assert!(factory.live().is_empty());

        let mut out = Vec::new();
        factory.cleanup_live(&mut out);
        assert_eq!(out, b"e2e: no namespaces to clean up\n");
    }

    #[test]
    fn interrupt_handler_is_off_for_fakes() {
        let (_, factory) = factory();
        assert!(!factory.handles_interrupts());
        Arc::new(factory)
            .install_interrupt_handler()
            .expect("no-op");
    }

    #[test]
    fn run_ids_are_dns_safe() {
        let id = run_id();
        assert_eq!(id.len(), 5);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        );
    }

    const CHILD_ENV: &str = "E2E_HARNESS_INTERRUPT_CHILD";

    /// The child half of `interrupt_cleans_up_and_exits_130`; does nothing
    /// unless that test started this process.
    #[test]
    fn interrupt_child() {
        if std::env::var_os(CHILD_ENV).is_none() {
            return;
        }
        let mut factory =
            CtxFactory::with_namespaces(Arc::new(NoCluster), Arc::new(FakeNamespaces::new()))
                .expect("factory");
        factory.set_handle_interrupts(true);
        let factory = Arc::new(factory);
        factory.install_interrupt_handler().expect("handler");
        let ctx = factory.create("interrupted test [IPV4]").expect("ctx");
        println!("\nready {}", ctx.namespace());
        std::thread::sleep(std::time::Duration::from_secs(30));
        panic!("was not interrupted");
    }

    #[test]
    fn interrupt_cleans_up_and_exits_130() {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe().expect("test binary");
        let mut child = Command::new(exe)
            .args(["--exact", "ctx::tests::interrupt_child", "--nocapture"])
            .env(CHILD_ENV, "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let namespace = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("ready ").map(str::to_owned))
            .expect("child got ready");
        let killed = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{stderr}");
        assert!(
            stderr.contains(&format!("e2e: deleted namespace {namespace}")),
            "{stderr}"
        );
    }
}
