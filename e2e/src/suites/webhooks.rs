//! The validating webhooks, as a user meets them: `kubectl apply` of a
//! change that would make the configuration invalid fails at once with a
//! message naming the objects, instead of showing later in
//! ConfigurationState. The native-mode cases of upstream's webhooks suite
//! (`e2etest/webhookstests`), plus the positive control that the refusal
//! is the webhooks' (with them out of the way the same write is
//! admitted), and the webhooks answering through a controller takeover.
//! And BGPPeer's conversion webhook: a peer written at one version reads
//! back at the other.

use crate::metallb::{self, Config, NAMESPACE, OWNED_LABEL};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, bail, ensure};
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use metallb_rs::api::{v1beta1, v1beta2};
use serde_json::json;

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    let spec = |name, run| Spec::new("Webhooks", name, &[], run);
    vec![
        spec(
            "should refuse an IPAddressPool overlapping another, on create and on update",
            overlapping_pools,
        ),
        spec(
            "should refuse a BGPAdvertisement whose aggregationLength is shorter than a pool's prefix, or set beside serviceSelectors",
            aggregation_length,
        ),
        spec(
            "should refuse a BGPPeer with an invalid address, or a second peer of one address on the same nodes",
            peers,
        ),
        spec(
            "should refuse an invalid Community, on create and on update, and a duplicate alias",
            communities,
        ),
        spec(
            "For Community reject Community duplications in legacy format",
            community_duplications,
        ),
        spec(
            "should refuse creating each MetalLB kind outside the MetalLB namespace",
            other_namespace,
        ),
        spec(
            "should keep reviewing while a standby controller takes over",
            takeover,
        ),
        spec(
            "should convert a BGPPeer created as v1beta1 to v1beta2 and back, and one created as v1beta2 to v1beta1",
            conversion,
        ),
    ]
}

/// `result` is a refusal whose message names every one of `wants`.
fn refused(result: Result<()>, wants: &[&str]) -> Result<()> {
    let Err(e) = result else {
        bail!("the write was admitted; wanted a refusal naming {wants:?}");
    };
    let message = format!("{e:#}");
    for want in wants {
        ensure!(
            message.contains(want),
            "the refusal does not name {want:?}: {message}"
        );
    }
    Ok(())
}

fn overlapping_pools(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("e2e-wh-first", json!({ "addresses": ["192.0.2.0/28"] }))?;
    refused(
        config.pool("e2e-wh-second", json!({ "addresses": ["192.0.2.8/29"] })),
        &["e2e-wh-second", "e2e-wh-first", "overlaps"],
    )?;
    config.pool("e2e-wh-apart", json!({ "addresses": ["192.0.2.64/28"] }))?;
    refused(
        config.replace(
            "IPAddressPool",
            "e2e-wh-apart",
            json!({ "addresses": ["192.0.2.4/30"] }),
        ),
        &["e2e-wh-apart", "e2e-wh-first", "overlaps"],
    )?;
    // The control: without the webhooks the same pool is admitted (and
    // the controller reports it invalid later): the refusal was theirs.
    let off = metallb::without_webhooks(ctx)?;
    config.pool("e2e-wh-second", json!({ "addresses": ["192.0.2.8/29"] }))?;
    config.delete("IPAddressPool", "e2e-wh-second")?;
    drop(off);
    Ok(())
}

fn aggregation_length(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("e2e-wh-agg", json!({ "addresses": ["192.0.2.0/28"] }))?;
    refused(
        config.bgp_advertisement(
            "e2e-wh-agg",
            json!({ "ipAddressPools": ["e2e-wh-agg"], "aggregationLength": 26 }),
        ),
        &[
            "aggregationLength",
            "invalid aggregation length 26",
            "e2e-wh-agg",
        ],
    )?;
    refused(
        config.bgp_advertisement(
            "e2e-wh-agg",
            json!({
                "ipAddressPools": ["e2e-wh-agg"],
                "aggregationLength": 30,
                "serviceSelectors": [{ "matchLabels": { "app": "a" } }],
            }),
        ),
        &["serviceSelectors and aggregationLength are mutually exclusive"],
    )?;
    config.bgp_advertisement(
        "e2e-wh-agg",
        json!({ "ipAddressPools": ["e2e-wh-agg"], "aggregationLength": 30 }),
    )?;
    Ok(())
}

