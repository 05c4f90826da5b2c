//! Prometheus metrics under upstream MetalLB's names, and the HTTP
//! endpoints both components serve: `/metrics`, `/healthz`, `/readyz`.

use crate::allocator::{Allocator, Family};
use prometheus::{
    Encoder, GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
                "metallb_k8s_client_config_loaded_bool",
                "1 if the MetalLB configuration was successfully loaded at least once.",
            ),
            config_stale: int_gauge(
                registry,
                "metallb_k8s_client_config_stale_bool",
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
                "metallb_allocator_addresses_total",
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
                "metallb_allocator_addresses_in_use_total",
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
}

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
                "metallb_bgp_session_up",
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

/// `/healthz` fails once the component's loop has not beaten for this
/// long. Loops beat on every pass, tick and service processed, and each
/// API call gives up after `k8s::call::API_CALL_TIMEOUT`, so a loop that
/// makes progress - even against an API server that stopped answering -
/// beats far more often; only a loop stuck for good goes this long.
pub const STALL_BOUND: Duration = Duration::from_secs(60);

/// Liveness and readiness as the probes see them.
#[derive(Debug, Default)]
pub struct Health {
    ready: AtomicBool,
    /// The loop's last heartbeat (none before its first).
    beat: std::sync::Mutex<Option<Instant>>,
    /// Readiness gates still closed, with why (the webhook: no
    /// certificate yet, or its CA not yet in the configuration).
    held: std::sync::Mutex<std::collections::BTreeMap<&'static str, String>>,
}

/// How long the loop has been stalled at `now`, when longer than
/// `bound` since its `last` beat; never before the first beat (startup is
/// readiness's business).
pub fn stalled_for(last: Option<Instant>, now: Instant, bound: Duration) -> Option<Duration> {
    let since = now.saturating_duration_since(last?);
    (since > bound).then_some(since)
}

impl Health {
    /// The loop made progress (a pass, a tick, a service processed).
    pub fn beat(&self) {
        if let Ok(mut b) = self.beat.lock() {
            *b = Some(Instant::now());
        }
    }

    /// How long the loop has been stalled, if beyond [`STALL_BOUND`].
    pub fn stalled(&self) -> Option<Duration> {
        let last = self.beat.lock().ok().and_then(|b| *b);
        stalled_for(last, Instant::now(), STALL_BOUND)
    }

    /// Marks the component ready (initial sync done) or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Whether the component is ready: its initial sync done and no gate
    /// held.
    pub fn is_ready(&self) -> bool {
        self.not_ready().is_none()
    }

    /// Why the component is not ready, when it is not.
    pub fn not_ready(&self) -> Option<String> {
        if !self.ready.load(Ordering::Relaxed) {
            return Some("initial sync in progress".into());
        }
        let held = self.held.lock().ok()?;
        let (gate, why) = held.iter().next()?;
        Some(format!("{gate}: {why}"))
    }

    /// Holds readiness until [`Health::release`] of `gate`.
    pub fn hold(&self, gate: &'static str, why: impl Into<String>) {
        if let Ok(mut h) = self.held.lock() {
            h.insert(gate, why.into());
        }
    }

    /// Updates why `gate` is held, when it still is (once released, a
    /// later failure does not take readiness back).
    pub fn hold_if_held(&self, gate: &'static str, why: impl Into<String>) {
        if let Ok(mut h) = self.held.lock()
            && let Some(w) = h.get_mut(gate)
        {
            *w = why.into();
        }
    }

    /// Releases `gate`.
    pub fn release(&self, gate: &'static str) {
        if let Ok(mut h) = self.held.lock() {
            h.remove(gate);
        }
    }
}

/// The registry rendered in Prometheus' text format.
pub fn render(registry: &Registry) -> String {
    let mut buf = Vec::new();
    // Encoding into a Vec cannot fail for well-formed metric families.
    let _ = TextEncoder::new().encode(&registry.gather(), &mut buf);
    String::from_utf8(buf).unwrap_or_default()
}

