//! A deterministic cluster simulator of the speaker's layer 2 failover.
//!
//! N speakers built from metallb-rs's own pure parts - the sans-IO
//! gossip member (real foca inside), liveness judging, renewal
//! scheduling, upstream's election order - run over a simulated network
//! ([`net`]) and API server ([`api`]) in virtual time ([`clock`]): no
//! tokio, no sockets, no wall clock. A seeded schedule ([`faults`])
//! kills, terminates, stops and cuts off nodes, and [`lifecycle`] keeps
//! their Node objects (Ready, tainted, deleted); [`invariants`] checks
//! the README's promises after every event. Everything is drawn from one
//! seed: the same seed gives the same run, bit for bit.
//!
//! Layout: [`world`] runs one seed; [`node`] is one speaker; [`report`]
//! and [`cli`] are what `cargo xtask sim` prints.

pub mod api;
pub mod cli;
pub mod clock;
pub mod faults;
pub mod invariants;
pub mod lifecycle;
pub mod net;
pub mod node;
pub mod report;
pub mod seed;
pub mod world;