fn peers(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    let nodes: Vec<String> = ctx.cluster().nodes().into_iter().map(|n| n.name).collect();
    ensure!(nodes.len() >= 2, "two nodes needed, the lab has {nodes:?}");
    let peer = |address: &str, node: &str| {
        json!({
            "myASN": 64512, "peerASN": 64513, "peerAddress": address,
            "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": node } }],
        })
    };
    refused(
        config.bgp_peer("e2e-wh-bad", peer("192.0.2.300", &nodes[0])),
        &["192.0.2.300"],
    )?;
    config.bgp_peer("e2e-wh-a", peer("192.0.2.1", &nodes[0]))?;
    // Disjoint node selectors: one session per node, allowed.
    config.bgp_peer("e2e-wh-b", peer("192.0.2.1", &nodes[1]))?;
    // No selector: every node, so both of theirs.
    refused(
        config.bgp_peer(
            "e2e-wh-c",
            json!({ "myASN": 64512, "peerASN": 64513, "peerAddress": "192.0.2.1" }),
        ),
        &["duplicate peer", "192.0.2.1"],
    )?;
    Ok(())
}

fn communities(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    let aliases =
        |name: &str, value: &str| json!({ "communities": [{ "name": name, "value": value }] });
    for bad in ["99999999:1", "lar:123:9999:123"] {
        refused(config.community("e2e-wh-bad", aliases("x", bad)), &[bad])?;
    }
    config.community("e2e-wh-good", aliases("e2e-one", "1111:2222"))?;
    for bad in ["99999999:1", "lar:123:9999:123"] {
        refused(
            config.replace("Community", "e2e-wh-good", aliases("e2e-one", bad)),
            &["e2e-wh-good", bad],
        )?;
    }
    refused(
        config.community("e2e-wh-dup", aliases("e2e-one", "1111:3333")),
        &["duplicate definition of community alias", "e2e-one"],
    )?;
    Ok(())
}

/// Upstream's duplicate alias, in one Community and across two: refused
/// with "duplicate definition of community" both times.
fn community_duplications(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    let dup = json!({ "name": "DUP_COMMUNITY", "value": "1111:2222" });
    refused(
        config.community(
            "community-webhooks-test",
            json!({ "communities": [dup, dup] }),
        ),
        &["duplicate definition of community", "DUP_COMMUNITY"],
    )?;
    config.community("community-webhooks-test1", json!({ "communities": [dup] }))?;
    refused(
        config.community("community-webhooks-test2", json!({ "communities": [dup] })),
        &["duplicate definition of community", "DUP_COMMUNITY"],
    )?;
    Ok(())
}

/// Creates `name` of kind `ar` in `namespace` with `spec`; deleted again
/// if admitted.
fn create_in(
    ctx: &Ctx,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
    spec: serde_json::Value,
) -> Result<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client()?, namespace, ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version, "kind": ar.kind,
        "metadata": { "name": name, "namespace": namespace, "labels": { OWNED_LABEL: "true" } },
        "spec": spec,
    }))?;
    ctx.block_on(api.create(&PostParams::default(), &obj))?;
    let _ = ctx.block_on(api.delete(name, &DeleteParams::default()));
    Ok(())
}

fn other_namespace(ctx: &Ctx) -> Result<()> {
    let _config = Config::new(ctx)?;
    let namespace = ctx.namespace();
    let cases = [
        (
            ApiResource::erase::<v1beta1::IPAddressPool>(&()),
            json!({ "addresses": ["192.0.2.0/28"] }),
        ),
        (
            ApiResource::erase::<v1beta1::L2Advertisement>(&()),
            json!({}),
        ),
        (
            ApiResource::erase::<v1beta1::BGPAdvertisement>(&()),
            json!({}),
        ),
        (
            ApiResource::erase::<v1beta2::BGPPeer>(&()),
            json!({ "myASN": 64512, "peerASN": 64513, "peerAddress": "192.0.2.1" }),
        ),
        (ApiResource::erase::<v1beta1::BFDProfile>(&()), json!({})),
        (
            ApiResource::erase::<v1beta1::Community>(&()),
            json!({ "communities": [{ "name": "x", "value": "1:1" }] }),
        ),
    ];
    for (ar, spec) in cases {
        refused(
            create_in(ctx, &ar, namespace, "e2e-wh-elsewhere", spec),
            &[
                &format!("MetalLB only reads objects in namespace {NAMESPACE:?}"),
                namespace,
            ],
        )
        .map_err(|e| e.context(format!("{} in namespace {namespace}", ar.kind)))?;
    }
    Ok(())
}

