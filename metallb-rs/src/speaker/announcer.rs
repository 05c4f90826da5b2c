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
use crate::net::ethernet::{ETHERTYPE_ARP, ETHERTYPE_IPV6, Frame, Mac};
use crate::net::iface::Eligible;
use crate::net::packet::{PacketSocket, PacketType};
use crate::net::{arp, ndp};
use crate::service::ServiceKey;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;
use tokio::task::JoinHandle;

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
        self.ips.get(&ip).map(|i| match i {
            Interfaces::All => true,
            Interfaces::Named(n) => n.contains(iface),
        })
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

/// One interface's responders.
struct Responder {
    iface: Eligible,
    arp: Option<Arc<PacketSocket>>,
    ndp: Option<Arc<PacketSocket>>,
    tasks: Vec<JoinHandle<()>>,
    /// Solicited-node multicast MACs joined, with the addresses needing each.
    groups: BTreeMap<Mac, BTreeSet<Ipv6Addr>>,
}

impl std::ops::Drop for Responder {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The layer 2 announcer of this node.
pub struct Announcer {
    table: SharedTable,
    services: BTreeMap<ServiceKey, (Vec<IpAddr>, Interfaces)>,
    responders: BTreeMap<String, Responder>,
    eligible: Vec<Eligible>,
    garp: Schedule,
    metrics: Layer2Metrics,
}

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcer")
            .field("services", &self.services.keys().collect::<Vec<_>>())
            .field("interfaces", &self.responders.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Announcer {
    /// An announcer with no addresses and no interfaces yet.
    pub fn new(metrics: Layer2Metrics) -> Self {
        Self {
            table: SharedTable::default(),
            services: BTreeMap::new(),
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
        if self.services.get(service) == Some(&entry) {
            // Announcing again keeps the unsolicited announcements going,
            // as upstream's SetBalancer does on every call.
            let now = Instant::now();
            for ip in ips {
                self.garp.trigger(*ip, now);
            }
            return Ok(Some(entry.0));
        }
        let before = self.services.insert(service.clone(), entry);
        self.rebuild(Instant::now()).await;
        Ok(before.map(|(ips, _)| ips))
    }

    /// Stops announcing for `service` (its addresses stay announced while
    /// another service uses them); returns the addresses it announced.
    pub async fn withdraw(&mut self, service: &ServiceKey) -> Option<Vec<IpAddr>> {
        let before = self.services.remove(service)?;
        self.rebuild(Instant::now()).await;
        Some(before.0)
    }

    /// Services announced.
    pub fn services(&self) -> impl Iterator<Item = &ServiceKey> {
        self.services.keys()
    }

    /// Recomputes the table from the services; triggers announcements
    /// for addresses that are new or moved to other interfaces.
    async fn rebuild(&mut self, now: Instant) {
        let mut ips: HashMap<IpAddr, Interfaces> = HashMap::new();
        for (addrs, ifaces) in self.services.values() {
            for ip in addrs {
                let merged = match ips.remove(ip) {
                    Some(prev) => prev.union(ifaces.clone()),
                    None => ifaces.clone(),
                };
                ips.insert(*ip, merged);
            }
        }
        {
            let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
            for (ip, ifaces) in &ips {
                if table.ips.get(ip) != Some(ifaces) {
                    self.garp.trigger(*ip, now);
                }
            }
            for ip in table.ips.keys() {
                if !ips.contains_key(ip) {
                    self.garp.remove(*ip);
                }
            }
            table.ips = ips;
        }
        self.sync_groups();
        self.send_due(now).await;
    }

    /// Joins/leaves solicited-node groups so each interface receives the
    /// solicitations for the IPv6 addresses it announces.
    fn sync_groups(&mut self) {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        for r in self.responders.values_mut() {
            let Some(sock) = &r.ndp else { continue };
            let mut wanted: BTreeMap<Mac, BTreeSet<Ipv6Addr>> = BTreeMap::new();
            for (ip, _) in table
                .ips
                .iter()
                .filter(|(ip, _)| table.answers(**ip, &r.iface.name) == Some(true))
            {
                if let IpAddr::V6(v6) = ip {
                    wanted
                        .entry(ndp::multicast_mac(ndp::solicited_node(*v6)))
                        .or_default()
                        .insert(*v6);
                }
            }
            for mac in wanted.keys().filter(|m| !r.groups.contains_key(*m)) {
                if let Err(e) = sock.join_multicast(*mac) {
                    tracing::warn!(interface = %r.iface.name, group = %mac, error = %e, "could not join multicast group");
                }
            }
            for mac in r.groups.keys().filter(|m| !wanted.contains_key(*m)) {
                if let Err(e) = sock.leave_multicast(*mac) {
                    tracing::debug!(interface = %r.iface.name, group = %mac, error = %e, "could not leave multicast group");
                }
            }
            r.groups = wanted;
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
                let included = match &ifaces {
                    Interfaces::All => true,
                    Interfaces::Named(n) => n.contains(&r.iface.name),
                };
                if !included {
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
                    || r.tasks.iter().any(JoinHandle::is_finished)
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
        self.sync_groups();
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

    fn start(&self, e: &Eligible) -> std::io::Result<Responder> {
        let mut r = Responder {
            iface: e.clone(),
            arp: None,
            ndp: None,
            tasks: Vec::new(),
            groups: BTreeMap::new(),
        };
        if e.arp {
            let sock = Arc::new(responder_socket(e, ETHERTYPE_ARP)?);
            r.tasks.push(tokio::spawn(arp_responder(
                e.clone(),
                sock.clone(),
                self.table.clone(),
                self.metrics.clone(),
            )));
            r.arp = Some(sock);
        }
        if e.ndp.is_some() {
            let sock = Arc::new(responder_socket(e, ETHERTYPE_IPV6)?);
            r.tasks.push(tokio::spawn(ndp_responder(
                e.clone(),
                sock.clone(),
                self.table.clone(),
                self.metrics.clone(),
            )));
            r.ndp = Some(sock);
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
        self.services.clear();
        self.responders.clear();
    }
}

/// The receive buffer a responder asks for. A burst of requests (a
/// switch flooding after a failover, a scan, thousands of clients whose
/// entries expire together) queues here while the responder catches up;
/// at the default (about 200 KiB, some 200 frames) the rest of a burst
/// was dropped by the kernel. Granted in full with CAP_NET_ADMIN, else up
/// to `net.core.rmem_max`; the kernel charges only what is queued.
pub const RESPONDER_RECV_BUFFER: usize = 8 << 20;

/// A responder's socket on `e` for `ethertype`, with the larger buffer.
fn responder_socket(e: &Eligible, ethertype: u16) -> std::io::Result<PacketSocket> {
    let sock = PacketSocket::open(e.index, ethertype)?;
    if let Err(err) = sock.set_recv_buffer(RESPONDER_RECV_BUFFER) {
        tracing::warn!(interface = %e.name, error = %err, "could not enlarge the responder's receive buffer; bursts of requests may be dropped");
    }
    tracing::debug!(interface = %e.name, bytes = sock.recv_buffer().unwrap_or(0), "responder receive buffer");
    Ok(sock)
}

/// Why a frame was not answered (upstream's drop reasons, and the
/// kernel's: the receive buffer was full).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Malformed.
    Error,
    /// An ARP reply, not a request.
    ArpReply,
    /// Not a neighbor solicitation.
    MessageType,
    /// Addressed to another host.
    EthernetDestination,
    /// For an address this node does not announce.
    AnnounceIp,
    /// For an address announced on other interfaces.
    NotMatchInterface,
    /// Discarded by the kernel before the responder read it: the
    /// socket's receive buffer was full.
    ReceiveBufferFull,
}

impl DropReason {
    fn label(self) -> &'static str {
        match self {
            DropReason::Error => "Error",
            DropReason::ArpReply => "ARPReply",
            DropReason::MessageType => "MessageType",
            DropReason::EthernetDestination => "EthernetDestination",
            DropReason::AnnounceIp => "AnnounceIP",
            DropReason::NotMatchInterface => "NotMatchInterface",
            DropReason::ReceiveBufferFull => "ReceiveBufferFull",
        }
    }
}

/// What to do with one received ARP frame (pure).
pub fn arp_response(
    frame: &[u8],
    iface: &str,
    mac: Mac,
    owned: impl Fn(IpAddr, &str) -> Option<bool>,
) -> Result<(IpAddr, Vec<u8>), DropReason> {
    let f = Frame::parse(frame).map_err(|_| DropReason::Error)?;
    let req = arp::Arp::parse(f.payload).map_err(|_| DropReason::Error)?;
    if req.op != arp::Op::Request {
        return Err(DropReason::ArpReply);
    }
    if f.dst != Mac::BROADCAST && f.dst != mac {
        return Err(DropReason::EthernetDestination);
    }
    let ip = IpAddr::V4(req.tpa);
    match owned(ip, iface) {
        None => Err(DropReason::AnnounceIp),
        Some(false) => Err(DropReason::NotMatchInterface),
        Some(true) => Ok((ip, req.reply(mac).frame(req.sha, mac))),
    }
}

/// What to do with one received IPv6 frame (pure). Solicitations without
/// a source link-layer option (unicast NUD probes) are answered to the
/// frame's source MAC (upstream drops them: bug #2920).
pub fn ndp_response(
    frame: &[u8],
    iface: &str,
    mac: Mac,
    owned: impl Fn(IpAddr, &str) -> Option<bool>,
) -> Result<(IpAddr, Vec<u8>), DropReason> {
    let f = Frame::parse(frame).map_err(|_| DropReason::Error)?;
    let pkt = match ndp::Packet::parse(f.payload) {
        Ok(p) => p,
        Err(ndp::NdpError::NotNdp) => return Err(DropReason::MessageType),
        Err(ndp::NdpError::Parse(_)) => return Err(DropReason::Error),
    };
    let ndp::Message::NeighborSolicitation { target, source_ll } = pkt.msg else {
        return Err(DropReason::MessageType);
    };
    if f.dst != mac && !f.dst.is_multicast() {
        return Err(DropReason::EthernetDestination);
    }
    let ip = IpAddr::V6(target);
    match owned(ip, iface) {
        None => return Err(DropReason::AnnounceIp),
        Some(false) => return Err(DropReason::NotMatchInterface),
        Some(true) => {}
    }
    let dad = pkt.src.is_unspecified();
    // From the announced address itself, as a host answering for its own
    // address does (upstream answers from the link-local address, which
    // tools such as ndisc6 ignore when they asked for a global address).
    let na = ndp::Packet {
        src: target,
        dst: if dad { ndp::ALL_NODES } else { pkt.src },
        msg: ndp::Message::NeighborAdvertisement {
            flags: ndp::Flags {
                router: false,
                solicited: !dad,
                override_: dad,
            },
            target,
            target_ll: Some(mac),
        },
    };
    let dst_mac = if dad {
        ndp::multicast_mac(ndp::ALL_NODES)
    } else {
        source_ll.unwrap_or(f.src)
    };
    Ok((ip, na.frame(dst_mac, mac)))
}

fn owned_fn(table: &SharedTable) -> impl Fn(IpAddr, &str) -> Option<bool> + '_ {
    move |ip, iface| {
        table
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .answers(ip, iface)
    }
}

/// How many addresses' counters a responder keeps at hand.
const COUNTERS_CACHED: usize = 4096;

/// How often a responder reads its socket's drop counter.
const DROPS_READ_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The counters one announced address moves, looked up once per address
/// rather than once per frame (a burst is thousands of frames for one).
struct IpCounters {
    received: prometheus::IntCounter,
    sent: prometheus::IntCounter,
}

async fn respond_loop(
    iface: Eligible,
    sock: Arc<PacketSocket>,
    table: SharedTable,
    metrics: Layer2Metrics,
    kind: &'static str,
    decide: impl Fn(&[u8], &SharedTable) -> Result<(IpAddr, Vec<u8>), DropReason>,
) {
    let mut buf = vec![0u8; 2048];
    let mut counters: HashMap<IpAddr, IpCounters> = HashMap::new();
    let mut dropped: HashMap<DropReason, prometheus::IntCounter> = HashMap::new();
    let overflow = metrics
        .dropped
        .with_label_values(&[&iface.name, DropReason::ReceiveBufferFull.label()]);
    let mut drops_tick = tokio::time::interval(DROPS_READ_EVERY);
    drops_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let received = tokio::select! {
            r = sock.recv(&mut buf) => r,
            _ = drops_tick.tick() => {
                match sock.take_drops() {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::debug!(interface = %iface.name, frames = n, "{kind} frames dropped: receive buffer full");
                        overflow.inc_by(n);
                    }
                    Err(e) => tracing::debug!(interface = %iface.name, error = %e, "reading the {kind} socket's drop counter"),
                }
                continue;
            }
        };
        let (n, pkt_type) = match received {
            Ok(r) => r,
            // The link went down under us: the socket stays valid and
            // works again once the link is back (a responder that quit
            // here stayed silent after the link returned).
            Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => {
                tracing::debug!(interface = %iface.name, "{kind} responder: link down; waiting");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => {
                tracing::warn!(interface = %iface.name, error = %e, "{kind} responder stopped; the interface is rescanned");
                return;
            }
        };
        if pkt_type == PacketType::Outgoing || pkt_type == PacketType::OtherHost {
            continue;
        }
        match decide(&buf[..n], &table) {
            Ok((ip, reply)) => {
                if counters.len() >= COUNTERS_CACHED {
                    // Addresses come and go: start afresh rather than
                    // keep handles of addresses long gone.
                    counters.clear();
                }
                let c = counters.entry(ip).or_insert_with(|| {
                    let label = ip.to_string();
                    IpCounters {
                        received: metrics.requests_received.with_label_values(&[&label]),
                        sent: metrics.responses_sent.with_label_values(&[&label]),
                    }
                });
                c.received.inc();
                match sock.send(&reply).await {
                    Ok(()) => c.sent.inc(),
                    Err(e) => {
                        tracing::warn!(interface = %iface.name, %ip, error = %e, "could not send {kind} reply")
                    }
                }
            }
            Err(reason) => {
                if reason != DropReason::AnnounceIp && reason != DropReason::MessageType {
                    tracing::debug!(interface = %iface.name, reason = reason.label(), "{kind} frame dropped");
                }
                dropped
                    .entry(reason)
                    .or_insert_with(|| {
                        metrics
                            .dropped
                            .with_label_values(&[&iface.name, reason.label()])
                    })
                    .inc();
            }
        }
    }
}

async fn arp_responder(
    iface: Eligible,
    sock: Arc<PacketSocket>,
    table: SharedTable,
    metrics: Layer2Metrics,
) {
    let (name, mac) = (iface.name.clone(), iface.mac);
    respond_loop(iface, sock, table, metrics, "ARP", move |frame, table| {
        arp_response(frame, &name, mac, owned_fn(table))
    })
    .await;
}

async fn ndp_responder(
    iface: Eligible,
    sock: Arc<PacketSocket>,
    table: SharedTable,
    metrics: Layer2Metrics,
) {
    let (name, mac) = (iface.name.clone(), iface.mac);
    respond_loop(iface, sock, table, metrics, "NDP", move |frame, table| {
        ndp_response(frame, &name, mac, owned_fn(table))
    })
    .await;
}

/// Frames for tests and benchmarks: an ARP request from `from` for `ip`.
pub fn arp_request_frame(
    from_mac: Mac,
    from_ip: std::net::Ipv4Addr,
    ip: std::net::Ipv4Addr,
) -> Vec<u8> {
    arp::Arp {
        op: arp::Op::Request,
        sha: from_mac,
        spa: from_ip,
        tha: Mac::ZERO,
        tpa: ip,
    }
    .frame(Mac::BROADCAST, from_mac)
}

#[cfg(test)]
mod tests;
