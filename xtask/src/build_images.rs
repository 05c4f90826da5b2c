//! `cargo xtask build-images`: the static binary and its FROM-scratch
//! image, built through the Docker API (`devenv::image`), optionally
//! loaded into a kind cluster.

use crate::flags::BuildImagesArgs;
use crate::tools;
use anyhow::{Context, Result};
use std::time::Instant;

/// Builds (and loads) the image; prints its name, ID and size.
pub fn run(args: &BuildImagesArgs) -> Result<()> {
    let started = Instant::now();
    let reference = devenv::image::reference(&args.registry, &args.tag);
    let built = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a tokio runtime")?
        .block_on(devenv::image::build_from_source(
            &tools::project_root(),
            &reference,
        ))?;
    println!(
        "built {} ({}) in {:.0}s: {:.1} MiB",
        built.reference,
        built.id,
        started.elapsed().as_secs_f64(),
        built.size_bytes as f64 / (1024.0 * 1024.0)
    );
    if let Some(cluster) = &args.load_kind {
        devenv::image::load_into_kind(cluster, &built.reference)?;
        println!("loaded {} into kind cluster {cluster}", built.reference);
    }
    Ok(())
}
