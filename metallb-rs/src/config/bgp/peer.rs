//! BGPPeers, checked against what the native BGP speaker implements.

use super::*;

/// How the remote AS is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAsn {
    /// Exactly this AS.
    Fixed(u32),
    /// Any AS equal to ours (iBGP).
    Internal,
    /// Any AS other than ours (eBGP).
    External,
}

/// Where the router is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerAddress {
    /// `peerAddress`.
    Ip(IpAddr),
    /// `interface`: an unnumbered peer, the router on this interface of
    /// the node, dialled at its IPv6 link-local address.
    Interface(String),
}

impl std::fmt::Display for PeerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerAddress::Ip(a) => write!(f, "{a}"),
            PeerAddress::Interface(i) => write!(f, "interface {i}"),
        }
    }
}

impl PeerAddress {
    /// The field that set it.
    fn field(&self) -> &'static str {
        match self {
            PeerAddress::Ip(_) => "spec.peerAddress",
            PeerAddress::Interface(_) => "spec.interface",
        }
    }
}

/// A validated BGP peer for the native speaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The object's name.
    pub name: String,
    /// The router's AS (`myASN`).
    pub my_asn: u32,
    /// `localASN`: the AS this session presents instead of `my_asn`, as
    /// FRR's `local-as <asn> no-prepend replace-as`.
    pub local_asn: Option<u32>,
    /// Remote AS.
    pub peer_asn: PeerAsn,
    /// Where to dial.
    pub address: PeerAddress,
    /// TCP port to dial.
    pub port: u16,
    /// Local address to bind, when set.
    pub source_address: Option<IpAddr>,
    /// Proposed hold time (default 90 s).
    pub hold_time: Option<Duration>,
    /// Keepalive interval (default hold time / 3).
    pub keepalive_time: Option<Duration>,
    /// Delay between connection attempts.
    pub connect_time: Option<Duration>,
    /// Router ID (default: the node's IPv4 address).
    pub router_id: Option<Ipv4Addr>,
    /// Nodes that run this session (empty: all).
    pub node_selectors: Vec<Selector>,
    /// TCP MD5 password, from `password` or `passwordSecret`.
    pub password: Option<super::Password>,
    /// The peer is more than one hop away.
    pub ebgp_multi_hop: bool,
    /// Carry both address families on this session.
    pub dual_stack_address_family: bool,
    /// The BFD profile to run beside the session, when set.
    pub bfd_profile: Option<BfdProfile>,
    /// `enableGracefulRestart`: offer graceful restart (RFC 4724), so the
    /// router keeps this node's routes while the speaker restarts.
    pub graceful_restart: bool,
}

#[cfg(test)]
impl Peer {
    /// A peer for tests: `name` at `address`:`port` in AS `peer_asn`,
    /// myASN 64512, every option at its default.
    pub(crate) fn example(name: &str, address: IpAddr, port: u16, peer_asn: PeerAsn) -> Peer {
        Peer {
            name: name.into(),
            my_asn: 64512,
            local_asn: None,
            peer_asn,
            address: PeerAddress::Ip(address),
            port,
            source_address: None,
            hold_time: None,
            keepalive_time: None,
            connect_time: None,
            router_id: None,
            node_selectors: vec![],
            password: None,
            ebgp_multi_hop: false,
            dual_stack_address_family: false,
            bfd_profile: None,
            graceful_restart: false,
        }
    }
}

impl Peer {
    /// The AS of our end of this session: in the OPEN, in the AS_PATH of
    /// what we send, and in deciding iBGP from eBGP.
    pub fn session_asn(&self) -> u32 {
        self.local_asn.unwrap_or(self.my_asn)
    }
}

pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = kube::core::Duration::from_str(s)
        .map_err(|e| format!("invalid duration {s:?} ({e}): use Go syntax such as 90s or 1m30s"))?;
    if d.is_negative() {
        return Err(format!("invalid duration {s:?}: must not be negative"));
    }
    Ok(d.into())
}

/// Builds every peer, then rejects two peers dialling the same address
/// and port from a common node. Peers on one node may differ in myASN and
/// routerID: each native session has its own (upstream applies
/// `checkFRRPeersCompatible` to its FRR backends only).
pub(crate) fn peers(
    list: &[&v1beta2::BGPPeer],
    opts: &Options,
    secrets: &[Secret],
    bfd_profiles: &BTreeMap<String, BfdProfile>,
    nodes: &[BTreeMap<String, String>],
    errors: &mut Vec<ConfigError>,
) -> Vec<Peer> {
    let mut out: Vec<(Peer, ObjectRef)> = Vec::new();
    for p in list {
        let obj = ObjectRef::new("BGPPeer", &namespace_of(*p, opts), &p.name_any());
        if let Some(peer) = peer(p, &obj, opts, secrets, bfd_profiles, errors) {
            out.push((peer, obj));
        }
    }
    for (i, (a, _)) in out.iter().enumerate() {
        for (b, b_obj) in &out[i + 1..] {
            if a.address == b.address
                && a.port == b.port
                && crate::config::share_a_node(&a.node_selectors, &b.node_selectors, nodes)
            {
                errors.push(ConfigError::new(
                    b_obj,
                    b.address.field(),
                    format!(
                        "duplicate peer: bgppeer {:?} already peers with {}:{} from the same nodes",
                        a.name, a.address, a.port
                    ),
                ));
            }
        }
    }
    out.into_iter().map(|(p, _)| p).collect()
}

