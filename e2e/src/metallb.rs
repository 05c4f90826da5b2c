//! MetalLB configuration and observations for the specs.
//!
//! Configuration objects live in the MetalLB namespace, not the test's, so
//! namespace deletion does not remove them: [`Config`] labels what it
//! creates, deletes it when dropped (pass, fail or panic), and first
//! removes leftovers of an interrupted run (as upstream's
//! `ConfigUpdater.Clean()`), so one spec's pools never overlap the next's.

use crate::Ctx;
use anyhow::{Context, Result, bail};
use devenv::wait::eventually;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use metallb_rs::api::v1beta1;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::Duration;

/// The label on every configuration object the suites create.
pub const OWNED_LABEL: &str = "e2e.metallb.io/owned";

/// The MetalLB namespace the suites configure.
pub const NAMESPACE: &str = metallb_rs::api::DEFAULT_NAMESPACE;

fn resources() -> Vec<ApiResource> {
    vec![
        ApiResource::erase::<v1beta1::IPAddressPool>(&()),
        ApiResource::erase::<v1beta1::L2Advertisement>(&()),
        ApiResource::erase::<v1beta1::BGPAdvertisement>(&()),
        ApiResource::erase::<v1beta1::Community>(&()),
        // Peers before the BFD profiles they name: a profile in use
        // cannot be deleted (as upstream's webhook).
        ApiResource::erase::<metallb_rs::api::v1beta2::BGPPeer>(&()),
        ApiResource::erase::<v1beta1::BFDProfile>(&()),
    ]
}

/// Kinds the suites also create in the MetalLB namespace that others
/// create there too (the memberlist key is a Secret): only labelled
/// leftovers are looked at.
fn shared_resources() -> Vec<ApiResource> {
    vec![ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&())]
}

/// The spec's MetalLB configuration objects.
pub struct Config<'a> {
    ctx: &'a Ctx,
    created: Vec<(ApiResource, String)>,
}

impl<'a> Config<'a> {
    /// Removes leftovers of earlier runs and returns an empty configuration.
    pub fn new(ctx: &'a Ctx) -> Result<Self> {
        let client = ctx.client()?;
        for ar in resources() {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
            let foreign =
                ctx.block_on(api.list(&ListParams::default().labels(&format!("!{OWNED_LABEL}"))))?;
            for obj in foreign.items {
                eprintln!(
                    "e2e: warning: {} {NAMESPACE}/{} was not created by the suites; if it overlaps their pools the configuration is invalid and specs fail (run the suites on a fresh dev-env)",
                    ar.kind,
                    obj.metadata.name.unwrap_or_default()
                );
            }
        }
        for ar in resources().into_iter().chain(shared_resources()) {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
            let left = ctx.block_on(api.list(&ListParams::default().labels(OWNED_LABEL)))?;
            for obj in left.items {
                let name = obj.metadata.name.unwrap_or_default();
                ctx.block_on(api.delete(&name, &DeleteParams::default()))
                    .with_context(|| format!("removing leftover {} {name}", ar.kind))?;
            }
        }
        Ok(Self {
            ctx,
            created: Vec::new(),
        })
    }

    fn create(&mut self, ar: ApiResource, name: &str, spec: Value) -> Result<()> {
        self.create_object(ar, name, json!({ "spec": spec }))
    }

