//! `Docs`: the book's configuration examples (`docs/examples/*.yaml`),
//! applied in the cluster one at a time as a user would copy them: the
//! admission webhooks admit every object and a speaker, which reads every
//! kind (the controller reads pools only), reports the configuration
//! valid. Before each example an admitted but invalid configuration (a
//! community alias nobody defines) is applied and seen reported, so
//! "valid" is the speaker's verdict on the example and not the state it
//! was in before.

use crate::metallb::{Config, configuration_state, wait_for_configuration};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::wait::throughout;
use metallb_rs::api::v1beta1::ConfigurationResult;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
/// How long an example must stay reported valid: the speakers act on a
/// change within milliseconds in the lab.
const SETTLE: Duration = Duration::from_secs(2);

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![Spec::new(
        "Docs",
        "every configuration example of the book is admitted and reported valid",
        &["IPV4", "IPV6"],
        examples_apply,
    )]
}

/// The book's configuration examples, sorted.
fn examples() -> Result<Vec<PathBuf>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    ensure!(!files.is_empty(), "no examples in {}", dir.display());
    Ok(files)
}

fn documents(file: &Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(file)?;
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let v = <serde_yaml::Value as serde::Deserialize>::deserialize(d)?;
            Ok(serde_json::to_value(v)?)
        })
        .filter(|v: &Result<Value>| v.as_ref().map_or(true, |v| !v.is_null()))
        .collect()
}

/// A pool and an advertisement naming an undefined community alias: the
/// webhook admits it (with a warning), the speakers report it invalid.
fn unknown_alias(config: &mut Config<'_>) -> Result<()> {
    config.pool("docs-sentinel", json!({ "addresses": ["10.250.0.0/24"] }))?;
    config.bgp_advertisement(
        "docs-sentinel",
        json!({ "ipAddressPools": ["docs-sentinel"], "communities": ["docs-undefined-alias"] }),
    )
}

fn examples_apply(ctx: &Ctx) -> Result<()> {
    let node = ctx
        .cluster()
        .nodes()
        .into_iter()
        .next()
        .context("the cluster has no node")?
        .name;
    let state = format!("speaker-{node}");
    for file in examples()? {
        let shown = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut sentinel = Config::new(ctx)?;
        unknown_alias(&mut sentinel)?;
        wait_for_configuration(ctx, &state, ConfigurationResult::Invalid, WAIT)
            .with_context(|| format!("before {shown}"))?;
        let mut config = Config::new(ctx)?;
        for doc in documents(&file)? {
            config
                .apply(&doc)
                .with_context(|| format!("{shown}: the cluster refused it"))?;
        }
        // The example goes in before the sentinel goes: every verdict
        // after the sentinel's removal includes the example's objects of
        // the sentinel's kinds; the settling time covers the other kinds'
        // watches.
        drop(sentinel);
        let summary = wait_for_configuration(ctx, &state, ConfigurationResult::Valid, WAIT)
            .with_context(|| format!("{shown}: {state} did not report it valid"))?;
        ensure!(summary.is_empty(), "{shown}: {summary}");
        throughout(SETTLE, &format!("{shown} reported valid"), || {
            Ok(match configuration_state(ctx, &state)? {
                Some((ConfigurationResult::Valid, _)) => None,
                other => Some(format!("{state}: {other:?}")),
            })
        })?;
    }
    Ok(())
}
