//! Making the machine match a lab network's plan: [`ensure`] creates only
//! what is missing or wrong, one named step per layer (namespaces,
//! bridges, each host's sysctls, veth pairs, addresses and routes), and
//! reads back the MACs into the [`Lab`] it returns. Needs root.

use super::destroy::kill_processes;
use super::ip::{
    Link, addresses, del_link, find, ip, ip_json, lab_namespaces, links, list_namespaces,
    read_sysctls, require_privileges,
};
use super::plan::{HostPlan, InterfacePlan, Plan, Topology, plan};
use super::{Lab, LabError, LabHost, Result, RoutePlan, assemble};
use std::collections::BTreeMap;
use std::time::Duration;

/// Makes the machine match `topology`'s [`plan`], creating only what is
/// missing or wrong: a second call on a healthy lab changes nothing (its
/// [`Lab::changes`] is empty). Namespaces of the lab that the plan does not
/// have (a node fewer than last time) are deleted; extra addresses or an
/// `eth1` left from an earlier topology are not. Needs root.
pub fn ensure(topology: &Topology) -> Result<Lab> {
    let plan = plan(topology)?;
    require_privileges()?;
    let mut changes = ensure_namespaces(&plan)?;
    changes.extend(ensure_bridges(&plan)?);
    let unchanged = ensure_hosts(&plan, &mut changes)?;
    let mut lab = read_back(&plan, unchanged)?;
    lab.changes = changes;
    Ok(lab)
}

/// Deletes the namespaces of this lab that the plan no longer has (fewer
/// nodes than last time), with their processes, and creates the missing
/// ones with `lo` up.
fn ensure_namespaces(plan: &Plan) -> Result<Vec<String>> {
    let mut changes = Vec::new();
    let existing = list_namespaces()?;
    let wanted = plan.namespaces();
    for ns in lab_namespaces(&plan.name, &existing) {
        if !wanted.contains(&ns) {
            kill_processes(&ns, Duration::from_secs(2))?;
            ip(&["netns", "del", &ns])?;
            changes.push(format!("deleted stale namespace {ns}"));
        }
    }
    for ns in wanted {
        if !existing.contains(&ns) {
            ip(&["netns", "add", &ns])?;
            changes.push(format!("created namespace {ns}"));
        }
        let lo = links(&ns)?;
        if !find(&lo, "lo").is_some_and(|l| l.up) {
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            changes.push(format!("{ns}: lo up"));
        }
    }
    Ok(changes)
}

/// The bridge namespace's sysctls and its bridges, up.
fn ensure_bridges(plan: &Plan) -> Result<Vec<String>> {
    let net = plan.net_namespace.as_str();
    let mut changes = apply_sysctls(net, &plan.net_sysctls)?;
    let net_links = links(net)?;
    for bridge in plan.bridges.iter().chain(&plan.router_bridges) {
        let br = bridge.name.as_str();
        match find(&net_links, br) {
            Some(l) if l.kind.as_deref() == Some("bridge") => {
                if !l.up {
                    ip(&["-n", net, "link", "set", br, "up"])?;
                    changes.push(format!("{net}: {br} up"));
                }
            }
            other => {
                if other.is_some() {
                    ip(&["-n", net, "link", "del", br])?;
                    changes.push(format!("{net}: deleted {br} (not a bridge)"));
                }
                ip(&[
                    "-n",
                    net,
                    "link",
                    "add",
                    br,
                    "type",
                    "bridge",
                    "mcast_snooping",
                    "0",
                ])?;
                ip(&["-n", net, "link", "set", br, "up"])?;
                changes.push(format!("{net}: created bridge {br}"));
            }
        }
    }
    Ok(changes)
}

/// Each host's sysctls, interfaces and routes. Returns the links of the
/// hosts where nothing changed, so reading back need not ask again.
fn ensure_hosts(plan: &Plan, changes: &mut Vec<String>) -> Result<BTreeMap<String, Vec<Link>>> {
    let net = plan.net_namespace.as_str();
    // The bridge namespace's links are read again only after something
    // changed.
    let mut net_links = links(net)?;
    let mut net_links_at = changes.len();
    let mut unchanged = BTreeMap::new();
    for host in &plan.hosts {
        let ns = host.namespace.as_str();
        changes.extend(apply_sysctls(ns, &host.sysctls)?);
        if changes.len() != net_links_at {
            net_links = links(net)?;
            net_links_at = changes.len();
        }
        let host_links = links(ns)?;
        let host_changes_at = changes.len();
        for iface in &host.interfaces {
            let seen = Seen {
                host: &host_links,
                net: &net_links,
            };
            ensure_interface(ns, net, iface, seen, changes)?;
        }
        changes.extend(ensure_routes(ns, &host.routes)?);
        if changes.len() == host_changes_at {
            unchanged.insert(ns.to_owned(), host_links);
        }
    }
    Ok(unchanged)
}

/// The links read before a host's interfaces were ensured: its own and
/// the bridge namespace's.
#[derive(Clone, Copy)]
struct Seen<'a> {
    host: &'a [Link],
    net: &'a [Link],
}

