//! Prometheus metrics under upstream MetalLB's names (the families
//! here), and what serves them: `health` (the probes' state), `serve`
//! (the listeners: HTTPS with authentication and authorization, plain
//! HTTP on loopback, the probes), `access` (who may read, pure),
//! `process` (the standard `process_*` metrics).

use crate::allocator::{Allocator, Family};
use prometheus::{
    Encoder, GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

pub mod access;
mod health;
pub mod process;
mod serve;

pub use futures::future::BoxFuture;

/// The names the shipped alerts (`manifests::prometheus`) read: one
/// source for the families registered here and the rules watching them.
pub mod names {
    /// 1 once a configuration has been loaded.
    pub const CONFIG_LOADED: &str = "metallb_k8s_client_config_loaded_bool";
    /// 1 while running on a configuration older than the latest.
    pub const CONFIG_STALE: &str = "metallb_k8s_client_config_stale_bool";
    /// Usable addresses, per pool.
    pub const ADDRESSES_TOTAL: &str = "metallb_allocator_addresses_total";
    /// Addresses in use, per pool.
    pub const ADDRESSES_IN_USE: &str = "metallb_allocator_addresses_in_use_total";
    /// 1 while a BGP session is established, per peer.
    pub const BGP_SESSION_UP: &str = "metallb_bgp_session_up";
}
pub use health::{Health, STALL_BOUND, stalled_for};
pub use serve::{AddressError, Listener, REVIEW_WAIT, REVIEWS_IN_FLIGHT, Reviewer, Serving, serve};

/// A component's registry: its families register here, beside the
/// process metrics every scrape reads afresh.
pub fn registry() -> Registry {
    let registry = Registry::new();
    registry
        .register(Box::new(process::ProcessCollector::new()))
        .expect("process metrics registered once");
    registry
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    let g = GaugeVec::new(Opts::new(name, help), labels).expect("valid metric definition");
    registry
        .register(Box::new(g.clone()))
        .expect("metric registered once");
    g
}

fn int_counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric definition");
    registry
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

fn int_gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("valid metric definition");
    registry
        .register(Box::new(g.clone()))
        .expect("metric registered once");
    g
}

/// `metallb_k8s_client_*`: what both components report about their view
/// of the API and the configuration.
#[derive(Clone)]
pub struct K8sClientMetrics {
    /// Object updates processed.
    pub updates: IntCounter,
    /// Object updates that failed.
    pub update_errors: IntCounter,
    /// 1 once a configuration has been loaded.
    pub config_loaded: IntGauge,
    /// 1 while running on a configuration older than the latest (invalid) one.
    pub config_stale: IntGauge,
}

impl K8sClientMetrics {
    /// Registers them in `registry`.
    pub fn new(registry: &Registry) -> Self {
        Self {
            updates: int_counter(
                registry,
                "metallb_k8s_client_updates_total",
                "Number of k8s object updates that have been processed.",
            ),
            update_errors: int_counter(
                registry,
                "metallb_k8s_client_update_errors_total",
                "Number of k8s object updates that failed for some reason.",
            ),
            config_loaded: int_gauge(
                registry,
                names::CONFIG_LOADED,
                "1 if the MetalLB configuration was successfully loaded at least once.",
            ),
            config_stale: int_gauge(
                registry,
                names::CONFIG_STALE,
                "1 if running on a stale configuration, because the latest config failed to load.",
            ),
        }
    }
}

/// `metallb_allocator_*`, per pool.
#[derive(Clone)]
pub struct AllocatorMetrics {
    total: GaugeVec,
    total_v4: GaugeVec,
    total_v6: GaugeVec,
    in_use: GaugeVec,
    in_use_v4: GaugeVec,
    in_use_v6: GaugeVec,
}

impl AllocatorMetrics {
    /// Registers them in `registry`.
    pub fn new(registry: &Registry) -> Self {
        let g = |name: &str, help: &str| gauge_vec(registry, name, help, &["pool"]);
        Self {
            total: g(
                names::ADDRESSES_TOTAL,
                "Number of usable IP addresses, per pool",
            ),
            total_v4: g(
                "metallb_allocator_ipv4_addresses_total",
                "Number of usable IPv4 addresses, per pool",
            ),
            total_v6: g(
                "metallb_allocator_ipv6_addresses_total",
                "Number of usable IPv6 addresses, per pool",
            ),
            in_use: g(
                names::ADDRESSES_IN_USE,
                "Number of IP addresses in use, per pool",
            ),
            in_use_v4: g(
                "metallb_allocator_ipv4_addresses_in_use_total",
                "Number of IPv4 addresses in use, per pool",
            ),
            in_use_v6: g(
                "metallb_allocator_ipv6_addresses_in_use_total",
                "Number of IPv6 addresses in use, per pool",
            ),
        }
    }

