//! `L2`: upstream's layer 2 suite (reference §7) against real speakers,
//! observed from the external host with arping, ndisc6, curl and UDP.
//!
//! Every spec makes its own pool and advertisements ([`Config`], removed
//! afterwards), backends and services in its namespace.

use crate::external::{
    self, arp_macs, forget_neighbor, http_get, mac_for, node_mac, node_with_mac,
};
use crate::metallb::{self, Config, create_service, eventually, wait_for_ips, wait_for_l2_node};
use crate::{Ctx, Spec, backend};
use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);
const HTTP_PORT: u16 = 8080;
const UDP_PORT: u16 = 8081;
const EXCLUDE_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![
        Spec::new(
            "L2",
            "should work for ExternalTrafficPolicy=Cluster",
            &["IPV4"],
            etp_cluster_v4,
        ),
        Spec::new(
            "L2",
            "should work for ExternalTrafficPolicy=Cluster",
            &["IPV6"],
            etp_cluster_v6,
        ),
        Spec::new(
            "L2",
            "should announce both families of a dual-stack service from one node",
            &["DUALSTACK"],
            dual_stack,
        ),
        Spec::new(
            "L2",
            "should process the status as L2ServiceStatus along with service",
            &["IPV4", "L2ServiceStatus"],
            l2_status,
        ),
        Spec::new(
            "L2",
            "should work for ExternalTrafficPolicy=Local",
            &["IPV4"],
            etp_local,
        ),
        Spec::new(
            "L2",
            "should work for mixed protocol services",
            &["IPV4"],
            mixed_protocols,
        ),
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
            "should work with pools given as a CIDR",
            &["IPV4"],
            pool_by_cidr,
        ),
        Spec::new(
            "L2",
            "should announce services sharing an IP from the same node",
            &["IPV4"],
            shared_ip_v4,
        ),
        Spec::new(
            "L2",
            "should announce services sharing an IP from the same node",
            &["IPV6"],
            shared_ip_v6,
        ),
        Spec::new(
            "L2",
            "should expose allocator, announcement and layer2 metrics, removed after delete",
            &["IPV4", "metrics"],
            metrics,
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
            "should keep announcing while the announcing node is cut off from the API server",
            &["IPV4"],
            api_outage,
        ),
        Spec::new(
            "L2-interface selector",
            "should announce from the selected interface only, with its MAC, and report it",
            &["IPV4"],
            interface_selected,
        ),
        Spec::new(
            "L2-interface selector",
            "should not announce from an interface that does not exist and emit announceFailed",
            &["IPV4"],
            interface_missing,
        ),
        Spec::new(
            "L2-interface selector",
            "should announce from both interfaces of two advertisements",
            &["IPV4"],
            two_interfaces,
        ),
        Spec::new(
            "L2-interface selector",
            "should follow the node selected by the advertisement",
            &["IPV4"],
            interface_node_selector,
        ),
        Spec::new(
            "L2-interface selector",
            "should start announcing when the selected interface appears and stop when it vanishes",
            &["IPV4"],
            interface_appears,
        ),
        Spec::new(
            "L2-interface selector",
            "should not announce from interfaces excluded by the metallb-excludel2 ConfigMap",
            &["IPV4"],
            interface_excluded,
        ),
        Spec::new(
            "L2",
            "should announce only from nodes matched by nodeSelectors",
            &["IPV4"],
            node_selectors,
        ),
        Spec::new(
            "L2",
            "should announce services matched by serviceSelectors from the selected nodes",
            &["IPV4"],
            service_selectors,
        ),
        Spec::new(
            "L2",
            "should prefer nodes by preferredNodeSelectors weight and fall back",
            &["IPV4"],
            preferred_nodes,
        ),
    ]
}

pub(super) fn nodes(ctx: &Ctx) -> Vec<String> {
    ctx.cluster().nodes().into_iter().map(|n| n.name).collect()
}

/// Backends `app=web` on `on` (all nodes when empty), ready.
pub(super) fn backends(ctx: &Ctx, on: &[&str]) -> Result<()> {
    let all = nodes(ctx);
    let on: Vec<&str> = if on.is_empty() {
        all.iter().map(String::as_str).collect()
    } else {
        on.to_vec()
    };
    backend::create(ctx, "web", &on, HTTP_PORT, UDP_PORT)?;
    Ok(())
}

/// A LoadBalancer service selecting the backends, TCP 8080, plus `extra`;
/// returns its addresses once assigned.
pub(super) fn web_service(ctx: &Ctx, name: &str, extra: Value) -> Result<Vec<IpAddr>> {
    create_web_service(ctx, name, extra)?;
    wait_for_ips(ctx, name, WAIT)
}

