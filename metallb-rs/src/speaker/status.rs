//! ServiceL2Status and ServiceBGPStatus objects: what this speaker must
//! create, patch or delete for one service (pure). Each speaker manages
//! only objects labelled with its node. In layer 2 one node announces, so
//! the announcing node also removes the objects other nodes left behind
//! for the service - but only of nodes whose speaker no longer counts as
//! running (`liveness`): two speakers that both think they announce (each
//! sees the other gone for a moment, or their views of the nodes differ)
//! never delete each other's objects in a loop; each keeps its own, and
//! the live one's stays. Those are replaced (delete, then its own), never
//! patched - their `node` field is immutable, and patching it is the error
//! loop of upstream #2930. In BGP every eligible node announces, each with
//! its own object.

use crate::api::v1beta1::{
    InterfaceInfo, MetalLBServiceBGPStatus, MetalLBServiceL2Status, ServiceBGPStatus,
    ServiceL2Status,
};
use kube::ResourceExt;

/// Label: the node that wrote the object.
pub const NODE_LABEL: &str = "metallb.io/node";
/// Label: the service's name.
pub const SERVICE_NAME_LABEL: &str = "metallb.io/service-name";
/// Label: the service's namespace.
pub const SERVICE_NAMESPACE_LABEL: &str = "metallb.io/service-namespace";

/// A per-(service, node) status kind.
pub trait StatusObject:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// Its `status`.
    type Status: Clone + PartialEq + std::fmt::Debug + serde::Serialize + Send + Sync;
    /// `generateName` of the objects.
    const GENERATE_NAME: &'static str;
    /// Only one node announces (layer 2): its object replaces the others'.
    const EXCLUSIVE: bool;
    /// The status, if set.
    fn status(&self) -> Option<&Self::Status>;
    /// The immutable fields: node, service name, service namespace.
    fn identity(s: &Self::Status) -> [Option<&String>; 3];
}

/// Both kinds share the identity fields; they differ in name prefix and
/// in whether one node's object excludes the others'.
macro_rules! status_object {
    ($kind:ty, $status:ty, $prefix:literal, $exclusive:literal) => {
        impl StatusObject for $kind {
            type Status = $status;
            const GENERATE_NAME: &'static str = $prefix;
            const EXCLUSIVE: bool = $exclusive;
            fn status(&self) -> Option<&Self::Status> {
                self.status.as_ref()
            }
            fn identity(s: &Self::Status) -> [Option<&String>; 3] {
                [
                    s.node.as_ref(),
                    s.service_name.as_ref(),
                    s.service_namespace.as_ref(),
                ]
            }
        }
    };
}

status_object!(ServiceL2Status, MetalLBServiceL2Status, "l2-", true);
status_object!(ServiceBGPStatus, MetalLBServiceBGPStatus, "bgp-", false);

/// The interfaces a layer 2 status reports (upstream's
/// `buildDesiredStatus`): the names the service's L2Advertisements for
/// this node configure, whether or not each exists here; none when they
/// allow every interface.
pub fn reported_interfaces(
    interfaces: &crate::speaker::election::Interfaces,
) -> Option<Vec<String>> {
    match interfaces {
        crate::speaker::election::Interfaces::All => None,
        crate::speaker::election::Interfaces::Named(names) => Some(names.iter().cloned().collect()),
    }
}

/// The status this node's layer 2 object should carry.
pub fn desired_status(
    node: &str,
    namespace: &str,
    name: &str,
    interfaces: Option<Vec<String>>,
) -> MetalLBServiceL2Status {
    MetalLBServiceL2Status {
        node: Some(node.to_owned()),
        service_name: Some(name.to_owned()),
        service_namespace: Some(namespace.to_owned()),
        interfaces: interfaces.map(|list| {
            list.into_iter()
                .map(|n| InterfaceInfo { name: Some(n) })
                .collect()
        }),
    }
}

/// The status this node's BGP object should carry: the peers it announces
/// the service to.
pub fn desired_bgp_status(
    node: &str,
    namespace: &str,
    name: &str,
    peers: Vec<String>,
) -> MetalLBServiceBGPStatus {
    MetalLBServiceBGPStatus {
        node: Some(node.to_owned()),
        service_name: Some(name.to_owned()),
        service_namespace: Some(namespace.to_owned()),
        peers: Some(peers),
    }
}

/// One change to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<S> {
    /// Create this node's object with this status.
    Create(S),
    /// Set the status of object `name` (ours, immutable fields equal).
    PatchStatus {
        /// Object name.
        name: String,
        /// The status.
        status: S,
    },
    /// Delete object `name`.
    Delete {
        /// Object name.
        name: String,
    },
}

