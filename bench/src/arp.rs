//! `cargo xtask bench arp`: ARP reply latency and replies per second for
//! a VIP answered by the metallb-rs speaker, against the announcing
//! node's own address answered by its kernel - same node, same link, same
//! run. Measured from the external host with a raw socket of our own.

use super::{percentile, with_service};
use anyhow::{Context, Result, bail};
use devenv::cluster::Cluster;
use devenv::lab::cluster::LabCluster;
use metallb_rs::net::arp::{Arp, Op};
use metallb_rs::net::ethernet::{ETHERTYPE_ARP, Frame, Mac};
use metallb_rs::net::packet::{PacketSocket, PacketType};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

/// What was measured for one target address.
#[derive(Debug, Clone)]
pub struct Figures {
    /// What answered.
    pub label: String,
    /// Median request-to-reply time.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Replies per second under a burst of back-to-back requests.
    pub replies_per_s: f64,
    /// Requests in the burst / replies received.
    pub burst: (usize, usize),
    /// Replier's MAC.
    pub mac: Mac,
    /// Requests the replier's receive buffer overflowed with, as it
    /// reports them (the speaker only; the kernel answers in its receive
    /// path and buffers nothing).
    pub socket_drops: Option<f64>,
}

/// ARP requests and replies on the external host's eth0 through a raw
/// socket of our own (the kernel's neighbour cache plays no part).
pub(super) struct Prober {
    sock: PacketSocket,
    mac: Mac,
    ip: Ipv4Addr,
}

impl Prober {
    /// A prober on this network namespace's eth0 (call inside the external
    /// host's namespace, with a tokio runtime).
    pub(super) fn on_eth0() -> Result<Self> {
        let eth0 = metallb_rs::net::iface::list()?
            .into_iter()
            .find(|i| i.name == "eth0")
            .context("the external host has no eth0")?;
        let ip = eth0
            .addresses
            .iter()
            .find_map(|a| match a {
                IpAddr::V4(v4) => Some(*v4),
                IpAddr::V6(_) => None,
            })
            .context("the external host's eth0 has no IPv4 address")?;
        let sock = PacketSocket::open(eth0.index, ETHERTYPE_ARP)?;
        sock.set_recv_buffer(16 << 20)?;
        Ok(Prober {
            sock,
            mac: eth0.mac.context("eth0 has no MAC")?,
            ip,
        })
    }

    /// Asks once who has `target`; the MAC that answers within `wait`.
    pub(super) async fn resolve(&self, target: Ipv4Addr, wait: Duration) -> Result<Option<Mac>> {
        self.sock.send(&self.request(target)).await?;
        Ok(self.reply(target, tokio::time::Instant::now() + wait).await)
    }

    fn request(&self, target: Ipv4Addr) -> Vec<u8> {
        Arp {
            op: Op::Request,
            sha: self.mac,
            spa: self.ip,
            tha: Mac::ZERO,
            tpa: target,
        }
        .frame(Mac::BROADCAST, self.mac)
    }

    /// Waits for a reply from `target` until `deadline`: its MAC.
    async fn reply(&self, target: Ipv4Addr, deadline: tokio::time::Instant) -> Option<Mac> {
        let mut buf = [0u8; 256];
        loop {
            let (n, kind) = tokio::time::timeout_at(deadline, self.sock.recv(&mut buf))
                .await
                .ok()?
                .ok()?;
            if kind == PacketType::Outgoing {
                continue;
            }
            let Ok(f) = Frame::parse(&buf[..n]) else {
                continue;
            };
            if let Ok(a) = Arp::parse(f.payload)
                && a.op == Op::Reply
                && a.spa == target
            {
                return Some(a.sha);
            }
        }
    }

    async fn measure(
        &self,
        label: &str,
        target: Ipv4Addr,
        rounds: usize,
        burst: usize,
    ) -> Result<Figures> {
        let mut rtts = Vec::with_capacity(rounds);
        let mut mac = None;
        for _ in 0..rounds {
            let t0 = Instant::now();
            self.sock.send(&self.request(target)).await?;
            match self
                .reply(target, tokio::time::Instant::now() + Duration::from_secs(1))
                .await
            {
                Some(m) => {
                    rtts.push(t0.elapsed());
                    mac = Some(m);
                }
                None => bail!("{label} ({target}) did not answer within 1 s"),
            }
        }
        rtts.sort();
        // Burst: send back to back while counting replies; the rate is
        // replies over the time from the first send to the last reply.
        let frame = self.request(target);
        let start = Instant::now();
        let (sent, received, last) = {
            let count = async {
                let mut got = 0usize;
                let mut last = start;
                while self
                    .reply(
                        target,
                        tokio::time::Instant::now() + Duration::from_millis(500),
                    )
                    .await
                    .is_some()
                {
                    got += 1;
                    last = Instant::now();
                }
                (got, last)
            };
            let send = async {
                let mut sent = 0usize;
                for i in 0..burst {
                    if self.sock.send(&frame).await.is_ok() {
                        sent += 1;
                    }
                    // Let the receiver drain between small batches.
                    if i % 32 == 31 {
                        tokio::task::yield_now().await;
                    }
                }
                sent
            };
            let (sent, (got, last)) = tokio::join!(send, count);
            (sent, got, last)
        };
        let secs = last.duration_since(start).as_secs_f64().max(1e-6);
        Ok(Figures {
            label: label.to_owned(),
            p50: percentile(&rtts, 50.0),
            p99: percentile(&rtts, 99.0),
            replies_per_s: received as f64 / secs,
            burst: (sent, received),
            mac: mac.context("no reply")?,
            socket_drops: None,
        })
    }
}

