//! FRR, the external BGP router of both dev environments (the lab runs
//! zebra + bgpd in its external namespace, kind an FRR container): its
//! configuration, the MetalLB objects that point the speakers at it, and
//! typed readers over its JSON output. Pure: the processes live in
//! `lab::frr` and `kind::cluster`.
//!
//! The readers were written against real FRR 8.4 output (recordings in
//! `devenv/tests/fixtures/frr`) and also accept FRR 9's `json detail`
//! shape (a route is an object with `paths` instead of an array whose first
//! element is a header).

use anyhow::{Context, Result, bail};
use ipnet::IpNet;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

pub mod bfd;

/// The speakers' ASN, and the iBGP routers' (like upstream's dev-env and
/// e2e suite).
pub const ASN: u32 = 64512;
/// The eBGP routers' ASN (upstream's e2e `externalASN`: a 4-byte one, so
/// every eBGP session also exercises the AS4 capability).
pub const EXTERNAL_ASN: u32 = 4_200_000_000;
/// The port bgpd listens on by default.
pub const BGP_PORT: u16 = 179;
/// The name of the dev-env's BGP pool.
pub const POOL_NAME: &str = "dev-env-bgp";
/// The BGP pools upstream's dev-env announces: outside every lab and docker
/// network, so they cannot collide with node or container addresses.
pub const POOL: [&str; 2] = ["192.168.10.0/24", "fc00:f853:ccd:e799::/124"];
/// ECMP width: FRR installs a route through up to this many announcing
/// nodes.
pub const MAX_PATHS: u32 = 8;
/// Longest TCP MD5 key the kernel takes (`TCP_MD5SIG_MAXKEYLEN`).
pub const MAX_PASSWORD_LEN: usize = 80;

/// One BGP neighbor of the router (a node address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbor {
    /// The node's address; the session runs over this family.
    pub address: IpAddr,
    /// TCP MD5 password (`neighbor X password Y`).
    pub password: Option<String>,
}

/// What [`frr_conf`] renders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterConfig {
    /// FRR's `hostname` (also sent in the hostname capability).
    pub hostname: String,
    /// Local ASN.
    pub asn: u32,
    /// Every neighbor's ASN (the speakers'): equal to `asn` for iBGP.
    pub peer_asn: u32,
    /// The neighbors are more than one hop away over eBGP
    /// (`neighbor X ebgp-multihop`); iBGP needs nothing.
    pub ebgp_multihop: bool,
    /// `bgp router-id`; `None` lets FRR pick one of its IPv4 addresses
    /// (kind, where the container's address is known only once it runs).
    pub router_id: Option<Ipv4Addr>,
    /// One per node address, in order.
    pub neighbors: Vec<Neighbor>,
}

impl RouterConfig {
    /// A router in [`ASN`] peering with every address of `node_addresses`,
    /// without passwords.
    pub fn new(hostname: &str, router_id: Option<Ipv4Addr>, node_addresses: &[IpAddr]) -> Self {
        Self {
            hostname: hostname.to_owned(),
            asn: ASN,
            peer_asn: ASN,
            ebgp_multihop: false,
            router_id,
            neighbors: node_addresses
                .iter()
                .map(|&address| Neighbor {
                    address,
                    password: None,
                })
                .collect(),
        }
    }

    /// The same router with a TCP MD5 `password` on every session.
    pub fn with_password_for_all(mut self, password: &str) -> Self {
        for n in &mut self.neighbors {
            n.password = Some(password.to_owned());
        }
        self
    }

    /// The same router with a TCP MD5 `password` on the session to
    /// `address` (which must be one of its neighbors).
    pub fn with_password(mut self, address: IpAddr, password: &str) -> Result<Self> {
        let n = self
            .neighbors
            .iter_mut()
            .find(|n| n.address == address)
            .with_context(|| format!("{address} is not a neighbor of the router"))?;
        n.password = Some(password.to_owned());
        Ok(self)
    }
}

