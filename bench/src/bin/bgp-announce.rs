//! `bgp-announce`: one metallb-rs BGP session (the speaker's own
//! `Session`) announcing `--count` consecutive /32s from `--first` to
//! `--peer`, until SIGTERM or SIGINT, when it sends a Cease. The announcer
//! of `cargo xtask bench bgp`, started inside the bench's announcer
//! namespace with `ip netns exec`.

use anyhow::Result;
use clap::Parser;
use metallb_rs::config::{Peer, PeerAddress, PeerAsn};
use metallb_rs::metrics::BgpMetrics;
use metallb_rs::net::bgp::{Notification, code};
use metallb_rs::speaker::bgp::session::{DesiredRoutes, Session};
use metallb_rs::speaker::bgp::{NodeAddresses, session_config};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

/// One BGP session announcing consecutive /32s.
#[derive(Parser, Debug)]
#[command(name = "bgp-announce")]
struct Args {
    /// The router's address
    #[arg(long)]
    peer: IpAddr,
    /// Our AS and the router's (iBGP)
    #[arg(long, default_value_t = devenv::frr::ASN)]
    asn: u32,
    /// The router's AS when it differs (eBGP)
    #[arg(long)]
    peer_asn: Option<u32>,
    /// TCP port of the router
    #[arg(long, default_value_t = 179)]
    port: u16,
    /// Prefixes to announce
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    /// The first prefix's address; the rest follow it
    #[arg(long, default_value_t = lab_bench::bgp::FIRST_PREFIX)]
    first: Ipv4Addr,
}

fn main() -> Result<()> {
    let started = Instant::now();
    let args = Args::parse();
    metallb_rs::logging::init(
        metallb_rs::logging::LogFormat::Text,
        metallb_rs::logging::LogLevel::Info,
    );
    let table = DesiredRoutes::new(lab_bench::bgp::announce_table(args.first, args.count)?);
    let peer = Peer {
        name: "bench".into(),
        my_asn: args.asn,
        local_asn: None,
        peer_asn: PeerAsn::Fixed(args.peer_asn.unwrap_or(args.asn)),
        address: PeerAddress::Ip(args.peer),
        port: args.port,
        source_address: None,
        hold_time: None,
        keepalive_time: None,
        connect_time: Some(Duration::from_secs(1)),
        router_id: None,
        node_selectors: Vec::new(),
        password: None,
        ebgp_multi_hop: false,
        dual_stack_address_family: false,
        bfd_profile: None,
        graceful_restart: false,
    };
    let config = session_config(&peer, NodeAddresses::default());
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let session = Session::start(config, table, BgpMetrics::new(&prometheus::Registry::new()));
        let mut status = session.subscribe();
        let count = args.count;
        let report = tokio::spawn(async move {
            if status.wait_for(|s| s.established).await.is_ok() {
                println!("established {:.1?} after start", started.elapsed());
            }
            if status.wait_for(|s| s.announced >= count).await.is_ok() {
                println!(
                    "{count} prefixes written to the socket {:.1?} after start",
                    started.elapsed()
                );
            }
        });
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
        report.abort();
        session
            .stop(Notification::new(
                code::CEASE,
                code::CEASE_ADMIN_SHUTDOWN,
                [],
            ))
            .await;
        anyhow::Ok(())
    })
}
