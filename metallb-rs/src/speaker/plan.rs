//! The speaker's decision for one service, from plain data: whether this
//! node answers for it in layer 2 and from which interfaces, and which
//! routes it sends each BGP peer. Pure: `run::announce` applies the plan
//! (announcer, BGP speaker, status objects, events, metrics).

use super::bgp::advertise::{self, NotAnnounced, PeerRoutes};
use super::election::{self, Decision, Endpoints, Interfaces, NodeInfo, NotOwner};
use crate::config::Config;
use crate::service as svcs;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

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
    /// `--lb-class`.
    pub lb_class: Option<&'a str>,
    /// `--ignore-exclude-lb`.
    pub ignore_exclude_lb: bool,
}

/// Why a service is not announced, for the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// Its addresses are in no pool.
    NoPool(Vec<IpAddr>),
    /// Another node answers in layer 2 (or none may).
    Layer2(NotOwner),
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
    /// Why something is not announced.
    pub notes: Vec<Note>,
}

/// Decides for `svc` (None: it does not exist) with its EndpointSlices.
pub fn plan(
    world: &World<'_>,
    svc: Option<&Service>,
    slices: &[Arc<EndpointSlice>],
) -> ServicePlan {
    let mut out = ServicePlan::default();
    let Some(svc) = svc else { return out };
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
    let endpoints = Endpoints::from_slices(slices.iter().map(|s| &**s));
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
            endpoints: &endpoints,
            ignore_exclude_lb: world.ignore_exclude_lb,
        };
        match election::decide(&input, world.node) {
            Decision::Announce(interfaces) => out.layer2 = Some(interfaces),
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
            endpoints: &endpoints,
        };
        match advertise::routes(world.config, me, &input, world.ignore_exclude_lb) {
            Ok(routes) => out.bgp = routes,
            Err(reason) => out.notes.push(Note::Bgp(reason)),
        }
    }
    out.ips = ips;
    out
}

#[cfg(test)]
mod tests;
