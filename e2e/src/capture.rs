//! What crosses the BGP router's link on the BGP port, seen with a raw
//! socket in the router's namespace and decoded with metallb-rs's own
//! BGP codec: for specs that must see the wire rather than what the
//! router made of it - that a speaker dialled (its SYNs), that an
//! attribute was never sent (FRR ignores LOCAL_PREF from an external
//! peer, so its table cannot tell), that a NOTIFICATION came *from* the
//! speaker and was not the router's own.
//!
//! [`Capture`] records TCP segments to or from port 179 (IPv4 and IPv6
//! without extension headers) on a thread of its own; [`messages`]
//! reassembles one direction of each connection and decodes it. Both are
//! pure but for the socket.

use crate::link::{self, ETH_P_ALL};
use anyhow::{Context, Result};
use metallb_rs::net::bgp::{self, Message, Open};
use metallb_rs::net::ethernet::Frame;
use metallb_rs::net::packet::PacketType;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const TCP: u8 = 6;

/// One TCP segment to or from the BGP port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// When it was seen (from the capture's start).
    pub at: Duration,
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// Sequence number.
    pub seq: u32,
    /// SYN set.
    pub syn: bool,
    /// ACK set.
    pub ack: bool,
    /// The data it carries.
    pub payload: Vec<u8>,
}

/// Parses an Ethernet frame as a TCP segment to or from port `port`.
pub fn parse_segment(frame: &[u8], port: u16, at: Duration) -> Option<Segment> {
    let f = Frame::parse(frame).ok()?;
    let (src, dst, tcp) = match f.ethertype {
        ETHERTYPE_IPV4 => {
            let ip = f.payload;
            let ihl = usize::from(*ip.first()? & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
            if ip[0] >> 4 != 4 || *ip.get(9)? != TCP || ihl < 20 || total < ihl {
                return None;
            }
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(*ip.get(16)?, ip[17], ip[18], *ip.get(19)?);
            (IpAddr::V4(src), IpAddr::V4(dst), ip.get(ihl..total)?)
        }
        ETHERTYPE_IPV6 => {
            let ip = f.payload;
            let len = usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
            if ip[0] >> 4 != 6 || *ip.get(6)? != TCP {
                return None;
            }
            let addr = |at: usize| -> Option<Ipv6Addr> {
                let o: [u8; 16] = ip.get(at..at + 16)?.try_into().ok()?;
                Some(Ipv6Addr::from(o))
            };
            (
                IpAddr::V6(addr(8)?),
                IpAddr::V6(addr(24)?),
                ip.get(40..40 + len)?,
            )
        }
        _ => return None,
    };
    let sport = u16::from_be_bytes([*tcp.first()?, *tcp.get(1)?]);
    let dport = u16::from_be_bytes([*tcp.get(2)?, *tcp.get(3)?]);
    if sport != port && dport != port {
        return None;
    }
    let seq = u32::from_be_bytes(tcp.get(4..8)?.try_into().ok()?);
    let offset = usize::from(*tcp.get(12)? >> 4) * 4;
    let flags = *tcp.get(13)?;
    Some(Segment {
        at,
        src: SocketAddr::new(src, sport),
        dst: SocketAddr::new(dst, dport),
        seq,
        syn: flags & 0x02 != 0,
        ack: flags & 0x10 != 0,
        payload: tcp.get(offset..)?.to_vec(),
    })
}

/// A decoded BGP message and when the segment completing it was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// When.
    pub at: Duration,
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// The message.
    pub msg: Message,
}

/// One direction of one connection: its bytes in order from the first
/// after the SYN (or the lowest sequence number seen) up to the first
/// gap, each with the time its segment was seen.
fn stream(segments: &[&Segment]) -> Vec<(u8, Duration)> {
    let start = segments
        .iter()
        .find(|s| s.syn)
        .map(|s| s.seq.wrapping_add(1))
        .or_else(|| segments.iter().map(|s| s.seq).min())
        .unwrap_or(0);
    let mut by_offset: BTreeMap<u32, &Segment> = BTreeMap::new();
    for s in segments.iter().filter(|s| !s.payload.is_empty()) {
        by_offset.entry(s.seq.wrapping_sub(start)).or_insert(s);
    }
    let mut out: Vec<(u8, Duration)> = Vec::new();
    for (offset, s) in by_offset {
        let next = u32::try_from(out.len()).unwrap_or(u32::MAX);
        if offset > next {
            break;
        }
        let skip = usize::try_from(next - offset).unwrap_or(usize::MAX);
        out.extend(s.payload.iter().skip(skip).map(|b| (*b, s.at)));
    }
    out
}

