//! Layer 2 announcing: which addresses this node answers for, on which
//! interfaces; one ARP and one NDP responder task per eligible interface;
//! gratuitous ARP / unsolicited NA on (re)announcement; solicited-node
//! multicast membership per IPv6 address.
//!
//! An address used by several services is announced once (the union of
//! their interfaces) and withdrawn with its last service. Responders read
//! the ownership table directly, so answering never waits for the
//! speaker's reconcile loop.

use super::election::Interfaces;
use super::garp::Schedule;
use crate::metrics::Layer2Metrics;
use crate::net::ethernet::{ETHERTYPE_ARP, ETHERTYPE_IPV6, Mac};
use crate::net::iface::Eligible;
use crate::net::packet::PacketSocket;
use crate::net::{arp, ndp};
use crate::service::ServiceKey;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

/// Addresses this node answers for, and where.
#[derive(Debug, Default)]
struct Table {
    ips: HashMap<IpAddr, Interfaces>,
    /// Answer nothing, whatever `ips` holds (see [`Silencer`]).
    silenced: bool,
}

impl Table {
    fn answers(&self, ip: IpAddr, iface: &str) -> Option<bool> {
        if self.silenced {
            return None;
        }
        self.ips.get(&ip).map(|i| i.includes(iface))
    }

    /// `ip` is announced on `iface`, silenced or not.
    fn covers(&self, ip: IpAddr, iface: &str) -> bool {
        self.ips.get(&ip).is_some_and(|i| i.includes(iface))
    }
}

type SharedTable = Arc<RwLock<Table>>;

/// Stops and resumes every answer of an [`Announcer`] at once, from any
/// task: the responders and the unsolicited announcements read the flag,
/// so silencing never waits for the speaker's loop, which may be waiting
/// on the API server.
#[derive(Clone)]
pub struct Silencer(SharedTable);

impl Silencer {
    /// Silences (`true`) or lets the announcer answer again; returns
    /// whether that changed anything.
    pub fn set(&self, silenced: bool) -> bool {
        let mut table = self.0.write().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut table.silenced, silenced) != silenced
    }

    /// Whether the announcer is silenced.
    pub fn silenced(&self) -> bool {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .silenced
    }
}

/// A service's addresses could not be announced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnounceError {
    /// None of the selected interfaces exists (and is eligible) here.
    #[error("the interfaces specified by the L2Advertisements ({}) don't exist on this node", .0.iter().cloned().collect::<Vec<_>>().join(", "))]
    NoInterface(BTreeSet<String>),
}

/// One interface's responders and the sockets announcing from it.
struct Answering {
    iface: Eligible,
    /// Sends gratuitous ARP (receives nothing: the responder does).
    arp: Option<PacketSocket>,
    /// Sends unsolicited NA and holds the solicited-node groups.
    ndp: Option<PacketSocket>,
    responders: Vec<Responder>,
    /// Solicited-node multicast MACs joined, with the addresses needing each.
    groups: BTreeMap<Mac, BTreeSet<Ipv6Addr>>,
}

