//! Upstream's BFD specs (`bgptests/bgp.go` "BFD", `metrics.go` "BFD
//! metrics from FRR") as the native speaker runs them: a BGPPeer names a
//! BFDProfile, the routers turn BFD on for the nodes' addresses
//! ([`RouterBfd`]), and every router of the family shows each node's BFD
//! session up with the speaker's timers, while every speaker's
//! `metallb_bfd_*` metrics show the sessions up with packets both ways.
//! Echo mode, which the native speaker does not implement, is refused.
//! When the routers turn BFD off, the speakers' metrics show their
//! sessions down.
//!
//! Beyond upstream, what BFD is for: a node's link cut ([`LinkCut`]) is
//! seen by the routers within about the detection time, and they drop
//! the node's routes at once - where without BFD they keep them until
//! the hold time runs out. The bound is generous (a loaded machine polls
//! late); the duration without BFD is not asserted, only that the routes
//! outlive the BFD bound.

mod router;

use super::routers::{self, Passwords, advertised};
use super::{WAIT, all_hops, host_route, node_addresses, pool_and_advertisement, pool_of};
use crate::external::speaker_metrics;
use crate::metallb::{self, Config};
use crate::suites::l2::{backends, nodes};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, bail, ensure};
use devenv::frr::BgpRouter;
use devenv::frr::bfd::BfdProfile;
use devenv::wait::{eventually, throughout};
use metallb_rs::api::v1beta1::ConfigurationResult;
use router::{LinkCut, RouterBfd};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The routers' own profile: FRR's defaults (300 ms, x3). Slower than
/// the custom speaker profile on purpose: the session runs at the
/// slower end, so a loaded machine does not flap it, while the router
/// still shows what the speaker asked for.
const ROUTER_PROFILE: &str = "e2e-bfd";
/// From a node's link cut to its routes gone at every router with BFD at
/// 300 ms x 3 (0.9 s to detect): generous, for a loaded machine.
const CUT_BOUND: Duration = Duration::from_secs(3);
/// How long a cut-off node's routes must stay without BFD: longer than
/// [`CUT_BOUND`], well inside the hold time (9 s, at least 6 s after the
/// last keepalive).
const KEPT_FOR: Duration = Duration::from_secs(3);
/// Upstream's `Consistently` after a configuration change: no session
/// may drop meanwhile.
const NO_FLAP_FOR: Duration = Duration::from_secs(10);

/// The suite's specs, named as upstream's table and entries.
pub fn specs() -> Vec<Spec> {
    macro_rules! entry {
        ($name:literal, $tag:literal, $body:expr) => {{
            fn run(ctx: &Ctx) -> Result<()> {
                $body(ctx)
            }
            Spec::new("BGP", $name, &[$tag], run)
        }};
    }
    vec![
        entry!(
            "BFD should work with the given bfd profile - default",
            "IPV4",
            |ctx| works(ctx, false, Profile::Default)
        ),
        entry!(
            "BFD should work with the given bfd profile - full params",
            "IPV4",
            |ctx| works(ctx, false, Profile::FullParams)
        ),
        entry!(
            "BFD should work with the given bfd profile - default",
            "IPV6",
            |ctx| works(ctx, true, Profile::Default)
        ),
        entry!(
            "BFD should work with the given bfd profile - full params",
            "IPV6",
            |ctx| works(ctx, true, Profile::FullParams)
        ),
        entry!("metrics BFD metrics from FRR - default", "IPV4", |ctx| {
            metrics_when_router_stops(ctx, false)
        }),
        entry!("metrics BFD metrics from FRR - default", "IPV6", |ctx| {
            metrics_when_router_stops(ctx, true)
        }),
        entry!(
            "BFD should refuse the given bfd profile - echo mode enabled",
            "IPV4",
            echo_refused
        ),
        entry!(
            "BFD should withdraw a cut-off node's routes within the detection time",
            "IPV4",
            |ctx| link_cut(ctx, false)
        ),
        entry!(
            "BFD should withdraw a cut-off node's routes within the detection time",
            "IPV6",
            |ctx| link_cut(ctx, true)
        ),
        entry!(
            "BFD should keep a cut-off node's routes until the hold time without a bfd profile",
            "IPV4",
            |ctx| link_cut_without_bfd(ctx, false)
        ),
    ]
}