/// Creates the service [`web_service`] describes without waiting for it.
pub(super) fn create_web_service(ctx: &Ctx, name: &str, extra: Value) -> Result<()> {
    let mut spec = json!({ "spec": { "selector": { "app": "web" }, "ports": [{ "name": "http", "port": HTTP_PORT, "targetPort": HTTP_PORT, "protocol": "TCP" }] } });
    merge(&mut spec, &extra);
    create_service(ctx, name, spec)?;
    Ok(())
}

fn merge(base: &mut Value, patch: &Value) {
    if let (Value::Object(b), Value::Object(p)) = (&mut *base, patch) {
        for (k, v) in p {
            match b.get_mut(k) {
                Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                _ => {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

/// Which of the cluster's pool ranges (see `Cluster::pool_ranges`).
#[derive(Clone, Copy)]
pub(super) enum Net {
    V4,
    V6,
    /// IPv4 on the second network (eth1), for the interface selector specs.
    SecondaryV4,
}

/// The cluster's range for the suites' pools on `net`.
pub(super) fn pool(ctx: &Ctx, net: Net) -> Result<String> {
    let ranges = ctx.cluster().pool_ranges();
    let (range, what) = match net {
        Net::V4 => (ranges.v4, "IPv4"),
        Net::V6 => (ranges.v6, "IPv6"),
        Net::SecondaryV4 => (ranges.secondary_v4, "IPv4 on the second network"),
    };
    range.with_context(|| format!("this cluster offers no {what} range for pools"))
}

fn l2_config<'a>(ctx: &'a Ctx, addresses: &[&str], ad: Value) -> Result<Config<'a>> {
    let mut config = Config::new(ctx)?;
    config.pool("l2-test", json!({ "addresses": addresses }))?;
    config.l2_advertisement("l2-test", ad)?;
    Ok(config)
}

/// The node whose `iface` MAC answers for `ip` on the external host,
/// once it answers.
fn answering_node(ctx: &Ctx, ip: IpAddr, iface: &str) -> Result<String> {
    eventually(WAIT, &format!("{ip} answered on {iface}"), || {
        let Some(mac) = mac_for(ctx, ip, iface)? else {
            return Ok(None);
        };
        node_with_mac(ctx, &mac, iface)
    })
}

/// Waits until `ip` is answered from `node` (and no other MAC).
pub(super) fn wait_announced_by(ctx: &Ctx, ip: IpAddr, node: &str) -> Result<()> {
    let want = node_mac(ctx, node, "eth0")?;
    eventually(WAIT, &format!("{ip} announced by {node}"), || {
        let macs = match ip {
            IpAddr::V4(_) => arp_macs(ctx, ip, "eth0", 1)?,
            IpAddr::V6(_) => external::ndp_mac(ctx, ip, "eth0")?.into_iter().collect(),
        };
        Ok((macs.len() == 1 && macs.contains(&want)).then_some(()))
    })
}

/// `http://ip:8080/hostname` answers; returns the body (the serving node).
pub(super) fn reachable(ctx: &Ctx, ip: IpAddr) -> Result<String> {
    forget_neighbor(ctx, ip)?;
    eventually(WAIT, &format!("HTTP on {ip}"), || {
        Ok(http_get(ctx, ip, HTTP_PORT, "/hostname").ok())
    })
}

fn check_cluster_policy(ctx: &Ctx, addresses: &[&str], family: &str) -> Result<()> {
    let _config = l2_config(ctx, addresses, json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "ipFamilies": [family], "ipFamilyPolicy": "SingleStack" } }),
    )?;
    let ip = ips[0];
    let node = answering_node(ctx, ip, "eth0")?;
    let body = reachable(ctx, ip)?;
    ensure!(
        body.contains(&node),
        "{ip} answered by {node} but served by {body:?}"
    );
    let event = eventually(WAIT, "nodeAssigned", || {
        metallb::announcing_node(ctx, "web")
    })?;
    ensure!(
        event == node,
        "nodeAssigned says {event}, the MAC says {node}"
    );
    Ok(())
}

fn etp_cluster_v4(ctx: &Ctx) -> Result<()> {
    check_cluster_policy(ctx, &[pool(ctx, Net::V4)?.as_str()], "IPv4")
}

fn etp_cluster_v6(ctx: &Ctx) -> Result<()> {
    check_cluster_policy(ctx, &[pool(ctx, Net::V6)?.as_str()], "IPv6")
}

