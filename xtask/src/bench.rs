//! `cargo xtask bench <target>`: benchmarks that print their figures next
//! to a baseline measured in the same run (never asserted: numbers vary by
//! machine; tests check behaviour).

use crate::flags::{BenchArgs, BenchTarget};
use crate::tools;
use anyhow::Result;

/// Runs the chosen benchmark.
pub fn run(args: &BenchArgs) -> Result<()> {
    match args.target {
        // The benchmark lives beside the allocator (metallb-rs/benches) and
        // runs with the optimised bench profile.
        BenchTarget::Allocator => tools::run(
            "cargo",
            &[
                "bench",
                "--quiet",
                "-p",
                "metallb-rs",
                "--bench",
                "allocator",
            ],
        ),
    }
}
