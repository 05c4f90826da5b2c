//! `cargo xtask test`: the README's test command. Runs what CI runs, in
//! order, and stops at the first failure. The steps are shared with
//! `cargo xtask ci`, which runs them all and prints a summary.

use crate::codegen;
use crate::flags::{CheckArgs, E2eArgs, Provider, TestArgs};
use crate::tools;
use anyhow::Result;

/// How a step ended when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It ran and passed.
    Passed,
    /// It could not run here; the reason.
    Skipped(String),
}

/// One named check.
pub struct Step {
    /// Short name shown in logs and summaries.
    pub name: String,
    /// Runs it.
    pub run: Box<dyn Fn() -> Result<Outcome>>,
}

impl Step {
    /// A step named `name`.
    pub fn new(name: impl Into<String>, run: impl Fn() -> Result<Outcome> + 'static) -> Self {
        Self {
            name: name.into(),
            run: Box::new(run),
        }
    }
}

fn cargo(args: &'static [&'static str]) -> impl Fn() -> Result<Outcome> {
    move || {
        tools::cargo(args)?;
        Ok(Outcome::Passed)
    }
}

/// The lab e2e run on a lab of its own ("ci"), removed afterwards whatever
/// the outcome; skipped with the reason where the lab cannot run.
pub fn lab_e2e() -> Result<Outcome> {
    if let Err(e) = devenv::lab::netns::require_privileges() {
        return Ok(Outcome::Skipped(format!("lab e2e: {e}")));
    }
    let args = E2eArgs {
        provider: Provider::Lab,
        name: Some("ci".into()),
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
    Ok(Outcome::Passed)
}

/// Formatting and lint checks.
pub fn lint_steps() -> Vec<Step> {
    vec![
        Step::new("fmt", cargo(&["fmt", "--all", "--", "--check"])),
        Step::new(
            "clippy",
            cargo(&[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]),
        ),
    ]
}

/// Unit, integration and doc tests, the fuzz targets' build, drift checks.
pub fn test_steps() -> Vec<Step> {
    vec![
        Step::new(
            "unit + integration tests",
            cargo(&["test", "--workspace", "--all-targets"]),
        ),
        Step::new("doc tests", cargo(&["test", "--workspace", "--doc"])),
        // The cargo-fuzz targets live in a workspace of their own; fuzzing
        // needs nightly, building them does not.
        Step::new(
            "fuzz targets build",
            cargo(&[
                "check",
                "--manifest-path",
                "fuzz/Cargo.toml",
                "--target-dir",
                "target/fuzz-check",
            ]),
        ),
        Step::new("generated files up to date", || {
            let check = CheckArgs { check: true };
            codegen::gen_crds(&check)?;
            codegen::gen_manifests(&check)?;
            Ok(Outcome::Passed)
        }),
    ]
}

/// Runs formatting and lint checks, every unit and integration test, the
/// generated-file drift checks and the lab e2e; stops at the first failure.
pub fn run(args: &TestArgs) -> Result<()> {
    let mut steps = Vec::new();
    if !args.no_lint {
        steps.extend(lint_steps());
    }
    steps.extend(test_steps());
    if !args.no_e2e {
        steps.push(Step::new("lab e2e", lab_e2e));
    }
    for step in &steps {
        if let Outcome::Skipped(why) = (step.run)()? {
            println!("skipped: {why}");
        }
    }
    println!("cargo xtask test: all checks passed");
    Ok(())
}