fn dual_stack(ctx: &Ctx) -> Result<()> {
    let _config = l2_config(
        ctx,
        &[pool(ctx, Net::V4)?.as_str(), pool(ctx, Net::V6)?.as_str()],
        json!({}),
    )?;
    backends(ctx, &[])?;
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "RequireDualStack" } }),
    )?;
    ensure!(ips.len() == 2, "expected two addresses, got {ips:?}");
    let v4 = answering_node(ctx, ips[0], "eth0")?;
    let v6 = answering_node(ctx, ips[1], "eth0")?;
    ensure!(v4 == v6, "IPv4 announced by {v4}, IPv6 by {v6}");
    for ip in ips {
        let body = reachable(ctx, ip)?;
        ensure!(
            body.contains(&v4),
            "{ip} served by {body:?}, announced by {v4}"
        );
    }
    Ok(())
}

fn l2_status(ctx: &Ctx) -> Result<()> {
    let _config = l2_config(ctx, &[pool(ctx, Net::V4)?.as_str()], json!({}))?;
    backends(ctx, &[])?;
    web_service(ctx, "web", json!({}))?;
    let node = wait_for_l2_node(ctx, "web", WAIT)?;
    let event = eventually(WAIT, "nodeAssigned", || {
        metallb::announcing_node(ctx, "web")
    })?;
    ensure!(
        event == node,
        "status says {node}, nodeAssigned says {event}"
    );
    let list = metallb::l2_statuses(ctx, "web")?;
    let st = list[0].status.clone().context("status")?;
    ensure!(
        st.service_name.as_deref() == Some("web")
            && st.service_namespace.as_deref() == Some(ctx.namespace()),
        "{st:?}"
    );
    ensure!(
        st.interfaces.is_none(),
        "interfaces reported although all are used: {st:?}"
    );
    // Stable for 5 s.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let now = metallb::l2_statuses(ctx, "web")?;
        ensure!(
            now.len() == 1
                && now[0].status.as_ref().and_then(|s| s.node.as_deref()) == Some(node.as_str()),
            "status changed: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // A deleted status object comes back.
    let api: Api<metallb_rs::api::v1beta1::ServiceL2Status> =
        Api::namespaced(ctx.client()?, metallb::NAMESPACE);
    let name = list[0].metadata.name.clone().context("name")?;
    ctx.block_on(api.delete(&name, &DeleteParams::default()))?;
    let again = wait_for_l2_node(ctx, "web", WAIT)?;
    ensure!(again == node, "recreated on {again}, not {node}");
    // Gone after the service.
    let svcs: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(svcs.delete("web", &DeleteParams::default()))?;
    eventually(WAIT, "no ServiceL2Status after delete", || {
        Ok(metallb::l2_statuses(ctx, "web")?.is_empty().then_some(()))
    })
}

fn etp_local(ctx: &Ctx) -> Result<()> {
    let all = nodes(ctx);
    let target = all.last().context("no nodes")?.clone();
    let _config = l2_config(ctx, &[pool(ctx, Net::V4)?.as_str()], json!({}))?;
    backends(ctx, &[&target])?;
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "externalTrafficPolicy": "Local" } }),
    )?;
    backend::wait_for_endpoints(ctx, "web", &[&target], WAIT)?;
    let node = answering_node(ctx, ips[0], "eth0")?;
    ensure!(
        node == target,
        "announced by {node}, but the only endpoint is on {target}"
    );
    for _ in 0..3 {
        let body = reachable(ctx, ips[0])?;
        ensure!(body.contains(&target), "served by {body:?}, not {target}");
    }
    Ok(())
}

fn mixed_protocols(ctx: &Ctx) -> Result<()> {
    let _config = l2_config(ctx, &[pool(ctx, Net::V4)?.as_str()], json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "ports": [
            { "name": "http", "port": HTTP_PORT, "targetPort": HTTP_PORT, "protocol": "TCP" },
            { "name": "udp", "port": UDP_PORT, "targetPort": UDP_PORT, "protocol": "UDP" },
        ] } }),
    )?;
    let node = answering_node(ctx, ips[0], "eth0")?;
    ensure!(reachable(ctx, ips[0])?.contains(&node));
    let reply = eventually(WAIT, "UDP reply", || {
        Ok(external::udp_request(ctx, ips[0], UDP_PORT, "hostname").ok())
    })?;
    ensure!(
        reply.contains(&node),
        "UDP answered {reply:?}, announced by {node}"
    );
    let echo = external::udp_request(ctx, ips[0], UDP_PORT, "echo mixed")?;
    ensure!(echo == "mixed", "UDP echo {echo:?}");
    Ok(())
}

