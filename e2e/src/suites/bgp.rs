//! `BGP`: the native BGP speaker against the cluster's FRR routers
//! (`--protocol bgp`; the lab e2e always runs them): sessions, routes and
//! their next hops, attributes, withdrawals, reachability through the
//! router, restarts of either end.
//!
//! Specs ported from upstream run against every router ([`routers`]:
//! upstream's four in the lab) and carry upstream's Describe/It text; the
//! others, which change or watch one router's side, run against the first
//! router, the external host's. Every spec makes its own BGPPeers, pool
//! and advertisement ([`Config`], removed afterwards). The pools lie
//! outside every node network, as upstream's dev-env BGP pool: only the
//! routers' routes lead to them.

mod routers;

use super::l2::{SERVICE_HTTP_PORT, backends, nodes, web_service};
use crate::capture::{self, Capture, Segment};
use crate::external::{self, http_get, sample, speaker_metrics};
use crate::metallb::{self, Config};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::frr::{ASN, AddressFamily, BgpPath, BgpRouter};
use devenv::wait::{eventually, throughout};
use ipnet::IpNet;
use metallb_rs::net::bgp::{self, Message};
use routers::Passwords;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);
/// The hold time of the specs' BGPPeers: a session that ends without a
/// NOTIFICATION lingers this long at the router.
const HOLD_TIME: Duration = Duration::from_secs(9);
/// Inside upstream's dev-env BGP pool (192.168.10.0/24,
/// fc00:f853:ccd:e799::/124).
const POOL_V4: &str = "192.168.10.0/28";
const POOL_V6: &str = "fc00:f853:ccd:e799::/124";

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    let s = |name: &'static str, tags: &'static [&'static str], f: fn(&Ctx) -> Result<()>| {
        Spec::new("BGP", name, tags, f)
    };
    vec![
        s(
            "should establish a session from every node",
            &["IPV4"],
            sessions_up_v4,
        ),
        s(
            "should establish a session from every node",
            &["IPV6"],
            sessions_up_v6,
        ),
        s(
            "validate external containers are paired with nodes with Secret Ref set for BGPPeer CR",
            &["IPV4"],
            paired_with_secret_ref_v4,
        ),
        s(
            "validate external containers are paired with nodes with Secret Ref set for BGPPeer CR",
            &["IPV6"],
            paired_with_secret_ref_v6,
        ),
        s(
            "A service of protocol load balancer should work with ETP=cluster",
            &["IPV4"],
            etp_cluster_v4,
        ),
        s(
            "A service of protocol load balancer should work with ETP=cluster",
            &["IPV6"],
            etp_cluster_v6,
        ),
        s(
            "A service of protocol load balancer should work with ETP=local",
            &["IPV4"],
            etp_local_v4,
        ),
        s(
            "A service of protocol load balancer should work with ETP=local",
            &["IPV6"],
            etp_local_v6,
        ),
        s(
            "should carry communities, large communities and localPref",
            &["IPV4"],
            attributes,
        ),
        s(
            "should aggregate with aggregationLength",
            &["IPV4"],
            aggregation,
        ),
        s(
            "should run sessions only from nodes matched by the peer's nodeSelectors",
            &["IPV4"],
            peer_node_selectors,
        ),
        s(
            "should expose session and prefix metrics",
            &["IPV4", "metrics"],
            metrics,
        ),
        s(
            "should announce both families of a dual-stack service over both sessions",
            &["DUALSTACK"],
            dual_stack,
        ),
        s(
            "should establish sessions with a TCP MD5 password and not with a wrong one",
            &["IPV4"],
            md5_password,
        ),
        s(
            "should speak eBGP: our AS in the path, no LOCAL_PREF",
            &["IPV4"],
            ebgp,
        ),
        s(
            "should converge again after the router restarts",
            &["IPV4"],
            router_restart,
        ),
        s(
            "should withdraw a stopped speaker's routes at once and announce again when it returns",
            &["IPV4"],
            speaker_restart,
        ),
    ]
}

fn family_of(v6: bool) -> AddressFamily {
    if v6 {
        AddressFamily::Ipv6
    } else {
        AddressFamily::Ipv4
    }
}

