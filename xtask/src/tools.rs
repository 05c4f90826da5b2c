//! Helpers shared by the subcommands: the project root and running
//! commands with each argument passed as one value (never a shell string).

use anyhow::{Context, Result, bail};
use std::path::PathBuf;

pub use devenv::project_root;

/// Cargo's target directory: `CARGO_TARGET_DIR`, or `target` in the
/// project root.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("target"))
}

/// Runs `cargo args...` in the project root, streaming its output, and
/// fails naming the command when it exits non-zero. Without the variables
/// `cargo run` set for xtask itself (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`,
/// ...): build scripts such as ring's track them, so a nested build that
/// inherited them would rebuild everything above ring, and the next plain
/// `cargo build` or `cargo xtask` would rebuild it all again.
pub fn cargo(args: &[&str]) -> Result<()> {
    cargo_with_env(args, &[])
}

/// [`cargo`] with `env` added to the command's environment.
pub fn cargo_with_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Result<()> {
    let mut command = duct::cmd("cargo", args);
    for (name, _) in std::env::vars_os() {
        if name
            .to_str()
            .is_some_and(devenv::image::inherited_from_cargo_run)
        {
            command = command.env_remove(name);
        }
    }
    for (key, value) in env {
        command = command.env(key, value);
    }
    run("cargo", args, command)
}

/// Runs `program args...` in the project root, streaming its output, and
/// fails naming the command when it exits non-zero.
pub fn run_program(program: &str, args: &[&str]) -> Result<()> {
    run_program_env(program, args, &[])
}

/// [`run_program`] with `env` added to the program's environment.
pub fn run_program_env(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<()> {
    let mut command = duct::cmd(program, args);
    for (key, value) in env {
        command = command.env(key, value);
    }
    run(program, args, command)
}

/// Runs `command` (`program args...`), naming it in what it prints.
fn run(program: &str, args: &[&str], command: duct::Expression) -> Result<()> {
    let shown = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("$ {shown}");
    let status = command
        .unchecked()
        .run()
        .with_context(|| format!("could not start `{shown}`: is {program} installed?"))?
        .status;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}
