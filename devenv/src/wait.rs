//! Waiting on a cluster, a lab or a container: poll a check until it holds
//! ([`eventually`], [`eventually_async`]) or check that something keeps
//! holding ([`throughout`]). The one polling helper of the lab tests and
//! the e2e suites, so every wait fails the same way: after its timeout,
//! naming what it waited for and the last thing it saw.
//!
//! A check reports "not yet" as `Ok(None)` and what it saw as `Err`: the
//! wait goes on after either, and the last error is in the timeout's
//! message (an API call failing for a moment is not a failed wait).

use anyhow::{Context, Result, bail};
use std::time::{Duration, Instant};

/// The pause between two checks: short next to the seconds a cluster takes
/// to converge, long enough not to load the API server.
pub const INTERVAL: Duration = Duration::from_millis(200);

/// Polls `check` every [`INTERVAL`] until it returns `Some`, failing after
/// `timeout` with `what` and the last error `check` returned.
pub fn eventually<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    let mut last = Observed::default();
    loop {
        if let Some(v) = last.take(check()) {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what} ({last})");
        }
        std::thread::sleep(INTERVAL);
    }
}

/// [`eventually`] for an async `check`, sleeping on the runtime between
/// checks.
pub async fn eventually_async<T, F>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> F,
) -> Result<T>
where
    F: Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = Observed::default();
    loop {
        if let Some(v) = last.take(check().await) {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what} ({last})");
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

/// Checks `check` every [`INTERVAL`] for `duration`; fails at the first
/// violation it reports (`Some(what went wrong)`) or error. The
/// counterpart of [`eventually`] for "nothing changes" claims: call it
/// only after proving that the action whose absence of effect it checks
/// took place.
pub fn throughout(
    duration: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<Option<String>>,
) -> Result<()> {
    let deadline = Instant::now() + duration;
    loop {
        if let Some(violation) = check().with_context(|| format!("checking {what}"))? {
            bail!("{what} broke: {violation}");
        }
        if Instant::now() > deadline {
            return Ok(());
        }
        std::thread::sleep(INTERVAL);
    }
}

/// The last error a check returned, for the timeout's message.
#[derive(Default)]
struct Observed(Option<String>);

impl Observed {
    /// The value of a check that holds; remembers an error.
    fn take<T>(&mut self, result: Result<Option<T>>) -> Option<T> {
        match result {
            Ok(v) => v,
            Err(e) => {
                self.0 = Some(format!("{e:#}"));
                None
            }
        }
    }
}

impl std::fmt::Display for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_deref().unwrap_or("nothing observed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::anyhow;

    #[test]
    fn eventually_returns_the_first_value_and_retries_after_errors() {
        let mut calls = 0;
        let got = eventually(Duration::from_secs(10), "the third call", || {
            calls += 1;
            match calls {
                1 => Ok(None),
                2 => Err(anyhow!("not reachable yet")),
                n => Ok(Some(n)),
            }
        })
        .expect("holds on the third call");
        assert_eq!(got, 3);
    }

    #[test]
    fn eventually_times_out_naming_the_wait_and_the_last_error() {
        let mut calls = 0;
        let err = eventually(Duration::ZERO, "a ready node", || -> Result<Option<()>> {
            calls += 1;
            Err(anyhow!("node-a Ready=False"))
        })
        .expect_err("never holds");
        assert_eq!(calls, 1, "checked once before giving up");
        assert_eq!(
            err.to_string(),
            "timed out after 0ns waiting for a ready node (node-a Ready=False)"
        );
        let err = eventually(Duration::ZERO, "nothing", || Ok(None::<()>)).expect_err("never");
        assert!(err.to_string().ends_with("(nothing observed)"), "{err}");
    }

    #[tokio::test]
    async fn eventually_async_waits_on_the_runtime() {
        let mut calls = 0;
        let got = eventually_async(Duration::from_secs(10), "the second call", || {
            calls += 1;
            let n = calls;
            async move { Ok((n == 2).then_some(n)) }
        })
        .await
        .expect("holds on the second call");
        assert_eq!(got, 2);
        let err = eventually_async(Duration::ZERO, "never", || async {
            Err::<Option<()>, _>(anyhow!("still 0/3"))
        })
        .await
        .expect_err("never holds");
        assert_eq!(
            err.to_string(),
            "timed out after 0ns waiting for never (still 0/3)"
        );
    }

    #[test]
    fn throughout_fails_at_the_first_violation_and_passes_otherwise() {
        let mut calls = 0;
        let err = throughout(Duration::from_secs(10), "the address", || {
            calls += 1;
            Ok((calls == 2).then(|| "moved to node-b".to_owned()))
        })
        .expect_err("broke on the second check");
        assert_eq!(err.to_string(), "the address broke: moved to node-b");
        assert_eq!(calls, 2);
        throughout(Duration::ZERO, "nothing", || Ok(None)).expect("held");
        let err = throughout(Duration::ZERO, "the pool", || Err(anyhow!("API down")))
            .expect_err("an error is a failure");
        assert_eq!(format!("{err:#}"), "checking the pool: API down");
    }
}