    /// Creates `name` of kind `ar` with `body` (fields beside metadata).
    fn create_object(&mut self, ar: ApiResource, name: &str, mut body: Value) -> Result<()> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.ctx.client()?, NAMESPACE, &ar);
        merge(
            &mut body,
            &json!({
                "apiVersion": ar.api_version, "kind": ar.kind,
                "metadata": { "name": name, "namespace": NAMESPACE, "labels": { OWNED_LABEL: "true" } },
            }),
        );
        let obj: DynamicObject = serde_json::from_value(body)?;
        self.ctx
            .block_on(api.create(&PostParams::default(), &obj))
            .with_context(|| format!("creating {} {name}", ar.kind))?;
        self.created.push((ar, name.to_owned()));
        Ok(())
    }

    /// Creates an IPAddressPool.
    pub fn pool(&mut self, name: &str, spec: Value) -> Result<()> {
        self.create(
            ApiResource::erase::<v1beta1::IPAddressPool>(&()),
            name,
            spec,
        )
    }

    /// Creates the object YAML document `doc` describes: a MetalLB kind
    /// of any served version, or a Secret (a BGP password), in the
    /// MetalLB namespace.
    pub fn apply(&mut self, doc: &Value) -> Result<()> {
        let (version, kind) = (
            doc["apiVersion"].as_str().unwrap_or_default(),
            doc["kind"].as_str().unwrap_or_default(),
        );
        let ar = resources()
            .into_iter()
            .chain(shared_resources())
            .chain([ApiResource::erase::<v1beta1::BGPPeer>(&())])
            .find(|ar| ar.api_version == version && ar.kind == kind)
            .with_context(|| format!("{version} {kind} is no kind the suites create"))?;
        let name = doc["metadata"]["name"]
            .as_str()
            .with_context(|| format!("a {kind} without metadata.name"))?
            .to_owned();
        let mut body = doc.clone();
        if let Some(o) = body.as_object_mut() {
            o.remove("apiVersion");
            o.remove("kind");
        }
        self.create_object(ar, &name, body)
    }

    /// Creates an IPAddressPool carrying `labels` (for pool selectors).
    pub fn pool_labelled(&mut self, name: &str, labels: Value, spec: Value) -> Result<()> {
        self.create_object(
            ApiResource::erase::<v1beta1::IPAddressPool>(&()),
            name,
            json!({ "metadata": { "labels": labels }, "spec": spec }),
        )
    }

    /// Creates an L2Advertisement.
    pub fn l2_advertisement(&mut self, name: &str, spec: Value) -> Result<()> {
        self.create(
            ApiResource::erase::<v1beta1::L2Advertisement>(&()),
            name,
            spec,
        )
    }

    /// Creates a BGPAdvertisement.
    pub fn bgp_advertisement(&mut self, name: &str, spec: Value) -> Result<()> {
        self.create(
            ApiResource::erase::<v1beta1::BGPAdvertisement>(&()),
            name,
            spec,
        )
    }

    /// Creates a BGPPeer (v1beta2).
    pub fn bgp_peer(&mut self, name: &str, spec: Value) -> Result<()> {
        self.create(
            ApiResource::erase::<metallb_rs::api::v1beta2::BGPPeer>(&()),
            name,
            spec,
        )
    }

    /// Creates a BGPPeer as v1beta1 (stored as v1beta2: converted by the
    /// controller's conversion webhook).
    pub fn bgp_peer_v1beta1(&mut self, name: &str, spec: Value) -> Result<()> {
        self.create(ApiResource::erase::<v1beta1::BGPPeer>(&()), name, spec)
    }

    /// Creates a BFDProfile (BGPPeers name it in `bfdProfile`).
    pub fn bfd_profile(&mut self, name: &str, spec: Value) -> Result<()> {
        self.create(ApiResource::erase::<v1beta1::BFDProfile>(&()), name, spec)
    }

    /// Creates a Community (aliases).
    pub fn community(&mut self, name: &str, spec: Value) -> Result<()> {
        self.create(ApiResource::erase::<v1beta1::Community>(&()), name, spec)
    }

    /// Creates a Secret of `type_` with `string_data` (a BGP password).
    pub fn secret(&mut self, name: &str, type_: &str, string_data: Value) -> Result<()> {
        self.create_object(
            ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
            name,
            json!({ "type": type_, "stringData": string_data }),
        )
    }

    /// Replaces an object this configuration created with the same kind and
    /// name and a new spec (fields of a spec that were set and are not in
    /// `spec` go).
    pub fn replace(&mut self, kind: &str, name: &str, spec: Value) -> Result<()> {
        let ar = self
            .created
            .iter()
            .find(|(ar, n)| ar.kind == kind && n == name)
            .map(|(ar, _)| ar.clone())
            .with_context(|| format!("{kind} {name} was not created by this spec"))?;
        let api: Api<DynamicObject> = Api::namespaced_with(self.ctx.client()?, NAMESPACE, &ar);
        // The controller writes the objects' status meanwhile: a conflict
        // is read again and retried, as kubectl does.
        for _ in 0..5 {
            let mut obj = self.ctx.block_on(api.get(name))?;
            obj.data["spec"] = spec.clone();
            match self
                .ctx
                .block_on(api.replace(name, &PostParams::default(), &obj))
            {
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                r => {
                    r.with_context(|| format!("replacing {kind} {name}"))?;
                    return Ok(());
                }
            }
        }
        bail!("replacing {kind} {name}: it kept changing (five conflicts)")
    }

    /// Deletes one object this configuration created.
    pub fn delete(&mut self, kind: &str, name: &str) -> Result<()> {
        let Some(i) = self
            .created
            .iter()
            .position(|(ar, n)| ar.kind == kind && n == name)
        else {
            bail!("{kind} {name} was not created by this spec");
        };
        let (ar, name) = self.created.remove(i);
        let api: Api<DynamicObject> = Api::namespaced_with(self.ctx.client()?, NAMESPACE, &ar);
        self.ctx
            .block_on(api.delete(&name, &DeleteParams::default()))?;
        Ok(())
    }
}

