//! Helpers shared by the subcommands: the project root and running
//! commands with each argument passed as one value (never a shell string).

use anyhow::{Context, Result, bail};
use std::path::PathBuf;

/// The repository root (the parent of this crate's directory).
pub fn project_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}

/// Runs `program args...` in the project root, streaming its output, and
/// fails naming the command when it exits non-zero.
pub fn run(program: &str, args: &[&str]) -> Result<()> {
    run_with_env(program, args, &[])
}

/// [`run`] with `env` added to the command's environment.
pub fn run_with_env(program: &str, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Result<()> {
    let shown = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("$ {shown}");
    let mut cmd = duct::cmd(program, args).unchecked();
    for (key, value) in env {
        cmd = cmd.env(key, value);
    }
    let status = cmd
        .run()
        .with_context(|| format!("could not start `{shown}`: is {program} installed?"))?
        .status;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}
