//! The metallb-rs e2e suites and the harness that runs them.
//!
//! `cargo xtask e2e` collects [`suites::all`], turns its flags into
//! [`Options`] and calls [`run`]. Specs have ginkgo-style full names
//! (`L2 should work for ExternalTrafficPolicy=Cluster [IPV4]`) that
//! `--focus` / `--skip` regexes match; `--dry-run` lists without running.
//! Each test gets its own namespace ([`Ctx::namespace`]), deleted after the
//! test whether it passes, fails or panics, and on Ctrl-C.
//!
//! ```no_run
//! use devenv::cluster::Cluster;
//! use std::process::ExitCode;
//! use std::sync::Arc;
//!
//! // What `cargo xtask e2e --focus L2 --junit junit.xml` boils down to; the
//! // closure (bring up or attach to the cluster) runs only if a spec will run.
//! fn e2e_command(
//!     connect: impl FnOnce() -> anyhow::Result<Arc<dyn Cluster>>,
//! ) -> anyhow::Result<ExitCode> {
//!     let opts = e2e::Options {
//!         focus: Some("L2".into()),
//!         junit: Some("junit.xml".into()),
//!         ..e2e::Options::default()
//!     };
//!     let summary = e2e::run(e2e::suites::all(), &opts, || {
//!         e2e::CtxFactory::for_cluster(connect()?)
//!     })?;
//!     Ok(if summary.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
//! }
//! ```

pub mod backend;
pub mod capture;
mod ctx;
pub mod external;
pub mod filter;
pub mod link;
pub mod metallb;
pub mod namespaces;
pub mod prober;
mod runner;
pub mod spec;
pub mod suites;
pub mod upstream;

pub use ctx::{Ctx, CtxFactory};
pub use filter::Filter;
pub use namespaces::{FakeNamespaces, KubeNamespaces, LiveNamespaces, Namespaces};
pub use runner::{Options, Outcome, Summary, TestResult, run, write_junit};
pub use spec::{Skip, Spec, Suite, skip};

#[cfg(test)]
pub(crate) mod testing {
    //! A cluster that refuses everything, for harness unit tests.

    use anyhow::{Result, bail};
    use devenv::cluster::{Cluster, NodeInfo, StopSignal};
    use std::path::Path;
    use std::process::Output;

    pub struct NoCluster;

    impl Cluster for NoCluster {
        fn name(&self) -> &str {
            "no-cluster"
        }
        fn kubeconfig(&self) -> &Path {
            Path::new("/nonexistent/kubeconfig")
        }
        fn nodes(&self) -> Vec<NodeInfo> {
            Vec::new()
        }
        fn exec_on_node(&self, _: &str, _: &[&str]) -> Result<Output> {
            bail!("no cluster")
        }
        fn exec_on_external(&self, _: &[&str]) -> Result<Output> {
            bail!("no cluster")
        }
        fn node_down(&self, _: &str) -> Result<()> {
            bail!("no cluster")
        }
        fn node_up(&self, _: &str) -> Result<()> {
            bail!("no cluster")
        }
        fn stop_speaker(&self, _: &str, _: StopSignal) -> Result<()> {
            bail!("no cluster")
        }
        fn start_speaker(&self, _: &str) -> Result<()> {
            bail!("no cluster")
        }
        fn resume_speaker(&self, _: &str) -> Result<()> {
            bail!("no cluster")
        }
        fn restart_controller(&self) -> Result<()> {
            bail!("no cluster")
        }
        fn controller_takeover(&self) -> Result<()> {
            bail!("no cluster")
        }
        fn set_api_reachable(&self, _: &str, _: bool) -> Result<()> {
            bail!("no cluster")
        }
        fn controller_metrics(&self) -> Result<String> {
            bail!("no cluster")
        }
        fn pool_ranges(&self) -> devenv::cluster::PoolRanges {
            devenv::cluster::PoolRanges::default()
        }
        fn external_interface(&self, _: &str) -> Result<String> {
            bail!("no cluster")
        }
        fn external_netns(&self) -> Result<Option<String>> {
            bail!("no cluster")
        }
    }
}