/// One BGPPeer as the native speaker runs it, or `None` with every error
/// it has pushed to `errors`, in the order of its fields.
pub(super) fn peer(
    p: &v1beta2::BGPPeer,
    obj: &ObjectRef,
    opts: &Options,
    secrets: &[Secret],
    bfd_profiles: &BTreeMap<String, BfdProfile>,
    errors: &mut Vec<ConfigError>,
) -> Option<Peer> {
    let before = errors.len();
    let s = &p.spec;
    let mut err = |field: &str, msg: String| errors.push(ConfigError::new(obj, field, msg));

    let (local_asn, peer_asn) = asns(s, &mut err);
    unsupported_fields(s, &mut err);
    let bfd_profile = bfd_profile(s, bfd_profiles, &mut err);
    let address = peer_address(s, &mut err);
    let source_address = source_address(s, address.as_ref(), &mut err);
    let port = s.peer_port.unwrap_or(179);
    if port == 0 {
        err(
            "spec.peerPort",
            "port 0 is not a valid peer port: use 1-16384 (default 179)".into(),
        );
    }
    let timers = session_timers(s, &mut err);
    let router_id = router_id(s, &mut err);
    let password = password(s, opts, secrets, &mut err);
    let node_selectors =
        crate::config::selectors(obj, "spec.nodeSelectors", s.node_selectors.as_ref(), errors);
    if errors.len() != before {
        return None;
    }
    Some(Peer {
        name: p.name_any(),
        my_asn: s.my_asn,
        local_asn,
        peer_asn: peer_asn?,
        address: address?,
        port,
        source_address,
        hold_time: timers.hold,
        keepalive_time: timers.keepalive,
        connect_time: timers.connect,
        router_id,
        node_selectors,
        password,
        ebgp_multi_hop: s.ebgp_multi_hop.unwrap_or(false),
        dual_stack_address_family: s.dual_stack_address_family.unwrap_or(false),
        bfd_profile,
        graceful_restart: s.enable_graceful_restart.unwrap_or(false),
    })
}

/// `localASN` (0 read as unset) and the remote AS: myASN is set, localASN
/// differs from it, exactly one of peerASN and dynamicASN, and no
/// ebgpMultiHop on what is an iBGP session.
fn asns(
    s: &v1beta2::BGPPeerSpec,
    err: &mut dyn FnMut(&str, String),
) -> (Option<u32>, Option<PeerAsn>) {
    if s.my_asn == 0 {
        err(
            "spec.myASN",
            "missing myASN: set the local AS number (1-4294967295)".into(),
        );
    }
    // localASN 0 is no localASN, as upstream's FRR template reads it.
    let local_asn = s.local_asn.filter(|a| *a != 0);
    if s.my_asn != 0 && local_asn == Some(s.my_asn) {
        // FRR refuses `local-as` equal to the router's AS, which fails
        // upstream's whole FRR configuration: say so here instead.
        err(
            "spec.localASN",
            format!(
                "localASN {} equals myASN: remove localASN or set it to another AS",
                s.my_asn
            ),
        );
    }
    let session_asn = local_asn.unwrap_or(s.my_asn);
    // peerASN 0 is no peerASN, as upstream reads it.
    let peer_asn = match (s.peer_asn.filter(|a| *a != 0), s.dynamic_asn) {
        (Some(_), Some(_)) => {
            err(
                "spec.dynamicASN",
                "peerASN and dynamicASN are mutually exclusive: set one of them".into(),
            );
            None
        }
        (None, None) => {
            err(
                "spec.peerASN",
                "missing peerASN: set peerASN or dynamicASN".into(),
            );
            None
        }
        (Some(asn), None) => {
            if asn == session_asn && s.ebgp_multi_hop == Some(true) {
                let ours = if local_asn.is_some() {
                    "localASN"
                } else {
                    "myASN"
                };
                err(
                    "spec.ebgpMultiHop",
                    format!(
                        "ebgpMultiHop is set for an iBGP peer (peerASN equals {ours}): remove it"
                    ),
                );
            }
            Some(PeerAsn::Fixed(asn))
        }
        (None, Some(v1beta2::DynamicASNMode::Internal)) => Some(PeerAsn::Internal),
        (None, Some(v1beta2::DynamicASNMode::External)) => Some(PeerAsn::External),
    };
    (local_asn, peer_asn)
}

