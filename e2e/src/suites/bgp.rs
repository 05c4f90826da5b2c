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

mod bfd;
mod changes;
/// The two specs, `[IPV4]` and `[IPV6]`, of an upstream table whose
/// entries are the families: `BGP <group> <table>`, each running
/// `f(ctx, v6)`.
macro_rules! family_table {
    ($group:literal, $table:literal, $f:ident) => {{
        fn v4(ctx: &crate::Ctx) -> anyhow::Result<()> {
            $f(ctx, false)
        }
        fn v6(ctx: &crate::Ctx) -> anyhow::Result<()> {
            $f(ctx, true)
        }
        [
            crate::Spec::new("BGP", concat!($group, " ", $table), &["IPV4"], v4),
            crate::Spec::new("BGP", concat!($group, " ", $table), &["IPV6"], v6),
        ]
    }};
}

mod first_router;
mod graceful_restart;
mod node_selector;
mod peer_selector;
mod routers;
mod service_selector;
mod services;
mod unnumbered;

use first_router::{
    dynamic_asn_external, dynamic_asn_internal, ebgp, keepalive_time, local_asn, md5_password,
    peer_node_selectors, router_restart, speaker_restart,
};

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
/// Inside upstream's dev-env BGP pool ([`upstream_pool`]).
const POOL_V4: &str = "192.168.10.0/28";
const POOL_V6: &str = "fc00:f853:ccd:e799::/124";

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    let s = |name: &'static str, tags: &'static [&'static str], f: fn(&Ctx) -> Result<()>| {
        Spec::new("BGP", name, tags, f)
    };
    let mut specs = vec![
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
            "metrics metrics should be exposed by the controller - Checking service",
            &["IPV4"],
            metrics_v4,
        ),
        s(
            "metrics metrics should be exposed by the controller - Checking service",
            &["IPV6"],
            metrics_v6,
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
            "should present localASN to the router: in the OPEN and as the whole AS path",
            &["IPV4"],
            local_asn,
        ),
        s(
            "should establish sessions with dynamicASN external to a router in another AS",
            &["IPV4"],
            dynamic_asn_external,
        ),
        s(
            "should establish sessions with dynamicASN internal to a router in the nodes' AS",
            &["IPV4"],
            dynamic_asn_internal,
        ),
        s(
            "should send KEEPALIVEs every keepaliveTime",
            &["IPV4"],
            keepalive_time,
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
    ];
    specs.extend(service_selector::specs());
    specs.extend(services::specs());
    specs.extend(changes::specs());
    specs.extend(node_selector::specs());
    specs.extend(peer_selector::specs());
    specs.extend(bfd::specs());
    specs.extend(graceful_restart::specs());
    specs.extend(unnumbered::specs());
    specs
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

/// Upstream's dev-env BGP pool of the family (`v4PoolAddresses`,
/// `v6PoolAddresses`: 256 and 16 addresses), which its specs use whole.
fn upstream_pool(v6: bool) -> &'static str {
    if v6 {
        "fc00:f853:ccd:e799::/124"
    } else {
        "192.168.10.0/24"
    }
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
    routers::add_peers(&mut config, &first, &[v6], Passwords::OneSecret, &peer)?;
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
    let (mut config, routers, peers) =
        routers::peered_with(ctx, v6, Passwords::OneSecret, &json!({}))?;
    pool_and_advertisement(&mut config, &[pool_of(v6)], ad)?;
    Ok((config, routers, peers))
}

/// Two pools of the family, as upstream's two-pool entries (a /24 and
/// another /24 in IPv4, two /116 in IPv6: outside every node network).
fn two_pools(v6: bool) -> [&'static str; 2] {
    if v6 {
        ["fc00:f853:ccd:e799::/116", "fc00:f853:ccd:e800::/116"]
    } else {
        ["192.168.10.0/24", "192.168.20.0/24"]
    }
}

/// A web service of the family with `labels`, from `pool` if given; its
/// address.
fn service(ctx: &Ctx, name: &str, v6: bool, labels: Value, pool: Option<&str>) -> Result<IpAddr> {
    service_with(ctx, name, v6, labels, pool, json!({}))
}

