//! Validating admission webhooks, as kube-apiserver calls them: after
//! defaulting, pruning, schema and CEL, before storing, every webhook of
//! every ValidatingWebhookConfiguration whose rules and selectors match
//! the write gets an AdmissionReview, all in parallel, each bounded by its
//! timeoutSeconds. A denial refuses the write; a failed call refuses it
//! under failurePolicy Fail and is logged under Ignore; warnings go back
//! as `Warning` headers. [`rules`] decides who is called, [`review`] what
//! is sent and how answers read, [`crate::client`] how the call is made;
//! what a configuration holds is the built-in registry's
//! ([`crate::builtins`]).

pub mod policy;
pub mod review;
pub mod rules;

use crate::auth::User;
use crate::client;
use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::state::{Shared, lock};
use rules::{Operation, Request};
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One write, as admission sees it.
pub struct Write<'a> {
    /// The type at the request's version.
    pub t: &'a ResourceType,
    /// CREATE, UPDATE or DELETE.
    pub operation: Operation,
    /// "" or `status`.
    pub subresource: &'a str,
    /// Namespace ("" for cluster-scoped).
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// The object after the write, at the request's version.
    pub object: Option<&'a Value>,
    /// The object before it, at the request's version.
    pub old_object: Option<&'a Value>,
    /// Who writes.
    pub user: &'a User,
    /// `?dryRun=All`.
    pub dry_run: bool,
}

impl Write<'_> {
    /// The write as the admission rules see it, with its Namespace object
    /// (for `namespaceSelector`) when given.
    fn request<'b>(&'b self, namespace_object: Option<&'b Value>) -> Request<'b> {
        Request {
            operation: self.operation,
            group: &self.t.group,
            version: &self.t.version,
            resource: &self.t.plural,
            subresource: self.subresource,
            namespace: self.namespace,
            object: self.object,
            old_object: self.old_object,
            namespace_object,
        }
    }

    /// The object's Namespace as stored (none for cluster-scoped objects).
    fn namespace_object(&self, s: &crate::state::State) -> Option<std::sync::Arc<Value>> {
        (!self.namespace.is_empty())
            .then(|| {
                s.store
                    .get(&(String::new(), "namespaces".into()), "", self.namespace)
            })
            .flatten()
    }
}

/// A webhook that matched, worked out under the lock.
struct Call {
    webhook: Value,
    /// The type at the version the webhook is called with.
    matched: ResourceType,
    target: Result<client::Target, String>,
    timeout: Duration,
}

fn uid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let secs = jiff::Timestamp::now().as_second() as u32;
    format!("{secs:08x}-ad00-4000-8000-{n:012x}")
}

/// The webhooks `w` goes to, in configuration-name order.
fn plan(shared: &Shared, w: &Write<'_>) -> Result<Vec<Call>, ApiError> {
    let s = lock(shared);
    let configs = s.store.list(
        &(
            "admissionregistration.k8s.io".into(),
            "validatingwebhookconfigurations".into(),
        ),
        None,
    );
    if configs.is_empty() {
        return Ok(Vec::new());
    }
    let namespace_object = w.namespace_object(&s);
    let t = w.t;
    let others: Vec<String> = s
        .registry
        .versions_of(&t.group, &t.plural)
        .into_iter()
        .filter(|v| *v != t.version)
        .collect();
    let request = w.request(namespace_object.as_deref());
    let mut calls = Vec::new();
    for config in &configs {
        for webhook in config["webhooks"].as_array().into_iter().flatten() {
            let name = webhook["name"].as_str().unwrap_or_default();
            let Some(version) = rules::chosen_version(webhook, &request, &others) else {
                continue;
            };
            let selected = rules::selectors_match(webhook, &request)
                .map_err(|e| review::call_failed(name, &e))?;
            if !selected {
                continue;
            }
            if w.dry_run
                && !matches!(
                    webhook["sideEffects"].as_str(),
                    Some("None" | "NoneOnDryRun")
                )
            {
                return Err(review::dry_run_unsupported(name));
            }
            let matched = s
                .registry
                .get(&t.group, &version, &t.plural)
                .cloned()
                .unwrap_or_else(|| t.clone());
            let timeout = Duration::from_secs(
                webhook["timeoutSeconds"]
                    .as_u64()
                    .unwrap_or(10)
                    .clamp(1, 30),
            );
            calls.push(Call {
                target: client::target(&s, &webhook["clientConfig"], timeout),
                webhook: webhook.clone(),
                matched,
                timeout,
            });
        }
    }
    Ok(calls)
}

