//! The speaker's decision for one service, from plain data: whether this
//! node answers for it in layer 2 and from which interfaces, which routes
//! it sends each BGP peer, the status objects it should have, and the
//! events to publish. Pure: `run::announce` applies the plan (announcer,
//! BGP speaker, status writes, events) and reports what changed, which
//! drives the logs and metrics.

use super::bgp::advertise::{self, NotAnnounced, PeerRoutes};
use super::election::{self, Decision, Endpoints, Interfaces, NodeInfo, NotOwner};
use super::events::{self, Protocol};
use super::status;
use crate::api::v1beta1::{
    MetalLBServiceBGPStatus, MetalLBServiceL2Status, ServiceBGPStatus, ServiceL2Status,
};
use crate::config::Config;
use crate::event::EventSpec;
use crate::service::{self as svcs, ServiceKey};
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

/// The objects one pass reads, by service: built once per batch from the
/// caches (never per service, which would make a full pass quadratic).
#[derive(Debug, Default)]
pub struct Objects {
    /// The services themselves.
    pub services: BTreeMap<ServiceKey, Arc<Service>>,
    /// Their EndpointSlices, as election reads them (none: no endpoint).
    pub endpoints: BTreeMap<ServiceKey, Endpoints>,
    /// Every node's ServiceL2Status objects for them.
    pub statuses: BTreeMap<ServiceKey, Vec<Arc<ServiceL2Status>>>,
    /// Every node's ServiceBGPStatus objects for them.
    pub bgp_statuses: BTreeMap<ServiceKey, Vec<Arc<ServiceBGPStatus>>>,
}

/// What the speaker knows that every service's decision reads.
#[derive(Debug, Clone, Copy)]
pub struct World<'a> {
    /// This speaker's node.
    pub node: &'a str,
    /// The configuration in force.
    pub config: &'a Config,
    /// Every node, by name.
    pub nodes: &'a [NodeInfo],
    /// Nodes whose speaker counts (see `liveness`).
    pub alive: &'a BTreeSet<String>,
    /// Cut off from the API server and most speakers: announce nothing.
    pub isolated: bool,
    /// The names of this node's interfaces layer 2 may answer on.
    pub interfaces: &'a [String],
    /// `--lb-class`.
    pub lb_class: Option<&'a str>,
    /// `--ignore-exclude-lb`.
    pub ignore_exclude_lb: bool,
    /// The services and the objects that go with them.
    pub objects: &'a Objects,
    /// Layer 2 winners remembered from earlier passes, advanced with
    /// `nodes` and `alive` (see [`election::memo`]).
    pub elected: &'a election::memo::Memo,
}

/// Why a service is not announced, for the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// Its addresses are in no pool.
    NoPool(Vec<IpAddr>),
    /// Another node answers in layer 2 (or none may).
    Layer2(NotOwner),
    /// Elected, but none of the interfaces its L2Advertisements name
    /// exists here.
    NoInterface(BTreeSet<String>),
    /// Not announced over BGP.
    Bgp(NotAnnounced),
}

/// What this node does for one service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServicePlan {
    /// Its addresses, when this speaker handles the service (our class, a
    /// LoadBalancer, addresses from a pool); empty otherwise.
    pub ips: Vec<IpAddr>,
    /// Answer in layer 2, from these interfaces.
    pub layer2: Option<Interfaces>,
    /// Routes per BGP peer (empty: none).
    pub bgp: PeerRoutes,
    /// What this node's ServiceL2Status should say (None: no object).
    pub l2_status: Option<MetalLBServiceL2Status>,
    /// What this node's ServiceBGPStatus should say (None: no object).
    pub bgp_status: Option<MetalLBServiceBGPStatus>,
    /// Events to publish on the service.
    pub events: Vec<EventSpec>,
    /// Why something is not announced.
    pub notes: Vec<Note>,
    /// What to remember of its layer 2 election (None: forget it).
    pub elected: Option<election::memo::Remembered>,
}

