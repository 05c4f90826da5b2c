//! Against the Docker engine at `DOCKER_HOST` (or the default socket): the
//! image built from this tree, and free address blocks on a fresh network
//! with containers of that image on it.
//!
//! Each test skips with the reason (`devenv::prereq::skip`: listed at the
//! end of `cargo xtask test`, a failure under CI) when no engine answers.
//! The image is built once per test binary (minutes cold: a static release
//! build) and kept, tagged `ghcr.io/metallb-rs/metallb-rs:test`. The
//! containers are testcontainers' (`ContainerAsync`): removed when their
//! handle drops, also while a failing test unwinds. What testcontainers
//! cannot own (networks with chosen subnets, extra images) a
//! [`Cleanup`](harness::Cleanup) removes after them. One module per
//! concern: the image, free address blocks on networks, capabilities,
//! the kind provider.

mod capabilities;
mod harness;
mod images;
mod kind_provider;
mod networks;