/// The router's address of the family.
fn router(ctx: &Ctx, v6: bool) -> Result<IpAddr> {
    ctx.cluster()
        .router_addresses()
        .into_iter()
        .find(|a| a.is_ipv6() == v6)
        .with_context(|| {
            format!(
                "cluster {:?} has no {} BGP router address (start it with --protocol bgp)",
                ctx.cluster().name(),
                family_of(v6).name()
            )
        })
}

/// Node name -> its address of the family.
fn node_addresses(ctx: &Ctx, v6: bool) -> Vec<(String, IpAddr)> {
    ctx.cluster()
        .nodes()
        .into_iter()
        .filter_map(|n| {
            let a = n.addresses.iter().find(|a| a.is_ipv6() == v6).copied()?;
            Some((n.name, a))
        })
        .collect()
}

fn hold_time() -> String {
    format!("{}s", HOLD_TIME.as_secs())
}

/// Starts capturing what crosses the router's link on the BGP port.
fn capture(ctx: &Ctx) -> Result<Capture> {
    Capture::start(
        &ctx.cluster().router_netns()?,
        &ctx.cluster().external_interface("eth0")?,
    )
}

/// The spec's pool (outside every node network) and an advertisement of
/// it with `ad`.
fn pool_and_advertisement(config: &mut Config<'_>, pools: &[&str], ad: Value) -> Result<()> {
    config.pool("bgp-test", json!({ "addresses": pools }))?;
    let mut ad_spec = json!({ "ipAddressPools": ["bgp-test"] });
    metallb::merge(&mut ad_spec, &ad);
    config.bgp_advertisement("bgp-test", ad_spec)
}

fn pool_of(v6: bool) -> &'static str {
    if v6 { POOL_V6 } else { POOL_V4 }
}

/// A BGPPeer to the first router only (the external host's: iBGP in AS
/// 64512, like upstream's dev-env) with `peer` merged in, the pool and an
/// advertisement with `ad`.
fn bgp_config<'a>(ctx: &'a Ctx, v6: bool, peer: Value, ad: Value) -> Result<Config<'a>> {
    let first = routers::routers(ctx, v6)?
        .into_iter()
        .take(1)
        .collect::<Vec<_>>();
    let mut config = Config::new(ctx)?;
    let mut extra = json!({ "holdTime": hold_time() });
    metallb::merge(&mut extra, &peer);
    routers::add_peers(&mut config, &first, &[v6], Passwords::OneSecret, &extra)?;
    pool_and_advertisement(&mut config, &[pool_of(v6)], ad)?;
    Ok(config)
}

/// BGPPeers to every router of the family, as upstream's specs pair
/// with every FRR container, the pool and an advertisement with `ad`;
/// returns the routers and the peer names too.
fn all_routers_config<'a>(
    ctx: &'a Ctx,
    v6: bool,
    ad: Value,
) -> Result<(Config<'a>, Vec<BgpRouter>, Vec<String>)> {
    let routers = routers::routers(ctx, v6)?;
    let mut config = Config::new(ctx)?;
    let peers = routers::add_peers(
        &mut config,
        &routers,
        &[v6],
        Passwords::OneSecret,
        &json!({ "holdTime": hold_time() }),
    )?;
    pool_and_advertisement(&mut config, &[pool_of(v6)], ad)?;
    Ok((config, routers, peers))
}

/// The addresses whose sessions with the router are Established.
fn established(ctx: &Ctx) -> Result<BTreeSet<IpAddr>> {
    Ok(ctx
        .cluster()
        .bgp_neighbors()?
        .into_values()
        .filter(|n| n.established())
        .map(|n| n.address)
        .collect())
}

/// Waits until the router's sessions with exactly `from` are Established.
fn wait_sessions(ctx: &Ctx, from: &BTreeSet<IpAddr>) -> Result<()> {
    eventually(WAIT, &format!("BGP sessions from {from:?}"), || {
        Ok((established(ctx)? == *from).then_some(()))
    })
}

