//! `cargo xtask sim`: the layer 2 failover simulator (crate
//! `metallb-sim`), built in release and run with the flags given. The
//! simulator lives in its own crate; this only passes the flags on.

use crate::flags::SimArgs;
use crate::tools;
use anyhow::Result;

/// Builds and runs `metallb-sim` with the flags given: the simulator
/// parses them itself (one definition of each flag, its help included).
pub fn run(args: &SimArgs) -> Result<()> {
    let mut argv: Vec<&str> = vec!["run", "--quiet", "-p", "metallb-sim"];
    if !args.debug {
        argv.push("--release");
    }
    argv.push("--");
    argv.extend(args.args.iter().map(String::as_str));
    tools::cargo(&argv)
}
