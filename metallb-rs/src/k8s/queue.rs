//! The work queue both components run on: watches put keys in, the
//! component's loop takes them out in batches and hands failures back.
//!
//! Rules:
//! 1. Pending work is a keyed set, not a channel of triggers: a key
//!    queued a thousand times before the loop looks is one entry, so
//!    memory is bounded by the number of distinct keys.
//! 2. [`Queue::next`] returns every key that is ready at once (a batch),
//!    so a burst of watch events costs one pass.
//! 3. A failed key comes back after a per-key delay chosen by its
//!    [`ErrorClass`]: exponential backoff with jitter for transient
//!    failures and conflicts, the longest delay for forbidden calls, and
//!    no retry for missing objects and invalid requests (the watch
//!    queues the key again when the object changes). A key queued by a
//!    watch meanwhile runs at once; [`Queue::done`] resets its backoff.
//! 4. Our own writes are hidden until the watch shows them
//!    ([`PendingWrites`]): acting on the older cached copy would undo
//!    them. A write the watch never shows stops hiding after
//!    [`PENDING_WRITE_TIMEOUT`].
//!
//! Why not kube-runtime's `Controller`: it reconciles one object kind by
//! its own key, while both components here act on derived keys fed by many
//! kinds (a service is looked at again when its EndpointSlices, its status
//! objects or the nodes change), on whole-configuration events ("reload,
//! then reprocess everything") that must be ordered against per-service
//! work, and with one task owning the state (the allocator, the
//! announcer), never reconciling concurrently.

use super::call::ErrorClass;
use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// A write the watch has not shown after this long no longer holds the
/// work on its object back.
pub const PENDING_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The delays of retries with backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first retry's delay (before jitter).
    pub first: Duration,
    /// The longest delay (before jitter); also the delay of slow retries.
    pub max: Duration,
}

impl Backoff {
    /// The jittered delays of successive retries: each doubles the one
    /// before, from `first` up to `max`, plus a random part of up to as
    /// much again (so many clients retrying together spread out), with
    /// no end.
    pub fn delays(self) -> ExponentialBackoff {
        self.builder().build()
    }

    fn builder(self) -> ExponentialBuilder {
        ExponentialBuilder::new()
            .with_min_delay(self.first)
            .with_max_delay(self.max)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
    }
}

/// What happens to a failed key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Again after the key's next backoff delay.
    Backoff,
    /// Again after the longest delay.
    Slowly,
    /// Not until something queues it again.
    OnChange,
}

impl ErrorClass {
    /// How work that failed this way is retried.
    pub fn retry(self) -> Retry {
        match self {
            ErrorClass::Transient | ErrorClass::Conflict => Retry::Backoff,
            ErrorClass::Forbidden => Retry::Slowly,
            ErrorClass::NotFound | ErrorClass::Invalid => Retry::OnChange,
        }
    }
}

struct State<K> {
    ready: BTreeSet<K>,
    /// Keys waiting out a retry delay, with when they become ready.
    later: BTreeMap<K, Instant>,
    /// Each failing key's backoff (dropped on success).
    backoff: HashMap<K, ExponentialBackoff>,
}

type Shared<K> = Arc<Mutex<State<K>>>;

fn lock<K>(s: &Shared<K>) -> std::sync::MutexGuard<'_, State<K>> {
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Wakes the queue when the last sender goes, so it can report the end.
struct Producers(Arc<Notify>);

impl Drop for Producers {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

/// Puts keys into a [`Queue`]; cheap to clone, one per watch.
pub struct Sender<K> {
    state: Shared<K>,
    wake: Arc<Notify>,
    _producers: Arc<Producers>,
}

impl<K> Clone for Sender<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            wake: self.wake.clone(),
            _producers: self._producers.clone(),
        }
    }
}

impl<K: Ord + Clone + Hash> Sender<K> {
    /// Queues `key` now (also cutting short a retry delay it waits out).
    pub fn push(&self, key: K) {
        let mut s = lock(&self.state);
        s.later.remove(&key);
        s.ready.insert(key);
        drop(s);
        self.wake.notify_one();
    }
}

/// The receiving end, owned by the component's loop.
pub struct Queue<K> {
    state: Shared<K>,
    wake: Arc<Notify>,
    producers: Weak<Producers>,
    backoff: ExponentialBuilder,
    max: Duration,
}