fn check_password(address: IpAddr, password: &str) -> Result<()> {
    if password.is_empty()
        || password.len() > MAX_PASSWORD_LEN
        || password
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '!' || c == '#')
    {
        bail!(
            "neighbor {address}: the password must be 1-{MAX_PASSWORD_LEN} characters without \
             spaces, '!' or '#' (FRR reads it as one word of its config)"
        );
    }
    Ok(())
}

/// `frr.conf`: `router bgp` with a neighbor per node address, each family's
/// neighbors activated in their own address family only (the speaker opens
/// one session per BGPPeer address and sends a family over its own
/// sessions), ECMP over [`MAX_PATHS`] iBGP paths, every route accepted,
/// graceful restart on (it helps only speakers that offer it too: a
/// BGPPeer with `enableGracefulRestart`), and every neighbor passive.
///
/// Passive, because the speakers only ever connect, never listen, and
/// FRR's own attempts do harm: a SYN signed with TCP MD5 to a port
/// nobody listens on gets no reset, so the attempt hangs in Connect, and
/// FRR 8.4, moving a speaker's incoming session onto that neighbor,
/// fails the session it just established (TCP_fatal_error, "Deleting
/// stub connection") - a flap each time a speaker comes back, which
/// under graceful restart costs the paths it kept.
pub fn frr_conf(config: &RouterConfig) -> Result<String> {
    if config.hostname.is_empty() || config.hostname.contains(char::is_whitespace) {
        bail!("FRR hostname {:?}: one word, please", config.hostname);
    }
    let mut seen = std::collections::BTreeSet::new();
    for n in &config.neighbors {
        if !seen.insert(n.address) {
            bail!("neighbor {} appears twice", n.address);
        }
        if let Some(p) = &n.password {
            check_password(n.address, p)?;
        }
    }
    let asn = config.asn;
    let mut conf = format!(
        "frr defaults traditional\nhostname {}\nlog stdout informational\n!\nrouter bgp {asn}\n",
        config.hostname
    );
    if let Some(id) = config.router_id {
        conf.push_str(&format!(" bgp router-id {id}\n"));
    }
    conf.push_str(
        " no bgp ebgp-requires-policy\n no bgp default ipv4-unicast\n no bgp network import-check\n",
    );
    conf.push_str(" bgp graceful-restart\n");
    let peer_asn = config.peer_asn;
    for n in &config.neighbors {
        conf.push_str(&format!(" neighbor {} remote-as {peer_asn}\n", n.address));
        if config.ebgp_multihop && peer_asn != asn {
            conf.push_str(&format!(" neighbor {} ebgp-multihop\n", n.address));
        }
        if let Some(p) = &n.password {
            conf.push_str(&format!(" neighbor {} password {p}\n", n.address));
        }
        conf.push_str(&format!(" neighbor {} passive\n", n.address));
    }
    for family in [AddressFamily::Ipv4, AddressFamily::Ipv6] {
        let members: Vec<_> = config
            .neighbors
            .iter()
            .filter(|n| AddressFamily::of(&n.address) == family)
            .collect();
        if members.is_empty() {
            continue;
        }
        conf.push_str(&format!(" !\n address-family {} unicast\n", family.name()));
        conf.push_str(&format!(
            "  maximum-paths {MAX_PATHS}\n  maximum-paths ibgp {MAX_PATHS}\n"
        ));
        for n in members {
            conf.push_str(&format!("  neighbor {} activate\n", n.address));
            conf.push_str(&format!("  neighbor {} next-hop-self\n", n.address));
        }
        conf.push_str(" exit-address-family\n");
    }
    conf.push_str("exit\n!\nline vty\n!\n");
    Ok(conf)
}

