//! The isolation guard: a task beside the speaker's loop that silences
//! the layer 2 responders as soon as this speaker is cut off from the API
//! server and from most speakers ([`liveness::isolated`]), and lets them
//! answer again once it is not. The loop reaches the same decision and
//! withdraws, but it may be waiting on API calls (each with its timeout,
//! one after another for several services) while the other speakers take
//! its addresses over: the bound on two nodes answering for one address
//! must not depend on how much work the loop has in hand.
//!
//! Both weigh the same speakers: the voters the loop last computed
//! (`liveness::voters`: Nodes whose speaker gossip or a lease shows,
//! less those known to have departed), against the guard's own live
//! gossip view; before the loop's first pass, every member gossip knows.
//! Both silence only without the API server and with at most half of
//! the voters alive in gossip.

use super::super::liveness;
use super::super::membership::View;
use super::super::renewal::Record;
use super::Runner;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

/// The longest the guard goes without looking, nothing having changed.
/// It also wakes on every change of what it weighs and at the instant
/// the API server stops counting as reachable ([`next_look`]), so the
/// period only bounds what a missed wake-up could cost.
const PERIOD: Duration = Duration::from_millis(100);

/// Whether a speaker that sees `view` in gossip, reaching the API server
/// or not (`api_ok`), must answer nothing, weighing `voters` (the loop's)
/// or, before the loop has any, every member gossip knows.
pub(super) fn cut_off(api_ok: bool, view: &View, voters: Option<&BTreeSet<String>>) -> bool {
    liveness::isolated_in(api_ok, view, voters)
}

/// When the guard looks next, having looked at `now` with the renewals'
/// `record`: a [`PERIOD`] on, or at the instant the API server stops
/// counting as reachable if that comes first - the others take a cut-off
/// speaker's addresses a fixed time after the cut, so every moment it
/// answers past that instant is a moment two nodes answer.
pub(super) fn next_look(now: Instant, record: &Record) -> Instant {
    let lost = record.api_lost_at();
    let next = now + PERIOD;
    if lost > now { lost.min(next) } else { next }
}

/// Silences or lets go the announcer (`silence(true)` / `silence(false)`,
/// answering whether that changed anything) from the gossip `view`, the
/// loop's `voters` and the lease renewals' `record`: on every change of
/// them and at [`next_look`].
fn spawn(
    view: watch::Receiver<View>,
    voters: watch::Receiver<Option<BTreeSet<String>>>,
    record: watch::Receiver<Record>,
    silence: impl FnMut(bool) -> bool + Send + 'static,
) -> AbortOnDropHandle<()> {
    AbortOnDropHandle::new(tokio::spawn(watch_over(view, voters, record, silence)))
}

async fn watch_over(
    mut view: watch::Receiver<View>,
    mut voters: watch::Receiver<Option<BTreeSet<String>>>,
    mut record: watch::Receiver<Record>,
    mut silence: impl FnMut(bool) -> bool,
) {
    loop {
        // Tokio's clock (the system's, unless a test pauses it).
        let now = tokio::time::Instant::now().into_std();
        let renewals = *record.borrow_and_update();
        let silent = cut_off(
            renewals.api_ok(now),
            &view.borrow_and_update(),
            voters.borrow_and_update().as_ref(),
        );
        if silence(silent) {
            if silent {
                tracing::warn!(
                    "cut off from the API server and from most speakers: layer 2 answers stop now"
                );
            } else {
                tracing::info!("no longer cut off: layer 2 answers resume");
            }
        }
        // A closed channel only disables its own branch: the sleep stays.
        tokio::select! {
            () = tokio::time::sleep_until(next_look(now, &renewals).into()) => {}
            Ok(()) = view.changed() => {}
            Ok(()) = voters.changed() => {}
            Ok(()) = record.changed() => {}
        }
    }
}