    /// Sets every pool's gauges from `alloc` and drops pools that are gone.
    pub fn update(&self, alloc: &Allocator, removed: &[String]) {
        for pool in removed {
            for g in [
                &self.total,
                &self.total_v4,
                &self.total_v6,
                &self.in_use,
                &self.in_use_v4,
                &self.in_use_v6,
            ] {
                let _ = g.remove_label_values(&[pool]);
            }
        }
        for pool in alloc.pools() {
            let name = pool.name.as_str();
            let (c4, c6) = (
                alloc.capacity(name, Family::V4),
                alloc.capacity(name, Family::V6),
            );
            let (u4, u6) = (
                alloc.in_use(name, Family::V4),
                alloc.in_use(name, Family::V6),
            );
            let set = |g: &GaugeVec, n: u128| g.with_label_values(&[name]).set(gauge_value(n));
            set(&self.total, c4.saturating_add(c6));
            set(&self.total_v4, c4);
            set(&self.total_v6, c6);
            set(&self.in_use, u4.saturating_add(u6));
            set(&self.in_use_v4, u4);
            set(&self.in_use_v6, u6);
        }
    }
}

/// A count as upstream's float gauges carry it: at most int64's maximum
/// (upstream's counts are int64), which f64 holds approximately.
pub fn gauge_value(n: u128) -> f64 {
    crate::allocator::freeset::saturating_i64(n) as f64
}

fn int_gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric definition");
    registry
        .register(Box::new(g.clone()))
        .expect("metric registered once");
    g
}

fn int_counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric definition");
    registry
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

/// `metallb_layer2_*`: the responders' counters, per address (upstream
/// names), plus what they dropped and why (ours).
#[derive(Clone)]
pub struct Layer2Metrics {
    /// ARP requests / NDP solicitations for an announced address.
    pub requests_received: IntCounterVec,
    /// Replies sent.
    pub responses_sent: IntCounterVec,
    /// Gratuitous ARP / unsolicited NA sent.
    pub gratuitous_sent: IntCounterVec,
    /// Frames not answered, by interface and reason.
    pub dropped: IntCounterVec,
}

impl Layer2Metrics {
    /// Registers them in `registry`.
    pub fn new(registry: &Registry) -> Self {
        Self {
            requests_received: int_counter_vec(
                registry,
                "metallb_layer2_requests_received",
                "Number of layer2 requests received for owned IPs",
                &["ip"],
            ),
            responses_sent: int_counter_vec(
                registry,
                "metallb_layer2_responses_sent",
                "Number of layer2 responses sent for owned IPs",
                &["ip"],
            ),
            gratuitous_sent: int_counter_vec(
                registry,
                "metallb_layer2_gratuitous_sent",
                "Number of gratuitous layer2 packets sent for owned IPs as a result of failovers",
                &["ip"],
            ),
            dropped: int_counter_vec(
                registry,
                "metallb_layer2_packets_dropped_total",
                "ARP/NDP frames received and not answered, by interface and reason",
                &["interface", "reason"],
            ),
        }
    }
}

/// `metallb_bgp_*`: one series per peer (`address:port`), as upstream.
#[derive(Clone)]
pub struct BgpMetrics {
    /// 1 while the session is Established.
    pub session_up: IntGaugeVec,
    /// UPDATEs as upstream's native speaker counts them: see
    /// [`upstream_updates`].
    pub updates: IntCounterVec,
    /// Prefixes the peer has been sent.
    pub announced_prefixes: IntGaugeVec,
    /// Prefixes the peer should have, sent or not (upstream sets it to the
    /// desired count whenever the routes change, and keeps it while the
    /// session is down).
    pub pending_prefixes: IntGaugeVec,
    /// The BFD sessions beside the BGP sessions.
    pub bfd: BfdMetrics,
}

/// `metallb_bfd_*`: one series per BFD peer, labelled as upstream's FRR
/// collector labels them (`peer`: the peer's address without port;
/// `vrf`: always `default`, VRF peering being refused).
#[derive(Clone)]
pub struct BfdMetrics {
    /// 1 while the session is Up.
    pub session_up: IntGaugeVec,
    /// Control packets accepted from the peer.
    pub control_packet_input: IntCounterVec,
    /// Control packets sent.
    pub control_packet_output: IntCounterVec,
    /// Echo packets received (echo mode is refused: stays 0).
    pub echo_packet_input: IntCounterVec,
    /// Echo packets sent (stays 0, as above).
    pub echo_packet_output: IntCounterVec,
    /// Transitions into Up.
    pub session_up_events: IntCounterVec,
    /// Transitions out of Init or Up into Down.
    pub session_down_events: IntCounterVec,
    /// State changes the BGP side heard of (FRR's zebra notifications).
    pub zebra_notifications: IntCounterVec,
    /// Datagrams on the BFD ports that reached no session, by reason;
    /// not an upstream family (FRR drops them silently).
    pub packets_dropped: IntCounterVec,
}

