//! Admission review of one write to a MetalLB object: would this create,
//! update or delete make the configuration worse? Owns the validating
//! webhooks' table ([`WEBHOOKS`], one source for the manifests and the
//! server's routes) and the decision ([`review`]). Pure: the caller lists
//! the current objects and carries the [`Verdict`] back to the API server.
//!
//! The check is the whole-config one upstream's webhooks make: build the
//! configuration with the change applied ([`Config::build`]). Unlike
//! upstream, only errors the change introduces refuse it, so an object that
//! was already broken never blocks the write that fixes it, or an unrelated
//! one.

use super::bgp::looks_like_value;
use super::{Config, ConfigError, Options, Resources};
use crate::api::{v1beta1, v1beta2};
use kube::ResourceExt;
use std::collections::BTreeSet;

/// An admission operation a webhook may be called for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// The object is being created.
    Create,
    /// The object is being replaced or patched.
    Update,
    /// The object is being deleted.
    Delete,
}

impl Operation {
    /// The name in an AdmissionReview and in a webhook's rules.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    /// Parses an AdmissionReview's `request.operation` (`CONNECT` is none).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            _ => None,
        }
    }
}

/// One validating webhook: which writes of which kind reach which path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Webhook {
    /// The webhook's name in the ValidatingWebhookConfiguration.
    pub name: &'static str,
    /// The HTTPS path the controller serves it on.
    pub path: &'static str,
    /// The kind reviewed.
    pub kind: &'static str,
    /// The resource (plural) in the webhook's rule.
    pub plural: &'static str,
    /// The API version the rule matches and the object arrives in.
    pub version: &'static str,
    /// The operations the rule sends.
    pub operations: &'static [Operation],
}

const CREATE_UPDATE: &[Operation] = &[Operation::Create, Operation::Update];

/// Upstream MetalLB's validating webhooks (names, paths, operations), so
/// an existing configuration, a policy naming a webhook, or a dashboard
/// keeps working. BGPPeer is reviewed as v1beta2 only: a v1beta1 write
/// reaches it converted (matchPolicy Equivalent). BFDProfile is reviewed
/// on delete, the one delete that can break a configuration.
pub static WEBHOOKS: [Webhook; 6] = [
    Webhook {
        name: "ipaddresspoolvalidationwebhook.metallb.io",
        path: "/validate-metallb-io-v1beta1-ipaddresspool",
        kind: "IPAddressPool",
        plural: "ipaddresspools",
        version: "v1beta1",
        operations: CREATE_UPDATE,
    },
    Webhook {
        name: "l2advertisementvalidationwebhook.metallb.io",
        path: "/validate-metallb-io-v1beta1-l2advertisement",
        kind: "L2Advertisement",
        plural: "l2advertisements",
        version: "v1beta1",
        operations: CREATE_UPDATE,
    },
    Webhook {
        name: "bgpadvertisementvalidationwebhook.metallb.io",
        path: "/validate-metallb-io-v1beta1-bgpadvertisement",
        kind: "BGPAdvertisement",
        plural: "bgpadvertisements",
        version: "v1beta1",
        operations: CREATE_UPDATE,
    },
    Webhook {
        name: "bgppeersvalidationwebhook.metallb.io",
        path: "/validate-metallb-io-v1beta2-bgppeer",
        kind: "BGPPeer",
        plural: "bgppeers",
        version: "v1beta2",
        operations: CREATE_UPDATE,
    },
    Webhook {
        name: "communityvalidationwebhook.metallb.io",
        path: "/validate-metallb-io-v1beta1-community",
        kind: "Community",
        plural: "communities",
        version: "v1beta1",
        operations: CREATE_UPDATE,
    },
    Webhook {
        name: "bfdprofilevalidationwebhook.metallb.io",
        path: "/validate-metallb-io-v1beta1-bfdprofile",
        kind: "BFDProfile",
        plural: "bfdprofiles",
        version: "v1beta1",
        operations: &[Operation::Create, Operation::Delete],
    },
];

/// The webhook served at `path`.
pub fn webhook_for_path(path: &str) -> Option<&'static Webhook> {
    WEBHOOKS.iter().find(|w| w.path == path)
}

/// The object under review, typed.
#[derive(Debug, Clone)]
pub enum Object {
    /// An IPAddressPool.
    Pool(v1beta1::IPAddressPool),
    /// An L2Advertisement.
    L2(v1beta1::L2Advertisement),
    /// A BGPAdvertisement.
    BgpAd(v1beta1::BGPAdvertisement),
    /// A BGPPeer, as v1beta2.
    Peer(v1beta2::BGPPeer),
    /// A BFDProfile.
    Bfd(v1beta1::BFDProfile),
    /// A Community.
    Community(v1beta1::Community),
}

