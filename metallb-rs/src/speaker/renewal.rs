//! The presence lease renewal: a task beside the speaker's loop, so a
//! long pass never delays a renewal another speaker is waiting for. It
//! renews as [`presence::mode`] says - slowly while gossip agrees, fast
//! while this speaker sees trouble (the loop tells it, [`Renewal::set_trouble`])
//! or another lease carries a fresh trouble mark (it reads the lease
//! cache itself, so following a mark never waits on the loop) - and at
//! once when the mode changes, the loop asks ([`Renewal::renew_now`]) or
//! this node's link goes down or comes back ([`Renewal::set_link_down`]:
//! the lease says so, `presence::LINK_DOWN_ANNOTATION`).
//!
//! Its outcome is how the speaker knows it still reaches the API server
//! ([`Record::api_ok`]). A failed renewal is retried with exponential
//! backoff and jitter ([`RETRY`]), whatever the mode or the loop asks: an
//! API server that answers 429 or 5xx is not helped by every speaker
//! writing five times a second.

use super::liveness::{API_TIMEOUT, LeaseState};
use super::presence::{self, FAST_RENEW, Mark, Marks, Mode};
use crate::k8s::queue::Backoff;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};
use tokio_util::task::AbortOnDropHandle;

/// One renewal waits this long for the API server.
pub const RENEW_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the task looks at the leases for another speaker's mark: a
/// follower's first fast renewal comes this much after the mark at worst
/// (plus the write), well inside the fast period the marker allows.
pub const LOOK: Duration = Duration::from_millis(200);

/// The delays between retries of a failed renewal (before jitter, which
/// adds up to as much again to each), doubling from the first
/// ([`retry_base`]). The first is short: a speaker others doubt must
/// renew within a fast period and the margin of its last renewal, and a
/// single 429 or 5xx answer must not make it look stopped (the kubelet's
/// node lease retries after 200 ms, doubling to 7 s). Past the first few,
/// a failing API server sees at most a write per speaker per two
/// seconds, and a speaker notices the API is back within about
/// [`API_TIMEOUT`].
pub const RETRY: Backoff = Backoff {
    first: Duration::from_millis(100),
    max: FAST_RENEW.saturating_mul(2),
};

/// The delay before jitter of the `nth` retry in a row (the first is 1).
pub fn retry_base(nth: u32) -> Duration {
    let doublings = nth.saturating_sub(1).min(16);
    RETRY.first.saturating_mul(1 << doublings).min(RETRY.max)
}

/// Renewals failing for less than this (from when the first of them was
/// sent) leave the API server reachable ([`Record::api_ok`]): a lone 429
/// or 5xx answer, retried within a fraction of it, is not a cut, while a
/// write that timed out has taken longer, so a cut still shows when its
/// first write gives up.
pub const FAILING_FOR: Duration = FAST_RENEW;

/// What the renewals achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The last successful renewal.
    pub last_ok: Instant,
    /// Its renewal period (the next one was due that much later).
    pub period: Duration,
    /// When the first renewal of those that failed (or timed out) since
    /// it was sent, if one did.
    pub failing_since: Option<Instant>,
    /// How long recent writes took: the longest, decaying by a fifth per
    /// second, at most [`RENEW_TIMEOUT`].
    pub latency: Duration,
    /// The last few successful writes, newest first: the lease version
    /// each wrote ([`version_key`]) and when it was sent. When the watch
    /// shows one of them, it has delivered everything committed before
    /// that write was sent ([`Record::sent_of`]).
    pub witnesses: [Option<(u64, Instant)>; WITNESSES],
}

/// How many successful writes [`Record::witnesses`] keeps: enough for the
/// watch to show one of them while newer ones complete.
pub const WITNESSES: usize = 4;

/// A lease version (resourceVersion, opaque) as [`Record::witnesses`]
/// keeps it: compared for equality only.
pub fn version_key(version: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    version.hash(&mut h);
    h.finish()
}

impl Record {
    /// A record as if a fast renewal had just succeeded: a speaker
    /// starting counts as reaching the API server (it just listed).
    pub fn new(now: Instant) -> Self {
        Self {
            last_ok: now,
            period: FAST_RENEW,
            failing_since: None,
            latency: Duration::ZERO,
            witnesses: [None; WITNESSES],
        }
    }

