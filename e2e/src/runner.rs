//! Selecting, listing and running specs; the JUnit report.

use crate::{CtxFactory, Filter, Skip, Spec};
use anyhow::{Context, Result, bail};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::collections::HashSet;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How to run: what `cargo xtask e2e` flags turn into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `--focus REGEX`: run only specs whose full name matches.
    pub focus: Option<String>,
    /// `--skip REGEX`: never run specs whose full name matches.
    pub skip: Option<String>,
    /// `--dry-run` / `--list`: print the selected names, run nothing.
    pub dry_run: bool,
    /// `--junit FILE`: write a JUnit XML report there.
    pub junit: Option<PathBuf>,
    /// How many specs run at once (default 1: suites share one cluster).
    pub test_threads: usize,
    /// `--allow-empty`: selecting no spec is not an error (without it, a
    /// focus that matches nothing fails the run, as ginkgo's
    /// `--fail-on-empty`: a typo must not pass as a green run).
    pub allow_empty: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            focus: None,
            skip: None,
            dry_run: false,
            junit: None,
            test_threads: 1,
            allow_empty: false,
        }
    }
}

/// How one spec ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It passed.
    Passed,
    /// It failed (error, panic, or failed namespace setup/cleanup): the message.
    Failed(String),
    /// It skipped itself ([`crate::skip`]): the reason.
    Skipped(String),
}

/// The result of one spec that ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestResult {
    /// Full name.
    pub name: String,
    /// The spec's `describe` (the JUnit classname).
    pub describe: String,
    /// How it ended.
    pub outcome: Outcome,
    /// How long it took, namespace setup and cleanup included.
    pub duration: Duration,
}

/// What [`run`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Specs given.
    pub total: usize,
    /// Specs the filter selected.
    pub selected: usize,
    /// Selected specs that passed.
    pub passed: usize,
    /// Selected specs that failed.
    pub failed: usize,
    /// Selected specs that skipped themselves.
    pub skipped: usize,
    /// Whether this was a dry run (nothing ran).
    pub dry_run: bool,
    /// One entry per spec that ran, in selection order (empty for a dry run).
    pub results: Vec<TestResult>,
}

impl Summary {
    /// No spec failed.
    pub fn success(&self) -> bool {
        self.failed == 0
    }
}

/// Selects `specs` by `opts.focus` / `opts.skip`, then either lists them
/// (`opts.dry_run`: one full name per line, then `N of M tests selected`) or
/// runs them through libtest-mimic, each with a [`crate::Ctx`] from the
/// factory, and writes the JUnit report to `opts.junit` if set.
///
/// `ctx_factory` is called only when something will run, so listing needs
/// no cluster. Spec failures are in the [`Summary`], not an `Err`; errors are
/// for bad flags, duplicate names, no cluster, or an unwritable report.
pub fn run(
    specs: Vec<Spec>,
    opts: &Options,
    ctx_factory: impl FnOnce() -> Result<CtxFactory>,
) -> Result<Summary> {
    let filter = Filter::new(opts.focus.as_deref(), opts.skip.as_deref())?;
    check_unique(&specs)?;
    let total = specs.len();
    let selected: Vec<Spec> = specs
        .into_iter()
        .filter(|s| filter.matches(&s.full_name()))
        .collect();

    if opts.dry_run {
        let mut list = Vec::new();
        write_list(&mut list, &selected, total)?;
        print!("{}", String::from_utf8_lossy(&list));
        return Ok(Summary {
            total,
            selected: selected.len(),
            dry_run: true,
            ..Summary::default()
        });
    }
    println!("{} of {total} tests selected", selected.len());
    if selected.is_empty() && !opts.allow_empty {
        bail!(
            "no test matches {}: check the regex, or pass --allow-empty if running nothing is intended",
            filter_description(opts)
        );
    }

    let results = if selected.is_empty() {
        Vec::new()
    } else {
        let factory = Arc::new(ctx_factory()?);
        factory.install_interrupt_handler()?;
        let results = run_selected(&selected, &factory, opts.test_threads);
        let leftovers = factory.live().names();
        if !leftovers.is_empty() {
            eprintln!(
                "e2e: could not delete namespaces (delete by hand): {}",
                leftovers.join(" ")
            );
        }
        results
    };

    let count = |f: fn(&Outcome) -> bool| results.iter().filter(|r| f(&r.outcome)).count();
    let summary = Summary {
        total,
        selected: selected.len(),
        passed: count(|o| matches!(o, Outcome::Passed)),
        failed: count(|o| matches!(o, Outcome::Failed(_))),
        skipped: count(|o| matches!(o, Outcome::Skipped(_))),
        dry_run: false,
        results,
    };
    print_skips(&summary);
    if let Some(path) = &opts.junit {
        write_junit(&summary, path)?;
    }
    Ok(summary)
}