impl Runner {
    /// Starts the guard once membership runs (without gossip nothing
    /// tells this speaker it is cut off).
    pub(super) fn start_guard(&mut self) {
        if self.guard.is_some() {
            return;
        }
        if let Some(m) = &self.membership {
            let silencer = self.announcer.silencer();
            self.guard = Some(spawn(
                m.subscribe(),
                self.judging.voters.subscribe(),
                self.renewals.subscribe(),
                move |silent| silencer.set(silent),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speaker::membership::Down;
    use rstest::rstest;
    use std::time::Instant;

    fn view(alive: &[&str], down: &[&str]) -> View {
        View {
            alive: alive.iter().map(|n| (*n).to_owned()).collect(),
            down: down
                .iter()
                .map(|n| {
                    (
                        (*n).to_owned(),
                        Down {
                            since: Instant::now(),
                            left: false,
                        },
                    )
                })
                .collect(),
            ..View::default()
        }
    }

    #[rstest]
    #[case::api_and_peers(true, &["a", "b", "c"], &[], false)]
    #[case::api_only(true, &["a"], &["b", "c"], false)]
    #[case::peers_only(false, &["a", "b", "c"], &[], false)]
    #[case::majority_without_api(false, &["a", "b"], &["c"], false)]
    #[case::neither(false, &["a"], &["b", "c"], true)]
    #[case::half_of_four(false, &["a", "b"], &["c", "d"], true)]
    #[case::alone_in_the_cluster(false, &["a"], &[], false)]
    fn silent_only_without_api_and_majority(
        #[case] api_ok: bool,
        #[case] alive: &[&str],
        #[case] down: &[&str],
        #[case] silent: bool,
    ) {
        assert_eq!(cut_off(api_ok, &view(alive, down), None), silent);
    }

    /// With the loop's voters, departed speakers held down in gossip for
    /// an hour weigh nothing: the last speaker after a scale-down keeps
    /// answering through an API blip (silenced by the count of every
    /// member gossip knows), and a member alive in gossip that is no
    /// voter adds nothing.
    #[rstest]
    #[case::last_after_a_scale_down(&["a"], &["b", "c"], &["a"], false)]
    #[case::minority_of_voters(&["a"], &["b", "c"], &["a", "b", "c"], true)]
    #[case::a_member_that_is_no_node(&["a", "ghost"], &["b", "c"], &["a", "b", "c"], true)]
    fn weighs_the_voters(
        #[case] alive: &[&str],
        #[case] down: &[&str],
        #[case] voters: &[&str],
        #[case] silent: bool,
    ) {
        let voters: BTreeSet<String> = voters.iter().map(|n| (*n).to_owned()).collect();
        assert_eq!(cut_off(false, &view(alive, down), Some(&voters)), silent);
    }

    /// What a guard did, with when (from `t0`, tokio's clock).
    type Log = std::sync::Arc<std::sync::Mutex<Vec<(Duration, bool)>>>;

    fn start(
        t0: tokio::time::Instant,
        view: watch::Receiver<View>,
        record: watch::Receiver<Record>,
    ) -> (AbortOnDropHandle<()>, Log) {
        let log = Log::default();
        let seen = log.clone();
        let (_, voters) = watch::channel(None);
        let mut silent = false;
        let guard = spawn(view, voters, record, move |s| {
            let changed = std::mem::replace(&mut silent, s) != s;
            if changed {
                seen.lock()
                    .expect("the log is never poisoned")
                    .push((t0.elapsed(), s));
            }
            changed
        });
        (guard, log)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Cut off from its peers, the speaker's last renewal succeeded at
    /// `t0`: it goes silent at `t0 + API_TIMEOUT` exactly, although the
    /// guard started 30 ms after `t0` and its periodic looks fall 30 ms
    /// after each deadline-aligned instant.
    #[tokio::test(start_paused = true)]
    async fn silent_at_the_instant_the_api_is_lost() {
        let t0 = tokio::time::Instant::now();
        let (_record_tx, record) = watch::channel(Record::new(t0.into_std()));
        let (_view_tx, view_rx) = watch::channel(view(&["a"], &["b", "c"]));
        tokio::time::sleep(ms(30)).await;
        let (_guard, log) = start(t0, view_rx, record);
        tokio::time::sleep(liveness::API_TIMEOUT + ms(200)).await;
        assert_eq!(
            *log.lock().expect("the log is never poisoned"),
            vec![(liveness::API_TIMEOUT, true)]
        );
    }

    /// A renewal's failure recorded after the API server's deadline (a
    /// slow period's grace ended by writes failing since 1 s) silences
    /// at the instant it is recorded, and a success lets go at once; so
    /// does gossip losing its majority after the API is gone. None of
    /// the instants is one of the guard's periodic looks.
    #[tokio::test(start_paused = true)]
    async fn wakes_on_every_change_of_what_it_weighs() {
        let t0 = tokio::time::Instant::now();
        let slow = Record {
            period: Duration::from_secs(15),
            ..Record::new(t0.into_std())
        };
        let (record_tx, record) = watch::channel(slow);
        let (view_tx, view_rx) = watch::channel(view(&["a"], &["b", "c"]));
        let (_guard, log) = start(t0, view_rx, record);
        tokio::time::sleep(ms(5_030)).await;
        record_tx.send_replace(Record {
            failing_since: Some(t0.into_std() + ms(1_000)),
            ..slow
        });
        tokio::time::sleep(ms(50)).await;
        record_tx.send_replace(Record::new(tokio::time::Instant::now().into_std()));
        tokio::time::sleep(ms(70)).await;
        view_tx.send_replace(view(&["a", "b"], &["c"]));
        tokio::time::sleep(ms(3_940)).await;
        view_tx.send_replace(view(&["a"], &["b", "c"]));
        tokio::time::sleep(ms(45)).await;
        assert_eq!(
            *log.lock().expect("the log is never poisoned"),
            vec![(ms(5_030), true), (ms(5_080), false), (ms(9_090), true)]
        );
    }

    #[test]
    fn looks_at_the_api_deadline_when_it_comes_first() {
        let t0 = Instant::now();
        let record = Record::new(t0);
        assert_eq!(next_look(t0, &record), t0 + PERIOD);
        let just_before = t0 + liveness::API_TIMEOUT - ms(30);
        assert_eq!(next_look(just_before, &record), t0 + liveness::API_TIMEOUT);
        let after = t0 + liveness::API_TIMEOUT + ms(1);
        assert_eq!(next_look(after, &record), after + PERIOD);
    }
}