/// Frames the speaker on `node` reports its responders' sockets lost
/// (the kernel's receive-buffer drops, read every second).
fn speaker_socket_drops(cluster: &LabCluster, node: &str) -> Result<f64> {
    let out = cluster.exec_on_node(
        node,
        &["curl", "-sS", "-m", "5", "http://127.0.0.1:9120/metrics"],
    )?;
    anyhow::ensure!(
        out.status.success(),
        "scraping the speaker on {node}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(super::metric_sum(
        &String::from_utf8_lossy(&out.stdout),
        "metallb_layer2_packets_dropped_total",
        &["reason=\"ReceiveBufferFull\""],
    ))
}

/// Runs the benchmark on `cluster` and prints the results.
pub fn run(cluster: &LabCluster, rounds: usize, burst: usize) -> Result<Vec<Figures>> {
    let figures = with_service(cluster, &["172.30.0.220-172.30.0.229"], "arp", |vip| {
        let ns = cluster.external_namespace().to_owned();
        let nodes = cluster.nodes();
        devenv::lab::enter::in_netns(&ns, || -> Result<Vec<Figures>> {
            devenv::runtime()?.block_on(async {
                let prober = Prober::on_eth0()?;
                // Wait for the announcement, then find the announcing node.
                let deadline = Instant::now() + Duration::from_secs(60);
                let mac = loop {
                    prober.sock.send(&prober.request(vip)).await?;
                    if let Some(m) = prober
                        .reply(
                            vip,
                            tokio::time::Instant::now() + Duration::from_millis(500),
                        )
                        .await
                    {
                        break m;
                    }
                    anyhow::ensure!(
                        Instant::now() < deadline,
                        "{vip} was not announced within 60 s"
                    );
                };
                let mut node_ip = None;
                for n in &nodes {
                    if let Some(IpAddr::V4(a)) = n.addresses.iter().find(|a| a.is_ipv4()) {
                        prober.sock.send(&prober.request(*a)).await?;
                        if prober
                            .reply(*a, tokio::time::Instant::now() + Duration::from_millis(500))
                            .await
                            == Some(mac)
                        {
                            node_ip = Some((n.name.clone(), *a));
                        }
                    }
                }
                let (node, addr) =
                    node_ip.context("no node's own address is answered with the VIP's MAC")?;
                let drops_before = speaker_socket_drops(cluster, &node)?;
                let mut speaker = prober
                    .measure(
                        &format!("VIP {vip} (metallb-rs speaker)"),
                        vip,
                        rounds,
                        burst,
                    )
                    .await?;
                // The speaker reads its sockets' drop counters every second.
                tokio::time::sleep(Duration::from_millis(1500)).await;
                speaker.socket_drops = Some(speaker_socket_drops(cluster, &node)? - drops_before);
                let kernel = prober
                    .measure(&format!("{addr} ({node}'s kernel)"), addr, rounds, burst)
                    .await?;
                Ok(vec![speaker, kernel])
            })
        })?
    })?;
    print(&figures);
    Ok(figures)
}

fn print(f: &[Figures]) {
    println!(
        "{:<44} {:>10} {:>10} {:>12} {:>14} {:>14}",
        "answered by", "p50", "p99", "replies/s", "burst got", "buffer drops"
    );
    for x in f {
        println!(
            "{:<44} {:>10.1?} {:>10.1?} {:>12.0} {:>14} {:>14}",
            x.label,
            x.p50,
            x.p99,
            x.replies_per_s,
            format!("{}/{}", x.burst.1, x.burst.0),
            x.socket_drops.map_or("-".to_owned(), |d| format!("{d:.0}"))
        );
    }
    if let [speaker, kernel] = f {
        println!(
            "ratio speaker/kernel: latency p50 {:.2}x, p99 {:.2}x, throughput {:.2}x",
            speaker.p50.as_secs_f64() / kernel.p50.as_secs_f64().max(1e-9),
            speaker.p99.as_secs_f64() / kernel.p99.as_secs_f64().max(1e-9),
            speaker.replies_per_s / kernel.replies_per_s.max(1e-9),
        );
    }
}
