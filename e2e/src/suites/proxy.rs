//! `Proxy`: what the nodes' service proxy (kube-proxy; the lab's nftables
//! stand-in) does with traffic for a Service, seen from the external host
//! and from the nodes: port to targetPort, NodePort and ClusterIP to
//! endpoints on any node, the Local policy keeping the client and the
//! health check node ports. The L2 and BGP suites rely on it for every
//! request through a service; these specs pin each rule down.

use crate::external::{self, http_get, http_status};
use crate::metallb::{self, create_service, get_service};
use crate::{Ctx, Spec, backend};
use anyhow::{Context, Result, ensure};
use devenv::wait::eventually;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::Duration;

use super::l2::{SERVICE_HTTP_PORT, client_ip, names_a_node, nodes, reachable};

const WAIT: Duration = Duration::from_secs(60);
const HTTP_PORT: u16 = 8080;
const UDP_PORT: u16 = 8081;

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![
        Spec::new(
            "Proxy",
            "should map the service port to a named targetPort and refuse the address's other ports",
            &["IPV4"],
            named_target_port,
        ),
        Spec::new(
            "Proxy",
            "should send NodePort traffic on every node to an endpoint on another node",
            &["IPV4"],
            node_port,
        ),
        Spec::new(
            "Proxy",
            "should answer a ClusterIP from inside every node",
            &["IPV4"],
            cluster_ip,
        ),
        Spec::new(
            "Proxy",
            "should serve NodePort with ExternalTrafficPolicy=Local only where an endpoint is, keeping the client address",
            &["IPV4"],
            node_port_local,
        ),
        Spec::new(
            "Proxy",
            "should answer healthCheckNodePort with 200 where there are local endpoints and 503 elsewhere",
            &["IPV4"],
            health_check_node_port,
        ),
    ]
}

/// The first IPv4 address of `node`.
fn node_ip(ctx: &Ctx, node: &str) -> Result<IpAddr> {
    ctx.cluster()
        .nodes()
        .into_iter()
        .find(|n| n.name == node)
        .and_then(|n| n.addresses.into_iter().find(IpAddr::is_ipv4))
        .with_context(|| format!("node {node} has no IPv4 address"))
}

/// Backends `app=web` on `on`, and a service `web` of `type_` selecting
/// them (TCP 80 to 8080), plus `extra`; the service once its endpoints
/// are ready.
fn service_on(
    ctx: &Ctx,
    on: &[&str],
    type_: &str,
    extra: Value,
) -> Result<k8s_openapi::api::core::v1::Service> {
    backend::create(ctx, "web", on, HTTP_PORT, UDP_PORT)?;
    let mut spec = json!({ "spec": { "type": type_, "selector": { "app": "web" },
        "ports": [{ "name": "http", "port": SERVICE_HTTP_PORT, "targetPort": HTTP_PORT, "protocol": "TCP" }] } });
    metallb::merge(&mut spec, &extra);
    create_service(ctx, "web", spec)?;
    backend::wait_for_endpoints(ctx, "web", on, WAIT)?;
    get_service(ctx, "web")
}

fn node_port_of(svc: &k8s_openapi::api::core::v1::Service) -> Result<u16> {
    let port = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .and_then(|p| p.node_port)
        .context("the service got no nodePort")?;
    Ok(u16::try_from(port)?)
}

fn named_target_port(ctx: &Ctx) -> Result<()> {
    let mut config = metallb::Config::new(ctx)?;
    config.pool(
        "proxy",
        json!({ "addresses": [super::l2::pool(ctx, super::l2::Net::V4)?] }),
    )?;
    config.l2_advertisement("proxy", json!({}))?;
    let all = nodes(ctx);
    let on: Vec<&str> = all.iter().map(String::as_str).collect();
    service_on(
        ctx,
        &on,
        "LoadBalancer",
        json!({ "spec": { "ports": [{ "name": "web", "port": SERVICE_HTTP_PORT, "targetPort": "http", "protocol": "TCP" }] } }),
    )?;
    let ip = metallb::wait_for_ips(ctx, "web", WAIT)?[0];
    let body = reachable(ctx, ip)?;
    ensure!(names_a_node(ctx, &body), "{ip}:80 served {body:?}");
    // The backends listen on 8080 on every node, and the VIP is on the
    // announcing node's `lo`: only the proxy keeps 8080 closed on it.
    let direct = http_get(ctx, ip, HTTP_PORT, "/hostname");
    ensure!(
        direct.is_err(),
        "{ip}:{HTTP_PORT} is not a service port but answered {direct:?}"
    );
    Ok(())
}

