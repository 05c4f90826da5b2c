//! Raw AF_PACKET sockets on a link of the external host or the router,
//! for the suites' own observers (the ARP/NDP prober, the BGP capture).
//!
//! A socket belongs to the network namespace it was created in, so it is
//! opened on a thread that entered the namespace (devenv's
//! [`in_netns`], as the lab's forwarders do) and then used from the
//! spec's thread, which never changes namespace. Each link has a
//! current-thread runtime of its own that the socket is registered with;
//! whoever reads the socket drives that runtime (`block_on`).

use anyhow::{Context, Result};
use devenv::lab::enter::in_netns;
use metallb_rs::net::iface::{self, Interface};
use metallb_rs::net::packet::PacketSocket;
use tokio::runtime::Runtime;

/// Every EtherType (`ETH_P_ALL`): frames the host sends as well as those
/// it receives.
pub const ETH_P_ALL: u16 = 0x0003;

/// A raw socket on one interface and the runtime that drives it.
pub struct Link {
    /// The socket (whole Ethernet frames).
    pub socket: PacketSocket,
    /// The interface as seen inside its namespace.
    pub iface: Interface,
    /// The runtime `socket` is registered with.
    pub runtime: Runtime,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("iface", &self.iface.name)
            .finish_non_exhaustive()
    }
}

/// Opens a socket for `ethertype` frames on interface `name` of network
/// namespace `netns` (`None`: this process's namespace). Needs
/// CAP_NET_RAW, and CAP_SYS_ADMIN to enter a namespace.
pub fn open(netns: Option<&str>, name: &str, ethertype: u16) -> Result<Link> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a tokio runtime for a raw socket")?;
    let handle = runtime.handle().clone();
    let where_ = netns.unwrap_or("this process's namespace");
    let open = move || -> Result<(PacketSocket, Interface)> {
        // Registers the socket with `runtime`'s reactor.
        let _entered = handle.enter();
        let iface = iface::list()
            .context("listing interfaces")?
            .into_iter()
            .find(|i| i.name == name)
            .with_context(|| format!("no interface {name}"))?;
        let socket = PacketSocket::open(iface.index, ethertype)
            .with_context(|| format!("opening a raw socket on {name} (needs CAP_NET_RAW)"))?;
        // Bursts of frames between two reads are kept, not dropped.
        socket
            .set_recv_buffer(4 << 20)
            .context("sizing the socket's receive buffer")?;
        Ok((socket, iface))
    };
    let (socket, iface) = match netns {
        Some(ns) => in_netns(ns, open)?,
        None => open(),
    }
    .with_context(|| format!("in {where_}"))?;
    Ok(Link {
        socket,
        iface,
        runtime,
    })
}

impl Link {
    /// Throws away the frames queued on the socket, so what is read next
    /// arrived after this call (until the link has been quiet for 1 ms:
    /// the reactor learns of queued frames only while it waits).
    pub fn drain(&self) {
        let mut buf = vec![0u8; 65536];
        let quiet = std::time::Duration::from_millis(1);
        self.runtime.block_on(async {
            while let Ok(Ok(_)) = tokio::time::timeout(quiet, self.socket.recv(&mut buf)).await {}
        });
    }
}
