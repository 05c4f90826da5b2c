//! UPDATE throughput: every [`Announcer`] in turn announcing the same
//! /32s to the router of a [`Testbed`], timed as the router sees them.

use super::{
    ANNOUNCE_BIN, Announcer, FIRST_PREFIX, Run, Testbed, p50, prefixes, rate, ratio, schedule,
};
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// What the throughput runs measured.
#[derive(Debug, Clone, Default)]
pub struct Throughput {
    /// Prefixes per run.
    pub prefixes: usize,
    /// Runs per announcer, in run order.
    pub runs: BTreeMap<Announcer, Vec<Run>>,
    /// Mean time between two polls of the router.
    pub poll_interval: Duration,
}

/// `runs` rounds of every [`Announcer`] announcing `count` /32s in a
/// [`Testbed`] (removed afterwards); `bin_dir` holds `bgp-announce`.
/// Prints the figures.
pub fn throughput(bin_dir: &Path, runs: usize, count: usize) -> Result<Throughput> {
    let list = prefixes(FIRST_PREFIX, count)?;
    let announce = bin_dir.join(ANNOUNCE_BIN);
    if !announce.is_file() {
        bail!(
            "{} is missing: build the devenv binaries",
            announce.display()
        );
    }
    let mut bed = Testbed::create()?;
    let mut out = Throughput {
        prefixes: count,
        ..Throughput::default()
    };
    for (i, who) in schedule(runs).into_iter().enumerate() {
        let r = bed.run(who, bin_dir, &list)?;
        eprintln!(
            "bgp throughput run {}/{}: {}: Established after {:.1?}, {count} prefixes {:.1?} later",
            i + 1,
            runs * Announcer::ALL.len(),
            who.label(),
            r.start_to_established,
            r.established_to_all
        );
        out.runs.entry(who).or_default().push(r);
    }
    out.poll_interval = bed.poll_interval();
    drop(bed);
    print_throughput(&out);
    Ok(out)
}

/// Prints `t`: each announcer's medians, and ours against FRR's.
fn print_throughput(t: &Throughput) {
    let runs = t.runs.values().map(Vec::len).max().unwrap_or(0);
    println!(
        "bgp: {} /32s to an FRR 8.4 bgpd over a veth, iBGP ({runs} run(s) each, alternating; router polled every ~{:.1?}):",
        t.prefixes, t.poll_interval
    );
    println!(
        "  {:<36} {:>16} {:>16} {:>14}",
        "announcer", "Est.->all p50", "start->all p50", "prefixes/s"
    );
    let p = |who: Announcer| -> (Duration, Duration) {
        let v = t.runs.get(&who).map(Vec::as_slice).unwrap_or_default();
        let est: Vec<Duration> = v.iter().map(|r| r.established_to_all).collect();
        let start: Vec<Duration> = v.iter().map(Run::start_to_all).collect();
        (p50(&est), p50(&start))
    };
    for who in Announcer::ALL {
        let (est, start) = p(who);
        println!(
            "  {:<36} {:>14.1}ms {:>14.1}ms {:>14.0}",
            who.label(),
            est.as_secs_f64() * 1e3,
            start.as_secs_f64() * 1e3,
            rate(t.prefixes, est)
        );
    }
    let (ours_est, ours_start) = p(Announcer::MetallbRs);
    for base in [Announcer::Frr, Announcer::FrrNoCoalesce] {
        let (est, start) = p(base);
        println!(
            "  ratio ours/{}: Established->all {:.2}x, start->all {:.2}x",
            match base {
                Announcer::FrrNoCoalesce => "FRR coalesce-time 0",
                _ => "FRR",
            },
            ratio(ours_est, est),
            ratio(ours_start, start)
        );
    }
}