/// Decides for the service `key` (gone from `world.objects`: announce
/// nothing, keep no status object).
pub fn plan(world: &World<'_>, key: &ServiceKey) -> ServicePlan {
    let mut out = ServicePlan::default();
    let Some(svc) = world.objects.services.get(key) else {
        return out;
    };
    if !svcs::class_matches(svc, world.lb_class) || !svcs::is_load_balancer(svc) {
        return out;
    }
    let Some(ips) = svcs::ingress_ips(svc).ok().filter(|i| !i.is_empty()) else {
        return out;
    };
    let Some(pool) = world.config.pool_for(&ips) else {
        out.notes.push(Note::NoPool(ips));
        return out;
    };
    let none = Endpoints::default();
    let endpoints = world.objects.endpoints.get(key).unwrap_or(&none);
    let local = svc
        .spec
        .as_ref()
        .and_then(|s| s.external_traffic_policy.as_deref())
        .is_some_and(|p| p == "Local");
    if !world.isolated {
        let sharing = svcs::sharing_key(svc);
        let input = election::Input {
            service_labels: svc.labels(),
            shared: !sharing.sharing.is_empty(),
            local,
            first_ip: ips[0],
            pool: &pool.name,
            advertisements: &world.config.l2_advertisements,
            nodes: world.nodes,
            alive: Some(world.alive),
            endpoints,
            ignore_exclude_lb: world.ignore_exclude_lb,
        };
        let (decision, remembered) =
            election::decide_remembering(&input, world.node, world.elected, key);
        out.elected = remembered;
        match decision {
            Decision::Announce(Interfaces::Named(names))
                if !names.iter().any(|n| world.interfaces.contains(n)) =>
            {
                out.events.extend(events::announce_failed(&ips, world.node));
                out.notes.push(Note::NoInterface(names));
            }
            Decision::Announce(interfaces) => {
                out.l2_status = Some(status::desired_status(
                    world.node,
                    &key.namespace,
                    &key.name,
                    status::reported_interfaces(&interfaces),
                ));
                out.events
                    .push(events::node_assigned(world.node, Protocol::Layer2));
                out.layer2 = Some(interfaces);
            }
            Decision::NotOwner(reason) => out.notes.push(Note::Layer2(reason)),
        }
    }
    let me = world.nodes.iter().find(|n| n.name == world.node);
    if let Some(me) = me
        && !world.isolated
        && !world.config.bgp_advertisements.is_empty()
    {
        let input = advertise::Service {
            labels: svc.labels(),
            local,
            ips: &ips,
            pool: &pool.name,
            endpoints,
        };
        match advertise::routes(world.config, me, &input, world.ignore_exclude_lb) {
            Ok(routes) => out.bgp = routes,
            Err(reason) => out.notes.push(Note::Bgp(reason)),
        }
        let peers: Vec<String> = out
            .bgp
            .iter()
            .filter(|(_, r)| !r.is_empty())
            .map(|(p, _)| p.clone())
            .collect();
        if !peers.is_empty() {
            out.bgp_status = Some(status::desired_bgp_status(
                world.node,
                &key.namespace,
                &key.name,
                peers,
            ));
            out.events
                .push(events::node_assigned(world.node, Protocol::Bgp));
        }
    }
    out.ips = ips;
    out
}

/// What applying a plan changed for one protocol: what the logs say and
/// how `metallb_speaker_announced` moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Not announced before, not now.
    Idle,
    /// Announced as before.
    Same,
    /// Newly announced.
    Started,
    /// Still announced, with other addresses (the old ones).
    Changed(Vec<IpAddr>),
    /// No longer announced (the addresses it had).
    Stopped(Vec<IpAddr>),
}

impl Change {
    /// From the addresses announced before (None: nothing) and now.
    pub fn between(before: Option<Vec<IpAddr>>, now: Option<&[IpAddr]>) -> Change {
        match (before, now) {
            (None, None) => Change::Idle,
            (None, Some(_)) => Change::Started,
            (Some(old), None) => Change::Stopped(old),
            (Some(old), Some(now)) if old == now => Change::Same,
            (Some(old), Some(_)) => Change::Changed(old),
        }
    }

    /// The addresses whose gauges go, before the current ones are set.
    pub fn retired(&self) -> &[IpAddr] {
        match self {
            Change::Changed(old) | Change::Stopped(old) => old,
            _ => &[],
        }
    }

    /// Whether the gauges of the current addresses are set.
    pub fn sets_gauges(&self) -> bool {
        matches!(self, Change::Started | Change::Changed(_))
    }
}

#[cfg(test)]
mod tests;