/// The actions that bring `existing` (every object labelled with this
/// service, any node) to `desired` (Some when this node announces).
/// `gone(node)`: that node's speaker does not count as running, so its
/// objects are stale.
pub fn plan<K: StatusObject>(
    me: &str,
    existing: &[&K],
    desired: Option<&K::Status>,
    gone: impl Fn(&str) -> bool,
) -> Vec<Action<K::Status>> {
    let mut actions = Vec::new();
    let (mine, others): (Vec<&&K>, Vec<&&K>) = existing
        .iter()
        .partition(|o| o.labels().get(NODE_LABEL).map(String::as_str) == Some(me));
    let Some(desired) = desired else {
        actions.extend(mine.iter().map(|o| Action::Delete { name: o.name_any() }));
        return actions;
    };
    if K::EXCLUSIVE {
        // We announce: objects of nodes whose speaker is gone are stale.
        // A live speaker's object is its own business: deleting it would
        // make it create it again, and if it also thinks it announces, it
        // would delete ours - a loop.
        actions.extend(
            others
                .iter()
                .filter(|o| o.labels().get(NODE_LABEL).is_none_or(|n| gone(n)))
                .map(|o| Action::Delete { name: o.name_any() }),
        );
    }
    let same_identity = |s: &K::Status| K::identity(s) == K::identity(desired);
    // Keep the best of ours (one whose identity fields already match, so
    // only the mutable fields may need a patch), delete the rest.
    let mut mine: Vec<&&K> = mine;
    mine.sort_by_key(|o| {
        let matches = o.status().is_some_and(same_identity);
        (!matches, o.name_any())
    });
    let mut iter = mine.into_iter();
    match iter.next() {
        Some(keep) => match keep.status() {
            Some(s) if s == desired => {}
            Some(s) if !same_identity(s) && K::identity(s).iter().any(Option::is_some) => {
                // Immutable fields differ (edited by hand): replace it.
                actions.push(Action::Delete {
                    name: keep.name_any(),
                });
                actions.push(Action::Create(desired.clone()));
            }
            _ => actions.push(Action::PatchStatus {
                name: keep.name_any(),
                status: desired.clone(),
            }),
        },
        None => actions.push(Action::Create(desired.clone())),
    }
    actions.extend(iter.map(|o| Action::Delete { name: o.name_any() }));
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(
        name: &str,
        node: &str,
        status_node: Option<&str>,
        interfaces: Option<&[&str]>,
    ) -> ServiceL2Status {
        let mut o = ServiceL2Status::new(name, Default::default());
        o.metadata.labels = Some(
            [
                (NODE_LABEL.to_owned(), node.to_owned()),
                (SERVICE_NAME_LABEL.to_owned(), "web".to_owned()),
                (SERVICE_NAMESPACE_LABEL.to_owned(), "shop".to_owned()),
            ]
            .into(),
        );
        o.status = status_node.map(|n| {
            desired_status(
                n,
                "shop",
                "web",
                interfaces.map(|i| i.iter().map(|s| (*s).to_owned()).collect()),
            )
        });
        o
    }

    fn want(interfaces: Option<&[&str]>) -> MetalLBServiceL2Status {
        desired_status(
            "a",
            "shop",
            "web",
            interfaces.map(|i| i.iter().map(|s| (*s).to_owned()).collect()),
        )
    }

    /// Every other node's speaker is gone (only `a` runs).
    fn others_gone(node: &str) -> bool {
        node != "a"
    }

    #[test]
    fn two_announcers_never_delete_each_others_objects() {
        // Both a and b think they announce the service (their views
        // differ for a moment); both speakers run. Each creates its own and
        // leaves the other's alone: no delete-recreate loop.
        let both_run = |_: &str| false;
        let a = obj("l2-a", "a", Some("a"), None);
        let b = obj("l2-b", "b", Some("b"), None);
        let want_b = desired_status("b", "shop", "web", None);
        assert_eq!(
            plan("a", &[&b], Some(&want(None)), both_run),
            [Action::Create(want(None))]
        );
        assert_eq!(
            plan("b", &[&a], Some(&want_b), both_run),
            [Action::Create(want_b.clone())]
        );
        assert_eq!(plan("a", &[&a, &b], Some(&want(None)), both_run), []);
        assert_eq!(plan("b", &[&a, &b], Some(&want_b), both_run), []);
    }

    #[test]
    fn leader_creates_its_own_and_replaces_others() {
        let b = obj("l2-b", "b", Some("b"), None);
        assert_eq!(
            plan("a", &[&b], Some(&want(None)), others_gone),
            [
                Action::Delete {
                    name: "l2-b".into()
                },
                Action::Create(want(None))
            ]
        );
    }

    #[test]
    fn converged_is_quiet_and_interfaces_are_patched() {
        let mine = obj("l2-a", "a", Some("a"), None);
        assert_eq!(plan("a", &[&mine], Some(&want(None)), others_gone), []);
        assert_eq!(
            plan("a", &[&mine], Some(&want(Some(&["eth1"]))), others_gone),
            [Action::PatchStatus {
                name: "l2-a".into(),
                status: want(Some(&["eth1"]))
            }]
        );
    }

    #[test]
    fn status_wiped_by_a_user_is_restored() {
        let mine = obj("l2-a", "a", None, None);
        assert_eq!(
            plan("a", &[&mine], Some(&want(None)), others_gone),
            [Action::PatchStatus {
                name: "l2-a".into(),
                status: want(None)
            }]
        );
    }

    #[test]
    fn edited_immutable_field_means_replace_never_patch() {
        let edited = obj("l2-a", "a", Some("zzz"), None);
        assert_eq!(
            plan("a", &[&edited], Some(&want(None)), others_gone),
            [
                Action::Delete {
                    name: "l2-a".into()
                },
                Action::Create(want(None))
            ]
        );
    }

    #[test]
    fn duplicates_of_ours_are_deleted_keeping_the_matching_one() {
        let wrong = obj("l2-a1", "a", Some("zzz"), None);
        let right = obj("l2-a2", "a", Some("a"), None);
        assert_eq!(
            plan("a", &[&wrong, &right], Some(&want(None)), others_gone),
            [Action::Delete {
                name: "l2-a1".into()
            }]
        );
    }

    #[test]
    fn bgp_nodes_keep_their_own_objects_side_by_side() {
        let mut b = ServiceBGPStatus::new("bgp-b", Default::default());
        b.metadata.labels = Some([(NODE_LABEL.to_owned(), "b".to_owned())].into());
        b.status = Some(desired_bgp_status("b", "shop", "web", vec!["frr".into()]));
        let want = desired_bgp_status("a", "shop", "web", vec!["frr".into()]);
        assert_eq!(
            plan("a", &[&b], Some(&want), others_gone),
            [Action::Create(want.clone())]
        );
        let mut a = b.clone();
        a.metadata.name = Some("bgp-a".into());
        a.metadata.labels = Some([(NODE_LABEL.to_owned(), "a".to_owned())].into());
        a.status = Some(desired_bgp_status("a", "shop", "web", vec![]));
        // Peers are mutable: a patch.
        assert_eq!(
            plan("a", &[&a, &b], Some(&want), others_gone),
            [Action::PatchStatus {
                name: "bgp-a".into(),
                status: want.clone()
            }]
        );
        assert_eq!(
            plan::<ServiceBGPStatus>("a", &[&a, &b], None, others_gone),
            [Action::Delete {
                name: "bgp-a".into()
            }]
        );
    }

    #[test]
    fn not_announcing_deletes_only_ours() {
        let mine = obj("l2-a", "a", Some("a"), None);
        let theirs = obj("l2-b", "b", Some("b"), None);
        assert_eq!(
            plan("a", &[&mine, &theirs], None, others_gone),
            [Action::Delete {
                name: "l2-a".into()
            }]
        );
        assert_eq!(plan("c", &[&mine, &theirs], None, others_gone), []);
    }

    /// Upstream's `buildDesiredStatus`: configured names, sorted, even
    /// those that do not exist on the node; nothing for "every interface".
    #[test]
    fn build_desired_status_interfaces_are_the_configured_names() {
        use crate::speaker::election::Interfaces;
        let named = Interfaces::Named(["eth9".to_owned(), "eth1".to_owned()].into());
        assert_eq!(
            reported_interfaces(&named),
            Some(vec!["eth1".to_owned(), "eth9".to_owned()])
        );
        assert_eq!(reported_interfaces(&Interfaces::All), None);
        let st = desired_status("n1", "ns", "s", reported_interfaces(&named));
        let names: Vec<_> = st
            .interfaces
            .into_iter()
            .flatten()
            .filter_map(|i| i.name)
            .collect();
        assert_eq!(names, ["eth1", "eth9"]);
    }
}
