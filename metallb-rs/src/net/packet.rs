//! AF_PACKET raw sockets bound to one interface and one EtherType: what
//! the ARP and NDP responders read and write whole Ethernet frames with.
//! [`PacketSocket`] is async (tokio's `AsyncFd`); [`BlockingPacketSocket`]
//! is for a thread of its own, whose receive waits in the kernel and
//! wakes that thread directly (no reactor, no hop to a runtime worker:
//! the responders' reply latency). Needs CAP_NET_RAW.
//!
//! The only unsafe code of the crate lives here, each block next to the
//! libc call it wraps.

use super::ethernet::Mac;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use tokio::io::unix::AsyncFd;

/// How the kernel classified a received frame (`sll_pkttype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketType {
    /// Addressed to this host.
    Host,
    /// Broadcast.
    Broadcast,
    /// Multicast.
    Multicast,
    /// Addressed to another host (promiscuous).
    OtherHost,
    /// Sent by this host (looped back to packet sockets).
    Outgoing,
}

/// A raw socket on one interface for one EtherType.
#[derive(Debug)]
pub struct PacketSocket {
    fd: AsyncFd<Raw>,
}

/// A raw socket on one interface for one EtherType whose calls block
/// (receives up to a timeout).
#[derive(Debug)]
pub struct BlockingPacketSocket {
    raw: Raw,
}

/// The descriptor and the interface it is bound to; every system call of
/// both socket kinds.
#[derive(Debug)]
struct Raw {
    fd: OwnedFd,
    ifindex: i32,
}

impl AsRawFd for Raw {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn sockaddr_ll(ifindex: i32, ethertype: u16) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_ll = unsafe { zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = ethertype.to_be();
    sa.sll_ifindex = ifindex;
    sa
}

impl Raw {
    fn open(ifindex: u32, ethertype: u16, nonblocking: bool) -> io::Result<Self> {
        let ifindex =
            i32::try_from(ifindex).map_err(|_| io::Error::other("interface index out of range"))?;
        let flags = if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | flags | libc::SOCK_CLOEXEC,
                i32::from(ethertype.to_be()),
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sa = sockaddr_ll(ifindex, ethertype);
        // SAFETY: `sa` is a valid sockaddr_ll and the length matches it.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const sa).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        Ok(Self { fd, ifindex })
    }

