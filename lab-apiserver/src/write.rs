//! One write as kube-apiserver runs it, with every wait outside the
//! server's lock: the current object read and converted to the request's
//! version, the change worked out (a server-side apply or the writer's
//! `managedFields` entry by [`crate::apply`], then
//! [`State`](crate::state::State)'s `prepare_*`: defaults, schema,
//! CEL), the validating webhooks
//! ([`crate::admission`]), conversion to the storage version, then the
//! store, which takes the write only if the object did not change
//! meanwhile (else the write starts again, as kube-apiserver's
//! guaranteed update does). `?dryRun=All` stops before the store. A
//! write with nothing to wait for (no webhook configuration, no
//! conversion webhook) runs in one critical section instead.

use crate::admission::{self, rules::Operation};
use crate::apply::{self, Lists, Scope, Writer};
use crate::auth::User;
use crate::conversion;
use crate::error::ApiError;
use crate::patch::{self, PatchKind};
use crate::registry::ResourceType;
use crate::state::{Part, State};
use crate::state::{Shared, lock};
use serde_json::Value;

/// Who writes and how.
pub struct Ctx<'a> {
    /// The server.
    pub shared: &'a Shared,
    /// Who asks.
    pub user: &'a User,
    /// `?dryRun=All`: everything but the store.
    pub dry_run: bool,
    /// The field manager `managedFields` name for this write.
    pub manager: &'a str,
}

/// What a write answers: the object or the error, and the webhooks'
/// warnings either way.
pub struct Reply {
    /// The object as written (at the request's version).
    pub result: Result<Value, ApiError>,
    /// Warnings for `Warning` headers.
    pub warnings: Vec<String>,
}

/// How an update changes the object.
pub enum Change<'a> {
    /// PUT: the whole object.
    Replace(Value),
    /// PATCH: applied to the current object.
    Patch(&'a Value, PatchKind),
    /// Server-side apply of a configuration (checked against the URL),
    /// taking other managers' fields when forced.
    Apply {
        /// The applied configuration.
        config: &'a Value,
        /// `?force=true`.
        force: bool,
    },
}

/// How often a write starts again when the object keeps changing under
/// it before a conflict is reported.
const ATTEMPTS: usize = 8;

/// The conflict after every attempt lost its race.
fn conflict(t: &ResourceType, name: &str) -> ApiError {
    let what = if t.group.is_empty() {
        t.plural.clone()
    } else {
        format!("{}.{}", t.plural, t.group)
    };
    ApiError::conflict(&what, name)
}

fn name_of(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

/// The stored object `ns/name`, converted to `t`'s version, and its
/// stored resourceVersion.
async fn current(
    ctx: &Ctx<'_>,
    t: &ResourceType,
    ns: &str,
    name: &str,
) -> Result<(Value, Value), ApiError> {
    let (served, rv) = {
        let s = lock(ctx.shared);
        let stored = s.stored(t, ns, name)?;
        (
            s.at_version(t, &stored),
            stored["metadata"]["resourceVersion"].clone(),
        )
    };
    Ok((conversion::for_write(ctx.shared, t, served).await?, rv))
}

/// A stored object as the response shows it.
async fn respond(ctx: &Ctx<'_>, t: &ResourceType, stored: Value) -> Result<Value, ApiError> {
    let served = lock(ctx.shared).at_version(t, &stored);
    conversion::for_write(ctx.shared, t, served).await
}

async fn admit(
    ctx: &Ctx<'_>,
    write: admission::Write<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let (warned, result) = admission::validate(ctx.shared, &write).await;
    warnings.extend(warned);
    result
}

/// Whether a write of `t` has nothing to wait for (no webhook
/// configuration, no bound admission policy, no conversion webhook): it
/// then runs in one critical
/// section, start to end, as every write did before webhooks.
fn immediate(s: &State, t: &ResourceType) -> bool {
    t.conversion.is_none()
        && (admission::rules::exempt(&t.group, &t.plural)
            || !admission::policies_bound(s)
                && s.store
                    .list(
                        &(
                            "admissionregistration.k8s.io".into(),
                            "validatingwebhookconfigurations".into(),
                        ),
                        None,
                    )
                    .is_empty())
}

/// Who writes `t` through `part`, for `managedFields`.
fn writer<'a>(
    ctx: &Ctx<'a>,
    t: &'a ResourceType,
    (api_version, time): (&'a str, &'a str),
    part: Part,
) -> Writer<'a> {
    Writer {
        manager: ctx.manager,
        api_version,
        time,
        lists: if t.custom {
            Lists::Schema(t.schema.as_ref().map(|s| &s.1))
        } else {
            Lists::Builtin
        },
        scope: match part {
            Part::Status => Scope::Status,
            Part::Main if t.status => Scope::AllButStatus,
            Part::Main => Scope::All,
        },
    }
}