/// A BGP router the speakers can peer with, as a BGPPeer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BgpRouter {
    /// Its name (`ibgp-single-hop`, ...; `frr` for kind's one router).
    pub name: String,
    /// Its addresses, one per family it has.
    pub addresses: Vec<IpAddr>,
    /// Its ASN (the BGPPeer's `peerASN`).
    pub asn: u32,
    /// The port it listens on (the BGPPeer's `peerPort`).
    pub port: u16,
    /// The TCP MD5 password it expects from every speaker.
    pub password: Option<String>,
    /// It is a routed hop away from the nodes.
    pub multi_hop: bool,
}

impl BgpRouter {
    /// kind's router: iBGP in [`ASN`] on the node network, no password.
    pub fn single(name: &str, addresses: &[IpAddr]) -> Self {
        Self {
            name: name.to_owned(),
            addresses: addresses.to_vec(),
            asn: ASN,
            port: BGP_PORT,
            password: None,
            multi_hop: false,
        }
    }

    /// Its address of the family, if it has one.
    pub fn address(&self, v6: bool) -> Option<IpAddr> {
        self.addresses.iter().copied().find(|a| a.is_ipv6() == v6)
    }

    /// An external peer (another AS than the speakers').
    pub fn ebgp(&self) -> bool {
        self.asn != ASN
    }

    /// The BGPPeer needs `ebgpMultiHop` (an external peer a hop away), as
    /// upstream's `PeersForContainers` decides it.
    pub fn ebgp_multi_hop(&self) -> bool {
        self.multi_hop && self.ebgp()
    }

    /// The BGPPeer spec for its `address` (without `password`): myASN
    /// [`ASN`], its ASN, its port unless the default, `ebgpMultiHop` when
    /// it needs it.
    pub fn peer_spec(&self, address: IpAddr) -> Value {
        let mut spec =
            json!({ "myASN": ASN, "peerASN": self.asn, "peerAddress": address.to_string() });
        if self.port != BGP_PORT {
            spec["peerPort"] = json!(self.port);
        }
        if self.ebgp_multi_hop() {
            spec["ebgpMultiHop"] = json!(true);
        }
        spec
    }
}

/// The dev-env's MetalLB objects for `routers`: one BGPPeer per router
/// address (`<router>-v4`, `<router>-v6`; [`BgpRouter::peer_spec`] with
/// its password), the pool [`POOL_NAME`] with the [`POOL`] CIDRs of the
/// families the routers have, and a BGPAdvertisement of every pool; each
/// labelled `label`.
pub fn objects(namespace: &str, routers: &[BgpRouter], label: (&str, &str)) -> Vec<Value> {
    let meta = |name: &str| json!({ "name": name, "namespace": namespace, "labels": { label.0: label.1 } });
    let mut objects: Vec<Value> = routers
        .iter()
        .flat_map(|r| r.addresses.iter().map(move |a| (r, *a)))
        .map(|(r, a)| {
            let family = if a.is_ipv6() { "v6" } else { "v4" };
            let mut spec = r.peer_spec(a);
            if let Some(p) = &r.password {
                spec["password"] = json!(p);
            }
            json!({
                "apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
                "metadata": meta(&format!("{}-{family}", r.name)),
                "spec": spec,
            })
        })
        .collect();
    let pool: Vec<&str> = POOL
        .iter()
        .copied()
        .filter(|cidr| {
            routers
                .iter()
                .flat_map(|r| &r.addresses)
                .any(|a| a.is_ipv6() == cidr.contains(':'))
        })
        .collect();
    objects.push(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": meta(POOL_NAME),
        "spec": { "addresses": pool },
    }));
    objects.push(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
        "metadata": meta("empty"),
        "spec": {},
    }));
    objects
}

// ---------------------------------------------------------------------------
// Reading FRR.

/// A BGP address family (unicast).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddressFamily {
    /// IPv4 unicast.
    Ipv4,
    /// IPv6 unicast.
    Ipv6,
}

impl AddressFamily {
    /// The family of `address`.
    pub fn of(address: &IpAddr) -> Self {
        if address.is_ipv6() {
            Self::Ipv6
        } else {
            Self::Ipv4
        }
    }

