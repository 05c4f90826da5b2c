//! The pure parts of the image build: references, Dockerfile, labels,
//! argument lists, the ELF reader and the tar context.

use super::*;
use rstest::rstest;

#[rstest]
#[case(DEFAULT_REGISTRY, "dev", "ghcr.io/metallb-rs/metallb-rs:dev")]
#[case("localhost:5000/", "v0.1.0", "localhost:5000/metallb-rs:v0.1.0")]
fn references(#[case] registry: &str, #[case] tag: &str, #[case] want: &str) {
    assert_eq!(reference(registry, tag), want);
}

#[test]
fn dockerfile_copies_the_binary_runs_as_nobody_and_labels() {
    let labels = oci_labels("0.1.0", "0123abcd-dirty");
    assert_eq!(
        dockerfile(&labels).expect("valid labels"),
        "FROM scratch\n\
         COPY metallb-rs /metallb-rs\n\
         USER 65534:65534\n\
         ENTRYPOINT [\"/metallb-rs\"]\n\
         LABEL org.opencontainers.image.revision=\"0123abcd-dirty\" \\\n      \
         org.opencontainers.image.source=\"https://github.com/metallb-rs/metallb-rs\" \\\n      \
         org.opencontainers.image.title=\"metallb-rs\" \\\n      \
         org.opencontainers.image.version=\"0.1.0\"\n"
    );
}

#[test]
fn dockerfile_without_labels_has_no_label_line() {
    let text = dockerfile(&BTreeMap::new()).expect("no labels");
    assert!(!text.contains("LABEL"), "{text}");
    assert!(text.ends_with("ENTRYPOINT [\"/metallb-rs\"]\n"), "{text}");
}

#[test]
fn dockerfile_quotes_label_values() {
    let labels = BTreeMap::from([("note".to_owned(), r#"say "hi" \o/"#.to_owned())]);
    let text = dockerfile(&labels).expect("quotable");
    assert!(
        text.ends_with("LABEL note=\"say \\\"hi\\\" \\\\o/\"\n"),
        "{text}"
    );
}

#[rstest]
#[case("bad key", "v", "keys may not")]
#[case("", "v", "keys may not")]
#[case("k=v", "v", "keys may not")]
#[case("k", "two\nlines", "control characters")]
fn dockerfile_rejects_labels_it_cannot_write(
    #[case] key: &str,
    #[case] value: &str,
    #[case] reason: &str,
) {
    let labels = BTreeMap::from([(key.to_owned(), value.to_owned())]);
    let err = dockerfile(&labels).expect_err("rejected").to_string();
    assert!(err.starts_with(&format!("image label {key:?}: ")), "{err}");
    assert!(err.contains(reason), "{err}");
}

#[test]
fn oci_labels_name_version_revision_source_title() {
    let labels = oci_labels("1.2.3", "unknown");
    let keys: Vec<&str> = labels.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "org.opencontainers.image.revision",
            "org.opencontainers.image.source",
            "org.opencontainers.image.title",
            "org.opencontainers.image.version",
        ]
    );
    assert_eq!(labels["org.opencontainers.image.version"], "1.2.3");
    assert_eq!(labels["org.opencontainers.image.revision"], "unknown");
}

#[test]
fn git_revision_outside_a_git_tree_is_unknown() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(git_revision(dir.path()), "unknown");
}

#[test]
fn git_revision_of_this_tree_is_a_commit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let revision = git_revision(root);
    // Copies of the tree without .git (and machines without git) say
    // "unknown"; a checkout names its commit, maybe dirty.
    let commit = revision.trim_end_matches("-dirty");
    assert!(
        revision == "unknown"
            || (commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{revision}"
    );
}

#[test]
fn cargo_builds_the_image_binary_for_the_target() {
    assert_eq!(
        cargo_build_args("x86_64-unknown-linux-gnu").join(" "),
        "build --profile image -p metallb-rs --bin metallb-rs --no-default-features --target x86_64-unknown-linux-gnu"
    );
    assert!(host_target().ends_with("-unknown-linux-gnu"));
    assert_eq!(
        static_target_dir(Path::new("/src")),
        Path::new("/src/target/static")
    );
}

#[test]
fn kind_loads_the_image_into_the_named_cluster() {
    assert_eq!(
        kind_load_args("metallb", "ghcr.io/metallb-rs/metallb-rs:dev"),
        [
            "load",
            "docker-image",
            "ghcr.io/metallb-rs/metallb-rs:dev",
            "--name",
            "metallb"
        ]
    );
}

