//! Gossip metrics for the speaker's `/metrics`: members, probes and
//! dropped datagrams by reason, read from the task's counters and view
//! at scrape time (so the gossip loop never touches the registry).

use super::{Counters, DropReason, View};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounter, IntCounterVec, IntGaugeVec, Opts};
use std::sync::Arc;
use tokio::sync::watch;

/// A [`Collector`] over one membership (see
/// [`super::Membership::metrics`]).
pub struct GossipMetrics {
    pub(super) counters: Arc<Counters>,
    view: watch::Receiver<View>,
    members: IntGaugeVec,
    probes: IntCounter,
    dropped: IntCounterVec,
}

impl GossipMetrics {
    pub(super) fn new(counters: Arc<Counters>, view: watch::Receiver<View>) -> Self {
        let members = IntGaugeVec::new(
            Opts::new(
                "metallb_rs_gossip_members",
                "Speakers this speaker's gossip holds alive (itself included) or down.",
            ),
            &["state"],
        )
        .expect("valid metric definition");
        let probes = IntCounter::new(
            "metallb_rs_gossip_probes_total",
            "Failure-detection probes this speaker started.",
        )
        .expect("valid metric definition");
        let dropped = IntCounterVec::new(
            Opts::new(
                "metallb_rs_gossip_dropped_datagrams_total",
                "Received gossip datagrams dropped, by reason.",
            ),
            &["reason"],
        )
        .expect("valid metric definition");
        Self {
            counters,
            view,
            members,
            probes,
            dropped,
        }
    }
}

/// Raises `counter` to `value` (the task's counters only grow).
fn catch_up(counter: &IntCounter, value: u64) {
    counter.inc_by(value.saturating_sub(counter.get()));
}

impl Collector for GossipMetrics {
    fn desc(&self) -> Vec<&Desc> {
        let mut d = self.members.desc();
        d.extend(self.probes.desc());
        d.extend(self.dropped.desc());
        d
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let (alive, down) = {
            let v = self.view.borrow();
            (v.alive.len(), v.down.len())
        };
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.members.with_label_values(&["alive"]).set(count(alive));
        self.members.with_label_values(&["down"]).set(count(down));
        catch_up(&self.probes, self.counters.probes());
        let dropped = self.counters.snapshot();
        for reason in DropReason::ALL {
            catch_up(
                &self.dropped.with_label_values(&[reason.as_str()]),
                dropped.get(reason),
            );
        }
        let mut out = self.members.collect();
        out.extend(self.probes.collect());
        out.extend(self.dropped.collect());
        out
    }
}
