//! The external host's L2 prober: broadcasts ARP who-has (IPv4) or
//! neighbor solicitations (IPv6) for one address at a fixed rate from a
//! raw socket in the external host's namespace, and records every answer
//! of every round with its MAC and time - two nodes answering one
//! question are two MACs, which a resolver such as arping (it stops at
//! the first answer) never shows. Frames are built and parsed with
//! metallb-rs's own ARP/NDP codecs.
//!
//! [`Prober::window`] probes for a while and returns a [`Window`]; the
//! verdicts (only X, silent, longest split and silent stretches) live in
//! [`window`].

pub mod window;

pub use window::{Reply, Round, Stretch, Window};

use crate::link::{self, Link};
use anyhow::{Context, Result};
use metallb_rs::net::arp::{Arp, Op};
use metallb_rs::net::ethernet::{ETHERTYPE_ARP, ETHERTYPE_IPV6, Frame, Mac};
use metallb_rs::net::ndp::{self, Message};
use metallb_rs::net::packet::PacketType;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

/// Time between two questions: ten a second, fine enough to time a
/// split stretch against the bounds in seconds the specs check, and long
/// enough for an answer to arrive within its own round.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// Where the questions come from on the probed link.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The interface's IPv4 address (ARP's sender).
    V4(Ipv4Addr),
    /// The interface's link-local address (the solicitation's source).
    V6(Ipv6Addr),
}

/// Asks who has one address, on one link.
#[derive(Debug)]
pub struct Prober {
    link: Link,
    target: IpAddr,
    mac: Mac,
    source: Source,
    interval: Duration,
}

impl Prober {
    /// A prober for `target` on interface `iface` of network namespace
    /// `netns` (`None`: this process's). The interface needs an IPv4
    /// address to ask for an IPv4 target, a link-local one for IPv6.
    pub fn open(netns: Option<&str>, iface: &str, target: IpAddr) -> Result<Self> {
        let ethertype = if target.is_ipv4() {
            ETHERTYPE_ARP
        } else {
            ETHERTYPE_IPV6
        };
        let link = link::open(netns, iface, ethertype)?;
        let mac = link
            .iface
            .mac
            .with_context(|| format!("{iface} has no MAC address"))?;
        let source = match target {
            IpAddr::V4(_) => Source::V4(
                link.iface
                    .addresses
                    .iter()
                    .find_map(|a| match a {
                        IpAddr::V4(v4) => Some(*v4),
                        IpAddr::V6(_) => None,
                    })
                    .with_context(|| format!("{iface} has no IPv4 address to ask ARP from"))?,
            ),
            IpAddr::V6(_) => Source::V6(link.iface.link_local.with_context(|| {
                format!("{iface} has no IPv6 link-local address to solicit from")
            })?),
        };
        Ok(Self {
            link,
            target,
            mac,
            source,
            interval: INTERVAL,
        })
    }

    /// The prober of the external host for `target` on the nodes' network
    /// `node_iface` (`eth0`, `eth1`) of the cluster under test.
    pub fn for_cluster(
        cluster: &dyn devenv::cluster::Cluster,
        target: IpAddr,
        node_iface: &str,
    ) -> Result<Self> {
        let iface = cluster.external_interface(node_iface)?;
        let netns = cluster.external_netns()?;
        Self::open(netns.as_deref(), &iface, target)
            .with_context(|| format!("probing {target} on the external host's {iface}"))
    }

    /// The address asked about.
    pub fn target(&self) -> IpAddr {
        self.target
    }

    /// Asks every [`INTERVAL`] for `length` (at least one round) and
    /// returns what answered.
    pub fn window(&self, length: Duration) -> Result<Window> {
        let count = (length.as_nanos() / self.interval.as_nanos()).max(1);
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        self.link.drain();
        self.link.runtime.block_on(self.rounds(count))
    }

    async fn rounds(&self, count: usize) -> Result<Window> {
        let question = self.question();
        let mut buf = vec![0u8; 65536];
        let start = Instant::now();
        let mut rounds = Vec::with_capacity(count);
        for i in 0..count {
            let n = u32::try_from(i).unwrap_or(u32::MAX);
            // A round late because the machine is busy starts at once.
            tokio::time::sleep_until((start + self.interval * n).into()).await;
            let sent = start.elapsed();
            self.link
                .socket
                .send(&question)
                .await
                .with_context(|| format!("sending a question for {}", self.target))?;
            let next = (start + self.interval * (n + 1)).max(Instant::now() + self.interval / 2);
            let mut replies = Vec::new();
            loop {
                let received =
                    tokio::time::timeout_at(next.into(), self.link.socket.recv(&mut buf)).await;
                let (len, kind) = match received {
                    Err(_) => break,
                    Ok(r) => r.context("reading the raw socket")?,
                };
                if kind == PacketType::Outgoing {
                    continue;
                }
                if let Some(mac) = self.answer(&buf[..len]) {
                    replies.push(Reply {
                        mac,
                        at: start.elapsed(),
                    });
                }
            }
            rounds.push(Round { sent, replies });
        }
        Ok(Window {
            target: self.target,
            interval: self.interval,
            rounds,
        })
    }

    /// The broadcast question: a who-has, or a solicitation to the
    /// target's solicited-node group with our MAC as source link-layer
    /// address.
    fn question(&self) -> Vec<u8> {
        question(self.mac, self.source, self.target)
    }

    /// The MAC an answer to our question gives for the target, if
    /// `frame` is one.
    fn answer(&self, frame: &[u8]) -> Option<Mac> {
        answer(self.mac, self.source, self.target, frame)
    }
}

fn question(mac: Mac, source: Source, target: IpAddr) -> Vec<u8> {
    match (source, target) {
        (Source::V4(spa), IpAddr::V4(tpa)) => Arp {
            op: Op::Request,
            sha: mac,
            spa,
            tha: Mac::ZERO,
            tpa,
        }
        .frame(Mac::BROADCAST, mac),
        (Source::V6(src), IpAddr::V6(target)) => {
            let group = ndp::solicited_node(target);
            ndp::Packet {
                src,
                dst: group,
                msg: Message::NeighborSolicitation {
                    target,
                    source_ll: Some(mac),
                },
            }
            .frame(ndp::multicast_mac(group), mac)
        }
        // `open` picks the source from the target's family.
        _ => Vec::new(),
    }
}

/// An answer to us about `target`: an ARP reply from the target's
/// address to ours, or a solicited advertisement for the target sent to
/// our source address (its target link-layer option, else the frame's
/// source MAC). Gratuitous announcements are not answers.
fn answer(mac: Mac, source: Source, target: IpAddr, frame: &[u8]) -> Option<Mac> {
    let f = Frame::parse(frame).ok()?;
    match (source, target) {
        (Source::V4(ours), IpAddr::V4(target)) => {
            if f.ethertype != ETHERTYPE_ARP {
                return None;
            }
            let a = Arp::parse(f.payload).ok()?;
            (a.op == Op::Reply && a.spa == target && a.tha == mac && a.tpa == ours).then_some(a.sha)
        }
        (Source::V6(ours), IpAddr::V6(target)) => {
            if f.ethertype != ETHERTYPE_IPV6 {
                return None;
            }
            let p = ndp::Packet::parse(f.payload).ok()?;
            match p.msg {
                Message::NeighborAdvertisement {
                    flags,
                    target: t,
                    target_ll,
                } if t == target && flags.solicited && p.dst == ours => {
                    Some(target_ll.unwrap_or(f.src))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
