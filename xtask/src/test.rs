//! `cargo xtask test`: the README's test command. Runs what CI runs, in
//! order, and stops at the first failure. The steps are shared with
//! `cargo xtask ci`, which runs them all and prints a summary.

use crate::codegen;
use crate::flags::{CheckArgs, E2eArgs, Provider, TestArgs};
use crate::tools;
use anyhow::{Context, Result, bail};
use std::path::PathBuf;

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

/// Where the tests append the skips they record (`devenv::prereq`).
fn skip_log() -> PathBuf {
    tools::project_root().join("target/test-skips.log")
}

/// The workspace's unit and integration tests (every target), with the
/// skip log named so every skipped test is listed at the end.
fn workspace_tests() -> Result<Outcome> {
    let log = skip_log();
    match std::fs::remove_file(&log) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("removing {}", log.display()));
        }
        _ => {}
    }
    tools::cargo_with_env(
        &["test", "--workspace", "--all-targets"],
        &[(devenv::prereq::SKIP_LOG_ENV, log.as_os_str())],
    )?;
    Ok(Outcome::Passed)
}

/// The lines of the skip log the last test run left, if any.
pub fn recorded_skips() -> Vec<String> {
    std::fs::read_to_string(skip_log())
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Under CI (`CI=true`), fails before anything runs when a suite that
/// must run here would be skipped, naming what is missing (see
/// `devenv::prereq`); elsewhere a missing piece only skips the tests that
/// need it.
pub fn ci_preflight(needs: &[devenv::prereq::Need]) -> Result<()> {
    if !devenv::prereq::ci() {
        return Ok(());
    }
    let missing = devenv::prereq::missing(needs);
    if !missing.is_empty() {
        bail!(
            "CI=true: every suite must run here, but this machine cannot run them all:\n  {}",
            missing.join("\n  ")
        );
    }
    Ok(())
}

/// The lab e2e run on a lab of its own ("ci"), removed afterwards whatever
/// the outcome; skipped with the reason where the lab cannot run (a
/// failure under CI).
pub fn lab_e2e() -> Result<Outcome> {
    if let Err(e) = devenv::lab::netns::require_privileges() {
        if devenv::prereq::ci() {
            bail!("CI=true: the lab e2e must run here: {e}");
        }
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
        upstream_map: false,
        junit: Some(tools::project_root().join("target/e2e-junit.xml")),
        allow_empty: false,
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
        Step::new("unit + integration tests", workspace_tests),
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
        Step::new("Helm chart: lint, render drift check", helm_chart),
        Step::new("book: structure, field reference, mdBook build", || {
            crate::docs::run()?;
            Ok(Outcome::Passed)
        }),
        Step::new("generated files up to date", || {
            let check = CheckArgs { check: true };
            codegen::gen_crds(&check)?;
            codegen::gen_manifests(&check)?;
            Ok(Outcome::Passed)
        }),
    ]
}

/// The chart through Helm's own library: lint, and rendered with default
/// values (and with the Prometheus objects on) the same objects as the
/// generated manifests (`charts/tests/render_check.py`).
fn helm_chart() -> Result<Outcome> {
    if let Some(why) = devenv::prereq::missing(&[devenv::prereq::Need::Helm]).pop() {
        if devenv::prereq::ci() {
            bail!("CI=true: {why}");
        }
        return Ok(Outcome::Skipped(why));
    }
    let script = tools::project_root().join("charts/tests/render_check.py");
    tools::run_program("python3", &[&script.to_string_lossy()])
        .context("the Helm chart drifted from the manifests or failed lint: see above")?;
    Ok(Outcome::Passed)
}

/// Runs formatting and lint checks, every unit and integration test, the
/// generated-file drift checks and the lab e2e; stops at the first failure.
pub fn run(args: &TestArgs) -> Result<()> {
    let mut needs = devenv::prereq::TESTS.to_vec();
    if !args.no_lint {
        needs.push(devenv::prereq::Need::Lint);
    }
    if !args.no_e2e {
        needs.extend_from_slice(devenv::prereq::LAB_E2E);
    }
    crate::setup::ensure(&needs)?;
    ci_preflight(&needs)?;
    let mut steps = Vec::new();
    if !args.no_lint {
        steps.extend(lint_steps());
    }
    steps.extend(test_steps());
    if !args.no_e2e {
        steps.push(Step::new("lab e2e", lab_e2e));
    }
    let mut skipped = Vec::new();
    for step in &steps {
        if let Outcome::Skipped(why) = (step.run)()? {
            println!("skipped: {why}");
            skipped.push(why);
        }
    }
    skipped.extend(recorded_skips());
    if skipped.is_empty() {
        println!("cargo xtask test: all checks passed");
    } else {
        println!(
            "cargo xtask test: all checks that ran passed; {} skipped:\n  {}",
            skipped.len(),
            skipped.join("\n  ")
        );
    }
    Ok(())
}