/// The router's paths for `prefix`.
fn paths(ctx: &Ctx, prefix: IpNet) -> Result<Vec<BgpPath>> {
    let family = family_of(prefix.addr().is_ipv6());
    Ok(ctx
        .cluster()
        .bgp_routes(family)?
        .remove(&prefix)
        .unwrap_or_default())
}

/// Waits until the router holds `prefix` through exactly `next_hops`;
/// returns the paths.
fn wait_route(ctx: &Ctx, prefix: IpNet, next_hops: &BTreeSet<IpAddr>) -> Result<Vec<BgpPath>> {
    eventually(
        WAIT,
        &format!("{prefix} via {next_hops:?} at the router"),
        || {
            let p = paths(ctx, prefix)?;
            let got: BTreeSet<IpAddr> = p.iter().flat_map(|p| p.nexthops.clone()).collect();
            Ok((got == *next_hops).then_some(p))
        },
    )
}

fn host_route(ip: IpAddr) -> IpNet {
    IpNet::from(ip)
}

fn all_hops(ctx: &Ctx, v6: bool) -> BTreeSet<IpAddr> {
    node_addresses(ctx, v6)
        .into_iter()
        .map(|(_, a)| a)
        .collect()
}

/// The default iBGP IPv4 configuration, backends on every node and
/// service `web`, announced by every node: its IP and the next hops.
fn announced_web(ctx: &Ctx) -> Result<(Config<'_>, IpAddr, BTreeSet<IpAddr>)> {
    let config = bgp_config(ctx, false, json!({}), json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let hops = all_hops(ctx, false);
    wait_route(ctx, host_route(ips[0]), &hops)?;
    Ok((config, ips[0], hops))
}

fn sessions_up(ctx: &Ctx, v6: bool) -> Result<()> {
    let (_config, routers, _) = all_routers_config(ctx, v6, json!({}))?;
    routers::wait_sessions(ctx, &routers, &all_hops(ctx, v6), WAIT)
}

fn sessions_up_v4(ctx: &Ctx) -> Result<()> {
    sessions_up(ctx, false)
}

fn sessions_up_v6(ctx: &Ctx) -> Result<()> {
    sessions_up(ctx, true)
}

/// Upstream's "validate external containers are paired with nodes" with
/// every password through a Secret (`passwordSecret`).
fn paired_with_secret_ref(ctx: &Ctx, v6: bool) -> Result<()> {
    let routers = routers::routers(ctx, v6)?;
    let mut config = Config::new(ctx)?;
    routers::add_peers(
        &mut config,
        &routers,
        &[v6],
        Passwords::AllSecrets,
        &json!({ "holdTime": hold_time() }),
    )?;
    let hops = all_hops(ctx, v6);
    routers::wait_sessions(ctx, &routers, &hops, WAIT)?;
    for r in &routers {
        let n = ctx.cluster().bgp_neighbors_on(&r.name)?;
        ensure!(
            hops.iter()
                .all(|a| n.get(a).is_some_and(|s| s.authentication)),
            "{} does not report TCP MD5 on every session",
            r.name
        );
    }
    Ok(())
}

fn paired_with_secret_ref_v4(ctx: &Ctx) -> Result<()> {
    paired_with_secret_ref(ctx, false)
}

fn paired_with_secret_ref_v6(ctx: &Ctx) -> Result<()> {
    paired_with_secret_ref(ctx, true)
}

fn check_cluster_policy(ctx: &Ctx, v6: bool) -> Result<()> {
    let (_config, routers, mut peers) = all_routers_config(ctx, v6, json!({}))?;
    peers.sort();
    backends(ctx, &[])?;
    let family = if v6 { "IPv6" } else { "IPv4" };
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "ipFamilies": [family], "ipFamilyPolicy": "SingleStack" } }),
    )?;
    let ip = ips[0];
    let hops = all_hops(ctx, v6);
    routers::wait_route(ctx, &routers, host_route(ip), &hops, WAIT)?;
    // The first router installed the route: the external host reaches
    // the service through it.
    let body = eventually(WAIT, &format!("HTTP on {ip} through the router"), || {
        Ok(http_get(ctx, ip, SERVICE_HTTP_PORT, "/hostname").ok())
    })?;
    ensure!(
        nodes(ctx).iter().any(|n| body.contains(n.as_str())),
        "{ip} served {body:?}, not a node's hostname"
    );
    // One ServiceBGPStatus per node, naming every peer.
    let statuses = eventually(
        WAIT,
        "a ServiceBGPStatus per node naming every peer",
        || {
            let s = metallb::bgp_statuses(ctx, "web")?;
            let complete = s.len() == hops.len()
                && s.values().all(|p| {
                    let mut p = p.clone();
                    p.sort();
                    p == peers
                });
            Ok(complete.then_some(s))
        },
    )?;
    ensure!(statuses.len() == hops.len(), "statuses {statuses:?}");
    let events = metallb::events(ctx, "web", "nodeAssigned")?;
    ensure!(
        events.iter().any(|e| e.contains("with protocol \"bgp\"")),
        "no nodeAssigned event with protocol bgp: {events:?}"
    );
    metallb::delete_service(ctx, "web")?;
    routers::wait_route(ctx, &routers, host_route(ip), &BTreeSet::new(), WAIT)?;
    eventually(WAIT, "ServiceBGPStatus objects removed", || {
        Ok(metallb::bgp_statuses(ctx, "web")?.is_empty().then_some(()))
    })
}

