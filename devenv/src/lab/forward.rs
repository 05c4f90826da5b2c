//! A TCP forwarder from `127.0.0.1:PORT` inside a lab namespace to an
//! address reachable from the namespace of the caller (normally the root
//! namespace's loopback, where the lab API server listens).
//!
//! A socket belongs to the network namespace it was created in, whatever
//! thread uses it later. So [`Forwarder::start`] creates the listening
//! socket on a short-lived thread that entered the lab namespace with
//! `setns(2)` (and then ends), and hands the listener to threads spawned
//! from the caller's thread, which never left the caller's namespace: every
//! outbound connection is therefore made there. See [`in_netns`] for running
//! any code (a client socket, a bind) inside a lab namespace.
//!
//! What a client sends passes through the delay line of
//! [`super::latency`], so a node's API requests can be made to wait
//! ([`Forwarder::latency`]); nothing waits while no latency is set.

use crate::lab::enter::{EnterError, in_netns};
use crate::lab::latency::{ApiLatency, delayed_pipe};
use crate::lab::netns;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an outbound connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the accept loop looks at the stop flag.
const POLL_INTERVAL_MS: u16 = 100;

/// Errors of the forwarder.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The lab namespace could not be entered.
    #[error(transparent)]
    Enter(#[from] EnterError),
    /// Binding the listener failed.
    #[error("cannot listen on {addr} in network namespace {netns:?}: {source}")]
    Bind {
        /// The namespace.
        netns: String,
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// Bringing `lo` up failed.
    #[error("cannot bring lo up in network namespace {netns:?}: {source}")]
    Loopback {
        /// The namespace.
        netns: String,
        /// Why.
        source: netns::LabError,
    },
    /// A thread could not be started.
    #[error("cannot start a forwarder thread: {0}")]
    Thread(io::Error),
}

type Registry = Arc<Mutex<HashMap<u64, [TcpStream; 2]>>>;

/// A running forwarder; [`Forwarder::stop`] or dropping it closes the
/// listener and every connection.
#[derive(Debug)]
pub struct Forwarder {
    netns: String,
    listen: SocketAddr,
    target: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    conns: Registry,
    latency: Arc<ApiLatency>,
}

impl Forwarder {
    /// Listens on `127.0.0.1:listen_port` inside network namespace `netns`
    /// (port 0 picks a free one, see [`Forwarder::local_addr`]) and forwards
    /// every connection to `target`, connecting from the namespace of the
    /// calling thread. Brings `lo` up in `netns` first (needs root).
    pub fn start(
        netns: &str,
        listen_port: u16,
        target: SocketAddr,
    ) -> Result<Forwarder, ForwardError> {
        netns::run("ip", &["-n", netns, "link", "set", "lo", "up"]).map_err(|source| {
            ForwardError::Loopback {
                netns: netns.to_string(),
                source,
            }
        })?;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, listen_port));
        let listener =
            in_netns(netns, || TcpListener::bind(addr))?.map_err(|source| ForwardError::Bind {
                netns: netns.to_string(),
                addr,
                source,
            })?;
        let bind_err = |source| ForwardError::Bind {
            netns: netns.to_string(),
            addr,
            source,
        };
        let listen = listener.local_addr().map_err(bind_err)?;
        listener.set_nonblocking(true).map_err(bind_err)?;

        let stop = Arc::new(AtomicBool::new(false));
        let conns: Registry = Arc::default();
        let latency = Arc::new(ApiLatency::default());
        let accept = {
            let (stop, conns, ns) = (stop.clone(), conns.clone(), netns.to_string());
            let latency = latency.clone();
            std::thread::Builder::new()
                .name(format!("fwd-{netns}"))
                .spawn(move || accept_loop(&ns, listener, target, &stop, &conns, &latency))
                .map_err(ForwardError::Thread)?
        };
        tracing::debug!(netns, %listen, %target, "forwarder started");
        Ok(Forwarder {
            netns: netns.to_string(),
            listen,
            target,
            stop,
            accept: Some(accept),
            conns,
            latency,
        })
    }

    /// The delay what clients send waits before it goes on: a setting
    /// shared with every connection, switched at run time.
    pub fn latency(&self) -> Arc<ApiLatency> {
        self.latency.clone()
    }

    /// The listening address inside the namespace.
    pub fn local_addr(&self) -> SocketAddr {
        self.listen
    }

    /// Where connections go.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// The namespace it listens in.
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// Closes the listener and every open connection.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            // The accept loop only ends by seeing the flag; a panic there
            // has already been reported by the panic hook.
            let _ = accept.join();
        }
        let streams = |c: &Registry| {
            c.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .values()
                .flat_map(|pair| pair.iter().map(TcpStream::try_clone))
                .collect::<Vec<_>>()
        };
        for stream in streams(&self.conns).into_iter().flatten() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // Connection threads remove themselves once their copies end.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline
            && !self
                .conns
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        tracing::debug!(netns = %self.netns, listen = %self.listen, "forwarder stopped");
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(
    netns: &str,
    listener: TcpListener,
    target: SocketAddr,
    stop: &AtomicBool,
    conns: &Registry,
    latency: &Arc<ApiLatency>,
) {
    let next_id = AtomicU64::new(0);
    while !stop.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(POLL_INTERVAL_MS)) {
            Ok(0) | Err(nix::Error::EINTR) => continue,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(netns, error = %e, "forwarder poll failed");
                std::thread::sleep(Duration::from_millis(POLL_INTERVAL_MS.into()));
                continue;
            }
        }
        match listener.accept() {
            Ok((client, peer)) => {
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let (conns, ns, latency) = (conns.clone(), netns.to_string(), latency.clone());
                // Spawned from this thread, so it is in the caller's
                // namespace too: the connect happens there.
                let spawned = std::thread::Builder::new()
                    .name(format!("fwd-{netns}-{id}"))
                    .spawn(move || {
                        if let Err(e) = serve(id, client, target, &conns, &latency) {
                            tracing::debug!(netns = %ns, %peer, %target, error = %e, "forwarded connection failed");
                        }
                    });
                if let Err(e) = spawned {
                    tracing::warn!(netns, error = %e, "cannot start a connection thread");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                tracing::warn!(netns, error = %e, "forwarder accept failed");
                std::thread::sleep(Duration::from_millis(POLL_INTERVAL_MS.into()));
            }
        }
    }
}

fn serve(
    id: u64,
    client: TcpStream,
    target: SocketAddr,
    conns: &Registry,
    latency: &ApiLatency,
) -> io::Result<()> {
    client.set_nonblocking(false)?;
    let upstream = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT)?;
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    conns
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, [client.try_clone()?, upstream.try_clone()?]);
    let result = std::thread::scope(|s| {
        let up = s.spawn(|| delayed_pipe(&client, &upstream, latency));
        let down = pipe(&upstream, &client);
        let up = up
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("copy thread panicked")));
        down.and(up)
    });
    conns
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&id);
    result
}

/// Copies `from` to `to` until EOF, then half-closes `to`.
fn pipe(mut from: &TcpStream, mut to: &TcpStream) -> io::Result<()> {
    let copied = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
    copied.map(|_| ())
}
