//! Turns a set of MetalLB custom resources into one validated [`Config`],
//! or into every [`ConfigError`] found, each naming kind, namespace, name
//! and field. Pure: no I/O, no kube client; [`load`] reads files.
//!
//! Upstream runs most of these checks in a validating webhook; here they
//! run in the controller, in the speaker, offline (`metallb-rs validate`)
//! and, at apply time, in the controller's validating webhooks
//! ([`admission`] decides).

pub mod admission;
mod bgp;
mod duplicate;
mod error;
mod filter;
mod l2;
#[cfg(feature = "validate")]
pub mod load;
mod pool;
mod selector;

pub use bgp::{
    BfdProfile, BgpAdvertisement, Community, ECHO_MODE_REFUSAL, Password, Peer, PeerAddress,
    PeerAsn, local_prefs_compatible, timers,
};
pub use error::{ConfigError, ConfigErrors, ConfigWarning, ObjectRef};
pub use filter::for_node;
pub use l2::L2Advertisement;
pub use pool::{Allocation, Pool, parse_entry};
pub use selector::Selector;

use crate::api::{v1beta1, v1beta2};
use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use kube::ResourceExt;
use std::collections::BTreeMap;

/// The raw objects a configuration is built from.
#[derive(Debug, Clone, Default)]
pub struct Resources {
    /// IPAddressPools.
    pub pools: Vec<v1beta1::IPAddressPool>,
    /// L2Advertisements.
    pub l2_advertisements: Vec<v1beta1::L2Advertisement>,
    /// BGPAdvertisements.
    pub bgp_advertisements: Vec<v1beta1::BGPAdvertisement>,
    /// BGPPeers (v1beta1 objects are converted on the way in).
    pub peers: Vec<v1beta2::BGPPeer>,
    /// BFDProfiles.
    pub bfd_profiles: Vec<v1beta1::BFDProfile>,
    /// Communities (alias lists).
    pub communities: Vec<v1beta1::Community>,
    /// Secrets of the MetalLB namespace (BGP passwords).
    pub secrets: Vec<Secret>,
    /// The cluster's namespaces: pools' namespaceSelectors are resolved
    /// against them, as upstream does (none given: the selectors select
    /// no namespace).
    pub namespaces: Vec<Namespace>,
    /// The cluster's nodes: whether two BGPAdvertisements or BGPPeers run
    /// on a common node (none given: when either selects every node or
    /// both have the same selectors).
    pub nodes: Vec<Node>,
}

/// Settings that shape validation.
#[derive(Debug, Clone)]
pub struct Options {
    /// The MetalLB namespace: objects elsewhere are rejected.
    pub namespace: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            namespace: crate::api::DEFAULT_NAMESPACE.to_owned(),
        }
    }
}

/// A validated configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// Pools by name.
    pub pools: BTreeMap<String, Pool>,
    /// Layer 2 advertisements, by name.
    pub l2_advertisements: Vec<L2Advertisement>,
    /// BGP advertisements, by name.
    pub bgp_advertisements: Vec<BgpAdvertisement>,
    /// BGP peers, by name.
    pub peers: Vec<Peer>,
    /// BFD profiles by name.
    pub bfd_profiles: BTreeMap<String, BfdProfile>,
    /// What is ignored and worth telling the user, in object order.
    pub warnings: Vec<ConfigWarning>,
}

/// An object's namespace, or the MetalLB namespace when it has none (as
/// kubectl would apply it there).
fn namespace_of<K: ResourceExt>(obj: &K, opts: &Options) -> String {
    obj.namespace().unwrap_or_else(|| opts.namespace.clone())
}

fn check_namespace<K: kube::Resource<DynamicType = ()>>(
    obj: &K,
    opts: &Options,
    errors: &mut Vec<ConfigError>,
) {
    let ns = namespace_of(obj, opts);
    if ns != opts.namespace {
        let o = ObjectRef::new(
            &K::kind(&()),
            &ns,
            obj.meta().name.as_deref().unwrap_or_default(),
        );
        errors.push(ConfigError::new(
            &o,
            "metadata.namespace",
            format!(
                "MetalLB only reads objects in namespace {:?}: move it there (or run with --namespace {ns})",
                opts.namespace
            ),
        ));
    }
}

