//! The routers a BGP spec runs against: every router the cluster has
//! (the lab: upstream's four, iBGP and eBGP, single-hop and multi-hop;
//! kind: its one), a BGPPeer for each in the spec's family, as upstream's
//! `PeersForContainers` makes them, and the checks run on each router in
//! turn, as upstream's specs loop over `FRRContainers`.
//!
//! Every router expects a TCP MD5 password; [`SECRET_ROUTER`]'s BGPPeer
//! takes it from a Secret (`passwordSecret`), the others inline, unless a
//! spec asks for every one through a Secret ([`Passwords::AllSecrets`]).
//! The routers themselves are set up once, with the lab; a spec only
//! makes BGPPeers.

use super::{WAIT, all_hops, host_route};
use crate::Ctx;
use crate::metallb::{self, Config};
use crate::suites::l2::{SERVICE_HTTP_PORT, names_a_node};
use anyhow::{Result, bail, ensure};
use devenv::frr::{AddressFamily, BgpPath, BgpRouter};
use devenv::wait::{eventually, throughout};
use ipnet::IpNet;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

/// How long a service must stay unannounced, as upstream's `Consistently`.
pub(super) const ABSENT_FOR: Duration = Duration::from_secs(5);

/// The router whose BGPPeer names its password through `passwordSecret`.
pub const SECRET_ROUTER: &str = "ebgp-multi-hop";

/// How the BGPPeers carry the routers' passwords.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passwords {
    /// [`SECRET_ROUTER`]'s through a Secret, the others inline.
    OneSecret,
    /// Every one through a Secret (upstream's "with Secret Ref set").
    AllSecrets,
}

/// Every BGP router of the cluster that has an address of the family; an
/// error naming the cluster when it has none.
pub fn routers(ctx: &Ctx, v6: bool) -> Result<Vec<BgpRouter>> {
    let all = ctx.cluster().bgp_routers();
    let of_family: Vec<BgpRouter> = all
        .into_iter()
        .filter(|r| r.address(v6).is_some())
        .collect();
    if of_family.is_empty() {
        bail!(
            "cluster {:?} has no {} BGP router (start it with --protocol bgp)",
            ctx.cluster().name(),
            if v6 { "IPv6" } else { "IPv4" }
        );
    }
    Ok(of_family)
}

/// The Secret name upstream's `GetBGPPeerSecretName` gives a router's
/// password: `<asn>-<port>-secret`.
pub fn secret_name(router: &BgpRouter) -> String {
    format!("{}-{}-secret", router.asn, router.port)
}

/// Creates a BGPPeer for each of `routers` and each family of `families`
/// (`false`: IPv4) it has an address of, named `<router>-v4` /
/// `<router>-v6` (the specs' hold time, then `extra` merged into each
/// spec), and the Secrets `passwords` asks for; returns the peer names.
pub fn add_peers(
    config: &mut Config<'_>,
    routers: &[BgpRouter],
    families: &[bool],
    passwords: Passwords,
    extra: &Value,
) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut secrets = BTreeSet::new();
    for &v6 in families {
        for r in routers {
            let Some(address) = r.address(v6) else {
                continue;
            };
            let mut spec = r.peer_spec(address);
            spec["holdTime"] = json!(super::hold_time());
            if let Some(password) = &r.password {
                if passwords == Passwords::AllSecrets || r.name == SECRET_ROUTER {
                    let name = secret_name(r);
                    if secrets.insert(name.clone()) {
                        config.secret(
                            &name,
                            "kubernetes.io/basic-auth",
                            json!({ "password": password }),
                        )?;
                    }
                    spec["passwordSecret"] = json!({ "name": name });
                } else {
                    spec["password"] = json!(password);
                }
            }
            metallb::merge(&mut spec, extra);
            let name = peer_name(r, v6);
            config.bgp_peer(&name, spec)?;
            names.push(name);
        }
    }
    if names.is_empty() {
        bail!("no router has an address of the spec's families");
    }
    Ok(names)
}

