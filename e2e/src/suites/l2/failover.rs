//! `L2` failover specs: the announcement leaves a node that cannot
//! serve (condition, label, taint, stopped or killed speaker, link down,
//! data-plane link down with the API path up) and comes back; partitions between speakers never make two nodes
//! answer for longer than the README's bound; an API outage alone
//! changes nothing.
//!
//! Each uses a dual-stack service where the cluster offers both
//! families, so every window checks ARP and NDP at once.

use super::watch::{HOLD, Watch};
use super::{
    Net, WAIT, backends, create_web_service, l2_config, pool, reachable, set_label,
    set_network_unavailable,
};
use crate::metallb::{self, Config, wait_for_ips, wait_for_l2_node};
use crate::prober::Window;
use crate::{Ctx, Spec};
use anyhow::{Context, Result, bail, ensure};
use devenv::cluster::StopSignal;
use devenv::wait::eventually;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use metallb_rs::net::ethernet::Mac;
use metallb_rs::speaker::liveness::API_TIMEOUT;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

const EXCLUDE_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// The longest time two nodes may answer for one address when the
/// announcing node loses both the API server and its peers:
/// docs/src/differences-full.md, Partitions - the cut-off speaker stops
/// after 4 s without the API, the others take over once gossip and its
/// lease agree, and the overlap is under 2 s.
pub(super) const ISOLATION_BOUND: Duration = Duration::from_secs(2);

/// How long after a speaker fails (SIGKILL, SIGSTOP, link down) another
/// node alone answers for its addresses: about 2-3 s (docs/src/differences-full.md,
/// Failover: gossip declares the member failed and its
/// lease is overdue 2.5 s after its last renewal at most); the rest is
/// slack for a loaded machine.
pub(super) const FAILOVER_BOUND: Duration = Duration::from_secs(6);

/// How long a partition is watched: gossip declares the node down within
/// about a second, the lease deadline and the isolated speaker's own 4 s
/// pass well within it.
const PARTITION_WINDOW: Duration = Duration::from_secs(15);

/// The suite's failover specs.
pub(super) fn specs() -> Vec<Spec> {
    vec![
        Spec::new(
            "L2",
            "should not be announced from a node with NetworkUnavailable, and come back when it clears",
            &["IPV4"],
            network_unavailable,
        ),
        Spec::new(
            "L2",
            "should not be announced from a node excluded from external load balancers, and come back",
            &["IPV4"],
            excluded_node,
        ),
        Spec::new(
            "L2",
            "should move the announcement when the speaker stops, and back when it returns",
            &["IPV4"],
            speaker_stops,
        ),
        Spec::new(
            "L2",
            "should move L2 advertisement when the announcing node stops running a ready speaker (SIGKILL), and back",
            &["IPV4"],
            speaker_killed,
        ),
        Spec::new(
            "L2",
            "should move L2 advertisement when the announcing node's link goes down, and back",
            &["IPV4"],
            link_down,
        ),
        Spec::new(
            "L2",
            "should move L2 advertisement of six services off a node whose data-plane link goes down while its API path stays up, and answer again within 3 s of the link's return",
            &["IPV4"],
            data_link_down,
        ),
        Spec::new(
            "L2",
            "should move L2 advertisement off a node tainted out-of-service, and back",
            &["IPV4"],
            out_of_service,
        ),
        Spec::new(
            "L2",
            "should never answer from two nodes when the announcing node is partitioned from the others",
            &["IPV4"],
            partition,
        ),
        Spec::new(
            "L2",
            "should answer from two nodes no longer than the documented bound when the announcing node of six services is cut off from its peers and the API server",
            &["IPV4"],
            isolation,
        ),
        Spec::new(
            "L2",
            "should keep announcing while the announcing node is cut off from the API server",
            &["IPV4"],
            api_outage,
        ),
    ]
}

/// Pool and advertisement of both families where the cluster has both,
/// backends everywhere and service `web` (dual-stack then, Local policy); its
/// addresses.
pub(super) fn failover_service(ctx: &Ctx) -> Result<(Config<'_>, Vec<IpAddr>)> {
    let (config, mut services) = failover_services(ctx, 1)?;
    Ok((config, services.remove(0)))
}

