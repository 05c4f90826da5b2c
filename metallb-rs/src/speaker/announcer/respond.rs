//! The responders: one thread per interface and protocol reading ARP
//! requests or neighbor solicitations from a packet socket and answering
//! those for addresses the ownership table says this node owns there.
//! Deciding an answer is pure ([`arp_response`], [`ndp_response`]); the
//! loop reads, answers and counts.
//!
//! Threads of their own, not tasks: a request wakes its responder
//! straight from the kernel's receive (no reactor, no runtime worker to
//! hand it to), and nothing else the speaker does - a long pass of its
//! loop, a burst of API work - can delay an answer.

use super::SharedTable;
use crate::metrics::Layer2Metrics;
use crate::net::ethernet::{Frame, Mac};
use crate::net::iface::Eligible;
use crate::net::packet::{BlockingPacketSocket, PacketType};
use crate::net::{arp, ndp};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

/// The receive buffer a responder asks for. A burst of requests (a
/// switch flooding after a failover, a scan, thousands of clients whose
/// entries expire together) queues here while the responder catches up;
/// at the default (about 200 KiB, some 200 frames) the rest of a burst
/// was dropped by the kernel. Granted in full with CAP_NET_ADMIN, else up
/// to `net.core.rmem_max`; the kernel charges only what is queued.
pub const RESPONDER_RECV_BUFFER: usize = 8 << 20;

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

pub(super) fn owned_fn(table: &SharedTable) -> impl Fn(IpAddr, &str) -> Option<bool> + '_ {
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
const DROPS_READ_EVERY: Duration = Duration::from_secs(1);

/// The longest a responder waits in one receive before it looks whether
/// it should stop: how long a stopped responder may linger.
const RECV_WAIT: Duration = Duration::from_millis(200);

/// A responder thread's stack: it decides one frame at a time.
const STACK: usize = 256 << 10;

/// The counters one announced address moves, looked up once per address
/// rather than once per frame (a burst is thousands of frames for one).
struct IpCounters {
    received: prometheus::IntCounter,
    sent: prometheus::IntCounter,
}

/// What a responder answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    /// ARP requests (IPv4).
    Arp,
    /// Neighbor solicitations (IPv6).
    Ndp,
}

impl Protocol {
    fn ethertype(self) -> u16 {
        match self {
            Protocol::Arp => crate::net::ethernet::ETHERTYPE_ARP,
            Protocol::Ndp => crate::net::ethernet::ETHERTYPE_IPV6,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Protocol::Arp => "ARP",
            Protocol::Ndp => "NDP",
        }
    }
}

/// A running responder; stops (within [`RECV_WAIT`]) when dropped.
pub(super) struct Responder {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Responder {
    /// Opens `protocol`'s socket on `iface` (with the larger buffer) and
    /// answers on a thread of its own.
    pub(super) fn start(
        protocol: Protocol,
        iface: &Eligible,
        table: SharedTable,
        metrics: Layer2Metrics,
    ) -> std::io::Result<Self> {
        let sock = BlockingPacketSocket::open(iface.index, protocol.ethertype(), RECV_WAIT)?;
        if let Err(err) = sock.set_recv_buffer(RESPONDER_RECV_BUFFER) {
            tracing::warn!(interface = %iface.name, error = %err, "could not enlarge the responder's receive buffer; bursts of requests may be dropped");
        }
        tracing::debug!(interface = %iface.name, bytes = sock.recv_buffer().unwrap_or(0), "{} responder receive buffer", protocol.name());
        let stop = Arc::new(AtomicBool::new(false));
        let iface = iface.clone();
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{}-{}", protocol.name().to_lowercase(), iface.name))
            .stack_size(STACK)
            .spawn(move || respond_loop(protocol, &iface, &sock, &table, &metrics, &stopped))?;
        Ok(Self { stop, thread })
    }

    /// It stopped by itself (its socket failed): start it again.
    pub(super) fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn respond_loop(
    protocol: Protocol,
    iface: &Eligible,
    sock: &BlockingPacketSocket,
    table: &SharedTable,
    metrics: &Layer2Metrics,
    stop: &AtomicBool,
) {
    let kind = protocol.name();
    let (name, mac) = (iface.name.as_str(), iface.mac);
    let mut buf = vec![0u8; 2048];
    let mut counters: HashMap<IpAddr, IpCounters> = HashMap::new();
    let mut dropped: HashMap<DropReason, prometheus::IntCounter> = HashMap::new();
    let overflow = metrics
        .dropped
        .with_label_values(&[name, DropReason::ReceiveBufferFull.label()]);
    let mut drops_read = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if drops_read.elapsed() >= DROPS_READ_EVERY {
            drops_read = Instant::now();
            match sock.take_drops() {
                Ok(0) => {}
                Ok(n) => {
                    tracing::debug!(interface = %name, frames = n, "{kind} frames dropped: receive buffer full");
                    overflow.inc_by(n);
                }
                Err(e) => {
                    tracing::debug!(interface = %name, error = %e, "reading the {kind} socket's drop counter")
                }
            }
        }
        let (n, pkt_type) = match sock.recv(&mut buf) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            // The link went down under us: the socket stays valid and
            // works again once the link is back (a responder that quit
            // here stayed silent after the link returned).
            Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => {
                tracing::debug!(interface = %name, "{kind} responder: link down; waiting");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            Err(e) => {
                tracing::warn!(interface = %name, error = %e, "{kind} responder stopped; the interface is rescanned");
                return;
            }
        };
        if pkt_type == PacketType::Outgoing || pkt_type == PacketType::OtherHost {
            continue;
        }
        let decided = match protocol {
            Protocol::Arp => arp_response(&buf[..n], name, mac, owned_fn(table)),
            Protocol::Ndp => ndp_response(&buf[..n], name, mac, owned_fn(table)),
        };
        match decided {
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
                match sock.send(&reply) {
                    Ok(()) => c.sent.inc(),
                    Err(e) => {
                        tracing::warn!(interface = %name, %ip, error = %e, "could not send {kind} reply")
                    }
                }
            }
            Err(reason) => {
                if reason != DropReason::AnnounceIp && reason != DropReason::MessageType {
                    tracing::debug!(interface = %name, reason = reason.label(), "{kind} frame dropped");
                }
                dropped
                    .entry(reason)
                    .or_insert_with(|| metrics.dropped.with_label_values(&[name, reason.label()]))
                    .inc();
            }
        }
    }
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
