//! Helpers shared by the lab integration tests.

use std::path::{Path, PathBuf};

/// A directory holding the binaries the lab runs, under their names: this
/// package's own, and `lab-apiserver` from the `lab-apiserver` package,
/// which cargo builds beside the test executables in workspace runs
/// (`cargo test --workspace`, `cargo xtask test`).
pub fn bin_dir(tmp: &Path) -> PathBuf {
    let profile_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_owned()))
        .expect("the test executable lives in <target>/<profile>/deps");
    let apiserver = profile_dir.join("lab-apiserver");
    assert!(
        apiserver.exists(),
        "{} is missing: run `cargo build -p lab-apiserver` first (workspace test runs build it)",
        apiserver.display()
    );
    for (name, path) in [
        ("lab-apiserver", apiserver.as_path()),
        ("lab-agent", Path::new(env!("CARGO_BIN_EXE_lab-agent"))),
        ("lab-forward", Path::new(env!("CARGO_BIN_EXE_lab-forward"))),
        (
            "lab-controller-manager",
            Path::new(env!("CARGO_BIN_EXE_lab-controller-manager")),
        ),
    ] {
        std::os::unix::fs::symlink(path, tmp.join(name)).expect("symlink");
    }
    tmp.to_owned()
}
