//! `cargo xtask ci`: the CI pipeline (ci/github/workflows/ci.yaml) run
//! here, every step that can run on this machine, with a summary. Unlike
//! `cargo xtask test` it goes on after a failure, so one run reports
//! everything; it fails when any step failed.

use crate::dev_env::docker_answers;
use crate::flags::{CiArgs, DevEnvArgs, E2eArgs, IpFamily, Provider};
use crate::test::{Outcome, Step, lab_e2e, lint_steps, test_steps};
use crate::tools;
use anyhow::{Result, bail};
use std::time::Instant;

/// One kind e2e job of the matrix: the cluster's families and the specs
/// it skips (ginkgo-style regex over full names, as upstream's CI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindJob {
    /// `--ip-family` of the cluster, as spelled on the command line.
    pub ip_family: &'static str,
    /// `--skip` of the e2e run.
    pub skip: &'static str,
}

/// The kind e2e matrix. The DevEnv suite checks the lab itself, and the
/// Helm suite installs the chart into a fresh lab of its own; the kind
/// jobs run layer 2 dev-envs, so BGP runs in the lab job (whose external
/// host is the FRR router the suite curls through); each family skips
/// the other families' specs. The workflow's matrix must equal this
/// (tested).
pub const KIND_MATRIX: [KindJob; 3] = [
    KindJob {
        ip_family: "ipv4",
        skip: "IPV6|DUALSTACK|DevEnv|BGP|Helm",
    },
    KindJob {
        ip_family: "ipv6",
        skip: "IPV4|DUALSTACK|DevEnv|BGP|Helm",
    },
    KindJob {
        ip_family: "dual",
        skip: "DevEnv|BGP|Helm",
    },
];

fn build_images() -> Result<Outcome> {
    if !docker_answers() {
        return Ok(Outcome::Skipped(
            "build-images: no Docker engine answers (`docker info` failed)".into(),
        ));
    }
    crate::build_images::run(&crate::flags::BuildImagesArgs {
        tag: "dev".into(),
        registry: devenv::image::DEFAULT_REGISTRY.into(),
        load_kind: None,
    })?;
    Ok(Outcome::Passed)
}

/// One matrix job: a kind cluster of its own, the suites, logs exported on
/// failure, the cluster removed whatever happened.
fn kind_job(job: KindJob) -> Result<Outcome> {
    if !devenv::kind::cli::available() || !docker_answers() {
        return Ok(Outcome::Skipped(format!(
            "kind e2e {}: needs the kind CLI and a Docker engine",
            job.ip_family
        )));
    }
    let name = format!("ci-{}", job.ip_family);
    let ip_family = match job.ip_family {
        "ipv4" => IpFamily::Ipv4,
        "ipv6" => IpFamily::Ipv6,
        _ => IpFamily::Dual,
    };
    let root = tools::project_root();
    let result = (|| {
        crate::dev_env::run(&DevEnvArgs {
            provider: Provider::Kind,
            name: Some(name.clone()),
            ip_family,
            no_build_images: true,
            ..DevEnvArgs::default()
        })?;
        crate::e2e::run(&E2eArgs {
            provider: Provider::Kind,
            name: Some(name.clone()),
            kubeconfig: None,
            focus: None,
            skip: Some(job.skip.into()),
            dry_run: false,
            list: false,
            upstream_map: false,
            junit: Some(root.join(format!("target/e2e-kind-{}.xml", job.ip_family))),
            allow_empty: false,
        })
    })();
    if result.is_err() {
        let dir = root.join(format!("target/kind-logs-{}", job.ip_family));
        if let Err(e) = devenv::kind::cli::run(&devenv::kind::cli::export_logs_args(&name, &dir)) {
            eprintln!("exporting kind logs: {e:#}");
        }
    }
    let cleanup = devenv::kind::down(&name);
    result?;
    cleanup?;
    Ok(Outcome::Passed)
}

/// Runs the pipeline's steps; prints one line per step and a summary.
pub fn run(args: &CiArgs) -> Result<()> {
    let mut steps = lint_steps();
    steps.extend(test_steps());
    steps.push(Step::new("build images", build_images));
    steps.push(Step::new("lab e2e", lab_e2e));
    if args.kind {
        for job in KIND_MATRIX {
            steps.push(Step::new(
                format!("kind e2e {}", job.ip_family),
                move || kind_job(job),
            ));
        }
    }
    let mut rows = Vec::new();
    for step in &steps {
        eprintln!("== {}", step.name);
        let started = Instant::now();
        let outcome = (step.run)();
        let secs = started.elapsed().as_secs_f64();
        let status = match &outcome {
            Ok(Outcome::Passed) => "passed".to_owned(),
            Ok(Outcome::Skipped(why)) => format!("skipped ({why})"),
            Err(e) => format!("FAILED: {e:#}"),
        };
        rows.push((step.name.clone(), status, secs, outcome.is_err()));
    }
    println!("\ncargo xtask ci:");
    for (name, status, secs, _) in &rows {
        println!("  {name:<28} {secs:>7.1}s  {status}");
    }
    if !args.kind {
        println!("  (kind e2e matrix not run: pass --kind where kind and Docker work)");
    }
    let skips = crate::test::recorded_skips();
    if !skips.is_empty() {
        println!(
            "  tests that skipped themselves:\n    {}",
            skips.join("\n    ")
        );
    }
    let failed: Vec<&str> = rows.iter().filter(|r| r.3).map(|r| r.0.as_str()).collect();
    if !failed.is_empty() {
        bail!("{} step(s) failed: {}", failed.len(), failed.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GitHub workflow runs the same kind matrix as `cargo xtask ci`.
    #[test]
    fn workflow_matrix_equals_the_ci_command() {
        let path = tools::project_root().join("ci/github/workflows/ci.yaml");
        let text = std::fs::read_to_string(&path).expect("workflow");
        let workflow: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
        let include = workflow["jobs"]["e2e-kind"]["strategy"]["matrix"]["include"]
            .as_sequence()
            .expect("jobs.e2e-kind.strategy.matrix.include");
        let jobs: Vec<(String, String)> = include
            .iter()
            .map(|j| {
                (
                    j["ip-family"].as_str().unwrap_or_default().to_owned(),
                    j["skip"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = KIND_MATRIX
            .iter()
            .map(|j| (j.ip_family.to_owned(), j.skip.to_owned()))
            .collect();
        assert_eq!(jobs, want);
    }

    #[test]
    fn every_job_skip_is_a_valid_regex_that_drops_devenv() {
        for job in KIND_MATRIX {
            let re = regex::Regex::new(job.skip).expect("regex");
            assert!(re.is_match("DevEnv should have every node Ready"));
        }
    }
}
