//! The wall clock as the components write it into objects (lease
//! renewTime, event timestamps), with the lab's test hook.
//!
//! Nothing decides from another node's wall-clock time: lease expiry is
//! judged on the local monotonic clock ([`crate::k8s::observed`]). The
//! hook lets the lab prove it: the lab runs a static binary, so faketime
//! (LD_PRELOAD) cannot skew a speaker's clock; instead the hidden
//! environment variable [`OFFSET_ENV`] shifts the times this process
//! writes by a number of seconds (negative: behind). It is a test hook
//! for the e2e skew spec, not a setting: it is not in `--help` and the
//! manifests never set it.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::sync::OnceLock;

/// Test hook: seconds added to every wall-clock time this process writes.
pub const OFFSET_ENV: &str = "METALLB_RS_TEST_WALL_CLOCK_OFFSET_SECONDS";

/// The offset from [`OFFSET_ENV`], read once; zero when unset or
/// unreadable (with a warning, so a typo in a lab spec shows).
fn offset() -> SignedDuration {
    static OFFSET: OnceLock<SignedDuration> = OnceLock::new();
    *OFFSET.get_or_init(|| match std::env::var(OFFSET_ENV) {
        Err(_) => SignedDuration::ZERO,
        Ok(v) => match parse_offset(&v) {
            Some(d) => {
                tracing::warn!(offset = %v, "test hook {OFFSET_ENV}: writing wall-clock times shifted by {v} s");
                d
            }
            None => {
                tracing::warn!(value = %v, "test hook {OFFSET_ENV} ignored: not a whole number of seconds");
                SignedDuration::ZERO
            }
        },
    })
}

fn parse_offset(v: &str) -> Option<SignedDuration> {
    v.trim().parse::<i64>().ok().map(SignedDuration::from_secs)
}

/// Now, as this process writes it into objects: the system clock plus
/// the lab's test offset.
pub fn wall_now() -> Timestamp {
    Timestamp::now()
        .checked_add(offset())
        .unwrap_or_else(|_| Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_whole_signed_seconds() {
        assert_eq!(parse_offset("30"), Some(SignedDuration::from_secs(30)));
        assert_eq!(parse_offset(" -30 "), Some(SignedDuration::from_secs(-30)));
        assert_eq!(parse_offset("1.5"), None);
        assert_eq!(parse_offset("soon"), None);
    }
}
