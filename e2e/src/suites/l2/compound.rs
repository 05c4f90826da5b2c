//! `L2` specs of one failure on top of another, where the specs of a
//! single failure ([`super::failover`]) saw nothing wrong: a speaker that
//! hangs (SIGSTOP, its node stays Ready) while another restarts, and the
//! last speaker cut off from the API server after the others left. Both
//! once silenced addresses: the restarted speaker elected the hung one
//! again (two of six addresses silent for 40 s), the last speaker gave
//! its addresses up 14 s into the cut (all six silent for 6 s).
//!
//! Both watch six services (dual-stack where the cluster has both
//! families) from the external host and bound how long any address goes
//! unanswered ([`Window::longest_silence`]).

use super::failover::{FAILOVER_BOUND, busiest, expect_taken_over, failover_services};
use super::watch::Watch;
use super::{WAIT, nodes};
use crate::prober::Window;
use crate::{Ctx, Spec, metallb};
use anyhow::{Context, Result, ensure};
use devenv::cluster::StopSignal;
use devenv::wait::eventually;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Services watched: with six on three nodes, every node is likely to
/// announce some, and the hung or cut-off speaker holds several.
const SERVICES: usize = 6;
/// The longest silent stretch an address meant to be answered may show:
/// five rounds of answers late for their round on a loaded machine, far
/// below any failover.
const PROBE_NOISE: Duration = Duration::from_millis(500);

/// How long the hung speaker is watched before the second speaker
/// restarts: its failover and more.
const HUNG: Duration = Duration::from_secs(12);
/// From this long after the restart every address is answered: the
/// restarted speaker has by then seen the hung one's lease unrenewed for
/// longer than its period (15 s) and half a second.
const RESTART_SETTLED: Duration = Duration::from_secs(20);
/// ...until this long after it.
const AFTER_RESTART: Duration = Duration::from_secs(40);
/// What the restart itself may take on top (the lab waits up to 5 s for
/// the stopped speaker to say goodbye); the watch covers it.
const RESTART_SLACK: Duration = Duration::from_secs(10);

/// How long after the two speakers leave the last one is cut off.
const DEPARTED: Duration = Duration::from_secs(15);
/// How long the last speaker is cut off from the API server.
const CUT: Duration = Duration::from_secs(20);
/// How long the addresses are watched after the API path is back.
const AFTER_CUT: Duration = Duration::from_secs(5);

/// The suite's specs of compound failures.
pub(super) fn specs() -> Vec<Spec> {
    vec![
        Spec::new(
            "L2",
            "should answer every address of six services when a hung speaker's node stays Ready and another speaker restarts: a hung speaker is not elected again by a restarted speaker",
            &["IPV4"],
            hung_speaker,
        ),
        Spec::new(
            "L2",
            "should keep answering every address while the last speaker is cut off from the API server: departed speakers do not silence the last one",
            &["IPV4"],
            departed_speakers,
        ),
    ]
}

/// Fails unless `w`'s address went unanswered for no longer than
/// [`PROBE_NOISE`] at a time; `during` says when the window was taken.
fn expect_answered(watch: &Watch, w: &Window, during: &str) -> Result<()> {
    let silence = w.longest_silence();
    ensure!(
        silence.length <= PROBE_NOISE,
        "{} went unanswered for {:?} from {:?} into the watch ({during}), more than {PROBE_NOISE:?} of probe noise: {}",
        w.target,
        silence.length,
        silence.from,
        w.describe(&|m| watch.name(m))
    );
    Ok(())
}

/// Positive control: `node` is Ready - its node agent runs on, only its
/// speaker hangs.
fn expect_ready(ctx: &Ctx, node: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(ctx.client()?);
    let ready = ctx
        .block_on(nodes.get(node))?
        .status
        .and_then(|s| s.conditions)
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    ensure!(
        ready,
        "{node} is not Ready while only its speaker hangs: the spec needs a hung speaker on a Ready node"
    );
    Ok(())
}

