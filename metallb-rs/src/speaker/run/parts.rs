//! The runner made from its parts: what each field holds before the
//! watches have listed - no configuration, nothing announced, not
//! joined.

use super::*;

/// What a [`Runner`] is made of, made in [`run`] in the order their
/// registrations and watches start.
pub(super) struct Parts<'a> {
    pub(super) client: &'a kube::Client,
    pub(super) opts: &'a Options,
    pub(super) queue: Queue<Work>,
    pub(super) stores: Stores,
    pub(super) metrics: Metrics,
    pub(super) l2_metrics: Layer2Metrics,
    pub(super) bgp_metrics: BgpMetrics,
    pub(super) registry: &'a prometheus::Registry,
    pub(super) health: &'a Arc<Health>,
}

impl Runner {
    /// A runner before anything has loaded: no configuration, nothing
    /// announced, not joined.
    pub(super) fn new(p: Parts<'_>) -> Self {
        let Parts {
            client,
            opts,
            queue,
            stores,
            metrics,
            l2_metrics,
            bgp_metrics,
            registry,
            health,
        } = p;
        let reporter = crate::k8s::config_state::Reporter::new(
            client.clone(),
            &opts.namespace,
            &format!("speaker-{}", opts.node),
            json!({ "metallb.io/component-type": "speaker", "metallb.io/node-name": opts.node }),
            "configReconcilerValid",
            metrics.k8s.clone(),
        );
        Runner {
            queue,
            client: client.clone(),
            recorder: Recorder::new(client.clone(), "metallb-speaker", &opts.node),
            opts: opts.clone(),
            stores,
            metrics,
            config: None,
            config_state: reporter,
            announcer: Announcer::new(l2_metrics),
            bgp: bgp::Speaker::new(bgp_metrics),
            exclusions: (Vec::new(), Exclusions::defaults()),
            owner: None,
            node_view: Vec::new(),
            created: PendingWrites::default(),
            alive: BTreeSet::new(),
            isolated: false,
            membership: None,
            gossip_run: None,
            keyring: None,
            registry: registry.clone(),
            renewals: Arc::new(tokio::sync::watch::Sender::new(Record::new(
                std::time::Instant::now(),
            ))),
            renewal: None,
            judging: alive::Judging::default(),
            guard: None,
            health: health.clone(),
            elected: election::memo::Memo::new(),
            uplink: uplink::Tracker::default(),
        }
    }
}