/// Fields the native BGP speaker does not implement: rejected rather than
/// silently ignored.
fn unsupported_fields(s: &v1beta2::BGPPeerSpec, err: &mut dyn FnMut(&str, String)) {
    if s.vrf.as_deref().is_some_and(|v| !v.is_empty()) {
        err(
            "spec.vrf",
            "VRF peering is not supported by the metallb-rs native BGP speaker: remove spec.vrf"
                .into(),
        );
    }
}

/// The named BFD profile's values, which travel with the peer so that a
/// changed profile reaches the session as a changed peer.
fn bfd_profile(
    s: &v1beta2::BGPPeerSpec,
    bfd_profiles: &BTreeMap<String, BfdProfile>,
    err: &mut dyn FnMut(&str, String),
) -> Option<BfdProfile> {
    let name = s.bfd_profile.as_deref().filter(|n| !n.is_empty())?;
    let profile = bfd_profiles.get(name).cloned();
    if profile.is_none() {
        err(
            "spec.bfdProfile",
            format!("bfdprofile {name:?} does not exist: create it or remove spec.bfdProfile"),
        );
    }
    profile
}

/// `sourceAddress`, of peerAddress's family; ignored on an unnumbered
/// peer (`peer_address` refuses it there).
fn source_address(
    s: &v1beta2::BGPPeerSpec,
    address: Option<&PeerAddress>,
    err: &mut dyn FnMut(&str, String),
) -> Option<IpAddr> {
    let interface = s.interface.as_deref().filter(|i| !i.is_empty());
    let a = s
        .source_address
        .as_deref()
        .filter(|a| !a.is_empty() && interface.is_none())?;
    match a.parse::<IpAddr>() {
        Ok(ip) if matches!(address, Some(PeerAddress::Ip(p)) if p.is_ipv4() != ip.is_ipv4()) => {
            err(
                "spec.sourceAddress",
                format!("{a} is not of the same IP family as peerAddress"),
            );
            None
        }
        Ok(ip) => Some(ip),
        Err(_) => {
            err("spec.sourceAddress", format!("invalid IP address {a:?}"));
            None
        }
    }
}

/// A session's hold, keepalive and connect times, as validated.
struct SessionTimers {
    hold: Option<Duration>,
    keepalive: Option<Duration>,
    connect: Option<Duration>,
}

/// holdTime, keepaliveTime and connectTime: each parsed, hold and
/// keepalive checked together (`timers`), connect a whole number of
/// seconds in 1-65535.
fn session_timers(s: &v1beta2::BGPPeerSpec, err: &mut dyn FnMut(&str, String)) -> SessionTimers {
    let mut duration = |v: &Option<String>, field: &str| -> Option<Duration> {
        let v = v.as_deref()?;
        parse_duration(v).map_err(|e| err(field, e)).ok()
    };
    let hold_time = duration(&s.hold_time, "spec.holdTime");
    let keepalive_time = duration(&s.keepalive_time, "spec.keepaliveTime");
    let connect = duration(&s.connect_time, "spec.connectTime");
    let (hold, keepalive) = match timers(hold_time, keepalive_time) {
        Ok(t) => t,
        Err(e) => {
            let keepalive = matches!(e, TimerError::KeepaliveOverHold { .. });
            let field = if keepalive || s.hold_time.is_none() {
                "spec.keepaliveTime"
            } else {
                "spec.holdTime"
            };
            err(field, e.to_string());
            (None, None)
        }
    };
    if let Some(c) = connect {
        if c.subsec_nanos() != 0 {
            err(
                "spec.connectTime",
                "connect time should contain a whole number of seconds".into(),
            );
        } else if !(1..=65535).contains(&c.as_secs()) {
            err(
                "spec.connectTime",
                "connect time should be between 1 seconds to 65535".into(),
            );
        }
    }
    SessionTimers {
        hold,
        keepalive,
        connect,
    }
}

/// `routerID`, an IPv4 address when set.
fn router_id(s: &v1beta2::BGPPeerSpec, err: &mut dyn FnMut(&str, String)) -> Option<Ipv4Addr> {
    let r = s.router_id.as_deref().filter(|r| !r.is_empty())?;
    r.parse::<Ipv4Addr>()
        .map_err(|_| {
            err(
                "spec.routerID",
                format!("invalid router ID {r:?}: must be an IPv4 address"),
            )
        })
        .ok()
}