/// The layer 2 announcer of this node.
pub struct Announcer {
    table: SharedTable,
    owned: Ownership,
    responders: BTreeMap<String, Answering>,
    eligible: Vec<Eligible>,
    garp: Schedule,
    metrics: Layer2Metrics,
}

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcer")
            .field("services", &self.owned.services().collect::<Vec<_>>())
            .field("interfaces", &self.responders.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Announcer {
    /// An announcer with no addresses and no interfaces yet.
    pub fn new(metrics: Layer2Metrics) -> Self {
        Self {
            table: SharedTable::default(),
            owned: Ownership::default(),
            responders: BTreeMap::new(),
            eligible: Vec::new(),
            garp: Schedule::new(),
            metrics,
        }
    }

    /// A handle that silences this announcer from another task.
    pub fn silencer(&self) -> Silencer {
        Silencer(self.table.clone())
    }

    /// The eligible interfaces currently in use.
    pub fn interfaces(&self) -> &[Eligible] {
        &self.eligible
    }

    /// The names of the eligible interfaces, in the order found.
    pub fn interface_names(&self) -> Vec<String> {
        self.eligible.iter().map(|e| e.name.clone()).collect()
    }

    /// Announces `service`'s `ips` from `interfaces` (replacing what it
    /// announced); returns the addresses it announced before. Fails,
    /// changing nothing, when none of the named interfaces exists (the
    /// plan checks this first; the announcer keeps the rule so its table
    /// never names an interface it has no responder on).
    pub async fn set(
        &mut self,
        service: &ServiceKey,
        ips: &[IpAddr],
        interfaces: Interfaces,
    ) -> Result<Option<Vec<IpAddr>>, AnnounceError> {
        if let Interfaces::Named(names) = &interfaces
            && !self.eligible.iter().any(|e| names.contains(&e.name))
        {
            return Err(AnnounceError::NoInterface(names.clone()));
        }
        let entry = (ips.to_vec(), interfaces);
        if self.owned.get(service) == Some(&entry) {
            // Announcing again keeps the unsolicited announcements going,
            // as upstream's SetBalancer does on every call.
            let now = Instant::now();
            for ip in ips {
                self.garp.trigger(*ip, now);
            }
            return Ok(Some(entry.0));
        }
        let (before, touched) = self.owned.set(service, Some(entry));
        self.update(&touched, Instant::now()).await;
        Ok(before.map(|(ips, _)| ips))
    }

    /// Stops announcing for `service` (its addresses stay announced while
    /// another service uses them); returns the addresses it announced.
    pub async fn withdraw(&mut self, service: &ServiceKey) -> Option<Vec<IpAddr>> {
        let (before, touched) = self.owned.set(service, None);
        let before = before?;
        self.update(&touched, Instant::now()).await;
        Some(before.0)
    }

    /// Services announced.
    pub fn services(&self) -> impl Iterator<Item = &ServiceKey> {
        self.owned.services()
    }

    /// Brings the table's entries for `touched` addresses in line with
    /// the services using them; triggers announcements for addresses that
    /// are new or moved to other interfaces.
    async fn update(&mut self, touched: &BTreeSet<IpAddr>, now: Instant) {
        {
            let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
            for ip in touched {
                match self.owned.merged(*ip) {
                    Some(ifaces) => {
                        if table.ips.get(ip) != Some(&ifaces) {
                            self.garp.trigger(*ip, now);
                            table.ips.insert(*ip, ifaces);
                        }
                    }
                    None => {
                        if table.ips.remove(ip).is_some() {
                            self.garp.remove(*ip);
                        }
                    }
                }
            }
        }
        self.sync_groups(Some(touched));
        self.send_due(now).await;
    }

    /// Joins/leaves solicited-node groups so each interface receives the
    /// solicitations for the IPv6 addresses it announces: for `only` these
    /// addresses (in O(their number)), or all of them (None: the
    /// interfaces changed). Silencing leaves the groups alone: it stops
    /// the answers, not the listening.
    fn sync_groups(&mut self, only: Option<&BTreeSet<IpAddr>>) {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        let v6 = |ip: &IpAddr| match ip {
            IpAddr::V6(v6) => Some(*v6),
            IpAddr::V4(_) => None,
        };
        for r in self.responders.values_mut() {
            let Some(sock) = &r.ndp else { continue };
            // Each group looked at, and whether it was joined before.
            let mut was: BTreeMap<Mac, bool> = BTreeMap::new();
            let addresses: Vec<Ipv6Addr> = match only {
                Some(touched) => touched.iter().filter_map(v6).collect(),
                None => {
                    was.extend(r.groups.keys().map(|m| (*m, true)));
                    r.groups.clear();
                    table.ips.keys().filter_map(v6).collect()
                }
            };
            for ip in addresses {
                let mac = ndp::multicast_mac(ndp::solicited_node(ip));
                was.entry(mac)
                    .or_insert_with(|| r.groups.contains_key(&mac));
                if table.covers(IpAddr::V6(ip), &r.iface.name) {
                    r.groups.entry(mac).or_default().insert(ip);
                } else if let Some(users) = r.groups.get_mut(&mac) {
                    users.remove(&ip);
                    if users.is_empty() {
                        r.groups.remove(&mac);
                    }
                }
            }
            let joined: Vec<Mac> = was
                .iter()
                .filter(|(m, before)| !**before && r.groups.contains_key(*m))
                .map(|(m, _)| *m)
                .collect();
            let left: Vec<Mac> = was
                .iter()
                .filter(|(m, before)| **before && !r.groups.contains_key(*m))
                .map(|(m, _)| *m)
                .collect();
            for mac in joined {
                if let Err(e) = sock.join_multicast(mac) {
                    tracing::warn!(interface = %r.iface.name, group = %mac, error = %e, "could not join multicast group");
                }
            }
            for mac in left {
                if let Err(e) = sock.leave_multicast(mac) {
                    tracing::debug!(interface = %r.iface.name, group = %mac, error = %e, "could not leave multicast group");
                }
            }
        }
    }

    /// When the next unsolicited announcement is due.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.garp.next_wakeup()
    }

    /// Sends the unsolicited announcements due at `now`.
    pub async fn send_due(&mut self, now: Instant) {
        let due = self.garp.due(now);
        if due.is_empty() {
            return;
        }
        let owned: Vec<(IpAddr, Interfaces)> = {
            let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
            due.iter()
                .filter(|_| !table.silenced)
                .filter_map(|ip| table.ips.get(ip).map(|i| (*ip, i.clone())))
                .collect()
        };
        for (ip, ifaces) in owned {
            for r in self.responders.values() {
                if !ifaces.includes(&r.iface.name) {
                    continue;
                }
                // Counted per packet sent, as upstream counts them: a
                // request and a reply for IPv4, one advertisement for IPv6.
                let sent: u64 = match ip {
                    IpAddr::V4(v4) => match &r.arp {
                        Some(sock) => {
                            let mut n = 0;
                            for op in [arp::Op::Request, arp::Op::Reply] {
                                let frame = arp::Arp::gratuitous(op, r.iface.mac, v4)
                                    .frame(Mac::BROADCAST, r.iface.mac);
                                if sock.send(&frame).await.is_err() {
                                    break;
                                }
                                n += 1;
                            }
                            n
                        }
                        None => 0,
                    },
                    IpAddr::V6(v6) => match &r.ndp {
                        Some(sock) => {
                            let na = ndp::Packet {
                                src: v6,
                                dst: ndp::ALL_NODES,
                                msg: ndp::Message::NeighborAdvertisement {
                                    flags: ndp::Flags {
                                        router: false,
                                        solicited: false,
                                        override_: true,
                                    },
                                    target: v6,
                                    target_ll: Some(r.iface.mac),
                                },
                            };
                            u64::from(
                                sock.send(
                                    &na.frame(ndp::multicast_mac(ndp::ALL_NODES), r.iface.mac),
                                )
                                .await
                                .is_ok(),
                            )
                        }
                        None => 0,
                    },
                };
                if sent > 0 {
                    self.metrics
                        .gratuitous_sent
                        .with_label_values(&[&ip.to_string()])
                        .inc_by(sent);
                }
            }
        }
    }

    /// Starts responders on newly eligible interfaces and stops those on
    /// interfaces that vanished or changed. Returns what changed, for logs.
    pub async fn update_interfaces(&mut self, eligible: Vec<Eligible>) -> Vec<String> {
        let mut changes = Vec::new();
        let keep: BTreeSet<&str> = eligible.iter().map(|e| e.name.as_str()).collect();
        let stale: Vec<String> = self
            .responders
            .iter()
            .filter(|(name, r)| {
                !keep.contains(name.as_str())
                    || eligible.iter().any(|e| &e.name == *name && *e != r.iface)
                    // One dead responder task (ARP or NDP) is reason
                    // enough to start the interface's responders again.
                    || r.responders.iter().any(Responder::is_finished)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in stale {
            self.responders.remove(&name);
            changes.push(format!("stopped responders on {name}"));
        }
        for e in &eligible {
            if self.responders.contains_key(&e.name) {
                continue;
            }
            match self.start(e) {
                Ok(r) => {
                    changes.push(format!(
                        "answering on {} ({}{})",
                        e.name,
                        if r.arp.is_some() { "ARP" } else { "" },
                        if r.ndp.is_some() { " NDP" } else { "" }
                    ));
                    self.responders.insert(e.name.clone(), r);
                }
                Err(err) => changes.push(format!("cannot answer on {}: {err}", e.name)),
            }
        }
        let new_ifaces: Vec<String> = changes
            .iter()
            .filter(|c| c.starts_with("answering"))
            .cloned()
            .collect();
        self.eligible = eligible;
        self.sync_groups(None);
        if !new_ifaces.is_empty() {
            // A new interface: tell its link about what we already own.
            let now = Instant::now();
            let ips: Vec<IpAddr> = self
                .table
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .ips
                .keys()
                .copied()
                .collect();
            for ip in ips {
                self.garp.trigger(ip, now);
            }
            self.send_due(now).await;
        }
        changes
    }

    fn start(&self, e: &Eligible) -> std::io::Result<Answering> {
        let mut r = Answering {
            iface: e.clone(),
            arp: None,
            ndp: None,
            responders: Vec::new(),
            groups: BTreeMap::new(),
        };
        if e.arp {
            r.arp = Some(PacketSocket::open_sender(e.index, ETHERTYPE_ARP)?);
            r.responders.push(Responder::start(
                Protocol::Arp,
                e,
                self.table.clone(),
                self.metrics.clone(),
            )?);
        }
        if e.ndp.is_some() {
            r.ndp = Some(PacketSocket::open_sender(e.index, ETHERTYPE_IPV6)?);
            r.responders.push(Responder::start(
                Protocol::Ndp,
                e,
                self.table.clone(),
                self.metrics.clone(),
            )?);
        }
        Ok(r)
    }

    /// Stops answering everything (shutdown).
    pub fn shutdown(&mut self) {
        self.table
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .ips
            .clear();
        self.owned.clear();
        self.responders.clear();
    }
}

mod ownership;
mod respond;
use ownership::Ownership;
pub use respond::{
    DropReason, RESPONDER_RECV_BUFFER, arp_request_frame, arp_response, ndp_response,
};
use respond::{Protocol, Responder};

#[cfg(test)]
mod tests;
