//! The report of one size, as `cargo xtask bench scale` prints it.

use super::traffic::{SETTLED_WRITES, STEADY_WINDOW};
use super::{Failover, KUBELET_WRITES_PER_NODE, Report, Size, rss_target_mib};

/// Prints `r`, each figure beside its baseline or target.
pub(super) fn print(r: &Report) {
    let Size { nodes, services } = r.size;
    println!(
        "scale: {services} services, {} nodes ({} real with speakers, {nodes} simulated)",
        nodes + r.rss.len().saturating_sub(1),
        r.rss.len().saturating_sub(1)
    );
    println!(
        "  API server accepted all (baseline)       {:>9.2}s",
        r.created.as_secs_f64()
    );
    println!(
        "  every service had its IP                 {:>9.2}s  ({:.2}x)",
        r.assigned.as_secs_f64(),
        r.assigned.as_secs_f64() / r.created.as_secs_f64().max(1e-9)
    );
    println!(
        "  the {:>5} won by real nodes announced   {:>9.2}s  ({:.2}x)",
        r.won_by_real,
        r.announced.as_secs_f64(),
        r.announced.as_secs_f64() / r.created.as_secs_f64().max(1e-9)
    );
    println!(
        "  speaker CPU per full pass                {:>9.3}s",
        r.pass_cpu
    );
    println!(
        "  speaker CPU per single-service change    {:>9.4}s",
        r.change_cpu
    );
    println!(
        "  writes settled after convergence          {:>8.1}s  (under {SETTLED_WRITES}/s per speaker; then {:?} measured)",
        r.settled.as_secs_f64(),
        STEADY_WINDOW
    );
    println!(
        "  API requests/s per speaker (steady)      {:>9.3}   ({:.2}x the kubelet's {KUBELET_WRITES_PER_NODE} writes/s per node)",
        r.requests_per_speaker,
        r.requests_per_speaker / KUBELET_WRITES_PER_NODE
    );
    println!(
        "    of which writes                        {:>9.3}   ({:.2}x)",
        r.writes_per_speaker,
        r.writes_per_speaker / KUBELET_WRITES_PER_NODE
    );
    for (resource, rate) in &r.writes_by_resource {
        println!("      {resource:<36} {rate:>9.3}");
    }
    println!(
        "  watch events/s per speaker (steady)      {:>9.1}",
        r.watch_events_per_speaker
    );
    if r.size.nodes > 0 {
        println!(
            "  simulated renewal rounds late (the simulation not keeping up): {} of {}",
            r.late_rounds.0, r.late_rounds.1
        );
    }
    match r.failover {
        Some(Failover {
            services,
            took: Some(t),
            ..
        }) => println!(
            "  failover (SIGKILL): its {services} services taken over by the other real nodes in {:.2}s",
            t.as_secs_f64()
        ),
        Some(Failover {
            services,
            moved,
            took: None,
            waited,
        }) => println!(
            "  failover (SIGKILL): only {moved} of its {services} services taken over by the other real nodes after {:.0}s",
            waited.as_secs_f64()
        ),
        None => println!(
            "  failover: no real node wins a service whose next winner is real (the simulated ones answer nothing)"
        ),
    }
    let target = rss_target_mib(r.size.services);
    println!(
        "  resident memory (target {target:.0} MiB each at {} services):",
        r.size.services
    );
    for (name, kib, anon) in &r.rss {
        let mib = *kib as f64 / 1024.0;
        println!(
            "    {name:<28} {mib:>7.1} MiB  ({:.2}x of target; anonymous {:.1} MiB, file-backed (binary, libraries) {:.1} MiB)",
            mib / target,
            *anon as f64 / 1024.0,
            kib.saturating_sub(*anon) as f64 / 1024.0
        );
    }
}
