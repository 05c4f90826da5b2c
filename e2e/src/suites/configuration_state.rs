//! `ConfigurationState`: upstream's suite of the same name (the cases
//! its native-mode CI runs, and its two BFD profile references, which
//! native mode checks now that its speaker runs BFD; not the FRR-only
//! ones), plus
//! the warning rule: what a configuration names but does not have is a
//! warning condition on a valid state, never an invalid one.
//!
//! Every spec starts from, and checks, upstream's precondition: one state
//! for the controller and one per node (`speaker-<node>`), labelled with
//! the component and node, all Valid. Error summaries are matched by what
//! they must name (the object and the problem), not word for word: the
//! wording is ours.

use crate::metallb::{self, Config};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::wait::eventually;
use kube::api::{Api, DeleteParams, ListParams};
use metallb_rs::api::v1beta1::{ConfigurationResult, ConfigurationState};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a state may take to follow a configuration change (upstream
/// waits 30 s, and 60 s for a recovery).
const WAIT: Duration = Duration::from_secs(60);

/// A peer address nothing answers on (TEST-NET-1): these specs are about
/// what the configuration says, not about sessions.
const PEER_ADDRESS: &str = "192.0.2.1";

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    let spec = |name, run| Spec::new("ConfigurationState", name, &[], run);
    vec![
        spec(
            "a single speaker should have invalid result when BGPPeer with nodeSelector references secret with wrong type",
            wrong_secret_type_on_one_node,
        ),
        spec(
            "speaker should recover when missing community for BGPAdvertisement is created",
            missing_community,
        ),
        spec(
            "all ConfigurationStates should report valid with a valid BGP peer config",
            valid_peer,
        ),
        spec(
            "speaker should have invalid result when BFD profile is missing",
            missing_bfd_profile,
        ),
        spec(
            "speaker should have invalid result when valid BGPPeer BFD profile reference is broken at runtime",
            broken_bfd_profile_reference,
        ),
        spec("should self-heal after deletion", self_heal),
        spec(
            "should preserve invalid state after all ConfigurationStates are deleted and recreated",
            preserved_after_deletion,
        ),
        spec(
            "should report an advertisement naming a missing pool as a warning of a valid configuration",
            missing_pool_is_a_warning,
        ),
    ]
}

fn nodes(ctx: &Ctx) -> Vec<String> {
    ctx.cluster().nodes().into_iter().map(|n| n.name).collect()
}

fn speaker_state(node: &str) -> String {
    format!("speaker-{node}")
}

fn api(ctx: &Ctx) -> Result<Api<ConfigurationState>> {
    Ok(Api::namespaced(ctx.client()?, metallb::NAMESPACE))
}

/// What a state must show: its result and words its summary contains.
#[derive(Debug, Clone, Copy)]
struct Want<'a> {
    result: ConfigurationResult,
    naming: &'a [&'a str],
}

const VALID: Want<'static> = Want {
    result: ConfigurationResult::Valid,
    naming: &[],
};

