//! Unnumbered peers: a BGPPeer naming the node's interface instead of an
//! address, against the first router with `neighbor <interface>
//! interface` added at run time (FRR then sends Router Advertisements
//! there, as for any unnumbered neighbor). IPv4 routes must reach the
//! router, and its kernel, with the node's IPv6 link-local address as
//! next hop (RFC 8950).

use super::*;
use std::net::Ipv6Addr;

pub(super) fn specs() -> Vec<Spec> {
    vec![Spec::new(
        "BGP",
        "unnumbered: should announce IPv4 routes over an interface session with the node's link-local next hop",
        &["IPV4"],
        announces_over_link_local,
    )]
}

/// The node's interface toward the first router.
const NODE_INTERFACE: &str = "eth0";

/// The router's interface neighbor, removed when dropped (pass, fail or
/// panic).
struct InterfaceNeighbor<'a> {
    ctx: &'a Ctx,
    interface: String,
}

impl<'a> InterfaceNeighbor<'a> {
    fn add(ctx: &'a Ctx, interface: &str) -> Result<Self> {
        let neighbor = InterfaceNeighbor {
            ctx,
            interface: interface.to_owned(),
        };
        ctx.cluster().vtysh(&format!(
            "configure terminal\nrouter bgp {ASN}\nneighbor {interface} interface remote-as internal\n\
             address-family ipv4 unicast\nneighbor {interface} activate\nexit-address-family"
        ))?;
        Ok(neighbor)
    }
}

impl Drop for InterfaceNeighbor<'_> {
    fn drop(&mut self) {
        let undo = format!(
            "configure terminal\nrouter bgp {ASN}\nno neighbor {}",
            self.interface
        );
        if let Err(e) = self.ctx.cluster().vtysh(&undo) {
            eprintln!("e2e: could not remove the router's interface neighbor: {e:#}");
        }
    }
}

fn announces_over_link_local(ctx: &Ctx) -> Result<()> {
    let (node, _) = node_addresses(ctx, false)
        .first()
        .context("no node")?
        .clone();
    let node_ll = link_local(ctx, &node)?;
    let router_if = ctx.cluster().external_interface(NODE_INTERFACE)?;
    let _neighbor = InterfaceNeighbor::add(ctx, &router_if)?;
    let mut config = Config::new(ctx)?;
    config.bgp_peer(
        "unnumbered",
        json!({
            "myASN": ASN,
            "peerASN": ASN,
            "interface": NODE_INTERFACE,
            "holdTime": hold_time(),
            "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": node } }],
        }),
    )?;
    pool_and_advertisement(&mut config, &[POOL_V4], json!({}))?;
    eventually(
        WAIT,
        &format!("the router's session on {router_if} from {node} ({node_ll})"),
        || {
            let shown = ctx
                .cluster()
                .vtysh(&format!("show bgp neighbors {router_if} json"))?;
            let (state, foreign) = session(&shown, &router_if)?;
            Ok((state == "Established")
                .then_some(foreign)
                .flatten()
                .filter(|f| *f == node_ll))
        },
    )?;
    backends(ctx, &[])?;
    let ip = service(ctx, "web", false, json!({}), None)?;
    let prefix = host_route(ip);
    let (bgp, zebra) = eventually(
        WAIT,
        &format!("{prefix} via {node_ll} in the router's BGP table and installed"),
        || {
            let bgp = next_hops(
                &ctx.cluster()
                    .vtysh(&format!("show bgp ipv4 unicast {prefix} json"))?,
            )?;
            let zebra = installed_next_hops(
                &ctx.cluster()
                    .vtysh(&format!("show ip route {prefix} json"))?,
                prefix,
            )?;
            Ok((bgp.contains(&node_ll) && zebra.contains(&node_ll)).then_some((bgp, zebra)))
        },
    )?;
    eprintln!(
        "e2e: unnumbered: {prefix} at the router: BGP next hops {bgp:?}, installed via {zebra:?}; {node}'s link-local is {node_ll}"
    );
    Ok(())
}

/// `node`'s IPv6 link-local address on [`NODE_INTERFACE`].
fn link_local(ctx: &Ctx, node: &str) -> Result<Ipv6Addr> {
    let argv = [
        "ip",
        "-j",
        "-6",
        "addr",
        "show",
        "dev",
        NODE_INTERFACE,
        "scope",
        "link",
    ];
    let out = ctx.cluster().exec_on_node(node, &argv)?;
    ensure!(out.status.success(), "{argv:?} failed on {node}");
    link_local_of(&String::from_utf8_lossy(&out.stdout))
        .with_context(|| format!("{node} has no link-local address on {NODE_INTERFACE}"))
}

