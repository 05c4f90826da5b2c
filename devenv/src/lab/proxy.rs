//! The lab's service proxy: what kube-proxy in nftables mode does on each
//! node, so traffic reaching a node for a Service goes where a real
//! cluster would send it.
//!
//! [`ruleset`] decides: from the node, the Services and the
//! EndpointSlices it writes one nftables table, [`TABLE`], that DNATs
//! ClusterIPs, LoadBalancer ingress IPs and NodePorts (on the node's own
//! addresses) from `port` to the endpoints' `targetPort` (resolved through
//! the slice's ports, so named target ports work), spread at random over
//! the ready endpoints. `externalTrafficPolicy: Cluster` marks external
//! traffic for masquerade, so an endpoint on another node replies through
//! this one; `Local` sends it to this node's endpoints only, keeps the
//! client's address, and drops it when there are none (traffic the node
//! itself originates still reaches every endpoint, as kube-proxy does).
//! A service port without ready endpoints is rejected, and so is TCP or
//! UDP to a service IP on a port no service uses (the lab has the VIPs on
//! `lo`, which would otherwise hand them to whatever listens there).
//! Forwarding is on in the node namespaces (see [`super::netns`]); the
//! table's forward chain lets only the connections it DNATed through.
//!
//! [`Applier`] does: it replaces the whole table in one `nft -f`
//! transaction when the text changed, and deletes it on shutdown.
//! [`Nft`] runs `nft` in the caller's namespace (the node agent runs
//! inside the node's) with a timeout.

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The `inet` table the proxy owns in each node namespace.
pub const TABLE: &str = "lab_proxy";

/// The packet mark asking the postrouting chain to masquerade.
const MASQUERADE_MARK: u32 = 0x4000;

/// How long one `nft` or `ip` run may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// The label EndpointSlices carry to name their Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// An endpoint of one service port in one family.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Endpoint {
    address: IpAddr,
    port: u16,
    local: bool,
}

/// One service port in one address family, as the rules need it.
#[derive(Debug)]
struct PortRules {
    /// `namespace/name/protocol/port-name`, unique per service port.
    id: String,
    /// `tcp` or `udp`.
    protocol: &'static str,
    port: u16,
    node_port: Option<u16>,
    cluster_ips: Vec<IpAddr>,
    lb_ips: Vec<IpAddr>,
    local_policy: bool,
    endpoints: Vec<Endpoint>,
}

fn is_v6(ip: &IpAddr) -> bool {
    ip.is_ipv6()
}

fn family(v6: bool) -> &'static str {
    if v6 { "ip6" } else { "ip" }
}

fn addr(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// The slices of `svc` (same namespace, the service-name label).
fn slices_of<'a>(
    svc: &'a Service,
    slices: &'a [EndpointSlice],
) -> impl Iterator<Item = &'a EndpointSlice> {
    slices.iter().filter(move |s| {
        s.metadata.namespace == svc.metadata.namespace
            && s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                == svc.metadata.name.as_ref()
    })
}

/// Ready endpoints of `port` in `v6`'s family: the slice port with the
/// service port's name and protocol gives the number (that is how a named
/// `targetPort` is resolved). An unset `ready` counts as ready.
fn endpoints(
    node: &str,
    svc: &Service,
    port: &ServicePort,
    protocol: &str,
    slices: &[EndpointSlice],
    v6: bool,
) -> Vec<Endpoint> {
    let name = port.name.clone().unwrap_or_default();
    let mut out = BTreeSet::new();
    for slice in slices_of(svc, slices) {
        if (slice.address_type == "IPv6") != v6 {
            continue;
        }
        let Some(number) = slice
            .ports
            .iter()
            .flatten()
            .find(|p| {
                p.name.clone().unwrap_or_default() == name
                    && p.protocol.as_deref().unwrap_or("TCP") == protocol
            })
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for ep in &slice.endpoints {
            if !ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true) {
                continue;
            }
            let local = ep.node_name.as_deref() == Some(node);
            for a in &ep.addresses {
                if let Ok(ip) = a.parse::<IpAddr>()
                    && is_v6(&ip) == v6
                {
                    out.insert(Endpoint {
                        address: ip,
                        port: number,
                        local,
                    });
                }
            }
        }
    }
    out.into_iter().collect()
}

