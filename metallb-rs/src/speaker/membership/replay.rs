//! Replay protection: every sealed datagram carries its sender's node
//! name, the sender's run (epoch) and a sequence number; a receiver
//! accepts each (node, epoch, sequence) at most once.
//!
//! Per sender it keeps the newest epoch and a sliding window of the
//! last [`WINDOW`] sequence numbers (as IPsec's anti-replay window), so
//! datagrams reordered by the network within the window still count,
//! while anything recorded and sent again - a dead speaker's acks, an
//! old announce - is dropped, as is anything of an older run.
//!
//! A receiver's windows live in memory: a receiver that restarts accepts
//! datagrams of its peers' current runs once more (bounded by the
//! peers' own restart: a new run makes all recorded ones stale).

use std::collections::HashMap;

/// How many sequence numbers below the newest one are still accepted
/// (once each): room for reordering, not for loss.
pub(crate) const WINDOW: u64 = 64;

/// What to do with a datagram, by its stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Never seen: accept (and it is now recorded).
    Fresh,
    /// Seen before, from an older run, or too far behind the window.
    Replayed,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    epoch: u64,
    /// The newest sequence number accepted.
    top: u64,
    /// Bit `i` set: `top - i` was accepted.
    seen: u64,
}

/// The windows of every sender.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    senders: HashMap<String, Window>,
}

impl Replay {
    /// Keeps the windows of the senders `keep` says (the others' state is
    /// gone, as after [`Replay::forget`]).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.senders.retain(|node, _| keep(node));
    }

    /// Checks `(epoch, seq)` from `node` and records it when fresh.
    pub(crate) fn check(&mut self, node: &str, epoch: u64, seq: u64) -> Verdict {
        let Some(w) = self.senders.get_mut(node) else {
            self.senders.insert(
                node.to_owned(),
                Window {
                    epoch,
                    top: seq,
                    seen: 1,
                },
            );
            return Verdict::Fresh;
        };
        if epoch < w.epoch {
            return Verdict::Replayed;
        }
        if epoch > w.epoch {
            *w = Window {
                epoch,
                top: seq,
                seen: 1,
            };
            return Verdict::Fresh;
        }
        if seq > w.top {
            let shift = seq - w.top;
            w.seen = if shift >= WINDOW { 0 } else { w.seen << shift };
            w.seen |= 1;
            w.top = seq;
            return Verdict::Fresh;
        }
        let behind = w.top - seq;
        if behind >= WINDOW || w.seen & (1 << behind) != 0 {
            return Verdict::Replayed;
        }
        w.seen |= 1 << behind;
        Verdict::Fresh
    }

    /// Forgets `node` (it was removed from the membership): its next run
    /// starts a new window whatever its epoch.
    pub(crate) fn forget(&mut self, node: &str) {
        self.senders.remove(node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_stamp_is_accepted_once() {
        let mut r = Replay::default();
        assert_eq!(r.check("b", 1, 0), Verdict::Fresh);
        assert_eq!(r.check("b", 1, 0), Verdict::Replayed);
        assert_eq!(r.check("b", 1, 1), Verdict::Fresh);
        assert_eq!(r.check("b", 1, 1), Verdict::Replayed);
        // Another sender has its own window.
        assert_eq!(r.check("c", 1, 0), Verdict::Fresh);
    }

    #[test]
    fn reordering_within_the_window_is_accepted_once() {
        let mut r = Replay::default();
        assert_eq!(r.check("b", 1, 10), Verdict::Fresh);
        assert_eq!(r.check("b", 1, 5), Verdict::Fresh);
        assert_eq!(r.check("b", 1, 5), Verdict::Replayed);
        assert_eq!(r.check("b", 1, 10 + WINDOW), Verdict::Fresh);
        // 10 now falls out of the window: too old, refused.
        assert_eq!(r.check("b", 1, 10), Verdict::Replayed);
        assert_eq!(r.check("b", 1, 11), Verdict::Fresh);
    }

    #[test]
    fn an_older_run_is_refused_and_a_newer_one_resets() {
        let mut r = Replay::default();
        assert_eq!(r.check("b", 5, 100), Verdict::Fresh);
        assert_eq!(r.check("b", 4, 101), Verdict::Replayed);
        assert_eq!(r.check("b", 6, 0), Verdict::Fresh);
        assert_eq!(r.check("b", 5, 102), Verdict::Replayed);
        r.forget("b");
        assert_eq!(r.check("b", 5, 102), Verdict::Fresh);
    }

    proptest! {
        /// Whatever the order, a stamp is never accepted twice.
        #[test]
        fn never_twice(seqs in proptest::collection::vec(0u64..300, 0..400)) {
            let mut r = Replay::default();
            let mut accepted = std::collections::HashSet::new();
            for seq in seqs {
                if r.check("b", 1, seq) == Verdict::Fresh {
                    prop_assert!(accepted.insert(seq), "{} accepted twice", seq);
                }
            }
        }
    }
}