    /// `ipv4` or `ipv6`, as FRR's commands spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
        }
    }
}

/// The vtysh command [`parse_neighbors`] reads.
pub const NEIGHBORS_COMMAND: &str = "show bgp neighbors json";

/// The vtysh command [`parse_routes`] reads for `family`.
pub fn routes_command(family: AddressFamily) -> String {
    format!("show bgp {} unicast json detail", family.name())
}

/// The command (argv) whose output [`parse_kernel_routes`] reads: the
/// routes zebra installed into the kernel for `family`.
pub fn kernel_routes_argv(family: AddressFamily) -> [&'static str; 7] {
    let f = match family {
        AddressFamily::Ipv4 => "-4",
        AddressFamily::Ipv6 => "-6",
    };
    ["ip", "-j", f, "route", "show", "proto", "bgp"]
}

/// One neighbor as `show bgp neighbors json` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeighborStatus {
    /// The peer's address.
    pub address: IpAddr,
    /// FSM state (`bgpState`): `Idle`, `Connect`, `Active`, `OpenSent`,
    /// `OpenConfirm`, `Established`.
    pub state: String,
    /// `remoteAs`.
    pub remote_as: Option<u32>,
    /// `remoteRouterId` (`0.0.0.0` before the first OPEN).
    pub remote_router_id: Option<Ipv4Addr>,
    /// Hold time in force (`bgpTimerHoldTimeMsecs`: negotiated once
    /// established, configured before).
    pub hold_time_ms: Option<u64>,
    /// Keepalive interval in force (`bgpTimerKeepAliveIntervalMsecs`).
    pub keepalive_ms: Option<u64>,
    /// `connectionsEstablished`.
    pub connections_established: u64,
    /// `connectionsDropped`.
    pub connections_dropped: u64,
    /// Why the last session ended (`lastResetDueTo`).
    pub last_reset: Option<String>,
    /// A TCP MD5 password is configured (`authenticationEnabled`).
    pub authentication: bool,
    /// Prefixes accepted from it, over every address family
    /// (`addressFamilyInfo.*.acceptedPrefixCounter`).
    pub accepted_prefixes: u64,
    /// The graceful restart mode the peer's OPEN offered
    /// (`gracefulRestartInfo.remoteGrMode`): `Restart` when it sent the
    /// capability, `Helper` when it can only help, `NotApplicable`.
    pub remote_gr_mode: Option<String>,
}

impl NeighborStatus {
    /// The session is up.
    pub fn established(&self) -> bool {
        self.state == "Established"
    }
}

fn parse_json(text: &str, what: &str) -> Result<Value> {
    serde_json::from_str(text).with_context(|| {
        let shown: String = text.chars().take(300).collect();
        format!("FRR's {what} is not JSON: {shown:?}")
    })
}

fn u64_field(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// Parses `show bgp neighbors json` (an object keyed by peer address).
/// Keys that are not addresses (interface peers) are skipped.
pub fn parse_neighbors(text: &str) -> Result<BTreeMap<IpAddr, NeighborStatus>> {
    let v = parse_json(text, NEIGHBORS_COMMAND)?;
    let obj = v
        .as_object()
        .with_context(|| format!("{NEIGHBORS_COMMAND}: expected an object, got {v}"))?;
    let mut out = BTreeMap::new();
    for (key, n) in obj {
        let Ok(address) = key.parse::<IpAddr>() else {
            continue;
        };
        let state = n
            .get("bgpState")
            .and_then(Value::as_str)
            .with_context(|| format!("{NEIGHBORS_COMMAND}: neighbor {key} has no bgpState"))?
            .to_owned();
        let accepted_prefixes = n
            .get("addressFamilyInfo")
            .and_then(Value::as_object)
            .map(|afs| {
                afs.values()
                    .filter_map(|af| u64_field(af, "acceptedPrefixCounter"))
                    .sum()
            })
            .unwrap_or(0);
        out.insert(
            address,
            NeighborStatus {
                address,
                state,
                remote_as: u64_field(n, "remoteAs").and_then(|a| u32::try_from(a).ok()),
                remote_router_id: n
                    .get("remoteRouterId")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse().ok()),
                hold_time_ms: u64_field(n, "bgpTimerHoldTimeMsecs"),
                keepalive_ms: u64_field(n, "bgpTimerKeepAliveIntervalMsecs"),
                connections_established: u64_field(n, "connectionsEstablished").unwrap_or(0),
                connections_dropped: u64_field(n, "connectionsDropped").unwrap_or(0),
                last_reset: n
                    .get("lastResetDueTo")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                authentication: n
                    .get("authenticationEnabled")
                    .is_some_and(|a| a.as_u64() == Some(1) || a.as_bool() == Some(true)),
                accepted_prefixes,
                remote_gr_mode: n
                    .pointer("/gracefulRestartInfo/remoteGrMode")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            },
        );
    }
    Ok(out)
}

