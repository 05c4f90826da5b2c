//! `L2-interface selector`: advertisements limited to interfaces (the
//! nodes' second network, eth1), interfaces that are missing, appear,
//! vanish or are excluded by the `metallb-excludel2` ConfigMap. What
//! answers on each network is read with the prober ([`Watch`]).

use super::watch::Watch;
use super::{Net, WAIT, backends, pool, web_service};
use crate::metallb::{self, Config, wait_for_l2_node};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, ensure};
use devenv::wait::eventually;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

/// The suite's interface selector specs.
pub(super) fn specs() -> Vec<Spec> {
    let s = |it: &'static str, f: fn(&Ctx) -> Result<()>| {
        Spec::new("L2-interface selector", it, &["IPV4"], f)
    };
    vec![
        s(
            "should announce from the selected interface only, with its MAC, and report it",
            interface_selected,
        ),
        s(
            "should not announce from an interface that does not exist and emit announceFailed",
            interface_missing,
        ),
        s(
            "should announce from both interfaces of two advertisements",
            two_interfaces,
        ),
        s(
            "should follow the node selected by the advertisement",
            interface_node_selector,
        ),
        s(
            "should start announcing when the selected interface appears and stop when it vanishes",
            interface_appears,
        ),
        s(
            "should not announce from interfaces excluded by the metallb-excludel2 ConfigMap",
            interface_excluded,
        ),
        s("Interface Selector Modify L2 interface", modify_interface),
        s("Interface Selector node selector", move_node_selector),
    ]
}

fn interface_config<'a>(ctx: &'a Ctx, ads: &[(&str, Value)]) -> Result<Config<'a>> {
    let mut config = Config::new(ctx)?;
    config.pool(
        "l2-test",
        json!({ "addresses": [pool(ctx, Net::SecondaryV4)?.as_str()] }),
    )?;
    for (name, spec) in ads {
        config.l2_advertisement(name, spec.clone())?;
    }
    Ok(config)
}

/// The names of the interfaces the one ServiceL2Status of `svc` reports.
fn status_interfaces(ctx: &Ctx, svc: &str) -> Result<Vec<String>> {
    let list = metallb::l2_statuses(ctx, svc)?;
    let st = list
        .first()
        .and_then(|o| o.status.clone())
        .with_context(|| format!("no ServiceL2Status for {svc}"))?;
    let mut names: Vec<String> = st
        .interfaces
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| i.name)
        .collect();
    names.sort();
    Ok(names)
}

fn interface_selected(ctx: &Ctx) -> Result<()> {
    let _config = interface_config(ctx, &[("eth1-only", json!({ "interfaces": ["eth1"] }))])?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let node = wait_for_l2_node(ctx, "web", WAIT)?;
    let names = status_interfaces(ctx, "web")?;
    ensure!(names == ["eth1"], "status interfaces {names:?}");
    // The node's eth1 MAC alone on the second network...
    Watch::new(ctx, &ips, "eth1")?.wait_only(&node)?;
    // ...and nobody on the first.
    Watch::new(ctx, &ips, "eth0")?
        .expect_silent()
        .context("answered on eth0 too")
}

fn interface_missing(ctx: &Ctx) -> Result<()> {
    let _config = interface_config(ctx, &[("nowhere", json!({ "interfaces": ["eth9"] }))])?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    // Positive control: the speaker tried, and said why it could not.
    let notes = eventually(WAIT, "announceFailed", || {
        let e = metallb::events(ctx, "web", "announceFailed")?;
        Ok((!e.is_empty()).then_some(e))
    })?;
    ensure!(
        notes[0].starts_with(&format!(
            "the interfaces specified by LB IP \"{}\" doesn't exist in assigned node",
            ips[0]
        )),
        "{notes:?}"
    );
    for iface in ["eth0", "eth1"] {
        Watch::new(ctx, &ips, iface)?
            .expect_silent()
            .with_context(|| format!("answered on {iface}"))?;
    }
    ensure!(
        metallb::l2_statuses(ctx, "web")?.is_empty(),
        "a status exists although nothing is announced"
    );
    Ok(())
}

