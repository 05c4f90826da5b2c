//! AF_PACKET raw sockets bound to one interface and one EtherType, async
//! through tokio's `AsyncFd`: what the ARP and NDP responders read and
//! write whole Ethernet frames with. Needs CAP_NET_RAW.
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
    fd: AsyncFd<OwnedFd>,
    ifindex: i32,
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

impl PacketSocket {
    /// Opens a socket receiving `ethertype` frames of interface `ifindex`.
    pub fn open(ifindex: u32, ethertype: u16) -> io::Result<Self> {
        let ifindex =
            i32::try_from(ifindex).map_err(|_| io::Error::other("interface index out of range"))?;
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
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
        // SAFETY: an OwnedFd keeps its descriptor open and unchanged until
        // the AsyncFd that owns it is dropped.
        let fd = unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)?;
        Ok(Self { fd, ifindex })
    }

    /// Receives one frame into `buf`: (length, classification).
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, PacketType)> {
        loop {
            let mut guard = self.fd.readable().await?;
            let res = guard.try_io(|inner| {
                // SAFETY: sockaddr_ll is plain old data.
                let mut sa: libc::sockaddr_ll = unsafe { zeroed() };
                let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
                // SAFETY: `buf` is valid for writes of its length, `sa`/`len`
                // describe a writable sockaddr_ll.
                let n = unsafe {
                    libc::recvfrom(
                        inner.as_raw_fd(),
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
            });
            match res {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Sends one whole frame (Ethernet header included).
    pub async fn send(&self, frame: &[u8]) -> io::Result<()> {
        loop {
            let mut guard = self.fd.writable().await?;
            let res = guard.try_io(|inner| {
                // SAFETY: `frame` is valid for reads of its length.
                let n =
                    unsafe { libc::send(inner.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            match res {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    fn membership(&self, mac: Mac, option: libc::c_int) -> io::Result<()> {
        // SAFETY: packet_mreq is plain old data.
        let mut mreq: libc::packet_mreq = unsafe { zeroed() };
        mreq.mr_ifindex = self.ifindex;
        mreq.mr_type = libc::PACKET_MR_MULTICAST as u16;
        mreq.mr_alen = 6;
        mreq.mr_address[..6].copy_from_slice(&mac.0);
        // SAFETY: `mreq` is a valid packet_mreq of the size passed.
        check(unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                option,
                (&raw const mreq).cast(),
                size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        })?;
        Ok(())
    }

    /// Asks for a receive buffer of `bytes` (SO_RCVBUFFORCE as root, else
    /// capped by net.core.rmem_max), so bursts are not dropped.
    pub fn set_recv_buffer(&self, bytes: usize) -> io::Result<()> {
        let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
            // SAFETY: `v` is a valid c_int of the size passed.
            let r = unsafe {
                libc::setsockopt(
                    self.fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&raw const v).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r == 0 {
                return Ok(());
            }
        }
        Err(io::Error::last_os_error())
    }

    /// The receive buffer the kernel granted (SO_RCVBUF; twice what was
    /// asked, as Linux books its overhead there too).
    pub fn recv_buffer(&self) -> io::Result<usize> {
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

    /// Frames the kernel discarded for this socket since the last call
    /// (its receive buffer was full): PACKET_STATISTICS, which the kernel
    /// resets on every read.
    pub fn take_drops(&self) -> io::Result<u64> {
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

    /// Makes the interface accept frames sent to multicast `mac` (for a
    /// VIP's solicited-node group); kept while the socket lives.
    pub fn join_multicast(&self, mac: Mac) -> io::Result<()> {
        self.membership(mac, libc::PACKET_ADD_MEMBERSHIP)
    }

    /// Undoes [`PacketSocket::join_multicast`].
    pub fn leave_multicast(&self, mac: Mac) -> io::Result<()> {
        self.membership(mac, libc::PACKET_DROP_MEMBERSHIP)
    }
}
