//! Unnumbered peers: the router on an interface, found and told about us
//! the way FRR does it for `neighbor <interface> interface`. We send IPv6
//! Router Advertisements on the interface (FRR accepts an interface
//! neighbor only once it has heard that neighbor's advertisements) and
//! a Router Solicitation, and listen for the router's advertisements:
//! their link-local source, with the interface as scope, is the address
//! the session dials.
//!
//! [`Routers`] decides which router to dial from what was heard (pure,
//! time handed in); [`Discovery`] owns the raw ICMPv6 socket and its task,
//! which reopens the socket with backoff and jitter when it fails (the
//! interface missing or gone).

use crate::net::ndp::ALL_NODES;
use crate::net::ra;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often we advertise ourselves: FRR's interval on the interfaces of
/// its unnumbered neighbors.
pub const ADVERTISE_EVERY: Duration = Duration::from_secs(10);
/// The router lifetime we advertise: non-zero, or FRR ignores us, and
/// short (three intervals, the least RFC 4861 allows is one), so that a
/// host on the link that takes a default route from advertisements drops
/// it soon after the peer is removed.
pub const LIFETIME: Duration = Duration::from_secs(30);
/// How long a router stays a candidate after its last advertisement:
/// three of FRR's intervals.
pub const FORGET_AFTER: Duration = Duration::from_secs(30);

/// The routers heard on one interface. Pure.
#[derive(Debug, Default)]
pub struct Routers {
    heard: BTreeMap<Ipv6Addr, Instant>,
}

impl Routers {
    /// `router` advertised itself at `now`.
    pub fn heard(&mut self, router: Ipv6Addr, now: Instant) {
        self.heard.insert(router, now);
    }

    /// The router to dial at `now`: the lowest address heard within
    /// [`FORGET_AFTER`], so that every speaker picks the same one on a
    /// shared link and a second router does not move the session.
    pub fn current(&mut self, now: Instant) -> Option<Ipv6Addr> {
        self.heard
            .retain(|_, at| now.saturating_duration_since(*at) < FORGET_AFTER);
        self.heard.keys().next().copied()
    }
}

/// Discovery on one interface: a task beside the session's, ended when
/// this is dropped.
pub struct Discovery {
    router: watch::Receiver<Option<SocketAddrV6>>,
    task: tokio::task::JoinHandle<()>,
}

impl Discovery {
    /// Starts advertising on `interface` and listening for its router.
    pub fn start(interface: String) -> Discovery {
        let (tx, rx) = watch::channel(None);
        Discovery {
            router: rx,
            task: tokio::spawn(run(interface, tx)),
        }
    }

    /// The router's link-local address (port 0, scope the interface),
    /// waiting up to `wait` for one to be heard.
    pub async fn router(&mut self, wait: Duration) -> Option<SocketAddrV6> {
        let found = self.router.wait_for(Option::is_some);
        match tokio::time::timeout(wait, found).await {
            Ok(Ok(r)) => *r,
            _ => None,
        }
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(interface: String, tx: watch::Sender<Option<SocketAddrV6>>) {
    let mut retries = retries();
    loop {
        let e = advertise_and_listen(&interface, &tx).await;
        tx.send_replace(None);
        let delay = retries.next().unwrap_or(ADVERTISE_EVERY);
        tracing::warn!(interface, error = %e, retry_in = ?delay, "unnumbered BGP: router discovery failed");
        tokio::time::sleep(delay).await;
    }
}

/// The delays between attempts to reopen the socket, jittered.
fn retries() -> impl Iterator<Item = Duration> + Send {
    crate::k8s::queue::Backoff {
        first: Duration::from_secs(1),
        max: ADVERTISE_EVERY * 3,
    }
    .delays()
}

/// The raw ICMPv6 socket on `interface`, as a datagram socket tokio can
/// wait on: hop limit 255 (RFC 4861 drops Neighbor Discovery with any
/// other), our own multicast not looped back.
fn open(interface: &str) -> io::Result<(tokio::net::UdpSocket, u32)> {
    let ifindex = nix::net::if_::if_nametoindex(interface)
        .map_err(|e| io::Error::other(format!("interface {interface:?}: {e}")))?;
    let sock = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))?;
    sock.bind_device(Some(interface.as_bytes()))?;
    sock.set_multicast_if_v6(ifindex)?;
    sock.set_multicast_hops_v6(255)?;
    sock.set_unicast_hops_v6(255)?;
    sock.set_multicast_loop_v6(false)?;
    sock.set_nonblocking(true)?;
    // A raw socket reads and writes whole ICMPv6 messages through the
    // same recvfrom/sendto calls as a UDP one.
    let sock = tokio::net::UdpSocket::from_std(std::net::UdpSocket::from(sock))?;
    Ok((sock, ifindex))
}

/// Advertises every [`ADVERTISE_EVERY`] and publishes the router to dial
/// until the socket fails; returns why.
async fn advertise_and_listen(
    interface: &str,
    tx: &watch::Sender<Option<SocketAddrV6>>,
) -> io::Error {
    let (sock, ifindex) = match open(interface) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let to = |group| SocketAddr::V6(SocketAddrV6::new(group, 0, 0, ifindex));
    if let Err(e) = sock
        .send_to(&ra::router_solicitation(), to(ra::ALL_ROUTERS))
        .await
    {
        return e;
    }
    let advertisement = ra::router_advertisement(LIFETIME, None);
    let mut routers = Routers::default();
    let mut tick = tokio::time::interval(ADVERTISE_EVERY);
    let mut buf = [0u8; 1500];
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Err(e) = sock.send_to(&advertisement, to(ALL_NODES)).await {
                    return e;
                }
            }
            r = sock.recv_from(&mut buf) => match r {
                Ok((n, SocketAddr::V6(from))) if ra::is_router_advertisement(&buf[..n], *from.ip()) => {
                    routers.heard(*from.ip(), Instant::now());
                }
                Ok(_) => {}
                Err(e) => return e,
            },
        }
        let router = routers
            .current(Instant::now())
            .map(|r| SocketAddrV6::new(r, 0, 0, ifindex));
        tx.send_if_modified(|was| {
            if *was == router {
                return false;
            }
            tracing::info!(interface, router = ?router, "unnumbered BGP: router on the interface");
            *was = router;
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().expect("ip")
    }

    /// Each row: advertisements heard (router, seconds), then the router
    /// to dial at the last second given.
    #[rstest::rstest]
    #[case::none(&[], 0, None)]
    #[case::one(&[("fe80::2", 0)], 5, Some("fe80::2"))]
    #[case::lowest_of_two(&[("fe80::9", 0), ("fe80::2", 1)], 2, Some("fe80::2"))]
    #[case::kept_while_heard(&[("fe80::2", 0), ("fe80::2", 25)], 50, Some("fe80::2"))]
    #[case::forgotten_after_30s(&[("fe80::2", 0)], 30, None)]
    #[case::silent_one_gives_way(&[("fe80::2", 0), ("fe80::9", 20)], 31, Some("fe80::9"))]
    fn which_router(#[case] heard: &[(&str, u64)], #[case] at: u64, #[case] want: Option<&str>) {
        let start = Instant::now();
        let mut r = Routers::default();
        for (a, s) in heard {
            r.heard(ip(a), start + Duration::from_secs(*s));
        }
        assert_eq!(r.current(start + Duration::from_secs(at)), want.map(ip));
    }
}