/// Peer address -> FSM state string, from [`parse_neighbors`]' result.
pub fn states(neighbors: &BTreeMap<IpAddr, NeighborStatus>) -> BTreeMap<IpAddr, String> {
    neighbors
        .iter()
        .map(|(a, n)| (*a, n.state.clone()))
        .collect()
}

/// One path of a BGP route as FRR holds it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BgpPath {
    /// Next hops (`nexthops[].ip`), link-local IPv6 ones left out: the
    /// announcing node's address.
    pub nexthops: Vec<IpAddr>,
    /// The peer it came from (`peer.peerId`, or `peerId`).
    pub peer: Option<IpAddr>,
    /// LOCAL_PREF (`locPrf`, or `localpref`).
    pub local_pref: Option<u32>,
    /// MED (`metric`).
    pub med: Option<u32>,
    /// Communities as FRR prints them (`community.string` split on
    /// spaces): `64512:100`, `no-export`, ...
    pub communities: Vec<String>,
    /// Large communities (`largeCommunity.string`): `64512:1:2`, ...
    pub large_communities: Vec<String>,
    /// AS path (`aspath.string`, or `path`); `Local` or empty for iBGP
    /// routes of the peer itself.
    pub as_path: String,
    /// `IGP`, `EGP` or `incomplete`.
    pub origin: Option<String>,
    /// FRR chose it as best.
    pub best: bool,
    /// FRR uses it for ECMP (`multipath`).
    pub multipath: bool,
    /// `valid`.
    pub valid: bool,
    /// `stale`: kept from a peer whose session went down while graceful
    /// restart was negotiated, until it is back and sends End-of-RIB.
    pub stale: bool,
}

/// Prefix -> its paths.
pub type BgpRoutes = BTreeMap<IpNet, Vec<BgpPath>>;

fn parse_path(p: &Value) -> BgpPath {
    let str_field = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let words = |key: &str| -> Vec<String> {
        p.get(key)
            .and_then(|c| c.get("string"))
            .and_then(Value::as_str)
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let nexthops = p
        .get("nexthops")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|n| n.get("scope").and_then(Value::as_str) != Some("link-local"))
        .filter_map(|n| n.get("ip")?.as_str()?.parse::<IpAddr>().ok())
        .filter(|a| !matches!(a, IpAddr::V6(v6) if v6.is_unicast_link_local()))
        .collect();
    let peer = p
        .get("peer")
        .and_then(|peer| peer.get("peerId"))
        .or_else(|| p.get("peerId"))
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok());
    let u32_field = |key: &str| {
        p.get(key)
            .and_then(Value::as_u64)
            .and_then(|v| u32::try_from(v).ok())
    };
    let best = match p.get("bestpath") {
        Some(Value::Bool(b)) => *b,
        Some(obj @ Value::Object(_)) => obj.get("overall").and_then(Value::as_bool) == Some(true),
        _ => false,
    };
    BgpPath {
        nexthops,
        peer,
        local_pref: u32_field("locPrf").or_else(|| u32_field("localpref")),
        med: u32_field("metric").or_else(|| u32_field("med")),
        communities: words("community"),
        large_communities: words("largeCommunity"),
        as_path: p
            .get("aspath")
            .and_then(|a| a.get("string"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| str_field(p, "path"))
            .unwrap_or_default(),
        origin: str_field(p, "origin"),
        best,
        multipath: p.get("multipath").and_then(Value::as_bool) == Some(true),
        valid: p.get("valid").and_then(Value::as_bool) == Some(true),
        stale: p.get("stale").and_then(Value::as_bool) == Some(true),
    }
}

