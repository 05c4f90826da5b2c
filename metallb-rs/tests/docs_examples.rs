//! The book's YAML examples (`docs/examples/`) as a user would use them:
//! every configuration example passes `metallb-rs validate --strict` on
//! its own; every example of a common error (`invalid/`, first line
//! `# expect: <message>`) fails it with that message; the Services and
//! the status objects the book shows are objects of their kind.

use std::path::{Path, PathBuf};
use std::process::Command;

fn examples(sub: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/examples")
        .join(sub);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no examples in {}", dir.display());
    files
}

/// `metallb-rs validate [--strict] -f file`: success and what it printed.
fn validate(file: &Path, strict: bool) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_metallb-rs"));
    cmd.env_remove("RUST_LOG").arg("validate");
    if strict {
        cmd.arg("--strict");
    }
    let out = cmd.arg("-f").arg(file).output().expect("runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn every_configuration_example_is_valid_on_its_own() {
    for file in examples("") {
        let (ok, out) = validate(&file, true);
        assert!(ok, "{}: {out}", file.display());
        assert!(
            !out.contains(" 0 MetalLB object(s)"),
            "{} holds no MetalLB object: {out}",
            file.display()
        );
    }
}

#[test]
fn every_error_example_fails_with_the_message_the_book_quotes() {
    for file in examples("invalid") {
        let text = std::fs::read_to_string(&file).expect("readable");
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| {
                panic!(
                    "{}: first line must be `# expect: <message>`",
                    file.display()
                )
            });
        let (ok, out) = validate(&file, false);
        assert!(!ok, "{} passed validation: {out}", file.display());
        assert!(
            out.contains(expect.trim()),
            "{}: expected {expect:?} in\n{out}",
            file.display()
        );
    }
}

fn documents(file: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(file).expect("readable");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let v = <serde_yaml::Value as serde::Deserialize>::deserialize(d)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            serde_json::to_value(v).expect("json")
        })
        .filter(|v| !v.is_null())
        .collect()
}

#[test]
fn service_examples_are_load_balancer_services() {
    for file in examples("services") {
        for doc in documents(&file) {
            let svc: k8s_openapi::api::core::v1::Service =
                serde_path_to_error::deserialize(doc.clone())
                    .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let spec = svc.spec.unwrap_or_default();
            assert_eq!(
                spec.type_.as_deref(),
                Some("LoadBalancer"),
                "{}",
                file.display()
            );
            for (key, _) in svc.metadata.annotations.unwrap_or_default() {
                if let Some(name) = key.strip_prefix("metallb.io/") {
                    use metallb_rs::service::annotation;
                    assert!(
                        [
                            annotation::ADDRESS_POOL,
                            annotation::LOAD_BALANCER_IPS,
                            annotation::ALLOW_SHARED_IP
                        ]
                        .contains(&name),
                        "{}: metallb-rs does not read annotation {key}",
                        file.display()
                    );
                }
            }
        }
    }
}

#[test]
fn status_examples_are_configuration_states() {
    for file in examples("status") {
        for doc in documents(&file) {
            let _: metallb_rs::api::v1beta1::ConfigurationState =
                serde_path_to_error::deserialize(doc)
                    .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        }
    }
}