impl Object {
    /// Reads `value` as an object of `kind` (a [`Webhook::kind`]).
    pub fn from_json(kind: &str, value: serde_json::Value) -> Result<Object, String> {
        fn typed<K: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<K, String> {
            serde_path_to_error::deserialize(v).map_err(|e| format!("{}: {}", e.path(), e.inner()))
        }
        Ok(match kind {
            "IPAddressPool" => Object::Pool(typed(value)?),
            "L2Advertisement" => Object::L2(typed(value)?),
            "BGPAdvertisement" => Object::BgpAd(typed(value)?),
            "BGPPeer" => Object::Peer(typed(value)?),
            "BFDProfile" => Object::Bfd(typed(value)?),
            "Community" => Object::Community(typed(value)?),
            other => return Err(format!("kind {other:?} is not reviewed by MetalLB")),
        })
    }

    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Object::Pool(o) => &mut o.metadata,
            Object::L2(o) => &mut o.metadata,
            Object::BgpAd(o) => &mut o.metadata,
            Object::Peer(o) => &mut o.metadata,
            Object::Bfd(o) => &mut o.metadata,
            Object::Community(o) => &mut o.metadata,
        }
    }

    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Object::Pool(o) => &o.metadata,
            Object::L2(o) => &o.metadata,
            Object::BgpAd(o) => &o.metadata,
            Object::Peer(o) => &o.metadata,
            Object::Bfd(o) => &o.metadata,
            Object::Community(o) => &o.metadata,
        }
    }

    /// Sets the namespace when the object carries none (the API server
    /// sends it beside the object on create).
    pub fn default_namespace(&mut self, namespace: &str) {
        let meta = self.meta_mut();
        if meta.namespace.as_deref().unwrap_or_default().is_empty() && !namespace.is_empty() {
            meta.namespace = Some(namespace.to_owned());
        }
    }
}

/// One write under review. On delete, the object is the one being deleted.
#[derive(Debug, Clone)]
pub struct Proposal {
    /// What is done.
    pub operation: Operation,
    /// To what.
    pub object: Object,
}

/// The answer to the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the write through, telling the user `warnings`.
    Allowed {
        /// Shown by kubectl as `Warning: ...`.
        warnings: Vec<String>,
    },
    /// Refuse the write.
    Denied {
        /// Every error the write would introduce, one per line.
        message: String,
        /// Shown by kubectl as `Warning: ...`.
        warnings: Vec<String>,
    },
}

/// Reviews `proposal` against the `current` objects of the MetalLB
/// namespace (and the nodes): refused when it would introduce a
/// configuration error, or delete a BFDProfile a BGPPeer uses.
pub fn review(proposal: &Proposal, current: &Resources, opts: &Options) -> Verdict {
    if proposal.operation == Operation::Delete {
        return review_delete(&proposal.object, current);
    }
    // An object MetalLB does not read (made before the webhooks were
    // installed) may still be edited - to tidy it up, or move its
    // contents - as upstream allows updates anywhere; creating one is
    // refused, it would never take effect.
    let ns = proposal
        .object
        .meta()
        .namespace
        .as_deref()
        .unwrap_or_default();
    if proposal.operation == Operation::Update && !ns.is_empty() && ns != opts.namespace {
        return Verdict::Allowed {
            warnings: vec![format!(
                "MetalLB only reads objects in namespace {:?}: this one in {ns:?} has no effect",
                opts.namespace
            )],
        };
    }
    // What was dropped from objects the write leaves alone was reported
    // when they were written: only the difference is news.
    let (mut before_dropped, mut after_dropped) = (Vec::new(), Vec::new());
    let before = admissible(current.clone(), &mut before_dropped);
    let after = admissible(with_change(current, &proposal.object), &mut after_dropped);
    let mut warnings: Vec<String> = after_dropped
        .into_iter()
        .filter(|w| !before_dropped.contains(w))
        .collect();
    let (before_errors, before_warnings) = outcome(&before, opts);
    let (after_errors, after_warnings) = outcome(&after, opts);
    let old: BTreeSet<&ConfigError> = before_errors.iter().collect();
    let new: Vec<String> = after_errors
        .iter()
        .filter(|e| !old.contains(e))
        .map(ToString::to_string)
        .collect();
    let old_warnings: BTreeSet<&ConfigError> = before_warnings.iter().collect();
    warnings.extend(
        after_warnings
            .iter()
            .filter(|w| !old_warnings.contains(w))
            .map(ToString::to_string),
    );
    if new.is_empty() {
        Verdict::Allowed { warnings }
    } else {
        Verdict::Denied {
            message: new.join("\n"),
            warnings,
        }
    }
}

