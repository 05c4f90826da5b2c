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
use std::sync::{Arc, Mutex};
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
/// adds up to as much again to each): a failing API server sees at most
/// one write per speaker per second, and a speaker notices the API is
/// back within about [`API_TIMEOUT`].
pub const RETRY: Backoff = Backoff {
    first: FAST_RENEW,
    max: FAST_RENEW.saturating_mul(2),
};

/// What the renewals achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The last successful renewal.
    pub last_ok: Instant,
    /// Its renewal period (the next one was due that much later).
    pub period: Duration,
    /// A renewal failed or timed out after it.
    pub failed_since: bool,
    /// How long recent writes took: the longest, decaying by a fifth per
    /// second, at most [`RENEW_TIMEOUT`].
    pub latency: Duration,
}

impl Record {
    /// A record as if a fast renewal had just succeeded: a speaker
    /// starting counts as reaching the API server (it just listed).
    pub fn new(now: Instant) -> Self {
        Self {
            last_ok: now,
            period: FAST_RENEW,
            failed_since: false,
            latency: Duration::ZERO,
        }
    }

    /// Whether the API server counts as reachable at `now`: the last
    /// success is under [`API_TIMEOUT`] old - or, when it was a slow
    /// renewal and none has failed since, under that much past its slow
    /// period (the next one was not due yet). One slow call does not cut
    /// a speaker off; a failed one ends the slow period's grace, and a
    /// speaker that loses sight of the others renews at once, so it knows
    /// within [`API_TIMEOUT`] of its last success either way.
    pub fn api_ok(&self, now: Instant) -> bool {
        let age = now.saturating_duration_since(self.last_ok);
        let slack = if self.failed_since {
            Duration::ZERO
        } else {
            self.period.saturating_sub(FAST_RENEW)
        };
        age < API_TIMEOUT + slack
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
                failed_since: false,
                latency,
            };
            self.written = Some(mode);
            self.written_link = Some(self.polled_link);
            self.written_mark = Some(self.polled_mark.clone());
            self.retrying = false;
            // Timed from when the write started: renewals stay a period
            // apart however long each takes (back to back past that).
            self.due = (self.started + mode.period()).max(now);
        } else {
            self.record.failed_since = true;
            self.record.latency = latency;
            self.written = None;
            self.written_link = None;
            self.written_mark = None;
            self.retrying = true;
            self.due = now + retry_delay;
        }
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
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::new()
        .with_min_delay(RETRY.first)
        .with_max_delay(RETRY.max)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

/// The running renewal task and what it shares with the loop.
pub struct Renewal {
    record: Arc<Mutex<Record>>,
    trouble: watch::Sender<Option<Mark>>,
    link_down: watch::Sender<Option<String>>,
    asked: Arc<Notify>,
    _task: AbortOnDropHandle<()>,
}

impl Renewal {
    /// Starts renewing `node`'s lease through `api`, reading the others'
    /// leases from `leases` (the marks of those whose node is in `nodes`).
    pub fn start(
        api: Api<Lease>,
        node: String,
        leases: Store<Lease>,
        nodes: Store<Node>,
        record: Arc<Mutex<Record>>,
    ) -> Self {
        let (trouble, trouble_rx) = watch::channel(None);
        let (link_down, link_rx) = watch::channel(None);
        let asked = Arc::new(Notify::new());
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
            },
        ));
        Self {
            record,
            trouble,
            link_down,
            asked,
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

    /// The shared record of renewals.
    pub fn record(&self) -> Arc<Mutex<Record>> {
        self.record.clone()
    }
}

/// What the loop tells the renewal task.
struct Signals {
    trouble: watch::Receiver<Option<Mark>>,
    link_down: watch::Receiver<Option<String>>,
    asked: Arc<Notify>,
}