fn filter_description(opts: &Options) -> String {
    match (&opts.focus, &opts.skip) {
        (Some(f), Some(s)) => format!("--focus {f:?} with --skip {s:?}"),
        (Some(f), None) => format!("--focus {f:?}"),
        (None, Some(s)) => format!("--skip {s:?}"),
        (None, None) => "the selection".to_owned(),
    }
}

/// Every skipped spec with its reason, once more after the run, so a
/// skip is never only a line lost in the middle of the output.
fn print_skips(summary: &Summary) {
    let skipped: Vec<String> = summary
        .results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Skipped(why) => Some(format!("  {}: {why}", r.name)),
            _ => None,
        })
        .collect();
    if !skipped.is_empty() {
        println!("{} test(s) skipped:\n{}", skipped.len(), skipped.join("\n"));
    }
}

fn check_unique(specs: &[Spec]) -> Result<()> {
    let mut seen = HashSet::new();
    for spec in specs {
        let name = spec.full_name();
        if !seen.insert(name.clone()) {
            bail!("two specs have the same full name {name:?}");
        }
    }
    Ok(())
}

fn write_list(out: &mut dyn Write, selected: &[Spec], total: usize) -> Result<()> {
    for spec in selected {
        writeln!(out, "{}", spec.full_name())?;
    }
    writeln!(out, "{} of {total} tests selected", selected.len())?;
    Ok(())
}

fn run_selected(selected: &[Spec], factory: &Arc<CtxFactory>, threads: usize) -> Vec<TestResult> {
    let slots: Arc<Mutex<Vec<Option<TestResult>>>> =
        Arc::new(Mutex::new(vec![None; selected.len()]));
    let trials = selected
        .iter()
        .enumerate()
        .map(|(i, &spec)| {
            let factory = factory.clone();
            let slots = slots.clone();
            Trial::ignorable_test(spec.full_name(), move || {
                let result = run_one(spec, &factory);
                let completion = match &result.outcome {
                    Outcome::Passed => Ok(Completion::Completed),
                    Outcome::Skipped(reason) => Ok(Completion::ignored_with(reason)),
                    Outcome::Failed(msg) => Err(Failed::from(msg)),
                };
                slots.lock().unwrap_or_else(PoisonError::into_inner)[i] = Some(result);
                completion
            })
        })
        .collect();
    let args = Arguments {
        test_threads: Some(threads.max(1)),
        // Keep the nested harness's report out of `cargo test`'s output.
        #[cfg(test)]
        logfile: Some(tests::harness_log()),
        ..Arguments::default()
    };
    // Outcomes are read from the slots; libtest-mimic only drives and prints.
    let _conclusion = libtest_mimic::run(&args, trials);
    #[cfg(test)]
    if let Some(log) = &args.logfile {
        let _ = std::fs::remove_file(log);
    }

    let slots = std::mem::take(&mut *slots.lock().unwrap_or_else(PoisonError::into_inner));
    slots
        .into_iter()
        .zip(selected)
        .map(|(slot, spec)| {
            slot.unwrap_or_else(|| TestResult {
                name: spec.full_name(),
                describe: spec.describe.to_owned(),
                outcome: Outcome::Failed("the harness did not run this test".into()),
                duration: Duration::ZERO,
            })
        })
        .collect()
}

