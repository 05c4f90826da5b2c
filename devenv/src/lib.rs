//! Dev environments for metallb-rs, as a library behind `cargo xtask
//! dev-env`: the lab (network namespaces, an API server, node agents) and
//! kind (Docker containers as nodes). Both hand the e2e suites one
//! [`cluster::Cluster`] handle.

pub mod cluster;
pub mod docker;
pub mod frr;
pub mod helm;
pub mod image;
pub mod interrupt;
pub mod kind;
pub mod lab;
pub mod prereq;
pub mod wait;

/// A current-thread tokio runtime for the synchronous entry points (the
/// `Cluster` handle, benchmarks) that make a few async calls.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context as _;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a tokio runtime")
}

/// The repository root: the parent of this crate's directory, which every
/// workspace crate shares (xtask, the Docker tests, the kind path's image
/// build all start from it).
pub fn project_root() -> std::path::PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}
