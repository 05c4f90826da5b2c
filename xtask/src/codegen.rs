//! `gen-crds` and `gen-manifests`: write generated files, or with
//! `--check` compare them and name every file that drifted.

use crate::flags::CheckArgs;
use anyhow::{Context, Result, bail};
use metallb_rs::manifests;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const CRD_DIR: &str = "manifests/crds";
const NATIVE: &str = "manifests/metallb-native.yaml";
const MANIFESTS: &str = "manifests";

/// `cargo xtask gen-crds [--check]`: the CRDs and the book's field
/// reference made from them.
pub fn gen_crds(args: &CheckArgs) -> Result<()> {
    let mut files: BTreeMap<PathBuf, String> = manifests::crd_files()?
        .into_iter()
        .map(|(name, text)| (Path::new(CRD_DIR).join(name), text))
        .collect();
    files.insert(
        PathBuf::from(crate::docs::REFERENCE),
        crate::docs::current_reference()?,
    );
    sync(files, Some(Path::new(CRD_DIR)), args, "gen-crds")
}

/// `cargo xtask gen-manifests [--check]`.
pub fn gen_manifests(args: &CheckArgs) -> Result<()> {
    let opts = manifests::NativeOptions::default();
    let dir = Path::new(MANIFESTS);
    let mut files = BTreeMap::from([
        (PathBuf::from(NATIVE), manifests::native(&opts)?),
        (
            dir.join(manifests::PROMETHEUS_DIR)
                .join("metallb-native-prometheus.yaml"),
            manifests::native_prometheus(&opts)?,
        ),
        (
            dir.join(manifests::NETWORKPOLICIES_DIR)
                .join("metallb-native-networkpolicies.yaml"),
            manifests::native_networkpolicies(&opts)?,
        ),
    ]);
    files.extend(
        manifests::kustomizations()
            .into_iter()
            .map(|(path, text)| (PathBuf::from(path), text)),
    );
    sync(files, None, args, "gen-manifests")
}