fn set_network_unavailable(ctx: &Ctx, node: &str, unavailable: bool) -> Result<()> {
    let nodes: Api<Node> = Api::all(ctx.client()?);
    let patch = json!({ "status": { "conditions": [{
        "type": "NetworkUnavailable",
        "status": if unavailable { "True" } else { "False" },
        "reason": "E2E", "message": "set by the e2e suite",
    }] } });
    ctx.block_on(nodes.patch_status(node, &PatchParams::default(), &Patch::Strategic(patch)))?;
    Ok(())
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

fn set_label(ctx: &Ctx, node: &str, key: &str, value: Option<&str>) -> Result<()> {
    let nodes: Api<Node> = Api::all(ctx.client()?);
    let patch = json!({ "metadata": { "labels": { key: value } } });
    ctx.block_on(nodes.patch(node, &PatchParams::default(), &Patch::Merge(patch)))?;
    Ok(())
}

/// Runs `away` on the announcing node, checks the announcement leaves it,
/// runs `back`, checks it returns. `back` also runs on failure.
fn moves_away_and_back(
    ctx: &Ctx,
    away: &dyn Fn(&str) -> Result<()>,
    back: &dyn Fn(&str) -> Result<()>,
) -> Result<()> {
    let _config = l2_config(ctx, &[pool(ctx, Net::V4)?.as_str()], json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let first = answering_node(ctx, ips[0], "eth0")?;
    away(&first)?;
    let result = (|| -> Result<()> {
        let moved = eventually(WAIT, &format!("announcement leaving {first}"), || {
            let n = answering_node(ctx, ips[0], "eth0")?;
            Ok((n != first).then_some(n))
        })?;
        let status = wait_for_l2_node(ctx, "web", WAIT)?;
        ensure!(status == moved || status == first, "status on {status}");
        eventually(WAIT, "status following", || {
            Ok((wait_for_l2_node(ctx, "web", WAIT)? == moved).then_some(()))
        })?;
        Ok(())
    })();
    back(&first)?;
    result?;
    wait_announced_by(ctx, ips[0], &first)?;
    eventually(WAIT, "status back", || {
        Ok((wait_for_l2_node(ctx, "web", WAIT)? == first).then_some(()))
    })
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
    use devenv::cluster::StopSignal;
    moves_away_and_back(
        ctx,
        &|n| ctx.cluster().stop_speaker(n, StopSignal::Term),
        &|n| ctx.cluster().start_speaker(n),
    )
}

fn out_of_service(ctx: &Ctx) -> Result<()> {
    moves_away_and_back(ctx, &|n| set_out_of_service(ctx, n, true), &|n| {
        set_out_of_service(ctx, n, false)
    })
}

fn speaker_killed(ctx: &Ctx) -> Result<()> {
    use devenv::cluster::StopSignal;
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

/// The longest time two MACs may answer for one address while a
/// partition is detected (see `speaker::liveness`): the announcing node
/// keeps renewing its lease, so the others never take over; the bound is
/// the lease renewal period plus its overdue margin, should one renewal
/// be slow.
const TWO_MACS_WINDOW: Duration = Duration::from_millis(2500);

/// Drops (or stops dropping) every packet between `node` and `peers` on
/// the node, with nftables: the node keeps its API server and the
/// external host.
fn partition_node(ctx: &Ctx, node: &str, peers: &[IpAddr], on: bool) -> Result<()> {
    let table = "e2e_partition";
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

fn partition(ctx: &Ctx) -> Result<()> {
    let _config = l2_config(ctx, &[pool(ctx, Net::V4)?.as_str()], json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let leader = answering_node(ctx, ips[0], "eth0")?;
    let peers: Vec<IpAddr> = ctx
        .cluster()
        .nodes()
        .into_iter()
        .filter(|n| n.name != leader)
        .flat_map(|n| n.addresses)
        .collect();
    partition_node(ctx, &leader, &peers, true)?;
    let result = (|| -> Result<()> {
        // Long enough for gossip to declare the partitioned node down and
        // for several lease renewals.
        let deadline = Instant::now() + Duration::from_secs(15);
        let (mut longest, mut since) = (Duration::ZERO, None::<Instant>);
        let mut seen = std::collections::BTreeSet::new();
        while Instant::now() < deadline {
            let macs = arp_macs(ctx, ips[0], "eth0", 1)?;
            seen.extend(macs.iter().cloned());
            if macs.len() > 1 {
                let start = *since.get_or_insert_with(Instant::now);
                longest = longest.max(start.elapsed());
            } else {
                since = None;
            }
        }
        ensure!(
            longest <= TWO_MACS_WINDOW,
            "two MACs answered for {} during {longest:?} (window {TWO_MACS_WINDOW:?}); MACs seen: {seen:?}",
            ips[0]
        );
        // Still served: the partition is between nodes only.
        reachable(ctx, ips[0]).context("the address during the partition")?;
        Ok(())
    })();
    partition_node(ctx, &leader, &peers, false)?;
    result?;
    // Healed: exactly one node answers.
    eventually(WAIT, "one MAC after healing", || {
        Ok((arp_macs(ctx, ips[0], "eth0", 2)?.len() == 1).then_some(()))
    })
}

fn pool_by_cidr(ctx: &Ctx) -> Result<()> {
    let _config = l2_config(ctx, &["172.30.0.128/28"], json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    ensure!(
        ips[0].to_string() == "172.30.0.128",
        "first address of the CIDR expected, got {ips:?}"
    );
    let node = answering_node(ctx, ips[0], "eth0")?;
    ensure!(reachable(ctx, ips[0])?.contains(&node));
    Ok(())
}

fn check_shared(ctx: &Ctx, addresses: &[&str], family: &str) -> Result<()> {
    let _config = l2_config(ctx, addresses, json!({}))?;
    backends(ctx, &[])?;
    let shared = json!({
        "metadata": { "annotations": { "metallb.io/allow-shared-ip": "e2e" } },
        "spec": { "ipFamilies": [family], "ipFamilyPolicy": "SingleStack" },
    });
    let a = web_service(ctx, "a", shared.clone())?;
    let mut udp = shared;
    merge(
        &mut udp,
        &json!({ "spec": { "ports": [{ "name": "udp", "port": UDP_PORT, "targetPort": UDP_PORT, "protocol": "UDP" }] } }),
    );
    let b = web_service(ctx, "b", udp)?;
    ensure!(a == b, "not shared: {a:?} vs {b:?}");
    let na = eventually(WAIT, "nodeAssigned a", || {
        metallb::announcing_node(ctx, "a")
    })?;
    let nb = eventually(WAIT, "nodeAssigned b", || {
        metallb::announcing_node(ctx, "b")
    })?;
    ensure!(na == nb, "a announced by {na}, b by {nb}");
    ensure!(answering_node(ctx, a[0], "eth0")? == na);
    Ok(())
}

fn shared_ip_v4(ctx: &Ctx) -> Result<()> {
    check_shared(ctx, &[pool(ctx, Net::V4)?.as_str()], "IPv4")
}

fn shared_ip_v6(ctx: &Ctx) -> Result<()> {
    check_shared(ctx, &[pool(ctx, Net::V6)?.as_str()], "IPv6")
}

fn metrics(ctx: &Ctx) -> Result<()> {
    let _config = l2_config(ctx, &[pool(ctx, Net::V4)?.as_str()], json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let ip = ips[0].to_string();
    let leader = answering_node(ctx, ips[0], "eth0")?;
    arp_macs(ctx, ips[0], "eth0", 2)?;
    let svc_label = format!("{}/web", ctx.namespace());
    let controller = ctx.cluster().controller_metrics()?;
    ensure!(
        external::sample(
            &controller,
            "metallb_allocator_addresses_in_use_total",
            &["pool=\"l2-test\""]
        ) == Some(1.0),
        "allocator gauge missing:\n{controller}"
    );
    ensure!(
        external::sample(
            &controller,
            "metallb_allocator_addresses_total",
            &["pool=\"l2-test\""]
        ) == Some(20.0)
    );
    for node in nodes(ctx) {
        let text = external::speaker_metrics(ctx, &node)?;
        let announced = external::sample(
            &text,
            "metallb_speaker_announced",
            &[&svc_label, &format!("ip=\"{ip}\"")],
        );
        if node == leader {
            ensure!(
                announced == Some(1.0),
                "{node} announces but has no metallb_speaker_announced"
            );
            for m in [
                "metallb_layer2_requests_received",
                "metallb_layer2_responses_sent",
                "metallb_layer2_gratuitous_sent",
            ] {
                let v = external::sample(&text, m, &[&format!("ip=\"{ip}\"")]).unwrap_or(0.0);
                ensure!(v >= 1.0, "{m} on {node} is {v}");
            }
        } else {
            ensure!(
                announced.is_none(),
                "{node} reports announcing although {leader} does"
            );
        }
    }
    let svcs: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(svcs.delete("web", &DeleteParams::default()))?;
    eventually(WAIT, "metrics removed", || {
        let text = external::speaker_metrics(ctx, &leader)?;
        let controller = ctx.cluster().controller_metrics()?;
        Ok(
            (external::sample(&text, "metallb_speaker_announced", &[&svc_label]).is_none()
                && external::sample(
                    &controller,
                    "metallb_allocator_addresses_in_use_total",
                    &["pool=\"l2-test\""],
                ) == Some(0.0))
            .then_some(()),
        )
    })
}

fn api_outage(ctx: &Ctx) -> Result<()> {
    let _config = l2_config(ctx, &[pool(ctx, Net::V4)?.as_str()], json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let node = answering_node(ctx, ips[0], "eth0")?;
    ctx.cluster().set_api_reachable(&node, false)?;
    let result = (|| -> Result<()> {
        // Longer than the watch timeouts would need to notice.
        std::thread::sleep(Duration::from_secs(8));
        let macs = arp_macs(ctx, ips[0], "eth0", 2)?;
        let want = node_mac(ctx, &node, "eth0")?;
        ensure!(
            macs.len() == 1 && macs.contains(&want),
            "while cut off, {:?} answered (want {want} of {node})",
            macs
        );
        ensure!(reachable(ctx, ips[0])?.contains(&node));
        Ok(())
    })();
    ctx.cluster().set_api_reachable(&node, true)?;
    result?;
    wait_announced_by(ctx, ips[0], &node)
}

fn interface_config<'a>(ctx: &'a Ctx, ads: &[(&str, Value)]) -> Result<Config<'a>> {
    let mut config = Config::new(ctx)?;
    config.pool(
        "l2-test",
        json!({ "addresses": [pool(ctx, Net::SecondaryV4)?.as_str()] }),
    )?;
    for (name, spec) in ads {
        config.l2_advertisement(name, spec.clone())?;
    }
    Ok(config)
}

fn interface_selected(ctx: &Ctx) -> Result<()> {
    let _config = interface_config(ctx, &[("eth1-only", json!({ "interfaces": ["eth1"] }))])?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let node = wait_for_l2_node(ctx, "web", WAIT)?;
    let st = metallb::l2_statuses(ctx, "web")?[0]
        .status
        .clone()
        .context("status")?;
    let names: Vec<String> = st
        .interfaces
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| i.name)
        .collect();
    ensure!(names == ["eth1"], "status interfaces {names:?}");
    let want = node_mac(ctx, &node, "eth1")?;
    let macs = eventually(WAIT, "ARP on eth1", || {
        let m = arp_macs(ctx, ips[0], "eth1", 1)?;
        Ok((!m.is_empty()).then_some(m))
    })?;
    ensure!(
        macs.len() == 1 && macs.contains(&want),
        "eth1 answered by {macs:?}, want {want} ({node}'s eth1)"
    );
    let on_eth0 = arp_macs(ctx, ips[0], "eth0", 2)?;
    ensure!(on_eth0.is_empty(), "answered on eth0 too: {on_eth0:?}");
    Ok(())
}

fn interface_missing(ctx: &Ctx) -> Result<()> {
    let _config = interface_config(ctx, &[("nowhere", json!({ "interfaces": ["eth9"] }))])?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let notes = eventually(WAIT, "announceFailed", || {
        let e = metallb::events(ctx, "web", "announceFailed")?;
        Ok((!e.is_empty()).then_some(e))
    })?;
    ensure!(
        notes[0].starts_with(&format!(
            "the interfaces specified by LB IP \"{}\" doesn't exist in assigned node",
            ips[0]
        )),
        "{notes:?}"
    );
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        for iface in ["eth0", "eth1"] {
            let macs = arp_macs(ctx, ips[0], iface, 1)?;
            ensure!(macs.is_empty(), "{} answered on {iface}: {macs:?}", ips[0]);
        }
    }
    ensure!(
        metallb::l2_statuses(ctx, "web")?.is_empty(),
        "a status exists although nothing is announced"
    );
    Ok(())
}

fn two_interfaces(ctx: &Ctx) -> Result<()> {
    let _config = interface_config(
        ctx,
        &[
            ("on-eth0", json!({ "interfaces": ["eth0"] })),
            ("on-eth1", json!({ "interfaces": ["eth1"] })),
        ],
    )?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let node = wait_for_l2_node(ctx, "web", WAIT)?;
    for iface in ["eth0", "eth1"] {
        let want = node_mac(ctx, &node, iface)?;
        let macs = eventually(WAIT, &format!("ARP on {iface}"), || {
            let m = arp_macs(ctx, ips[0], iface, 1)?;
            Ok((!m.is_empty()).then_some(m))
        })?;
        ensure!(
            macs.len() == 1 && macs.contains(&want),
            "{iface} answered by {macs:?}, want {want}"
        );
    }
    let st = metallb::l2_statuses(ctx, "web")?[0]
        .status
        .clone()
        .context("status")?;
    let mut names: Vec<String> = st
        .interfaces
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| i.name)
        .collect();
    names.sort();
    ensure!(names == ["eth0", "eth1"], "status interfaces {names:?}");
    Ok(())
}

fn interface_node_selector(ctx: &Ctx) -> Result<()> {
    let all = nodes(ctx);
    backends(ctx, &[])?;
    for target in all.iter().take(2) {
        let config = interface_config(
            ctx,
            &[(
                "pinned",
                json!({ "interfaces": ["eth1"], "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": target } }] }),
            )],
        )?;
        let ips = web_service(ctx, "web", json!({}))?;
        let node = wait_for_l2_node(ctx, "web", WAIT)?;
        ensure!(&node == target, "announced by {node}, selected {target}");
        ensure!(answering_node(ctx, ips[0], "eth1")? == *target);
        let svcs: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
        ctx.block_on(svcs.delete("web", &DeleteParams::default()))?;
        eventually(WAIT, "status gone", || {
            Ok(metallb::l2_statuses(ctx, "web")?.is_empty().then_some(()))
        })?;
        drop(config);
    }
    Ok(())
}

