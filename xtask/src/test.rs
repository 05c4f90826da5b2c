//! `cargo xtask test`: the README's test command. Runs what CI runs, in
//! order, and stops at the first failure.

use crate::codegen;
use crate::flags::{CheckArgs, TestArgs};
use crate::tools;
use anyhow::Result;

/// The lab e2e run on a lab of its own ("ci"), removed afterwards whatever
/// the outcome; skipped with the reason where the lab cannot run.
fn lab_e2e() -> Result<()> {
    if let Err(e) = devenv::lab::netns::require_privileges() {
        println!("skipped: lab e2e ({e})");
        return Ok(());
    }
    let args = crate::flags::E2eArgs {
        provider: crate::flags::Provider::Lab,
        name: "ci".into(),
        kubeconfig: None,
        focus: None,
        skip: None,
        dry_run: false,
        list: false,
        junit: Some(tools::project_root().join("target/e2e-junit.xml")),
    };
    let result = crate::e2e::run(&args);
    let cleanup = devenv::lab::cluster::down("ci");
    result?;
    cleanup?;
    Ok(())
}

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
    // The cargo-fuzz targets (ARP, NDP parsers) live in a workspace of
    // their own; fuzzing needs nightly, building them does not.
    tools::run(
        "cargo",
        &[
            "check",
            "--manifest-path",
            "fuzz/Cargo.toml",
            "--target-dir",
            "target/fuzz-check",
        ],
    )?;
    let check = CheckArgs { check: true };
    codegen::gen_crds(&check)?;
    codegen::gen_manifests(&check)?;
    if !args.no_e2e {
        lab_e2e()?;
    }
    println!("cargo xtask test: all checks passed");
    Ok(())
}
