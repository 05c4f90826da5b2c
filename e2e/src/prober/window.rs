//! What the prober saw over a window, and the verdicts the specs draw
//! from it. Pure: rounds in, sets, stretches and errors out.
//!
//! The rules:
//!
//! 1. A round is one broadcast question (ARP who-has or neighbor
//!    solicitation) and every answer that arrived before the next
//!    question; an answer that is late lands in the next round.
//! 2. A round is *silent* when nobody answered, *exclusive* when one MAC
//!    did, *split* when two or more did.
//! 3. A stretch of split rounds runs from the first split round's
//!    question to one interval after the last one's; only an exclusive
//!    round ends it (a silent one proves nothing either way, so the
//!    stretch goes on through it). Its length is what the partition specs
//!    bound.
//! 4. "Only X" means: every answer in the window came from X, and X
//!    answered at least three rounds in four (an address that is
//!    announced answers every question; the slack covers answers late
//!    for their round on a loaded machine).
//! 5. "Silent" means: no answer at all.
//! 6. A silent stretch runs from the first silent round's question to the
//!    next answered round's question (or the window's end); one answer
//!    late for its round makes a silent stretch of one interval. Its
//!    length is what the specs that keep every address answered bound.
//! 7. The answering node *changes* when an exclusive round's MAC differs
//!    from the previous exclusive round's; silent and split rounds in
//!    between do not count (a handover through a split or a silence is
//!    one change). A failover and a failback are two.

use anyhow::{Result, bail};
use metallb_rs::net::ethernet::Mac;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::Duration;

/// One answer: who, and when (from the window's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The MAC the answer gave for the address.
    pub mac: Mac,
    /// When it arrived.
    pub at: Duration,
}

/// One question and the answers that arrived before the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    /// When the question went out (from the window's start).
    pub sent: Duration,
    /// The answers, in arrival order.
    pub replies: Vec<Reply>,
}

impl Round {
    /// The distinct MACs that answered.
    pub fn macs(&self) -> BTreeSet<Mac> {
        self.replies.iter().map(|r| r.mac).collect()
    }
}

/// Rounds at a fixed interval for one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The address asked about.
    pub target: IpAddr,
    /// Time between two questions.
    pub interval: Duration,
    /// The rounds, in order.
    pub rounds: Vec<Round>,
}

/// A stretch of rounds: when its first question went out (from the
/// window's start) and how long it lasted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stretch {
    /// When it began.
    pub from: Duration,
    /// How long it lasted.
    pub length: Duration,
}

/// How one MAC answered over a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Rounds it answered.
    pub rounds: usize,
    /// Its first answer.
    pub first: Duration,
    /// Its last answer.
    pub last: Duration,
}

impl Window {
    /// Every MAC that answered.
    pub fn macs(&self) -> BTreeSet<Mac> {
        self.rounds.iter().flat_map(Round::macs).collect()
    }

    /// Per MAC: how many rounds it answered, first and last answer.
    pub fn seen(&self) -> BTreeMap<Mac, Seen> {
        let mut seen: BTreeMap<Mac, Seen> = BTreeMap::new();
        for round in &self.rounds {
            for mac in round.macs() {
                let at: Vec<Duration> = round
                    .replies
                    .iter()
                    .filter(|r| r.mac == mac)
                    .map(|r| r.at)
                    .collect();
                let (first, last) = (at[0], at[at.len() - 1]);
                seen.entry(mac)
                    .and_modify(|s| {
                        s.rounds += 1;
                        s.last = last;
                    })
                    .or_insert(Seen {
                        rounds: 1,
                        first,
                        last,
                    });
            }
        }
        seen
    }

    /// Rounds nobody answered.
    pub fn silent_rounds(&self) -> usize {
        self.rounds.iter().filter(|r| r.replies.is_empty()).count()
    }

    /// Rounds two or more MACs answered.
    pub fn split_rounds(&self) -> usize {
        self.rounds.iter().filter(|r| r.macs().len() > 1).count()
    }

    /// The longest stretch of split rounds (rule 3); zero without any.
    pub fn longest_split(&self) -> Duration {
        let mut longest = Duration::ZERO;
        let mut start = None;
        for round in &self.rounds {
            match round.macs().len() {
                0 => {}
                1 => start = None,
                _ => {
                    let from = *start.get_or_insert(round.sent);
                    longest = longest.max(round.sent + self.interval - from);
                }
            }
        }
        longest
    }

    /// The longest stretch of silent rounds (rule 6), the earliest of
    /// equals; zero long without any.
    pub fn longest_silence(&self) -> Stretch {
        let mut longest = Stretch::default();
        let mut start = None;
        for round in &self.rounds {
            if round.replies.is_empty() {
                let from = *start.get_or_insert(round.sent);
                let length = round.sent + self.interval - from;
                if length > longest.length {
                    longest = Stretch { from, length };
                }
            } else {
                start = None;
            }
        }
        longest
    }