/// The node named in the latest announceFailed message (upstream's
/// `... doesn't exist in assigned node "X" with protocol "layer2"`).
fn failed_on(ctx: &Ctx, svc: &str) -> Result<String> {
    eventually(WAIT, "announceFailed", || {
        let notes = metallb::events(ctx, svc, "announceFailed")?;
        Ok(notes
            .last()
            .and_then(|n| n.split("in assigned node \"").nth(1))
            .and_then(|rest| rest.split('"').next())
            .map(str::to_owned))
    })
}

fn interface_appears(ctx: &Ctx) -> Result<()> {
    let _config = interface_config(ctx, &[("new-nic", json!({ "interfaces": ["e2etest0"] }))])?;
    backends(ctx, &[])?;
    web_service(ctx, "web", json!({}))?;
    let node = failed_on(ctx, "web")?;
    let run = |args: &[&str]| -> Result<()> {
        let out = ctx.cluster().exec_on_node(&node, args)?;
        ensure!(
            out.status.success(),
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    run(&[
        "ip", "link", "add", "e2etest0", "type", "veth", "peer", "name", "e2etest1",
    ])?;
    let result = (|| -> Result<()> {
        run(&["ip", "link", "set", "e2etest1", "up"])?;
        run(&["ip", "link", "set", "e2etest0", "up"])?;
        // The next interface scan (every 10 s) finds it.
        let interfaces = eventually(WAIT, "announced on e2etest0", || {
            let list = metallb::l2_statuses(ctx, "web")?;
            Ok(list
                .first()
                .and_then(|o| o.status.as_ref()?.interfaces.clone()))
        })?;
        let names: Vec<String> = interfaces.into_iter().filter_map(|i| i.name).collect();
        ensure!(names == ["e2etest0"], "status interfaces {names:?}");
        ensure!(wait_for_l2_node(ctx, "web", WAIT)? == node);
        run(&["ip", "link", "del", "e2etest0"])?;
        eventually(WAIT, "withdrawn after the interface vanished", || {
            Ok(metallb::l2_statuses(ctx, "web")?.is_empty().then_some(()))
        })
    })();
    let _ = ctx
        .cluster()
        .exec_on_node(&node, &["ip", "link", "del", "e2etest0"]);
    result
}

fn interface_excluded(ctx: &Ctx) -> Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let _config = interface_config(ctx, &[("on-eth1", json!({ "interfaces": ["eth1"] }))])?;
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client()?, metallb::NAMESPACE);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "metallb-excludel2" },
        "data": { "excludel2.yaml": "announcedInterfacesToExclude: [\"^eth1$\", \"^lo$\"]\n" },
    }))?;
    ctx.block_on(cms.create(&kube::api::PostParams::default(), &cm))?;
    let result = (|| -> Result<()> {
        backends(ctx, &[])?;
        let ips = web_service(ctx, "web", json!({}))?;
        failed_on(ctx, "web")?;
        ensure!(
            arp_macs(ctx, ips[0], "eth1", 2)?.is_empty(),
            "answered on an excluded interface"
        );
        ctx.block_on(cms.delete("metallb-excludel2", &DeleteParams::default()))?;
        let node = wait_for_l2_node(ctx, "web", WAIT)?;
        ensure!(answering_node(ctx, ips[0], "eth1")? == node);
        Ok(())
    })();
    let _ = ctx.block_on(cms.delete("metallb-excludel2", &DeleteParams::default()));
    result
}

