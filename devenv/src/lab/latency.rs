//! A node's API latency in the lab: what a slow API server looks like to
//! one node. The node's forwarder ([`super::forward`]) passes what the
//! node sends to the API server through a delay line: each request waits
//! a delay drawn uniformly from a range that can be switched at run time
//! ([`ApiLatency`]), and bytes keep their order. Answers and watch events
//! coming back are not delayed.
//!
//! The forwarder runs in a process of its own (`lab-forward`), so the
//! setting reaches it through a file ([`follow`]): one line `FROMms..TOms`,
//! or `off` (or no file) for none. The forwarder copies every setting it
//! took to `<file>.applied`, which is how [`apply`] knows it is in force.
//!
//! A "request" here is a burst of bytes: a chunk that arrives within
//! [`BURST_GAP`] of the previous one continues its request and keeps its
//! delay (TLS records of one HTTP request are written back to back), any
//! other draws a new delay. This module owns no sockets but the two it is
//! handed in [`delayed_pipe`].

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A chunk arriving within this of the previous one continues its request.
pub const BURST_GAP: Duration = Duration::from_millis(2);
/// How often [`follow`] reads the setting file.
pub const FOLLOW_INTERVAL: Duration = Duration::from_millis(50);

/// The delay range in force for one forwarder; `None` is no delay.
#[derive(Debug, Default)]
pub struct ApiLatency(Mutex<Option<Range<Duration>>>);

impl ApiLatency {
    /// Sets the range later requests draw their delay from.
    pub fn set(&self, range: Option<Range<Duration>>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = range;
    }

    /// The range in force.
    pub fn get(&self) -> Option<Range<Duration>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A delay drawn uniformly from the range in force (zero without one).
    pub fn draw(&self) -> Duration {
        self.get()
            .map_or(Duration::ZERO, |r| uniform(&r, fastrand::u64(..)))
    }
}

/// The delay `random` (any `u64`) picks from `range`: uniform over
/// `[start, end)` at nanosecond resolution; `start` when the range is empty.
pub fn uniform(range: &Range<Duration>, random: u64) -> Duration {
    let span = range.end.saturating_sub(range.start).as_nanos();
    if span == 0 {
        return range.start;
    }
    let offset = u128::from(random) % span;
    range.start + Duration::from_nanos(u64::try_from(offset).unwrap_or(u64::MAX))
}

/// When each chunk of one direction may be passed on: the decision of the
/// delay line, without I/O.
#[derive(Debug, Default)]
pub struct Schedule {
    /// The previous chunk: when it arrived, its delay, its release.
    last: Option<(Instant, Duration, Instant)>,
}

impl Schedule {
    /// The release time of a chunk arriving at `now`; `draw` gives a new
    /// request's delay. Never before an earlier chunk's release (order
    /// kept), and a chunk within [`BURST_GAP`] of the previous one keeps
    /// its delay.
    pub fn release(&mut self, now: Instant, draw: impl FnOnce() -> Duration) -> Instant {
        let delay = match self.last {
            Some((arrived, delay, _)) if now.saturating_duration_since(arrived) <= BURST_GAP => {
                delay
            }
            _ => draw(),
        };
        let mut at = now + delay;
        if let Some((_, _, previous)) = self.last {
            at = at.max(previous);
        }
        self.last = Some((now, delay, at));
        at
    }
}

/// Copies `from` to `to` until EOF, each request held back as `latency`
/// says when it arrives, then half-closes `to`.
pub fn delayed_pipe(from: &TcpStream, to: &TcpStream, latency: &ApiLatency) -> io::Result<()> {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::scope(|s| {
        let writer = s.spawn(move || {
            let mut to = to;
            let written = (|| {
                for (at, chunk) in rx {
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    to.write_all(&chunk)?;
                }
                Ok(())
            })();
            let _ = to.shutdown(Shutdown::Write);
            written
        });
        let mut schedule = Schedule::default();
        let mut buf = vec![0u8; 64 * 1024];
        let mut from = from;
        let read = loop {
            let n = match from.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(e),
            };
            let at = schedule.release(Instant::now(), || latency.draw());
            if tx.send((at, buf[..n].to_vec())).is_err() {
                // The writer failed: its error is the one to report.
                break Ok(());
            }
        };
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("delay line writer panicked")));
        read.and(written)
    })
}