/// The leader SIGKILLed, a standby leading: the API server's calls go to
/// the replica that still runs, and a bad write is still refused.
fn takeover(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    config.pool("e2e-wh-first", json!({ "addresses": ["192.0.2.0/28"] }))?;
    let _one = metallb::OneController(ctx);
    ctx.cluster().controller_takeover()?;
    refused(
        config.pool("e2e-wh-second", json!({ "addresses": ["192.0.2.8/29"] })),
        &["e2e-wh-second", "e2e-wh-first", "overlaps"],
    )?;
    config.pool("e2e-wh-apart", json!({ "addresses": ["192.0.2.64/28"] }))?;
    Ok(())
}

/// Through the controller's `/convert`: v1beta1 -> v1beta2 keeps every
/// field, v1beta2 -> v1beta1 drops what v1beta1 cannot hold (upstream's
/// conversion). v1beta2's defaults (peerPort 179, disableMP, ...) may be
/// added on the way, so peerPort is set and the v1beta2 side is compared
/// on what v1beta1 holds.
fn conversion(ctx: &Ctx) -> Result<()> {
    let mut config = Config::new(ctx)?;
    let nodes: Vec<String> = ctx.cluster().nodes().into_iter().map(|n| n.name).collect();
    let node = nodes.first().context("the lab has no node")?;
    let old_spec = json!({
        "myASN": 64512, "peerASN": 64513, "peerAddress": "192.0.2.21", "peerPort": 179,
        "sourceAddress": "192.0.2.22", "holdTime": "90s", "keepaliveTime": "30s",
        "routerID": "10.10.10.10", "password": "e2e", "ebgpMultiHop": true,
        "nodeSelectors": [{
            "matchLabels": { "kubernetes.io/hostname": node },
            "matchExpressions": [{ "key": "kubernetes.io/os", "operator": "In", "values": ["linux"] }],
        }],
    });
    let old: v1beta1::BGPPeerSpec = serde_json::from_value(old_spec.clone())?;
    config.bgp_peer_v1beta1("e2e-wh-conv-old", old_spec)?;
    let v1: Api<v1beta1::BGPPeer> = Api::namespaced(ctx.client()?, NAMESPACE);
    let v2: Api<v1beta2::BGPPeer> = Api::namespaced(ctx.client()?, NAMESPACE);
    let as_v2 = ctx
        .block_on(v2.get("e2e-wh-conv-old"))
        .context("reading the v1beta1 peer as v1beta2")?;
    ensure!(
        as_v2.spec.peer_asn == Some(64513)
            && as_v2
                .spec
                .node_selectors
                .as_ref()
                .is_some_and(|s| s.len() == 1)
            && v1beta1::BGPPeerSpec::from(as_v2.spec.clone()) == old,
        "read as v1beta2: {:?}, created as v1beta1: {old:?}",
        as_v2.spec
    );
    let as_v1 = ctx
        .block_on(v1.get("e2e-wh-conv-old"))
        .context("reading the v1beta1 peer as v1beta1")?;
    ensure!(
        as_v1.spec == old,
        "read back as v1beta1: {:?}, created: {old:?}",
        as_v1.spec
    );

    config.bgp_peer(
        "e2e-wh-conv-new",
        json!({ "myASN": 64512, "peerASN": 64514, "peerAddress": "192.0.2.23", "connectTime": "10s",
                "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": node } }] }),
    )?;
    let stored = ctx.block_on(v2.get("e2e-wh-conv-new"))?;
    let as_v1 = ctx
        .block_on(v1.get("e2e-wh-conv-new"))
        .context("reading the v1beta2 peer as v1beta1")?;
    ensure!(
        as_v1.spec == v1beta1::BGPPeerSpec::from(stored.spec.clone())
            && as_v1.spec.peer_asn == 64514
            && as_v1.spec.peer_address == "192.0.2.23",
        "read as v1beta1: {:?}, stored as v1beta2: {:?}",
        as_v1.spec,
        stored.spec
    );
    // As served: converted, not relabelled (connectTime has no v1beta1 field).
    let raw: Api<DynamicObject> = Api::namespaced_with(
        ctx.client()?,
        NAMESPACE,
        &ApiResource::erase::<v1beta1::BGPPeer>(&()),
    );
    let raw = ctx.block_on(raw.get("e2e-wh-conv-new"))?;
    ensure!(
        raw.data["spec"].get("connectTime").is_none(),
        "v1beta1 serves a v1beta2-only field: {}",
        raw.data["spec"]
    );
    Ok(())
}