fn two_interfaces(ctx: &Ctx) -> Result<()> {
    let _config = interface_config(
        ctx,
        &[
            ("on-eth0", json!({ "interfaces": ["eth0"] })),
            ("on-eth1", json!({ "interfaces": ["eth1"] })),
        ],
    )?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let node = wait_for_l2_node(ctx, "web", WAIT)?;
    for iface in ["eth0", "eth1"] {
        Watch::new(ctx, &ips, iface)?
            .wait_only(&node)
            .with_context(|| format!("on {iface}"))?;
    }
    let names = status_interfaces(ctx, "web")?;
    ensure!(names == ["eth0", "eth1"], "status interfaces {names:?}");
    Ok(())
}

fn interface_node_selector(ctx: &Ctx) -> Result<()> {
    let all = super::nodes(ctx);
    backends(ctx, &[])?;
    for target in all.iter().take(2) {
        let config = interface_config(
            ctx,
            &[(
                "pinned",
                json!({ "interfaces": ["eth1"], "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": target } }] }),
            )],
        )?;
        let ips = web_service(ctx, "web", json!({}))?;
        let node = wait_for_l2_node(ctx, "web", WAIT)?;
        ensure!(&node == target, "announced by {node}, selected {target}");
        Watch::new(ctx, &ips, "eth1")?.wait_only(target)?;
        let svcs: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
        ctx.block_on(svcs.delete("web", &DeleteParams::default()))?;
        eventually(WAIT, "status gone", || {
            Ok(metallb::l2_statuses(ctx, "web")?.is_empty().then_some(()))
        })?;
        drop(config);
    }
    Ok(())
}

/// The node named in the latest announceFailed message (upstream's
/// `... doesn't exist in assigned node "X" with protocol "layer2"`).
fn failed_on(ctx: &Ctx, svc: &str) -> Result<String> {
    eventually(WAIT, "announceFailed", || {
        let notes = metallb::events(ctx, svc, "announceFailed")?;
        Ok(notes
            .last()
            .and_then(|n| n.split("in assigned node \"").nth(1))
            .and_then(|rest| rest.split('"').next())
            .map(str::to_owned))
    })
}

fn interface_appears(ctx: &Ctx) -> Result<()> {
    let _config = interface_config(ctx, &[("new-nic", json!({ "interfaces": ["e2etest0"] }))])?;
    backends(ctx, &[])?;
    web_service(ctx, "web", json!({}))?;
    let node = failed_on(ctx, "web")?;
    let run = |args: &[&str]| -> Result<()> {
        let out = ctx.cluster().exec_on_node(&node, args)?;
        ensure!(
            out.status.success(),
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    run(&[
        "ip", "link", "add", "e2etest0", "type", "veth", "peer", "name", "e2etest1",
    ])?;
    let result = (|| -> Result<()> {
        run(&["ip", "link", "set", "e2etest1", "up"])?;
        run(&["ip", "link", "set", "e2etest0", "up"])?;
        // The next interface scan (every 10 s) finds it.
        let interfaces = eventually(WAIT, "announced on e2etest0", || {
            let list = metallb::l2_statuses(ctx, "web")?;
            Ok(list
                .first()
                .and_then(|o| o.status.as_ref()?.interfaces.clone()))
        })?;
        let names: Vec<String> = interfaces.into_iter().filter_map(|i| i.name).collect();
        ensure!(names == ["e2etest0"], "status interfaces {names:?}");
        ensure!(wait_for_l2_node(ctx, "web", WAIT)? == node);
        run(&["ip", "link", "del", "e2etest0"])?;
        eventually(WAIT, "withdrawn after the interface vanished", || {
            Ok(metallb::l2_statuses(ctx, "web")?.is_empty().then_some(()))
        })
    })();
    let _ = ctx
        .cluster()
        .exec_on_node(&node, &["ip", "link", "del", "e2etest0"]);
    result
}

fn interface_excluded(ctx: &Ctx) -> Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let _config = interface_config(ctx, &[("on-eth1", json!({ "interfaces": ["eth1"] }))])?;
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client()?, metallb::NAMESPACE);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "metallb-excludel2" },
        "data": { "excludel2.yaml": "announcedInterfacesToExclude: [\"^eth1$\", \"^lo$\"]\n" },
    }))?;
    ctx.block_on(cms.create(&kube::api::PostParams::default(), &cm))?;
    let result = (|| -> Result<()> {
        backends(ctx, &[])?;
        let ips = web_service(ctx, "web", json!({}))?;
        // Positive control: the speaker tried and found no interface.
        failed_on(ctx, "web")?;
        let watch = Watch::new(ctx, &ips, "eth1")?;
        watch
            .expect_silent()
            .context("answered on an excluded interface")?;
        ctx.block_on(cms.delete("metallb-excludel2", &DeleteParams::default()))?;
        let node = wait_for_l2_node(ctx, "web", WAIT)?;
        watch.wait_only(&node)
    })();
    let _ = ctx.block_on(cms.delete("metallb-excludel2", &DeleteParams::default()));
    result
}