fn sorted<K: ResourceExt + Clone>(list: &[K]) -> Vec<&K> {
    let mut v: Vec<&K> = list.iter().collect();
    v.sort_by_key(|o| o.name_any());
    v
}

impl Config {
    /// Validates `res` and builds the configuration, or returns every error.
    pub fn build(res: &Resources, opts: &Options) -> Result<Config, ConfigErrors> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        check_namespaces(res, opts, &mut errors);
        let node_labels: Vec<BTreeMap<String, String>> =
            res.nodes.iter().map(|n| n.labels().clone()).collect();
        let pools = pools(res, opts, &mut errors);
        let pool_labels: BTreeMap<String, BTreeMap<String, String>> = sorted(&res.pools)
            .iter()
            .map(|p| (p.name_any(), p.labels().clone()))
            .collect();
        let l2_advertisements = sorted(&res.l2_advertisements)
            .into_iter()
            .filter_map(|ad| {
                l2::build(
                    ad,
                    &namespace_of(ad, opts),
                    &pool_labels,
                    &mut errors,
                    &mut warnings,
                )
            })
            .collect();

        let aliases = bgp::aliases(&sorted(&res.communities), opts, &mut errors);
        let bfd_profiles: BTreeMap<String, BfdProfile> = sorted(&res.bfd_profiles)
            .into_iter()
            .filter_map(|p| bgp::bfd_profile(p, &namespace_of(p, opts), &mut errors))
            .map(|p| (p.name.clone(), p))
            .collect();
        let ctx = bgp::AdContext {
            pool_labels: &pool_labels,
            pools: &pools,
            aliases: &aliases,
        };
        let bgp_advertisements =
            bgp_advertisements(res, opts, &ctx, &node_labels, &mut errors, &mut warnings);
        let peers = bgp::peers(
            &sorted(&res.peers),
            opts,
            &res.secrets,
            &bfd_profiles,
            &node_labels,
            &mut errors,
        );

        if errors.is_empty() {
            Ok(Config {
                pools,
                l2_advertisements,
                bgp_advertisements,
                peers,
                bfd_profiles,
                warnings,
            })
        } else {
            errors.sort();
            errors.dedup();
            Err(ConfigErrors(errors))
        }
    }
}

/// Every object of a kind MetalLB reads is in its namespace.
fn check_namespaces(res: &Resources, opts: &Options, errors: &mut Vec<ConfigError>) {
    macro_rules! in_namespace {
        ($($list:expr),*) => { $( for o in &$list { check_namespace(o, opts, errors); } )* };
    }
    in_namespace!(
        res.pools,
        res.l2_advertisements,
        res.bgp_advertisements,
        res.peers,
        res.bfd_profiles,
        res.communities
    );
}

/// The valid pools by name; overlaps between any two pools (valid or not)
/// are errors.
fn pools(res: &Resources, opts: &Options, errors: &mut Vec<ConfigError>) -> BTreeMap<String, Pool> {
    let namespace_labels: Vec<(String, BTreeMap<String, String>)> = res
        .namespaces
        .iter()
        .map(|n| (n.name_any(), n.labels().clone()))
        .collect();
    let pools_raw = sorted(&res.pools);
    let mut pools = BTreeMap::new();
    for p in &pools_raw {
        if let Some(pool) = pool::build(p, &namespace_of(*p, opts), &namespace_labels, errors) {
            pools.insert(pool.name.clone(), pool);
        }
    }
    let with_ns: Vec<(&v1beta1::IPAddressPool, String)> = pools_raw
        .iter()
        .map(|p| (*p, namespace_of(*p, opts)))
        .collect();
    let refs: Vec<(&v1beta1::IPAddressPool, &str)> =
        with_ns.iter().map(|(p, n)| (*p, n.as_str())).collect();
    pool::check_overlaps(&refs, errors);
    pools
}

/// The valid BGPAdvertisements in name order, whose LOCAL_PREFs are then
/// checked against each other.
fn bgp_advertisements(
    res: &Resources,
    opts: &Options,
    ctx: &bgp::AdContext<'_>,
    node_labels: &[BTreeMap<String, String>],
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<ConfigWarning>,
) -> Vec<BgpAdvertisement> {
    let built: Vec<(BgpAdvertisement, ObjectRef)> = sorted(&res.bgp_advertisements)
        .into_iter()
        .filter_map(|ad| {
            let ns = namespace_of(ad, opts);
            let built = bgp::advertisement(ad, &ns, ctx, errors, warnings)?;
            Some((
                built,
                ObjectRef::new("BGPAdvertisement", &ns, &ad.name_any()),
            ))
        })
        .collect();
    bgp::check_local_prefs(&built, ctx.pools, node_labels, errors);
    built.into_iter().map(|(a, _)| a).collect()
}