fn etp_cluster_v4(ctx: &Ctx) -> Result<()> {
    check_cluster_policy(ctx, false)
}

fn etp_cluster_v6(ctx: &Ctx) -> Result<()> {
    check_cluster_policy(ctx, true)
}

fn etp_local(ctx: &Ctx, v6: bool) -> Result<()> {
    let (_config, routers, _) = all_routers_config(ctx, v6, json!({}))?;
    let addrs = node_addresses(ctx, v6);
    let (first, first_ip) = addrs.first().context("no node")?.clone();
    backends(ctx, &[first.as_str()])?;
    let family = if v6 { "IPv6" } else { "IPv4" };
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "externalTrafficPolicy": "Local", "ipFamilies": [family], "ipFamilyPolicy": "SingleStack" } }),
    )?;
    routers::wait_route(
        ctx,
        &routers,
        host_route(ips[0]),
        &BTreeSet::from([first_ip]),
        WAIT,
    )?;
    eventually(
        WAIT,
        &format!("a ServiceBGPStatus from {first} only"),
        || {
            let statuses = metallb::bgp_statuses(ctx, "web")?;
            Ok((statuses.keys().collect::<Vec<_>>() == [&first]).then_some(()))
        },
    )
}

fn etp_local_v4(ctx: &Ctx) -> Result<()> {
    etp_local(ctx, false)
}

fn etp_local_v6(ctx: &Ctx) -> Result<()> {
    etp_local(ctx, true)
}

fn attributes(ctx: &Ctx) -> Result<()> {
    let (mut config, routers, _) = all_routers_config(
        ctx,
        false,
        json!({ "localPref": 150, "communities": ["e2e-alias", "64512:100", "large:64512:1:2"] }),
    )?;
    config.community(
        "e2e",
        json!({ "communities": [{ "name": "e2e-alias", "value": "65000:7" }] }),
    )?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    for r in &routers {
        let p = eventually(
            WAIT,
            &format!("the route with its attributes at {}", r.name),
            || {
                let p = routers::paths(ctx, r, host_route(ips[0]))?;
                Ok(p.iter().find(|p| p.communities.len() == 2).cloned())
            },
        )?;
        // LOCAL_PREF goes to internal peers only (as upstream checks it
        // on the iBGP routers only).
        if !r.ebgp() {
            ensure!(
                p.local_pref == Some(150),
                "{}: LOCAL_PREF {:?}",
                r.name,
                p.local_pref
            );
        }
        let c: BTreeSet<&str> = p.communities.iter().map(String::as_str).collect();
        ensure!(
            c == BTreeSet::from(["64512:100", "65000:7"]),
            "{}: communities {c:?}",
            r.name
        );
        ensure!(
            p.large_communities == ["64512:1:2"],
            "{}: large communities {:?}",
            r.name,
            p.large_communities
        );
    }
    Ok(())
}