/// Upstream's profile entries.
#[derive(Debug, Clone, Copy)]
enum Profile {
    /// No field set: 300 ms both ways, x3.
    Default,
    /// Every field, echo off.
    FullParams,
}

/// What the router must see of the speaker's timers: receive and
/// transmit interval, ms, and detect multiplier.
type Timers = (u64, u64, u64);

impl Profile {
    /// The speaker's BFDProfile: name, spec, and its timers as the router
    /// sees them.
    fn speaker(self) -> (&'static str, Value, Timers) {
        match self {
            Self::Default => ("bar", json!({}), (300, 300, 3)),
            Self::FullParams => (
                "full1",
                json!({
                    "receiveInterval": 60, "transmitInterval": 61, "echoInterval": 62,
                    "echoMode": false, "passiveMode": false, "minimumTtl": 254,
                }),
                (60, 61, 3),
            ),
        }
    }
}

/// Upstream's "should work with the given bfd profile": BGP and BFD up
/// between every node and every router of the family, the service
/// announced, the speaker's timers at the routers, the speakers' BFD
/// metrics, and no session dropping while another service is added.
fn works(ctx: &Ctx, v6: bool, profile: Profile) -> Result<()> {
    let (name, spec, want) = profile.speaker();
    let hops = all_hops(ctx, v6);
    let (_bfd, mut config, routers) = bfd_peered(ctx, v6, &hops, name, spec)?;
    pool_and_advertisement(&mut config, &[pool_of(v6)], json!({}))?;
    backends(ctx, &[])?;
    let ip = super::service(ctx, "web", v6, json!({}), None)?;
    routers::wait_sessions(ctx, &routers, &hops, WAIT)?;
    advertised(ctx, &routers, ip)?;
    router::wait_up(ctx, &routers, &hops, WAIT)?;
    timers_propagated(ctx, &routers, &hops, want)?;
    speakers_report_up(ctx, &routers, v6)?;
    let before = dropped(ctx, &routers)?;
    super::service(ctx, "web1", v6, json!({}), None)?;
    throughout(NO_FLAP_FOR, "no BGP session dropped", || {
        let now = dropped(ctx, &routers)?;
        let more: Vec<String> = now
            .iter()
            .filter(|(k, n)| before.get(*k).is_some_and(|b| *n > b))
            .map(|((r, a), n)| format!("{r} from {a}: {n} drops"))
            .collect();
        Ok((!more.is_empty()).then(|| more.join(", ")))
    })
}

/// BFD on at every router for `hops` (the routers' own profile), then
/// the four routers' peers naming the BFD profile `name`, created with
/// `spec`: where the specs here start. The routers' BFD comes first so
/// that it is dropped after the peers: no speaker sees its router's BFD
/// go away under a live BGPPeer.
fn bfd_peered<'a>(
    ctx: &'a Ctx,
    v6: bool,
    hops: &BTreeSet<IpAddr>,
    name: &str,
    spec: Value,
) -> Result<(RouterBfd<'a>, Config<'a>, Vec<BgpRouter>)> {
    let routers = routers::routers(ctx, v6)?;
    let bfd = RouterBfd::enable(ctx, &routers, &list(hops), &BfdProfile::new(ROUTER_PROFILE))?;
    let (mut config, routers, _) = routers::peered_with(
        ctx,
        v6,
        Passwords::OneSecret,
        &json!({ "bfdProfile": name }),
    )?;
    config.bfd_profile(name, spec)?;
    Ok((bfd, config, routers))
}

fn list(hops: &BTreeSet<IpAddr>) -> Vec<IpAddr> {
    hops.iter().copied().collect()
}