/// A minimal ELF file: header, `types.len()` program headers, then the
/// interpreter path (which every PT_INTERP header points to).
fn elf(wide: bool, little: bool, types: &[u32]) -> Vec<u8> {
    const INTERP: &[u8] = b"/lib64/ld-linux-x86-64.so.2\0";
    let (ehsize, phentsize) = if wide { (64u64, 56u64) } else { (52, 32) };
    let interp_at = ehsize + phentsize * types.len() as u64;
    let mut out = vec![0u8; interp_at as usize];
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = if wide { 2 } else { 1 };
    out[5] = if little { 1 } else { 2 };
    out[6] = 1;
    let mut put = |at: u64, size: usize, value: u64| {
        let bytes = value.to_le_bytes();
        for i in 0..size {
            let byte = bytes[if little { i } else { size - 1 - i }];
            out[at as usize + i] = byte;
        }
    };
    let word = if wide { 8 } else { 4 };
    if wide {
        put(0x20, 8, ehsize);
        put(0x36, 2, phentsize);
        put(0x38, 2, types.len() as u64);
    } else {
        put(0x1c, 4, ehsize);
        put(0x2a, 2, phentsize);
        put(0x2c, 2, types.len() as u64);
    }
    let (p_offset, p_filesz) = if wide { (0x08, 0x20) } else { (0x04, 0x10) };
    for (i, &t) in types.iter().enumerate() {
        let header = ehsize + phentsize * i as u64;
        put(header, 4, u64::from(t));
        if t == PT_INTERP {
            put(header + p_offset, word, interp_at);
            put(header + p_filesz, word, INTERP.len() as u64);
        }
    }
    out.extend_from_slice(INTERP);
    out
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_PHDR: u32 = 6;

#[rstest]
fn elf_with_an_interpreter_is_dynamic(
    #[values(true, false)] wide: bool,
    #[values(true, false)] little: bool,
) {
    let bytes = elf(wide, little, &[PT_PHDR, PT_INTERP, PT_LOAD, PT_DYNAMIC]);
    assert_eq!(
        elf_linkage(&bytes),
        Ok(Linkage::Dynamic {
            interpreter: "/lib64/ld-linux-x86-64.so.2".into()
        })
    );
}

#[rstest]
fn elf_without_an_interpreter_is_static(
    #[values(true, false)] wide: bool,
    #[values(true, false)] little: bool,
) {
    // static-pie keeps PT_DYNAMIC (for its own relocations) but has no
    // PT_INTERP.
    assert_eq!(
        elf_linkage(&elf(wide, little, &[PT_PHDR, PT_LOAD, PT_DYNAMIC])),
        Ok(Linkage::Static)
    );
    assert_eq!(elf_linkage(&elf(wide, little, &[])), Ok(Linkage::Static));
}

#[test]
fn elf_reader_rejects_what_is_not_elf() {
    assert_eq!(elf_linkage(b"#!/bin/sh\n"), Err(ElfError::NotElf));
    assert_eq!(elf_linkage(b""), Err(ElfError::NotElf));
    assert_eq!(
        elf_linkage(b"\x7fELF\x03\x01"),
        Err(ElfError::Unsupported {
            field: "class",
            value: 3
        })
    );
}

#[test]
fn elf_reader_reports_truncation_instead_of_panicking() {
    let full = elf(true, true, &[PT_LOAD, PT_INTERP]);
    for len in 4..full.len() {
        let result = elf_linkage(&full[..len]);
        assert!(
            matches!(result, Err(ElfError::Truncated { .. })),
            "{len} bytes: {result:?}"
        );
    }
    // A program header table offset near u64::MAX must not overflow.
    let mut bad = full.clone();
    bad[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(elf_linkage(&bad), Err(ElfError::Truncated { .. })));
}

#[test]
fn this_test_binary_is_dynamically_linked() {
    // The test harness is built the usual way, with a loader: a real file
    // for the reader.
    let exe = std::env::current_exe().expect("current exe");
    let bytes = std::fs::read(&exe).expect("readable");
    match elf_linkage(&bytes) {
        Ok(Linkage::Dynamic { interpreter }) => {
            assert!(interpreter.contains("ld"), "{interpreter}")
        }
        other => panic!("{}: {other:?}", exe.display()),
    }
}

#[test]
fn build_context_holds_the_dockerfile_and_an_executable_binary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = dir.path().join("metallb-rs");
    std::fs::write(&binary, b"\x7fELF not really").expect("write");
    let context = build_context(&binary, "FROM scratch\n").expect("packed");
    let mut archive = tar::Archive::new(context.as_slice());
    let entries: Vec<(String, u32, u64)> = archive
        .entries()
        .expect("entries")
        .map(|e| {
            let e = e.expect("entry");
            let header = e.header();
            (
                e.path().expect("path").display().to_string(),
                header.mode().expect("mode"),
                header.size().expect("size"),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("Dockerfile".to_owned(), 0o644, 13),
            ("metallb-rs".to_owned(), 0o755, 15)
        ]
    );
}

#[test]
fn build_context_names_a_missing_binary() {
    let err = build_context(Path::new("/nonexistent/metallb-rs"), "").expect_err("missing");
    assert!(
        err.to_string()
            .starts_with("reading the binary /nonexistent/metallb-rs: "),
        "{err}"
    );
}

#[test]
fn build_failures_carry_the_engine_message_and_the_output_before_it() {
    let err = ImageError::BuildFailed {
        reference: "x:dev".into(),
        message: "COPY failed: file not found in build context".into(),
        output: vec![
            "Step 1/4 : FROM scratch".into(),
            "Step 2/4 : COPY metallb-rs /metallb-rs".into(),
        ],
    };
    assert_eq!(
        err.to_string(),
        "docker build of x:dev failed: COPY failed: file not found in build context; last output:\n  \
         Step 1/4 : FROM scratch\n  Step 2/4 : COPY metallb-rs /metallb-rs"
    );
}

#[test]
fn only_the_variables_cargo_sets_for_a_run_are_dropped() {
    for name in [
        "CARGO_MANIFEST_DIR",
        "CARGO_PKG_NAME",
        "CARGO_BIN_EXE_metallb-rs",
        "CARGO_CRATE_NAME",
    ] {
        assert!(inherited_from_cargo_run(name), "{name}");
    }
    for name in [
        "CARGO_HOME",
        "CARGO_TARGET_DIR",
        "CARGO_TERM_COLOR",
        "CARGO",
        "RUSTFLAGS",
    ] {
        assert!(!inherited_from_cargo_run(name), "{name}");
    }
}