fn aggregation(ctx: &Ctx) -> Result<()> {
    let (_config, routers, _) = all_routers_config(ctx, false, json!({ "aggregationLength": 28 }))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let agg = IpNet::new(ips[0], 28)?.trunc();
    routers::wait_route(ctx, &routers, agg, &all_hops(ctx, false), WAIT)?;
    for r in &routers {
        ensure!(
            routers::paths(ctx, r, host_route(ips[0]))?.is_empty(),
            "{}: the host route was announced besides the aggregate",
            r.name
        );
    }
    Ok(())
}

fn peer_node_selectors(ctx: &Ctx) -> Result<()> {
    let addrs = node_addresses(ctx, false);
    let (first, first_ip) = addrs.first().context("no node")?.clone();
    let router_ip = router(ctx, false)?;
    let capture = capture(ctx)?;
    let _config = bgp_config(
        ctx,
        false,
        json!({ "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": first } }] }),
        json!({}),
    )?;
    let only = BTreeSet::from([first_ip]);
    wait_sessions(ctx, &only)?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    wait_route(ctx, host_route(ips[0]), &only)?;
    // Over the whole spec, the unselected nodes never dialled the router;
    // the selected one did (the capture saw its SYN: the control).
    throughout(
        Duration::from_secs(3),
        &format!("sessions from {first} only"),
        || {
            let up = established(ctx)?;
            Ok((up != only).then(|| format!("established from {up:?}")))
        },
    )?;
    let dialled = dials(&capture.finish()?, router_ip);
    ensure!(
        dialled.keys().eq([&first_ip]),
        "SYNs to the router came from {dialled:?}; only {first} ({first_ip}) is selected"
    );
    Ok(())
}

fn metrics(ctx: &Ctx) -> Result<()> {
    let _announced = announced_web(ctx)?;
    let peer = format!("peer=\"{}:179\"", router(ctx, false)?);
    let node = nodes(ctx).into_iter().next().context("no node")?;
    eventually(WAIT, "BGP metrics on the speaker", || {
        let text = speaker_metrics(ctx, &node)?;
        let up = sample(&text, "metallb_bgp_session_up", &[&peer]);
        let announced = sample(&text, "metallb_bgp_announced_prefixes_total", &[&peer]);
        let pending = sample(&text, "metallb_bgp_pending_prefixes_total", &[&peer]);
        let updates = sample(&text, "metallb_bgp_updates_total", &[&peer]);
        let announced_svc = sample(&text, "metallb_speaker_announced", &["protocol=\"bgp\""]);
        Ok((up == Some(1.0)
            && announced == Some(1.0)
            && pending == Some(1.0)
            && updates.is_some_and(|u| u >= 1.0)
            && announced_svc == Some(1.0))
        .then_some(()))
    })
}

fn dual_stack(ctx: &Ctx) -> Result<()> {
    let all = ctx.cluster().bgp_routers();
    let mut config = Config::new(ctx)?;
    let mut peers = routers::add_peers(
        &mut config,
        &all,
        &[false, true],
        Passwords::OneSecret,
        &json!({ "holdTime": hold_time() }),
    )?;
    peers.sort();
    pool_and_advertisement(&mut config, &[POOL_V4, POOL_V6], json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "RequireDualStack" } }),
    )?;
    ensure!(ips.len() == 2, "dual-stack service got {ips:?}");
    for ip in &ips {
        let of_family = routers::routers(ctx, ip.is_ipv6())?;
        routers::wait_route(
            ctx,
            &of_family,
            host_route(*ip),
            &all_hops(ctx, ip.is_ipv6()),
            WAIT,
        )?;
    }
    let every = nodes(ctx);
    eventually(
        WAIT,
        "a ServiceBGPStatus naming every peer of both families from every node",
        || {
            let statuses = metallb::bgp_statuses(ctx, "web")?;
            Ok((statuses.keys().eq(every.iter())
                && statuses.values().all(|p| {
                    let mut p = p.clone();
                    p.sort();
                    p == peers
                }))
            .then_some(()))
        },
    )
}

