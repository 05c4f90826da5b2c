//! `L2` clock skew spec: speakers whose wall clocks are 30 s ahead of and
//! behind the others'. Lease renewals are judged on each speaker's own
//! monotonic clock (docs/src/differences-full.md, Clock skew), so
//! the skewed node keeps its addresses while it runs and loses them on
//! time when it is killed; a renewTime compared with the reader's clock
//! would keep a dead node ahead of the others for 30 s.
//!
//! The lab runs a static binary (no faketime): the speakers are started
//! with metallb-rs's wall-clock test hook, which shifts the times they
//! write (lease renewTime, event timestamps).

use super::failover::{expect_taken_over, failover_service};
use super::watch::{HOLD, Watch};
use crate::{Ctx, Spec};
use anyhow::{Context, Result};
use devenv::cluster::StopSignal;
use std::time::Duration;

/// How far the skewed speakers' clocks are off, in seconds.
const SKEW_SECS: i64 = 30;
/// How long the skewed node is watched while healthy: a slow renewal
/// period and more, and many gossip rounds.
const HEALTHY: Duration =
    metallb_rs::speaker::presence::SLOW_RENEW.saturating_add(Duration::from_secs(5));
/// The window watched from the kill on.
const AFTER_KILL: Duration = Duration::from_secs(12);

/// The suite's skew spec.
pub(super) fn specs() -> Vec<Spec> {
    vec![Spec::new(
        "L2",
        "should keep a clock-skewed speaker's addresses while it runs and move them on time when it is killed (clock skew 30 s ahead and behind)",
        &["IPV4"],
        skew,
    )]
}

/// Restarts `node`'s speaker (SIGTERM, then start) with its clock
/// `offset` seconds off, or without offset when `None`.
fn restart(ctx: &Ctx, node: &str, offset: Option<i64>) -> Result<()> {
    ctx.cluster().stop_speaker(node, StopSignal::Term)?;
    match offset {
        None => ctx.cluster().start_speaker(node),
        Some(o) => {
            if !ctx.cluster().start_speaker_with_clock_offset(node, o)? {
                return Err(crate::skip(
                    "this cluster cannot offset a speaker's wall clock",
                ));
            }
            Ok(())
        }
    }
}

fn skew(ctx: &Ctx) -> Result<()> {
    let (_config, ips) = failover_service(ctx)?;
    let watch = Watch::new(ctx, &ips, "eth0")?;
    let leader = watch.settled()?;
    let behind = ctx
        .cluster()
        .nodes()
        .into_iter()
        .map(|n| n.name)
        .find(|n| *n != leader)
        .context("the spec needs two nodes")?;
    let mut killed = false;
    let result = (|| -> Result<()> {
        restart(ctx, &leader, Some(SKEW_SECS))?;
        restart(ctx, &behind, Some(-SKEW_SECS))?;
        eprintln!("e2e: {leader}'s clock {SKEW_SECS} s ahead, {behind}'s {SKEW_SECS} s behind");
        // Election does not depend on clocks: the address comes back.
        watch
            .wait_only(&leader)
            .with_context(|| format!("{leader} answering again with its clock ahead"))?;
        let leader_mac = watch.mac_of(&leader)?;
        for w in watch.windows(HEALTHY)? {
            eprintln!(
                "e2e: {} while {leader} runs {SKEW_SECS} s ahead: {}",
                w.target,
                w.describe(&|m| watch.name(m))
            );
            w.expect_only(leader_mac, &|m| watch.name(m))
                .with_context(|| format!("{leader} healthy with its clock ahead"))?;
        }
        ctx.cluster().stop_speaker(&leader, StopSignal::Kill)?;
        killed = true;
        // The failover bound (6 s) is far below the 30 s skew.
        for w in watch.windows(AFTER_KILL)? {
            eprintln!(
                "e2e: {} after {leader} was killed: {}",
                w.target,
                w.describe(&|m| watch.name(m))
            );
            expect_taken_over(&watch, &w, &leader).with_context(|| {
                format!("after killing {leader}, whose clock is {SKEW_SECS} s ahead")
            })?;
        }
        Ok(())
    })();
    // Back to unskewed speakers, also on failure.
    let restored_leader = if killed {
        ctx.cluster().start_speaker(&leader)
    } else {
        restart(ctx, &leader, None)
    };
    let restored_behind = restart(ctx, &behind, None);
    result?;
    restored_leader?;
    restored_behind?;
    watch
        .wait_only(&leader)
        .context("after the speakers restarted without skew")?;
    // Nothing else moves once settled.
    for w in watch.windows(HOLD)? {
        w.expect_only(watch.mac_of(&leader)?, &|m| watch.name(m))?;
    }
    Ok(())
}