/// Writes `files`, or checks them. `owned_dir` is a directory whose every
/// `.yaml` file is generated, so a file there that is no longer produced is
/// drift too.
fn sync(
    files: BTreeMap<PathBuf, String>,
    owned_dir: Option<&Path>,
    args: &CheckArgs,
    task: &str,
) -> Result<()> {
    let mut stale: Vec<PathBuf> = Vec::new();
    if let Some(dir) = owned_dir.filter(|d| d.exists()) {
        let entries =
            std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "yaml") && !files.contains_key(&path) {
                stale.push(path);
            }
        }
    }
    stale.sort();
    if args.check {
        let mut drifted = Vec::new();
        for (path, text) in &files {
            match std::fs::read_to_string(path) {
                Ok(current) if current == *text => {}
                Ok(_) => drifted.push(format!("{} (differs)", path.display())),
                Err(_) => drifted.push(format!("{} (missing)", path.display())),
            }
        }
        drifted.extend(
            stale
                .iter()
                .map(|p| format!("{} (no longer generated)", p.display())),
        );
        if !drifted.is_empty() {
            bail!(
                "{} generated file(s) out of date: run `cargo xtask {task}` and commit the result\n  {}",
                drifted.len(),
                drifted.join("\n  ")
            );
        }
        println!("{task}: {} file(s) up to date", files.len());
        return Ok(());
    }
    for path in &stale {
        std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
        println!("removed {}", path.display());
    }
    for (path, text) in &files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
            println!("wrote {}", path.display());
        }
    }
    println!("{task}: {} file(s) generated", files.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, entries: &[(&str, &str)]) -> BTreeMap<PathBuf, String> {
        entries
            .iter()
            .map(|(n, t)| (dir.join(n), (*t).to_owned()))
            .collect()
    }

    #[test]
    fn check_names_every_drifted_missing_and_stale_file() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path();
        let write = CheckArgs { check: false };
        let check = CheckArgs { check: true };
        sync(
            files(dir, &[("a.yaml", "a"), ("b.yaml", "b")]),
            Some(dir),
            &write,
            "t",
        )
        .expect("writes");
        sync(
            files(dir, &[("a.yaml", "a"), ("b.yaml", "b")]),
            Some(dir),
            &check,
            "t",
        )
        .expect("up to date");

        std::fs::write(dir.join("a.yaml"), "edited").expect("edit");
        std::fs::write(dir.join("old.yaml"), "stale").expect("stale");
        let err = sync(
            files(dir, &[("a.yaml", "a"), ("b.yaml", "b"), ("c.yaml", "c")]),
            Some(dir),
            &check,
            "t",
        )
        .expect_err("drift");
        let msg = err.to_string();
        assert!(msg.contains("3 generated file(s) out of date"), "{msg}");
        // Each drifted file by name, with how it drifted; the ones that
        // match are not named.
        for (file, how) in [
            ("a.yaml", "differs"),
            ("c.yaml", "missing"),
            ("old.yaml", "no longer generated"),
        ] {
            let line = format!("{} ({how})", dir.join(file).display());
            assert!(msg.contains(&line), "{line:?} not in {msg}");
        }
        assert!(!msg.contains("b.yaml"), "b.yaml is up to date: {msg}");
        assert_eq!(
            std::fs::read_to_string(dir.join("a.yaml")).expect("kept"),
            "edited",
            "--check writes nothing"
        );

        sync(
            files(dir, &[("a.yaml", "a"), ("b.yaml", "b"), ("c.yaml", "c")]),
            Some(dir),
            &write,
            "t",
        )
        .expect("regenerates");
        assert!(!dir.join("old.yaml").exists(), "stale file removed");
        sync(
            files(dir, &[("a.yaml", "a"), ("b.yaml", "b"), ("c.yaml", "c")]),
            Some(dir),
            &check,
            "t",
        )
        .expect("clean");
    }

    #[test]
    fn committed_files_are_up_to_date() {
        std::env::set_current_dir(crate::tools::project_root()).expect("root");
        gen_crds(&CheckArgs { check: true })
            .expect("run `cargo xtask gen-crds` and commit the result");
        gen_manifests(&CheckArgs { check: true })
            .expect("run `cargo xtask gen-manifests` and commit the result");
    }

    /// Every kustomization builds, with `kubectl kustomize` as a user runs
    /// it, exactly the objects of the files it combines.
    #[test]
    fn every_kustomization_builds_its_files_objects() {
        let kubectl = std::process::Command::new("kubectl")
            .args(["version", "--client"])
            .output();
        if !kubectl.is_ok_and(|o| o.status.success()) {
            devenv::prereq::skip("kubectl is not installed (`cargo xtask test` installs it)");
            return;
        }
        let opts = manifests::NativeOptions::default();
        let keys = |objects: Vec<serde_json::Value>| -> Vec<String> {
            objects
                .iter()
                .map(|o| {
                    format!(
                        "{} {}/{}",
                        o["kind"].as_str().unwrap_or_default(),
                        o["metadata"]["namespace"].as_str().unwrap_or_default(),
                        o["metadata"]["name"].as_str().unwrap_or_default()
                    )
                })
                .collect()
        };
        let native = keys(manifests::native_objects(&opts));
        let prometheus = keys(manifests::prometheus::objects(&opts.namespace));
        let netpol = keys(manifests::netpol::objects(&opts.namespace));
        let root = crate::tools::project_root();
        for path in manifests::kustomizations().keys() {
            let dir = Path::new(path).parent().expect("in a directory");
            let d = dir.to_string_lossy();
            let mut want: Vec<String> = Vec::new();
            if d == "manifests" || d.starts_with("overlays/") {
                want.extend(native.iter().cloned());
            }
            if d.ends_with(manifests::PROMETHEUS_DIR)
                || d.ends_with("with-prometheus")
                || d.ends_with("full")
            {
                want.extend(prometheus.iter().cloned());
            }
            if d.ends_with(manifests::NETWORKPOLICIES_DIR)
                || d.ends_with("with-networkpolicies")
                || d.ends_with("full")
            {
                want.extend(netpol.iter().cloned());
            }
            let out = std::process::Command::new("kubectl")
                .arg("kustomize")
                .arg(root.join(dir))
                .output()
                .expect("kubectl runs");
            assert!(
                out.status.success(),
                "kubectl kustomize {d}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8(out.stdout).expect("utf-8");
            let built: Vec<serde_json::Value> = text
                .split("\n---\n")
                .map(|doc| serde_yaml::from_str(doc).expect("a YAML document"))
                .collect();
            let mut got = keys(built);
            got.sort();
            want.sort();
            assert_eq!(got, want, "kubectl kustomize {d}");
        }
    }
}
