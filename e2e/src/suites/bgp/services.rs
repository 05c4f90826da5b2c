//! Upstream's service-level BGP specs of `bgptests/bgp.go` that the
//! suite's own did not cover: a requested address, a node whose network
//! is unavailable, two services sharing one address, pools written as a
//! range or a prefix, one service announced by both protocols, and the
//! ServiceBGPStatus objects as peers, advertisements and the service
//! change. Each runs against every router of its family.

use super::routers::{advertised, holders, peered};
use super::service_with;
use super::{WAIT, host_route, node_addresses, upstream_pool};
use crate::metallb::{self, Config};
use crate::prober::Prober;
use crate::suites::l2::{self, Net, backends, set_network_unavailable};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::frr::BgpRouter;
use devenv::wait::{eventually, throughout};
use serde_json::json;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

/// The suite's specs, named as upstream's tables and entries.
pub fn specs() -> Vec<Spec> {
    let mut specs = vec![
        Spec::new(
            "BGP",
            "A service of protocol load balancer should work with ETP=cluster - request IPv4 via custom annotation",
            &["IPV4"],
            requested_address,
        ),
        Spec::new(
            "BGP",
            "Service with ETP=cluster - should not be announced from a node with a NetworkUnavailable condition",
            &["IPV4"],
            network_unavailable,
        ),
    ];
    macro_rules! table {
        ($name:literal, $f:ident) => {{
            fn v4(ctx: &Ctx) -> Result<()> {
                $f(ctx, false)
            }
            fn v6(ctx: &Ctx) -> Result<()> {
                $f(ctx, true)
            }
            [
                Spec::new("BGP", $name, &["IPV4"], v4),
                Spec::new("BGP", $name, &["IPV6"], v6),
            ]
        }};
    }
    specs.extend(table!(
        "A load balancer service should work with overlapping IPs",
        overlapping_ips
    ));
    specs.extend(table!(
        "validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes - test AddressPool defined by address range",
        pool_by_range
    ));
    specs.extend(table!(
        "validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes - test AddressPool defined by network prefix",
        pool_by_prefix
    ));
    specs.extend(table!(
        "A service of protocol load balancer should work with two protocols",
        two_protocols
    ));
    specs.extend(table!("ServiceBGPStatus", bgp_status));
    specs
}

/// BGPPeers to every router of the family, one pool with `addresses` and
/// an advertisement of every pool (upstream's empty one).
fn configured<'a>(
    ctx: &'a Ctx,
    v6: bool,
    addresses: &[&str],
) -> Result<(Config<'a>, Vec<BgpRouter>)> {
    let (mut config, routers) = peered(ctx, v6)?;
    config.pool("bgp-test", json!({ "addresses": addresses }))?;
    config.bgp_advertisement("empty", json!({}))?;
    backends(ctx, &[])?;
    Ok((config, routers))
}

fn requested_address(ctx: &Ctx) -> Result<()> {
    let (_config, routers) = configured(ctx, false, &[upstream_pool(false)])?;
    let ip = service_with(
        ctx,
        "web",
        false,
        json!({}),
        None,
        json!({ "metadata": { "annotations": { "metallb.io/loadBalancerIPs": "192.168.10.100" } } }),
    )?;
    ensure!(
        ip.to_string() == "192.168.10.100",
        "the service got {ip}, not the address it asked for"
    );
    advertised(ctx, &routers, ip)
}

/// Restores the node's NetworkUnavailable condition when the spec ends,
/// also on failure.
struct Unavailable<'a> {
    ctx: &'a Ctx,
    node: String,
}

impl Drop for Unavailable<'_> {
    fn drop(&mut self) {
        if let Err(e) = set_network_unavailable(self.ctx, &self.node, false) {
            eprintln!("e2e: could not make {} available again: {e}", self.node);
        }
    }
}

fn network_unavailable(ctx: &Ctx) -> Result<()> {
    let (_config, routers) = configured(ctx, false, &[upstream_pool(false)])?;
    let ip = service_with(ctx, "web", false, json!({}), None, json!({}))?;
    advertised(ctx, &routers, ip)?;
    let nodes = node_addresses(ctx, false);
    let (first, first_ip) = nodes.first().context("no node")?.clone();
    let _restore = Unavailable {
        ctx,
        node: first.clone(),
    };
    set_network_unavailable(ctx, &first, true)?;
    let others: BTreeSet<IpAddr> = nodes
        .iter()
        .filter(|(n, _)| *n != first)
        .map(|(_, a)| *a)
        .collect();
    ensure!(!others.is_empty(), "the spec needs a second node");
    // Every router keeps the route, now through the available nodes only.
    super::routers::wait_route(ctx, &routers, host_route(ip), &others, WAIT)
        .with_context(|| format!("{first} ({first_ip}) kept announcing {ip}"))?;
    Ok(())
}

