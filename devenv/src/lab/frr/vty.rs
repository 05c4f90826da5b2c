//! Speaking to one FRR daemon's vty socket the way vtysh does, for
//! callers that poll (the BGP benchmark): a query takes well under a
//! millisecond where a vtysh process takes tens. Owns the wire format
//! only; which daemon and which socket is the caller's business.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The request for `command` on an FRR vty socket: the command and a NUL
/// (what vtysh writes). One line only: vtysh splits lines itself.
pub fn vty_request(command: &str) -> Result<Vec<u8>> {
    if command.contains(['\0', '\n']) {
        bail!("vty command {command:?}: one line without NUL, please");
    }
    let mut bytes = command.as_bytes().to_vec();
    bytes.push(0);
    Ok(bytes)
}

/// A complete vty reply in `buf`: its output and status (0 is success,
/// as FRR's `CMD_SUCCESS`). A daemon ends each reply with three NULs and
/// the status byte; `None` while that end has not arrived.
pub fn vty_reply(buf: &[u8]) -> Option<(&[u8], u8)> {
    match buf {
        [body @ .., 0, 0, 0, status] => Some((body, *status)),
        _ => None,
    }
}

/// A connection to one FRR daemon's vty socket (`<dir>/bgpd.vty`), spoken
/// the way vtysh speaks it. One command takes a fraction of a millisecond
/// where a vtysh process takes tens: for benchmarks that poll the router.
pub struct Vty {
    stream: std::os::unix::net::UnixStream,
    path: PathBuf,
}

impl Vty {
    /// How long a reply may take (a busy bgpd answers between its jobs).
    pub const TIMEOUT: Duration = Duration::from_secs(10);

    /// Connects to the vty socket at `path`.
    pub fn connect(path: &Path) -> Result<Self> {
        let stream = std::os::unix::net::UnixStream::connect(path)
            .with_context(|| format!("connecting to FRR's vty socket {}", path.display()))?;
        stream.set_read_timeout(Some(Self::TIMEOUT))?;
        stream.set_write_timeout(Some(Self::TIMEOUT))?;
        Ok(Self {
            stream,
            path: path.to_owned(),
        })
    }

    /// Runs `command` (one line) and returns its output; fails when the
    /// daemon reports an error (unknown command, ...).
    pub fn command(&mut self, command: &str) -> Result<String> {
        use std::io::{Read, Write};
        let path = self.path.display();
        self.stream
            .write_all(&vty_request(command)?)
            .with_context(|| format!("sending {command:?} to {path}"))?;
        let mut buf = Vec::with_capacity(8192);
        let mut chunk = [0u8; 65536];
        loop {
            let n = self
                .stream
                .read(&mut chunk)
                .with_context(|| format!("reading the reply to {command:?} from {path}"))?;
            if n == 0 {
                bail!("{path} closed the connection during {command:?}");
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some((body, status)) = vty_reply(&buf) {
                let text = String::from_utf8_lossy(body).into_owned();
                if status != 0 {
                    bail!(
                        "{command:?} on {path} failed (status {status}): {}",
                        text.trim()
                    );
                }
                return Ok(text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vty_requests_end_in_nul_and_replies_in_three_nuls_and_a_status() {
        assert_eq!(
            vty_request("show bgp summary json").expect("one line"),
            b"show bgp summary json\0"
        );
        assert!(vty_request("configure\nrouter bgp 1").is_err());
        assert!(vty_request("a\0b").is_err());
        assert_eq!(vty_reply(b"{}\n\0\0\0\0"), Some((&b"{}\n"[..], 0)));
        assert_eq!(
            vty_reply(b"% Unknown command\n\0\0\0\x02"),
            Some((&b"% Unknown command\n"[..], 2))
        );
        assert_eq!(vty_reply(b"\0\0\0\0"), Some((&b""[..], 0)));
        // Not complete yet: the end marker has not arrived (whole).
        assert_eq!(vty_reply(b"{\"peers\":"), None);
        assert_eq!(vty_reply(b"{}\0\0"), None);
        assert_eq!(vty_reply(b"{}\0\0\0"), None);
    }
}