    /// When the write that made `version` of this speaker's lease was
    /// sent, if it is one of the last few.
    pub fn sent_of(&self, version: &str) -> Option<Instant> {
        let key = version_key(version);
        self.witnesses
            .iter()
            .flatten()
            .find(|(k, _)| *k == key)
            .map(|(_, sent)| *sent)
    }

    /// Whether the API server counts as reachable at `now`: the last
    /// success is under [`API_TIMEOUT`] old - or, when it was a slow
    /// renewal and none has failed since, under that much past its slow
    /// period (the next one was not due yet) - or renewals have been
    /// failing for less than [`FAILING_FOR`]. One slow call does not cut
    /// a speaker off, nor does one error answer retried at once; a
    /// failure that lasts ends the slow period's grace, and a speaker
    /// that loses sight of the others renews at once, so it knows within
    /// [`API_TIMEOUT`] of its last success either way.
    pub fn api_ok(&self, now: Instant) -> bool {
        now < self.api_lost_at()
    }

    /// The instant [`Record::api_ok`] turns false unless a renewal ends
    /// before it: whoever acts on losing the API server (the isolation
    /// guard) wakes then rather than at its next look.
    pub fn api_lost_at(&self) -> Instant {
        let slow_grace = self.period.saturating_sub(FAST_RENEW);
        match self.failing_since {
            None => self.last_ok + API_TIMEOUT + slow_grace,
            Some(first) => (self.last_ok + API_TIMEOUT).max(first + FAILING_FOR),
        }
    }
}

/// Whether to renew now: the mode changed since the last renewal written
/// (`written`), the period ran out (`due`), or the loop asked - except
/// while retrying a failure (`retrying`), when only the backoff's `due`
/// counts.
pub fn renew_due(
    written: Option<Mode>,
    mode: Mode,
    due: Instant,
    now: Instant,
    asked: bool,
    retrying: bool,
) -> bool {
    now >= due || (!retrying && (written != Some(mode) || asked))
}

/// When to renew, without I/O: the renewal task and the simulator feed
/// it the time, the leases and each write's outcome, and write the lease
/// when [`Renewer::poll`] says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renewer {
    /// The mode of the last renewal written, `None` after a failure.
    written: Option<Mode>,
    /// When the next renewal (or retry) is due.
    due: Instant,
    /// The last renewal failed: only the backoff's `due` counts.
    retrying: bool,
    /// The loop asked for a renewal now ([`Renewer::ask`]).
    asked: bool,
    /// This node's link counts as down ([`Renewer::set_link_down`]).
    link_down: bool,
    /// The link state the last renewal written said, `None` after a
    /// failure.
    written_link: Option<bool>,
    /// The link state of the write [`Renewer::poll`] last asked for.
    polled_link: bool,
    /// The mark the last renewal written carried, `None` after a failure.
    written_mark: Option<Option<Mark>>,
    /// The mark of the write [`Renewer::poll`] last asked for.
    polled_mark: Option<Mark>,
    /// What the renewals achieved.
    record: Record,
    /// When the write [`Renewer::poll`] last asked for started.
    started: Instant,
    /// When the last write ended (the latency estimate decays from then).
    ended: Instant,
}

impl Renewer {
    /// A speaker starting at `now`: it renews at once.
    pub fn new(now: Instant) -> Self {
        Self {
            written: None,
            due: now,
            retrying: false,
            asked: false,
            link_down: false,
            written_link: None,
            polled_link: false,
            written_mark: None,
            polled_mark: None,
            record: Record::new(now),
            started: now,
            ended: now,
        }
    }

    /// Renew at the next poll (unless retrying a failure).
    pub fn ask(&mut self) {
        self.asked = true;
    }

    /// This node's link counts as down (or no longer does): the next poll
    /// writes it at once, whatever the mode (unless retrying a failure).
    pub fn set_link_down(&mut self, down: bool) {
        self.link_down = down;
    }

    /// Whether the renewal [`Renewer::poll`] last asked for says the link
    /// is down.
    pub fn write_says_link_down(&self) -> bool {
        self.polled_link
    }

    /// The mark the renewal [`Renewer::poll`] last asked for carries.
    pub fn write_says_mark(&self) -> Option<&Mark> {
        self.polled_mark.as_ref()
    }