/// What one call came to: warnings, and the error that refuses the write.
async fn call(shared: &Shared, w: &Write<'_>, c: &Call) -> (Vec<String>, Option<ApiError>) {
    let name = c.webhook["name"].as_str().unwrap_or_default();
    let result = async {
        // The webhook sees its own version (matchPolicy Equivalent).
        let at = |o: Option<&Value>| {
            let o = o.cloned();
            async move {
                match o {
                    Some(o) if c.matched.version != w.t.version => {
                        let o = shared_at_version(shared, &c.matched, o);
                        crate::conversion::at(shared, &c.matched, o).await.map(Some)
                    }
                    other => Ok(other),
                }
            }
        };
        let object = at(w.object).await?;
        let old_object = at(w.old_object).await?;
        let target = c.target.as_ref().map_err(Clone::clone)?;
        let uid = uid();
        let request = w.request(None);
        let body = review::admission_review(
            &review::Call {
                uid: &uid,
                name: w.name,
                user: w.user,
                dry_run: w.dry_run,
                matched: versioned(&c.matched),
                requested: versioned(w.t),
            },
            &request,
            object.as_ref(),
            old_object.as_ref(),
        );
        let answer = client::post(target, &body, c.timeout)
            .await
            .map_err(|e| format!("failed to call webhook: {e}"))?;
        review::verdict(&uid, &answer)
            .map_err(|e| format!("received invalid webhook response: {e}"))
    }
    .await;
    match result {
        Ok(v) if v.allowed => (v.warnings, None),
        Ok(v) => (v.warnings, Some(review::denied(name, &v.status))),
        Err(reason) if c.webhook["failurePolicy"] == "Ignore" => {
            tracing::warn!(webhook = name, %reason, "failed calling webhook, failing open");
            (Vec::new(), None)
        }
        Err(reason) => (Vec::new(), Some(review::call_failed(name, &reason))),
    }
}

fn versioned(t: &ResourceType) -> review::Versioned<'_> {
    review::Versioned {
        group: &t.group,
        version: &t.version,
        kind: &t.kind,
        resource: &t.plural,
    }
}

/// `o` as `t` serves it (only apiVersion rewritten unless `t` converts by
/// webhook).
fn shared_at_version(shared: &Shared, t: &ResourceType, o: Value) -> Value {
    lock(shared).at_version(t, &o)
}

const POLICIES: (&str, &str) = (
    "admissionregistration.k8s.io",
    "validatingadmissionpolicies",
);
const BINDINGS: (&str, &str) = (
    "admissionregistration.k8s.io",
    "validatingadmissionpolicybindings",
);

/// Whether any ValidatingAdmissionPolicy is bound (writes then go through
/// admission).
pub fn policies_bound(s: &crate::state::State) -> bool {
    !s.store
        .list(&(BINDINGS.0.into(), BINDINGS.1.into()), None)
        .is_empty()
}

/// What the bound ValidatingAdmissionPolicies decide of `w` (see
/// [`policy`]), under the lock. The lab's tokens carry no extra
/// attributes (no node name).
fn policies(shared: &Shared, w: &Write<'_>) -> policy::Verdict {
    let s = lock(shared);
    let bindings = s.store.list(&(BINDINGS.0.into(), BINDINGS.1.into()), None);
    if bindings.is_empty() {
        return policy::Verdict::default();
    }
    let policies = s.store.list(&(POLICIES.0.into(), POLICIES.1.into()), None);
    let namespace_object = w.namespace_object(&s);
    let request = w.request(namespace_object.as_deref());
    let bindings: Vec<Value> = bindings.iter().map(|b| (**b).clone()).collect();
    let policies: Vec<Value> = policies.iter().map(|p| (**p).clone()).collect();
    policy::evaluate(
        &policies,
        &bindings,
        &policy::Subject {
            request: &request,
            name: w.name,
            user: w.user,
            extra: &std::collections::BTreeMap::new(),
            dry_run: w.dry_run,
        },
    )
}

/// Runs the bound admission policies and the validating webhooks `w`
/// matches; the warnings they returned,
/// and the error that refuses the write (the first in webhook order).
pub async fn validate(shared: &Shared, w: &Write<'_>) -> (Vec<String>, Result<(), ApiError>) {
    if rules::exempt(&w.t.group, &w.t.plural) {
        return (Vec::new(), Ok(()));
    }
    let policies = policies(shared, w);
    if let Some(d) = policies.denial {
        return (
            policies.warnings,
            Err(ApiError::new(d.code, d.reason, d.message)),
        );
    }
    let calls = match plan(shared, w) {
        Ok(c) => c,
        Err(e) => return (policies.warnings, Err(e)),
    };
    let outcomes = futures::future::join_all(calls.iter().map(|c| call(shared, w, c))).await;
    let mut warnings = policies.warnings;
    let mut refusal = None;
    for (warned, error) in outcomes {
        warnings.extend(warned);
        if refusal.is_none() {
            refusal = error;
        }
    }
    (warnings, refusal.map_or(Ok(()), Err))
}