fn node_selectors(ctx: &Ctx) -> Result<()> {
    let all = nodes(ctx);
    let target = all.get(1).context("need two nodes")?;
    let _config = l2_config(
        ctx,
        &[pool(ctx, Net::V4)?.as_str()],
        json!({ "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": target } }] }),
    )?;
    backends(ctx, &[])?;
    for name in ["s1", "s2", "s3"] {
        let ips = web_service(ctx, name, json!({}))?;
        ensure!(
            answering_node(ctx, ips[0], "eth0")? == *target,
            "{name} not announced by {target}"
        );
    }
    Ok(())
}

fn service_selectors(ctx: &Ctx) -> Result<()> {
    let all = nodes(ctx);
    let (n0, n1) = (
        all.first().context("nodes")?,
        all.get(1).context("need two nodes")?,
    );
    let mut config = Config::new(ctx)?;
    config.pool(
        "l2-test",
        json!({ "addresses": [pool(ctx, Net::V4)?.as_str()] }),
    )?;
    config.l2_advertisement(
        "for-red",
        json!({
            "serviceSelectors": [{ "matchLabels": { "color": "red" } }],
            "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": n0 } }],
        }),
    )?;
    config.l2_advertisement("for-blue-or-green", json!({
        "serviceSelectors": [{ "matchLabels": { "color": "blue" } }, { "matchLabels": { "color": "green" } }],
        "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": n1 } }],
    }))?;
    backends(ctx, &[])?;
    for (name, color, node) in [
        ("red", "red", n0),
        ("blue", "blue", n1),
        ("green", "green", n1),
    ] {
        let ips = web_service(
            ctx,
            name,
            json!({ "metadata": { "labels": { "color": color } } }),
        )?;
        ensure!(
            wait_for_l2_node(ctx, name, WAIT)? == *node,
            "{name} not on {node}"
        );
        ensure!(answering_node(ctx, ips[0], "eth0")? == *node);
    }
    // A service no advertisement selects gets an address but no announcement.
    let ips = web_service(ctx, "plain", json!({}))?;
    std::thread::sleep(Duration::from_secs(3));
    ensure!(
        arp_macs(ctx, ips[0], "eth0", 1)?.is_empty(),
        "an unselected service is announced"
    );
    Ok(())
}

