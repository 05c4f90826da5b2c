//! Upstream's graceful restart specs (`bgptests/bgp.go` "GracefulRestart,
//! when speakers restart" and "FRR configure peers with GracefulRestart
//! and validate external containers are paired with nodes") against
//! every router of the family, all of which run `bgp graceful-restart`.
//!
//! With `enableGracefulRestart` every router shows each node's session
//! offering it (`remoteGrMode` `Restart`). Every speaker stopped by
//! SIGTERM for longer than the hold time drops its sessions without a
//! Cease: each router keeps the service's path through every node as
//! stale the whole time, and through the speakers' return until their
//! End-of-RIB has come and gone - the path is never withdrawn. Without
//! it, the paths go as soon as the speakers stop.
//!
//! A path that goes anyway fails the spec with what each router says of
//! its sessions (`show bgp neighbor <ip> json`: why the last one ended,
//! the last NOTIFICATION), so a failure explains itself.

use super::routers::{self, Passwords};
use super::{HOLD_TIME, WAIT, all_hops, host_route, pool_and_advertisement, pool_of};
use crate::metallb::Config;
use crate::suites::l2::{backends, nodes};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, bail, ensure};
use devenv::cluster::StopSignal;
use devenv::frr::BgpRouter;
use devenv::wait::{INTERVAL, eventually};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long the speakers stay stopped: past the hold time, so a path
/// still there was kept by graceful restart, not by a router that had
/// not noticed yet.
const STOPPED_FOR: Duration = Duration::from_secs(HOLD_TIME.as_secs() + 3);
/// After every session is back: how long the path must stay, covering
/// the speakers' End-of-RIB and the router dropping what is still stale.
const SETTLED_FOR: Duration = Duration::from_secs(5);

/// The suite's specs, named as upstream's tables and entries.
pub fn specs() -> Vec<Spec> {
    let mut specs = Vec::new();
    specs.extend(family_table!(
        "GracefulRestart, when speakers restart and when GR enabled",
        "dataplane should keep working",
        keeps_working
    ));
    specs.extend(family_table!(
        "GracefulRestart, when speakers restart when GR disabled",
        "dataplane should have a downtime",
        has_downtime
    ));
    specs.extend(family_table!(
        "FRR configure peers with GracefulRestart",
        "and validate external containers are paired with nodes",
        paired_with_restart_mode
    ));
    specs
}

/// BGPPeers to every router of the family (with `enableGracefulRestart`
/// when `graceful_restart`), the pool and an advertisement, backends on
/// every node and a service announced through every node at every
/// router: the configuration, the routers and the service's address.
fn announced(
    ctx: &Ctx,
    v6: bool,
    graceful_restart: bool,
) -> Result<(Config<'_>, Vec<BgpRouter>, IpAddr)> {
    let extra = if graceful_restart {
        json!({ "enableGracefulRestart": true })
    } else {
        json!({})
    };
    let (mut config, routers, _) = routers::peered_with(ctx, v6, Passwords::OneSecret, &extra)?;
    pool_and_advertisement(&mut config, &[pool_of(v6)], json!({}))?;
    backends(ctx, &[])?;
    let ip = super::service(ctx, "web", v6, json!({}), None)?;
    routers::advertised(ctx, &routers, ip)?;
    Ok((config, routers, ip))
}

/// Upstream's "paired with nodes" with graceful restart: every router's
/// session with every node is up and the node offered graceful restart.
fn paired_with_restart_mode(ctx: &Ctx, v6: bool) -> Result<()> {
    let (_config, routers, _) = routers::peered_with(
        ctx,
        v6,
        Passwords::OneSecret,
        &json!({ "enableGracefulRestart": true }),
    )?;
    let hops = all_hops(ctx, v6);
    routers::wait_sessions(ctx, &routers, &hops, WAIT)?;
    restart_mode(ctx, &routers, &hops)
}

/// Waits until every router reports `remoteGrMode` `Restart` for every
/// node of `hops`.
fn restart_mode(ctx: &Ctx, routers: &[BgpRouter], hops: &BTreeSet<IpAddr>) -> Result<()> {
    for r in routers {
        eventually(
            WAIT,
            &format!("every node offering graceful restart at {}", r.name),
            || {
                let neighbors = ctx.cluster().bgp_neighbors_on(&r.name)?;
                let wrong: Vec<String> = hops
                    .iter()
                    .filter_map(|a| {
                        let mode = neighbors.get(a).and_then(|n| n.remote_gr_mode.as_deref());
                        (mode != Some("Restart")).then(|| format!("{a}: {mode:?}"))
                    })
                    .collect();
                ensure!(wrong.is_empty(), "remoteGrMode {}", wrong.join(", "));
                Ok(Some(()))
            },
        )?;
    }
    Ok(())
}

