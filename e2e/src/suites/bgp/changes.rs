//! Upstream's configuration specs of `bgptests/bgp.go`: a router ID on
//! the peers, pools and services added one after another, advertisement
//! attributes reaching the routers for one pool and not another, two
//! advertisements of one pool joining their communities, and an
//! advertisement changed in place (communities, localPref, aggregation).
//! Each runs against every router of its family; LOCAL_PREF is checked
//! on the iBGP routers only, as upstream does (eBGP does not carry it).

use super::routers::{self, Passwords};
use super::routers::{advertised, has_community, paths_hold, peered};
use super::service_with;
use super::{WAIT, all_hops, host_route, upstream_pool};
use crate::metallb::Config;
use crate::suites::l2::backends;
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::frr::{BgpPath, BgpRouter};
use ipnet::IpNet;
use serde_json::{Value, json};
use std::net::IpAddr;

/// RFC 1997's NO_ADVERTISE, upstream's `CommunityNoAdv`.
const NO_ADVERTISE: &str = "65535:65282";

/// The suite's specs, named as upstream's tables and entries.
pub fn specs() -> Vec<Spec> {
    macro_rules! entry {
        ($name:literal, $tag:literal, $body:expr) => {{
            fn run(ctx: &Ctx) -> Result<()> {
                $body(ctx)
            }
            Spec::new("BGP", $name, &[$tag], run)
        }};
    }
    macro_rules! table {
        ($name:literal, $f:ident) => {
            [
                entry!($name, "IPV4", |ctx| $f(ctx, false)),
                entry!($name, "IPV6", |ctx| $f(ctx, true)),
            ]
        };
    }
    let mut specs = Vec::new();
    specs.extend(table!(
        "configure peers with routerid and validate external containers are paired with nodes",
        router_id
    ));
    specs.extend(table!(
        "validate configuration changes should work after subsequent configuration updates",
        subsequent_updates
    ));
    specs.extend([
        entry!(
            "validate configuration changes configure bgp advertisement and verify it gets propagated - community and localpref",
            "IPV4",
            |ctx| propagated(ctx, false, Attributes::both(NO_ADVERTISE, None))
        ),
        entry!(
            "validate configuration changes configure bgp advertisement and verify it gets propagated - localpref",
            "IPV4",
            |ctx| propagated(ctx, false, Attributes::local_pref())
        ),
        entry!(
            "validate configuration changes configure bgp advertisement and verify it gets propagated - community",
            "IPV4",
            |ctx| propagated(ctx, false, Attributes::community(NO_ADVERTISE, None))
        ),
        entry!(
            "validate configuration changes configure bgp advertisement and verify it gets propagated - community from CRD",
            "IPV4",
            |ctx| propagated(ctx, false, Attributes::both("NO_ADVERTISE", Some(NO_ADVERTISE)))
        ),
        entry!(
            "validate configuration changes configure bgp advertisement and verify it gets propagated - ip pool selector",
            "IPV4",
            |ctx| propagated(
                ctx,
                false,
                Attributes {
                    by_selector: true,
                    ..Attributes::both(NO_ADVERTISE, None)
                }
            )
        ),
        entry!(
            "validate configuration changes configure bgp advertisement and verify it gets propagated - community and localpref",
            "IPV6",
            |ctx| propagated(ctx, true, Attributes::both(NO_ADVERTISE, None))
        ),
        entry!(
            "validate configuration changes configure bgp advertisement and verify it gets propagated - community",
            "IPV6",
            |ctx| propagated(ctx, true, Attributes::community(NO_ADVERTISE, None))
        ),
        entry!(
            "validate configuration changes configure bgp advertisement and verify it gets propagated - community from CRD",
            "IPV6",
            |ctx| propagated(ctx, true, Attributes::community("NO_ADVERTISE", Some(NO_ADVERTISE)))
        ),
        entry!(
            "validate configuration changes configure bgp advertisement and verify it gets propagated - localpref",
            "IPV6",
            |ctx| propagated(ctx, true, Attributes::local_pref())
        ),
        entry!(
            "validate configuration changes - overlapping bgp advertisements union communities for the same prefix",
            "IPV4",
            union_communities
        ),
    ]);
    specs.extend(table!(
        "BGP advertisement updates of communities and localpref and aggregation length",
        updates
    ));
    specs
}