/// Errors of the setting file.
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// The text is no setting.
    #[error("api latency {text:?}: expected `off` or `FROMms..TOms` with FROM <= TO")]
    Parse {
        /// What was read.
        text: String,
    },
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The forwarder did not take the setting in time.
    #[error(
        "the forwarder did not apply api latency {setting:?} within {waited:?} ({applied} holds {seen:?}); is a lab-forward built before the latency option running? `cargo xtask dev-env-cleanup` and recreate the lab"
    )]
    NotApplied {
        /// What was asked for.
        setting: String,
        /// How long [`apply`] waited.
        waited: Duration,
        /// The forwarder's acknowledgement file.
        applied: PathBuf,
        /// What it held.
        seen: Option<String>,
    },
}

/// The file's text for `range`.
pub fn render(range: Option<&Range<Duration>>) -> String {
    match range {
        None => "off".to_owned(),
        Some(r) => format!("{}ms..{}ms", r.start.as_millis(), r.end.as_millis()),
    }
}

/// The setting `text` ([`render`]'s form) names.
pub fn parse(text: &str) -> Result<Option<Range<Duration>>, LatencyError> {
    let text = text.trim();
    if text == "off" || text.is_empty() {
        return Ok(None);
    }
    let bad = || LatencyError::Parse {
        text: text.to_owned(),
    };
    let (from, to) = text.split_once("..").ok_or_else(bad)?;
    let ms = |s: &str| -> Result<Duration, LatencyError> {
        let n = s.trim().strip_suffix("ms").ok_or_else(bad)?;
        n.parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| bad())
    };
    let (from, to) = (ms(from)?, ms(to)?);
    if from > to {
        return Err(bad());
    }
    Ok(Some(from..to))
}

/// The acknowledgement file of setting file `path`.
pub fn applied_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".applied");
    PathBuf::from(name)
}

/// Writes `range` to setting file `path` (atomically) and waits up to
/// `wait` until the forwarder following it acknowledges it.
pub fn apply(
    path: &Path,
    range: Option<&Range<Duration>>,
    wait: Duration,
) -> Result<(), LatencyError> {
    let text = render(range);
    let io = |source| LatencyError::Io {
        path: path.to_owned(),
        source,
    };
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{text}\n")).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    let applied = applied_path(path);
    let deadline = Instant::now() + wait;
    loop {
        let seen = std::fs::read_to_string(&applied).ok();
        if seen.as_deref().map(str::trim) == Some(text.as_str()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(LatencyError::NotApplied {
                setting: text,
                waited: wait,
                applied,
                seen,
            });
        }
        std::thread::sleep(FOLLOW_INTERVAL / 2);
    }
}

/// Follows setting file `path` on a thread of its own until the handle is
/// dropped: every [`FOLLOW_INTERVAL`] its setting goes to every one of
/// `targets` and is acknowledged in [`applied_path`]. A file that cannot
/// be read counts as `off`; one that does not parse is logged and ignored.
pub fn follow(path: PathBuf, targets: Vec<Arc<ApiLatency>>) -> io::Result<Following> {
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let thread = std::thread::Builder::new()
        .name("api-latency".into())
        .spawn(move || {
            let mut last: Option<String> = None;
            while !stopped.load(Ordering::SeqCst) {
                let text = std::fs::read_to_string(&path).unwrap_or_else(|_| "off".into());
                if last.as_deref() != Some(text.as_str()) {
                    match parse(&text) {
                        Ok(range) => {
                            tracing::info!(setting = %render(range.as_ref()), "api latency");
                            for t in &targets {
                                t.set(range.clone());
                            }
                            if let Err(e) =
                                std::fs::write(applied_path(&path), render(range.as_ref()))
                            {
                                tracing::warn!(path = %path.display(), error = %e, "cannot acknowledge the api latency");
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "ignored"),
                    }
                    last = Some(text);
                }
                std::thread::sleep(FOLLOW_INTERVAL);
            }
        })?;
    Ok(Following {
        stop,
        thread: Some(thread),
    })
}

/// The thread [`follow`] started; dropping it stops the thread.
#[derive(Debug)]
pub struct Following {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests;