    /// The mode to write the lease in now, if a renewal is due at `now`
    /// ([`renew_due`], with the mode [`presence::mode`] picks: marked
    /// while this speaker doubts members (`mark`), following the others'
    /// `marks` that name it; a change of the link state or of the names
    /// marked since the last renewal written counts as an ask). Consumes
    /// a pending [`Renewer::ask`]; the write says the link state
    /// [`Renewer::write_says_link_down`] and the mark
    /// [`Renewer::write_says_mark`] return.
    pub fn poll(
        &mut self,
        now: Instant,
        mark: Option<&Mark>,
        leases: &BTreeMap<String, LeaseState>,
        marks: &BTreeMap<String, Mark>,
        me: &str,
    ) -> Option<Mode> {
        let mode = presence::mode(mark.is_some(), leases, marks, me, now);
        let asked = std::mem::take(&mut self.asked)
            || self.written_link.is_some_and(|w| w != self.link_down)
            || self
                .written_mark
                .as_ref()
                .is_some_and(|w| w.as_ref() != mark);
        self.polled_link = self.link_down;
        self.polled_mark = mark.cloned();
        let due = renew_due(self.written, mode, self.due, now, asked, self.retrying);
        if due {
            self.started = now;
        }
        due.then_some(mode)
    }

    /// A write in `mode` finished at `now`, `ok` or not; a failure is
    /// retried `retry_delay` later (the next of [`retries`]).
    pub fn done(&mut self, now: Instant, mode: Mode, ok: bool, retry_delay: Duration) {
        let took = now.saturating_duration_since(self.started);
        // A fifth less per fast period since the last write: a slow spike
        // long past no longer widens every deadline while renewals are
        // 15 s apart, and a server that stays slow shows in each write.
        let periods =
            now.saturating_duration_since(self.ended).as_secs_f64() / FAST_RENEW.as_secs_f64();
        let latency = took
            .max(self.record.latency.mul_f64(0.8f64.powf(periods)))
            .min(RENEW_TIMEOUT);
        self.ended = now;
        if ok {
            self.record = Record {
                last_ok: now,
                period: mode.period(),
                failing_since: None,
                latency,
                witnesses: self.record.witnesses,
            };
            self.written = Some(mode);
            self.written_link = Some(self.polled_link);
            self.written_mark = Some(self.polled_mark.clone());
            self.retrying = false;
            // Timed from when the write started: renewals stay a period
            // apart however long each takes (back to back past that).
            self.due = (self.started + mode.period()).max(now);
        } else {
            self.record.failing_since.get_or_insert(self.started);
            self.record.latency = latency;
            self.written = None;
            self.written_link = None;
            self.written_mark = None;
            self.retrying = true;
            self.due = now + retry_delay;
        }
    }

    /// The successful write [`Renewer::done`] last took in made `version`
    /// of the lease: a witness of how current the lease watch is.
    pub fn wrote(&mut self, version: &str) {
        let w = &mut self.record.witnesses;
        w.rotate_right(1);
        w[0] = Some((version_key(version), self.started));
    }

    /// When the next renewal or retry is due (a mode change may come
    /// earlier).
    pub fn next_wakeup(&self) -> Instant {
        self.due
    }

    /// What the renewals achieved.
    pub fn record(&self) -> Record {
        self.record
    }
}

/// The delays of successive retries of failed renewals, jittered.
pub fn retries() -> impl Iterator<Item = Duration> + Send {
    RETRY.delays()
}

/// The running renewal task and what it shares with the loop.
pub struct Renewal {
    record: Arc<watch::Sender<Record>>,
    trouble: watch::Sender<Option<Mark>>,
    link_down: watch::Sender<Option<String>>,
    asked: Arc<Notify>,
    written: Arc<Notify>,
    _task: AbortOnDropHandle<()>,
}

impl Renewal {
    /// Starts renewing `node`'s lease through `api`, reading the others'
    /// leases from `leases` (the marks of those whose node is in `nodes`);
    /// every renewal records gossip run `gossip_run`.
    pub fn start(
        api: Api<Lease>,
        node: String,
        leases: Store<Lease>,
        nodes: Store<Node>,
        record: Arc<watch::Sender<Record>>,
        gossip_run: Option<u64>,
    ) -> Self {
        let (trouble, trouble_rx) = watch::channel(None);
        let (link_down, link_rx) = watch::channel(None);
        let asked = Arc::new(Notify::new());
        let written = Arc::new(Notify::new());
        let task = tokio::spawn(run(
            api,
            node,
            leases,
            nodes,
            record.clone(),
            Signals {
                trouble: trouble_rx,
                link_down: link_rx,
                asked: asked.clone(),
                written: written.clone(),
                run: gossip_run,
            },
        ));
        Self {
            record,
            trouble,
            link_down,
            asked,
            written,
            _task: AbortOnDropHandle::new(task),
        }
    }

