//! Giving freed heap back to the system. After a watch's initial list
//! (one large JSON body per kind) glibc keeps the freed pages in the
//! process; the long-running components trim them now and then so their
//! resident memory reflects what they hold, not what they once parsed.

use std::time::{Duration, Instant};

/// Returns freed heap to the system (glibc); a no-op elsewhere.
pub fn trim() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Calls [`trim`] at most once per `every`.
#[derive(Debug)]
pub struct Trimmer {
    every: Duration,
    last: Option<Instant>,
}

impl Trimmer {
    /// A trimmer that trims at most once per `every`.
    pub fn new(every: Duration) -> Self {
        Self { every, last: None }
    }

    /// Trims if the last trim is older than the period.
    pub fn maybe_trim(&mut self) {
        if self.last.is_none_or(|t| t.elapsed() >= self.every) {
            trim();
            self.last = Some(Instant::now());
        }
    }
}
