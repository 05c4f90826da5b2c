//! Running code inside a lab network namespace without moving the
//! caller: a short-lived thread enters the namespace with `setns(2)`,
//! runs the code and ends. Below every other lab module, so the ones that
//! make namespaces and the ones that use them can all call it.

use nix::sched::{CloneFlags, setns};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;

/// Where `ip netns` keeps the namespaces' handles.
pub const NETNS_RUN_DIR: &str = "/var/run/netns";

/// Why a namespace could not be entered.
#[derive(Debug, thiserror::Error)]
pub enum EnterError {
    /// The namespace handle could not be opened.
    #[error("cannot open network namespace {netns:?} ({path}): {source}; does the lab exist?")]
    OpenNetns {
        /// The namespace.
        netns: String,
        /// Its handle.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// `setns` failed (it needs CAP_SYS_ADMIN).
    #[error("cannot enter network namespace {netns:?}: {source} (the lab needs root)")]
    Setns {
        /// The namespace.
        netns: String,
        /// Why.
        source: nix::Error,
    },
    /// The thread could not be started.
    #[error("cannot start a thread to enter network namespace {netns:?}: {source}")]
    Thread {
        /// The namespace.
        netns: String,
        /// Why.
        source: io::Error,
    },
}

/// The handle of namespace `netns` as `ip netns` keeps it.
pub fn netns_path(netns: &str) -> PathBuf {
    PathBuf::from(NETNS_RUN_DIR).join(netns)
}

/// Runs `f` on a new thread that entered network namespace `netns` and
/// returns its result; the thread ends with `f`, so the caller's threads
/// never change namespace. Sockets `f` creates belong to `netns`.
pub fn in_netns<T, F>(netns: &str, f: F) -> Result<T, EnterError>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let path = netns_path(netns);
    let handle = File::open(&path).map_err(|source| EnterError::OpenNetns {
        netns: netns.to_string(),
        path: path.clone(),
        source,
    })?;
    std::thread::scope(|s| {
        let joined = std::thread::Builder::new()
            .name(format!("netns-{netns}"))
            .spawn_scoped(s, move || {
                setns(handle.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|source| {
                    EnterError::Setns {
                        netns: netns.to_string(),
                        source,
                    }
                })?;
                Ok(f())
            })
            .map_err(|source| EnterError::Thread {
                netns: netns.to_string(),
                source,
            })?
            .join();
        match joined {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