/// Upstream's "Modify L2 interface": one service, its advertisement's
/// interface changed at runtime from one network to the other and back;
/// each time the address answers on the selected one only.
fn modify_interface(ctx: &Ctx) -> Result<()> {
    let mut config = interface_config(ctx, &[])?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    let mut created = false;
    for (on, off) in [("eth0", "eth1"), ("eth1", "eth0"), ("eth0", "eth1")] {
        let spec = json!({ "interfaces": [on] });
        if created {
            config.replace("L2Advertisement", "with-interfaces", spec)?;
        } else {
            config.l2_advertisement("with-interfaces", spec)?;
            created = true;
        }
        let node = Watch::new(ctx, &ips, on)?
            .settled()
            .with_context(|| format!("selected {on}"))?;
        Watch::new(ctx, &ips, off)?
            .expect_silent()
            .with_context(|| format!("selected {on}, {node} still answers on {off}"))?;
        let names = eventually(WAIT, &format!("status interfaces [{on}]"), || {
            let names = status_interfaces(ctx, "web").unwrap_or_default();
            Ok((names == [on]).then_some(names))
        })?;
        ensure!(names == [on], "status interfaces {names:?}");
    }
    Ok(())
}

/// Upstream's "node selector": one service, its advertisement's node
/// selector changed at runtime to each node in turn; the announcement
/// follows, and the address stays reachable.
fn move_node_selector(ctx: &Ctx) -> Result<()> {
    let mut config = interface_config(ctx, &[])?;
    backends(ctx, &[])?;
    let ips = web_service(ctx, "web", json!({}))?;
    for (i, target) in super::nodes(ctx).iter().enumerate() {
        let spec = json!({
            "interfaces": ["eth1"],
            "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": target } }],
        });
        if i == 0 {
            config.l2_advertisement("with-interfaces", spec)?;
        } else {
            config.replace("L2Advertisement", "with-interfaces", spec)?;
        }
        Watch::new(ctx, &ips, "eth1")?
            .wait_only(target)
            .with_context(|| format!("selected {target}"))?;
        let node = eventually(WAIT, &format!("the status naming {target}"), || {
            Ok(metallb::l2_statuses(ctx, "web")?
                .first()
                .and_then(|o| o.status.as_ref()?.node.clone())
                .filter(|n| n == target))
        })?;
        ensure!(&node == target, "status names {node}, selected {target}");
        let body = super::reachable(ctx, ips[0])?;
        ensure!(super::names_a_node(ctx, &body), "served by {body:?}");
    }
    Ok(())
}