fn parse_ips<'a>(ips: impl Iterator<Item = &'a String>, v6: bool) -> Vec<IpAddr> {
    let set: BTreeSet<IpAddr> = ips
        .filter_map(|ip| ip.parse().ok())
        .filter(|ip| is_v6(ip) == v6)
        .collect();
    set.into_iter().collect()
}

/// Every service port of `services`, per family, sorted by id.
fn port_rules(
    node: &str,
    services: &[Service],
    slices: &[EndpointSlice],
) -> Vec<(bool, PortRules)> {
    let mut out = Vec::new();
    for svc in services {
        let Some(spec) = &svc.spec else { continue };
        let type_ = spec.type_.as_deref().unwrap_or("ClusterIP");
        if type_ == "ExternalName" {
            continue;
        }
        let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
        let name = svc.metadata.name.as_deref().unwrap_or_default();
        let external = matches!(type_, "LoadBalancer" | "NodePort");
        let local_policy = external && spec.external_traffic_policy.as_deref() == Some("Local");
        let cluster_ips: Vec<String> = spec
            .cluster_ips
            .clone()
            .unwrap_or_else(|| spec.cluster_ip.clone().into_iter().collect());
        // NodePorts exist in the Service's families only.
        let families: Vec<bool> = match &spec.ip_families {
            Some(f) if !f.is_empty() => f.iter().map(|f| f == "IPv6").collect(),
            _ => vec![false],
        };
        let lb_ips: Vec<String> = if type_ == "LoadBalancer" {
            metallb_rs::service::ingress_strings(svc)
        } else {
            Vec::new()
        };
        for port in spec.ports.iter().flatten() {
            let protocol = port.protocol.as_deref().unwrap_or("TCP");
            let l4 = match protocol {
                "TCP" => "tcp",
                "UDP" => "udp",
                // SCTP: the lab's backends do not speak it.
                _ => continue,
            };
            let Ok(number) = u16::try_from(port.port) else {
                continue;
            };
            let port_name = match port.name.as_deref() {
                Some(n) if !n.is_empty() => n.to_owned(),
                _ => number.to_string(),
            };
            for v6 in [false, true] {
                out.push((
                    v6,
                    PortRules {
                        id: format!("{ns}/{name}/{l4}/{port_name}"),
                        protocol: l4,
                        port: number,
                        node_port: port
                            .node_port
                            .filter(|_| external && families.contains(&v6))
                            .and_then(|p| u16::try_from(p).ok()),
                        cluster_ips: parse_ips(cluster_ips.iter(), v6),
                        lb_ips: parse_ips(lb_ips.iter(), v6),
                        local_policy,
                        endpoints: endpoints(node, svc, port, protocol, slices, v6),
                    },
                ));
            }
        }
    }
    out.sort_by(|a, b| (&a.1.id, a.0).cmp(&(&b.1.id, b.0)));
    out
}