/// One NIC of host namespace `ns`: a healthy veth pair (else a new one),
/// its peer on its bridge and up, its sysctls and addresses, and up.
fn ensure_interface(
    ns: &str,
    net: &str,
    iface: &InterfacePlan,
    seen: Seen<'_>,
    changes: &mut Vec<String>,
) -> Result<()> {
    let (dev, peer, br) = (iface.name.as_str(), iface.peer.as_str(), &iface.bridge);
    let have_dev = find(seen.host, dev);
    let have_peer = find(seen.net, peer);
    let healthy_pair = have_dev.is_some_and(|l| l.kind.as_deref() == Some("veth"))
        && have_peer.is_some_and(|l| l.kind.as_deref() == Some("veth"));
    if !healthy_pair {
        if have_dev.is_some() {
            ip(&["-n", ns, "link", "del", dev])?;
            changes.push(format!("{ns}: deleted broken {dev}"));
        }
        // Deleting one end of a veth deletes the other: look again.
        // A peer whose namespace was just deleted is torn down by
        // the kernel in the background, so it may vanish between
        // the look and the delete.
        if find(&links(net)?, peer).is_some() && del_link(net, peer)? {
            changes.push(format!("{net}: deleted stale {peer}"));
        }
        ip(&[
            "-n", ns, "link", "add", dev, "type", "veth", "peer", "name", peer, "netns", net,
        ])?;
        changes.push(format!("created veth {ns}/{dev} <-> {net}/{peer}"));
    }
    let peer_now = if healthy_pair {
        have_peer.cloned()
    } else {
        find(&links(net)?, peer).cloned()
    };
    let peer_now = peer_now.ok_or_else(|| LabError::Parse {
        command: format!("ip -n {net} link show"),
        reason: format!("{peer} missing right after creating it"),
    })?;
    if peer_now.master.as_deref() != Some(br.as_str()) {
        ip(&["-n", net, "link", "set", peer, "master", br])?;
        changes.push(format!("{net}: {peer} master {br}"));
    }
    if !peer_now.up {
        ip(&["-n", net, "link", "set", peer, "up"])?;
        changes.push(format!("{net}: {peer} up"));
    }
    changes.extend(apply_sysctls(ns, &iface.sysctls)?);
    let have_addrs = addresses(ns, dev)?;
    for addr in &iface.addresses {
        if !have_addrs.contains(addr) {
            let a = addr.to_string();
            let mut args = vec!["-n", ns, "addr", "add", &a, "dev", dev];
            if addr.addr().is_ipv6() {
                args.push("nodad");
            }
            ip(&args)?;
            changes.push(format!("{ns}: {dev} address {a}"));
        }
    }
    let dev_up = healthy_pair && have_dev.is_some_and(|l| l.up);
    if !dev_up {
        ip(&["-n", ns, "link", "set", dev, "up"])?;
        changes.push(format!("{ns}: {dev} up"));
    }
    Ok(())
}

/// The [`Lab`] as the machine has it now: each interface's MAC from the
/// links `unchanged` kept, or read again.
fn read_back(plan: &Plan, mut unchanged: BTreeMap<String, Vec<Link>>) -> Result<Lab> {
    let mut seen = BTreeMap::new();
    for host in &plan.hosts {
        let host_links = match unchanged.remove(&host.namespace) {
            Some(unchanged) => unchanged,
            None => links(&host.namespace)?,
        };
        seen.insert(host.namespace.clone(), host_links);
    }
    assemble(plan, |host: &HostPlan, iface: &InterfacePlan| {
        seen.get(&host.namespace)
            .and_then(|l| find(l, &iface.name))
            .and_then(|l| l.mac)
            .ok_or_else(|| LabError::Parse {
                command: format!("ip -j -n {} link show", host.namespace),
                reason: format!("no MAC address for {}", iface.name),
            })
    })
}

/// Sets those of `sysctls` inside `ns` that differ; returns the changes.
fn apply_sysctls(ns: &str, sysctls: &[(String, String)]) -> Result<Vec<String>> {
    if sysctls.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<&str> = sysctls.iter().map(|(k, _)| k.as_str()).collect();
    let current = read_sysctls(ns, &keys)?;
    let assignments: Vec<String> = sysctls
        .iter()
        .zip(&current)
        .filter(|((_, want), have)| want != *have)
        .map(|((k, v), _)| format!("{k}={v}"))
        .collect();
    if assignments.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec!["netns", "exec", ns, "sysctl", "-q", "-w"];
    args.extend(assignments.iter().map(String::as_str));
    ip(&args)?;
    Ok(assignments
        .into_iter()
        .map(|a| format!("{ns}: sysctl {a}"))
        .collect())
}

/// Puts `host`'s planned routes back: the kernel drops a route through
/// a gateway when its link goes down, and does not restore it when the
/// link comes back up (the specs that take a node's link down and up).
/// Returns what it added.
pub fn restore_routes(host: &LabHost) -> Result<Vec<String>> {
    ensure_routes(&host.namespace, &host.routes)
}

/// Adds or corrects `routes` in `ns` (`ip route replace` where the route
/// is missing or goes elsewhere); returns the changes.
fn ensure_routes(ns: &str, routes: &[RoutePlan]) -> Result<Vec<String>> {
    let mut changes = Vec::new();
    for r in routes {
        let family = if r.destination.addr().is_ipv6() {
            "-6"
        } else {
            "-4"
        };
        let dst = r.destination.to_string();
        let gw = r.gateway.to_string();
        let have = ip_json(&[family, "-n", ns, "route", "show", "exact", &dst])?;
        let right =
            have.len() == 1 && have[0].get("gateway").and_then(|g| g.as_str()) == Some(gw.as_str());
        if !right {
            ip(&[family, "-n", ns, "route", "replace", &dst, "via", &gw])?;
            changes.push(format!("{ns}: route {dst} via {gw}"));
        }
    }
    Ok(changes)
}