impl<K: Ord + Clone + Hash> Queue<K> {
    /// An empty queue retrying with `backoff`, and its first sender.
    pub fn new(backoff: Backoff) -> (Self, Sender<K>) {
        let state: Shared<K> = Arc::new(Mutex::new(State {
            ready: BTreeSet::new(),
            later: BTreeMap::new(),
            backoff: HashMap::new(),
        }));
        let wake = Arc::new(Notify::new());
        let producers = Arc::new(Producers(wake.clone()));
        let queue = Self {
            state: state.clone(),
            wake: wake.clone(),
            producers: Arc::downgrade(&producers),
            backoff: backoff.builder(),
            max: backoff.max,
        };
        let sender = Sender {
            state,
            wake,
            _producers: producers,
        };
        (queue, sender)
    }

    /// Waits until keys are ready and takes them all, in key order. None
    /// once every [`Sender`] is gone (the watches stopped). Cancel-safe.
    pub async fn next(&mut self) -> Option<Vec<K>> {
        loop {
            let wakeup = {
                let mut s = lock(&self.state);
                let now = Instant::now();
                let due: Vec<K> = s
                    .later
                    .iter()
                    .filter(|(_, at)| **at <= now)
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in due {
                    s.later.remove(&k);
                    s.ready.insert(k);
                }
                if !s.ready.is_empty() {
                    return Some(std::mem::take(&mut s.ready).into_iter().collect());
                }
                if self.producers.strong_count() == 0 {
                    return None;
                }
                s.later.values().min().copied()
            };
            match wakeup {
                Some(at) => {
                    tokio::select! {
                        () = self.wake.notified() => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => self.wake.notified().await,
            }
        }
    }

    /// `key` failed with `class`: schedules it again as [`ErrorClass::retry`]
    /// says. Returns the delay, or None when it waits for a change.
    pub fn retry(&mut self, key: K, class: ErrorClass) -> Option<Duration> {
        let mut s = lock(&self.state);
        let delay = match class.retry() {
            Retry::OnChange => {
                s.backoff.remove(&key);
                return None;
            }
            Retry::Slowly => self.max,
            Retry::Backoff => {
                let builder = self.backoff;
                let backoff = s
                    .backoff
                    .entry(key.clone())
                    .or_insert_with(|| builder.build());
                backoff.next().unwrap_or(self.max)
            }
        };
        if !s.ready.contains(&key) {
            let at = Instant::now() + delay;
            let entry = s.later.entry(key).or_insert(at);
            *entry = (*entry).min(at);
        }
        drop(s);
        self.wake.notify_one();
        Some(delay)
    }

    /// `key` succeeded: its next failure starts the backoff afresh.
    pub fn done(&mut self, key: &K) {
        lock(&self.state).backoff.remove(key);
    }

    /// Keys queued or waiting out a delay (for tests and metrics).
    pub fn len(&self) -> usize {
        let s = lock(&self.state);
        s.ready.len() + s.later.len()
    }

    /// Nothing queued or waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Our writes the watch has not shown yet, per key: the one table both
/// components hide their own writes with (rule 4).
#[derive(Debug)]
pub struct PendingWrites<K, V = String> {
    writes: HashMap<K, (V, Instant)>,
}

impl<K, V> Default for PendingWrites<K, V> {
    fn default() -> Self {
        Self {
            writes: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash, V> PendingWrites<K, V> {
    /// We wrote `key`; `version` tells our write apart when the watch
    /// shows it (a resourceVersion, an object name, the versions that
    /// precede it).
    pub fn wrote(&mut self, key: K, version: V) {
        self.writes.insert(key, (version, Instant::now()));
    }

    /// Whether our write to `key` is still on its way: false (and
    /// forgotten) once `shown(version)` says the cache has it, or after
    /// [`PENDING_WRITE_TIMEOUT`].
    pub fn in_flight(&mut self, key: &K, shown: impl FnOnce(&V) -> bool) -> bool {
        let Some((version, at)) = self.writes.get(key) else {
            return false;
        };
        if shown(version) || at.elapsed() > PENDING_WRITE_TIMEOUT {
            self.writes.remove(key);
            return false;
        }
        true
    }

    /// Forgets `key` (its object is gone).
    pub fn forget(&mut self, key: &K) {
        self.writes.remove(key);
    }
}

/// Whether a cache showing `seen` still lacks our last write, made on top
/// of `before` (the version we decided from, then any intermediate
/// versions of our own writes). A watch delivers in order, so any other
/// version comes after our write, even one someone else wrote meanwhile:
/// waiting for our exact version then would skip the object until the
/// timeout, with nothing left to queue it again.
pub fn behind_our_write(before: &[String], seen: Option<&str>) -> bool {
    seen.is_some_and(|seen| before.iter().any(|v| v == seen))
}

#[cfg(test)]
mod tests;
