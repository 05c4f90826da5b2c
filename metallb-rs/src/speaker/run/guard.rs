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

use super::super::announcer::Silencer;
use super::super::liveness;
use super::super::membership::View;
use super::super::renewal::Record;
use super::Runner;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

/// How often the guard looks: a small part of the others' takeover time.
const PERIOD: Duration = Duration::from_millis(100);

/// This speaker's lease renewals (written by the renewal task) say it
/// reaches the API server ([`Record::api_ok`]). A poisoned lock means a
/// renewal panicked: the API counts as gone.
pub(super) fn api_ok(renewals: &Mutex<Record>) -> bool {
    renewals
        .lock()
        .map(|r| r.api_ok(Instant::now()))
        .unwrap_or(false)
}

/// Whether a speaker that sees `view` in gossip, reaching the API server
/// or not (`api_ok`), must answer nothing, weighing `voters` (the loop's)
/// or, before the loop has any, every member gossip knows.
pub(super) fn cut_off(api_ok: bool, view: &View, voters: Option<&BTreeSet<String>>) -> bool {
    liveness::isolated_in(api_ok, view, voters)
}

/// Every [`PERIOD`], silences or lets go the announcer behind `silencer`
/// from the gossip `view` and the lease renewals.
fn spawn(
    view: watch::Receiver<View>,
    voters: watch::Receiver<Option<BTreeSet<String>>>,
    renewals: Arc<Mutex<Record>>,
    silencer: Silencer,
) -> AbortOnDropHandle<()> {
    AbortOnDropHandle::new(tokio::spawn(async move {
        let mut tick = tokio::time::interval(PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            let silent = cut_off(api_ok(&renewals), &view.borrow(), voters.borrow().as_ref());
            if silencer.set(silent) {
                if silent {
                    tracing::warn!(
                        "cut off from the API server and from most speakers: layer 2 answers stop now"
                    );
                } else {
                    tracing::info!("no longer cut off: layer 2 answers resume");
                }
            }
        }
    }))
}

impl Runner {
    /// Starts the guard once membership runs (without gossip nothing
    /// tells this speaker it is cut off).
    pub(super) fn start_guard(&mut self) {
        if self.guard.is_some() {
            return;
        }
        if let Some(m) = &self.membership {
            self.guard = Some(spawn(
                m.subscribe(),
                self.judging.voters.subscribe(),
                self.renewals.clone(),
                self.announcer.silencer(),
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

    #[test]
    fn api_counts_as_gone_after_the_timeout() {
        let fresh = Mutex::new(Record::new(Instant::now()));
        assert!(api_ok(&fresh));
        let long_ago = Instant::now().checked_sub(liveness::API_TIMEOUT + Duration::from_millis(1));
        if let Some(t) = long_ago {
            assert!(!api_ok(&Mutex::new(Record::new(t))));
        }
    }
}