/// The object `change` makes of `current`, with its managedFields.
fn changed(change: &Change<'_>, current: &Value, w: &Writer<'_>) -> Result<Value, ApiError> {
    let doc = match change {
        Change::Replace(b) => b.clone(),
        Change::Patch(p, kind) => {
            let mut doc = current.clone();
            patch::apply(&mut doc, p, *kind).map_err(ApiError::invalid_message)?;
            // A patch carries a resourceVersion only when the client wants
            // the precondition; otherwise it applies to the current object.
            if p["metadata"]["resourceVersion"].is_null() {
                doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
            }
            doc
        }
        Change::Apply { config, force } => {
            return apply::apply(Some(current), config, w, *force)
                .map_err(|c| apply::conflict_error(&c));
        }
    };
    Ok(apply::record_update(current, doc, w))
}

/// An [`immediate`] update, under the lock.
fn update_now(
    s: &mut State,
    ctx: &Ctx<'_>,
    t: &ResourceType,
    (ns, name): (&str, &str),
    change: &Change<'_>,
    (part, w): (Part, &Writer<'_>),
) -> Result<Value, ApiError> {
    let dry_run = ctx.dry_run;
    let stored = s.stored(t, ns, name)?;
    let current = s.at_version(t, &stored);
    let prepared = s.prepare_update(t, name, changed(change, &current, w)?, part, &current)?;
    crate::gate::rbac_write(s, ctx.user, t, ns, &prepared.object)?;
    if dry_run || prepared.unchanged {
        return Ok(if dry_run { prepared.object } else { current });
    }
    let rv = &stored["metadata"]["resourceVersion"];
    match s.commit_update(t, ns, name, prepared.object, rv)? {
        Some(c) => Ok(s.at_version(t, &c)),
        None => Err(conflict(t, name)),
    }
}

/// An [`immediate`] delete, under the lock.
fn delete_now(
    s: &mut State,
    dry_run: bool,
    t: &ResourceType,
    ns: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let stored = s.stored(t, ns, name)?;
    if dry_run {
        return Ok(s.at_version(t, &stored));
    }
    match s.commit_delete(t, ns, name, &stored["metadata"]["resourceVersion"])? {
        Some(c) => Ok(s.at_version(t, &c)),
        None => Err(conflict(t, name)),
    }
}

/// POST: the object, its fields recorded as its manager's.
pub async fn create(ctx: &Ctx<'_>, t: &ResourceType, ns: &str, body: Value) -> Reply {
    let (api_version, time) = (t.api_version(), crate::state::now());
    let w = writer(ctx, t, (&api_version, &time), Part::Main);
    insert(ctx, t, ns, apply::record_update(&Value::Null, body, &w)).await
}

/// Server-side apply of an object that is not there: a create, which
/// kube-apiserver also authorizes as one (the request itself was
/// authorized as a patch).
async fn apply_create(
    ctx: &Ctx<'_>,
    t: &ResourceType,
    (ns, name): (&str, &str),
    config: &Value,
    w: &Writer<'_>,
) -> Reply {
    let object = {
        let s = lock(ctx.shared);
        let create = crate::auth::rbac::Request::Resource {
            verb: "create".into(),
            group: t.group.clone(),
            resource: t.plural.clone(),
            subresource: String::new(),
            namespace: ns.into(),
            name: name.into(),
        };
        crate::gate::authorize(&s, ctx.user, &create).and_then(|()| {
            apply::apply(None, config, w, false).map_err(|c| apply::conflict_error(&c))
        })
    };
    match object {
        Ok(mut object) => {
            object["metadata"]["name"] = name.into();
            insert(ctx, t, ns, object).await
        }
        Err(e) => Reply {
            result: Err(e),
            warnings: Vec::new(),
        },
    }
}

/// A create as it comes, managedFields included.
async fn insert(ctx: &Ctx<'_>, t: &ResourceType, ns: &str, body: Value) -> Reply {
    let mut warnings = Vec::new();
    let result = async {
        let prepared = {
            let mut s = lock(ctx.shared);
            let prepared = s.prepare_create(t, ns, body)?;
            crate::gate::rbac_write(&s, ctx.user, t, ns, &prepared)?;
            if immediate(&s, t) {
                if ctx.dry_run {
                    return Ok(prepared);
                }
                let committed = s.commit_create(t, ns, prepared)?;
                return Ok(s.at_version(t, &committed));
            }
            prepared
        };
        let write = admission::Write {
            t,
            operation: Operation::Create,
            subresource: "",
            namespace: ns,
            name: name_of(&prepared),
            object: Some(&prepared),
            old_object: None,
            user: ctx.user,
            dry_run: ctx.dry_run,
        };
        admit(ctx, write, &mut warnings).await?;
        if ctx.dry_run {
            return Ok(prepared);
        }
        let stored = conversion::to_storage(ctx.shared, t, prepared).await?;
        let committed = lock(ctx.shared).commit_create(t, ns, stored)?;
        respond(ctx, t, committed).await
    }
    .await;
    Reply { result, warnings }
}

/// PUT and PATCH, of the object or its status.
pub async fn update(
    ctx: &Ctx<'_>,
    t: &ResourceType,
    ns: &str,
    name: &str,
    change: Change<'_>,
    part: Part,
) -> Reply {
    let (api_version, time) = (t.api_version(), crate::state::now());
    let w = writer(ctx, t, (&api_version, &time), part);
    // Applying the status of an object that is not there is a 404, as
    // any other status write.
    if let Change::Apply { config, .. } = change
        && part == Part::Main
        && lock(ctx.shared).stored(t, ns, name).is_err()
    {
        return apply_create(ctx, t, (ns, name), config, &w).await;
    }
    let mut warnings = Vec::new();
    let result = async {
        for _ in 0..ATTEMPTS {
            {
                let mut s = lock(ctx.shared);
                if immediate(&s, t) {
                    return update_now(&mut s, ctx, t, (ns, name), &change, (part, &w));
                }
            }
            let (current, stored_rv) = current(ctx, t, ns, name).await?;
            let body = changed(&change, &current, &w)?;
            let prepared = {
                let mut s = lock(ctx.shared);
                let prepared = s.prepare_update(t, name, body, part, &current)?;
                crate::gate::rbac_write(&s, ctx.user, t, ns, &prepared.object)?;
                prepared
            };
            let write = admission::Write {
                t,
                operation: Operation::Update,
                subresource: if part == Part::Status { "status" } else { "" },
                namespace: ns,
                name,
                object: Some(&prepared.object),
                old_object: Some(&current),
                user: ctx.user,
                dry_run: ctx.dry_run,
            };
            admit(ctx, write, &mut warnings).await?;
            if ctx.dry_run {
                return Ok(prepared.object);
            }
            if prepared.unchanged {
                return Ok(current);
            }
            let stored = conversion::to_storage(ctx.shared, t, prepared.object).await?;
            let committed = lock(ctx.shared).commit_update(t, ns, name, stored, &stored_rv)?;
            if let Some(c) = committed {
                return respond(ctx, t, c).await;
            }
            warnings.clear();
        }
        Err(conflict(t, name))
    }
    .await;
    Reply { result, warnings }
}

/// DELETE of one object.
pub async fn delete(ctx: &Ctx<'_>, t: &ResourceType, ns: &str, name: &str) -> Reply {
    let mut warnings = Vec::new();
    let result = async {
        for _ in 0..ATTEMPTS {
            {
                let mut s = lock(ctx.shared);
                if immediate(&s, t) {
                    return delete_now(&mut s, ctx.dry_run, t, ns, name);
                }
            }
            let (current, stored_rv) = current(ctx, t, ns, name).await?;
            let write = admission::Write {
                t,
                operation: Operation::Delete,
                subresource: "",
                namespace: ns,
                name,
                object: None,
                old_object: Some(&current),
                user: ctx.user,
                dry_run: ctx.dry_run,
            };
            admit(ctx, write, &mut warnings).await?;
            if ctx.dry_run {
                return Ok(current);
            }
            let committed = lock(ctx.shared).commit_delete(t, ns, name, &stored_rv)?;
            if let Some(c) = committed {
                return respond(ctx, t, c).await;
            }
            warnings.clear();
        }
        Err(conflict(t, name))
    }
    .await;
    Reply { result, warnings }
}