/// Router configuration made through vtysh for one spec, undone when
/// dropped (pass, fail or panic).
struct RouterChange<'a> {
    ctx: &'a Ctx,
    undo: String,
}

impl<'a> RouterChange<'a> {
    /// Runs `set(neighbor)` for each of `neighbors` under `router bgp`;
    /// `unset(neighbor)` lines restore it.
    fn per_neighbor(
        ctx: &'a Ctx,
        neighbors: &BTreeSet<IpAddr>,
        set: impl Fn(&IpAddr) -> String,
        unset: impl Fn(&IpAddr) -> String,
    ) -> Result<Self> {
        let lines =
            |f: &dyn Fn(&IpAddr) -> String| -> Vec<String> { neighbors.iter().map(f).collect() };
        let change = RouterChange {
            ctx,
            undo: router_commands(&lines(&unset)),
        };
        ctx.cluster().vtysh(&router_commands(&lines(&set)))?;
        Ok(change)
    }
}

fn router_commands(lines: &[String]) -> String {
    format!("configure terminal\nrouter bgp {ASN}\n{}", lines.join("\n"))
}

impl Drop for RouterChange<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.cluster().vtysh(&self.undo) {
            eprintln!("e2e: could not restore the router's configuration: {e:#}");
        }
    }
}

fn md5_password(ctx: &Ctx) -> Result<()> {
    let hops = all_hops(ctx, false);
    // The router's own password comes back afterwards (none: none).
    let own = routers::routers(ctx, false)?
        .into_iter()
        .next()
        .and_then(|r| r.password);
    let _router = RouterChange::per_neighbor(
        ctx,
        &hops,
        |a| format!("neighbor {a} password e2e-s3cret"),
        |a| match &own {
            Some(p) => format!("neighbor {a} password {p}"),
            None => format!("no neighbor {a} password"),
        },
    )?;
    {
        let capture = capture(ctx)?;
        let router_ip = router(ctx, false)?;
        let _wrong = bgp_config(ctx, false, json!({ "password": "not-it" }), json!({}))?;
        // Positive control: every speaker dials, again and again - the
        // router's kernel drops segments signed with another key, so no
        // SYN is ever answered and no session comes up.
        eventually(WAIT, "every speaker dialling the router twice", || {
            let dials = dials(&capture.segments(), router_ip);
            Ok(hops
                .iter()
                .all(|h| dials.get(h).is_some_and(|n| *n >= 2))
                .then_some(()))
        })?;
        let segments = capture.finish()?;
        let answered: Vec<&Segment> = segments
            .iter()
            .filter(|s| s.syn && s.ack && s.src.ip() == router_ip && s.src.port() == bgp::PORT)
            .filter(|s| hops.contains(&s.dst.ip()))
            .collect();
        ensure!(
            answered.is_empty(),
            "the router answered a speaker's SYN despite the wrong password: {answered:?}"
        );
        let up = established(ctx)?;
        ensure!(up.is_empty(), "sessions up with a wrong password: {up:?}");
    }
    let _config = bgp_config(ctx, false, json!({ "password": "e2e-s3cret" }), json!({}))?;
    wait_sessions(ctx, &hops)?;
    let n = ctx.cluster().bgp_neighbors()?;
    ensure!(
        hops.iter()
            .all(|a| n.get(a).is_some_and(|s| s.authentication)),
        "the router does not report authentication on every session"
    );
    Ok(())
}

/// How many SYNs each address sent to the router's BGP port.
fn dials(segments: &[Segment], router: IpAddr) -> std::collections::BTreeMap<IpAddr, usize> {
    let mut out = std::collections::BTreeMap::new();
    for s in segments {
        if s.syn && !s.ack && s.dst.ip() == router && s.dst.port() == bgp::PORT {
            *out.entry(s.src.ip()).or_insert(0) += 1;
        }
    }
    out
}