async fn run(
    api: Api<Lease>,
    node: String,
    leases: Store<Lease>,
    nodes: Store<Node>,
    record: Arc<Mutex<Record>>,
    signals: Signals,
) {
    let Signals {
        mut trouble,
        link_down: mut link,
        asked,
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
            };
            let outcome =
                tokio::time::timeout(RENEW_TIMEOUT, presence::renew(&api, &node, mode, write))
                    .await;
            let ok = matches!(outcome, Ok(Ok(())));
            match outcome {
                Ok(Ok(())) => delays = retries(),
                Ok(Err(e)) => tracing::debug!(error = %e, "could not renew the presence lease"),
                Err(_) => tracing::debug!("renewing the presence lease timed out"),
            }
            let delay = if ok {
                Duration::ZERO
            } else {
                delays.next().unwrap_or(RETRY.max)
            };
            renewer.done(Instant::now(), mode, ok, delay);
            if let Ok(mut r) = record.lock() {
                *r = renewer.record();
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
mod tests {
    use super::*;
    use rstest::rstest;

    fn at(t0: Instant, secs: f64) -> Instant {
        t0 + Duration::from_secs_f64(secs)
    }

    /// A success at 0 in `mode`, judged `secs` later.
    #[rstest]
    #[case::fast_just_renewed(Mode::Follow, false, 0.5, true)]
    #[case::fast_within_the_timeout(Mode::Trouble, false, 3.9, true)]
    #[case::fast_past_the_timeout(Mode::Trouble, false, 4.1, false)]
    #[case::slow_next_not_due_yet(Mode::Slow, false, 14.0, true)]
    #[case::slow_within_its_period_and_the_timeout(Mode::Slow, false, 17.9, true)]
    #[case::slow_past_its_period_and_the_timeout(Mode::Slow, false, 18.1, false)]
    #[case::a_failure_after_a_recent_success_is_not_yet_a_cut(Mode::Slow, true, 1.0, true)]
    #[case::a_failure_ends_the_slow_grace(Mode::Slow, true, 4.1, false)]
    #[case::a_failure_while_fast(Mode::Trouble, true, 4.1, false)]
    fn the_api_counts_reachable(
        #[case] mode: Mode,
        #[case] failed_since: bool,
        #[case] secs: f64,
        #[case] want: bool,
    ) {
        let t0 = Instant::now();
        let r = Record {
            last_ok: t0,
            period: mode.period(),
            failed_since,
            latency: Duration::ZERO,
        };
        assert_eq!(r.api_ok(at(t0, secs)), want);
    }

    /// The write latency estimate: the longest recent write, fading by a
    /// fifth per second - a 2 s spike no longer widens deadlines two slow
    /// renewals later, while a server that stays slow keeps it up.
    #[test]
    fn write_latency_fades_with_time_not_with_writes() {
        let t0 = Instant::now();
        let (leases, marks) = (BTreeMap::new(), BTreeMap::new());
        let latency_after = |writes: &[(f64, f64)]| {
            let mut r = Renewer::new(t0);
            for (start, took) in writes {
                let mode = r.poll(at(t0, *start), None, &leases, &marks, "me");
                let mode = mode.expect("a renewal is due");
                r.done(at(t0, start + took), mode, true, Duration::ZERO);
            }
            r.record().latency
        };
        let spike = latency_after(&[(0.0, 2.0)]);
        assert_eq!(spike, Duration::from_secs(2));
        let faded = latency_after(&[(0.0, 2.0), (15.0, 0.005), (30.0, 0.005)]);
        assert!(faded < Duration::from_millis(50), "{faded:?}");
        let slow = latency_after(&[(0.0, 1.0), (15.0, 1.0), (30.0, 1.0)]);
        assert!(slow >= Duration::from_secs(1), "{slow:?}");
    }

    #[rstest]
    #[case::first_renewal(None, Mode::Slow, 0.0, false, false, true)]
    #[case::same_mode_not_due(Some(Mode::Slow), Mode::Slow, 10.0, false, false, false)]
    #[case::same_mode_due(Some(Mode::Slow), Mode::Slow, 0.0, false, false, true)]
    #[case::trouble_starts(Some(Mode::Slow), Mode::Trouble, 10.0, false, false, true)]
    #[case::trouble_ends(Some(Mode::Trouble), Mode::Slow, 10.0, false, false, true)]
    #[case::follow_starts(Some(Mode::Slow), Mode::Follow, 10.0, false, false, true)]
    #[case::asked(Some(Mode::Trouble), Mode::Trouble, 10.0, true, false, true)]
    // After a failure nothing was written: the backoff alone decides (the
    // old rule retried at the next look, every 200 ms, forever).
    #[case::failed_waits_for_the_backoff(None, Mode::Slow, 1.0, false, true, false)]
    #[case::failed_and_trouble_starts(None, Mode::Trouble, 1.0, false, true, false)]
    #[case::failed_and_asked(None, Mode::Trouble, 1.0, true, true, false)]
    #[case::failed_backoff_over(None, Mode::Trouble, 0.0, false, true, true)]
    fn renewing(
        #[case] written: Option<Mode>,
        #[case] mode: Mode,
        #[case] due_in: f64,
        #[case] asked: bool,
        #[case] retrying: bool,
        #[case] want: bool,
    ) {
        let t0 = Instant::now();
        assert_eq!(
            renew_due(written, mode, at(t0, due_in), t0, asked, retrying),
            want
        );
    }

    /// A speaker's renewals through failures: it writes at once, slowly
    /// while all is well, retries a failure only when the backoff says
    /// (a mode change or an ask meanwhile does not hurry it), and is back
    /// to its period after a success.
    #[test]
    fn a_renewer_backs_off_through_failures() {
        let t0 = Instant::now();
        let none = BTreeMap::new();
        let no_marks = BTreeMap::new();
        let doubt = Mark::Names(["a".to_owned()].into());
        let mut r = Renewer::new(t0);
        assert_eq!(r.poll(t0, None, &none, &no_marks, "me"), Some(Mode::Slow));
        r.done(t0, Mode::Slow, true, Duration::ZERO);
        assert_eq!(r.poll(at(t0, 1.0), None, &none, &no_marks, "me"), None);
        assert_eq!(r.next_wakeup(), at(t0, 15.0));
        // Trouble starts: at once; the write fails.
        assert_eq!(
            r.poll(at(t0, 2.0), Some(&doubt), &none, &no_marks, "me"),
            Some(Mode::Trouble)
        );
        r.done(
            at(t0, 2.0),
            Mode::Trouble,
            false,
            Duration::from_millis(1500),
        );
        assert!(r.record().failed_since);
        r.ask();
        assert_eq!(
            r.poll(at(t0, 2.2), Some(&doubt), &none, &no_marks, "me"),
            None,
            "asked, but backing off"
        );
        assert_eq!(
            r.poll(at(t0, 3.4), None, &none, &no_marks, "me"),
            None,
            "mode changed, but backing off"
        );
        assert_eq!(
            r.poll(at(t0, 3.5), Some(&doubt), &none, &no_marks, "me"),
            Some(Mode::Trouble)
        );
        r.done(at(t0, 3.5), Mode::Trouble, true, Duration::ZERO);
        assert!(r.record().api_ok(at(t0, 4.0)));
        assert_eq!(
            r.poll(at(t0, 4.0), Some(&doubt), &none, &no_marks, "me"),
            None
        );
        assert_eq!(
            r.poll(at(t0, 4.5), Some(&doubt), &none, &no_marks, "me"),
            Some(Mode::Trouble)
        );
    }

    /// A change of the link state is written at once, whatever the mode
    /// and however far the next renewal is; while a failure is retried
    /// the backoff still rules. Without a change nothing more is written.
    #[test]
    fn a_link_change_is_written_at_once() {
        let t0 = Instant::now();
        let none = BTreeMap::new();
        let no_marks = BTreeMap::new();
        let mut r = Renewer::new(t0);
        assert_eq!(r.poll(t0, None, &none, &no_marks, "me"), Some(Mode::Slow));
        assert!(!r.write_says_link_down());
        r.done(t0, Mode::Slow, true, Duration::ZERO);
        assert_eq!(r.poll(at(t0, 1.0), None, &none, &no_marks, "me"), None);
        r.set_link_down(true);
        assert_eq!(
            r.poll(at(t0, 1.1), None, &none, &no_marks, "me"),
            Some(Mode::Slow)
        );
        assert!(r.write_says_link_down(), "the write says the link is down");
        r.done(at(t0, 1.2), Mode::Slow, true, Duration::ZERO);
        assert_eq!(
            r.poll(at(t0, 2.0), None, &none, &no_marks, "me"),
            None,
            "written"
        );
        // Back up, but the write fails: the backoff decides the retry.
        r.set_link_down(false);
        assert_eq!(
            r.poll(at(t0, 3.0), None, &none, &no_marks, "me"),
            Some(Mode::Slow)
        );
        assert!(!r.write_says_link_down());
        r.done(at(t0, 3.0), Mode::Slow, false, Duration::from_secs(1));
        r.set_link_down(true);
        assert_eq!(
            r.poll(at(t0, 3.5), None, &none, &no_marks, "me"),
            None,
            "backing off"
        );
        assert_eq!(
            r.poll(at(t0, 4.0), None, &none, &no_marks, "me"),
            Some(Mode::Slow)
        );
        assert!(r.write_says_link_down());
        r.done(at(t0, 4.0), Mode::Slow, true, Duration::ZERO);
        assert_eq!(r.poll(at(t0, 5.0), None, &none, &no_marks, "me"), None);
    }

    /// A change of the names marked is written at once; the same names
    /// again are not.
    #[test]
    fn a_change_of_the_names_marked_is_written_at_once() {
        let t0 = Instant::now();
        let none = BTreeMap::new();
        let no_marks = BTreeMap::new();
        let a = Mark::Names(["a".to_owned()].into());
        let ab = Mark::Names(["a".to_owned(), "b".to_owned()].into());
        let mut r = Renewer::new(t0);
        assert_eq!(
            r.poll(t0, Some(&a), &none, &no_marks, "me"),
            Some(Mode::Trouble)
        );
        assert_eq!(r.write_says_mark(), Some(&a));
        r.done(t0, Mode::Trouble, true, Duration::ZERO);
        let later = at(t0, 0.5);
        assert_eq!(r.poll(later, Some(&a), &none, &no_marks, "me"), None);
        assert_eq!(
            r.poll(later, Some(&ab), &none, &no_marks, "me"),
            Some(Mode::Trouble)
        );
        assert_eq!(r.write_says_mark(), Some(&ab));
        r.done(later, Mode::Trouble, true, Duration::ZERO);
        assert_eq!(r.poll(at(t0, 0.6), Some(&ab), &none, &no_marks, "me"), None);
        assert_eq!(
            r.poll(at(t0, 0.7), None, &none, &no_marks, "me"),
            Some(Mode::Slow)
        );
        assert_eq!(
            r.write_says_mark(),
            None,
            "doubts over: the mark is cleared"
        );
    }

    /// Only a fresh mark that names this speaker (or an older release's
    /// mark, which names nobody) makes it renew fast.
    #[rstest]
    #[case::named("me,b", true, Mode::Follow)]
    #[case::not_named("b,c", true, Mode::Slow)]
    #[case::an_older_release_asks_everyone("true", true, Mode::Follow)]
    #[case::stale("me", false, Mode::Slow)]
    fn following_a_mark(#[case] value: &str, #[case] fresh: bool, #[case] want: Mode) {
        let t0 = Instant::now();
        let marker = LeaseState {
            held: true,
            changed: t0,
            renewed: true,
            period: FAST_RENEW,
            trouble: true,
            link_down: false,
        };
        let leases = BTreeMap::from([("marker".to_owned(), marker)]);
        let marks = BTreeMap::from([("marker".to_owned(), Mark::parse(value))]);
        let now = if fresh { at(t0, 0.5) } else { at(t0, 2.0) };
        assert_eq!(presence::mode(false, &leases, &marks, "me", now), want);
    }

    /// Retries of failed renewals back off from a second to two, each
    /// delayed by up to as much again at random: a thousand speakers that
    /// failed together do not retry together, and none writes more than
    /// once a second.
    #[test]
    fn retries_back_off_with_jitter() {
        let a: Vec<Duration> = retries().take(6).collect();
        let b: Vec<Duration> = retries().take(6).collect();
        for (i, d) in a.iter().enumerate() {
            let base = RETRY.first.saturating_mul(1 << i.min(1)).min(RETRY.max);
            assert!(
                *d >= base && *d <= base.saturating_mul(2),
                "retry {i}: {d:?} outside {base:?} to twice that"
            );
        }
        assert!(a[5] >= RETRY.max, "the delay grows to the longest");
        assert!(
            a.iter().all(|d| *d >= FAST_RENEW),
            "at most one write a second"
        );
        assert!(
            a.iter().all(|d| *d < API_TIMEOUT),
            "the API's return is noticed in time"
        );
        assert_ne!(a, b, "two speakers' retries are jittered apart");
    }
}
