//! Gossip metrics for the speaker's `/metrics`: members, probes and
//! dropped datagrams by reason, read from the task's counters and view
//! at scrape time (so the gossip loop never touches the registry).

use super::{DropReason, View};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounter, IntCounterVec, IntGaugeVec, Opts};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::watch;

/// Datagrams dropped since start, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// See [`DropReason::Malformed`].
    pub malformed: u64,
    /// See [`DropReason::Auth`].
    pub auth: u64,
    /// See [`DropReason::Decode`].
    pub decode: u64,
    /// See [`DropReason::Rejected`].
    pub rejected: u64,
    /// See [`DropReason::UnknownSender`].
    pub unknown_sender: u64,
    /// See [`DropReason::Replayed`].
    pub replayed: u64,
    /// See [`DropReason::RateLimited`].
    pub rate_limited: u64,
}

impl Dropped {
    /// The count for `reason`.
    pub fn get(&self, reason: DropReason) -> u64 {
        match reason {
            DropReason::Malformed => self.malformed,
            DropReason::Auth => self.auth,
            DropReason::Decode => self.decode,
            DropReason::Rejected => self.rejected,
            DropReason::UnknownSender => self.unknown_sender,
            DropReason::Replayed => self.replayed,
            DropReason::RateLimited => self.rate_limited,
        }
    }

    /// All reasons together.
    pub fn total(&self) -> u64 {
        DropReason::ALL.iter().map(|r| self.get(*r)).sum()
    }
}

/// The task's counters, read by [`super::Membership::dropped`].
#[derive(Debug, Default)]
pub(super) struct Counters {
    malformed: AtomicU64,
    auth: AtomicU64,
    decode: AtomicU64,
    rejected: AtomicU64,
    unknown_sender: AtomicU64,
    replayed: AtomicU64,
    rate_limited: AtomicU64,
    probes: AtomicU64,
}

impl Counters {
    pub(super) fn probe(&self) {
        self.probes.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn probes(&self) -> u64 {
        self.probes.load(Ordering::Relaxed)
    }

    pub(super) fn count(&self, reason: DropReason) {
        let counter = match reason {
            DropReason::Malformed => &self.malformed,
            DropReason::Auth => &self.auth,
            DropReason::Decode => &self.decode,
            DropReason::Rejected => &self.rejected,
            DropReason::UnknownSender => &self.unknown_sender,
            DropReason::Replayed => &self.replayed,
            DropReason::RateLimited => &self.rate_limited,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> Dropped {
        Dropped {
            malformed: self.malformed.load(Ordering::Relaxed),
            auth: self.auth.load(Ordering::Relaxed),
            decode: self.decode.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            unknown_sender: self.unknown_sender.load(Ordering::Relaxed),
            replayed: self.replayed.load(Ordering::Relaxed),
            rate_limited: self.rate_limited.load(Ordering::Relaxed),
        }
    }
}

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