/// The nftables script that replaces [`TABLE`] with the rules `node`
/// (whose own addresses, the NodePort addresses, are `node_addresses`)
/// needs for `services` and `slices`. Pure; `nft -f` applies it in one
/// transaction (the first line makes the delete succeed on a node that
/// has no table yet).
pub fn ruleset(
    node: &str,
    node_addresses: &[IpAddr],
    services: &[Service],
    slices: &[EndpointSlice],
) -> String {
    let mut dispatch = String::new();
    let mut no_endpoints = String::new();
    let mut chains = String::new();
    let mut service_ips: [BTreeSet<IpAddr>; 2] = [BTreeSet::new(), BTreeSet::new()];
    for (v6, p) in port_rules(node, services, slices) {
        let fam = family(v6);
        let suffix = if v6 { "v6" } else { "v4" };
        let proto = p.protocol;
        let node_ips: Vec<&IpAddr> = node_addresses.iter().filter(|a| is_v6(a) == v6).collect();
        let node_port = p.node_port.filter(|_| !node_ips.is_empty());
        if p.cluster_ips.is_empty() && p.lb_ips.is_empty() && node_port.is_none() {
            continue;
        }
        let set = |ips: &[&IpAddr]| {
            let list: Vec<String> = ips.iter().map(ToString::to_string).collect();
            format!("{{ {} }}", list.join(", "))
        };
        let cluster_ips: Vec<&IpAddr> = p.cluster_ips.iter().collect();
        let lb_ips: Vec<&IpAddr> = p.lb_ips.iter().collect();
        service_ips[usize::from(v6)].extend(cluster_ips.iter().chain(&lb_ips).copied());
        if p.endpoints.is_empty() {
            // No endpoint anywhere: refused, as kube-proxy does.
            for ips in [&cluster_ips, &lb_ips] {
                if !ips.is_empty() {
                    let _ = writeln!(
                        no_endpoints,
                        "\t\t{fam} daddr {} {proto} dport {} reject",
                        set(ips),
                        p.port
                    );
                }
            }
            if let Some(np) = node_port {
                let _ = writeln!(
                    no_endpoints,
                    "\t\t{fam} daddr {} {proto} dport {np} reject",
                    set(&node_ips)
                );
            }
            continue;
        }
        let id = format!("{}/{suffix}", p.id);
        let cluster = format!("cluster-{id}");
        let external = format!("external-{id}");
        let endpoint_chain =
            |e: &Endpoint| format!("endpoint-{id}/{}", e.address.to_string().replace(':', "_"));
        let spread = |eps: &[&Endpoint]| -> String {
            let arms: Vec<String> = eps
                .iter()
                .enumerate()
                .map(|(i, e)| format!("{i} : goto {}", endpoint_chain(e)))
                .collect();
            format!(
                "\t\tnumgen random mod {} vmap {{ {} }}\n",
                eps.len(),
                arms.join(", ")
            )
        };
        if !cluster_ips.is_empty() {
            let _ = writeln!(
                dispatch,
                "\t\t{fam} daddr {} {proto} dport {} goto {cluster}",
                set(&cluster_ips),
                p.port
            );
        }
        if !lb_ips.is_empty() {
            let _ = writeln!(
                dispatch,
                "\t\t{fam} daddr {} {proto} dport {} goto {external}",
                set(&lb_ips),
                p.port
            );
        }
        if let Some(np) = node_port {
            let _ = writeln!(
                dispatch,
                "\t\t{fam} daddr {} {proto} dport {np} goto {external}",
                set(&node_ips)
            );
        }
        let all: Vec<&Endpoint> = p.endpoints.iter().collect();
        let _ = write!(chains, "\tchain {cluster} {{\n{}\t}}\n", spread(&all));
        let mark = format!("meta mark set meta mark | {MASQUERADE_MARK:#x}");
        let external_body = if p.local_policy {
            let local: Vec<&Endpoint> = p.endpoints.iter().filter(|e| e.local).collect();
            // The node's own traffic is not external: it may go anywhere.
            let mut body = format!("\t\tfib saddr type local {mark} goto {cluster}\n");
            if local.is_empty() {
                body.push_str("\t\tdrop\n");
            } else {
                body.push_str(&spread(&local));
            }
            body
        } else {
            format!("\t\t{mark}\n\t\tgoto {cluster}\n")
        };
        let _ = write!(chains, "\tchain {external} {{\n{external_body}\t}}\n");
        for e in &p.endpoints {
            let _ = write!(
                chains,
                "\tchain {} {{\n\t\tmeta l4proto {proto} dnat {fam} to {}:{}\n\t}}\n",
                endpoint_chain(e),
                addr(&e.address),
                e.port
            );
        }
    }
    let mut unknown_ports = String::new();
    for (v6, ips) in service_ips.iter().enumerate() {
        if !ips.is_empty() {
            let list: Vec<String> = ips.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                unknown_ports,
                "\t\tct state new {} daddr {{ {} }} meta l4proto {{ tcp, udp }} reject",
                family(v6 == 1),
                list.join(", ")
            );
        }
    }
    format!(
        "table inet {TABLE}
delete table inet {TABLE}
table inet {TABLE} {{
\tchain nat-prerouting {{
\t\ttype nat hook prerouting priority dstnat; policy accept;
\t\tjump services
\t}}
\tchain nat-output {{
\t\ttype nat hook output priority -100; policy accept;
\t\tjump services
\t}}
\tchain nat-postrouting {{
\t\ttype nat hook postrouting priority srcnat; policy accept;
\t\tmeta mark & {MASQUERADE_MARK:#x} == {MASQUERADE_MARK:#x} masquerade
\t}}
\tchain filter-input {{
\t\ttype filter hook input priority -110; policy accept;
\t\tct state new jump no-endpoints
{unknown_ports}\t}}
\tchain filter-output {{
\t\ttype filter hook output priority -110; policy accept;
\t\tct state new jump no-endpoints
\t}}
\tchain filter-forward {{
\t\ttype filter hook forward priority -110; policy drop;
\t\tct status dnat accept
\t\tct state related accept
\t}}
\tchain no-endpoints {{
{no_endpoints}\t}}
\tchain services {{
{dispatch}\t}}
{chains}}}
"
    )
}

