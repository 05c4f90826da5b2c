//! Where a lab keeps its files: below every module that starts a part of
//! it (cluster, routers, FRR), so each finds the lab's directory without
//! importing the others.

use std::path::PathBuf;

/// Where lab `name` keeps kubeconfig, logs and pid files.
pub fn lab_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join("metallb-rs-lab").join(name)
}
