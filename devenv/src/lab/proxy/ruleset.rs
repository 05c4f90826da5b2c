//! The service proxy's decision: [`ruleset`] writes, from the node, the
//! Services and the EndpointSlices, the one nftables table, [`TABLE`],
//! that does what kube-proxy in nftables mode would. Pure: objects in,
//! text out; `proxy::Applier` applies it.

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::IpAddr;

/// The `inet` table the proxy owns in each node namespace.
pub const TABLE: &str = "lab_proxy";

/// The packet mark asking the postrouting chain to masquerade.
const MASQUERADE_MARK: u32 = 0x4000;

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
pub(crate) fn slices_of<'a>(
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
    let rules = port_rules(node, services, slices);
    for (v6, p) in &rules {
        let Some(r) = reached(*v6, p, node_addresses) else {
            continue;
        };
        service_ips[usize::from(*v6)].extend(r.cluster_ips.iter().chain(&r.lb_ips).copied());
        if p.endpoints.is_empty() {
            no_endpoints.push_str(&reject_rules(&r));
        } else {
            dispatch.push_str(&dispatch_rules(&r));
            chains.push_str(&port_chains(&r));
        }
    }
    table(&Sections {
        unknown_ports: unknown_ports(&service_ips),
        no_endpoints,
        dispatch,
        chains,
    })
}

/// One service port in one family with the addresses this node reaches
/// it at.
struct Reached<'a> {
    p: &'a PortRules,
    /// `ip` or `ip6`.
    fam: &'static str,
    /// `<port id>/v4` or `/v6`: the stem of its chains' names.
    id: String,
    cluster_ips: Vec<&'a IpAddr>,
    lb_ips: Vec<&'a IpAddr>,
    /// The node's own addresses of the family.
    node_ips: Vec<&'a IpAddr>,
    /// The NodePort, where the node has an address of the family.
    node_port: Option<u16>,
}

/// `p` as this node reaches it, or `None` when it has no address to be
/// reached at.
fn reached<'a>(v6: bool, p: &'a PortRules, node_addresses: &'a [IpAddr]) -> Option<Reached<'a>> {
    let node_ips: Vec<&IpAddr> = node_addresses.iter().filter(|a| is_v6(a) == v6).collect();
    let node_port = p.node_port.filter(|_| !node_ips.is_empty());
    if p.cluster_ips.is_empty() && p.lb_ips.is_empty() && node_port.is_none() {
        return None;
    }
    let suffix = if v6 { "v6" } else { "v4" };
    Some(Reached {
        p,
        fam: family(v6),
        id: format!("{}/{suffix}", p.id),
        cluster_ips: p.cluster_ips.iter().collect(),
        lb_ips: p.lb_ips.iter().collect(),
        node_ips,
        node_port,
    })
}

/// `{ a, b }`: an nftables anonymous set.
fn set(ips: &[&IpAddr]) -> String {
    let list: Vec<String> = ips.iter().map(ToString::to_string).collect();
    format!("{{ {} }}", list.join(", "))
}

/// The `no-endpoints` rules of a port without any endpoint anywhere:
/// refused, as kube-proxy does.
fn reject_rules(r: &Reached) -> String {
    let (fam, proto) = (r.fam, r.p.protocol);
    let mut out = String::new();
    for ips in [&r.cluster_ips, &r.lb_ips] {
        if !ips.is_empty() {
            let _ = writeln!(
                out,
                "\t\t{fam} daddr {} {proto} dport {} reject",
                set(ips),
                r.p.port
            );
        }
    }
    if let Some(np) = r.node_port {
        let _ = writeln!(
            out,
            "\t\t{fam} daddr {} {proto} dport {np} reject",
            set(&r.node_ips)
        );
    }
    out
}

