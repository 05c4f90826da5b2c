//! `cargo xtask`: the project's only build tool. Parses flags, moves to the
//! repository root, and dispatches to one module per subcommand. Real work
//! lives in the library crates; this crate stays thin.

mod bench;
mod build_images;
mod ci;
mod codegen;
mod dev_env;
mod docs;
mod e2e;
mod flags;
mod setup;
mod sim;
mod test;
#[cfg(test)]
mod tidy;
mod tools;

use anyhow::Result;
use clap::Parser;
use flags::{Command, Flags};

fn main() -> Result<()> {
    let flags = Flags::parse();
    std::env::set_current_dir(tools::project_root())?;
    match flags.command {
        Command::GenCrds(args) => codegen::gen_crds(&args),
        Command::GenManifests(args) => codegen::gen_manifests(&args),
        Command::Docs => docs::run(),
        Command::Test(args) => test::run(&args),
        Command::DevEnv(args) => dev_env::run(&args),
        Command::DevEnvCleanup(args) => dev_env::cleanup(&args),
        Command::Lab(args) => dev_env::lab(&args),
        Command::E2e(args) => e2e::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Sim(args) => sim::run(&args),
        Command::BuildImages(args) => build_images::run(&args),
        Command::Ci(args) => ci::run(&args),
    }
}