impl Config {
    /// The pool holding every address of `ips` (a .0/.255 address does
    /// not belong to a pool that avoids them), as the allocator sees it.
    pub fn pool_for(&self, ips: &[std::net::IpAddr]) -> Option<&Pool> {
        if ips.is_empty() {
            return None;
        }
        self.pools.values().find(|p| {
            ips.iter().all(|ip| {
                let buggy = p.avoid_buggy_ips
                    && matches!(ip, std::net::IpAddr::V4(v4) if matches!(v4.octets()[3], 0 | 255));
                !buggy && p.cidrs.iter().any(|c| c.contains(ip))
            })
        })
    }
}

/// Resolves an advertisement's pools: those named plus those whose labels
/// match a selector; all pools when neither is given. A name no pool has
/// is skipped with a warning, as upstream skips it: the advertisement
/// then serves the pools that exist (none, if it names only missing ones).
fn select_pools(
    obj: &ObjectRef,
    names: Option<&Vec<String>>,
    selectors: Option<&Vec<v1beta1::LabelSelector>>,
    pool_labels: &BTreeMap<String, BTreeMap<String, String>>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<ConfigWarning>,
) -> std::collections::BTreeSet<String> {
    duplicate::strings(obj, "spec.ipAddressPools", "ipaddresspool", names, errors);
    duplicate::selectors(obj, "spec.ipAddressPoolSelectors", selectors, errors);
    let names = names.map(Vec::as_slice).unwrap_or_default();
    let selectors = selectors.map(Vec::as_slice).unwrap_or_default();
    if names.is_empty() && selectors.is_empty() {
        return pool_labels.keys().cloned().collect();
    }
    let mut out = std::collections::BTreeSet::new();
    for (i, name) in names.iter().enumerate() {
        if pool_labels.contains_key(name) {
            out.insert(name.clone());
        } else {
            warnings.push(ConfigWarning::new(
                obj,
                format!("spec.ipAddressPools[{i}]"),
                format!("ipaddresspool {name:?} does not exist and is ignored: create it or fix the name"),
            ));
        }
    }
    for (i, sel) in selectors.iter().enumerate() {
        match Selector::parse(sel) {
            Ok(s) => out.extend(
                pool_labels
                    .iter()
                    .filter(|(_, l)| s.matches(l))
                    .map(|(n, _)| n.clone()),
            ),
            Err(errs) => errors.extend(errs.into_iter().map(|(f, m)| {
                ConfigError::new(obj, format!("spec.ipAddressPoolSelectors[{i}].{f}"), m)
            })),
        }
    }
    out
}

/// Whether objects running on the nodes `a` and `b` select (no selector:
/// every node) have a node in common among `nodes` (their labels). With
/// no nodes known, they may when either selects every node or both have
/// the same selectors.
fn share_a_node(a: &[Selector], b: &[Selector], nodes: &[BTreeMap<String, String>]) -> bool {
    if nodes.is_empty() {
        return a.is_empty() || b.is_empty() || a == b;
    }
    let selects = |sels: &[Selector], labels: &BTreeMap<String, String>| {
        sels.is_empty() || sels.iter().any(|s| s.matches(labels))
    };
    nodes.iter().any(|n| selects(a, n) && selects(b, n))
}

/// Parses a list of label selectors at `field`, reporting each bad one
/// and each repeated one.
fn selectors(
    obj: &ObjectRef,
    field: &str,
    list: Option<&Vec<v1beta1::LabelSelector>>,
    errors: &mut Vec<ConfigError>,
) -> Vec<Selector> {
    duplicate::selectors(obj, field, list, errors);
    let mut out = Vec::new();
    for (i, sel) in list.into_iter().flatten().enumerate() {
        match Selector::parse(sel) {
            Ok(s) => out.push(s),
            Err(errs) => errors.extend(
                errs.into_iter()
                    .map(|(f, m)| ConfigError::new(obj, format!("{field}[{i}].{f}"), m)),
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests;