fn preferred_nodes(ctx: &Ctx) -> Result<()> {
    let all = nodes(ctx);
    let preferred = all.last().context("nodes")?.clone();
    let label = "e2e.metallb.io/preferred";
    set_label(ctx, &preferred, label, Some("true"))?;
    let result = (|| -> Result<()> {
        let _config = l2_config(
            ctx,
            &[pool(ctx, Net::V4)?.as_str()],
            json!({ "preferredNodeSelectors": [{ "weight": 100, "preference": { "matchLabels": { label: "true" } } }] }),
        )?;
        backends(ctx, &[])?;
        // Whatever the hash says, every service lands on the preferred node.
        let mut ips = Vec::new();
        for name in ["p1", "p2", "p3"] {
            ips.push(web_service(ctx, name, json!({}))?[0]);
        }
        for ip in &ips {
            ensure!(
                answering_node(ctx, *ip, "eth0")? == preferred,
                "{ip} not on the preferred {preferred}"
            );
        }
        // The preferred node becomes unusable: the others take over...
        set_network_unavailable(ctx, &preferred, true)?;
        let r = (|| -> Result<()> {
            for ip in &ips {
                eventually(WAIT, "fallback", || {
                    Ok((answering_node(ctx, *ip, "eth0")? != preferred).then_some(()))
                })?;
            }
            Ok(())
        })();
        set_network_unavailable(ctx, &preferred, false)?;
        r?;
        // ...and it wins them back.
        for ip in &ips {
            wait_announced_by(ctx, *ip, &preferred)?;
        }
        Ok(())
    })();
    set_label(ctx, &preferred, label, None)?;
    result
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_unique_and_tagged() {
        let specs = super::specs();
        for s in &specs {
            assert!(!s.tags.is_empty(), "{} has no family tag", s.full_name());
        }
    }
}
