//! `L2`: upstream's layer 2 suite (e2etest/l2tests) against real speakers,
//! observed from the external host with the prober (every answer to
//! every ARP who-has or neighbor solicitation, so two nodes answering one
//! address are seen as two), curl and UDP.
//!
//! A spec that says "from X", "only", "not from X", "never two" or "and
//! back" checks it over a prober window ([`watch`]): X's MAC and no
//! other, or silence. Every spec makes its own pool and advertisements
//! ([`Config`], removed afterwards), backends and services in its
//! namespace.

mod compound;
mod election;
pub(super) use election::NodeLabels;
mod failover;
mod interfaces;
mod preferred;
mod presence;
mod replay;
mod selectors;
mod skew;
mod soak;
mod tables;
pub(super) mod watch;

use crate::external::{self, forget_neighbor, http_get};
use crate::metallb::{self, Config, create_service, wait_for_ips, wait_for_l2_node};
use crate::{Ctx, Spec, backend};
use anyhow::{Context, Result, ensure};
use devenv::wait::{eventually, throughout};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::Duration;
use watch::Watch;

const WAIT: Duration = Duration::from_secs(60);
/// The ports the backends listen on (the services' targetPorts).
pub(super) const HTTP_PORT: u16 = 8080;
const UDP_PORT: u16 = 8081;
/// The ports the services expose: not the targetPorts, so a reply proves
/// the node's service proxy mapped one to the other.
pub(super) const SERVICE_HTTP_PORT: u16 = 80;
pub(super) const SERVICE_UDP_PORT: u16 = 81;

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    let mut specs = vec![
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
    ];
    specs.extend(failover::specs());
    specs.extend(compound::specs());
    specs.extend(soak::specs());
    specs.extend(interfaces::specs());
    specs.extend(presence::specs());
    specs.extend(replay::specs());
    specs.extend(skew::specs());
    specs.extend(tables::specs());
    specs.extend(preferred::specs());
    specs.extend(selectors::specs());
    specs.extend([
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
    ]);
    specs
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

/// A LoadBalancer service selecting the backends, TCP 80 to the backends'
/// 8080, plus `extra`;
/// returns its addresses once assigned.
pub(super) fn web_service(ctx: &Ctx, name: &str, extra: Value) -> Result<Vec<IpAddr>> {
    create_web_service(ctx, name, extra)?;
    wait_for_ips(ctx, name, WAIT)
}

