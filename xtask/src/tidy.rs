//! Repository hygiene as tests that read the source tree: the invariants
//! ARCHITECTURE.md promises (where unsafe code lives, which modules talk
//! to the API server, that deciding modules do no I/O), file sizes, module
//! docs, and no pointer a reader cannot follow (issue numbers, sections
//! of documents that are not in the tree). Each failure names the file and
//! the rule, so the fix is either the code or ARCHITECTURE.md, on purpose.

use std::path::{Path, PathBuf};

/// The workspace's own source files (not `target/`, not fuzz's lock).
fn rust_files(under: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if name != "target" && name != ".git" {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(under), &mut out);
    out.sort();
    out
}

fn root() -> PathBuf {
    crate::tools::project_root()
}

/// `path` relative to the workspace root, with `/` separators.
fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", rel(path)))
}

/// The code of a file without `//` comments and string literals' insides
/// (good enough for the patterns below; a rule broken only inside a string
/// is not broken).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| {
            let line = line.split("//").next().unwrap_or_default();
            let mut out = String::new();
            let mut in_str = false;
            for c in line.chars() {
                if c == '"' {
                    in_str = !in_str;
                    out.push(c);
                } else if !in_str {
                    out.push(c);
                }
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The files of `files` (relative paths) whose code matches `bad`, minus
/// those matching one of `allowed` (path prefixes).
fn offenders(files: &[PathBuf], bad: &[&str], allowed: &[&str]) -> Vec<String> {
    files
        .iter()
        .map(|f| (rel(f), code_of(&read(f))))
        .filter(|(path, _)| !allowed.iter().any(|a| path.starts_with(a)))
        .filter_map(|(path, code)| {
            let hits: Vec<&str> = bad.iter().copied().filter(|b| code.contains(b)).collect();
            (!hits.is_empty()).then(|| format!("{path}: {}", hits.join(", ")))
        })
        .collect()
}

/// Unsafe code lives in the three modules ARCHITECTURE.md names: packet
/// sockets, the TCP MD5 socket option, and the allocator trim.
#[test]
fn unsafe_code_lives_only_where_architecture_says() {
    let found = offenders(
        &rust_files("metallb-rs/src"),
        &["unsafe "],
        &[
            "metallb-rs/src/net/packet.rs",
            "metallb-rs/src/speaker/bgp/socket.rs",
            "metallb-rs/src/memory.rs",
        ],
    );
    assert!(
        found.is_empty(),
        "unsafe code outside the modules ARCHITECTURE.md names (move it there, or name the module there):\n{}",
        found.join("\n")
    );
}

/// Only the doing side of metallb-rs talks to the API server.
#[test]
fn only_the_io_modules_touch_the_kubernetes_api() {
    let found = offenders(
        &rust_files("metallb-rs/src"),
        &["Api<", "Api::", "kube::Client", "kube::Api"],
        &[
            "metallb-rs/src/k8s/",
            "metallb-rs/src/controller/run",
            "metallb-rs/src/speaker/run",
            "metallb-rs/src/speaker/presence.rs",
            "metallb-rs/src/speaker/renewal.rs",
            "metallb-rs/src/report.rs",
            "metallb-rs/src/main.rs",
        ],
    );
    assert!(
        found.is_empty(),
        "kube::Api or a Client outside k8s/, the run modules, presence, renewal and report (deciding modules take plain data):\n{}",
        found.join("\n")
    );
}

/// The deciding modules: pure, not async, no sockets, files or clients.
const DECIDING: &[&str] = &[
    "metallb-rs/src/allocator/",
    "metallb-rs/src/config/",
    "metallb-rs/src/service.rs",
    "metallb-rs/src/certs.rs",
    "metallb-rs/src/tls/policy.rs",
    "metallb-rs/src/metrics/access.rs",
    "metallb-rs/src/controller/converge",
    "metallb-rs/src/speaker/plan",
    "metallb-rs/src/speaker/election",
    "metallb-rs/src/speaker/liveness.rs",
    "metallb-rs/src/speaker/uplink.rs",
    "metallb-rs/src/speaker/garp.rs",
    "metallb-rs/src/speaker/announcer/ownership.rs",
    "metallb-rs/src/speaker/status.rs",
    "metallb-rs/src/speaker/events.rs",
    "metallb-rs/src/speaker/bfd",
    "metallb-rs/src/speaker/bgp/advertise",
    "metallb-rs/src/speaker/bgp/updates",
    "metallb-rs/src/net/arp.rs",
    "metallb-rs/src/net/ndp.rs",
    "metallb-rs/src/net/ethernet.rs",
    "metallb-rs/src/net/bgp",
];

/// What a deciding module must not contain.
const IO: &[&str] = &[
    "async fn",
    ".await",
    "tokio::",
    "std::fs",
    "File::",
    "TcpStream",
    "UdpSocket",
    "kube::Client",
    "Api<",
    "std::process",
];

#[test]
fn deciding_modules_do_no_io() {
    let files: Vec<PathBuf> = rust_files("metallb-rs/src")
        .into_iter()
        .filter(|f| {
            let path = rel(f);
            DECIDING.iter().any(|d| path.starts_with(d))
                // Reading the files is `config::load`'s one job.
                && path != "metallb-rs/src/config/load.rs"
                // Tests may do what they like.
                && !path.ends_with("tests.rs")
                && !path.contains("/tests/")
        })
        .collect();
    assert!(files.len() > 20, "the deciding modules moved: {files:?}");
    let found = offenders(&files, IO, &[]);
    assert!(
        found.is_empty(),
        "I/O or async in a deciding module (move it to a run module and hand the result in):\n{}",
        found.join("\n")
    );
}

/// Modules split before they become hard to read.
#[test]
fn no_metallb_rs_source_file_is_over_700_lines() {
    let long: Vec<String> = rust_files("metallb-rs/src")
        .iter()
        .map(|f| (rel(f), read(f).lines().count()))
        .filter(|(_, n)| *n > 700)
        .map(|(p, n)| format!("{p}: {n} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "split these along the decide/do seam:\n{}",
        long.join("\n")
    );
}

/// Every module says what it owns.
#[test]
fn every_module_opens_with_a_doc_comment() {
    let mut missing = Vec::new();
    for crate_dir in [
        "metallb-rs/src",
        "metallb-rs/tests",
        "xtask/src",
        "devenv/src",
        "devenv/tests",
        "e2e/src",
        "lab-apiserver/src",
        "lab-apiserver/tests",
        "crd-cel/src",
        "bench/src",
        "sim/src",
        "sim/tests",
    ] {
        for f in rust_files(crate_dir) {
            let text = read(&f);
            let first = text.lines().find(|l| !l.trim().is_empty());
            if !first.is_some_and(|l| l.starts_with("//!")) {
                missing.push(rel(&f));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "add a `//!` line saying what the module owns:\n{}",
        missing.join("\n")
    );
}

/// Pointers a reader of this tree cannot follow: our issue numbers (the
/// tracker is not in the tree) and sections of the project's private
/// reference notes. RFC sections (`RFC 4861 §7.1.1`) are fine.
fn unfollowable(text: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lower = line.to_lowercase();
        let issue = lower.match_indices("issue").any(|(at, _)| {
            let rest = lower[at + "issue".len()..].trim_start_matches([' ', '#']);
            rest.starts_with(|c: char| c.is_ascii_digit())
        });
        let reference = lower.contains("reference §");
        if issue || reference {
            hits.push(format!("{}: {}", i + 1, line.trim()));
        }
    }
    hits
}

#[test]
fn no_comment_or_doc_points_at_something_a_reader_cannot_open() {
    let mut files: Vec<PathBuf> = [
        "metallb-rs",
        "xtask",
        "devenv",
        "e2e",
        "lab-apiserver",
        "crd-cel",
        "bench",
        "sim",
        "fuzz",
    ]
    .iter()
    .flat_map(|d| rust_files(d))
    .collect();
    for doc in ["README.md", "ARCHITECTURE.md", "devenv/README.md"] {
        files.push(root().join(doc));
    }
    let mut found = Vec::new();
    for f in &files {
        // This file spells the patterns out.
        if rel(f) == "xtask/src/tidy.rs" {
            continue;
        }
        for hit in unfollowable(&read(f)) {
            found.push(format!("{}:{hit}", rel(f)));
        }
    }
    assert!(
        found.is_empty(),
        "say what is meant instead of pointing at an issue or private note:\n{}",
        found.join("\n")
    );
}

#[test]
fn unfollowable_pointers_are_found_and_rfc_sections_are_not() {
    assert_eq!(unfollowable("see issue #8").len(), 1);
    assert_eq!(unfollowable("done (issue 14)").len(), 1);
    assert_eq!(unfollowable("upstream reference §7").len(), 1);
    assert!(unfollowable("RFC 4861 §7.1.1 checks").is_empty());
    assert!(unfollowable("an issue with the socket").is_empty());
    assert!(unfollowable("metallb #1540 (upstream's tracker)").is_empty());
}

/// Nothing depends on xtask: it is the top of the graph.
#[test]
fn nothing_depends_on_xtask() {
    let offenders: Vec<String> = [
        "metallb-rs",
        "devenv",
        "e2e",
        "lab-apiserver",
        "crd-cel",
        "bench",
        "sim",
    ]
    .iter()
    .filter(|c| {
        read(&root().join(c).join("Cargo.toml"))
            .lines()
            .any(|l| l.trim_start().starts_with("xtask"))
    })
    .map(|c| c.to_string())
    .collect();
    assert!(offenders.is_empty(), "{offenders:?} depend on xtask");
}

#[test]
fn code_of_drops_comments_and_string_contents() {
    assert_eq!(
        code_of(r#"let x = "unsafe "; // unsafe "#).trim_end(),
        r#"let x = "";"#
    );
    assert_eq!(code_of("unsafe { f() }"), "unsafe { f() }");
}