impl Drop for Config<'_> {
    fn drop(&mut self) {
        let Ok(client) = self.ctx.client() else {
            return;
        };
        // Newest first, but peers before everything: a BFD profile a
        // peer still names cannot be deleted, whichever came first.
        let mut created: Vec<(ApiResource, String)> = self.created.drain(..).rev().collect();
        created.sort_by_key(|(ar, _)| ar.kind != "BGPPeer");
        for (ar, name) in created {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
            if let Err(e) = self
                .ctx
                .block_on(api.delete(&name, &DeleteParams::default()))
            {
                eprintln!("e2e: could not delete {} {name}: {e}", ar.kind);
            }
        }
    }
}

/// Creates a LoadBalancer Service `name` in the test's namespace: TCP/80
/// unless `extra` (merged into the object) says otherwise.
pub fn create_service(ctx: &Ctx, name: &str, extra: Value) -> Result<Service> {
    let mut svc = json!({
        "metadata": { "name": name },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP" }] },
    });
    merge(&mut svc, &extra);
    let svc: Service = serde_json::from_value(svc)?;
    let api: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(api.create(&PostParams::default(), &svc))
        .with_context(|| format!("creating service {name}"))
}

/// Merges `patch` into `base` as a JSON merge patch (null removes a key).
pub fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(k);
                } else {
                    merge(b.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

/// The addresses in a service's `status.loadBalancer.ingress`.
pub fn ingress(svc: &Service) -> Vec<IpAddr> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.as_deref()?.parse().ok())
        .collect()
}

/// The status of ConfigurationState `name` (`controller`,
/// `speaker-<node>`): its result and error summary, once it exists.
pub fn configuration_state(
    ctx: &Ctx,
    name: &str,
) -> Result<Option<(v1beta1::ConfigurationResult, String)>> {
    let api: Api<v1beta1::ConfigurationState> = Api::namespaced(ctx.client()?, NAMESPACE);
    Ok(ctx
        .block_on(api.get_opt(name))?
        .and_then(|s| s.status)
        .and_then(|s| Some((s.result?, s.error_summary.unwrap_or_default()))))
}

/// Waits until ConfigurationState `name` reports `result`; returns its
/// error summary.
pub fn wait_for_configuration(
    ctx: &Ctx,
    name: &str,
    result: v1beta1::ConfigurationResult,
    timeout: Duration,
) -> Result<String> {
    eventually(
        timeout,
        &format!("ConfigurationState {name} {result:?}"),
        || {
            Ok(configuration_state(ctx, name)?
                .filter(|(r, _)| *r == result)
                .map(|(_, summary)| summary))
        },
    )
}

/// Deletes service `name` in the test's namespace.
pub fn delete_service(ctx: &Ctx, name: &str) -> Result<()> {
    let api: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(api.delete(name, &DeleteParams::default()))
        .with_context(|| format!("deleting service {name}"))?;
    Ok(())
}

/// The service `name` in the test's namespace.
pub fn get_service(ctx: &Ctx, name: &str) -> Result<Service> {
    let api: Api<Service> = Api::namespaced(ctx.client()?, ctx.namespace());
    ctx.block_on(api.get(name))
        .with_context(|| format!("reading service {name}"))
}

/// Waits until service `name` shows at least one address; returns them.
pub fn wait_for_ips(ctx: &Ctx, name: &str, timeout: Duration) -> Result<Vec<IpAddr>> {
    eventually(timeout, &format!("an IP on service {name}"), || {
        let ips = ingress(&get_service(ctx, name)?);
        Ok((!ips.is_empty()).then_some(ips))
    })
}

/// Notes of the events with `reason` about object `name` in the test's
/// namespace, least recently seen first (a repeated event counts at its
/// last occurrence).
pub fn events(ctx: &Ctx, name: &str, reason: &str) -> Result<Vec<String>> {
    let api: Api<Event> = Api::namespaced(ctx.client()?, ctx.namespace());
    let mut items: Vec<Event> = ctx
        .block_on(api.list(&ListParams::default()))?
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect();
    items.sort_by_key(|e| {
        e.series
            .as_ref()
            .map(|s| s.last_observed_time.0)
            .or(e.event_time.as_ref().map(|t| t.0))
    });
    Ok(items.into_iter().filter_map(|e| e.note).collect())
}

/// The node of the latest `nodeAssigned` event about service `name`
/// (message `announcing from node "<node>" with protocol "<protocol>"`).
pub fn announcing_node(ctx: &Ctx, name: &str) -> Result<Option<String>> {
    Ok(events(ctx, name, "nodeAssigned")?
        .last()
        .and_then(|note| note.strip_prefix("announcing from node \""))
        .and_then(|rest| rest.split('"').next())
        .map(str::to_owned))
}