/// Creates the service [`web_service`] describes without waiting for it.
pub(super) fn create_web_service(ctx: &Ctx, name: &str, extra: Value) -> Result<()> {
    let mut spec = json!({ "spec": { "selector": { "app": "web" }, "ports": [{ "name": "http", "port": SERVICE_HTTP_PORT, "targetPort": HTTP_PORT, "protocol": "TCP" }] } });
    metallb::merge(&mut spec, &extra);
    create_service(ctx, name, spec)?;
    Ok(())
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

/// The node that alone answers for `ips` on eth0, once one does.
fn announcer(ctx: &Ctx, ips: &[IpAddr]) -> Result<String> {
    Watch::new(ctx, ips, "eth0")?.settled()
}

/// `http://ip:80/hostname` answers; returns the body (the serving
/// backend's node).
pub(super) fn reachable(ctx: &Ctx, ip: IpAddr) -> Result<String> {
    forget_neighbor(ctx, ip)?;
    eventually(WAIT, &format!("HTTP on {ip}"), || {
        Ok(http_get(ctx, ip, SERVICE_HTTP_PORT, "/hostname").ok())
    })
}

/// Whether `body` names one of the cluster's nodes (a backend answered).
pub(super) fn names_a_node(ctx: &Ctx, body: &str) -> bool {
    nodes(ctx).iter().any(|n| body == n.as_str())
}

/// With the Cluster policy the announcing node forwards to a backend on
/// another node: the only backend is elsewhere, it answers on the
/// service's port (not its own), and sees the announcing node as the
/// client (masqueraded, so its reply comes back the same way).
pub(super) fn check_cluster_policy(ctx: &Ctx, addresses: &[&str], family: &str) -> Result<()> {
    let _config = l2_config(ctx, addresses, json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "ipFamilies": [family], "ipFamilyPolicy": "SingleStack" } }),
    )?;
    let ip = ips[0];
    let node = announcer(ctx, &[ip])?;
    let other = nodes(ctx)
        .into_iter()
        .find(|n| *n != node)
        .context("the spec needs a second node")?;
    let elsewhere: Vec<String> = nodes(ctx).into_iter().filter(|n| *n != other).collect();
    backend::delete(ctx, "web", &elsewhere)?;
    backend::wait_for_endpoints(ctx, "web", &[&other], WAIT)?;
    // The announcement does not depend on where the endpoints are.
    Watch::new(ctx, &[ip], "eth0")?.wait_only(&node)?;
    let body = reachable(ctx, ip)?;
    ensure!(
        body == other,
        "{ip}:{SERVICE_HTTP_PORT} announced by {node} should reach the only backend, on {other}; served by {body:?}"
    );
    let client = http_get(ctx, ip, SERVICE_HTTP_PORT, "/clientip")?;
    let node_ips = ctx
        .cluster()
        .nodes()
        .into_iter()
        .find(|n| n.name == node)
        .map(|n| n.addresses)
        .unwrap_or_default();
    ensure!(
        node_ips.iter().any(|a| client_ip(&client) == Some(*a)),
        "the backend on {other} saw client {client:?}, not the announcing node {node} ({node_ips:?})"
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

/// The address of netexec's `/clientip` answer (`ip:port`, `[v6]:port`).
pub(super) fn client_ip(answer: &str) -> Option<IpAddr> {
    answer
        .trim()
        .parse::<std::net::SocketAddr>()
        .ok()
        .map(|a| a.ip().to_canonical())
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
    // One node alone answers both addresses.
    let node = announcer(ctx, &ips)?;
    for ip in ips {
        let body = reachable(ctx, ip)?;
        ensure!(
            names_a_node(ctx, &body),
            "{ip} served by {body:?}, not a backend (announced by {node})"
        );
    }
    Ok(())
}

fn l2_status(ctx: &Ctx) -> Result<()> {
    use metallb_rs::api::v1beta1::ServiceL2Status;
    let _config = l2_config(ctx, &[pool(ctx, Net::V4)?.as_str()], json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let node = wait_for_l2_node(ctx, "web", WAIT)?;
    let answering = announcer(ctx, &ips)?;
    ensure!(
        answering == node,
        "the status names {node}, {answering} answers ARP"
    );
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
    throughout(Duration::from_secs(5), "one status naming the node", || {
        let now = metallb::l2_statuses(ctx, "web")?;
        let nodes: Vec<Option<&str>> = now
            .iter()
            .map(|o| o.status.as_ref().and_then(|s| s.node.as_deref()))
            .collect();
        Ok((nodes != [Some(node.as_str())]).then(|| format!("statuses name {nodes:?}")))
    })?;
    // A deleted status object comes back: a new object (another uid),
    // naming the same node.
    let api: Api<ServiceL2Status> = Api::namespaced(ctx.client()?, metallb::NAMESPACE);
    let name = list[0].metadata.name.clone().context("name")?;
    let uid = list[0].metadata.uid.clone().context("uid")?;
    ctx.block_on(api.delete(&name, &DeleteParams::default()))?;
    let again = eventually(WAIT, "a new ServiceL2Status", || {
        let list = metallb::l2_statuses(ctx, "web")?;
        Ok(match list.as_slice() {
            [one] if one.metadata.uid.as_ref() != Some(&uid) => {
                one.status.as_ref().and_then(|s| s.node.clone())
            }
            _ => None,
        })
    })?;
    ensure!(again == node, "recreated on {again}, not {node}");
    // Gone after the service.
    let svcs: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(svcs.delete("web", &DeleteParams::default()))?;
    eventually(WAIT, "no ServiceL2Status after delete", || {
        Ok(metallb::l2_statuses(ctx, "web")?.is_empty().then_some(()))
    })
}

/// Upstream's ETP=Local: endpoints on several nodes (not all), the
/// announcing node is one with an endpoint, every request reaches a
/// backend on it, and the backend sees the external client.
fn etp_local(ctx: &Ctx) -> Result<()> {
    let all = election::need_nodes(ctx, 3)?;
    let with: Vec<&str> = all[1..].iter().map(String::as_str).collect();
    let _config = l2_config(ctx, &[pool(ctx, Net::V4)?.as_str()], json!({}))?;
    backends(ctx, &with)?;
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "externalTrafficPolicy": "Local" } }),
    )?;
    backend::wait_for_endpoints(ctx, "web", &with, WAIT)?;
    let node = announcer(ctx, &ips)?;
    ensure!(
        with.contains(&node.as_str()),
        "{node} announces, endpoints on {with:?}"
    );
    for _ in 0..5 {
        let body = reachable(ctx, ips[0])?;
        ensure!(
            body == node,
            "served on {body:?}, not the announcing {node}"
        );
    }
    // No masquerade with the Local policy: the backend sees the client.
    let client = http_get(ctx, ips[0], SERVICE_HTTP_PORT, "/clientip")?;
    let external = external::addresses(ctx)?;
    ensure!(
        client_ip(&client).is_some_and(|c| external.contains(&c)),
        "the backend saw client {client:?}, not the external host {external:?}"
    );
    Ok(())
}

