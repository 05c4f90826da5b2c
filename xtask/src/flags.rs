//! Every flag of every `cargo xtask` subcommand, in one place.

use clap::{Args, Parser, Subcommand};

/// Developer tasks for metallb-rs: code generation, tests, dev environments.
#[derive(Parser, Debug)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", version)]
pub struct Flags {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write manifests/crds/metallb.io_<plural>.yaml from the Rust API types
    GenCrds(CheckArgs),
    /// Write manifests/metallb-native.yaml (namespace, CRDs, RBAC, controller, speaker)
    GenManifests(CheckArgs),
    /// Run every check CI runs: fmt, clippy, unit and integration tests, drift checks
    Test(TestArgs),
}

/// Flags shared by the generators.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Write nothing; exit non-zero and name every file that differs from the generated output
    #[arg(long)]
    pub check: bool,
}

/// Flags of `cargo xtask test`.
#[derive(Args, Debug)]
pub struct TestArgs {
    /// Skip `cargo fmt --check` and clippy (run the tests and drift checks only)
    #[arg(long)]
    pub no_lint: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent_and_every_subcommand_has_help() {
        Flags::command().debug_assert();
        let cmd = Flags::command();
        for sub in cmd.get_subcommands() {
            let help = sub.clone().render_help().to_string();
            assert!(help.contains("--help"), "{}: {help}", sub.get_name());
            assert!(
                sub.get_about().is_some(),
                "{} has no description",
                sub.get_name()
            );
        }
    }
}