/// The `services` rules of a port: ClusterIPs to its cluster chain,
/// LoadBalancer IPs and the NodePort to its external chain.
fn dispatch_rules(r: &Reached) -> String {
    let (fam, proto, id) = (r.fam, r.p.protocol, &r.id);
    let mut out = String::new();
    if !r.cluster_ips.is_empty() {
        let _ = writeln!(
            out,
            "\t\t{fam} daddr {} {proto} dport {} goto cluster-{id}",
            set(&r.cluster_ips),
            r.p.port
        );
    }
    if !r.lb_ips.is_empty() {
        let _ = writeln!(
            out,
            "\t\t{fam} daddr {} {proto} dport {} goto external-{id}",
            set(&r.lb_ips),
            r.p.port
        );
    }
    if let Some(np) = r.node_port {
        let _ = writeln!(
            out,
            "\t\t{fam} daddr {} {proto} dport {np} goto external-{id}",
            set(&r.node_ips)
        );
    }
    out
}

/// The chain that DNATs to endpoint `e`.
fn endpoint_chain(id: &str, e: &Endpoint) -> String {
    format!("endpoint-{id}/{}", e.address.to_string().replace(':', "_"))
}

/// A rule spreading at random over `eps`.
fn spread(id: &str, eps: &[&Endpoint]) -> String {
    let arms: Vec<String> = eps
        .iter()
        .enumerate()
        .map(|(i, e)| format!("{i} : goto {}", endpoint_chain(id, e)))
        .collect();
    format!(
        "\t\tnumgen random mod {} vmap {{ {} }}\n",
        eps.len(),
        arms.join(", ")
    )
}

/// A port's chains: cluster (every endpoint), external (by the traffic
/// policy) and one per endpoint.
fn port_chains(r: &Reached) -> String {
    let (fam, proto, id, p) = (r.fam, r.p.protocol, r.id.as_str(), r.p);
    let cluster = format!("cluster-{id}");
    let external = format!("external-{id}");
    let mut out = String::new();
    let all: Vec<&Endpoint> = p.endpoints.iter().collect();
    let _ = write!(out, "\tchain {cluster} {{\n{}\t}}\n", spread(id, &all));
    let mark = format!("meta mark set meta mark | {MASQUERADE_MARK:#x}");
    let external_body = if p.local_policy {
        let local: Vec<&Endpoint> = p.endpoints.iter().filter(|e| e.local).collect();
        // The node's own traffic is not external: it may go anywhere.
        let mut body = format!("\t\tfib saddr type local {mark} goto {cluster}\n");
        if local.is_empty() {
            body.push_str("\t\tdrop\n");
        } else {
            body.push_str(&spread(id, &local));
        }
        body
    } else {
        format!("\t\t{mark}\n\t\tgoto {cluster}\n")
    };
    let _ = write!(out, "\tchain {external} {{\n{external_body}\t}}\n");
    for e in &p.endpoints {
        let _ = write!(
            out,
            "\tchain {} {{\n\t\tmeta l4proto {proto} dnat {fam} to {}:{}\n\t}}\n",
            endpoint_chain(id, e),
            addr(&e.address),
            e.port
        );
    }
    out
}

/// The `filter-input` rules refusing new TCP or UDP to a service IP on a
/// port no service uses, per family.
fn unknown_ports(service_ips: &[BTreeSet<IpAddr>; 2]) -> String {
    let mut out = String::new();
    for (v6, ips) in service_ips.iter().enumerate() {
        if !ips.is_empty() {
            let list: Vec<String> = ips.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                out,
                "\t\tct state new {} daddr {{ {} }} meta l4proto {{ tcp, udp }} reject",
                family(v6 == 1),
                list.join(", ")
            );
        }
    }
    out
}

/// The rules of every port, each kind for the chain it goes in.
struct Sections {
    unknown_ports: String,
    no_endpoints: String,
    dispatch: String,
    chains: String,
}

/// The whole script: the fixed hooks and chains around `s`.
fn table(s: &Sections) -> String {
    let Sections {
        unknown_ports,
        no_endpoints,
        dispatch,
        chains,
    } = s;
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

#[cfg(test)]
mod tests;