fn router_id(ctx: &Ctx, v6: bool) -> Result<()> {
    let (_config, routers, _) = routers::peered_with(
        ctx,
        v6,
        Passwords::OneSecret,
        &json!({ "routerID": "10.10.10.1" }),
    )?;
    let hops = all_hops(ctx, v6);
    routers::wait_sessions(ctx, &routers, &hops, WAIT)?;
    for r in &routers {
        let neighbors = ctx.cluster().bgp_neighbors_on(&r.name)?;
        for hop in &hops {
            let id = neighbors.get(hop).and_then(|n| n.remote_router_id);
            ensure!(
                id == Some("10.10.10.1".parse()?),
                "{}: the session from {hop} has router ID {id:?}",
                r.name
            );
        }
    }
    Ok(())
}

fn subsequent_updates(ctx: &Ctx, v6: bool) -> Result<()> {
    let (mut config, routers) = peered(ctx, v6)?;
    config.bgp_advertisement("empty", json!({}))?;
    backends(ctx, &[])?;
    let base: IpAddr = if v6 {
        "fc00:f853:ccd:e799::".parse()?
    } else {
        "192.168.10.0".parse()?
    };
    let mut services: Vec<(String, IpAddr)> = Vec::new();
    for i in 0..2u8 {
        // Upstream's pools: addresses 1-10 of the range, then 11-20.
        let (first, last) = (nth(base, 10 * i + 1), nth(base, 10 * i + 10));
        let pool = format!("test-addresspool{}", i + 1);
        config.pool(&pool, json!({ "addresses": [format!("{first}-{last}")] }))?;
        let name = format!("svc{}", i + 1);
        let ip = service_with(ctx, &name, v6, json!({}), Some(&pool), json!({}))?;
        ensure!(
            first <= ip && ip <= last,
            "{name} got {ip}, outside {first}-{last}"
        );
        services.push((name, ip));
        for (name, ip) in &services {
            let now = crate::metallb::ingress(&crate::metallb::get_service(ctx, name)?);
            ensure!(now == [*ip], "{name} moved from {ip} to {now:?}");
            advertised(ctx, &routers, *ip)?;
        }
    }
    Ok(())
}

/// The address `n` after `base`.
fn nth(base: IpAddr, n: u8) -> IpAddr {
    match base {
        IpAddr::V4(a) => IpAddr::V4((u32::from(a) + u32::from(n)).into()),
        IpAddr::V6(a) => IpAddr::V6((u128::from(a) + u128::from(n)).into()),
    }
}

/// One entry of upstream's propagation table: the advertisement's
/// community (a value, or an alias and the value it stands for), its
/// localPref, and whether it selects its pool by label.
struct Attributes {
    community: Option<(&'static str, &'static str)>,
    local_pref: Option<u32>,
    by_selector: bool,
}

impl Attributes {
    fn both(community: &'static str, value: Option<&'static str>) -> Self {
        Self {
            local_pref: Some(50),
            ..Self::community(community, value)
        }
    }

    fn community(community: &'static str, value: Option<&'static str>) -> Self {
        Self {
            community: Some((community, value.unwrap_or(community))),
            local_pref: None,
            by_selector: false,
        }
    }

    fn local_pref() -> Self {
        Self {
            community: None,
            local_pref: Some(50),
            by_selector: false,
        }
    }
}

fn propagated(ctx: &Ctx, v6: bool, attrs: Attributes) -> Result<()> {
    let (with, without) = if v6 {
        (
            "fc00:f853:ccd:e799::0-fc00:f853:ccd:e799::18",
            "fc00:f853:ccd:e799::19-fc00:f853:ccd:e799::26",
        )
    } else {
        ("192.168.10.0/24", "192.168.16.0/24")
    };
    let (mut config, routers) = peered(ctx, v6)?;
    advertise_one_of_two_pools(&mut config, &attrs, with, without)?;
    sessions_and_backends(ctx, &routers, v6)?;
    let [a, b, c] = pinned_services(ctx, v6, with, without)?;
    for ip in [a, b, c] {
        advertised(ctx, &routers, ip)?;
    }
    for ip in [a, b] {
        paths_hold(
            ctx,
            &routers,
            host_route(ip),
            "the advertisement's attributes",
            |r, p| attrs.expect(r, p, true),
        )?;
    }
    paths_hold(ctx, &routers, host_route(c), "none of them", |r, p| {
        attrs.expect(r, p, false)
    })
}