/// [`failover_service`] with `count` services: `web`, `web-1`, ...; the
/// addresses of each, in that order.
pub(super) fn failover_services(ctx: &Ctx, count: usize) -> Result<(Config<'_>, Vec<Vec<IpAddr>>)> {
    let v4 = pool(ctx, Net::V4)?;
    // The Local policy with a backend on every node: every node may
    // announce, and the answer names the node the traffic reached (with
    // Cluster the proxy would spread it over the nodes).
    let (config, family) = match pool(ctx, Net::V6) {
        Ok(v6) => (
            l2_config(ctx, &[&v4, &v6], json!({}))?,
            json!({ "spec": { "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "RequireDualStack",
                              "externalTrafficPolicy": "Local" } }),
        ),
        Err(_) => (
            l2_config(ctx, &[&v4], json!({}))?,
            json!({ "spec": { "externalTrafficPolicy": "Local" } }),
        ),
    };
    backends(ctx, &[])?;
    let names: Vec<String> = (0..count)
        .map(|i| match i {
            0 => "web".to_owned(),
            i => format!("web-{i}"),
        })
        .collect();
    for name in &names {
        create_web_service(ctx, name, family.clone())?;
    }
    let ips = names
        .iter()
        .map(|name| wait_for_ips(ctx, name, WAIT))
        .collect::<Result<_>>()?;
    Ok((config, ips))
}

/// Fails unless, in `w` (a window from the moment `from`'s speaker
/// failed), one node other than `from` alone answers from
/// [`FAILOVER_BOUND`] to the end; returns its MAC.
pub(super) fn expect_taken_over(watch: &Watch, w: &Window, from: &str) -> Result<Mac> {
    let seen = w.describe(&|m| watch.name(m));
    let after = w.since(FAILOVER_BOUND);
    let Some(&taker) = after.macs().iter().next() else {
        bail!(
            "nobody answered {} from {FAILOVER_BOUND:?} after {from} failed on: {seen}",
            w.target
        );
    };
    ensure!(
        taker != watch.mac_of(from)? && after.only(taker),
        "{} was not taken over from {from} by another node alone within {FAILOVER_BOUND:?}: {seen}",
        w.target
    );
    Ok(taker)
}

/// Waits until the ServiceL2Status names `node`.
fn status_on(ctx: &Ctx, node: &str) -> Result<()> {
    eventually(WAIT, &format!("the ServiceL2Status naming {node}"), || {
        Ok((wait_for_l2_node(ctx, "web", WAIT)? == node).then_some(()))
    })
}

/// Runs `away` on the announcing node, checks another node alone
/// answers (the first never seen), runs `back`, checks the first alone
/// answers again (the other never seen). `back` also runs on failure.
fn moves_away_and_back(
    ctx: &Ctx,
    away: &dyn Fn(&str) -> Result<()>,
    back: &dyn Fn(&str) -> Result<()>,
) -> Result<()> {
    let (_config, ips) = failover_service(ctx)?;
    let watch = Watch::new(ctx, &ips, "eth0")?;
    let first = watch.settled()?;
    status_on(ctx, &first)?;
    away(&first)?;
    let result = (|| -> Result<()> {
        let moved = watch
            .wait_moved(&first)
            .with_context(|| format!("the announcement leaving {first}"))?;
        status_on(ctx, &moved)
    })();
    back(&first)?;
    result?;
    watch
        .wait_only(&first)
        .with_context(|| format!("the announcement coming back to {first}"))?;
    status_on(ctx, &first)
}

fn network_unavailable(ctx: &Ctx) -> Result<()> {
    moves_away_and_back(ctx, &|n| set_network_unavailable(ctx, n, true), &|n| {
        set_network_unavailable(ctx, n, false)
    })
}

fn excluded_node(ctx: &Ctx) -> Result<()> {
    moves_away_and_back(ctx, &|n| set_label(ctx, n, EXCLUDE_LB, Some("")), &|n| {
        set_label(ctx, n, EXCLUDE_LB, None)
    })
}