/// The three nodes the specs need, or a skip.
fn three_nodes(ctx: &Ctx) -> Result<Vec<String>> {
    let all = nodes(ctx);
    if all.len() < 3 {
        return Err(crate::skip(format!(
            "the spec needs three nodes, the cluster has {}",
            all.len()
        )));
    }
    Ok(all)
}

fn hung_speaker(ctx: &Ctx) -> Result<()> {
    let all = three_nodes(ctx)?;
    let (_config, services) = failover_services(ctx, SERVICES)?;
    let ips: Vec<IpAddr> = services.concat();
    let watch = Watch::new(ctx, &ips, "eth0")?;
    let before = watch.owners()?;
    let (hung, held) = busiest(&before).context("no address announced")?;
    eprintln!(
        "e2e: pausing {hung}'s speaker (SIGSTOP), which announces {held} of {} addresses",
        ips.len()
    );
    ctx.cluster().stop_speaker(&hung, StopSignal::Pause)?;
    // The speaker restarted second, once its restart began.
    let mut restarted: Option<String> = None;
    let result = (|| -> Result<()> {
        // The others take the hung speaker's addresses over in time and
        // keep their own.
        let mut holders = before.clone();
        let mut takers = BTreeMap::new();
        for w in watch.windows(HUNG)? {
            eprintln!(
                "e2e: {} while {hung}'s speaker hangs: {}",
                w.target,
                w.describe(&|m| watch.name(m))
            );
            let owner = &before[&w.target];
            if *owner == hung {
                let taker = expect_taken_over(&watch, &w, &hung)
                    .with_context(|| format!("{hung}'s speaker hung (SIGSTOP), its node Ready"))?;
                takers.insert(w.target, watch.name(taker));
            } else {
                w.expect_only(watch.mac_of(owner)?, &|m| watch.name(m))
                    .with_context(|| format!("while {hung}'s speaker hangs"))?;
            }
        }
        expect_ready(ctx, &hung)?;
        holders.extend(takers.clone());
        // Restart the node that took most of them over: the addresses a
        // restarted speaker could hand back to the hung one are its own.
        let (second, _) = busiest(&takers).context("nobody took the hung speaker's addresses")?;
        let third = all
            .iter()
            .find(|n| **n != hung && **n != second)
            .context("no third node")?;
        eprintln!(
            "e2e: restarting {second}'s speaker {HUNG:?} after {hung}'s hung; {third} keeps running"
        );
        let start = Instant::now();
        let (windows, started) = std::thread::scope(|s| {
            let watching = s.spawn(|| watch.windows(AFTER_RESTART + RESTART_SLACK));
            restarted = Some(second.clone());
            let started = ctx
                .cluster()
                .stop_speaker(&second, StopSignal::Term)
                .and_then(|()| ctx.cluster().start_speaker(&second))
                .map(|()| start.elapsed());
            let windows = watching
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (windows, started)
        });
        // Offsets in the windows count from the SIGTERM (give or take the
        // prober's start); the restart is when the new speaker runs.
        let started = started.with_context(|| format!("restarting {second}'s speaker"))?;
        let settled = started + RESTART_SETTLED;
        for w in windows? {
            eprintln!(
                "e2e: {} from {second}'s restart (started at {started:?}) on, {hung}'s speaker hung: {}",
                w.target,
                w.describe(&|m| watch.name(m))
            );
            ensure!(
                started + AFTER_RESTART <= w.length(),
                "{second}'s speaker took {started:?} to restart: the watch of {:?} ends before {AFTER_RESTART:?} after it",
                w.length()
            );
            let holder = &holders[&w.target];
            if holder == third {
                // Neither hung nor restarted: the address stays answered
                // throughout.
                expect_answered(
                    &watch,
                    &w,
                    &format!(
                        "held by {third} while {second}'s speaker restarted at {started:?}, {hung}'s hung"
                    ),
                )?;
            }
            // The restarted speaker's own addresses may move away and back
            // at its restart; by now every address is answered.
            expect_answered(
                &watch,
                &w.since(settled),
                &format!(
                    "from {RESTART_SETTLED:?} after {second}'s speaker restarted at {started:?}, held by {holder} before, {hung}'s speaker hung"
                ),
            )?;
        }
        Ok(())
    })();
    let resumed = ctx.cluster().resume_speaker(&hung);
    let running = restarted.map_or(Ok(()), |n| ctx.cluster().start_speaker(&n));
    result?;
    resumed.with_context(|| format!("resuming {hung}'s speaker"))?;
    running?;
    eventually(
        WAIT,
        &format!("every address back on its node after {hung}'s speaker resumed"),
        || Ok((watch.owners()? == before).then_some(())),
    )
}