    /// How often the answering MAC changed (rule 7).
    pub fn owner_changes(&self) -> usize {
        let mut changes = 0;
        let mut owner = None;
        for round in &self.rounds {
            let macs = round.macs();
            let mut only = macs.iter();
            if let (Some(&mac), None) = (only.next(), only.next()) {
                if owner.is_some_and(|o| o != mac) {
                    changes += 1;
                }
                owner = Some(mac);
            }
        }
        changes
    }

    /// The window with only the rounds whose question went out at or
    /// after `from` and before `to`.
    pub fn between(&self, from: Duration, to: Duration) -> Window {
        Window {
            target: self.target,
            interval: self.interval,
            rounds: self
                .rounds
                .iter()
                .filter(|r| r.sent >= from && r.sent < to)
                .cloned()
                .collect(),
        }
    }

    /// The window with only the rounds whose question went out at or
    /// after `from`.
    pub fn since(&self, from: Duration) -> Window {
        Window {
            target: self.target,
            interval: self.interval,
            rounds: self
                .rounds
                .iter()
                .filter(|r| r.sent >= from)
                .cloned()
                .collect(),
        }
    }

    /// How long the window lasted.
    pub fn length(&self) -> Duration {
        self.interval * u32::try_from(self.rounds.len()).unwrap_or(u32::MAX)
    }

    /// Exactly `want` answered, steadily (rule 4).
    pub fn only(&self, want: Mac) -> bool {
        let answered = self.rounds.len() - self.silent_rounds();
        self.macs() == BTreeSet::from([want]) && answered * 4 >= self.rounds.len() * 3
    }

    /// Fails unless only `want` answered (rule 4); `name` turns a MAC into
    /// what the message shows (a node's name).
    pub fn expect_only(&self, want: Mac, name: &dyn Fn(Mac) -> String) -> Result<()> {
        if !self.only(want) {
            bail!(
                "{} should be answered by {} ({want}) and nobody else: {}",
                self.target,
                name(want),
                self.describe(name)
            );
        }
        Ok(())
    }

    /// Fails unless nobody answered (rule 5).
    pub fn expect_silent(&self, name: &dyn Fn(Mac) -> String) -> Result<()> {
        if !self.macs().is_empty() {
            bail!(
                "{} should not be answered: {}",
                self.target,
                self.describe(name)
            );
        }
        Ok(())
    }

