//! The BFD sockets: a session's sender (TTL 255, a source port from the
//! RFC's range), the listeners that read each datagram with its TTL or
//! hop limit, and whether a peer is on a connected network. Every socket
//! is non-blocking.

use crate::speaker::bfd::packet::SEND_TTL;
use nix::sys::socket::{
    ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg, setsockopt, sockopt,
};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::os::fd::AsRawFd;

fn unspecified(v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    }
}

fn udp(v4: bool) -> io::Result<Socket> {
    let domain = if v4 { Domain::IPV4 } else { Domain::IPV6 };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if !v4 {
        s.set_only_v6(true)?;
    }
    s.set_nonblocking(true)?;
    Ok(s)
}

/// A socket sending to `peer` with TTL 255 from `source` (or the address
/// the kernel picks) and the first free port of `ports`, trying from
/// `offset` into the range on, so that sessions spread over it.
pub(super) fn sender(
    source: Option<IpAddr>,
    peer: IpAddr,
    ports: &RangeInclusive<u16>,
    offset: u16,
) -> io::Result<std::net::UdpSocket> {
    let v4 = peer.is_ipv4();
    let s = udp(v4)?;
    if v4 {
        s.set_ttl_v4(SEND_TTL.into())?;
    } else {
        s.set_unicast_hops_v6(SEND_TTL.into())?;
    }
    let ip = source.unwrap_or_else(|| unspecified(v4));
    let (first, last) = (u32::from(*ports.start()), u32::from(*ports.end()));
    let span = (last + 1).saturating_sub(first).max(1);
    for i in 0..span {
        let port = first + (u32::from(offset) + i) % span;
        let addr = SocketAddr::new(ip, u16::try_from(port).unwrap_or(u16::MAX));
        match s.bind(&addr.into()) {
            Ok(()) => return Ok(s.into()),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("binding {addr}: {e} (is {ip} an address of this node?)"),
                ));
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no free UDP source port in {first}-{last} on {ip}"),
    ))
}

/// A socket receiving on `port` of every address of the family, each
/// datagram with its TTL (IPv4) or hop limit (IPv6).
pub(super) fn listener(v4: bool, port: u16) -> io::Result<tokio::net::UdpSocket> {
    let s = udp(v4)?;
    let on = if v4 {
        setsockopt(&s, sockopt::Ipv4RecvTtl, &true)
    } else {
        setsockopt(&s, sockopt::Ipv6RecvHopLimit, &true)
    };
    on.map_err(io::Error::from)?;
    let addr = SocketAddr::new(unspecified(v4), port);
    s.bind(&addr.into()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "binding UDP {addr}: {e} (another BFD daemon on this node, such as FRR's bfdd, \
                 may hold the port: stop it, or remove bfdProfile from the BGPPeers of this node)"
            ),
        )
    })?;
    tokio::net::UdpSocket::from_std(s.into())
}

/// An IP socket address from a kernel one.
fn socket_addr(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::from(*v4));
    }
    a.as_sockaddr_in6().map(|v6| SocketAddr::from(*v6))
}

/// Reads one datagram into `buf`: its length, sender and TTL (None when
/// the kernel gave none). `WouldBlock` when nothing is waiting.
pub(super) fn recv_with_ttl(
    socket: &impl AsRawFd,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddr, Option<u8>)> {
    let mut iov = [IoSliceMut::new(buf)];
    // Room for the one control message asked for, and one more.
    let mut control = nix::cmsg_space!(libc::c_int, libc::c_int);
    let msg = recvmsg::<SockaddrStorage>(
        socket.as_raw_fd(),
        &mut iov,
        Some(control.as_mut_slice()),
        MsgFlags::empty(),
    )
    .map_err(io::Error::from)?;
    let from = msg
        .address
        .as_ref()
        .and_then(socket_addr)
        .ok_or_else(|| io::Error::other("a datagram without an IP source address"))?;
    let mut ttl = None;
    for c in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::Ipv4Ttl(t) | ControlMessageOwned::Ipv6HopLimit(t) = c {
            ttl = u8::try_from(t).ok();
        }
    }
    Ok((msg.bytes, from, ttl))
}

/// Whether `peer` is inside a network of one of this node's addresses.
/// Unknown (no interface list) counts as not: multihop then.
pub(super) fn on_connected_network(peer: IpAddr) -> bool {
    let addresses = match nix::ifaddrs::getifaddrs() {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(%peer, error = %e, "cannot list this node's addresses: BFD to this iBGP peer runs multihop");
            return false;
        }
    };
    let ip = |a: &Option<SockaddrStorage>| a.as_ref().and_then(socket_addr).map(|s| s.ip());
    addresses
        .into_iter()
        .any(|ifa| match (peer, ip(&ifa.address), ip(&ifa.netmask)) {
            (IpAddr::V4(p), Some(IpAddr::V4(a)), Some(IpAddr::V4(m))) => {
                let m = u32::from(m);
                u32::from(p) & m == u32::from(a) & m
            }
            (IpAddr::V6(p), Some(IpAddr::V6(a)), Some(IpAddr::V6(m))) => {
                let m = u128::from(m);
                u128::from(p) & m == u128::from(a) & m
            }
            _ => false,
        })
}