/// Serves `/metrics` on `metrics` and `/healthz` + `/readyz` on `health`
/// (the same address is fine); returns only on a server error.
pub async fn serve(
    metrics: Option<SocketAddr>,
    health_addr: Option<SocketAddr>,
    registry: Registry,
    health: Arc<Health>,
) -> anyhow::Result<()> {
    use axum::http::StatusCode;
    use axum::routing::get;
    let registry = Arc::new(registry);
    let metrics_router = {
        let registry = registry.clone();
        axum::Router::new().route(
            "/metrics",
            get(move || {
                let registry = registry.clone();
                async move { render(&registry) }
            }),
        )
    };
    let live = health.clone();
    let health_router = axum::Router::new()
        .route(
            "/healthz",
            get(move || {
                let live = live.clone();
                async move {
                    match live.stalled() {
                        None => (StatusCode::OK, "ok".to_owned()),
                        Some(d) => (
                            StatusCode::SERVICE_UNAVAILABLE,
                            format!("loop stalled: no progress for {} s", d.as_secs()),
                        ),
                    }
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let health = health.clone();
                async move {
                    match health.not_ready() {
                        None => (StatusCode::OK, "ready".to_owned()),
                        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}")),
                    }
                }
            }),
        );
    let mut servers = Vec::new();
    match (metrics, health_addr) {
        (Some(m), Some(h)) if m == h => servers.push((m, metrics_router.merge(health_router))),
        (m, h) => {
            servers.extend(m.map(|a| (a, metrics_router)));
            servers.extend(h.map(|a| (a, health_router)));
        }
    }
    let mut tasks = Vec::new();
    for (addr, router) in servers {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("binding {addr} for metrics/health: {e} (choose another address with --metrics-bind-address / --health-bind-address)"))?;
        tracing::info!(%addr, "serving metrics/health");
        tasks.push(tokio::spawn(
            async move { axum::serve(listener, router).await },
        ));
    }
    for t in tasks {
        t.await??;
    }
    // Nothing to serve (both disabled): never end, like a server.
    std::future::pending::<()>().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Pool;
    use std::collections::BTreeMap;

    #[test]
    fn allocator_gauges_use_upstream_names_and_drop_removed_pools() {
        let registry = Registry::new();
        let m = AllocatorMetrics::new(&registry);
        let mut pools = BTreeMap::new();
        pools.insert(
            "p".to_owned(),
            Pool {
                name: "p".into(),
                cidrs: vec![
                    "10.0.0.0/30".parse().expect("cidr"),
                    "fc00::/127".parse().expect("cidr"),
                ],
                auto_assign: true,
                avoid_buggy_ips: false,
                allocation: None,
                aggregation_floor: (30, 127),
            },
        );
        let mut a = Allocator::new();
        a.set_pools(&pools);
        a.allocate(&crate::allocator::ServiceInfo::new("ns", "s"))
            .expect("ip");
        m.update(&a, &[]);
        let text = render(&registry);
        assert!(
            text.contains("metallb_allocator_addresses_total{pool=\"p\"} 6"),
            "{text}"
        );
        assert!(
            text.contains("metallb_allocator_ipv4_addresses_total{pool=\"p\"} 4"),
            "{text}"
        );
        assert!(
            text.contains("metallb_allocator_ipv6_addresses_total{pool=\"p\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("metallb_allocator_addresses_in_use_total{pool=\"p\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("metallb_allocator_ipv4_addresses_in_use_total{pool=\"p\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("metallb_allocator_ipv6_addresses_in_use_total{pool=\"p\"} 0"),
            "{text}"
        );
        a.set_pools(&BTreeMap::new());
        m.update(&a, &["p".to_owned()]);
        assert!(!render(&registry).contains("pool=\"p\""));
    }

    /// Upstream's `updatePoolStats`/`poolCount`: gauges never exceed
    /// int64's maximum, however large the pool (upstream's int64 counts).
    #[test]
    fn update_pool_stats_clamps_to_int64() {
        let registry = Registry::new();
        let m = AllocatorMetrics::new(&registry);
        let pool = |name: &str, cidrs: &[&str]| Pool {
            name: name.into(),
            cidrs: cidrs.iter().map(|c| c.parse().expect("cidr")).collect(),
            auto_assign: true,
            avoid_buggy_ips: false,
            allocation: None,
            aggregation_floor: (24, 32),
        };
        let mut pools = BTreeMap::new();
        pools.insert(
            "huge".to_owned(),
            pool("huge", &["10.0.0.0/24", "fc00::/32", "fd00::/48"]),
        );
        let mut a = Allocator::new();
        a.set_pools(&pools);
        m.update(&a, &[]);
        let max = i64::MAX as f64;
        for g in [&m.total, &m.total_v6] {
            assert_eq!(g.with_label_values(&["huge"]).get(), max);
        }
        assert_eq!(m.total_v4.with_label_values(&["huge"]).get(), 256.0);
    }

    /// Upstream's native `sendUpdates`: one per announced prefix, one per
    /// batch of withdrawals.
    #[test]
    fn bgp_updates_counted_as_upstream() {
        assert_eq!(upstream_updates(0, 0), 0);
        assert_eq!(upstream_updates(3, 0), 3);
        assert_eq!(upstream_updates(0, 5), 1);
        assert_eq!(upstream_updates(2, 5), 3);
    }

    #[rstest::rstest]
    #[case::before_the_first_beat(None, 1000, None)]
    #[case::fresh(Some(0), 30, None)]
    #[case::at_the_bound(Some(0), 60, None)]
    #[case::stalled(Some(0), 61, Some(61))]
    fn healthz_fails_once_the_loop_stalls(
        #[case] last: Option<u64>,
        #[case] now: u64,
        #[case] want: Option<u64>,
    ) {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(
            stalled_for(last.map(at), at(now), STALL_BOUND),
            want.map(Duration::from_secs)
        );
    }

    #[test]
    fn k8s_client_metrics_names() {
        let registry = Registry::new();
        let m = K8sClientMetrics::new(&registry);
        m.updates.inc();
        m.config_loaded.set(1);
        let text = render(&registry);
        for name in [
            "metallb_k8s_client_updates_total 1",
            "metallb_k8s_client_update_errors_total 0",
            "metallb_k8s_client_config_loaded_bool 1",
            "metallb_k8s_client_config_stale_bool 0",
        ] {
            assert!(text.contains(name), "{name} missing in {text}");
        }
    }
}
