//! GETs on a loopback port of the root namespace, where the lab's API
//! server and controller replicas serve: health, readiness and metrics,
//! and the one reading of a controller's metrics the lab needs.

use anyhow::{Context, Result};
use std::time::Duration;

pub(super) fn healthy(port: u16) -> bool {
    answers_200(port, "/healthz")
}

/// Whether 127.0.0.1:`port` answers GET `path` with 200.
pub(super) fn answers_200(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(
        &([127, 0, 0, 1], port).into(),
        Duration::from_millis(300),
    ) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 16];
    s.read(&mut buf).is_ok_and(|n| {
        buf[..n].starts_with(b"HTTP/1.0 200") || buf[..n].starts_with(b"HTTP/1.1 200")
    })
}

/// `/metrics` of the process serving it on 127.0.0.1:`port`.
pub(super) fn metrics_at(port: u16) -> Result<String> {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .with_context(|| format!("connecting to the controller's metrics at {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default())
}

/// Whether a controller's metrics show that it read the configuration
/// (loaded a valid one, or found it invalid): then it has made its first
/// pass over the services.
pub(super) fn read_configuration(metrics: &str) -> bool {
    metrics.lines().any(|l| {
        matches!(
            l.split_once(' '),
            Some((
                "metallb_k8s_client_config_loaded_bool" | "metallb_k8s_client_config_stale_bool",
                "1"
            ))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::read_configuration;

    #[test]
    fn a_controller_has_read_the_configuration_once_either_gauge_is_set() {
        let fresh =
            "metallb_k8s_client_config_loaded_bool 0\nmetallb_k8s_client_config_stale_bool 0\n";
        assert!(!read_configuration(fresh));
        assert!(read_configuration(
            "# HELP x\nmetallb_k8s_client_config_loaded_bool 0\nmetallb_k8s_client_config_stale_bool 1\n"
        ));
        assert!(read_configuration(
            "metallb_k8s_client_config_loaded_bool 1\nmetallb_k8s_client_config_stale_bool 0\n"
        ));
        assert!(!read_configuration(
            "metallb_k8s_client_config_loaded_bool_other 1\n"
        ));
    }
}
