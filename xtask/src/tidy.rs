//! Repository hygiene as tests that read the source tree: the invariants
//! ARCHITECTURE.md promises (where unsafe code lives, which modules talk
//! to the API server, that deciding modules do no I/O and import no I/O
//! module), module dependencies in every crate (no import cycle between
//! sibling modules: `deps`), file and function sizes (`size`), module
//! docs, and no pointer a reader cannot follow (issue numbers, sections
//! of documents that are not in the tree). Each failure names the file and
//! the rule, so the fix is either the code or ARCHITECTURE.md, on purpose.
//! The offenders the tree still has are listed in `known`, which only
//! shrinks.

mod deps;
mod known;
mod lex;
mod readme;
mod size;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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

/// The files of `files` (relative paths) whose code (no comments, no
/// string literals' insides: a rule broken only inside a string is not
/// broken) matches `bad`, minus those matching one of `allowed` (path
/// prefixes).
fn offenders(files: &[PathBuf], bad: &[&str], allowed: &[&str]) -> Vec<String> {
    files
        .iter()
        .map(|f| (rel(f), lex::strip(&read(f))))
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

/// metallb-rs's deciding modules (pure, not async, no sockets, files or
/// clients) and the modules that do I/O, as ARCHITECTURE.md draws them;
/// the most specific entry wins (`config` decides, `config::load` reads
/// files). A deciding module may not import an I/O module.
const METALLB_RS_LAYERS: deps::Layers = deps::Layers {
    deciding: &[
        "allocator",
        "config",
        "service",
        "service_key",
        "event",
        "certs",
        "tls::policy",
        "metrics::access",
        "controller::converge",
        "speaker::plan",
        "speaker::election",
        "speaker::liveness",
        "speaker::lease",
        "speaker::membership::view",
        "speaker::uplink",
        "speaker::garp",
        "speaker::announcer::ownership",
        "speaker::status",
        "speaker::events",
        "speaker::bfd",
        "speaker::bgp::advertise",
        "speaker::bgp::updates",
        "net::arp",
        "net::ndp",
        "net::ethernet",
        "net::bgp",
    ],
    io: &[
        "k8s",
        "controller::run",
        "speaker::run",
        "speaker::presence",
        "speaker::renewal",
        "speaker::membership",
        "speaker::announcer",
        "speaker::bgp",
        "net::packet",
        "net::iface",
        "metrics::serve",
        "metrics::health",
        "metrics::process",
        "tls",
        "report",
        "config::load",
    ],
};

/// What a deciding module must not contain.
const IO_TOKENS: &[&str] = &[
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
            let under = path.strip_prefix("metallb-rs/src/").unwrap_or(&path);
            deps::module_of(under).is_some_and(|m| METALLB_RS_LAYERS.is_deciding(&m))
                // Tests may do what they like.
                && !deps::is_test_file(under)
        })
        .collect();
    assert!(files.len() > 20, "the deciding modules moved: {files:?}");
    let found = offenders(&files, IO_TOKENS, &[]);
    assert!(
        found.is_empty(),
        "I/O or async in a deciding module (move it to a run module and hand the result in):\n{}",
        found.join("\n")
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
        "test-support",
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

/// A workspace crate under the dependency and size rules.
struct Crate {
    /// Its directory: every `.rs` file under it has the size rules.
    dir: &'static str,
    /// Its module tree, for the dependency rules (`None`: the fuzz
    /// targets, each a crate of one file).
    src: Option<&'static str>,
    layers: deps::Layers<'static>,
    /// Its offenders today, each with its fix; the list only shrinks.
    known: &'static [known::Known],
}

/// No layers declared: only the cycle and size rules apply.
const NO_LAYERS: deps::Layers = deps::Layers {
    deciding: &[],
    io: &[],
};

const CRATES: &[Crate] = &[
    Crate {
        dir: "metallb-rs",
        src: Some("metallb-rs/src"),
        layers: METALLB_RS_LAYERS,
        known: known::METALLB_RS,
    },
    Crate {
        dir: "devenv",
        src: Some("devenv/src"),
        layers: deps::Layers {
            // What ARCHITECTURE.md says decides without I/O.
            deciding: &[
                "frr",
                "docker::ranges",
                "kind::config",
                "lab::cluster::layout",
                "lab::played",
                "lab::proxy::ruleset",
                "lab::scheduler::filters",
                "lab::workloads::plan",
                "lab::workloads::daemonset",
            ],
            io: &[
                "cluster",
                "docker",
                "image",
                "kind::apply",
                "kind::cluster",
                "lab::agent",
                "lab::backend",
                "lab::cluster",
                "lab::endpoints",
                "lab::forward",
                "lab::frr",
                "lab::healthcheck",
                "lab::netns",
                "lab::nodelifecycle",
                "lab::process",
                "lab::routers",
                "lab::scheduler",
                "lab::workloads",
            ],
        },
        known: known::DEVENV,
    },
    Crate {
        dir: "e2e",
        src: Some("e2e/src"),
        layers: deps::Layers {
            deciding: &["prober::window", "filter"],
            io: &[
                "backend",
                "link",
                "prober",
                "capture",
                "metallb",
                "namespaces",
            ],
        },
        known: known::E2E,
    },
    Crate {
        dir: "lab-apiserver",
        src: Some("lab-apiserver/src"),
        layers: deps::Layers {
            deciding: &[
                "selector",
                "page",
                "patch",
                "apply",
                "schema",
                "auth::rbac",
                "auth::escalation",
                "admission::rules",
            ],
            io: &["http", "watch", "tls", "client"],
        },
        known: known::LAB_APISERVER,
    },
    Crate {
        dir: "bench",
        src: Some("bench/src"),
        layers: NO_LAYERS,
        known: known::BENCH,
    },
    Crate {
        dir: "sim",
        src: Some("sim/src"),
        layers: NO_LAYERS,
        known: known::SIM,
    },
    Crate {
        dir: "xtask",
        src: Some("xtask/src"),
        layers: NO_LAYERS,
        known: known::XTASK,
    },
    Crate {
        dir: "crd-cel",
        src: Some("crd-cel/src"),
        layers: NO_LAYERS,
        known: known::CRD_CEL,
    },
    Crate {
        dir: "test-support",
        src: Some("test-support/src"),
        layers: NO_LAYERS,
        known: known::TEST_SUPPORT,
    },
    Crate {
        dir: "fuzz",
        src: None,
        layers: NO_LAYERS,
        known: known::FUZZ,
    },
];

/// Every dependency and size finding of each crate of `CRATES`, in its
/// order; computed once for the tests that read them.
fn all_findings() -> &'static [Vec<deps::Finding>] {
    static FOUND: OnceLock<Vec<Vec<deps::Finding>>> = OnceLock::new();
    FOUND.get_or_init(|| CRATES.iter().map(findings).collect())
}