/// The name [`add_peers`] gives `router`'s BGPPeer of the family
/// (`<router>-v4`, `<router>-v6`), for a BGPAdvertisement's `peers`.
pub(super) fn peer_name(router: &BgpRouter, v6: bool) -> String {
    format!("{}-{}", router.name, if v6 { "v6" } else { "v4" })
}

/// BGPPeers to every router of the family (no pool, no advertisement),
/// as upstream's `PeersForContainers`; the configuration and the routers.
pub(super) fn peered(ctx: &Ctx, v6: bool) -> Result<(Config<'_>, Vec<BgpRouter>)> {
    let (config, routers, _) = peered_with(ctx, v6, Passwords::OneSecret, &json!({}))?;
    Ok((config, routers))
}

/// [`peered`] with the passwords as `passwords` says and `extra` merged
/// into each BGPPeer; the peer names too.
pub(super) fn peered_with<'a>(
    ctx: &'a Ctx,
    v6: bool,
    passwords: Passwords,
    extra: &Value,
) -> Result<(Config<'a>, Vec<BgpRouter>, Vec<String>)> {
    let routers = routers(ctx, v6)?;
    let mut config = Config::new(ctx)?;
    let names = add_peers(&mut config, &routers, &[v6], passwords, extra)?;
    Ok((config, routers, names))
}

/// The addresses whose sessions with `router` are Established.
pub fn established(ctx: &Ctx, router: &BgpRouter) -> Result<BTreeSet<IpAddr>> {
    Ok(ctx
        .cluster()
        .bgp_neighbors_on(&router.name)?
        .into_values()
        .filter(|n| n.established())
        .map(|n| n.address)
        .collect())
}

/// Waits until each of `routers` has Established sessions with exactly
/// `from`.
pub fn wait_sessions(
    ctx: &Ctx,
    routers: &[BgpRouter],
    from: &BTreeSet<IpAddr>,
    timeout: Duration,
) -> Result<()> {
    for r in routers {
        eventually(
            timeout,
            &format!("BGP sessions of {} from {from:?}", r.name),
            || {
                let up = established(ctx, r)?;
                if up == *from {
                    Ok(Some(()))
                } else {
                    bail!("established: {up:?}")
                }
            },
        )?;
    }
    Ok(())
}

/// `router`'s paths for `prefix`.
pub fn paths(ctx: &Ctx, router: &BgpRouter, prefix: IpNet) -> Result<Vec<BgpPath>> {
    let family = if prefix.addr().is_ipv6() {
        AddressFamily::Ipv6
    } else {
        AddressFamily::Ipv4
    };
    Ok(ctx
        .cluster()
        .bgp_routes_on(&router.name, family)?
        .remove(&prefix)
        .unwrap_or_default())
}

/// Waits until each of `routers` holds `prefix` through exactly
/// `next_hops` (none: withdrawn); returns each router's paths.
pub fn wait_route(
    ctx: &Ctx,
    routers: &[BgpRouter],
    prefix: IpNet,
    next_hops: &BTreeSet<IpAddr>,
    timeout: Duration,
) -> Result<Vec<(String, Vec<BgpPath>)>> {
    let mut out = Vec::new();
    for r in routers {
        let p = eventually(
            timeout,
            &format!("{prefix} via {next_hops:?} at {}", r.name),
            || {
                let p = paths(ctx, r, prefix)?;
                let got: BTreeSet<IpAddr> = p.iter().flat_map(|p| p.nexthops.clone()).collect();
                if got == *next_hops {
                    Ok(Some(p))
                } else {
                    bail!("next hops {got:?}")
                }
            },
        )?;
        out.push((r.name.clone(), p));
    }
    Ok(out)
}

/// Upstream's `validateService` for ETP=Cluster: each of `routers` holds
/// the service's host route through every node, and the external host
/// reaches it (see [`advertised_from`]).
pub(super) fn advertised(ctx: &Ctx, routers: &[BgpRouter], ip: IpAddr) -> Result<()> {
    advertised_from(ctx, routers, ip, &all_hops(ctx, ip.is_ipv6()))
}