/// [`service`] with `extra` merged into the Service.
fn service_with(
    ctx: &Ctx,
    name: &str,
    v6: bool,
    labels: Value,
    pool: Option<&str>,
    extra: Value,
) -> Result<IpAddr> {
    let family = if v6 { "IPv6" } else { "IPv4" };
    let mut body = json!({
        "metadata": { "labels": labels },
        "spec": { "ipFamilies": [family], "ipFamilyPolicy": "SingleStack" },
    });
    if let Some(pool) = pool {
        body["metadata"]["annotations"] = json!({ "metallb.io/address-pool": pool });
    }
    metallb::merge(&mut body, &extra);
    let ips = web_service(ctx, name, body)?;
    ips.first()
        .copied()
        .with_context(|| format!("{name} got no address"))
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
    let (_config, routers, _) = routers::peered_with(ctx, v6, Passwords::AllSecrets, &json!({}))?;
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

/// Upstream's "should be exposed by the controller": before any service
/// the controller counts the pool's addresses (none in use) and every
/// speaker has each router's session up with nothing announced; with a
/// service, one address is in use and every speaker reports the prefix
/// announced to each router, its updates and the service announced.
fn metrics(ctx: &Ctx, v6: bool) -> Result<()> {
    // Upstream's dev-env pools: 256 and 16 addresses.
    let (pool, total) = (upstream_pool(v6), if v6 { 16.0 } else { 256.0 });
    let (mut config, routers) = routers::peered(ctx, v6)?;
    config.pool("bgp-test", json!({ "addresses": [pool] }))?;
    config.bgp_advertisement("empty", json!({}))?;
    routers::wait_sessions(ctx, &routers, &all_hops(ctx, v6), WAIT)?;
    let in_use = |want: f64| {
        eventually(
            WAIT,
            &format!("the controller's gauges: {want} of {total} addresses in use"),
            || {
                let text = ctx.cluster().controller_metrics()?;
                let pool = "pool=\"bgp-test\"";
                let used = sample(&text, "metallb_allocator_addresses_in_use_total", &[pool]);
                let all = sample(&text, "metallb_allocator_addresses_total", &[pool]);
                if used == Some(want) && all == Some(total) {
                    Ok(Some(()))
                } else {
                    anyhow::bail!("in use {used:?}, total {all:?}")
                }
            },
        )
    };
    in_use(0.0)?;
    let peer_label = |r: &BgpRouter| -> Result<String> {
        let address = r.address(v6).context("router of the family")?;
        Ok(format!(
            "peer=\"{}\"",
            std::net::SocketAddr::new(address, r.port)
        ))
    };
    for node in nodes(ctx) {
        for r in &routers {
            let peer = peer_label(r)?;
            eventually(
                WAIT,
                &format!("{node}'s session with {} up, nothing announced", r.name),
                || {
                    let text = speaker_metrics(ctx, &node)?;
                    let up = sample(&text, "metallb_bgp_session_up", &[&peer]);
                    let announced = sample(&text, "metallb_bgp_announced_prefixes_total", &[&peer]);
                    if up == Some(1.0) && announced == Some(0.0) {
                        Ok(Some(()))
                    } else {
                        anyhow::bail!("up {up:?} announced {announced:?}")
                    }
                },
            )?;
        }
    }
    backends(ctx, &[])?;
    let family = if v6 { "IPv6" } else { "IPv4" };
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "ipFamilies": [family], "ipFamilyPolicy": "SingleStack" } }),
    )?;
    in_use(1.0)?;
    routers::wait_route(ctx, &routers, host_route(ips[0]), &all_hops(ctx, v6), WAIT)?;
    let service = format!("service=\"{}/web\"", ctx.namespace());
    for node in nodes(ctx) {
        for r in &routers {
            let peer = peer_label(r)?;
            eventually(
                WAIT,
                &format!("BGP metrics of {node}'s session with {}", r.name),
                || {
                    let text = speaker_metrics(ctx, &node)?;
                    let up = sample(&text, "metallb_bgp_session_up", &[&peer]);
                    let announced = sample(&text, "metallb_bgp_announced_prefixes_total", &[&peer]);
                    let updates = sample(&text, "metallb_bgp_updates_total", &[&peer]);
                    let announced_svc = sample(
                        &text,
                        "metallb_speaker_announced",
                        &["protocol=\"bgp\"", &service, &format!("node=\"{node}\"")],
                    );
                    if up == Some(1.0)
                        && announced == Some(1.0)
                        && updates.is_some_and(|u| u >= 1.0)
                        && announced_svc == Some(1.0)
                    {
                        Ok(Some(()))
                    } else {
                        anyhow::bail!(
                            "up {up:?} announced {announced:?} updates {updates:?} service {announced_svc:?}"
                        )
                    }
                },
            )?;
        }
    }
    Ok(())
}

fn metrics_v4(ctx: &Ctx) -> Result<()> {
    metrics(ctx, false)
}

fn metrics_v6(ctx: &Ctx) -> Result<()> {
    metrics(ctx, true)
}

fn dual_stack(ctx: &Ctx) -> Result<()> {
    let all = ctx.cluster().bgp_routers();
    let mut config = Config::new(ctx)?;
    let mut peers = routers::add_peers(
        &mut config,
        &all,
        &[false, true],
        Passwords::OneSecret,
        &json!({}),
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