/// Upstream's `checkBFDConfigPropagated`: each router's session with
/// each node is up, multihop where the router is a hop away, and shows
/// the speaker's receive and transmit intervals and multiplier.
fn timers_propagated(
    ctx: &Ctx,
    routers: &[BgpRouter],
    hops: &BTreeSet<IpAddr>,
    want: Timers,
) -> Result<()> {
    for r in routers {
        eventually(
            WAIT,
            &format!("the speakers' BFD timers at {}", r.name),
            || {
                let sessions = router::peers(ctx, r)?;
                let mut wrong = Vec::new();
                for hop in hops {
                    let Some(s) = sessions.get(hop) else {
                        wrong.push(format!("{hop}: no session"));
                        continue;
                    };
                    let seen = (
                        s.remote_receive_interval_ms,
                        s.remote_transmit_interval_ms,
                        s.remote_detect_multiplier,
                    );
                    if !s.up() || seen != (Some(want.0), Some(want.1), Some(want.2)) {
                        wrong.push(format!("{hop}: {} with remote timers {seen:?}", s.status));
                    }
                    if s.multihop != r.multi_hop {
                        wrong.push(format!("{hop}: multihop {}", s.multihop));
                    }
                }
                ensure!(
                    wrong.is_empty(),
                    "want timers {want:?}: {}",
                    wrong.join("; ")
                );
                Ok(Some(()))
            },
        )?;
    }
    Ok(())
}

/// Upstream's "BFD metrics from FRR", from the native speaker: every
/// speaker's session with every router up, packets both ways, an up event.
fn speakers_report_up(ctx: &Ctx, routers: &[BgpRouter], v6: bool) -> Result<()> {
    for node in nodes(ctx) {
        for r in routers {
            eventually(
                WAIT,
                &format!("{node}'s BFD metrics for {}", r.name),
                || {
                    let text = speaker_metrics(ctx, &node)?;
                    match router::session_metrics_wrong(&text, r, v6) {
                        None => Ok(Some(())),
                        Some(wrong) => bail!("{wrong}"),
                    }
                },
            )?;
        }
    }
    Ok(())
}

/// Upstream's "BFD metrics from FRR": the speakers' BFD metrics with
/// the sessions up, then, once the routers turn BFD off, every speaker's
/// session with them not up and counted down at least once.
fn metrics_when_router_stops(ctx: &Ctx, v6: bool) -> Result<()> {
    let hops = all_hops(ctx, v6);
    let (bfd, mut config, routers) = bfd_peered(ctx, v6, &hops, "bar", json!({}))?;
    pool_and_advertisement(&mut config, &[pool_of(v6)], json!({}))?;
    backends(ctx, &[])?;
    let ip = super::service(ctx, "web", v6, json!({}), None)?;
    advertised(ctx, &routers, ip)?;
    router::wait_up(ctx, &routers, &hops, WAIT)?;
    speakers_report_up(ctx, &routers, v6)?;
    drop(bfd);
    for node in nodes(ctx) {
        for r in &routers {
            eventually(
                WAIT,
                &format!("{node}'s BFD session with {} down in its metrics", r.name),
                || {
                    let text = speaker_metrics(ctx, &node)?;
                    let up = router::speaker_sample(&text, "metallb_bfd_session_up", r, v6);
                    let down =
                        router::speaker_sample(&text, "metallb_bfd_session_down_events", r, v6);
                    if up == Some(0.0) && down.is_some_and(|d| d >= 1.0) {
                        Ok(Some(()))
                    } else {
                        bail!("session_up {up:?} session_down_events {down:?}")
                    }
                },
            )?;
        }
    }
    Ok(())
}

/// (router, node address) -> the router's count of dropped sessions.
fn dropped(ctx: &Ctx, routers: &[BgpRouter]) -> Result<BTreeMap<(String, IpAddr), u64>> {
    let mut out = BTreeMap::new();
    for r in routers {
        for (a, n) in ctx.cluster().bgp_neighbors_on(&r.name)? {
            out.insert((r.name.clone(), a), n.connections_dropped);
        }
    }
    Ok(out)
}