fn departed_speakers(ctx: &Ctx) -> Result<()> {
    let all = three_nodes(ctx)?;
    let (_config, services) = failover_services(ctx, SERVICES)?;
    let ips: Vec<IpAddr> = services.concat();
    let watch = Watch::new(ctx, &ips, "eth0")?;
    let before = watch.owners()?;
    // The last one: the node announcing the fewest addresses, so most of
    // them move to it.
    let last = all
        .iter()
        .min_by_key(|n| before.values().filter(|o| o == n).count())
        .context("no node")?
        .clone();
    let departed: Vec<&String> = all.iter().filter(|n| **n != last).take(2).collect();
    let gone = format!("{} and {}", departed[0], departed[1]);
    let last_mac = watch.mac_of(&last)?;
    let mut stopped = Vec::new();
    let mut cut = false;
    let result = (|| -> Result<()> {
        eprintln!("e2e: stopping the speakers of {gone} (SIGTERM); {last}'s stays");
        for n in &departed {
            ctx.cluster().stop_speaker(n, StopSignal::Term)?;
            stopped.push(*n);
        }
        // Positive control: the last speaker took every address.
        for w in watch.windows(DEPARTED)? {
            let seen = w.describe(&|m| watch.name(m));
            eprintln!("e2e: {} after {gone} left: {seen}", w.target);
            ensure!(
                w.since(FAILOVER_BOUND).only(last_mac),
                "{} should be answered by {last} alone from {FAILOVER_BOUND:?} after {gone} left: {seen}",
                w.target
            );
        }
        eprintln!("e2e: cutting {last} off the API server for {CUT:?}");
        ctx.cluster().set_api_reachable(&last, false)?;
        cut = true;
        let start = Instant::now();
        let (windows, control, restored) = std::thread::scope(|s| {
            let watching = s.spawn(|| watch.windows(CUT + AFTER_CUT));
            std::thread::sleep(CUT.saturating_sub(start.elapsed()));
            // Positive control: the lease was not renewed during the cut.
            let control = metallb::presence_age(ctx, &last).and_then(|age| {
                ensure!(
                    age.is_some_and(|a| a + Duration::from_secs(1) >= start.elapsed()),
                    "{last}'s presence lease was renewed during its {CUT:?} cut from the API server (age {age:?}): the cut did not hold"
                );
                Ok(())
            });
            let restored = ctx.cluster().set_api_reachable(&last, true);
            let at = start.elapsed();
            let windows = watching
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (windows, control, restored.map(|()| at))
        });
        cut = restored.is_err();
        let restored = restored?;
        control?;
        for w in windows? {
            eprintln!(
                "e2e: {} while {last} is cut off from the API server (restored at {restored:?}), {gone} gone: {}",
                w.target,
                w.describe(&|m| watch.name(m))
            );
            let during = format!(
                "{last} cut off from the API server until {restored:?}, the speakers of {gone} stopped {DEPARTED:?} before"
            );
            w.expect_only(last_mac, &|m| watch.name(m))
                .with_context(|| during.clone())?;
            expect_answered(&watch, &w, &during)?;
        }
        Ok(())
    })();
    let restored = if cut {
        ctx.cluster().set_api_reachable(&last, true)
    } else {
        Ok(())
    };
    // Every one, even when one fails.
    let started: Vec<Result<()>> = stopped
        .iter()
        .map(|n| ctx.cluster().start_speaker(n))
        .collect();
    result?;
    restored?;
    started.into_iter().collect::<Result<()>>()?;
    eventually(
        WAIT,
        &format!("every address back on its node after {gone} restarted"),
        || Ok((watch.owners()? == before).then_some(())),
    )
}