/// The UPDATEs `from` sent the router that announce `prefix`.
fn updates_announcing(
    segments: &[Segment],
    from: IpAddr,
    router: IpAddr,
    prefix: IpNet,
) -> Vec<bgp::Update> {
    capture::messages(segments, from, router)
        .into_iter()
        .filter_map(|seen| match seen.msg {
            Message::Update(u) => Some(u),
            _ => None,
        })
        .filter(|u| {
            u.nlri.iter().any(|n| IpNet::V4(*n) == prefix)
                || u.attributes
                    .mp_reach
                    .as_ref()
                    .is_some_and(|m| m.nlri.contains(&prefix))
        })
        .collect()
}

fn ebgp(ctx: &Ctx) -> Result<()> {
    const OURS: u32 = 64513;
    let hops = all_hops(ctx, false);
    let _router = RouterChange::per_neighbor(
        ctx,
        &hops,
        |a| format!("neighbor {a} remote-as {OURS}"),
        |a| format!("neighbor {a} remote-as {ASN}"),
    )?;
    let capture = capture(ctx)?;
    let router_ip = router(ctx, false)?;
    let _config = bgp_config(
        ctx,
        false,
        json!({ "myASN": OURS }),
        json!({ "localPref": 300 }),
    )?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let prefix = host_route(ips[0]);
    let paths = wait_route(ctx, prefix, &hops)?;
    for p in &paths {
        ensure!(p.as_path == OURS.to_string(), "AS path {:?}", p.as_path);
    }
    // FRR ignores LOCAL_PREF from an external peer, so only the wire
    // tells whether it was sent: every node's UPDATE for the prefix
    // (seen: the positive control) carries none.
    let segments = capture.finish()?;
    for hop in &hops {
        let updates = updates_announcing(&segments, *hop, router_ip, prefix);
        ensure!(
            !updates.is_empty(),
            "no UPDATE announcing {prefix} from {hop} was captured at the router"
        );
        for u in &updates {
            ensure!(
                u.attributes.local_pref.is_none(),
                "{hop} sent LOCAL_PREF {:?} to its external peer: {u:?}",
                u.attributes.local_pref
            );
        }
    }
    Ok(())
}

fn router_restart(ctx: &Ctx) -> Result<()> {
    let (_config, ip, hops) = announced_web(ctx)?;
    ctx.cluster().restart_router()?;
    wait_sessions(ctx, &hops)?;
    wait_route(ctx, host_route(ip), &hops)?;
    Ok(())
}

fn speaker_restart(ctx: &Ctx) -> Result<()> {
    use devenv::cluster::StopSignal;
    let (_config, ip, hops) = announced_web(ctx)?;
    let addrs = node_addresses(ctx, false);
    let (node, addr) = addrs.last().context("no node")?.clone();
    let router_ip = router(ctx, false)?;
    let capture = capture(ctx)?;
    let stopped = Instant::now();
    ctx.cluster().stop_speaker(&node, StopSignal::Term)?;
    let result = (|| {
        // The speaker closed its session with a Cease: its path goes at
        // once, well within the hold time the router would otherwise wait.
        let rest: BTreeSet<IpAddr> = hops.iter().copied().filter(|a| *a != addr).collect();
        wait_route(ctx, host_route(ip), &rest)?;
        let took = stopped.elapsed();
        eprintln!(
            "e2e: {node}'s path gone at the router {took:?} after SIGTERM (bound {:?})",
            HOLD_TIME / 3
        );
        ensure!(
            took < HOLD_TIME / 3,
            "{node}'s route was withdrawn {took:?} after its speaker stopped: not at once (hold time {HOLD_TIME:?})"
        );
        // The NOTIFICATION came from the speaker: received by the router,
        // not the router's own (a hold timer expiry is sent by it).
        let segments = capture.finish()?;
        let sent = capture::messages(&segments, addr, router_ip);
        ensure!(
            sent.iter().any(|s| matches!(
                &s.msg,
                Message::Notification(n) if n.code == bgp::code::CEASE
            )),
            "the router received no Cease NOTIFICATION from {addr}; from it: {:?}",
            sent.iter().map(|s| &s.msg).collect::<Vec<_>>()
        );
        Ok(())
    })();
    ctx.cluster().start_speaker(&node)?;
    result?;
    wait_route(ctx, host_route(ip), &hops)?;
    let _ = external::forget_neighbor(ctx, ip);
    Ok(())
}
