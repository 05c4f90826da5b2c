//! The lab's long-running processes: started detached (own process group,
//! logs under `<lab dir>/logs`, pid files under `<lab dir>/pids`) so they
//! outlive the `cargo xtask` that started them, and found again by name.

use anyhow::{Context, Result};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where a lab keeps its pid files and logs.
#[derive(Debug, Clone)]
pub struct Processes {
    dir: PathBuf,
}

impl Processes {
    /// Processes of the lab whose state lives in `dir`.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
        }
    }

    fn pid_file(&self, name: &str) -> PathBuf {
        self.dir.join("pids").join(format!("{name}.pid"))
    }

    /// The log file of `name`.
    pub fn log_file(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{name}.log"))
    }

    /// The pid of `name` if it is running.
    pub fn pid(&self, name: &str) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(self.pid_file(name))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        // A recycled pid belongs to another program: check it is ours.
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let expected = std::fs::read_to_string(self.pid_file(name).with_extension("cmd")).ok()?;
        let actual = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let actual = actual.trim();
        // `ip netns exec NS cmd...` execs cmd: the process then shows cmd.
        let words: Vec<&str> = expected.split_whitespace().collect();
        let exec_form = match words.as_slice() {
            ["ip", "netns", "exec", _, rest @ ..] => rest.join(" "),
            _ => String::new(),
        };
        (actual == expected.trim() || (!exec_form.is_empty() && actual == exec_form)).then_some(pid)
    }

    /// Starts `argv` as `name` (unless it already runs) with `env`, and
    /// returns its pid.
    pub fn ensure(&self, name: &str, argv: &[String], env: &[(&str, String)]) -> Result<i32> {
        if let Some(pid) = self.pid(name) {
            return Ok(pid);
        }
        std::fs::create_dir_all(self.dir.join("pids"))?;
        std::fs::create_dir_all(self.dir.join("logs"))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_file(name))
            .with_context(|| format!("opening {}", self.log_file(name).display()))?;
        let (program, args) = argv.split_first().context("empty command")?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: Ctrl-C on the xtask does not reach it.
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name}: {}", argv.join(" ")))?;
        let pid = i32::try_from(child.id()).context("pid out of range")?;
        std::fs::write(self.pid_file(name), pid.to_string())?;
        std::fs::write(self.pid_file(name).with_extension("cmd"), argv.join(" "))?;
        // The child is reaped by init once we exit; we never wait on it.
        std::mem::forget(child);
        Ok(pid)
    }

    /// Like [`Processes::ensure`], but first stops `name` if it runs an
    /// executable that has since been replaced on disk (a rebuild), so a
    /// dev-env rerun never leaves an old metallb-rs running. Not for the
    /// API server, whose state lives in its memory.
    pub fn ensure_fresh(&self, name: &str, argv: &[String], env: &[(&str, String)]) -> Result<i32> {
        if let Some(pid) = self.pid(name)
            && binary_replaced(pid)
        {
            self.stop(name, Duration::from_secs(5));
        }
        self.ensure(name, argv, env)
    }

    /// Waits up to `timeout` for `name` to exit; true when it did (or was
    /// not running).
    pub fn wait_exit(&self, name: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.pid(name).is_some() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Marks `name` as being stopped by a signal, so a later start waits
    /// for it to finish (a SIGTERMed speaker says goodbye for up to 2 s).
    pub fn mark_stopping(&self, name: &str) {
        let _ = std::fs::write(self.pid_file(name).with_extension("stopping"), "");
    }

    /// Whether `name` was marked stopping; clears the mark.
    pub fn take_stopping(&self, name: &str) -> bool {
        std::fs::remove_file(self.pid_file(name).with_extension("stopping")).is_ok()
    }

    /// Sends `signal` to `name`; false when it was not running.
    pub fn signal(&self, name: &str, signal: nix::sys::signal::Signal) -> bool {
        match self.pid(name) {
            Some(pid) => nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).is_ok(),
            None => false,
        }
    }

    /// Stops `name`: SIGTERM, SIGKILL after `grace`; forgets its pid file.
    pub fn stop(&self, name: &str, grace: Duration) {
        if let Some(pid) = self.pid(name) {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + grace;
            while self.pid(name).is_some() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if self.pid(name).is_some() {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
        let _ = std::fs::remove_file(self.pid_file(name));
        let _ = std::fs::remove_file(self.pid_file(name).with_extension("cmd"));
    }

    /// Every process name with a pid file.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir.join("pids"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_owned))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// Whether process `pid` runs an executable that was deleted or replaced
/// since it started (the kernel marks the link " (deleted)").
pub fn binary_replaced(pid: i32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .is_ok_and(|p| p.to_string_lossy().ends_with(" (deleted)"))
}

/// Whether `pid` runs (exists and is no zombie: a daemon that died but
/// was not reaped yet counts as dead).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// The last `lines` lines of a log file (empty when unreadable), for
/// errors about a daemon that did not start.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_once_finds_and_stops() {
        let dir = tempfile::tempdir().expect("tmp");
        let procs = Processes::new(dir.path());
        let argv: Vec<String> = ["sleep", "30"].iter().map(|s| (*s).to_owned()).collect();
        let pid = procs.ensure("sleeper", &argv, &[]).expect("starts");
        // Zombie-free check: the kernel may need a moment to exec.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(procs.pid("sleeper"), Some(pid));
        assert_eq!(
            procs.ensure("sleeper", &argv, &[]).expect("reused"),
            pid,
            "not started twice"
        );
        assert_eq!(procs.names(), ["sleeper"]);
        assert!(!binary_replaced(pid));
        procs.stop("sleeper", Duration::from_secs(2));
        assert_eq!(procs.pid("sleeper"), None);
        assert!(!procs.signal("sleeper", nix::sys::signal::Signal::SIGTERM));
    }
}