fn run_one(spec: Spec, factory: &CtxFactory) -> TestResult {
    let name = spec.full_name();
    let start = Instant::now();
    let outcome = match factory.create(&name) {
        Err(e) => Outcome::Failed(format!("{e:#}")),
        Ok(ctx) => {
            let ran = catch_unwind(AssertUnwindSafe(|| (spec.run)(&ctx)));
            let cleanup = ctx.finish();
            let mut outcome = match ran {
                Ok(Ok(())) => Outcome::Passed,
                Ok(Err(e)) => match e.downcast_ref::<Skip>() {
                    Some(Skip(reason)) => Outcome::Skipped(reason.clone()),
                    None => Outcome::Failed(format!("{e:#}")),
                },
                Err(payload) => Outcome::Failed(format!("panicked: {}", panic_message(&*payload))),
            };
            if let Err(e) = cleanup {
                outcome = match outcome {
                    Outcome::Failed(msg) => Outcome::Failed(format!("{msg}\nand then: {e:#}")),
                    _ => Outcome::Failed(format!("{e:#}")),
                };
            }
            outcome
        }
    };
    TestResult {
        name,
        describe: spec.describe.to_owned(),
        outcome,
        duration: start.elapsed(),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic payload)".into())
}

/// Writes `summary` as JUnit XML to `path`: one testsuite `metallb-rs e2e`,
/// one testcase per spec that ran (name = full name, classname = describe).
pub fn write_junit(summary: &Summary, path: &Path) -> Result<()> {
    let mut suite = TestSuite::new("metallb-rs e2e");
    let mut total = Duration::ZERO;
    for r in &summary.results {
        let status = match &r.outcome {
            Outcome::Passed => TestCaseStatus::success(),
            Outcome::Failed(msg) => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(first_line(msg)).set_description(msg.as_str());
                s
            }
            Outcome::Skipped(reason) => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(reason.as_str());
                s
            }
        };
        let mut case = TestCase::new(r.name.as_str(), status);
        case.set_classname(r.describe.as_str()).set_time(r.duration);
        suite.add_test_case(case);
        total += r.duration;
    }
    suite.set_time(total);
    let mut report = Report::new("metallb-rs e2e");
    report.set_time(total).add_test_suite(suite);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let xml = report.to_string().context("serializing the JUnit report")?;
    std::fs::write(path, xml).with_context(|| format!("writing {}", path.display()))
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::NoCluster;
    use crate::{Ctx, FakeNamespaces};
    use std::sync::atomic::{AtomicUsize, Ordering};

    static RAN_IN_DRY_RUN: AtomicUsize = AtomicUsize::new(0);
    static HARNESS_LOGS: AtomicUsize = AtomicUsize::new(0);

    /// Where a nested libtest-mimic run writes its report during unit tests.
    pub(super) fn harness_log() -> String {
        let n = HARNESS_LOGS.fetch_add(1, Ordering::SeqCst);
        std::env::temp_dir()
            .join(format!("e2e-harness-{}-{n}.log", std::process::id()))
            .display()
            .to_string()
    }

    fn must_not_run(_: &Ctx) -> Result<()> {
        RAN_IN_DRY_RUN.fetch_add(1, Ordering::SeqCst);
        bail!("a dry run ran me")
    }

    fn pass(ctx: &Ctx) -> Result<()> {
        anyhow::ensure!(ctx.namespace().starts_with("e2e-"));
        Ok(())
    }

    fn fail(_: &Ctx) -> Result<()> {
        Err(anyhow::anyhow!("the VIP did not answer ARP")).context("checking L2")
    }

    fn boom(_: &Ctx) -> Result<()> {
        panic!("speaker vanished")
    }

    fn skips(_: &Ctx) -> Result<()> {
        Err(crate::skip("cluster has no IPv6"))
    }

    fn fake_env() -> (Arc<FakeNamespaces>, impl FnOnce() -> Result<CtxFactory>) {
        let fake = Arc::new(FakeNamespaces::new());
        let ns = fake.clone();
        (fake, move || {
            CtxFactory::with_namespaces(Arc::new(NoCluster), ns)
        })
    }

    fn no_env() -> Result<CtxFactory> {
        bail!("no cluster should be needed")
    }

    fn temp_path(name: &str) -> PathBuf {
        std::env::temp_dir()
            .join(format!("e2e-harness-{}-{name}", std::process::id()))
            .join("junit.xml")
    }

    #[test]
    fn dry_run_lists_and_counts_without_running() {
        let specs = vec![
            Spec::new(
                "L2",
                "should work for ExternalTrafficPolicy=Cluster",
                &["IPV4"],
                must_not_run,
            ),
            Spec::new(
                "L2",
                "should work for ExternalTrafficPolicy=Local",
                &["IPV6"],
                must_not_run,
            ),
            Spec::new("BGP", "should announce", &["IPV4"], must_not_run),
        ];
        let opts = Options {
            focus: Some("L2".into()),
            skip: Some("IPV6".into()),
            dry_run: true,
            ..Options::default()
        };
        let summary = run(specs.clone(), &opts, no_env).expect("dry run");
        assert_eq!((summary.selected, summary.total), (1, 3));
        assert!(summary.dry_run && summary.results.is_empty() && summary.success());
        assert_eq!(RAN_IN_DRY_RUN.load(Ordering::SeqCst), 0);

        let mut out = Vec::new();
        let filter = Filter::new(opts.focus.as_deref(), opts.skip.as_deref()).expect("filter");
        let selected: Vec<Spec> = specs
            .into_iter()
            .filter(|s| filter.matches(&s.full_name()))
            .collect();
        write_list(&mut out, &selected, 3).expect("list");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "L2 should work for ExternalTrafficPolicy=Cluster [IPV4]\n1 of 3 tests selected\n"
        );
    }

    #[test]
    fn pass_and_fail_make_a_junit_report() {
        let (fake, env) = fake_env();
        let specs = vec![
            Spec::new("L2", "should work", &["IPV4"], pass),
            Spec::new("L2", "should fail", &["IPV4"], fail),
            Spec::new("BGP", "is not selected", &[], must_not_run),
        ];
        let junit = temp_path("pass-fail");
        let opts = Options {
            focus: Some("^L2 ".into()),
            junit: Some(junit.clone()),
            ..Options::default()
        };
        let summary = run(specs, &opts, env).expect("run");
        assert_eq!(
            (
                summary.total,
                summary.selected,
                summary.passed,
                summary.failed
            ),
            (3, 2, 1, 1)
        );
        assert!(!summary.success());
        let failure = &summary.results[1].outcome;
        assert!(
            matches!(failure, Outcome::Failed(m) if m.contains("checking L2") && m.contains("did not answer ARP")),
            "{failure:?}"
        );

        let xml = std::fs::read_to_string(&junit).expect("junit written");
        let report = Report::deserialize_from_str(&xml).expect("valid junit");
        assert_eq!((report.tests, report.failures), (2, 1));
        let suite = &report.test_suites[0];
        let names: Vec<&str> = suite.test_cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["L2 should work [IPV4]", "L2 should fail [IPV4]"]);
        assert!(matches!(
            suite.test_cases[0].status,
            TestCaseStatus::Success { .. }
        ));
        match &suite.test_cases[1].status {
            TestCaseStatus::NonSuccess { kind, message, .. } => {
                assert_eq!(*kind, NonSuccessKind::Failure);
                let message = message.as_ref().map(|m| m.as_str()).unwrap_or_default();
                assert!(message.contains("checking L2"), "{message}");
            }
            other => panic!("expected a failure, got {other:?}"),
        }
        assert_eq!(
            suite.test_cases[1].classname.as_ref().map(|c| c.as_str()),
            Some("L2")
        );
        assert!(suite.test_cases[0].time.is_some());

        // Both namespaces are gone, the failing test's included.
        assert_eq!(fake.created().len(), 2);
        assert_eq!(fake.deleted(), fake.created());
        assert!(fake.existing().is_empty());
        let _ = std::fs::remove_dir_all(junit.parent().expect("dir"));
    }

    #[test]
    fn panicking_and_skipping_specs_are_reported_and_cleaned_up() {
        let (fake, env) = fake_env();
        let specs = vec![
            Spec::new("L2", "panics", &[], boom),
            Spec::new("L2", "needs IPv6", &["IPV6"], skips),
        ];
        let junit = temp_path("panic-skip");
        let opts = Options {
            junit: Some(junit.clone()),
            test_threads: 2,
            ..Options::default()
        };
        let summary = run(specs, &opts, env).expect("run");
        assert_eq!((summary.passed, summary.failed, summary.skipped), (0, 1, 1));
        assert_eq!(
            summary.results[0].outcome,
            Outcome::Failed("panicked: speaker vanished".into())
        );
        assert_eq!(
            summary.results[1].outcome,
            Outcome::Skipped("cluster has no IPv6".into())
        );
        assert_eq!(fake.created().len(), 2);
        assert!(fake.existing().is_empty(), "{:?}", fake.existing());

        let report = Report::deserialize_from_str(&std::fs::read_to_string(&junit).expect("junit"))
            .expect("valid junit");
        assert_eq!((report.tests, report.failures, report.skipped), (2, 1, 1));
        let _ = std::fs::remove_dir_all(junit.parent().expect("dir"));
    }

    #[test]
    fn failed_cleanup_fails_a_passing_test() {
        let fake = Arc::new(FakeNamespaces::new());
        fake.fail_delete(true);
        let ns = fake.clone();
        let specs = vec![Spec::new("L2", "passes", &[], pass)];
        let summary = run(specs, &Options::default(), move || {
            CtxFactory::with_namespaces(Arc::new(NoCluster), ns)
        })
        .expect("run");
        assert_eq!(summary.failed, 1);
        assert!(
            matches!(&summary.results[0].outcome, Outcome::Failed(m) if m.contains("cleaning up")),
            "{:?}",
            summary.results[0].outcome
        );
    }

    #[test]
    fn nothing_selected_fails_unless_allowed_and_needs_no_cluster() {
        let specs = vec![Spec::new("BGP", "x", &[], must_not_run)];
        let opts = Options {
            focus: Some("L2".into()),
            ..Options::default()
        };
        let err = run(specs.clone(), &opts, no_env).expect_err("a focus matching nothing");
        assert!(
            err.to_string().contains("no test matches --focus \"L2\""),
            "{err}"
        );
        let allowed = Options {
            allow_empty: true,
            ..opts.clone()
        };
        let summary = run(specs.clone(), &allowed, no_env).expect("run");
        assert_eq!((summary.selected, summary.total), (0, 1));
        assert!(summary.success());
        // Listing nothing is not an error.
        let list = Options {
            dry_run: true,
            ..opts
        };
        assert_eq!(run(specs, &list, no_env).expect("list").selected, 0);
    }

    #[test]
    fn bad_regex_and_duplicate_names_are_errors() {
        let err = run(
            vec![],
            &Options {
                skip: Some("(".into()),
                ..Options::default()
            },
            no_env,
        )
        .expect_err("bad regex");
        assert!(
            format!("{err:#}").contains("invalid --skip regex \"(\""),
            "{err:#}"
        );

        let dup = vec![
            Spec::new("L2", "x", &["IPV4"], must_not_run),
            Spec::new("L2", "x", &["IPV4"], must_not_run),
        ];
        let err = run(dup, &Options::default(), no_env).expect_err("duplicate");
        assert!(err.to_string().contains("L2 x [IPV4]"), "{err}");
    }

    #[test]
    fn missing_cluster_is_an_error_when_something_runs() {
        let specs = vec![Spec::new("L2", "x", &[], must_not_run)];
        let err = run(specs, &Options::default(), no_env).expect_err("no cluster");
        assert!(err.to_string().contains("no cluster"), "{err}");
    }
}
