//! `Metrics`: the components' `/metrics` over HTTPS answers only a token
//! the API server says may `get` it (as upstream since its metrics went
//! behind authentication and authorization). Scraped with curl on a
//! node, from the speaker there, the way Prometheus would.

use crate::{Ctx, Spec};
use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use std::net::SocketAddr;

/// The suite's specs.
pub fn specs() -> Vec<Spec> {
    vec![Spec::new(
        "Metrics",
        "should refuse an unauthenticated or unauthorized scrape and serve an authorized one",
        &[],
        authorized_scrape,
    )]
}

/// `GET https://addr/metrics` from `node` with `token`: status and body.
fn scrape(ctx: &Ctx, node: &str, addr: SocketAddr, token: Option<&str>) -> Result<(u16, String)> {
    let url = format!("https://{addr}/metrics");
    let header = token.map(|t| format!("Authorization: Bearer {t}"));
    let mut argv = vec!["curl", "-sSk", "-m", "5", "-w", "\n%{http_code}"];
    if let Some(h) = &header {
        argv.extend(["-H", h.as_str()]);
    }
    argv.push(&url);
    let out = ctx.cluster().exec_on_node(node, &argv)?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "curl {url} on {node}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    Ok((
        code.trim().parse().context("curl's status code")?,
        body.to_owned(),
    ))
}

fn token(ctx: &Ctx, accounts: &Api<ServiceAccount>, name: &str) -> Result<String> {
    let sa: ServiceAccount = serde_json::from_value(json!({ "metadata": { "name": name } }))?;
    ctx.block_on(accounts.create(&PostParams::default(), &sa))?;
    let answer = ctx.block_on(accounts.create_token_request(
        name,
        &PostParams::default(),
        &TokenRequest::default(),
    ))?;
    Ok(answer
        .status
        .context("a TokenRequest without a token")?
        .token)
}

fn authorized_scrape(ctx: &Ctx) -> Result<()> {
    let client = ctx.client()?;
    let ns = ctx.namespace().to_owned();
    let node = ctx
        .cluster()
        .nodes()
        .into_iter()
        .next()
        .context("no node")?;
    let ip = *node
        .addresses
        .first()
        .context("a node without an address")?;
    let addr = SocketAddr::new(ip, metallb_rs::manifests::ports::METRICS);
    let name = format!("metrics-reader-{ns}");
    let roles = Api::<ClusterRole>::all(client.clone());
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": name },
        "rules": [{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }],
    }))?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": [{ "kind": "ServiceAccount", "name": "reader", "namespace": ns }],
    }))?;
    ctx.block_on(roles.create(&PostParams::default(), &role))?;
    ctx.block_on(bindings.create(&PostParams::default(), &binding))?;
    let checks = || -> Result<()> {
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), &ns);
        let reader = token(ctx, &accounts, "reader")?;
        let stranger = token(ctx, &accounts, "stranger")?;
        let (code, body) = scrape(ctx, &node.name, addr, None)?;
        ensure!(code == 401, "no token: {code} {body}");
        let (code, body) = scrape(ctx, &node.name, addr, Some(&stranger))?;
        ensure!(
            code == 403 && body.contains("Authorization denied for user"),
            "an unbound ServiceAccount's token: {code} {body}"
        );
        let (code, body) = scrape(ctx, &node.name, addr, Some(&reader))?;
        ensure!(
            code == 200 && body.contains("process_start_time_seconds "),
            "the reader's token: {code} {}",
            body.chars().take(300).collect::<String>()
        );
        Ok(())
    };
    let result = checks();
    let _ = ctx.block_on(bindings.delete(&name, &DeleteParams::default()));
    let _ = ctx.block_on(roles.delete(&name, &DeleteParams::default()));
    result
}