    /// One line: rounds, who answered how often and when, silent rounds,
    /// the longest split and silent stretches.
    pub fn describe(&self, name: &dyn Fn(Mac) -> String) -> String {
        let mut out = format!(
            "{} rounds every {:?} over {:?}; ",
            self.rounds.len(),
            self.interval,
            self.length()
        );
        let seen = self.seen();
        if seen.is_empty() {
            out.push_str("no answer");
        }
        for (i, (mac, s)) in seen.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(
                out,
                "{sep}{} ({mac}) answered {} rounds from {:?} to {:?}",
                name(*mac),
                s.rounds,
                s.first,
                s.last
            );
        }
        let _ = write!(
            out,
            "; {} silent, {} split rounds, longest split stretch {:?}, {} changes of the answering node",
            self.silent_rounds(),
            self.split_rounds(),
            self.longest_split(),
            self.owner_changes(),
        );
        let silence = self.longest_silence();
        if silence.length > Duration::ZERO {
            let _ = write!(
                out,
                ", longest silent stretch {:?} from {:?}",
                silence.length, silence.from
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const A: Mac = Mac([2, 0, 0, 0, 0, 0xa]);
    const B: Mac = Mac([2, 0, 0, 0, 0, 0xb]);
    const MS: Duration = Duration::from_millis(1);

    /// A window of 100 ms rounds from a picture: one character per round,
    /// `.` silent, `a`/`b` one MAC, `x` both.
    fn window(picture: &str) -> Window {
        let interval = 100 * MS;
        let rounds = picture
            .chars()
            .enumerate()
            .map(|(i, c)| {
                let sent = interval * u32::try_from(i).expect("small");
                let macs: &[Mac] = match c {
                    'a' => &[A],
                    'b' => &[B],
                    'x' => &[A, B],
                    _ => &[],
                };
                Round {
                    sent,
                    replies: macs
                        .iter()
                        .enumerate()
                        .map(|(k, &mac)| Reply {
                            mac,
                            at: sent + MS * (u32::try_from(k).expect("small") + 1),
                        })
                        .collect(),
                }
            })
            .collect();
        Window {
            target: "10.0.0.1".parse().expect("ip"),
            interval,
            rounds,
        }
    }

    fn name(mac: Mac) -> String {
        if mac == A { "a".into() } else { "b".into() }
    }

    #[rstest]
    #[case::nobody("....", 0, 4, 0)]
    #[case::one("aaaa", 0, 0, 0)]
    #[case::handover("aa.bb", 0, 1, 0)]
    #[case::one_split_round("aaxbb", 100, 0, 1)]
    #[case::split_ends_at_an_exclusive_round("xxaxxx", 300, 0, 5)]
    #[case::silence_does_not_end_a_split("x..x", 400, 2, 2)]
    #[case::split_to_the_end("aaxxxx", 400, 0, 4)]
    fn stretches_and_counts(
        #[case] picture: &str,
        #[case] longest_ms: u64,
        #[case] silent: usize,
        #[case] split: usize,
    ) {
        let w = window(picture);
        assert_eq!(w.longest_split(), Duration::from_millis(longest_ms));
        assert_eq!(w.silent_rounds(), silent);
        assert_eq!(w.split_rounds(), split);
    }

    #[rstest]
    #[case::always_answered("aabbxa", 0, 0)]
    #[case::one_late_answer("aa.aaa", 200, 100)]
    #[case::the_longest_of_two("a..a....b", 400, 400)]
    #[case::the_earliest_of_equals("a..a..a", 100, 200)]
    #[case::silent_to_the_end("aaa...", 300, 300)]
    #[case::silent_from_the_start("..aa", 0, 200)]
    #[case::nobody("....", 0, 400)]
    fn silent_stretches(#[case] picture: &str, #[case] from_ms: u64, #[case] length_ms: u64) {
        let w = window(picture);
        assert_eq!(
            w.longest_silence(),
            Stretch {
                from: Duration::from_millis(from_ms),
                length: Duration::from_millis(length_ms),
            }
        );
    }

    #[rstest]
    #[case::steady("aaaaaaaa", true)]
    #[case::a_few_late_answers("aa.aaa.a", true)]
    #[case::mostly_silent("a..a..a.", false)]
    #[case::another_answered_once("aaaaxaaa", false)]
    #[case::someone_else("bbbbbbbb", false)]
    #[case::nobody("........", false)]
    fn only_one_mac(#[case] picture: &str, #[case] want: bool) {
        let w = window(picture);
        assert_eq!(w.only(A), want, "{}", w.describe(&name));
        assert_eq!(w.expect_only(A, &name).is_ok(), want);
    }

    #[test]
    fn messages_name_every_mac_with_its_rounds() {
        let err = window("aaxb")
            .expect_only(A, &name)
            .expect_err("b answered");
        let msg = err.to_string();
        assert!(
            msg.contains("10.0.0.1 should be answered by a (02:00:00:00:00:0a)"),
            "{msg}"
        );
        assert!(
            msg.contains("a (02:00:00:00:00:0a) answered 3 rounds from 1ms to 201ms"),
            "{msg}"
        );
        assert!(
            msg.contains("b (02:00:00:00:00:0b) answered 2 rounds from 202ms to 301ms"),
            "{msg}"
        );
        assert!(
            msg.contains("0 silent, 1 split rounds, longest split stretch 100ms"),
            "{msg}"
        );
        assert!(window("....").expect_silent(&name).is_ok());
        let err = window("..b.").expect_silent(&name).expect_err("b answered");
        assert!(err.to_string().contains("should not be answered"), "{err}");
    }

    #[rstest]
    #[case::nobody("....", 0)]
    #[case::steady("aaaa", 0)]
    #[case::failover("aa..bb", 1)]
    #[case::through_a_split("aaxbb", 1)]
    #[case::failover_and_back("aa..bbb.aa", 2)]
    #[case::splits_alone_change_nothing("axaxa", 0)]
    #[case::flapping("ababab", 5)]
    fn changes_of_the_answering_node(#[case] picture: &str, #[case] changes: usize) {
        assert_eq!(window(picture).owner_changes(), changes);
    }

    #[test]
    fn between_keeps_a_slice() {
        let w = window("aa..bb");
        let slice = w.between(Duration::from_millis(100), Duration::from_millis(400));
        assert_eq!(slice.rounds.len(), 3);
        assert_eq!(slice.rounds[0].sent, Duration::from_millis(100));
        assert_eq!(slice.longest_silence().length, Duration::from_millis(200));
    }

    #[test]
    fn since_keeps_the_tail() {
        let w = window("xxaabb");
        let tail = w.since(Duration::from_millis(200));
        assert_eq!(tail.rounds.len(), 4);
        assert_eq!(tail.longest_split(), Duration::ZERO);
        assert_eq!(tail.macs(), BTreeSet::from([A, B]));
        assert_eq!(w.length(), Duration::from_millis(600));
        assert_eq!(
            w.seen()[&B],
            Seen {
                rounds: 4,
                first: Duration::from_millis(2),
                last: Duration::from_millis(501)
            }
        );
    }
}