fn invalid<'a>(naming: &'a [&'a str]) -> Want<'a> {
    Want {
        result: ConfigurationResult::Invalid,
        naming,
    }
}

/// `None` when state `name` shows `want`, else what it shows.
fn mismatch(ctx: &Ctx, name: &str, want: Want<'_>) -> Result<Option<String>> {
    Ok(match metallb::configuration_state(ctx, name)? {
        None => Some(format!("{name}: no status")),
        Some((result, summary)) => {
            let named = want.naming.iter().all(|w| summary.contains(w));
            (result != want.result || !named).then(|| {
                format!(
                    "{name}: {result:?} {summary:?}, want {:?} naming {:?}",
                    want.result, want.naming
                )
            })
        }
    })
}

/// Waits until every state in `wants` shows what it must.
fn wait_for(ctx: &Ctx, wants: &[(String, Want<'_>)]) -> Result<()> {
    eventually(WAIT, "ConfigurationStates", || {
        let mut wrong = Vec::new();
        for (name, want) in wants {
            wrong.extend(mismatch(ctx, name, *want)?);
        }
        ensure!(wrong.is_empty(), "{}", wrong.join("; "));
        Ok(Some(()))
    })
}

/// Every speaker's state shows `want`, the controller's Valid.
fn speakers_then_controller_valid<'a>(ctx: &Ctx, want: Want<'a>) -> Vec<(String, Want<'a>)> {
    let mut wants: Vec<_> = nodes(ctx)
        .iter()
        .map(|n| (speaker_state(n), want))
        .collect();
    wants.push(("controller".to_owned(), VALID));
    wants
}

/// Upstream's `allStatesExist`: exactly the controller's state and one
/// per node, labelled as upstream labels them, all Valid.
fn all_states_valid(ctx: &Ctx) -> Result<()> {
    let nodes = nodes(ctx);
    ensure!(nodes.len() > 1, "the suite needs two nodes or more");
    let mut want: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    want.insert(
        "controller".to_owned(),
        BTreeMap::from([("metallb.io/component-type".into(), "controller".into())]),
    );
    for node in &nodes {
        want.insert(
            speaker_state(node),
            BTreeMap::from([
                ("metallb.io/component-type".into(), "speaker".into()),
                ("metallb.io/node-name".into(), node.clone()),
            ]),
        );
    }
    let api = api(ctx)?;
    eventually(WAIT, "every ConfigurationState present and Valid", || {
        let list = ctx.block_on(api.list(&ListParams::default()))?;
        let got: BTreeMap<String, BTreeMap<String, String>> = list
            .items
            .iter()
            .map(|s| {
                let labels = s.metadata.labels.clone().unwrap_or_default();
                let labels = labels
                    .into_iter()
                    .filter(|(k, _)| k.starts_with("metallb.io/"))
                    .collect();
                (s.metadata.name.clone().unwrap_or_default(), labels)
            })
            .collect();
        ensure!(got == want, "states {got:?}, want {want:?}");
        let mut wrong = Vec::new();
        for name in want.keys() {
            wrong.extend(mismatch(ctx, name, VALID)?);
        }
        ensure!(wrong.is_empty(), "{}", wrong.join("; "));
        Ok(Some(()))
    })
}

fn peer(address: &str, secret: Option<&str>, node: Option<&str>) -> serde_json::Value {
    let mut spec = json!({ "myASN": 64512, "peerASN": 64513, "peerAddress": address });
    if let Some(secret) = secret {
        spec["passwordSecret"] = json!({ "name": secret });
    }
    if let Some(node) = node {
        spec["nodeSelectors"] = json!([{ "matchLabels": { "kubernetes.io/hostname": node } }]);
    }
    spec
}

fn delete_secret(ctx: &Ctx, config: &mut Config<'_>, name: &str) -> Result<()> {
    config.delete("Secret", name)?;
    let api: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(ctx.client()?, metallb::NAMESPACE);
    eventually(WAIT, &format!("secret {name} gone"), || {
        Ok(ctx.block_on(api.get_opt(name))?.is_none().then_some(()))
    })
}

fn wrong_secret_type_on_one_node(ctx: &Ctx) -> Result<()> {
    all_states_valid(ctx)?;
    let nodes = nodes(ctx);
    let mut config = Config::new(ctx)?;
    config.secret(
        "e2e-bgp-password",
        "Opaque",
        json!({ "password": "mypassword" }),
    )?;
    config.bgp_peer(
        "peer1",
        peer(PEER_ADDRESS, Some("e2e-bgp-password"), Some(&nodes[0])),
    )?;
    let mut wants = vec![(
        speaker_state(&nodes[0]),
        invalid(&["peer1", "kubernetes.io/basic-auth"]),
    )];
    wants.extend(nodes[1..].iter().map(|n| (speaker_state(n), VALID)));
    wants.push(("controller".to_owned(), VALID));
    wait_for(ctx, &wants)?;

    // The type is immutable: delete, wait, create again with the right one.
    delete_secret(ctx, &mut config, "e2e-bgp-password")?;
    config.secret(
        "e2e-bgp-password",
        "kubernetes.io/basic-auth",
        json!({ "password": "mypassword" }),
    )?;
    wait_for(ctx, &speakers_then_controller_valid(ctx, VALID))
}

fn missing_community(ctx: &Ctx) -> Result<()> {
    all_states_valid(ctx)?;
    let mut config = Config::new(ctx)?;
    config.bgp_advertisement(
        "advert-community-test",
        json!({ "ipAddressPools": ["pool-community-test"], "communities": ["my-valid-alias"] }),
    )?;
    // The controller does not read advertisements: it stays Valid.
    wait_for(
        ctx,
        &speakers_then_controller_valid(ctx, invalid(&["my-valid-alias"])),
    )?;
    config.community(
        "community-valid",
        json!({ "communities": [{ "name": "my-valid-alias", "value": "64512:100" }] }),
    )?;
    all_states_valid(ctx)
}

fn valid_peer(ctx: &Ctx) -> Result<()> {
    all_states_valid(ctx)?;
    let mut config = Config::new(ctx)?;
    config.bgp_peer(
        "bgp-valid",
        peer(PEER_ADDRESS, Some("e2e-bgp-secret-valid"), None),
    )?;
    // Positive control: every speaker read the peer (its secret is not
    // there yet) before "valid" means anything.
    wait_for(
        ctx,
        &speakers_then_controller_valid(ctx, invalid(&["bgp-valid", "e2e-bgp-secret-valid"])),
    )?;
    config.secret(
        "e2e-bgp-secret-valid",
        "kubernetes.io/basic-auth",
        json!({ "password": "MySecurePassword123" }),
    )?;
    all_states_valid(ctx)
}

/// A peer naming a BFD profile that does not exist makes every speaker's
/// configuration invalid, naming peer and profile (upstream checks the
/// first node's; every speaker reads every peer); the profile's creation
/// makes it valid again.
fn missing_bfd_profile(ctx: &Ctx) -> Result<()> {
    all_states_valid(ctx)?;
    let mut config = Config::new(ctx)?;
    let mut spec = peer(PEER_ADDRESS, None, None);
    spec["bfdProfile"] = json!("my-bfd-profile");
    config.bgp_peer("peer1", spec)?;
    wait_for(
        ctx,
        &speakers_then_controller_valid(ctx, invalid(&["peer1", "my-bfd-profile"])),
    )?;
    config.bfd_profile("my-bfd-profile", json!({}))?;
    all_states_valid(ctx)
}

/// A valid peer and profile, then the peer pointed at a profile that does
/// not exist: every speaker turns invalid naming both, the controller
/// (which does not read peers' profiles) stays valid.
fn broken_bfd_profile_reference(ctx: &Ctx) -> Result<()> {
    all_states_valid(ctx)?;
    let mut config = Config::new(ctx)?;
    config.bfd_profile("bfd-profile", json!({}))?;
    let mut spec = peer(PEER_ADDRESS, None, None);
    spec["bfdProfile"] = json!("bfd-profile");
    config.bgp_peer("bgp-bfd", spec.clone())?;
    all_states_valid(ctx)?;
    spec["bfdProfile"] = json!("new-bfd-profile");
    config.replace("BGPPeer", "bgp-bfd", spec)?;
    wait_for(
        ctx,
        &speakers_then_controller_valid(ctx, invalid(&["bgp-bfd", "new-bfd-profile"])),
    )
}

fn self_heal(ctx: &Ctx) -> Result<()> {
    all_states_valid(ctx)?;
    let name = speaker_state(&nodes(ctx)[0]);
    let api = api(ctx)?;
    let before = ctx.block_on(api.get(&name))?.metadata.uid;
    ctx.block_on(api.delete(&name, &DeleteParams::default()))
        .with_context(|| format!("deleting ConfigurationState {name}"))?;
    eventually(WAIT, &format!("{name} created again, Valid"), || {
        let Some(now) = ctx.block_on(api.get_opt(&name))? else {
            return Ok(None);
        };
        ensure!(now.metadata.uid != before, "{name} was never deleted");
        Ok(mismatch(ctx, &name, VALID)?.is_none().then_some(()))
    })
}

fn preserved_after_deletion(ctx: &Ctx) -> Result<()> {
    all_states_valid(ctx)?;
    let mut config = Config::new(ctx)?;
    config.bgp_peer(
        "bgp-secret-missing",
        peer(PEER_ADDRESS, Some("e2e-bgp-secret-missing"), None),
    )?;
    let broken = speakers_then_controller_valid(
        ctx,
        invalid(&["bgp-secret-missing", "e2e-bgp-secret-missing"]),
    );
    wait_for(ctx, &broken)?;
    delete_all_states(ctx)?;
    wait_for(ctx, &broken)?;

    config.secret(
        "e2e-bgp-secret-missing",
        "kubernetes.io/basic-auth",
        json!({ "password": "p" }),
    )?;
    all_states_valid(ctx)?;
    delete_all_states(ctx)?;
    all_states_valid(ctx)
}

/// Deletes every ConfigurationState and checks they went (the positive
/// control for "created again").
fn delete_all_states(ctx: &Ctx) -> Result<()> {
    let api = api(ctx)?;
    let before: Vec<_> = ctx
        .block_on(api.list(&ListParams::default()))?
        .items
        .into_iter()
        .filter_map(|s| s.metadata.uid)
        .collect();
    ensure!(!before.is_empty(), "no ConfigurationState to delete");
    ctx.block_on(api.delete_collection(&DeleteParams::default(), &ListParams::default()))?;
    eventually(WAIT, "every ConfigurationState deleted or new", || {
        let left = ctx.block_on(api.list(&ListParams::default()))?.items;
        Ok(left
            .iter()
            .all(|s| s.metadata.uid.as_ref().is_none_or(|u| !before.contains(u)))
            .then_some(()))
    })
}

fn missing_pool_is_a_warning(ctx: &Ctx) -> Result<()> {
    all_states_valid(ctx)?;
    let mut config = Config::new(ctx)?;
    config.l2_advertisement(
        "e2e-names-missing",
        json!({ "ipAddressPools": ["e2e-missing"] }),
    )?;
    let api = api(ctx)?;
    let nodes = nodes(ctx);
    eventually(
        WAIT,
        "a warning naming e2e-missing on every speaker",
        || {
            let mut without = Vec::new();
            for node in &nodes {
                let state = ctx.block_on(api.get(&speaker_state(node)))?;
                let warned = state
                    .status
                    .iter()
                    .flat_map(|s| s.conditions.iter().flatten())
                    .any(|c| {
                        c.type_ == "configReconcilerWarnings"
                            && c.status == "True"
                            && c.message.contains("e2e-missing")
                    });
                if !warned {
                    without.push(node.clone());
                }
            }
            Ok(without.is_empty().then_some(()))
        },
    )?;
    // Warned about, and still Valid everywhere.
    wait_for(ctx, &speakers_then_controller_valid(ctx, VALID))
}
