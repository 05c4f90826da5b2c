//! The TCP connection to a peer: source address, TTL and the TCP MD5
//! signature option (RFC 2385) are set before the SYN leaves, which is
//! when the peer checks them.

use crate::net::bgp::MD5_MAX_KEY;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;
use tokio::net::TcpStream;

/// Where the peer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remote {
    /// A configured address and port.
    Address(SocketAddr),
    /// An unnumbered peer: the router heard on this interface (see
    /// [`super::unnumbered`]), at this port.
    Interface {
        /// The node's interface.
        name: String,
        /// The port to dial.
        port: u16,
    },
}

impl fmt::Display for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Remote::Address(a) => write!(f, "{a}"),
            Remote::Interface { name, port } => write!(f, "{name}:{port}"),
        }
    }
}

/// How to reach one peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dial {
    /// Where the peer is.
    pub peer: Remote,
    /// Local address to bind (`sourceAddress`).
    pub source: Option<IpAddr>,
    /// TCP MD5 key (`password` / `passwordSecret`).
    pub password: Option<crate::config::Password>,
    /// IP TTL / hop limit of our packets: 1 for a directly connected eBGP
    /// peer, 255 otherwise.
    pub ttl: u32,
    /// Give up a connection attempt after this long.
    pub timeout: Duration,
}

/// Linux's `struct tcp_md5sig` (include/uapi/linux/tcp.h); libc has the
/// option number but not the struct.
#[repr(C)]
struct TcpMd5Sig {
    addr: libc::sockaddr_storage,
    flags: u8,
    prefixlen: u8,
    keylen: u16,
    ifindex: i32,
    key: [u8; 80],
}

/// Signs every segment to and from `peer` with `key` (also used on
/// listening sockets by tests).
pub fn set_md5(sock: &Socket, peer: IpAddr, key: &str) -> io::Result<()> {
    let key = key.as_bytes();
    if key.len() > MD5_MAX_KEY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the BGP password is {} bytes; TCP MD5 keys are at most {MD5_MAX_KEY}",
                key.len()
            ),
        ));
    }
    let addr = SockAddr::from(SocketAddr::new(peer, 0));
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut sig: TcpMd5Sig = unsafe { std::mem::zeroed() };
    let len = (addr.len() as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: `addr` holds `len` initialized bytes of a sockaddr, and the
    // destination is a sockaddr_storage, at least as large.
    unsafe {
        std::ptr::copy_nonoverlapping(
            addr.as_ptr().cast::<u8>(),
            (&raw mut sig.addr).cast::<u8>(),
            len,
        );
    }
    sig.keylen = key.len() as u16;
    sig.key[..key.len()].copy_from_slice(key);
    // SAFETY: the fd is a live socket; the option value is a valid
    // tcp_md5sig of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MD5SIG,
            (&raw const sig).cast::<libc::c_void>(),
            std::mem::size_of::<TcpMd5Sig>() as libc::socklen_t,
        )
    };
    // The kernel has its copy: wipe ours.
    zeroize::Zeroize::zeroize(&mut sig.key);
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Opens the connection to `peer`, the address `d` names or the one
/// found for it (a link-local one with its interface as scope).
pub async fn connect(d: &Dial, peer: SocketAddr) -> io::Result<TcpStream> {
    let domain = if peer.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let sock = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    sock.set_nonblocking(true)?;
    sock.set_tcp_nodelay(true)?;
    if let Some(key) = &d.password {
        set_md5(&sock, peer.ip(), key.expose())?;
    }
    if peer.is_ipv4() {
        sock.set_ttl_v4(d.ttl)?;
    } else {
        sock.set_unicast_hops_v6(d.ttl)?;
    }
    if let Some(src) = d.source {
        sock.bind(&SocketAddr::new(src, 0).into()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("binding source address {src}: {e} (is it an address of this node?)"),
            )
        })?;
    }
    let socket = tokio::net::TcpSocket::from_std_stream(sock.into());
    match tokio::time::timeout(d.timeout, socket.connect(peer)).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no answer within {:?}", d.timeout),
        )),
    }
}
