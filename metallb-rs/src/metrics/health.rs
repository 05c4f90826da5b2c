//! Liveness and readiness as the probes see them: the loop's heartbeat
//! (`/healthz`) and readiness gates (`/readyz`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// `/healthz` fails once the component's loop has not beaten for this
/// long. Loops beat on every pass, tick and service processed, and each
/// API call gives up after `k8s::call::API_CALL_TIMEOUT`, so a loop that
/// makes progress - even against an API server that stopped answering -
/// beats far more often; only a loop stuck for good goes this long.
pub const STALL_BOUND: Duration = Duration::from_secs(60);

/// Liveness and readiness as the probes see them.
#[derive(Debug, Default)]
pub struct Health {
    ready: AtomicBool,
    /// The loop's last heartbeat (none before its first).
    beat: std::sync::Mutex<Option<Instant>>,
    /// Readiness gates still closed, with why (the webhook: no
    /// certificate yet, or its CA not yet in the configuration).
    held: std::sync::Mutex<std::collections::BTreeMap<&'static str, String>>,
}

/// How long the loop has been stalled at `now`, when longer than
/// `bound` since its `last` beat; never before the first beat (startup is
/// readiness's business).
pub fn stalled_for(last: Option<Instant>, now: Instant, bound: Duration) -> Option<Duration> {
    let since = now.saturating_duration_since(last?);
    (since > bound).then_some(since)
}

impl Health {
    /// The loop made progress (a pass, a tick, a service processed).
    pub fn beat(&self) {
        if let Ok(mut b) = self.beat.lock() {
            *b = Some(Instant::now());
        }
    }

    /// How long the loop has been stalled, if beyond [`STALL_BOUND`].
    pub fn stalled(&self) -> Option<Duration> {
        let last = self.beat.lock().ok().and_then(|b| *b);
        stalled_for(last, Instant::now(), STALL_BOUND)
    }

    /// Marks the component ready (initial sync done) or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Whether the component is ready: its initial sync done and no gate
    /// held.
    pub fn is_ready(&self) -> bool {
        self.not_ready().is_none()
    }

    /// Why the component is not ready, when it is not.
    pub fn not_ready(&self) -> Option<String> {
        if !self.ready.load(Ordering::Relaxed) {
            return Some("initial sync in progress".into());
        }
        let held = self.held.lock().ok()?;
        let (gate, why) = held.iter().next()?;
        Some(format!("{gate}: {why}"))
    }

    /// Holds readiness until [`Health::release`] of `gate`.
    pub fn hold(&self, gate: &'static str, why: impl Into<String>) {
        if let Ok(mut h) = self.held.lock() {
            h.insert(gate, why.into());
        }
    }

    /// Updates why `gate` is held, when it still is (once released, a
    /// later failure does not take readiness back).
    pub fn hold_if_held(&self, gate: &'static str, why: impl Into<String>) {
        if let Ok(mut h) = self.held.lock()
            && let Some(w) = h.get_mut(gate)
        {
            *w = why.into();
        }
    }

    /// Releases `gate`.
    pub fn release(&self, gate: &'static str) {
        if let Ok(mut h) = self.held.lock() {
            h.remove(gate);
        }
    }
}
