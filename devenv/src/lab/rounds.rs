//! How the lab controller-manager's controllers run: in rounds, one every
//! interval until shutdown, each bounded in time; a round that fails or
//! times out is logged and the next one retries.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

/// Runs `round` every `interval` (a late tick waits, it does not burst)
/// until `shutdown` completes, each bounded by `timeout`; `what` names
/// the controller in the log.
pub async fn every<F, Fut, E>(
    what: &str,
    interval: Duration,
    timeout: Duration,
    shutdown: impl Future<Output = ()>,
    mut round: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    tokio::pin!(shutdown);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            _ = ticks.tick() => {}
        }
        let outcome = tokio::select! {
            () = &mut shutdown => break,
            r = tokio::time::timeout(timeout, round()) => r,
        };
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "{what} failed"),
            Err(_) => tracing::warn!("{what} timed out after {timeout:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Rounds repeat, a failing or hanging one does not stop the next,
    /// and shutdown ends them.
    #[tokio::test]
    async fn rounds_repeat_past_failures_and_stop_at_shutdown() {
        let n = AtomicU32::new(0);
        let stop = async {
            while n.load(Ordering::Relaxed) < 7 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        every(
            "test",
            Duration::from_millis(1),
            Duration::from_millis(20),
            stop,
            || async {
                match n.fetch_add(1, Ordering::Relaxed) % 3 {
                    0 => Ok(()),
                    1 => Err("broken"),
                    _ => {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        Ok(())
                    }
                }
            },
        )
        .await;
        assert!(
            n.load(Ordering::Relaxed) >= 7,
            "went on past failures and hangs"
        );
    }
}