/// The errors and the warnings of the configuration `res` builds.
fn outcome(res: &Resources, opts: &Options) -> (Vec<ConfigError>, Vec<ConfigError>) {
    match Config::build(res, opts) {
        Ok(c) => (Vec::new(), c.warnings),
        Err(e) => (e.0, Vec::new()),
    }
}

/// Deletes break nothing but a BFDProfile a BGPPeer names (upstream's one
/// delete check); an advertisement naming a deleted pool only warns.
fn review_delete(object: &Object, current: &Resources) -> Verdict {
    let Object::Bfd(profile) = object else {
        return Verdict::Allowed { warnings: vec![] };
    };
    let name = profile.name_any();
    let users: Vec<String> = current
        .peers
        .iter()
        .filter(|p| p.spec.bfd_profile.as_deref() == Some(name.as_str()))
        .map(|p| format!("{:?}", p.name_any()))
        .collect();
    if users.is_empty() {
        return Verdict::Allowed { warnings: vec![] };
    }
    Verdict::Denied {
        message: format!(
            "bfdprofile \"{}/{name}\": cannot delete: used by bgppeer {} (spec.bfdProfile): remove the reference first",
            profile.namespace().unwrap_or_default(),
            users.join(", ")
        ),
        warnings: vec![],
    }
}

/// `current` with `object` in place of its namesake, or added (upstream's
/// `*ListWithUpdate`).
fn with_change(current: &Resources, object: &Object) -> Resources {
    fn put<K: ResourceExt + Clone>(list: &mut Vec<K>, obj: &K) {
        let at = list
            .iter()
            .position(|o| o.name_any() == obj.name_any() && o.namespace() == obj.namespace());
        match at {
            Some(i) => list[i] = obj.clone(),
            None => list.push(obj.clone()),
        }
    }
    let mut res = current.clone();
    match object {
        Object::Pool(o) => put(&mut res.pools, o),
        Object::L2(o) => put(&mut res.l2_advertisements, o),
        Object::BgpAd(o) => put(&mut res.bgp_advertisements, o),
        Object::Peer(o) => put(&mut res.peers, o),
        Object::Bfd(o) => put(&mut res.bfd_profiles, o),
        Object::Community(o) => put(&mut res.communities, o),
    }
    res
}

/// Drops what may be missing only for a moment, or what the review cannot
/// see (upstream's `resetTransientErrorsFields`), so the order of a
/// `kubectl apply -f dir` never matters: peers' password Secrets (the
/// webhook reads no Secrets), peers' BFD profiles not created yet,
/// advertisements' community aliases. What is dropped is checked by the
/// speakers, which report it in ConfigurationState; the user hears of it
/// now as a warning.
fn admissible(mut res: Resources, warnings: &mut Vec<String>) -> Resources {
    let profiles: BTreeSet<String> = res.bfd_profiles.iter().map(|b| b.name_any()).collect();
    for p in &mut res.peers {
        let who = format!(
            "bgppeer \"{}/{}\"",
            p.namespace().unwrap_or_default(),
            p.name_any()
        );
        if p.spec.password.is_none() {
            p.spec.password_secret = None;
        }
        if let Some(name) = p
            .spec
            .bfd_profile
            .take_if(|n| !n.is_empty() && !profiles.contains(n))
        {
            warnings.push(format!(
                "{who}: spec.bfdProfile: bfdprofile {name:?} does not exist yet: create it, or the peer's configuration stays invalid"
            ));
        }
        if p.spec.disable_mp == Some(true) {
            warnings.push(format!(
                "{who}: spec.disableMP: deprecated and has no effect: remove it"
            ));
        }
    }
    let aliases: BTreeSet<String> = res
        .communities
        .iter()
        .flat_map(|c| c.spec.communities.iter().flatten())
        .filter_map(|a| a.name.clone())
        .collect();
    for ad in &mut res.bgp_advertisements {
        let who = format!(
            "bgpadvertisement \"{}/{}\"",
            ad.namespace().unwrap_or_default(),
            ad.name_any()
        );
        if let Some(list) = &mut ad.spec.communities {
            for (i, c) in list.iter().enumerate() {
                if !looks_like_value(c) && !aliases.contains(c) {
                    warnings.push(format!(
                        "{who}: spec.communities[{i}]: community alias {c:?} is not defined yet: define it in a Community object or write the value (1234:1234 or large:1:2:3)"
                    ));
                }
            }
            list.retain(|c| looks_like_value(c));
        }
    }
    res
}

#[cfg(test)]
mod tests;