fn overlapping_ips(ctx: &Ctx, v6: bool) -> Result<()> {
    let (_config, routers) = configured(ctx, v6, &[upstream_pool(v6)])?;
    // Upstream's `GetIPFromRangeByIndex(pool, 1)`: the pool's second
    // address.
    let shared = if v6 {
        "fc00:f853:ccd:e799::1"
    } else {
        "192.168.10.1"
    };
    let on = |port: u16| {
        json!({
            "metadata": { "annotations": { "metallb.io/allow-shared-ip": "foo" } },
            "spec": {
                "loadBalancerIP": shared,
                "ports": [{ "name": "http", "port": port, "targetPort": l2::HTTP_PORT, "protocol": "TCP" }],
            },
        })
    };
    let first = service_with(
        ctx,
        "first-service",
        v6,
        json!({}),
        None,
        on(l2::SERVICE_HTTP_PORT),
    )?;
    let second = service_with(
        ctx,
        "second-service",
        v6,
        json!({}),
        None,
        on(l2::SERVICE_HTTP_PORT + 1),
    )?;
    ensure!(
        first.to_string() == shared && second == first,
        "the services got {first} and {second}, not both {shared}"
    );
    advertised(ctx, &routers, first)?;
    let body = eventually(
        WAIT,
        &format!(
            "HTTP on {first}:{} through the router",
            l2::SERVICE_HTTP_PORT + 1
        ),
        || Ok(crate::external::http_get(ctx, first, l2::SERVICE_HTTP_PORT + 1, "/hostname").ok()),
    )?;
    ensure!(
        l2::names_a_node(ctx, &body),
        "second-service served {body:?}"
    );
    Ok(())
}

/// Upstream's pool entries: the service's address lies in the pool and
/// every router reaches it through every node.
fn pool_entry(ctx: &Ctx, v6: bool, address: &str, contains: impl Fn(IpAddr) -> bool) -> Result<()> {
    let (_config, routers) = configured(ctx, v6, &[address])?;
    let ip = service_with(ctx, "external-local-lb", v6, json!({}), None, json!({}))?;
    ensure!(contains(ip), "{ip} is outside the pool {address}");
    advertised(ctx, &routers, ip)
}

fn pool_by_range(ctx: &Ctx, v6: bool) -> Result<()> {
    let (range, first, last): (&str, IpAddr, IpAddr) = if v6 {
        (
            "fc00:f853:ccd:e799::0-fc00:f853:ccd:e799::18",
            "fc00:f853:ccd:e799::".parse()?,
            "fc00:f853:ccd:e799::18".parse()?,
        )
    } else {
        (
            "192.168.10.0-192.168.10.18",
            "192.168.10.0".parse()?,
            "192.168.10.18".parse()?,
        )
    };
    pool_entry(ctx, v6, range, |ip| first <= ip && ip <= last)
}

fn pool_by_prefix(ctx: &Ctx, v6: bool) -> Result<()> {
    let net: ipnet::IpNet = upstream_pool(v6).parse()?;
    pool_entry(ctx, v6, upstream_pool(v6), |ip| net.contains(&ip))
}

/// Whether any node answers ARP or NDP for `ip` on the node network
/// within a short window.
fn answered_on_l2(ctx: &Ctx, ip: IpAddr) -> Result<bool> {
    let window =
        Prober::for_cluster(ctx.cluster().as_ref(), ip, "eth0")?.window(Duration::from_secs(1))?;
    Ok(!window.macs().is_empty())
}