/// The TCP MD5 password, from `password` or `passwordSecret` (not both),
/// no longer than Linux takes.
fn password(
    s: &v1beta2::BGPPeerSpec,
    opts: &Options,
    secrets: &[Secret],
    err: &mut dyn FnMut(&str, String),
) -> Option<super::Password> {
    let password = match (&s.password, &s.password_secret) {
        (Some(_), Some(_)) => {
            err(
                "spec.passwordSecret",
                "password and passwordSecret are mutually exclusive: set one of them".into(),
            );
            None
        }
        (Some(p), None) => Some(super::Password::new(p.clone())),
        (None, Some(r)) => secret_password(r, opts, secrets)
            .map(super::Password::new)
            .map_err(|e| err("spec.passwordSecret", e))
            .ok(),
        (None, None) => None,
    };
    // Linux refuses longer TCP MD5 keys (TCP_MD5SIG_MAXKEYLEN).
    if let Some(p) = &password
        && p.len() > crate::net::bgp::MD5_MAX_KEY
    {
        let field = if s.password.is_some() {
            "spec.password"
        } else {
            "spec.passwordSecret"
        };
        err(
            field,
            format!(
                "the password is {} bytes; TCP MD5 keys are at most {} bytes",
                p.len(),
                crate::net::bgp::MD5_MAX_KEY
            ),
        );
    }
    password
}

/// `peerAddress` or `interface`, exactly one of them; for an unnumbered
/// peer, the fields it cannot have.
fn peer_address(
    s: &v1beta2::BGPPeerSpec,
    err: &mut dyn FnMut(&str, String),
) -> Option<PeerAddress> {
    let interface = s.interface.as_deref().filter(|i| !i.is_empty());
    let address = match (
        s.peer_address.as_deref().filter(|a| !a.is_empty()),
        interface,
    ) {
        (Some(_), Some(_)) => {
            err(
                "spec.interface",
                "peerAddress and interface are mutually exclusive: set one of them".into(),
            );
            None
        }
        (None, None) => {
            err(
                "spec.peerAddress",
                "missing peerAddress: the address of the BGP router to dial, or set interface for an unnumbered peer".into(),
            );
            None
        }
        (None, Some(i)) => super::super::l2::check_interface(i)
            .map_err(|e| err("spec.interface", e))
            .ok()
            .map(|()| PeerAddress::Interface(i.to_owned())),
        (Some(a), None) => a
            .trim()
            .parse::<IpAddr>()
            .map_err(|_| err("spec.peerAddress", format!("invalid IP address {a:?}")))
            .ok()
            .map(PeerAddress::Ip),
    };
    // An unnumbered session runs between link-local addresses, which BFD
    // here does not dial, and always from the interface's own.
    if interface.is_some() {
        for (present, field) in [
            (
                s.bfd_profile.as_deref().is_some_and(|b| !b.is_empty()),
                "spec.bfdProfile",
            ),
            (
                s.source_address.as_deref().is_some_and(|a| !a.is_empty()),
                "spec.sourceAddress",
            ),
        ] {
            if present {
                err(
                    field,
                    format!(
                        "{field} is not supported with spec.interface (unnumbered peers) by the metallb-rs native BGP speaker: remove {field}"
                    ),
                );
            }
        }
    }
    address
}

pub(super) fn secret_password(
    r: &v1beta2::SecretReference,
    opts: &Options,
    secrets: &[Secret],
) -> Result<String, String> {
    let name = r
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or("passwordSecret.name is empty")?;
    if let Some(ns) = r.namespace.as_deref().filter(|ns| *ns != opts.namespace) {
        return Err(format!(
            "secret {ns}/{name}: the secret must be in the MetalLB namespace {:?}",
            opts.namespace
        ));
    }
    let secret = secrets
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(name))
        .ok_or_else(|| {
            format!(
                "secret {name:?} not found in namespace {:?}",
                opts.namespace
            )
        })?;
    if secret.type_.as_deref() != Some("kubernetes.io/basic-auth") {
        return Err(format!(
            "secret {name:?} must be of type kubernetes.io/basic-auth"
        ));
    }
    // TCP MD5 keys are bytes, but a changed one only shows as a session
    // that never comes up: refuse what is not text rather than alter it.
    let from_data = match secret.data.as_ref().and_then(|d| d.get("password")) {
        Some(b) => Some(
            std::str::from_utf8(&b.0)
                .map_err(|_| {
                    format!(
                        "secret {name:?}: key \"password\" is not valid UTF-8: \
                         set a password of UTF-8 text in the secret and on the router"
                    )
                })?
                .to_owned(),
        ),
        None => None,
    };
    let from_string = secret
        .string_data
        .as_ref()
        .and_then(|d| d.get("password"))
        .cloned();
    from_data
        .or(from_string)
        .ok_or_else(|| format!("secret {name:?} has no key \"password\""))
}

#[cfg(test)]
mod tests;
