//! `metallb-sim`: runs the simulator (`cargo xtask sim` builds and runs
//! it in release). Exits 1 when an invariant broke.

use clap::Parser;

fn main() -> anyhow::Result<std::process::ExitCode> {
    let args = metallb_sim::cli::Args::parse();
    Ok(if metallb_sim::cli::run(&args)? {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}
