//! The BGP side of the configuration: Community aliases, BGPAdvertisements,
//! BFDProfiles and BGPPeers, checked against what metallb-rs's native BGP
//! speaker implements.

use super::error::{ConfigError, ConfigWarning, ObjectRef};
use super::pool::Pool;
use super::selector::Selector;
use super::{Options, namespace_of};
use crate::api::{v1beta1, v1beta2};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;
use std::time::Duration;

mod password;
mod peer;
pub use password::Password;
pub(super) use peer::peers;
pub use peer::{Peer, PeerAddress, PeerAsn};

/// A BGP community value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Community {
    /// RFC 1997 community `asn:value`.
    Standard(u16, u16),
    /// RFC 8092 large community `large:global:local1:local2`.
    Large(u32, u32, u32),
}

impl FromStr for Community {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(rest) = s.strip_prefix("large:") {
            let parts: Vec<&str> = rest.split(':').collect();
            let nums: Option<Vec<u32>> = parts.iter().map(|p| p.parse().ok()).collect();
            return match nums.as_deref() {
                Some([a, b, c]) => Ok(Community::Large(*a, *b, *c)),
                _ => Err(format!(
                    "invalid large community {s:?}: expected large:<0-4294967295>:<0-4294967295>:<0-4294967295>"
                )),
            };
        }
        match s.split_once(':') {
            Some((a, b)) => match (a.parse::<u16>(), b.parse::<u16>()) {
                (Ok(a), Ok(b)) => Ok(Community::Standard(a, b)),
                _ => Err(format!(
                    "invalid community {s:?}: expected <0-65535>:<0-65535>"
                )),
            },
            None => Err(format!("invalid community {s:?}")),
        }
    }
}

impl fmt::Display for Community {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Community::Standard(a, b) => write!(f, "{a}:{b}"),
            Community::Large(a, b, c) => write!(f, "large:{a}:{b}:{c}"),
        }
    }
}

/// Whether `s` is written as a community value rather than an alias name.
pub(crate) fn looks_like_value(s: &str) -> bool {
    s.starts_with("large:") || s.contains(':')
}

/// Collects Community aliases; duplicate names and bad values are errors.
pub(super) fn aliases(
    communities: &[&v1beta1::Community],
    opts: &Options,
    errors: &mut Vec<ConfigError>,
) -> BTreeMap<String, Community> {
    let mut out = BTreeMap::new();
    let mut defined_in: BTreeMap<String, String> = BTreeMap::new();
    for c in communities {
        let obj = ObjectRef::new("Community", &namespace_of(*c, opts), &c.name_any());
        for (i, alias) in c.spec.communities.iter().flatten().enumerate() {
            let field = format!("spec.communities[{i}]");
            let name = alias.name.clone().unwrap_or_default();
            if name.is_empty() {
                errors.push(ConfigError::new(
                    &obj,
                    format!("{field}.name"),
                    "alias name is empty",
                ));
                continue;
            }
            let value = alias.value.as_deref().unwrap_or_default();
            match value.parse::<Community>() {
                Ok(v) => {
                    if let Some(first) = defined_in.get(&name) {
                        errors.push(ConfigError::new(
                            &obj,
                            format!("{field}.name"),
                            format!("duplicate definition of community alias {name:?} (already defined in community {first:?})"),
                        ));
                    } else {
                        defined_in.insert(name.clone(), c.name_any());
                        out.insert(name, v);
                    }
                }
                Err(e) => errors.push(ConfigError::new(&obj, format!("{field}.value"), e)),
            }
        }
    }
    out
}

/// A validated BGP advertisement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BgpAdvertisement {
    /// The object's name.
    pub name: String,
    /// Names of the pools it applies to.
    pub pools: BTreeSet<String>,
    /// IPv4 aggregation prefix length (default 32).
    pub aggregation_length: u8,
    /// IPv6 aggregation prefix length (default 128).
    pub aggregation_length_v6: u8,
    /// LOCAL_PREF (iBGP sessions only).
    pub local_pref: Option<u32>,
    /// Communities, aliases resolved.
    pub communities: BTreeSet<Community>,
    /// Nodes announcing (empty: all).
    pub node_selectors: Vec<Selector>,
    /// Peer names announced to (empty: all).
    pub peers: Vec<String>,
    /// Services it applies to (empty: all).
    pub service_selectors: Vec<Selector>,
}