fn speaker_stops(ctx: &Ctx) -> Result<()> {
    moves_away_and_back(
        ctx,
        &|n| ctx.cluster().stop_speaker(n, StopSignal::Term),
        &|n| ctx.cluster().start_speaker(n),
    )
}

/// Puts the out-of-service taint on `node`, or takes it off (other taints
/// are kept).
fn set_out_of_service(ctx: &Ctx, node: &str, on: bool) -> Result<()> {
    const TAINT: &str = "node.kubernetes.io/out-of-service";
    let nodes: Api<Node> = Api::all(ctx.client()?);
    let current = ctx.block_on(nodes.get(node))?;
    let mut taints: Vec<Value> = current
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != TAINT)
        .map(|t| serde_json::to_value(t).map_err(anyhow::Error::from))
        .collect::<Result<_>>()?;
    if on {
        taints.push(json!({ "key": TAINT, "value": "nodeshutdown", "effect": "NoExecute" }));
    }
    let patch = json!({ "spec": { "taints": taints } });
    ctx.block_on(nodes.patch(node, &PatchParams::default(), &Patch::Merge(patch)))?;
    Ok(())
}

fn out_of_service(ctx: &Ctx) -> Result<()> {
    moves_away_and_back(ctx, &|n| set_out_of_service(ctx, n, true), &|n| {
        set_out_of_service(ctx, n, false)
    })
}

fn speaker_killed(ctx: &Ctx) -> Result<()> {
    moves_away_and_back(
        ctx,
        &|n| ctx.cluster().stop_speaker(n, StopSignal::Kill),
        &|n| ctx.cluster().start_speaker(n),
    )
}

fn link_down(ctx: &Ctx) -> Result<()> {
    moves_away_and_back(ctx, &|n| ctx.cluster().node_down(n), &|n| {
        ctx.cluster().node_up(n)
    })
}

/// The nftables table that partitions a node.
const PARTITION_TABLE: &str = "e2e_partition";