/// Upstream's propagation setup: pool `bgp-with-advertisement` (range
/// `with`) advertised with `attrs` (by name or label, its community
/// alias defined where it has one), pool `bgp-with-no-advertisement`
/// (range `without`) by an advertisement of no attributes.
fn advertise_one_of_two_pools(
    config: &mut Config<'_>,
    attrs: &Attributes,
    with: &str,
    without: &str,
) -> Result<()> {
    if attrs.community.is_some_and(|(alias, value)| alias != value) {
        let (alias, value) = attrs.community.context("alias")?;
        config.community(
            "community1",
            json!({ "communities": [{ "name": alias, "value": value }] }),
        )?;
    }
    config.pool_labelled(
        "bgp-with-advertisement",
        json!({ "test": "bgp-with-advertisement" }),
        json!({ "addresses": [with] }),
    )?;
    config.pool(
        "bgp-with-no-advertisement",
        json!({ "addresses": [without] }),
    )?;
    config.bgp_advertisement(
        "empty",
        json!({ "ipAddressPools": ["bgp-with-no-advertisement"] }),
    )?;
    let mut ad = if attrs.by_selector {
        json!({ "ipAddressPoolSelectors": [{ "matchLabels": { "test": "bgp-with-advertisement" } }] })
    } else {
        json!({ "ipAddressPools": ["bgp-with-advertisement"] })
    };
    if let Some((alias, _)) = attrs.community {
        ad["communities"] = json!([alias]);
    }
    if let Some(pref) = attrs.local_pref {
        ad["localPref"] = json!(pref);
    }
    config.bgp_advertisement("advertisement", ad)
}

/// Every router's sessions up, and the backends the services need.
fn sessions_and_backends(ctx: &Ctx, routers: &[BgpRouter], v6: bool) -> Result<()> {
    routers::wait_sessions(ctx, routers, &all_hops(ctx, v6), WAIT)?;
    backends(ctx, &[])
}

/// Three services pinned to addresses: the first two of range `with`,
/// the first of `without`.
fn pinned_services(ctx: &Ctx, v6: bool, with: &str, without: &str) -> Result<[IpAddr; 3]> {
    let first = |range: &str| -> Result<IpAddr> {
        Ok(range.split(['-', '/']).next().context("a range")?.parse()?)
    };
    let pinned = |ip: IpAddr| json!({ "spec": { "loadBalancerIP": ip.to_string() } });
    let with_ip = first(with)?;
    let a = service_with(
        ctx,
        "service-with-adv",
        v6,
        json!({}),
        None,
        pinned(with_ip),
    )?;
    let b = service_with(
        ctx,
        "service-with-adv1",
        v6,
        json!({}),
        None,
        pinned(nth(with_ip, 1)),
    )?;
    let c = service_with(
        ctx,
        "service-no-adv",
        v6,
        json!({}),
        None,
        pinned(first(without)?),
    )?;
    Ok([a, b, c])
}

impl Attributes {
    /// Whether `r`'s `paths` carry the attributes (`marked`) or none of
    /// them; LOCAL_PREF only on iBGP routers.
    fn expect(&self, r: &BgpRouter, paths: &[BgpPath], marked: bool) -> Result<()> {
        if let Some((_, value)) = self.community {
            let has = paths.iter().all(|p| has_community(p, value));
            let lacks = paths.iter().all(|p| !has_community(p, value));
            ensure!(
                if marked { has } else { lacks },
                "communities {:?}",
                paths.iter().map(|p| &p.communities).collect::<Vec<_>>()
            );
        }
        if let (Some(pref), false) = (self.local_pref, r.ebgp()) {
            let prefs: Vec<Option<u32>> = paths.iter().map(|p| p.local_pref).collect();
            let ok = if marked {
                prefs.iter().all(|p| *p == Some(pref))
            } else {
                prefs.iter().all(|p| *p != Some(pref))
            };
            ensure!(ok, "LOCAL_PREF {prefs:?}");
        }
        Ok(())
    }
}