/// Parses `show bgp ipv4|ipv6 unicast json detail` (and the plain `json`
/// table, which lacks communities). FRR 8.4 gives each prefix an array
/// whose first element is a header (`prefix`, `version`) and the rest
/// paths; FRR 9 an object with `paths`.
pub fn parse_routes(text: &str) -> Result<BgpRoutes> {
    let v = parse_json(text, "BGP table")?;
    let Some(routes) = v.get("routes") else {
        // No BGP instance or no routes in this family: FRR prints `{}`.
        return Ok(BgpRoutes::new());
    };
    let routes = routes
        .as_object()
        .with_context(|| format!("BGP table: `routes` is not an object: {routes}"))?;
    let mut out = BgpRoutes::new();
    for (prefix, entry) in routes {
        let net: IpNet = prefix
            .parse()
            .with_context(|| format!("BGP table: route key {prefix:?} is not a prefix"))?;
        let paths: &[Value] = match entry {
            Value::Array(items) => items,
            Value::Object(_) => entry
                .get("paths")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .with_context(|| format!("BGP table: {prefix} has no paths"))?,
            other => bail!("BGP table: {prefix}: unexpected {other}"),
        };
        let paths = paths
            .iter()
            // The 8.4 `detail` header carries no next hops.
            .filter(|p| p.get("nexthops").is_some())
            .map(parse_path)
            .collect();
        out.insert(net, paths);
    }
    Ok(out)
}

/// A route in the router host's kernel table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRoute {
    /// Destination prefix (a host route is a /32 or /128).
    pub destination: IpNet,
    /// Gateways: one, or one per ECMP next hop.
    pub gateways: Vec<IpAddr>,
}

/// Parses `ip -j route show` (see [`kernel_routes_argv`]): a single next
/// hop is `gateway`, ECMP routes list `nexthops[].gateway`.
pub fn parse_kernel_routes(text: &str) -> Result<Vec<KernelRoute>> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let v = parse_json(text, "kernel route table (ip -j route)")?;
    let rows = v
        .as_array()
        .with_context(|| format!("ip -j route: expected an array, got {v}"))?;
    let mut out = Vec::new();
    for r in rows {
        let gw = |n: &Value| n.get("gateway")?.as_str()?.parse::<IpAddr>().ok();
        let mut gateways: Vec<IpAddr> = gw(r).into_iter().collect();
        if let Some(hops) = r.get("nexthops").and_then(Value::as_array) {
            gateways.extend(hops.iter().filter_map(gw));
        }
        let dst = r
            .get("dst")
            .and_then(Value::as_str)
            .with_context(|| format!("ip -j route: a route without dst: {r}"))?;
        let destination = if dst == "default" {
            match gateways.first() {
                Some(IpAddr::V6(_)) => IpNet::V6(Default::default()),
                _ => IpNet::V4(Default::default()),
            }
        } else if let Ok(net) = dst.parse::<IpNet>() {
            net
        } else {
            IpNet::from(
                dst.parse::<IpAddr>()
                    .with_context(|| format!("ip -j route: dst {dst:?} is not a prefix"))?,
            )
        };
        out.push(KernelRoute {
            destination,
            gateways,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