/// What advertisements are resolved against.
pub(super) struct AdContext<'a> {
    /// Every pool's labels (for ipAddressPoolSelectors), by name.
    pub pool_labels: &'a BTreeMap<String, BTreeMap<String, String>>,
    /// The valid pools.
    pub pools: &'a BTreeMap<String, Pool>,
    /// Community aliases.
    pub aliases: &'a BTreeMap<String, Community>,
}

/// Builds a [`BgpAdvertisement`], pushing every problem into `errors`
/// (upstream's `bgpAdvertisementFromCR` and the aggregation half of
/// `validateBGPAdvPerPool`).
pub(super) fn advertisement(
    ad: &v1beta1::BGPAdvertisement,
    namespace: &str,
    ctx: &AdContext<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<ConfigWarning>,
) -> Option<BgpAdvertisement> {
    let obj = ObjectRef::new("BGPAdvertisement", namespace, &ad.name_any());
    let before = errors.len();
    let spec = &ad.spec;
    let selected = super::select_pools(
        &obj,
        spec.ip_address_pools.as_ref(),
        spec.ip_address_pool_selectors.as_ref(),
        ctx.pool_labels,
        errors,
        warnings,
    );
    super::duplicate::strings(
        &obj,
        "spec.communities",
        "community",
        spec.communities.as_ref(),
        errors,
    );
    super::duplicate::strings(&obj, "spec.peers", "peer", spec.peers.as_ref(), errors);
    let (agg4, agg6) = aggregation_lengths(spec, &obj, &selected, ctx.pools, errors);
    let service_selectors = super::selectors(
        &obj,
        "spec.serviceSelectors",
        spec.service_selectors.as_ref(),
        errors,
    );
    if !service_selectors.is_empty() && (agg4 != 32 || agg6 != 128) {
        errors.push(ConfigError::new(
            &obj,
            "spec.serviceSelectors",
            "serviceSelectors can only be used together with the default aggregationLength (32) and aggregationLengthV6 (128)",
        ));
    }
    let communities = communities(spec, &obj, ctx.aliases, errors);
    let node_selectors = super::selectors(
        &obj,
        "spec.nodeSelectors",
        spec.node_selectors.as_ref(),
        errors,
    );
    (errors.len() == before).then(|| BgpAdvertisement {
        name: ad.name_any(),
        pools: selected,
        aggregation_length: agg4,
        aggregation_length_v6: agg6,
        local_pref: spec.local_pref,
        communities,
        node_selectors,
        peers: spec.peers.clone().unwrap_or_default(),
        service_selectors,
    })
}

/// aggregationLength and aggregationLengthV6 (defaults 32 and 128) in
/// range and no shorter than a selected pool's prefixes, as stored.
fn aggregation_lengths(
    spec: &v1beta1::BGPAdvertisementSpec,
    obj: &ObjectRef,
    selected: &BTreeSet<String>,
    pools: &BTreeMap<String, Pool>,
    errors: &mut Vec<ConfigError>,
) -> (u8, u8) {
    // IPv4: the CRD's minimum is 1. IPv6: only an upper bound, as
    // upstream; a length below a pool's prefixes fails the check below.
    let agg4 = spec.aggregation_length.unwrap_or(32);
    if !(1..=32).contains(&agg4) {
        errors.push(ConfigError::new(
            obj,
            "spec.aggregationLength",
            format!("invalid aggregation length {agg4}: must be between 1 and 32"),
        ));
    }
    let agg6 = spec.aggregation_length_v6.unwrap_or(128);
    if agg6 > 128 {
        errors.push(ConfigError::new(
            obj,
            "spec.aggregationLengthV6",
            format!("invalid aggregation length {agg6}: must be at most 128"),
        ));
    }
    // An aggregate shorter than a pool prefix would announce addresses the
    // pool does not own (upstream: lowest mask per address entry, for the
    // families the pool has).
    for name in selected {
        let Some(pool) = pools.get(name) else {
            continue;
        };
        for (agg, v6, floor, field) in [
            (agg4, false, pool.aggregation_floor.0, "aggregationLength"),
            (agg6, true, pool.aggregation_floor.1, "aggregationLengthV6"),
        ] {
            let has_family = pool.cidrs.iter().any(|c| c.addr().is_ipv6() == v6);
            if has_family && agg < i32::from(floor) {
                errors.push(ConfigError::new(
                    obj,
                    format!("spec.{field}"),
                    format!(
                        "invalid aggregation length {agg}: ipaddresspool {name:?} has a /{floor} prefix, more specific than the aggregation length (which would announce addresses outside the pool); use at least {floor}"
                    ),
                ));
            }
        }
    }
    (clamp_length(agg4, 32), clamp_length(agg6, 128))
}