/// The first link-local address in `ip -j addr` output.
fn link_local_of(text: &str) -> Option<Ipv6Addr> {
    let v: Value = serde_json::from_str(text).ok()?;
    v.as_array()?
        .iter()
        .flat_map(|l| l["addr_info"].as_array().into_iter().flatten())
        .filter_map(|a| a["local"].as_str()?.parse::<Ipv6Addr>().ok())
        .find(Ipv6Addr::is_unicast_link_local)
}

/// State and remote address of interface neighbor `interface` in
/// `show bgp neighbors <interface> json`.
fn session(text: &str, interface: &str) -> Result<(String, Option<Ipv6Addr>)> {
    let v: Value = serde_json::from_str(text).context("show bgp neighbors: not JSON")?;
    let n = &v[interface];
    let state = n["bgpState"].as_str().unwrap_or("none").to_owned();
    let foreign = n["hostForeign"].as_str().and_then(|h| h.parse().ok());
    Ok((state, foreign))
}

/// The IPv6 next hops of the valid paths in `show bgp ipv4 unicast
/// <prefix> json` (none when the prefix is absent).
fn next_hops(text: &str) -> Result<BTreeSet<Ipv6Addr>> {
    let v: Value = serde_json::from_str(text).context("show bgp: not JSON")?;
    Ok(v["paths"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["valid"].as_bool() == Some(true))
        .flat_map(|p| p["nexthops"].as_array().into_iter().flatten())
        .filter_map(|h| h["ip"].as_str()?.parse().ok())
        .collect())
}

/// The IPv6 next hops of the installed route to `prefix` in `show ip
/// route <prefix> json`.
fn installed_next_hops(text: &str, prefix: IpNet) -> Result<BTreeSet<Ipv6Addr>> {
    let v: Value = serde_json::from_str(text).context("show ip route: not JSON")?;
    Ok(v[prefix.to_string()]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["installed"].as_bool() == Some(true))
        .flat_map(|r| r["nexthops"].as_array().into_iter().flatten())
        .filter_map(|h| h["ip"].as_str()?.parse().ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LL: &str = "fe80::a8bb:ccff:fe00:10";

    #[test]
    fn reads_the_link_local_address() {
        let text = r#"[{"ifindex":2,"ifname":"eth0","addr_info":[{"family":"inet6","local":"fe80::a8bb:ccff:fe00:10","prefixlen":64,"scope":"link"}]}]"#;
        assert_eq!(link_local_of(text), LL.parse().ok());
        assert_eq!(link_local_of("[]"), None);
    }

    #[test]
    fn reads_the_interface_session() {
        let text = format!(
            r#"{{"eth0":{{"remoteAs":64512,"bgpState":"Established","hostLocal":"fe80::1","hostForeign":"{LL}"}}}}"#
        );
        assert_eq!(
            session(&text, "eth0").expect("parses"),
            ("Established".into(), LL.parse().ok())
        );
        assert_eq!(
            session("{}", "eth0").expect("parses"),
            ("none".into(), None)
        );
    }

    #[test]
    fn reads_link_local_next_hops_of_valid_paths_only() {
        let text = format!(
            r#"{{"prefix":"192.168.10.0/32","paths":[
                {{"valid":true,"nexthops":[{{"ip":"{LL}","afi":"ipv6","scope":"global","used":true}}]}},
                {{"valid":false,"nexthops":[{{"ip":"fe80::99","afi":"ipv6"}}]}},
                {{"valid":true,"nexthops":[{{"ip":"172.30.0.10","afi":"ipv4"}}]}}]}}"#
        );
        let want: BTreeSet<Ipv6Addr> = [LL.parse().expect("ip")].into();
        assert_eq!(next_hops(&text).expect("parses"), want);
        assert!(next_hops("{}").expect("parses").is_empty());
    }

    #[test]
    fn reads_the_installed_route() {
        let prefix: IpNet = "192.168.10.0/32".parse().expect("net");
        let text = format!(
            r#"{{"192.168.10.0/32":[{{"prefix":"192.168.10.0/32","protocol":"bgp","installed":true,
                "nexthops":[{{"ip":"{LL}","afi":"ipv6","interfaceName":"eth0","active":true,"fib":true}}]}}]}}"#
        );
        let want: BTreeSet<Ipv6Addr> = [LL.parse().expect("ip")].into();
        assert_eq!(installed_next_hops(&text, prefix).expect("parses"), want);
        let not_installed = text.replace(r#""installed":true"#, r#""installed":false"#);
        assert!(
            installed_next_hops(&not_installed, prefix)
                .expect("parses")
                .is_empty()
        );
    }
}