/// Upstream's `validateService` and `checkServiceOnlyOnNodes`: each of
/// `routers` holds `ip`'s host route through exactly `next_hops` (the
/// announcing nodes' addresses). When `routers` has the cluster's first
/// router, whose routes are the external host's, the external host
/// reaches `ip` through it and a backend answers (upstream fetches from
/// each FRR container; ours can only from the external host).
pub(super) fn advertised_from(
    ctx: &Ctx,
    routers: &[BgpRouter],
    ip: IpAddr,
    next_hops: &BTreeSet<IpAddr>,
) -> Result<()> {
    wait_route(ctx, routers, host_route(ip), next_hops, WAIT)?;
    let first = ctx.cluster().bgp_routers().into_iter().next();
    if !first.is_some_and(|f| routers.iter().any(|r| r.name == f.name)) {
        return Ok(());
    }
    let body = eventually(WAIT, &format!("HTTP on {ip} through the router"), || {
        Ok(crate::external::http_get(ctx, ip, SERVICE_HTTP_PORT, "/hostname").ok())
    })?;
    ensure!(
        names_a_node(ctx, &body),
        "{ip} served {body:?}, not a node's hostname"
    );
    Ok(())
}

/// Which of `routers` hold a route for `ip`'s host prefix.
pub(super) fn holders(ctx: &Ctx, routers: &[BgpRouter], ip: IpAddr) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for r in routers {
        if !paths(ctx, r, host_route(ip))?.is_empty() {
            out.push(r.name.clone());
        }
    }
    Ok(out)
}

/// Upstream's `Consistently(checkServiceNotAdvertised)`: none of
/// `routers` holds `ip` for [`ABSENT_FOR`] (call it after something else
/// of the same configuration was seen announced, so the absence is not
/// mere delay).
pub(super) fn stays_unadvertised(
    ctx: &Ctx,
    routers: &[BgpRouter],
    ip: IpAddr,
    why: &str,
) -> Result<()> {
    throughout(ABSENT_FOR, &format!("{ip} unannounced ({why})"), || {
        let at = holders(ctx, routers, ip)?;
        Ok((!at.is_empty()).then(|| format!("announced to {at:?}")))
    })
}

/// Waits until none of `routers` holds `ip`.
pub(super) fn withdrawn(ctx: &Ctx, routers: &[BgpRouter], ip: IpAddr) -> Result<()> {
    wait_route(ctx, routers, host_route(ip), &BTreeSet::new(), WAIT).map(|_| ())
}

/// The names FRR prints well-known community values under (`show bgp`
/// JSON uses the RFC's names, older releases camel case).
fn printed(value: &str) -> &[&str] {
    match value {
        "65535:65281" => &["no-export", "noExport"],
        "65535:65282" => &["no-advertise", "noAdvertise"],
        "65535:65283" => &["local-AS", "localAs"],
        "65535:0" => &["graceful-shutdown", "gracefulShutdown"],
        _ => &[],
    }
}

pub(super) fn has_community(path: &BgpPath, value: &str) -> bool {
    path.communities
        .iter()
        .any(|c| c == value || printed(value).contains(&c.as_str()))
}

/// Waits until `check` holds for `prefix`'s paths at every router.
pub(super) fn paths_hold(
    ctx: &Ctx,
    routers: &[BgpRouter],
    prefix: IpNet,
    what: &str,
    check: impl Fn(&BgpRouter, &[BgpPath]) -> Result<()>,
) -> Result<()> {
    for r in routers {
        eventually(WAIT, &format!("{prefix} at {}: {what}", r.name), || {
            let paths = paths(ctx, r, prefix)?;
            if paths.is_empty() {
                bail!("no route");
            }
            check(r, &paths)?;
            Ok(Some(()))
        })?;
    }
    Ok(())
}