/// Stops every speaker (SIGTERM), runs `during`, then starts them again,
/// whatever `during` returned.
fn with_speakers_stopped<T>(ctx: &Ctx, during: impl FnOnce() -> Result<T>) -> Result<T> {
    let nodes = nodes(ctx);
    let mut stopped = Vec::new();
    let mut result = Err(anyhow::anyhow!("no speaker was stopped"));
    for node in &nodes {
        if let Err(e) = ctx.cluster().stop_speaker(node, StopSignal::Term) {
            result = Err(e.context(format!("stopping the speaker on {node}")));
            break;
        }
        stopped.push(node);
    }
    if stopped.len() == nodes.len() {
        result = during();
    }
    for node in stopped {
        let started = ctx.cluster().start_speaker(node);
        if result.is_ok() {
            started.with_context(|| format!("starting the speaker on {node}"))?;
        }
    }
    result
}

/// Upstream's "dataplane should keep working": with graceful restart,
/// every speaker stopped for [`STOPPED_FOR`] and started again, every
/// router keeps the service's path through every node all along (stale
/// while the speakers are away) and until [`SETTLED_FOR`] after every
/// session is back.
fn keeps_working(ctx: &Ctx, v6: bool) -> Result<()> {
    let (_config, routers, ip) = announced(ctx, v6, true)?;
    let hops = all_hops(ctx, v6);
    restart_mode(ctx, &routers, &hops)?;
    let before = established_counts(ctx, &routers)?;
    let mut went_down = BTreeSet::new();
    let mut stale = BTreeSet::new();
    with_speakers_stopped(ctx, || {
        let until = Instant::now() + STOPPED_FOR;
        while Instant::now() < until {
            let seen = kept(ctx, &routers, ip, &hops)?;
            stale.extend(seen.stale);
            went_down.extend(seen.down);
            std::thread::sleep(INTERVAL);
        }
        Ok(())
    })?;
    // The speakers did stop: each router saw each session go, and kept
    // the paths as stale.
    for r in &routers {
        for a in &hops {
            let key = (r.name.clone(), *a);
            ensure!(
                went_down.contains(&key),
                "{} never saw its session with {a} go down while the speakers were stopped",
                r.name
            );
            ensure!(
                stale.contains(&key),
                "{} never marked the path through {a} stale while the speakers were stopped",
                r.name
            );
        }
    }
    let started = Instant::now();
    let back_by = started + WAIT;
    let mut settled_since: Option<Instant> = None;
    loop {
        kept(ctx, &routers, ip, &hops)?;
        let back = reestablished(ctx, &routers, &hops, &before)?;
        match (back.is_empty(), settled_since) {
            (true, Some(t)) if t.elapsed() >= SETTLED_FOR => break,
            (true, None) => {
                eprintln!(
                    "e2e: every router kept {ip} through every node, stale while the speakers were stopped ({STOPPED_FOR:?}); every session back {:?} after they started",
                    started.elapsed()
                );
                settled_since = Some(Instant::now());
            }
            (true, Some(_)) => {}
            (false, _) => {
                settled_since = None;
                if Instant::now() > back_by {
                    bail!(
                        "sessions not back {WAIT:?} after the speakers started: {}\n{}",
                        back.join("; "),
                        explain(ctx, &routers, &hops)
                    );
                }
            }
        }
        std::thread::sleep(INTERVAL);
    }
    routers::advertised(ctx, &routers, ip)
}

/// Upstream's "dataplane should have a downtime": without graceful
/// restart, stopped speakers' paths go at every router; they come back
/// with the speakers.
fn has_downtime(ctx: &Ctx, v6: bool) -> Result<()> {
    let (_config, routers, ip) = announced(ctx, v6, false)?;
    with_speakers_stopped(ctx, || {
        routers::wait_route(ctx, &routers, host_route(ip), &BTreeSet::new(), WAIT)
    })?;
    routers::advertised(ctx, &routers, ip)
}