/// Every BGP message sent from `from` to `to` (addresses; any ports)
/// in `segments`, per connection in the order sent. Decoding stops at
/// the first gap or malformed message of a connection.
pub fn messages(segments: &[Segment], from: IpAddr, to: IpAddr) -> Vec<Seen> {
    let mut flows: BTreeMap<(SocketAddr, SocketAddr), Vec<&Segment>> = BTreeMap::new();
    for s in segments {
        flows.entry((s.src, s.dst)).or_default().push(s);
    }
    let opens: BTreeMap<(SocketAddr, SocketAddr), Open> = flows
        .iter()
        .filter_map(|(k, segs)| {
            let bytes: Vec<u8> = stream(segs).into_iter().map(|(b, _)| b).collect();
            let len = usize::from(u16::from_be_bytes([*bytes.get(16)?, *bytes.get(17)?]));
            match bgp::decode(bytes.get(..len)?, &bgp::Context::default()) {
                Ok(Message::Open(o)) => Some((*k, o)),
                _ => None,
            }
        })
        .collect();
    let mut out = Vec::new();
    for ((src, dst), segs) in &flows {
        if src.ip() != from || dst.ip() != to {
            continue;
        }
        let four = |k: &(SocketAddr, SocketAddr)| opens.get(k).is_none_or(Open::four_octet_as);
        let ctx = bgp::Context {
            four_octet_as: four(&(*src, *dst)) && four(&(*dst, *src)),
        };
        let bytes = stream(segs);
        let mut rest = bytes.as_slice();
        while rest.len() >= bgp::HEADER_LEN {
            let len = usize::from(u16::from_be_bytes([rest[16].0, rest[17].0]));
            if len < bgp::HEADER_LEN || len > rest.len() {
                break;
            }
            let raw: Vec<u8> = rest[..len].iter().map(|(b, _)| *b).collect();
            let Ok(msg) = bgp::decode(&raw, &ctx) else {
                break;
            };
            out.push(Seen {
                at: rest[len - 1].1,
                src: *src,
                dst: *dst,
                msg,
            });
            rest = &rest[len..];
        }
    }
    out
}

/// A running capture of the BGP port on one link.
pub struct Capture {
    stop: Arc<AtomicBool>,
    segments: Arc<Mutex<Vec<Segment>>>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl Capture {
    /// Starts recording segments to or from the BGP port on interface
    /// `iface` of network namespace `netns`; recording has begun when
    /// this returns.
    pub fn start(netns: &str, iface: &str) -> Result<Self> {
        let link = link::open(Some(netns), iface, ETH_P_ALL)
            .with_context(|| format!("capturing BGP on {iface} in {netns}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let segments = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, segments) = (stop.clone(), segments.clone());
            std::thread::Builder::new()
                .name("bgp-capture".into())
                .spawn(move || record(&link, &stop, &segments))
                .context("starting the capture thread")?
        };
        Ok(Self {
            stop,
            segments,
            thread: Some(thread),
        })
    }

    /// What was recorded so far.
    pub fn segments(&self) -> Vec<Segment> {
        self.segments
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops recording; everything recorded.
    pub fn finish(mut self) -> Result<Vec<Segment>> {
        self.stop_thread()?;
        Ok(self.segments())
    }

    fn stop_thread(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => Ok(()),
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Err(e) = self.stop_thread() {
            eprintln!("e2e: the BGP capture failed: {e:#}");
        }
    }
}

/// Reads frames until `stop`, keeping segments of the BGP port.
fn record(link: &link::Link, stop: &AtomicBool, segments: &Mutex<Vec<Segment>>) -> Result<()> {
    let start = Instant::now();
    let mut buf = vec![0u8; 65536];
    link.runtime.block_on(async {
        while !stop.load(Ordering::SeqCst) {
            let read =
                tokio::time::timeout(Duration::from_millis(100), link.socket.recv(&mut buf)).await;
            let Ok(read) = read else { continue };
            let (len, kind) = read.context("reading the capture socket")?;
            // A frame sent through the bridge's other ports is not ours.
            if kind == PacketType::OtherHost {
                continue;
            }
            if let Some(s) = parse_segment(&buf[..len], bgp::PORT, start.elapsed()) {
                segments
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(s);
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests;
