//! Container logs, as kubelet keeps them under `/var/log/pods`: the lab's
//! node agents write what the lab backend served for each container to
//! `DIR/<namespace>_<pod>_<uid>/<container>.log` ([`Ring`]), and this
//! server's `pods/log` subresource reads it back ([`read`]). Each file is
//! a bounded ring: it never holds more than twice [`LINES`] lines, and
//! [`read`] serves at most the last [`LINES`].

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The lines kept per container.
pub const LINES: usize = 1000;

/// The directory of the Pod `namespace/pod` with `uid`'s logs.
pub fn pod_dir(dir: &Path, namespace: &str, pod: &str, uid: &str) -> PathBuf {
    dir.join(format!("{namespace}_{pod}_{uid}"))
}

/// The log file of `container` in the Pod `namespace/pod` with `uid`.
pub fn path(dir: &Path, namespace: &str, pod: &str, uid: &str, container: &str) -> PathBuf {
    pod_dir(dir, namespace, pod, uid).join(format!("{container}.log"))
}

/// Appends lines to one container's log, keeping the file bounded: once
/// it holds `2 * LINES` lines it is rewritten with the last [`LINES`].
pub struct Ring {
    path: PathBuf,
    kept: VecDeque<String>,
    in_file: usize,
}

impl Ring {
    /// A fresh log at `path` (its directory created, an old file
    /// replaced).
    pub fn create(path: PathBuf) -> std::io::Result<Ring> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, "")?;
        Ok(Ring {
            path,
            kept: VecDeque::new(),
            in_file: 0,
        })
    }

    /// Appends `line` (a newline is added).
    pub fn push(&mut self, line: &str) -> std::io::Result<()> {
        let line = line.replace('\n', " ");
        if self.kept.len() == LINES {
            self.kept.pop_front();
        }
        self.kept.push_back(line.clone());
        if self.in_file + 1 >= 2 * LINES {
            let mut text = String::new();
            for l in &self.kept {
                text.push_str(l);
                text.push('\n');
            }
            std::fs::write(&self.path, text)?;
            self.in_file = self.kept.len();
        } else {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&self.path)?;
            writeln!(f, "{line}")?;
            self.in_file += 1;
        }
        Ok(())
    }
}

/// What `kubectl logs` gets: the last [`LINES`] lines of `text` (the
/// last `tail` of them when given), `limit` bytes at most (from the end,
/// whole lines).
pub fn tail(text: &str, tail: Option<usize>, limit: Option<usize>) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let keep = tail.unwrap_or(LINES).min(LINES);
    let mut out: Vec<&str> = lines[lines.len().saturating_sub(keep)..].to_vec();
    if let Some(limit) = limit {
        let mut size = 0;
        let from = out
            .iter()
            .rposition(|l| {
                size += l.len() + 1;
                size > limit
            })
            .map_or(0, |i| i + 1);
        out.drain(..from);
    }
    out.iter().map(|l| format!("{l}\n")).collect()
}

/// The log of `container` in the Pod, as [`tail`] cuts it; empty when
/// nothing was written yet.
pub fn read(
    file: &Path,
    tail_lines: Option<usize>,
    limit_bytes: Option<usize>,
) -> std::io::Result<String> {
    match std::fs::read_to_string(file) {
        Ok(text) => Ok(tail(&text, tail_lines, limit_bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_stays_bounded_and_keeps_the_newest() {
        let dir = std::env::temp_dir().join(format!("podlog-{}", std::process::id()));
        let file = path(&dir, "default", "web-0", "u1", "nginx");
        let mut ring = Ring::create(file.clone()).expect("create");
        for i in 0..(5 * LINES) {
            ring.push(&format!("line {i}")).expect("push");
            let held = std::fs::read_to_string(&file)
                .expect("read")
                .lines()
                .count();
            assert!(held < 2 * LINES, "{held} lines after {i}");
        }
        let served = read(&file, None, None).expect("read");
        let lines: Vec<&str> = served.lines().collect();
        assert_eq!(lines.len(), LINES);
        assert_eq!(lines.first(), Some(&"line 4000"));
        assert_eq!(lines.last(), Some(&"line 4999"));
        assert_eq!(
            read(&file, Some(2), None).expect("tail"),
            "line 4998\nline 4999\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tail_and_limit() {
        assert_eq!(tail("a\nb\nc\n", Some(2), None), "b\nc\n");
        assert_eq!(tail("aa\nbb\ncc\n", None, Some(6)), "bb\ncc\n");
        assert_eq!(tail("aa\nbb\ncc\n", None, Some(5)), "cc\n");
        assert_eq!(tail("", None, None), "");
    }

    #[test]
    fn a_missing_log_is_empty() {
        let missing = std::env::temp_dir().join("podlog-missing/none.log");
        assert_eq!(read(&missing, None, None).expect("empty"), "");
    }
}