fn node_port(ctx: &Ctx) -> Result<()> {
    let all = nodes(ctx);
    let target = all.last().context("no nodes")?.clone();
    let svc = service_on(ctx, &[&target], "NodePort", json!({}))?;
    let port = node_port_of(&svc)?;
    for node in &all {
        let ip = node_ip(ctx, node)?;
        let body = eventually(WAIT, &format!("NodePort {ip}:{port}"), || {
            Ok(http_get(ctx, ip, port, "/hostname").ok())
        })?;
        ensure!(
            body == target,
            "{node}'s NodePort {port} should reach the only backend, on {target}; served by {body:?}"
        );
    }
    Ok(())
}

fn cluster_ip(ctx: &Ctx) -> Result<()> {
    let all = nodes(ctx);
    let target = all.last().context("no nodes")?.clone();
    let svc = service_on(ctx, &[&target], "ClusterIP", json!({}))?;
    let ip = svc
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .context("no clusterIP")?;
    let url = format!("http://{ip}:{SERVICE_HTTP_PORT}/hostname");
    // Every node, the backend's own included (DNAT to its own address).
    for node in &all {
        let body = eventually(WAIT, &format!("{url} from {node}"), || {
            let out = ctx
                .cluster()
                .exec_on_node(node, &["curl", "-sS", "-m", "5", &url])?;
            Ok(out
                .status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()))
        })?;
        ensure!(
            body == target,
            "{url} from {node} should reach the only backend, on {target}; served by {body:?}"
        );
    }
    Ok(())
}

fn node_port_local(ctx: &Ctx) -> Result<()> {
    let all = nodes(ctx);
    let target = all.last().context("no nodes")?.clone();
    let svc = service_on(
        ctx,
        &[&target],
        "NodePort",
        json!({ "spec": { "externalTrafficPolicy": "Local" } }),
    )?;
    let port = node_port_of(&svc)?;
    let ip = node_ip(ctx, &target)?;
    let body = eventually(WAIT, &format!("NodePort {ip}:{port}"), || {
        Ok(http_get(ctx, ip, port, "/hostname").ok())
    })?;
    ensure!(body == target, "{ip}:{port} served by {body:?}");
    let client = http_get(ctx, ip, port, "/clientip")?;
    let external = external::addresses(ctx)?;
    ensure!(
        client_ip(&client).is_some_and(|c| external.contains(&c)),
        "the backend saw client {client:?}, not the external host {external:?}"
    );
    // Nodes without a local endpoint drop it (a timeout; refused would
    // mean no rule for the port at all) rather than forward it elsewhere.
    for node in all.iter().filter(|n| **n != target) {
        let ip = node_ip(ctx, node)?;
        let url = format!("http://{ip}:{port}/hostname");
        eventually(WAIT, &format!("{url} on {node} dropped"), || {
            let out = ctx
                .cluster()
                .exec_on_external(&["curl", "-sS", "-m", "2", &url])?;
            ensure!(
                !out.status.success(),
                "{url} on {node}, without a local endpoint, answered {:?}",
                String::from_utf8_lossy(&out.stdout)
            );
            // curl's exit code 28: timed out.
            Ok((out.status.code() == Some(28)).then_some(()))
        })?;
    }
    Ok(())
}

fn health_check_node_port(ctx: &Ctx) -> Result<()> {
    let all = nodes(ctx);
    let target = all.last().context("no nodes")?.clone();
    // No pool: the service stays pending, its health check port exists
    // all the same.
    let svc = service_on(
        ctx,
        &[&target],
        "LoadBalancer",
        json!({ "spec": { "externalTrafficPolicy": "Local" } }),
    )?;
    let port = svc
        .spec
        .as_ref()
        .and_then(|s| s.health_check_node_port)
        .context("a LoadBalancer with the Local policy got no healthCheckNodePort")?;
    let port = u16::try_from(port)?;
    for node in &all {
        let ip = node_ip(ctx, node)?;
        let want: (u16, u64) = if *node == target { (200, 1) } else { (503, 0) };
        let (code, body) = eventually(WAIT, &format!("{node}'s health check"), || {
            Ok(http_status(ctx, ip, port, "/healthz")
                .ok()
                .filter(|(code, _)| *code == want.0))
        })?;
        let json: Value = serde_json::from_str(&body)
            .with_context(|| format!("{node}'s health check answered {code} {body:?}"))?;
        ensure!(
            json["service"]["namespace"] == ctx.namespace()
                && json["service"]["name"] == "web"
                && json["localEndpoints"].as_u64() == Some(want.1),
            "{node}'s health check answered {code} {json}, expected {want:?}"
        );
    }
    Ok(())
}