fn two_protocols(ctx: &Ctx, v6: bool) -> Result<()> {
    // Upstream uses the layer 2 range here: an address on the nodes'
    // network, where answering ARP/NDP means something.
    let range = l2::pool(ctx, if v6 { Net::V6 } else { Net::V4 })?;
    let (mut config, routers) = configured(ctx, v6, &[range.as_str()])?;
    let ip = service_with(ctx, "web", v6, json!({}), None, json!({}))?;
    advertised(ctx, &routers, ip)?;
    throughout(
        Duration::from_secs(3),
        &format!("{ip} unanswered on layer 2"),
        || Ok(answered_on_l2(ctx, ip)?.then(|| "a node answered".to_owned())),
    )?;
    config.l2_advertisement("l2adv", json!({}))?;
    eventually(
        WAIT,
        &format!("a node answering for {ip} on layer 2"),
        || Ok(answered_on_l2(ctx, ip)?.then_some(())),
    )?;
    ensure!(
        holders(ctx, &routers, ip)?.len() == routers.len(),
        "{ip} left a router once layer 2 announced it too"
    );
    advertised(ctx, &routers, ip)?;
    config.delete("L2Advertisement", "l2adv")?;
    eventually(
        Duration::from_secs(10),
        &format!("no node answering for {ip} on layer 2"),
        || Ok((!answered_on_l2(ctx, ip)?).then_some(())),
    )?;
    metallb::delete_service(ctx, "web")
}

/// Waits until every node of `nodes` has a ServiceBGPStatus for `svc`
/// naming exactly `peers` (none: no status at all).
fn statuses_name(ctx: &Ctx, svc: &str, nodes: &[String], peers: &BTreeSet<String>) -> Result<()> {
    eventually(
        WAIT,
        &format!("ServiceBGPStatus of {svc} on {nodes:?} naming {peers:?}"),
        || check_statuses(ctx, svc, nodes, peers).map(|v| v.is_none().then_some(())),
    )
}

/// What is wrong with the statuses of `svc` on `nodes` (see
/// [`statuses_name`]), if anything.
fn check_statuses(
    ctx: &Ctx,
    svc: &str,
    nodes: &[String],
    peers: &BTreeSet<String>,
) -> Result<Option<String>> {
    let statuses = metallb::bgp_statuses(ctx, svc)?;
    for node in nodes {
        let named: Option<BTreeSet<String>> =
            statuses.get(node).map(|p| p.iter().cloned().collect());
        let ok = match &named {
            None => peers.is_empty(),
            Some(named) => !peers.is_empty() && named == peers,
        };
        if !ok {
            return Ok(Some(format!("{node}: {named:?}")));
        }
    }
    Ok(None)
}

/// Upstream's `ServiceBGPStatus` table: a status per node naming every
/// peer the service is announced to; a peer named by the advertisement
/// that does not exist changes nothing; a deleted peer leaves the
/// statuses; a node the advertisement stops selecting loses its status;
/// deleting the service deletes them all.
fn bgp_status(ctx: &Ctx, v6: bool) -> Result<()> {
    let (mut config, _, names) =
        super::routers::peered_with(ctx, v6, super::routers::Passwords::OneSecret, &json!({}))?;
    config.pool("bgp-test", json!({ "addresses": [upstream_pool(v6)] }))?;
    config.bgp_advertisement("empty", json!({}))?;
    backends(ctx, &[])?;
    let ip = service_with(ctx, "external-local-lb", v6, json!({}), None, json!({}))?;
    let net: ipnet::IpNet = upstream_pool(v6).parse()?;
    ensure!(net.contains(&ip), "{ip} is outside {net}");
    let nodes = l2::nodes(ctx);
    let mut peers: BTreeSet<String> = names.iter().cloned().collect();
    statuses_name(ctx, "external-local-lb", &nodes, &peers)?;

    let mut listed: Vec<String> = names.clone();
    listed.push("dummy".to_owned());
    config.replace("BGPAdvertisement", "empty", json!({ "peers": listed }))?;
    throughout(
        Duration::from_secs(5),
        "the statuses after naming a peer that does not exist",
        || check_statuses(ctx, "external-local-lb", &nodes, &peers),
    )?;

    let first = names.first().context("no peer")?.clone();
    config.delete("BGPPeer", &first)?;
    peers.remove(&first);
    statuses_name(ctx, "external-local-lb", &nodes, &peers)?;

    let (dropped, kept) = nodes.split_first().context("no node")?;
    config.replace(
        "BGPAdvertisement",
        "empty",
        json!({
            "peers": listed,
            "nodeSelectors": [{ "matchExpressions": [{
                "key": "kubernetes.io/hostname", "operator": "In", "values": kept,
            }] }],
        }),
    )?;
    statuses_name(
        ctx,
        "external-local-lb",
        std::slice::from_ref(dropped),
        &BTreeSet::new(),
    )?;
    statuses_name(ctx, "external-local-lb", kept, &peers)?;

    metallb::delete_service(ctx, "external-local-lb")?;
    statuses_name(ctx, "external-local-lb", &nodes, &BTreeSet::new())
}