/// The communities, aliases resolved to their values.
fn communities(
    spec: &v1beta1::BGPAdvertisementSpec,
    obj: &ObjectRef,
    aliases: &BTreeMap<String, Community>,
    errors: &mut Vec<ConfigError>,
) -> BTreeSet<Community> {
    // The same value written twice (an alias and its value) is one
    // community, as upstream's set of communities makes it.
    let mut communities = BTreeSet::new();
    for (i, c) in spec.communities.iter().flatten().enumerate() {
        let field = format!("spec.communities[{i}]");
        let parsed = if looks_like_value(c) {
            c.parse::<Community>()
        } else {
            aliases.get(c).copied().ok_or_else(|| {
                format!("unknown community alias {c:?}: define it in a Community object or write the value (1234:1234 or large:1:2:3)")
            })
        };
        match parsed {
            Ok(v) => {
                communities.insert(v);
            }
            Err(e) => errors.push(ConfigError::new(obj, field, e)),
        }
    }
    communities
}

/// An aggregation length as stored: out-of-range values were reported,
/// or (IPv6 below 0) never apply because no pool has a prefix shorter.
fn clamp_length(v: i32, max: u8) -> u8 {
    u8::try_from(v.clamp(0, i32::from(max))).unwrap_or(max)
}

/// Whether advertisements `a` and `b`, both for `pool` and both meant for
/// at least one common service, may carry their LOCAL_PREFs (upstream's
/// `BGPAdvertisementsHaveCompatibleLocalPref`): equal values, or they
/// announce different prefixes (aggregation lengths differ in every
/// family the pool has), to disjoint peer lists, or from disjoint nodes
/// (`share_node` false).
pub fn local_prefs_compatible(
    a: &BgpAdvertisement,
    b: &BgpAdvertisement,
    pool: &Pool,
    share_node: bool,
) -> bool {
    if a.local_pref.unwrap_or(0) == b.local_pref.unwrap_or(0) {
        return true;
    }
    let has_v4 = pool.cidrs.iter().any(|c| c.addr().is_ipv4());
    let has_v6 = pool.cidrs.iter().any(|c| c.addr().is_ipv6());
    let v4_differs = a.aggregation_length != b.aggregation_length;
    let v6_differs = a.aggregation_length_v6 != b.aggregation_length_v6;
    // Different prefixes in every family the pool has.
    let lengths_differ = (!has_v4 || v4_differs) && (!has_v6 || v6_differs);
    if lengths_differ {
        return true;
    }
    if !a.peers.is_empty() && !b.peers.is_empty() && !a.peers.iter().any(|p| b.peers.contains(p)) {
        return true;
    }
    !share_node
}

/// Rejects an advertisement whose LOCAL_PREF conflicts with an earlier
/// one for the same pool (upstream's `validateBGPAdvPerPool`; `ads` in
/// name order, as upstream lists them). Advertisements with
/// serviceSelectors are not compared here: which services they share is
/// known per service only, where the speaker checks them
/// (`conflictingAdvertisements`).
pub(super) fn check_local_prefs(
    ads: &[(BgpAdvertisement, ObjectRef)],
    pools: &BTreeMap<String, Pool>,
    nodes: &[BTreeMap<String, String>],
    errors: &mut Vec<ConfigError>,
) {
    for (i, (ad, obj)) in ads.iter().enumerate() {
        if !ad.service_selectors.is_empty() {
            continue;
        }
        for name in &ad.pools {
            let Some(pool) = pools.get(name) else {
                continue;
            };
            let conflict = ads[..i].iter().find(|(other, _)| {
                other.service_selectors.is_empty()
                    && other.pools.contains(name)
                    && !local_prefs_compatible(
                        ad,
                        other,
                        pool,
                        super::share_a_node(&ad.node_selectors, &other.node_selectors, nodes),
                    )
            });
            if let Some((other, _)) = conflict {
                errors.push(ConfigError::new(
                    obj,
                    "spec.localPref",
                    format!(
                        "invalid local preference {}: bgpadvertisement {:?} already sets {} for the same prefixes of ipaddresspool {name:?} to the same peers from the same nodes: use one value, or tell them apart by aggregation length, peers or nodeSelectors",
                        ad.local_pref.unwrap_or(0),
                        other.name,
                        other.local_pref.unwrap_or(0),
                    ),
                ));
            }
        }
    }
}