fn union_communities(ctx: &Ctx) -> Result<()> {
    const A: &str = "65000:100";
    const B: &str = "65000:200";
    let (mut config, routers) = peered(ctx, false)?;
    config.pool(
        "bgp-overlap-pool",
        json!({ "addresses": [upstream_pool(false)] }),
    )?;
    for (name, community) in [("overlap-adv-a", A), ("overlap-adv-b", B)] {
        config.bgp_advertisement(
            name,
            json!({ "ipAddressPools": ["bgp-overlap-pool"], "communities": [community] }),
        )?;
    }
    sessions_and_backends(ctx, &routers, false)?;
    let ip = service_with(
        ctx,
        "svc-ovlp-comm",
        false,
        json!({}),
        None,
        json!({ "spec": { "loadBalancerIP": "192.168.10.0" } }),
    )?;
    advertised(ctx, &routers, ip)?;
    paths_hold(ctx, &routers, host_route(ip), "both communities", |_, p| {
        ensure!(
            p.iter().all(|p| has_community(p, A) && has_community(p, B)),
            "communities {:?}",
            p.iter().map(|p| &p.communities).collect::<Vec<_>>()
        );
        Ok(())
    })
}

fn updates(ctx: &Ctx, v6: bool) -> Result<()> {
    const CUSTOM: &str = "123:456";
    let pool = upstream_pool(v6);
    let (length, ip) = if v6 {
        (124, "fc00:f853:ccd:e799::")
    } else {
        (24, "192.168.10.0")
    };
    let (mut config, routers) = peered(ctx, v6)?;
    config.pool("bgp-test", json!({ "addresses": [pool] }))?;
    config.bgp_advertisement(
        "adv-updates",
        json!({ "communities": [NO_ADVERTISE], "localPref": 200, "ipAddressPools": ["bgp-test"] }),
    )?;
    sessions_and_backends(ctx, &routers, v6)?;
    let ip = service_with(
        ctx,
        "bgp-adv-updates-svc",
        v6,
        json!({}),
        None,
        json!({ "spec": { "loadBalancerIP": ip } }),
    )?;
    advertised(ctx, &routers, ip)?;
    let carries = |community: &'static str, pref: u32| {
        move |r: &BgpRouter, p: &[BgpPath]| -> Result<()> {
            ensure!(
                p.iter().all(|p| has_community(p, community)),
                "communities {:?}",
                p.iter().map(|p| &p.communities).collect::<Vec<_>>()
            );
            if !r.ebgp() {
                ensure!(
                    p.iter().all(|p| p.local_pref == Some(pref)),
                    "LOCAL_PREF {:?}",
                    p.iter().map(|p| p.local_pref).collect::<Vec<_>>()
                );
            }
            Ok(())
        }
    };
    paths_hold(
        ctx,
        &routers,
        host_route(ip),
        "NO_ADVERTISE and LOCAL_PREF 200",
        carries(NO_ADVERTISE, 200),
    )?;
    let mut spec: Value =
        json!({ "communities": [CUSTOM], "localPref": 300, "ipAddressPools": ["bgp-test"] });
    spec[if v6 {
        "aggregationLengthV6"
    } else {
        "aggregationLength"
    }] = json!(length);
    config.replace("BGPAdvertisement", "adv-updates", spec)?;
    let aggregate = IpNet::new(ip, length)?.trunc();
    routers::wait_route(ctx, &routers, aggregate, &all_hops(ctx, v6), WAIT)?;
    paths_hold(
        ctx,
        &routers,
        aggregate,
        "the new community and LOCAL_PREF 300",
        carries(CUSTOM, 300),
    )?;
    routers::wait_route(ctx, &routers, host_route(ip), &Default::default(), WAIT)
        .map(|_| ())
        .context("the host route stayed beside the aggregate")
}