/// Every dependency and size finding of one crate.
fn findings(c: &Crate) -> Vec<deps::Finding> {
    let files = rust_files(c.dir);
    let mut out = Vec::new();
    let mut tree = Vec::new();
    for f in &files {
        let (path, text) = (rel(f), read(f));
        out.extend(size::long_file(&path, &text));
        out.extend(size::long_functions(&path, &text));
        if let Some(under) = c.src.and_then(|src| path.strip_prefix(&format!("{src}/"))) {
            tree.push((under.to_string(), text));
        }
    }
    if let Some(src) = c.src {
        out.extend(deps::check(src, &tree, &c.layers));
    }
    out
}

/// What kind of finding a key is, for the failure's first words.
fn kind_of(key: &str) -> &'static str {
    match key.split(':').next() {
        Some("cycle") => "import cycle",
        Some("deciding") => "deciding module importing an I/O module",
        Some("file") => "file over 700 lines",
        _ => "function over 100 lines",
    }
}

/// Sibling modules import one way, deciding modules import no I/O module,
/// files stay under 700 lines and functions under 100, in every crate:
/// the offenders listed in `tidy/known.rs` aside, and that list only
/// shrinks (`the_known_offenders_are_still_there`).
#[test]
fn no_new_import_cycles_layer_breaks_or_oversized_code() {
    let mut new = Vec::new();
    for (c, found) in CRATES.iter().zip(all_findings()) {
        let known: BTreeSet<&str> = c.known.iter().map(|k| k.key).collect();
        for f in found {
            if !known.contains(f.key.as_str()) {
                new.push(format!("new {}: fix it\n{}", kind_of(&f.key), f.message));
            }
        }
    }
    assert!(new.is_empty(), "{}", new.join("\n\n"));
}

#[test]
fn the_known_offenders_are_still_there() {
    let mut gone = Vec::new();
    for (c, found) in CRATES.iter().zip(all_findings()) {
        let found: BTreeSet<&str> = found.iter().map(|f| f.key.as_str()).collect();
        for k in c.known.iter().filter(|k| !found.contains(k.key)) {
            gone.push(format!(
                "{}: `{}` is gone (its fix: {}): remove it from the list in xtask/src/tidy/known.rs",
                c.dir, k.key, k.fix
            ));
        }
    }
    assert!(gone.is_empty(), "{}", gone.join("\n"));
}

/// The crate list above names every workspace member.
#[test]
fn every_workspace_crate_is_checked() {
    let manifest = read(&root().join("Cargo.toml"));
    let members = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .unwrap_or_default();
    for member in members.split('"').skip(1).step_by(2) {
        assert!(
            CRATES.iter().any(|c| c.dir == member),
            "add {member} to CRATES in xtask/src/tidy.rs"
        );
    }
}