/// Runs `nft` (and `ip`) for the [`Applier`]. Injectable so tests need
/// no root.
pub trait NftExecutor: Send {
    /// Makes sure the [`service_routes`] are there (the kernel drops them
    /// with the link when it goes down).
    fn routes(&mut self) -> Result<()>;
    /// Runs `script` with `nft -f -`, all or nothing.
    fn apply(&mut self, script: &str) -> Result<()>;
    /// Deletes [`TABLE`]; a missing table is success.
    fn delete(&mut self) -> Result<()>;
}

/// Runs `program args` with `stdin`, killed after [`COMMAND_TIMEOUT`].
fn run(program: &str, args: &[&str], stdin: &str) -> Result<()> {
    let shown = format!("{program} {}", args.join(" "));
    let handle = duct::cmd(program, args)
        .stdin_bytes(stdin.as_bytes().to_vec())
        .stdout_null()
        .stderr_capture()
        .unchecked()
        .start()
        .with_context(|| format!("starting {shown}"))?;
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    loop {
        if let Some(out) = handle.try_wait()? {
            if out.status.success() {
                return Ok(());
            }
            bail!("{shown}: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        if Instant::now() > deadline {
            let _ = handle.kill();
            bail!("{shown} did not finish within {COMMAND_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The routes that let the node's own connections to a ClusterIP reach
/// the output hook (a lab node has no default route; without one the
/// connect fails before nftables sees it): the service ranges on the
/// interface holding the node's first address of each family.
pub fn service_routes(node_addresses: &[IpAddr], device: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (v6, cidr) in [
        (false, lab_apiserver::SERVICE_CIDR_V4),
        (true, lab_apiserver::SERVICE_CIDR_V6),
    ] {
        if let Some(src) = node_addresses.iter().find(|a| is_v6(a) == v6) {
            out.push(
                [
                    if v6 { "-6" } else { "-4" },
                    "route",
                    "replace",
                    cidr,
                    "dev",
                    device,
                    "src",
                    &src.to_string(),
                ]
                .map(str::to_owned)
                .to_vec(),
            );
        }
    }
    out
}

/// [`NftExecutor`] running `nft` and `ip` in this process's network
/// namespace, with the [`service_routes`] on `device`.
pub struct Nft {
    node_addresses: Vec<IpAddr>,
    device: String,
}

impl Nft {
    /// Manages the table here, with the service routes on `device`.
    pub fn new(node_addresses: Vec<IpAddr>, device: impl Into<String>) -> Self {
        Self {
            node_addresses,
            device: device.into(),
        }
    }
}

impl NftExecutor for Nft {
    fn routes(&mut self) -> Result<()> {
        for args in service_routes(&self.node_addresses, &self.device) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run("ip", &args, "")?;
        }
        Ok(())
    }

    fn apply(&mut self, script: &str) -> Result<()> {
        run("nft", &["-f", "-"], script)
    }

    fn delete(&mut self) -> Result<()> {
        run(
            "nft",
            &["-f", "-"],
            &format!("table inet {TABLE}\ndelete table inet {TABLE}\n"),
        )
    }
}

/// Keeps the node's table equal to the latest [`ruleset`].
pub struct Applier {
    exec: Box<dyn NftExecutor>,
    applied: Option<String>,
}

impl Applier {
    /// Applies through `exec`, starting from nothing applied.
    pub fn new(exec: Box<dyn NftExecutor>) -> Self {
        Self {
            exec,
            applied: None,
        }
    }

    /// Applies `script` unless it is what was last applied, and puts the
    /// service routes back if they went. A failure is logged and retried
    /// on the next call.
    pub fn reconcile(&mut self, script: &str) {
        if let Err(e) = self.exec.routes() {
            // Expected while the node's link is down.
            tracing::debug!(error = %e, "service routes not in place");
        }
        if self.applied.as_deref() == Some(script) {
            return;
        }
        match self.exec.apply(script) {
            Ok(()) => {
                tracing::info!(table = TABLE, "service proxy rules applied");
                self.applied = Some(script.to_owned());
            }
            Err(e) => tracing::warn!(error = %e, "applying the service proxy rules failed"),
        }
    }

    /// Deletes the table (on shutdown).
    pub fn clear(&mut self) {
        match self.exec.delete() {
            Ok(()) => self.applied = None,
            Err(e) => tracing::warn!(error = %e, "deleting the service proxy table failed"),
        }
    }
}

/// Deletes [`TABLE`] in each of `namespaces` that has it (for `down`,
/// after a crashed agent); what was removed.
pub fn delete_tables(namespaces: &[String]) -> Vec<String> {
    let mut removed = Vec::new();
    for ns in namespaces {
        let listed = run(
            "ip",
            &["netns", "exec", ns, "nft", "list", "table", "inet", TABLE],
            "",
        );
        if listed.is_ok()
            && run(
                "ip",
                &["netns", "exec", ns, "nft", "delete", "table", "inet", TABLE],
                "",
            )
            .is_ok()
        {
            removed.push(format!("nft table inet {TABLE} in {ns}"));
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};
    use std::sync::{Arc, Mutex};

    const NODE: &str = "n1";

    fn node_ips() -> Vec<IpAddr> {
        vec![
            "172.30.0.10".parse().expect("ip"),
            "fc00::10".parse().expect("ip"),
        ]
    }

    /// Service `t/web`: ClusterIP 10.96.0.5, port `http` 80 -> 8080, with
    /// `extra` merged into the whole object.
    fn svc(extra: Value) -> Service {
        let mut base = json!({
            "metadata": { "name": "web", "namespace": "t" },
            "spec": { "type": "ClusterIP", "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"],
                      "ports": [{ "name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP" }] },
        });
        merge(&mut base, &extra);
        serde_json::from_value(base).expect("service")
    }

    fn merge(base: &mut Value, patch: &Value) {
        match (base, patch) {
            (Value::Object(b), Value::Object(p)) => {
                for (k, v) in p {
                    merge(b.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
            (b, p) => *b = p.clone(),
        }
    }

    fn lb(policy: &str) -> Service {
        svc(json!({
            "spec": { "type": "LoadBalancer", "externalTrafficPolicy": policy,
                      "ports": [{ "name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080 }] },
            "status": { "loadBalancer": { "ingress": [{ "ip": "192.0.2.1" }] } },
        }))
    }

    /// An endpoint on `node` at `ip`.
    fn ep(node: &str, ip: &str, ready: bool) -> Value {
        json!({ "addresses": [ip], "nodeName": node, "conditions": { "ready": ready } })
    }

    fn slice_with(family: &str, ports: Value, endpoints: Vec<Value>) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": { "name": format!("web-{}", family.to_lowercase()), "namespace": "t",
                          "labels": { SERVICE_NAME_LABEL: "web" } },
            "addressType": family,
            "endpoints": endpoints,
            "ports": ports,
        }))
        .expect("slice")
    }

    fn slice(endpoints: Vec<Value>) -> EndpointSlice {
        slice_with(
            "IPv4",
            json!([{ "name": "http", "port": 8080, "protocol": "TCP" }]),
            endpoints,
        )
    }

    const EP_LOCAL: &str = "endpoint-t/web/tcp/http/v4/172.30.0.10";
    const EP_OTHER: &str = "endpoint-t/web/tcp/http/v4/172.30.0.11";

    #[rstest]
    #[case::cluster_ip_port_to_target_port(
        svc(json!({})), vec![slice(vec![ep("n2", "172.30.0.11", true)])],
        &["ip daddr { 10.96.0.5 } tcp dport 80 goto cluster-t/web/tcp/http/v4",
          "meta l4proto tcp dnat ip to 172.30.0.11:8080"],
        &["tcp dport 8080 goto"])]
    #[case::named_target_port_through_the_slice(
        svc(json!({ "spec": { "ports": [{ "name": "http", "port": 80, "targetPort": "web", "protocol": "TCP" }] } })),
        vec![slice_with("IPv4", json!([{ "name": "http", "port": 9090, "protocol": "TCP" }]),
                        vec![ep("n2", "172.30.0.11", true)])],
        &["dnat ip to 172.30.0.11:9090"], &[])]
    #[case::random_spread_over_ready_endpoints(
        svc(json!({})),
        vec![slice(vec![ep("n1", "172.30.0.10", true), ep("n2", "172.30.0.11", true),
                        ep("n3", "172.30.0.12", false)])],
        &[&*format!("numgen random mod 2 vmap {{ 0 : goto {EP_LOCAL}, 1 : goto {EP_OTHER} }}")],
        &["172.30.0.12"])]
    #[case::load_balancer_cluster_policy_masquerades(
        lb("Cluster"), vec![slice(vec![ep("n2", "172.30.0.11", true)])],
        &["ip daddr { 192.0.2.1 } tcp dport 80 goto external-t/web/tcp/http/v4",
          "chain external-t/web/tcp/http/v4 {\n\t\tmeta mark set meta mark | 0x4000\n\t\tgoto cluster-t/web/tcp/http/v4\n\t}",
          "meta mark & 0x4000 == 0x4000 masquerade"],
        &["fib saddr"])]
    #[case::node_port_on_the_node_addresses(
        lb("Cluster"), vec![slice(vec![ep("n2", "172.30.0.11", true)])],
        &["ip daddr { 172.30.0.10 } tcp dport 30080 goto external-t/web/tcp/http/v4"],
        &["ip6 daddr { fc00::10 }"])]
    #[case::local_policy_local_endpoints_only_no_masquerade(
        lb("Local"),
        vec![slice(vec![ep("n1", "172.30.0.10", true), ep("n2", "172.30.0.11", true)])],
        &[&*format!("chain external-t/web/tcp/http/v4 {{\n\t\tfib saddr type local meta mark set meta mark | 0x4000 goto cluster-t/web/tcp/http/v4\n\t\tnumgen random mod 1 vmap {{ 0 : goto {EP_LOCAL} }}\n\t}}")],
        &[])]
    #[case::local_policy_without_local_endpoint_drops(
        lb("Local"), vec![slice(vec![ep("n2", "172.30.0.11", true)])],
        &["fib saddr type local meta mark set meta mark | 0x4000 goto cluster-t/web/tcp/http/v4\n\t\tdrop\n"],
        &[])]
    #[case::no_endpoints_rejected(
        lb("Cluster"), vec![slice(vec![ep("n2", "172.30.0.11", false)])],
        &["ip daddr { 10.96.0.5 } tcp dport 80 reject",
          "ip daddr { 192.0.2.1 } tcp dport 80 reject",
          "ip daddr { 172.30.0.10 } tcp dport 30080 reject"],
        &["goto cluster-", "dnat ip"])]
    #[case::udp(
        svc(json!({ "spec": { "ports": [{ "name": "dns", "port": 53, "targetPort": 8081, "protocol": "UDP" }] } })),
        vec![slice_with("IPv4", json!([{ "name": "dns", "port": 8081, "protocol": "UDP" }]),
                        vec![ep("n2", "172.30.0.11", true)])],
        &["ip daddr { 10.96.0.5 } udp dport 53 goto cluster-t/web/udp/dns/v4",
          "meta l4proto udp dnat ip to 172.30.0.11:8081"], &["tcp dport"])]
    #[case::ipv6_endpoints_for_ipv6_addresses(
        svc(json!({ "spec": { "clusterIP": "fd00:10:96::5", "clusterIPs": ["fd00:10:96::5"] } })),
        vec![slice(vec![ep("n2", "172.30.0.11", true)]),
             slice_with("IPv6", json!([{ "name": "http", "port": 8080, "protocol": "TCP" }]),
                        vec![ep("n2", "fc00::11", true)])],
        &["ip6 daddr { fd00:10:96::5 } tcp dport 80 goto cluster-t/web/tcp/http/v6",
          "chain endpoint-t/web/tcp/http/v6/fc00__11 {\n\t\tmeta l4proto tcp dnat ip6 to [fc00::11]:8080"],
        &["172.30.0.11"])]
    #[case::other_ports_of_service_ips_refused(
        lb("Cluster"), vec![slice(vec![ep("n2", "172.30.0.11", true)])],
        &["ct state new ip daddr { 10.96.0.5, 192.0.2.1 } meta l4proto { tcp, udp } reject"], &[])]
    #[case::only_dnatted_traffic_forwarded(
        svc(json!({})), vec![],
        &["type filter hook forward priority -110; policy drop;\n\t\tct status dnat accept"], &[])]
    #[case::headless_and_external_name_ignored(
        svc(json!({ "spec": { "clusterIP": "None", "clusterIPs": ["None"] } })),
        vec![slice(vec![ep("n2", "172.30.0.11", true)])],
        &[], &["dnat ip", "reject"])]
    fn rules(
        #[case] service: Service,
        #[case] slices: Vec<EndpointSlice>,
        #[case] present: &[&str],
        #[case] absent: &[&str],
    ) {
        let text = ruleset(NODE, &node_ips(), &[service], &slices);
        assert!(
            text.starts_with(&format!(
                "table inet {TABLE}\ndelete table inet {TABLE}\ntable inet {TABLE} {{\n"
            )),
            "{text}"
        );
        for p in present {
            assert!(text.contains(p), "missing {p:?} in\n{text}");
        }
        for a in absent {
            assert!(!text.contains(a), "unexpected {a:?} in\n{text}");
        }
    }

    #[test]
    fn same_input_same_text() {
        let services = [lb("Cluster"), lb("Local")];
        let slices = [slice(vec![ep("n2", "172.30.0.11", true)])];
        assert_eq!(
            ruleset(NODE, &node_ips(), &services, &slices),
            ruleset(NODE, &node_ips(), &services, &slices)
        );
    }

    #[test]
    fn service_routes_per_family() {
        assert_eq!(
            service_routes(&node_ips(), "eth0"),
            [
                vec![
                    "-4",
                    "route",
                    "replace",
                    "10.96.0.0/16",
                    "dev",
                    "eth0",
                    "src",
                    "172.30.0.10"
                ],
                vec![
                    "-6",
                    "route",
                    "replace",
                    "fd00:10:96::/112",
                    "dev",
                    "eth0",
                    "src",
                    "fc00::10"
                ],
            ]
        );
    }

    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl NftExecutor for Recorder {
        fn routes(&mut self) -> Result<()> {
            self.0.lock().expect("lock").push("routes".to_owned());
            Ok(())
        }
        fn apply(&mut self, script: &str) -> Result<()> {
            self.0.lock().expect("lock").push(script.to_owned());
            Ok(())
        }
        fn delete(&mut self) -> Result<()> {
            self.0.lock().expect("lock").push("delete".to_owned());
            Ok(())
        }
    }

    #[test]
    fn applies_only_changes_and_deletes_on_clear() {
        let rec = Recorder::default();
        let mut applier = Applier::new(Box::new(rec.clone()));
        applier.reconcile("a");
        applier.reconcile("a");
        applier.reconcile("b");
        applier.clear();
        applier.reconcile("b");
        assert_eq!(
            *rec.0.lock().expect("lock"),
            [
                "routes", "a", "routes", "routes", "b", "delete", "routes", "b"
            ]
        );
    }
}