/// Drops (or stops dropping) every packet between `node` and `peers` on
/// the node, with nftables: the node keeps its API server and the
/// external host.
fn partition_node(ctx: &Ctx, node: &str, peers: &[IpAddr], on: bool) -> Result<()> {
    let run = |argv: &[&str]| -> Result<()> {
        let out = ctx.cluster().exec_on_node(node, argv)?;
        ensure!(
            out.status.success(),
            "{} on {node}: {}",
            argv.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    };
    let table = PARTITION_TABLE;
    if !on {
        return run(&["nft", "delete", "table", "inet", table]);
    }
    // nft joins its arguments: one argument per command keeps it readable.
    run(&["nft", &format!("add table inet {table}")])?;
    for (chain, hook) in [("in", "input"), ("out", "output")] {
        run(&[
            "nft",
            &format!(
                "add chain inet {table} {chain} {{ type filter hook {hook} priority -10 ; policy accept ; }}"
            ),
        ])?;
    }
    for peer in peers {
        let family = if peer.is_ipv6() { "ip6" } else { "ip" };
        run(&[
            "nft",
            &format!("add rule inet {table} in {family} saddr {peer} drop"),
        ])?;
        run(&[
            "nft",
            &format!("add rule inet {table} out {family} daddr {peer} drop"),
        ])?;
    }
    Ok(())
}

/// How a TCP connection from `node` to `peer` ends: `refused` when the
/// peer's kernel answered (nothing listens on port 9), `timeout` when
/// nothing came back.
fn tcp_from(ctx: &Ctx, node: &str, peer: IpAddr) -> Result<String> {
    let script = "import socket,sys\nip=sys.argv[1]\nfam=socket.AF_INET6 if ':' in ip else socket.AF_INET\ns=socket.socket(fam,socket.SOCK_STREAM)\ns.settimeout(1)\ntry:\n    s.connect((ip,9))\n    print('connected')\nexcept ConnectionRefusedError:\n    print('refused')\nexcept OSError as e:\n    print('timeout' if isinstance(e, socket.timeout) else 'error %s' % e)\n";
    let out = ctx
        .cluster()
        .exec_on_node(node, &["python3", "-c", script, &peer.to_string()])?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The other nodes' addresses, cut off from `node` by the partition;
/// checks first that they answer `node`.
fn peers_of(ctx: &Ctx, node: &str) -> Result<Vec<IpAddr>> {
    let peers: Vec<IpAddr> = ctx
        .cluster()
        .nodes()
        .into_iter()
        .filter(|n| n.name != node)
        .flat_map(|n| n.addresses)
        .collect();
    for p in &peers {
        let seen = tcp_from(ctx, node, *p)?;
        ensure!(
            seen == "refused",
            "before the partition, {node} -> {p}: {seen}"
        );
    }
    Ok(peers)
}

/// Positive control: packets from `node` to every peer vanish.
fn check_partitioned(ctx: &Ctx, node: &str, peers: &[IpAddr]) -> Result<()> {
    for p in peers {
        let seen = tcp_from(ctx, node, *p)?;
        ensure!(
            seen == "timeout",
            "the partition does not hold: {node} -> {p}: {seen}"
        );
    }
    Ok(())
}

/// Waits until `node`'s presence lease is older than the speaker's own
/// API timeout: its speaker cannot reach the API server and knows it.
pub(super) fn wait_presence_stale(ctx: &Ctx, node: &str) -> Result<Duration> {
    eventually(
        WAIT,
        &format!("{node}'s presence lease older than {API_TIMEOUT:?}"),
        || {
            let age = metallb::presence_age(ctx, node)?;
            Ok(age.filter(|a| *a > API_TIMEOUT))
        },
    )
}

fn partition(ctx: &Ctx) -> Result<()> {
    let (_config, ips) = failover_service(ctx)?;
    let watch = Watch::new(ctx, &ips, "eth0")?;
    let leader = watch.settled()?;
    let peers = peers_of(ctx, &leader)?;
    partition_node(ctx, &leader, &peers, true)?;
    let result = (|| -> Result<()> {
        check_partitioned(ctx, &leader, &peers)?;
        let windows = watch.windows(PARTITION_WINDOW)?;
        // The partitioned speaker keeps renewing its lease, so it keeps its
        // addresses and the others never take over (docs/src/differences-full.md, Partitions):
        // the leader alone, the whole time.
        let age = metallb::presence_age(ctx, &leader)?;
        ensure!(
            age.is_some_and(|a| a < API_TIMEOUT),
            "{leader}'s presence lease was not renewed during the partition (age {age:?}): the spec needs the API reachable"
        );
        for w in &windows {
            eprintln!(
                "e2e: {} while {leader} is partitioned: {}",
                w.target,
                w.describe(&|m| watch.name(m))
            );
            w.expect_only(watch.mac_of(&leader)?, &|m| watch.name(m))
                .with_context(|| format!("during the partition of {leader}"))?;
        }
        reachable(ctx, ips[0]).context("the address during the partition")?;
        Ok(())
    })();
    partition_node(ctx, &leader, &peers, false)?;
    result?;
    watch.wait_only(&leader).context("after healing")
}

/// The node announcing the most of `owners`' addresses (the last by name
/// among equals), and how many.
pub(super) fn busiest(owners: &BTreeMap<IpAddr, String>) -> Option<(String, usize)> {
    let mut held_by: BTreeMap<&str, usize> = BTreeMap::new();
    for node in owners.values() {
        *held_by.entry(node).or_default() += 1;
    }
    held_by
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(node, n)| (node.to_owned(), n))
}

/// Services in the isolation spec: a cut-off speaker once kept answering
/// for the whole cut because of API calls it started for its other
/// services, which a single service never shows.
const ISOLATION_SERVICES: usize = 6;

fn isolation(ctx: &Ctx) -> Result<()> {
    let (_config, services) = failover_services(ctx, ISOLATION_SERVICES)?;
    let ips: Vec<IpAddr> = services.concat();
    let watch = Watch::new(ctx, &ips, "eth0")?;
    let before = watch.owners()?;
    // Cut off the node announcing the most addresses: with six services
    // on three nodes, at least two of them.
    let (leader, held) = busiest(&before).context("no address announced")?;
    eprintln!(
        "e2e: cutting off {leader}, which announces {held} of {} addresses",
        ips.len()
    );
    let peers = peers_of(ctx, &leader)?;
    ctx.cluster().set_api_reachable(&leader, false)?;
    let cut = partition_node(ctx, &leader, &peers, true);
    let result = cut.and_then(|()| {
        // Watch from the cut on, and meanwhile check the cut took effect.
        let (windows, control) = std::thread::scope(|s| {
            let watching = s.spawn(|| watch.windows(PARTITION_WINDOW));
            let control = check_partitioned(ctx, &leader, &peers)
                .and_then(|()| wait_presence_stale(ctx, &leader));
            let windows = watching
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (windows, control)
        });
        control?;
        let leader_mac = watch.mac_of(&leader)?;
        for w in &windows? {
            let seen = w.describe(&|m| watch.name(m));
            eprintln!("e2e: {} while {leader} is cut off: {seen}", w.target);
            ensure!(
                w.longest_split() <= ISOLATION_BOUND,
                "{} answered from two nodes for {:?}, longer than the README's bound of {ISOLATION_BOUND:?}: {seen}",
                w.target,
                w.longest_split()
            );
            let owner = &before[&w.target];
            if *owner == leader {
                // Positive control: another node took over and the leader
                // went quiet, so the window saw the whole handover.
                let tail = w.since(w.length().saturating_sub(HOLD));
                ensure!(
                    tail.macs()
                        .into_iter()
                        .any(|m| m != leader_mac && tail.only(m)),
                    "no other node alone answered {} by the end of the cut: {seen}",
                    w.target
                );
            } else {
                // The others' addresses stay where they were.
                w.expect_only(watch.mac_of(owner)?, &|m| watch.name(m))
                    .with_context(|| format!("while {leader} is cut off"))?;
            }
        }
        Ok(())
    });
    let healed = partition_node(ctx, &leader, &peers, false);
    ctx.cluster().set_api_reachable(&leader, true)?;
    result?;
    healed?;
    eventually(WAIT, "every address back on its node after healing", || {
        Ok((watch.owners()? == before).then_some(()))
    })
}

fn api_outage(ctx: &Ctx) -> Result<()> {
    let (_config, ips) = failover_service(ctx)?;
    let watch = Watch::new(ctx, &ips, "eth0")?;
    let node = watch.settled()?;
    // Served before the cut: the node's kube-proxy stand-in puts the VIP
    // on its `lo` from what it last read (on its next tick), like
    // kube-proxy; cut too early and it never does.
    let served = reachable(ctx, ips[0])?;
    ensure!(
        served.contains(&node),
        "{} served by {served}, not {node}",
        ips[0]
    );
    ctx.cluster().set_api_reachable(&node, false)?;
    let result = (|| -> Result<()> {
        // Positive control: the speaker saw the cut - it has not renewed
        // its lease for longer than it allows itself without the API.
        wait_presence_stale(ctx, &node)?;
        let mac = watch.mac_of(&node)?;
        for w in watch.windows(HOLD)? {
            w.expect_only(mac, &|m| watch.name(m))
                .with_context(|| format!("while {node} is cut off from the API server"))?;
        }
        ensure!(reachable(ctx, ips[0])?.contains(&node));
        Ok(())
    })();
    ctx.cluster().set_api_reachable(&node, true)?;
    result?;
    watch.wait_only(&node)
}

/// How long the data-plane link stays down: past [`FAILOVER_BOUND`], and
/// shorter than the 10 s between interface rescans (a link back before
/// the next rescan once left its addresses silent until it).
const DATA_LINK_DOWN: Duration = Duration::from_secs(8);
/// After the link returns, every address is answered again within this
/// (the speaker rescans at once and clears its mark after 2 s up).
const LINK_RETURN_BOUND: Duration = Duration::from_secs(3);
/// How long the addresses are watched after the link returns: the
/// mark's clear hold, the handover back, and more.
const AFTER_LINK: Duration = Duration::from_secs(10);
/// The longest silence past [`LINK_RETURN_BOUND`] after the link
/// returns: the handover back to the node (both sides act on the same
/// lease change) and answers late for their round.
const HANDOVER_NOISE: Duration = Duration::from_millis(750);

/// The node announcing the most of six services loses its data-plane
/// link (eth0) for [`DATA_LINK_DOWN`] while its API path stays up: it
/// keeps renewing its lease - gossip's "down" and a fresh lease once
/// meant "cut off, not dead", and its addresses stayed with it,
/// unanswered - so it says on its lease that its link is down, and the
/// others take its addresses over within [`FAILOVER_BOUND`]. After the
/// link returns every address is answered within [`LINK_RETURN_BOUND`]
/// and none is silent longer than [`FAILOVER_BOUND`].
fn data_link_down(ctx: &Ctx) -> Result<()> {
    let (_config, services) = failover_services(ctx, ISOLATION_SERVICES)?;
    let ips: Vec<IpAddr> = services.concat();
    let watch = Watch::new(ctx, &ips, "eth0")?;
    let before = watch.owners()?;
    let (node, held) = busiest(&before).context("no address announced")?;
    eprintln!(
        "e2e: taking {node}'s eth0 down for {DATA_LINK_DOWN:?} (its API path stays up); it announces {held} of {} addresses",
        ips.len()
    );
    let start = Instant::now();
    if let Err(e) = ctx.cluster().link_down(&node) {
        return Err(crate::skip(format!("{e:#}")));
    }
    let (down, control) = std::thread::scope(|s| {
        let watching = s.spawn(|| watch.windows(DATA_LINK_DOWN));
        // Positive control, near the end of the cut: the speaker still
        // reaches the API server - it renewed its lease (saying its link
        // is down) after the link went down. Once its lease says so it
        // renews at its slow period: nobody doubts a node that said it.
        std::thread::sleep(DATA_LINK_DOWN.saturating_sub(Duration::from_secs(1) + start.elapsed()));
        let since_cut = start.elapsed();
        let control = metallb::presence_age(ctx, &node).and_then(|age| {
            ensure!(
                age.is_some_and(|a| a < since_cut),
                "{node}'s presence lease was not renewed since its data-plane link went down {since_cut:?} ago (age {age:?}): the spec needs its API path up"
            );
            Ok(())
        });
        let windows = watching
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (windows, control)
    });
    let restored = ctx.cluster().link_up(&node);
    let back_at = start.elapsed();
    let after = restored.and_then(|()| watch.windows(AFTER_LINK));
    let result = (|| -> Result<()> {
        control?;
        for w in &down? {
            let seen = w.describe(&|m| watch.name(m));
            eprintln!("e2e: {} while {node}'s eth0 is down: {seen}", w.target);
            let silence = w.longest_silence();
            ensure!(
                silence.length <= FAILOVER_BOUND,
                "{} went unanswered for {:?} from {:?} into {node}'s link cut, longer than {FAILOVER_BOUND:?}: {seen}",
                w.target,
                silence.length,
                silence.from
            );
            let owner = &before[&w.target];
            if *owner == node {
                expect_taken_over(&watch, w, &node)
                    .with_context(|| format!("{node}'s data-plane link down, its API path up"))?;
            } else {
                w.expect_only(watch.mac_of(owner)?, &|m| watch.name(m))
                    .with_context(|| format!("while {node}'s eth0 is down"))?;
            }
        }
        for w in &after? {
            let seen = w.describe(&|m| watch.name(m));
            eprintln!(
                "e2e: {} after {node}'s eth0 came back ({back_at:?} after it went down): {seen}",
                w.target
            );
            let silence = w.longest_silence();
            ensure!(
                silence.length <= LINK_RETURN_BOUND,
                "{} went unanswered for {:?} from {:?} after {node}'s link came back, longer than {LINK_RETURN_BOUND:?}: {seen}",
                w.target,
                silence.length,
                silence.from
            );
            let late = w.since(LINK_RETURN_BOUND).longest_silence();
            ensure!(
                late.length <= HANDOVER_NOISE,
                "{} went unanswered for {:?} from {:?} past {LINK_RETURN_BOUND:?} after {node}'s link came back: {seen}",
                w.target,
                late.length,
                late.from
            );
        }
        Ok(())
    })();
    result?;
    eventually(
        WAIT,
        &format!("every address back on its node after {node}'s link came back"),
        || Ok((watch.owners()? == before).then_some(())),
    )
}
