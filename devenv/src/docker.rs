//! Docker networks as seen by a dev cluster: which Docker network kind's
//! nodes sit on, and which of its addresses are free to hand to MetalLB as
//! an `IPAddressPool`.
//!
//! Decide, then do: `ranges` (re-exported here) picks the addresses from
//! a `docker network inspect` ([`NetworkInspect`]) and does no I/O; this
//! module only talks to the engine: [`connect`], [`available`],
//! [`inspect`]. Neither starts a container or changes a network.

use bollard::Docker;

mod ranges;
pub use ranges::{
    AddressRange, DEFAULT_BLOCK, Families, Family, NetworkInspect, RangeError, address_pool,
    conflicts, free_block,
};

/// The environment variable kind reads for the Docker network of its nodes.
pub const NETWORK_ENV: &str = "KIND_EXPERIMENTAL_DOCKER_NETWORK";

/// The Docker network kind puts its nodes on unless [`NETWORK_ENV`] says
/// otherwise.
pub const DEFAULT_NETWORK: &str = "kind";

/// The Docker network of kind's nodes: [`NETWORK_ENV`] when set and not
/// empty, else [`DEFAULT_NETWORK`].
pub fn network_name() -> String {
    network_name_from(std::env::var(NETWORK_ENV).ok().as_deref())
}

/// [`network_name`] for a given value of [`NETWORK_ENV`] (`None`: unset).
pub fn network_name_from(env: Option<&str>) -> String {
    match env.map(str::trim) {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => DEFAULT_NETWORK.to_owned(),
    }
}

/// Failures talking to the Docker engine. Each message says what to do;
/// the engine's own error is part of the message (not a `source`), so
/// printing the chain does not repeat it.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// Nothing answers at the engine's address.
    #[error("no Docker engine answers at {host}: start dockerd or set DOCKER_HOST ({})", chain(.cause))]
    Unreachable {
        /// `DOCKER_HOST`, or bollard's default socket.
        host: String,
        /// What bollard saw.
        cause: bollard::errors::Error,
    },
    /// The engine's socket exists but this user may not use it.
    #[error(
        "permission denied on the Docker engine at {host}: add this user to the docker group \
         or set DOCKER_HOST ({})",
        chain(.cause)
    )]
    PermissionDenied {
        /// `DOCKER_HOST`, or bollard's default socket.
        host: String,
        /// What bollard saw.
        cause: bollard::errors::Error,
    },
    /// `DOCKER_HOST` names something bollard cannot connect to.
    #[error("DOCKER_HOST {host} is not usable: {}; use unix://, tcp:// or http://", chain(.cause))]
    BadHost {
        /// The value of `DOCKER_HOST`.
        host: String,
        /// What bollard saw.
        cause: bollard::errors::Error,
    },
    /// The network does not exist.
    #[error(
        "docker network {name} not found: is the kind cluster up? (set {NETWORK_ENV} for another network)"
    )]
    NetworkNotFound {
        /// The network asked for.
        name: String,
    },
    /// Any other refusal of the engine.
    #[error("docker: {action}: {}", chain(.cause))]
    Api {
        /// What we asked for, e.g. `inspect network kind`.
        action: String,
        /// What the engine answered.
        cause: bollard::errors::Error,
    },
}

/// `err` and its sources joined with ": ", skipping repeats: hyper keeps
/// the OS error ("Connection refused") a few sources down.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let part = e.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = e.source();
    }
    text
}

/// Where bollard connects when `DOCKER_HOST` is unset (its own default,
/// which it does not export).
pub const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";

/// Where [`connect`] connects: `DOCKER_HOST`, else [`DEFAULT_DOCKER_HOST`].
pub fn docker_host() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| DEFAULT_DOCKER_HOST.to_owned())
}

/// Connects to the engine at [`docker_host`] and negotiates the API version
/// (the engine may be older than bollard's default, e.g. Docker 20.10 speaks
/// API 1.41). Fails when no engine answers.
pub async fn connect() -> Result<Docker, DockerError> {
    connect_to(&docker_host()).await
}

/// [`connect`] to `host` (`unix://`, `tcp://` or `http://`).
pub async fn connect_to(host: &str) -> Result<Docker, DockerError> {
    let docker = Docker::connect_with_host(host).map_err(|cause| match cause {
        bollard::errors::Error::SocketNotFoundError(_) => DockerError::Unreachable {
            host: host.to_owned(),
            cause,
        },
        cause => DockerError::BadHost {
            host: host.to_owned(),
            cause,
        },
    })?;
    docker
        .negotiate_version()
        .await
        .map_err(|cause| unreachable(host.to_owned(), cause))
}

/// [`connect`], then a ping: `Ok` means an engine answers and the client is
/// ready. Tests that need Docker call this and skip with its message.
pub async fn available() -> Result<Docker, DockerError> {
    let host = docker_host();
    let docker = connect_to(&host).await?;
    docker
        .ping()
        .await
        .map_err(|cause| unreachable(host, cause))?;
    Ok(docker)
}

/// Classifies a failed first request: permission denied on the socket, or
/// nobody listening.
fn unreachable(host: String, cause: bollard::errors::Error) -> DockerError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&cause);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::PermissionDenied
        {
            return DockerError::PermissionDenied { host, cause };
        }
        source = err.source();
    }
    DockerError::Unreachable { host, cause }
}

/// `docker network inspect <name>`.
pub async fn inspect(docker: &Docker, name: &str) -> Result<NetworkInspect, DockerError> {
    docker
        .inspect_network(name, None)
        .await
        .map_err(|cause| match cause {
            bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            } => DockerError::NetworkNotFound {
                name: name.to_owned(),
            },
            cause => DockerError::Api {
                action: format!("inspect network {name}"),
                cause,
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case(None, "kind")]
    #[case(Some(""), "kind")]
    #[case(Some("  "), "kind")]
    #[case(Some("kind-like"), "kind-like")]
    fn the_network_comes_from_kinds_variable(#[case] env: Option<&str>, #[case] want: &str) {
        assert_eq!(network_name_from(env), want);
    }

    #[tokio::test]
    async fn no_engine_says_where_and_what_to_do() {
        let err = connect_to("unix:///nonexistent/docker.sock")
            .await
            .expect_err("nothing listens there");
        assert!(matches!(err, DockerError::Unreachable { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "no Docker engine answers at unix:///nonexistent/docker.sock: start dockerd or set \
             DOCKER_HOST (Socket not found: /nonexistent/docker.sock)"
        );

        let err = connect_to("ssh://builder")
            .await
            .expect_err("no ssh support");
        assert_eq!(
            err.to_string(),
            "DOCKER_HOST ssh://builder is not usable: URI scheme is not supported: ssh://builder; use \
             unix://, tcp:// or http://"
        );
    }
}