/// What one look at the routers saw while their paths must stay.
#[derive(Default)]
struct Seen {
    /// (router, node) whose session was not Established.
    down: BTreeSet<(String, IpAddr)>,
    /// (router, node) whose path was stale.
    stale: BTreeSet<(String, IpAddr)>,
}

/// Checks that every router still has `ip`'s path through every node of
/// `hops`; fails naming what went, with the routers' own account.
fn kept(ctx: &Ctx, routers: &[BgpRouter], ip: IpAddr, hops: &BTreeSet<IpAddr>) -> Result<Seen> {
    let mut seen = Seen::default();
    let mut missing = Vec::new();
    for r in routers {
        let paths = routers::paths(ctx, r, host_route(ip))?;
        for a in hops {
            match paths.iter().find(|p| p.nexthops.contains(a)) {
                None => missing.push(format!("{} lost the path through {a}", r.name)),
                Some(p) if p.stale => {
                    seen.stale.insert((r.name.clone(), *a));
                }
                Some(_) => {}
            }
        }
        let up = routers::established(ctx, r)?;
        for a in hops.iter().filter(|a| !up.contains(a)) {
            seen.down.insert((r.name.clone(), *a));
        }
    }
    if !missing.is_empty() {
        bail!(
            "withdrawn with graceful restart: {}\n{}",
            missing.join("; "),
            explain(ctx, routers, hops)
        );
    }
    Ok(seen)
}

/// (router, node) -> sessions Established so far.
fn established_counts(ctx: &Ctx, routers: &[BgpRouter]) -> Result<BTreeMap<(String, IpAddr), u64>> {
    let mut out = BTreeMap::new();
    for r in routers {
        for (a, n) in ctx.cluster().bgp_neighbors_on(&r.name)? {
            out.insert((r.name.clone(), a), n.connections_established);
        }
    }
    Ok(out)
}

/// The sessions of `hops` not yet Established again since `before`.
fn reestablished(
    ctx: &Ctx,
    routers: &[BgpRouter],
    hops: &BTreeSet<IpAddr>,
    before: &BTreeMap<(String, IpAddr), u64>,
) -> Result<Vec<String>> {
    let mut waiting = Vec::new();
    for r in routers {
        let neighbors = ctx.cluster().bgp_neighbors_on(&r.name)?;
        for a in hops {
            let was = before.get(&(r.name.clone(), *a)).copied().unwrap_or(0);
            match neighbors.get(a) {
                // Once is a return; twice, a session that dropped again.
                Some(n) if n.connections_established > was + 1 => bail!(
                    "{} from {a}: {} sessions since the speakers stopped, one expected\n{}",
                    r.name,
                    n.connections_established - was,
                    explain(ctx, routers, hops)
                ),
                Some(n) if n.established() && n.connections_established > was => {}
                Some(n) => waiting.push(format!("{} from {a}: {}", r.name, n.state)),
                None => waiting.push(format!("{} from {a}: no neighbor", r.name)),
            }
        }
    }
    Ok(waiting)
}

/// What FRR says of a neighbor's last session end.
const WHY_FIELDS: &[&str] = &[
    "bgpState",
    "connectionsEstablished",
    "connectionsDropped",
    "lastResetDueTo",
    "lastResetCode",
    "lastErrorCodeSubcode",
    "lastNotificationReason",
    "lastNotificationHardReset",
    "lastShutdownDescription",
    "downLastResetReason",
];

/// Each router's account of its sessions with `hops`: why the last one
/// ended, the last NOTIFICATION, the graceful restart state.
fn explain(ctx: &Ctx, routers: &[BgpRouter], hops: &BTreeSet<IpAddr>) -> String {
    let mut out = Vec::new();
    for r in routers {
        for a in hops {
            let command = format!("show bgp neighbor {a} json");
            let text = match ctx.cluster().vtysh_on(&r.name, &command) {
                Ok(t) => t,
                Err(e) => {
                    out.push(format!("{} {a}: {e:#}", r.name));
                    continue;
                }
            };
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let n = v.get(a.to_string()).unwrap_or(&v);
            let mut fields: Vec<String> = WHY_FIELDS
                .iter()
                .filter_map(|k| Some(format!("{k}={}", n.get(*k)?)))
                .collect();
            if let Some(gr) = n.get("gracefulRestartInfo") {
                fields.push(format!("gracefulRestartInfo={gr}"));
            }
            out.push(format!("{} {a}: {}", r.name, fields.join(" ")));
        }
    }
    out.join("\n")
}