    /// One recvfrom(2).
    fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, PacketType)> {
        // SAFETY: sockaddr_ll is plain old data.
        let mut sa: libc::sockaddr_ll = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `buf` is valid for writes of its length, `sa`/`len`
        // describe a writable sockaddr_ll.
        let n = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&raw mut sa).cast::<libc::sockaddr>(),
                &raw mut len,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let kind = match sa.sll_pkttype {
            libc::PACKET_HOST => PacketType::Host,
            libc::PACKET_BROADCAST => PacketType::Broadcast,
            libc::PACKET_MULTICAST => PacketType::Multicast,
            libc::PACKET_OUTGOING => PacketType::Outgoing,
            _ => PacketType::OtherHost,
        };
        Ok((usize::try_from(n).unwrap_or(0), kind))
    }

    /// One send(2) of a whole frame.
    fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is valid for reads of its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn setsockopt<T>(&self, level: libc::c_int, option: libc::c_int, value: &T) -> io::Result<()> {
        // SAFETY: `value` is a valid T of the size passed, T being the
        // type the option takes (each caller passes the one it documents).
        check(unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                option,
                (value as *const T).cast(),
                size_of::<T>() as libc::socklen_t,
            )
        })?;
        Ok(())
    }

    fn membership(&self, mac: Mac, option: libc::c_int) -> io::Result<()> {
        // SAFETY: packet_mreq is plain old data.
        let mut mreq: libc::packet_mreq = unsafe { zeroed() };
        mreq.mr_ifindex = self.ifindex;
        mreq.mr_type = libc::PACKET_MR_MULTICAST as u16;
        mreq.mr_alen = 6;
        mreq.mr_address[..6].copy_from_slice(&mac.0);
        self.setsockopt(libc::SOL_PACKET, option, &mreq)
    }

    fn set_recv_buffer(&self, bytes: usize) -> io::Result<()> {
        let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        self.setsockopt(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &v)
            .or_else(|_| self.setsockopt(libc::SOL_SOCKET, libc::SO_RCVBUF, &v))
    }

    fn recv_buffer(&self) -> io::Result<usize> {
        let mut v: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v`/`len` describe a writable c_int.
        check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&raw mut v).cast(),
                &raw mut len,
            )
        })?;
        Ok(usize::try_from(v).unwrap_or(0))
    }

    fn take_drops(&self) -> io::Result<u64> {
        // SAFETY: tpacket_stats is plain old data; all-zero is valid.
        let mut stats: libc::tpacket_stats = unsafe { zeroed() };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `stats`/`len` describe a writable tpacket_stats.
        check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&raw mut stats).cast(),
                &raw mut len,
            )
        })?;
        Ok(u64::from(stats.tp_drops))
    }

    /// A one-instruction classic BPF filter that accepts nothing.
    fn receive_nothing(&self) -> io::Result<()> {
        let mut reject = [libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        }];
        let prog = libc::sock_fprog {
            len: 1,
            filter: reject.as_mut_ptr(),
        };
        self.setsockopt(libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
    }
}

impl PacketSocket {
    /// Opens a socket receiving `ethertype` frames of interface `ifindex`.
    pub fn open(ifindex: u32, ethertype: u16) -> io::Result<Self> {
        Self::register(Raw::open(ifindex, ethertype, true)?)
    }

    /// Opens a socket that sends `ethertype` frames out of `ifindex` and
    /// receives none (a filter drops every frame before it is queued):
    /// for unsolicited announcements and multicast membership, beside a
    /// [`BlockingPacketSocket`] that does the receiving.
    pub fn open_sender(ifindex: u32, ethertype: u16) -> io::Result<Self> {
        let raw = Raw::open(ifindex, ethertype, true)?;
        raw.receive_nothing()?;
        Self::register(raw)
    }

    fn register(raw: Raw) -> io::Result<Self> {
        // SAFETY: `Raw` owns its descriptor (an OwnedFd) and keeps it open
        // and unchanged until the AsyncFd that owns it is dropped.
        let fd = unsafe { AsyncFd::register(raw) }.map_err(|e| e.into_parts().1)?;
        Ok(Self { fd })
    }

    /// Receives one frame into `buf`: (length, classification).
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, PacketType)> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|inner| inner.get_ref().recv(buf)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Sends one whole frame (Ethernet header included).
    pub async fn send(&self, frame: &[u8]) -> io::Result<()> {
        loop {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|inner| inner.get_ref().send(frame)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Asks for a receive buffer of `bytes` (SO_RCVBUFFORCE with
    /// CAP_NET_ADMIN, else capped by net.core.rmem_max), so bursts are not
    /// dropped.
    pub fn set_recv_buffer(&self, bytes: usize) -> io::Result<()> {
        self.fd.get_ref().set_recv_buffer(bytes)
    }

    /// Makes the interface accept frames sent to multicast `mac` (for a
    /// VIP's solicited-node group); kept while the socket lives.
    pub fn join_multicast(&self, mac: Mac) -> io::Result<()> {
        self.fd
            .get_ref()
            .membership(mac, libc::PACKET_ADD_MEMBERSHIP)
    }

    /// Undoes [`PacketSocket::join_multicast`].
    pub fn leave_multicast(&self, mac: Mac) -> io::Result<()> {
        self.fd
            .get_ref()
            .membership(mac, libc::PACKET_DROP_MEMBERSHIP)
    }
}

impl BlockingPacketSocket {
    /// Opens a socket receiving `ethertype` frames of interface `ifindex`,
    /// whose [`BlockingPacketSocket::recv`] waits at most `wait`.
    pub fn open(ifindex: u32, ethertype: u16, wait: std::time::Duration) -> io::Result<Self> {
        let raw = Raw::open(ifindex, ethertype, false)?;
        let tv = libc::timeval {
            tv_sec: libc::time_t::try_from(wait.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_usec: libc::suseconds_t::from(wait.subsec_micros()),
        };
        raw.setsockopt(libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)?;
        Ok(Self { raw })
    }

    /// Receives one frame into `buf`: (length, classification), or None
    /// when none came within the socket's wait.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, PacketType)>> {
        match self.raw.recv(buf) {
            Ok(r) => Ok(Some(r)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Sends one whole frame (Ethernet header included).
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        self.raw.send(frame)
    }

    /// As [`PacketSocket::set_recv_buffer`].
    pub fn set_recv_buffer(&self, bytes: usize) -> io::Result<()> {
        self.raw.set_recv_buffer(bytes)
    }

    /// The receive buffer the kernel granted (SO_RCVBUF; twice what was
    /// asked, as Linux books its overhead there too).
    pub fn recv_buffer(&self) -> io::Result<usize> {
        self.raw.recv_buffer()
    }

    /// Frames the kernel discarded for this socket since the last call
    /// (its receive buffer was full): PACKET_STATISTICS, which the kernel
    /// resets on every read.
    pub fn take_drops(&self) -> io::Result<u64> {
        self.raw.take_drops()
    }
}