impl BfdMetrics {
    /// Registers them in `registry`.
    pub fn new(registry: &Registry) -> Self {
        let labels = &["peer", "vrf"];
        let counter = |name: &str, help: &str| int_counter_vec(registry, name, help, labels);
        Self {
            session_up: int_gauge_vec(
                registry,
                "metallb_bfd_session_up",
                "BFD session state (1 is up, 0 is down)",
                labels,
            ),
            control_packet_input: counter(
                "metallb_bfd_control_packet_input",
                "Number of received BFD control packets",
            ),
            control_packet_output: counter(
                "metallb_bfd_control_packet_output",
                "Number of sent BFD control packets",
            ),
            echo_packet_input: counter(
                "metallb_bfd_echo_packet_input",
                "Number of received BFD echo packets",
            ),
            echo_packet_output: counter(
                "metallb_bfd_echo_packet_output",
                "Number of sent BFD echo packets",
            ),
            session_up_events: counter(
                "metallb_bfd_session_up_events",
                "Number of BFD session up events",
            ),
            session_down_events: counter(
                "metallb_bfd_session_down_events",
                "Number of BFD session down events",
            ),
            zebra_notifications: counter(
                "metallb_bfd_zebra_notifications",
                "Number of BFD zebra notifications",
            ),
            packets_dropped: int_counter_vec(
                registry,
                "metallb_rs_bfd_packets_dropped_total",
                "BFD datagrams that reached no session, by reason",
                &["reason"],
            ),
        }
    }

    /// Removes a peer's series (its BFD session is gone).
    pub fn forget(&self, peer: &str) {
        let labels = &[peer, BFD_VRF];
        let _ = self.session_up.remove_label_values(labels);
        for c in [
            &self.control_packet_input,
            &self.control_packet_output,
            &self.echo_packet_input,
            &self.echo_packet_output,
            &self.session_up_events,
            &self.session_down_events,
            &self.zebra_notifications,
        ] {
            let _ = c.remove_label_values(labels);
        }
    }
}

/// The `vrf` label of every BFD series.
pub const BFD_VRF: &str = "default";

/// What `metallb_bgp_updates_total` grows by when `announced` prefixes
/// are sent and `withdrawn` withdrawn in one go: upstream's native speaker
/// sends one UPDATE per announced prefix and one for all withdrawals, and
/// counts those; this speaker packs several prefixes per message, but
/// counts the same so that the series means the same.
pub fn upstream_updates(announced: usize, withdrawn: usize) -> u64 {
    announced as u64 + u64::from(withdrawn > 0)
}

impl BgpMetrics {
    /// Registers them in `registry`.
    pub fn new(registry: &Registry) -> Self {
        Self {
            session_up: int_gauge_vec(
                registry,
                names::BGP_SESSION_UP,
                "BGP session state (1 is up, 0 is down)",
                &["peer"],
            ),
            updates: int_counter_vec(
                registry,
                "metallb_bgp_updates_total",
                "Number of BGP UPDATE messages sent",
                &["peer"],
            ),
            announced_prefixes: int_gauge_vec(
                registry,
                "metallb_bgp_announced_prefixes_total",
                "Number of prefixes currently being advertised on the BGP session",
                &["peer"],
            ),
            pending_prefixes: int_gauge_vec(
                registry,
                "metallb_bgp_pending_prefixes_total",
                "Number of prefixes that should be advertised on the BGP session",
                &["peer"],
            ),
            bfd: BfdMetrics::new(registry),
        }
    }

    /// Removes a peer's series (its BGPPeer is gone).
    pub fn forget(&self, peer: &str) {
        let _ = self.session_up.remove_label_values(&[peer]);
        let _ = self.updates.remove_label_values(&[peer]);
        let _ = self.announced_prefixes.remove_label_values(&[peer]);
        let _ = self.pending_prefixes.remove_label_values(&[peer]);
    }
}

/// `metallb_speaker_announced`: 1 per (service, protocol, node, ip) this
/// speaker announces; the series is deleted on withdrawal.
#[derive(Clone)]
pub struct SpeakerMetrics {
    /// The gauge.
    pub announced: IntGaugeVec,
}

impl SpeakerMetrics {
    /// Registers it in `registry`.
    pub fn new(registry: &Registry) -> Self {
        let g = IntGaugeVec::new(
            Opts::new("metallb_speaker_announced", "Services being announced from this node. This is desired state, it does not guarantee that the routing protocols have converged."),
            &["service", "protocol", "node", "ip"],
        )
        .expect("valid metric definition");
        registry
            .register(Box::new(g.clone()))
            .expect("metric registered once");
        Self { announced: g }
    }
}

/// The registry rendered in Prometheus' text format.
pub fn render(registry: &Registry) -> String {
    let mut buf = Vec::new();
    // Encoding into a Vec cannot fail for well-formed metric families.
    let _ = TextEncoder::new().encode(&registry.gather(), &mut buf);
    String::from_utf8(buf).unwrap_or_default()
}

#[cfg(test)]
mod tests;
