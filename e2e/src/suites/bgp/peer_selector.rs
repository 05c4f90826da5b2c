//! Upstream's "BGP Peer Selector" tables (`bgptests/bgppeer_selector.go`),
//! the entries its native CI runs: a BGPAdvertisement's `peers` list
//! limits which routers it announces to. Every entry peers with every
//! router of its family; the advertisements name two of them by their
//! BGPPeers (`<router>-v4` / `<router>-v6`), chosen as upstream's
//! `BeforeEach` chooses its containers: the first two that are not a hop
//! away (the lab: `ibgp-single-hop`, the external host's, and
//! `ebgp-single-hop`). A cluster without two such routers skips, as
//! upstream does.

use super::routers::{
    self, ABSENT_FOR, advertised, advertised_from, peer_name, peered, stays_unadvertised,
};
use super::{WAIT, all_hops, host_route, service, two_pools};
use crate::suites::l2::backends;
use crate::{Ctx, Spec};
use anyhow::Result;
use devenv::frr::BgpRouter;
use devenv::wait::{eventually, throughout};
use serde_json::json;
use std::net::IpAddr;

/// A spec per table and family, named as upstream's `DescribeTable` and
/// `Entry`.
pub fn specs() -> Vec<Spec> {
    [
        family_table!(
            "Peer Selector",
            "A service IP will not be advertised to peers outside the BGPAdvertisement peers list",
            outside_the_list
        ),
        family_table!(
            "Peer Selector",
            "A service advertised through two different bgpadvertisements to two different peers",
            two_peers
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The two routers the advertisements name: the first two single-hop
/// ones of `routers`.
fn pick_two(routers: &[BgpRouter]) -> Result<[BgpRouter; 2]> {
    let mut single_hop = routers.iter().filter(|r| !r.multi_hop).cloned();
    match (single_hop.next(), single_hop.next()) {
        (Some(first), Some(second)) => Ok([first, second]),
        _ => Err(crate::skip("the spec needs two single-hop BGP routers")),
    }
}

/// "A service IP will not be advertised to peers outside the
/// BGPAdvertisement peers list": each of two pools has an advertisement
/// naming one of the chosen routers; each service is announced from every
/// node to its router and to no other; with the `peers` lists removed,
/// both are announced to every router. Upstream fetches each service from
/// its router; ours only from the external host, so the service announced
/// to `ebgp-single-hop` alone is checked by its routes there.
fn outside_the_list(ctx: &Ctx, v6: bool) -> Result<()> {
    let (mut config, routers) = peered(ctx, v6)?;
    let chosen = pick_two(&routers)?;
    let [first_pool, second_pool] = two_pools(v6);
    config.pool("test-addresspool1", json!({ "addresses": [first_pool] }))?;
    config.pool("test-addresspool2", json!({ "addresses": [second_pool] }))?;
    for (i, r) in chosen.iter().enumerate() {
        let n = i + 1;
        config.bgp_advertisement(
            &format!("test-advertisement{n}"),
            json!({
                "ipAddressPools": [format!("test-addresspool{n}")],
                "peers": [peer_name(r, v6)],
            }),
        )?;
    }
    backends(ctx, &[])?;
    let ips = [
        service(ctx, "first-lb", v6, json!({}), Some("test-addresspool1"))?,
        service(ctx, "second-lb", v6, json!({}), Some("test-addresspool2"))?,
    ];
    for (ip, r) in ips.iter().zip(&chosen) {
        advertised_from(ctx, std::slice::from_ref(r), *ip, &all_hops(ctx, v6))?;
        let others: Vec<BgpRouter> = routers
            .iter()
            .filter(|o| o.name != r.name)
            .cloned()
            .collect();
        stays_unadvertised(
            ctx,
            &others,
            *ip,
            &format!("its advertisement names {} only", peer_name(r, v6)),
        )?;
    }
    for n in 1..=2 {
        config.replace(
            "BGPAdvertisement",
            &format!("test-advertisement{n}"),
            json!({ "ipAddressPools": [format!("test-addresspool{n}")] }),
        )?;
    }
    for ip in ips {
        advertised(ctx, &routers, ip)?;
    }
    Ok(())
}

/// "A service advertised through two different bgpadvertisements to two
/// different peers": two advertisements of one pool, each naming one of
/// the chosen routers with its own community; each router holds the
/// service with the community of the advertisement naming it, and no
/// other router holds it with that community (checked over
/// [`ABSENT_FOR`] once both were seen, where upstream waits for the
/// absence).
fn two_peers(ctx: &Ctx, v6: bool) -> Result<()> {
    const COMMUNITIES: [&str; 2] = ["65531:65281", "65532:65282"];
    let (mut config, routers) = peered(ctx, v6)?;
    let chosen = pick_two(&routers)?;
    config.pool(
        "test-addresspool",
        json!({ "addresses": [two_pools(v6)[0]] }),
    )?;
    for (i, (r, community)) in chosen.iter().zip(COMMUNITIES).enumerate() {
        config.bgp_advertisement(
            &format!("test-advertisement{}", i + 1),
            json!({
                "ipAddressPools": ["test-addresspool"],
                "peers": [peer_name(r, v6)],
                "communities": [community],
            }),
        )?;
    }
    backends(ctx, &[])?;
    let ip = service(
        ctx,
        "external-local-lb",
        v6,
        json!({}),
        Some("test-addresspool"),
    )?;
    for (r, community) in chosen.iter().zip(COMMUNITIES) {
        eventually(
            WAIT,
            &format!("{ip} at {} with community {community}", r.name),
            || Ok(carries(ctx, r, ip, community)?.then_some(())),
        )?;
    }
    throughout(
        ABSENT_FOR,
        &format!("{ip} with each community at its advertisement's router only"),
        || {
            for (named, community) in chosen.iter().zip(COMMUNITIES) {
                for r in routers.iter().filter(|r| r.name != named.name) {
                    if carries(ctx, r, ip, community)? {
                        return Ok(Some(format!(
                            "{} holds {ip} with {community}, advertised to {} only",
                            r.name, named.name
                        )));
                    }
                }
            }
            Ok(None)
        },
    )
}

/// Whether `router` holds `ip`'s host route on a path with `community`
/// (upstream's `RoutesForCommunity`).
fn carries(ctx: &Ctx, router: &BgpRouter, ip: IpAddr, community: &str) -> Result<bool> {
    Ok(routers::paths(ctx, router, host_route(ip))?
        .iter()
        .any(|p| p.communities.iter().any(|c| c == community)))
}
