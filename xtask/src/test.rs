//! `cargo xtask test`: the README's test command. Runs what CI runs, in
//! order, and stops at the first failure.

use crate::codegen;
use crate::flags::{CheckArgs, TestArgs};
use crate::tools;
use anyhow::Result;

/// Runs formatting and lint checks, every unit and integration test, and
/// the generated-file drift checks.
pub fn run(args: &TestArgs) -> Result<()> {
    if !args.no_lint {
        tools::run("cargo", &["fmt", "--all", "--", "--check"])?;
        tools::run(
            "cargo",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        )?;
    }
    tools::run("cargo", &["test", "--workspace", "--all-targets"])?;
    tools::run("cargo", &["test", "--workspace", "--doc"])?;
    let check = CheckArgs { check: true };
    codegen::gen_crds(&check)?;
    codegen::gen_manifests(&check)?;
    println!("cargo xtask test: all checks passed");
    Ok(())
}