/// Why a hold time and keepalive do not go together; the texts are the
/// field errors users see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimerError {
    /// A hold time of 1 or 2 whole seconds.
    #[error("invalid hold time {0:?}: must be 0 or at least 3s (RFC 4271)")]
    HoldTime(Duration),
    /// A keepalive longer than the hold time.
    #[error("keepalive time {keepalive:?} must not exceed hold time {hold:?}")]
    KeepaliveOverHold {
        /// The keepalive (given or derived).
        keepalive: Duration,
        /// The hold time (given or derived).
        hold: Duration,
    },
}

/// Upstream's `parseTimers`: the hold time defaults to three keepalives
/// and the keepalive to a third of the hold time; the hold time, counted
/// in whole seconds (a sub-second value counts as 0, no keepalives), must
/// be 0 or at least 3 s, and the keepalive must not exceed it.
pub fn timers(
    hold: Option<Duration>,
    keepalive: Option<Duration>,
) -> Result<(Option<Duration>, Option<Duration>), TimerError> {
    let (hold, keepalive) = match (hold, keepalive) {
        (None, None) => return Ok((None, None)),
        (Some(h), Some(k)) => (h, k),
        (Some(h), None) => (h, h / 3),
        (None, Some(k)) => (k * 3, k),
    };
    let whole = Duration::from_secs(hold.as_secs());
    if !whole.is_zero() && whole < Duration::from_secs(3) {
        return Err(TimerError::HoldTime(hold));
    }
    if keepalive > hold {
        return Err(TimerError::KeepaliveOverHold { keepalive, hold });
    }
    Ok((Some(hold), Some(keepalive)))
}

/// A validated BFD profile: the values the native speaker's BFD session
/// runs with (milliseconds for intervals; unset fields take upstream's
/// defaults there). echoMode is refused, so an accepted profile has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfdProfile {
    /// The object's name.
    pub name: String,
    /// spec.receiveInterval, ms.
    pub receive_interval: Option<u32>,
    /// spec.transmitInterval, ms.
    pub transmit_interval: Option<u32>,
    /// spec.detectMultiplier.
    pub detect_multiplier: Option<u32>,
    /// spec.echoInterval, ms (kept for the record: echo mode is not run).
    pub echo_interval: Option<u32>,
    /// spec.passiveMode.
    pub passive_mode: Option<bool>,
    /// spec.minimumTtl (multihop sessions only).
    pub minimum_ttl: Option<u32>,
}

/// Why echoMode is refused. The speaker's BFD module words the same
/// refusal; a test there checks the two agree (config cannot import the
/// speaker: the speaker imports config).
pub const ECHO_MODE_REFUSAL: &str = "echoMode is not supported by the metallb-rs native BFD: set echoMode false \
     (echo packets are looped back through the peer's forwarding plane, which needs \
     raw packet I/O this speaker does not do; control packets at transmitInterval \
     still detect a failed path)";

pub(super) fn bfd_profile(
    p: &v1beta1::BFDProfile,
    namespace: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<BfdProfile> {
    let obj = ObjectRef::new("BFDProfile", namespace, &p.name_any());
    let before = errors.len();
    let s = &p.spec;
    let mut range = |v: Option<u32>, lo: u32, hi: u32, field: &str| {
        if let Some(v) = v.filter(|v| !(lo..=hi).contains(v)) {
            errors.push(ConfigError::new(
                &obj,
                format!("spec.{field}"),
                format!("{v} is outside {lo}-{hi}"),
            ));
        }
    };
    range(s.receive_interval, 10, 60000, "receiveInterval");
    range(s.transmit_interval, 10, 60000, "transmitInterval");
    range(s.echo_interval, 10, 60000, "echoInterval");
    range(s.detect_multiplier, 2, 255, "detectMultiplier");
    range(s.minimum_ttl, 1, 254, "minimumTtl");
    if s.echo_mode == Some(true) {
        errors.push(ConfigError::new(&obj, "spec.echoMode", ECHO_MODE_REFUSAL));
    }
    (errors.len() == before).then(|| BfdProfile {
        name: p.name_any(),
        receive_interval: s.receive_interval,
        transmit_interval: s.transmit_interval,
        detect_multiplier: s.detect_multiplier,
        echo_interval: s.echo_interval,
        passive_mode: s.passive_mode,
        minimum_ttl: s.minimum_ttl,
    })
}