/// The status objects of kind `K` (ServiceL2Status, ServiceBGPStatus)
/// of service `name` in the test's namespace.
fn statuses_of<K: metallb_rs::speaker::status::StatusObject>(
    ctx: &Ctx,
    name: &str,
) -> Result<Vec<K>> {
    let api: Api<K> = Api::namespaced(ctx.client()?, NAMESPACE);
    let selector = format!(
        "metallb.io/service-name={name},metallb.io/service-namespace={}",
        ctx.namespace()
    );
    Ok(ctx
        .block_on(api.list(&ListParams::default().labels(&selector)))?
        .items)
}

/// The ServiceL2Status objects of service `name` in the test's namespace.
pub fn l2_statuses(ctx: &Ctx, name: &str) -> Result<Vec<v1beta1::ServiceL2Status>> {
    statuses_of(ctx, name)
}

/// The ServiceBGPStatus objects of service `name`: node -> peers.
pub fn bgp_statuses(
    ctx: &Ctx,
    name: &str,
) -> Result<std::collections::BTreeMap<String, Vec<String>>> {
    Ok(statuses_of::<v1beta1::ServiceBGPStatus>(ctx, name)?
        .into_iter()
        .filter_map(|o| {
            let s = o.status?;
            Some((s.node?, s.peers.unwrap_or_default()))
        })
        .collect())
}

/// Waits until exactly one ServiceL2Status exists for `name` and returns
/// its node.
pub fn wait_for_l2_node(ctx: &Ctx, name: &str, timeout: Duration) -> Result<String> {
    eventually(timeout, &format!("one ServiceL2Status for {name}"), || {
        let list = l2_statuses(ctx, name)?;
        Ok(match list.as_slice() {
            [one] => one.status.as_ref().and_then(|s| s.node.clone()),
            _ => None,
        })
    })
}

/// How long ago `node`'s speaker last renewed its presence Lease
/// (`metallb-speaker-<node>`), by this machine's clock; `None` without a
/// lease or renewal time.
pub fn presence_age(ctx: &Ctx, node: &str) -> Result<Option<Duration>> {
    use k8s_openapi::api::coordination::v1::Lease;
    let api: Api<Lease> = Api::namespaced(ctx.client()?, NAMESPACE);
    let name = format!("{}{node}", metallb_rs::speaker::presence::LEASE_PREFIX);
    let Some(lease) = ctx.block_on(api.get_opt(&name))? else {
        return Ok(None);
    };
    let Some(renewed) = lease.spec.and_then(|s| s.renew_time) else {
        return Ok(None);
    };
    let renewed_ms = renewed.0.as_millisecond();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Ok(Some(Duration::from_millis(
        u64::try_from(now_ms.saturating_sub(renewed_ms)).unwrap_or(0),
    )))
}

/// Restarts the lab's single controller when dropped, so a spec that
/// leaves a standby leading does not change the next spec's cluster.
pub struct OneController<'a>(pub &'a Ctx);

impl Drop for OneController<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.cluster().restart_controller() {
            eprintln!("e2e: restoring the controller after a takeover: {e:#}");
        }
    }
}

/// The validating webhooks out of the way while held, for specs that make
/// the configuration invalid on purpose (what a user who bypasses them, or
/// objects from before they were installed, leave behind): the
/// ValidatingWebhookConfiguration is deleted, and put back as it was,
/// caBundle included, when dropped. Nothing to do where none is
/// installed (the lab installs none).
pub struct WithoutWebhooks<'a> {
    ctx: &'a Ctx,
    saved: Option<ValidatingWebhookConfiguration>,
}

/// Takes the webhooks out of the way until the guard drops.
pub fn without_webhooks(ctx: &Ctx) -> Result<WithoutWebhooks<'_>> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(ctx.client()?);
    let name = metallb_rs::k8s::webhook::CONFIGURATION;
    let saved = ctx
        .block_on(api.get_opt(name))
        .with_context(|| format!("reading validatingwebhookconfiguration {name}"))?;
    if saved.is_some() {
        ctx.block_on(api.delete(name, &DeleteParams::default()))
            .with_context(|| format!("deleting validatingwebhookconfiguration {name}"))?;
    }
    Ok(WithoutWebhooks { ctx, saved })
}

impl Drop for WithoutWebhooks<'_> {
    fn drop(&mut self) {
        let Some(mut vwc) = self.saved.take() else {
            return;
        };
        let meta = &mut vwc.metadata;
        meta.resource_version = None;
        meta.uid = None;
        meta.creation_timestamp = None;
        meta.managed_fields = None;
        let put_back = self.ctx.client().map(|client| {
            let api: Api<ValidatingWebhookConfiguration> = Api::all(client);
            self.ctx.block_on(api.create(&PostParams::default(), &vwc))
        });
        if !matches!(put_back, Ok(Ok(_))) {
            eprintln!(
                "could not put validatingwebhookconfiguration {} back: re-apply the manifests",
                metallb_rs::k8s::webhook::CONFIGURATION
            );
        }
    }
}