    /// The members this speaker doubts, as its lease's mark names them
    /// (`None`: it doubts nobody).
    pub fn set_mark(&self, mark: Option<Mark>) {
        self.trouble
            .send_if_modified(|t| std::mem::replace(t, mark.clone()) != mark);
    }

    /// This node's link counts as down (`Some(interface)`) or no longer
    /// does: the lease says so at once.
    pub fn set_link_down(&self, down: Option<String>) {
        self.link_down
            .send_if_modified(|d| std::mem::replace(d, down.clone()) != down);
    }

    /// Renew at once (a renewal seen back through the watch settles a
    /// member gossip declared down: see `liveness::awaits_evidence`).
    pub fn renew_now(&self) {
        self.asked.notify_one();
    }

    /// Notified after each successful write: the loop judges again, as
    /// the write may be the one its lease watch was waiting to show back
    /// (`liveness::Context::leases_seen`).
    pub fn written(&self) -> Arc<Notify> {
        self.written.clone()
    }

    /// The shared record of renewals.
    pub fn record(&self) -> Record {
        *self.record.borrow()
    }
}

/// What the loop tells the renewal task.
struct Signals {
    trouble: watch::Receiver<Option<Mark>>,
    link_down: watch::Receiver<Option<String>>,
    asked: Arc<Notify>,
    /// Notified after each successful write.
    written: Arc<Notify>,
    /// This run's gossip number, kept on the lease.
    run: Option<u64>,
}

async fn run(
    api: Api<Lease>,
    node: String,
    leases: Store<Lease>,
    nodes: Store<Node>,
    record: Arc<watch::Sender<Record>>,
    signals: Signals,
) {
    let Signals {
        mut trouble,
        link_down: mut link,
        asked,
        written,
        run,
    } = signals;
    let mut seen = BTreeMap::new();
    let mut renewer = Renewer::new(Instant::now());
    // The delays of the retries since the last success.
    let mut delays = retries();
    loop {
        let now = Instant::now();
        let cached = leases.state();
        let states = presence::states(cached.iter().map(|l| &**l), &mut seen, now);
        let marks = presence::marks(cached.iter().map(|l| &**l), |n| {
            nodes.get(&ObjectRef::new(n)).is_some()
        });
        let mark = trouble.borrow_and_update().clone();
        let iface = link.borrow_and_update().clone();
        renewer.set_link_down(iface.is_some());
        if let Some(mode) = renewer.poll(now, mark.as_ref(), &states, &marks, &node) {
            let write = Marks {
                trouble: renewer.write_says_mark(),
                link_down: iface.as_deref().filter(|_| renewer.write_says_link_down()),
                run,
            };
            let outcome =
                tokio::time::timeout(RENEW_TIMEOUT, presence::renew(&api, &node, mode, write))
                    .await;
            let ok = matches!(outcome, Ok(Ok(_)));
            let mut version = None;
            match outcome {
                Ok(Ok(written)) => {
                    delays = retries();
                    version = written.version;
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "could not renew the presence lease"),
                Err(_) => tracing::debug!("renewing the presence lease timed out"),
            }
            let delay = if ok {
                Duration::ZERO
            } else {
                delays.next().unwrap_or(RETRY.max)
            };
            renewer.done(Instant::now(), mode, ok, delay);
            if let Some(v) = version {
                renewer.wrote(&v);
            }
            // Those who watch it (the isolation guard) wake on the change.
            record.send_replace(renewer.record());
            // After the record: the loop reads it when notified.
            if ok {
                written.notify_one();
            }
        }
        let wake = renewer.next_wakeup().min(Instant::now() + LOOK);
        tokio::select! {
            () = tokio::time::sleep_until(wake.into()) => {}
            Ok(()) = trouble.changed() => {}
            Ok(()) = link.changed() => {}
            () = asked.notified() => renewer.ask(),
        }
    }
}

#[cfg(test)]
mod tests;