/// Upstream's "echo mode enabled" entry: the native speaker has no echo
/// function, so the profile is refused - by the webhook, or by every
/// speaker's ConfigurationState - with a message naming `echoMode`.
fn echo_refused(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    let spec = json!({
        "receiveInterval": 80, "transmitInterval": 81, "echoInterval": 82,
        "echoMode": true, "passiveMode": false, "minimumTtl": 254,
    });
    if let Err(e) = config.bfd_profile("echo", spec) {
        let message = format!("{e:#}");
        ensure!(
            message.contains("echoMode"),
            "the BFDProfile was refused without naming echoMode: {message}"
        );
        return Ok(());
    }
    let first: Vec<BgpRouter> = routers::routers(ctx, false)?.into_iter().take(1).collect();
    routers::add_peers(
        &mut config,
        &first,
        &[false],
        Passwords::OneSecret,
        &json!({ "bfdProfile": "echo" }),
    )?;
    eventually(
        WAIT,
        "every speaker's ConfigurationState Invalid naming echoMode",
        || {
            let mut wrong = Vec::new();
            for node in nodes(ctx) {
                let name = format!("speaker-{node}");
                match metallb::configuration_state(ctx, &name)? {
                    Some((ConfigurationResult::Invalid, summary))
                        if summary.contains("echoMode") => {}
                    other => wrong.push(format!("{name}: {other:?}")),
                }
            }
            ensure!(wrong.is_empty(), "{}", wrong.join("; "));
            Ok(Some(()))
        },
    )
}

/// The first node, its address of the family, and the other nodes'.
fn victim(ctx: &Ctx, v6: bool) -> Result<(String, IpAddr, BTreeSet<IpAddr>)> {
    let (node, addr) = node_addresses(ctx, v6)
        .first()
        .cloned()
        .context("no node")?;
    let rest = all_hops(ctx, v6)
        .into_iter()
        .filter(|a| *a != addr)
        .collect();
    Ok((node, addr, rest))
}

/// A node's link cut with BFD at 300 ms x 3 both ends: every router's
/// session with it goes down and its path is gone within [`CUT_BOUND`];
/// once the link is back, sessions and paths return.
fn link_cut(ctx: &Ctx, v6: bool) -> Result<()> {
    let hops = all_hops(ctx, v6);
    let fast = json!({ "receiveInterval": 300, "transmitInterval": 300, "detectMultiplier": 3 });
    let (_bfd, mut config, routers) = bfd_peered(ctx, v6, &hops, "fast", fast)?;
    pool_and_advertisement(&mut config, &[pool_of(v6)], json!({}))?;
    backends(ctx, &[])?;
    let ip = super::service(ctx, "web", v6, json!({}), None)?;
    advertised(ctx, &routers, ip)?;
    router::wait_up(ctx, &routers, &hops, WAIT)?;
    let (node, addr, rest) = victim(ctx, v6)?;
    let cut = LinkCut::cut(ctx, &node)?;
    let start = Instant::now();
    routers::wait_route(ctx, &routers, host_route(ip), &rest, CUT_BOUND)?;
    let took = start.elapsed();
    eprintln!("e2e: {node}'s paths gone at every router {took:?} after its link went down");
    ensure!(
        took <= CUT_BOUND,
        "{node}'s paths went {took:?} after its link went down, beyond {CUT_BOUND:?} with BFD"
    );
    router::wait_down(ctx, &routers, addr, WAIT)?;
    cut.restore()?;
    routers::wait_route(ctx, &routers, host_route(ip), &hops, WAIT)?;
    router::wait_up(ctx, &routers, &hops, WAIT).map(|_| ())
}

/// The same cut without a BFD profile: the routers keep the node's path
/// past [`KEPT_FOR`] (until their hold timer, not asserted), then drop
/// it; it returns with the link.
fn link_cut_without_bfd(ctx: &Ctx, v6: bool) -> Result<()> {
    let (mut config, routers) = routers::peered(ctx, v6)?;
    pool_and_advertisement(&mut config, &[pool_of(v6)], json!({}))?;
    let hops = all_hops(ctx, v6);
    backends(ctx, &[])?;
    let ip = super::service(ctx, "web", v6, json!({}), None)?;
    advertised(ctx, &routers, ip)?;
    let (node, addr, rest) = victim(ctx, v6)?;
    let cut = LinkCut::cut(ctx, &node)?;
    throughout(KEPT_FOR, &format!("{node}'s path kept without BFD"), || {
        for r in &routers {
            let paths = routers::paths(ctx, r, host_route(ip))?;
            if !paths.iter().any(|p| p.nexthops.contains(&addr)) {
                return Ok(Some(format!("{} dropped it", r.name)));
            }
        }
        Ok(None)
    })?;
    routers::wait_route(ctx, &routers, host_route(ip), &rest, WAIT)?;
    cut.restore()?;
    routers::wait_route(ctx, &routers, host_route(ip), &hops, WAIT).map(|_| ())
}