fn mixed_protocols(ctx: &Ctx) -> Result<()> {
    let _config = l2_config(ctx, &[pool(ctx, Net::V4)?.as_str()], json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(
        ctx,
        "web",
        json!({ "spec": { "ports": [
            { "name": "http", "port": SERVICE_HTTP_PORT, "targetPort": HTTP_PORT, "protocol": "TCP" },
            { "name": "udp", "port": SERVICE_UDP_PORT, "targetPort": UDP_PORT, "protocol": "UDP" },
        ] } }),
    )?;
    let node = announcer(ctx, &ips)?;
    let body = reachable(ctx, ips[0])?;
    ensure!(names_a_node(ctx, &body), "TCP served by {body:?}");
    let reply = eventually(WAIT, "UDP reply", || {
        Ok(external::udp_request(ctx, ips[0], SERVICE_UDP_PORT, "hostname").ok())
    })?;
    ensure!(
        names_a_node(ctx, &reply),
        "UDP answered {reply:?}, not a backend (announced by {node})"
    );
    let echo = external::udp_request(ctx, ips[0], SERVICE_UDP_PORT, "echo mixed")?;
    ensure!(echo == "mixed", "UDP echo {echo:?}");
    Ok(())
}

pub(super) fn set_network_unavailable(ctx: &Ctx, node: &str, unavailable: bool) -> Result<()> {
    let nodes: Api<Node> = Api::all(ctx.client()?);
    let patch = json!({ "status": { "conditions": [{
        "type": "NetworkUnavailable",
        "status": if unavailable { "True" } else { "False" },
        "reason": "E2E", "message": "set by the e2e suite",
    }] } });
    ctx.block_on(nodes.patch_status(node, &PatchParams::default(), &Patch::Strategic(patch)))?;
    Ok(())
}

/// Sets label `key` on `node` to `value`, or removes it (`None`).
pub(super) fn set_label(ctx: &Ctx, node: &str, key: &str, value: Option<&str>) -> Result<()> {
    let nodes: Api<Node> = Api::all(ctx.client()?);
    let patch = json!({ "metadata": { "labels": { key: value } } });
    ctx.block_on(nodes.patch(node, &PatchParams::default(), &Patch::Merge(patch)))?;
    Ok(())
}

fn pool_by_cidr(ctx: &Ctx) -> Result<()> {
    let _config = l2_config(ctx, &["172.30.0.128/28"], json!({}))?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    ensure!(
        ips[0].to_string() == "172.30.0.128",
        "first address of the CIDR expected, got {ips:?}"
    );
    announcer(ctx, &ips)?;
    let body = reachable(ctx, ips[0])?;
    ensure!(names_a_node(ctx, &body), "served by {body:?}");
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
    metallb::merge(
        &mut udp,
        &json!({ "spec": { "ports": [{ "name": "udp", "port": SERVICE_UDP_PORT, "targetPort": UDP_PORT, "protocol": "UDP" }] } }),
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
    Watch::new(ctx, &a, "eth0")?.wait_only(&na)
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
    // The prober's questions are the requests the layer 2 metrics count.
    let leader = announcer(ctx, &ips)?;
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
        Watch::new(ctx, &ips, "eth0")?
            .wait_only(target)
            .with_context(|| format!("{name} should be announced by {target} only"))?;
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
    // A service no advertisement selects gets an address but no
    // announcement; it is checked after the services created later are
    // announced, so the speakers have had it in hand.
    let plain = web_service(ctx, "plain", json!({}))?;
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
        Watch::new(ctx, &ips, "eth0")?
            .wait_only(node)
            .with_context(|| format!("{name} should be announced by {node} only"))?;
    }
    Watch::new(ctx, &plain, "eth0")?
        .expect_silent()
        .context("an unselected service is announced")?;
    ensure!(
        metallb::l2_statuses(ctx, "plain")?.is_empty(),
        "an unselected service has a ServiceL2Status"
    );
    Ok(())
}

fn preferred_nodes(ctx: &Ctx) -> Result<()> {
    let all = nodes(ctx);
    let preferred = all.last().context("nodes")?.clone();
    let label = "e2e.metallb.io/preferred";
    let mut labels = NodeLabels::new(ctx, &[label])?;
    labels.add(&preferred, label, "true")?;
    let _config = l2_config(
        ctx,
        &[pool(ctx, Net::V4)?.as_str()],
        json!({ "preferredNodeSelectors": [{ "weight": 100, "preference": { "matchLabels": { label: "true" } } }] }),
    )?;
    backends(ctx, &[])?;
    // Whatever the hash says, every service lands on the preferred node.
    let mut watches = Vec::new();
    for name in ["p1", "p2", "p3"] {
        let ips = web_service(ctx, name, json!({}))?;
        watches.push(Watch::new(ctx, &ips, "eth0")?);
    }
    for w in &watches {
        w.wait_only(&preferred)?;
    }
    // The preferred node becomes unusable: the others take over...
    set_network_unavailable(ctx, &preferred, true)?;
    let r = (|| -> Result<()> {
        for w in &watches {
            w.wait_moved(&preferred)?;
        }
        Ok(())
    })();
    set_network_unavailable(ctx, &preferred, false)?;
    r?;
    // ...and it wins them back.
    for w in &watches {
        w.wait_only(&preferred)?;
    }
    Ok(())
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
