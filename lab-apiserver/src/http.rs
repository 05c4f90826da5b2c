//! HTTP routing: Kubernetes REST paths onto reads of [`State`], writes
//! ([`crate::write`]), lists and watches ([`crate::watch`]).

mod body;

use super::auth::User;
use super::error::ApiError;
use super::patch::PatchKind;
use super::registry::ResourceType;
use super::render::{View, error, json_response, list_body, selectors};
use super::selector::FieldSelector;
use super::state::{Part, Shared, State, lock};
use super::write::{self, Change, Reply};
use super::{apply, conversion, gate, proto, reviews, scale};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use body::{parse_body, patch_body};
use serde_json::{Value, json};
use std::collections::HashMap;

/// A write's answer, with the webhooks' warnings as `Warning` headers.
fn reply_response(code: u16, reply: Reply) -> Response {
    let mut response = match reply.result {
        Ok(v) => json_response(code, &v),
        Err(e) => error(e),
    };
    for w in &reply.warnings {
        if let Ok(v) = header::HeaderValue::from_str(&crate::admission::review::warning_header(w)) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}

/// A parsed resource path.
struct Target {
    group: String,
    version: String,
    namespace: String,
    plural: String,
    name: Option<String>,
    subresource: Option<String>,
}

enum Route {
    Version,
    Healthz,
    Metrics,
    CoreVersions,
    Groups,
    Resources(String, String),
    Resource(Target),
    OpenApiRoot,
    OpenApi(String, String),
    NotFound,
}

fn route(path: &str) -> Route {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["healthz"] | ["readyz"] | ["livez"] => return Route::Healthz,
        ["metrics"] => return Route::Metrics,
        ["api"] => return Route::CoreVersions,
        ["openapi", "v3"] => return Route::OpenApiRoot,
        ["openapi", "v3", "api", v] => return Route::OpenApi(String::new(), (*v).into()),
        ["openapi", "v3", "apis", g, v] => return Route::OpenApi((*g).into(), (*v).into()),
        ["apis"] => return Route::Groups,
        ["api", v] => return Route::Resources(String::new(), (*v).into()),
        ["apis", g, v] => return Route::Resources((*g).into(), (*v).into()),
        ["api", v, rest @ ..] => (String::new(), (*v).to_owned(), rest),
        ["apis", g, v, rest @ ..] => ((*g).to_owned(), (*v).to_owned(), rest),
        _ => return Route::NotFound,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, more @ ..] if !more.is_empty() => ((*ns).to_owned(), more),
        other => (String::new(), other),
    };
    let (plural, name, subresource) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some((*n).to_owned()), None),
        [p, n, s] => (*p, Some((*n).to_owned()), Some((*s).to_owned())),
        _ => return Route::NotFound,
    };
    Route::Resource(Target {
        group,
        version,
        namespace,
        plural: plural.to_owned(),
        name,
        subresource,
    })
}

fn query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    Some((decode(k), decode(v))).filter(|(k, _)| !k.is_empty())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Percent-decoding of query values (`+` is a space in forms).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The axum fallback handler: every request comes through here.
pub async fn handle(
    state: axum::extract::State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let shared = state.0;
    let route = route(uri.path());
    let user = {
        let mut s = lock(&shared);
        let user = match gate::authenticate(&s, &headers) {
            Ok(u) => u,
            Err(e) => return error(e),
        };
        // A cluster-scoped kind has no namespaced URL (kube-apiserver
        // answers 404): authorizing such a URL with its namespace would
        // let a RoleBinding grant what only a ClusterRoleBinding may.
        if let Route::Resource(t) = &route
            && !t.namespace.is_empty()
            && s.registry
                .get(&t.group, &t.version, &t.plural)
                .is_some_and(|r| !r.namespaced)
        {
            return error(ApiError::not_found(
                "the server could not find the requested resource",
                uri.path(),
            ));
        }
        let q = query(&uri);
        let watching = q.get("watch").is_some_and(|w| w == "true" || w == "1");
        let selected = q
            .get("fieldSelector")
            .filter(|_| method == Method::GET)
            .and_then(|f| FieldSelector::parse(f).ok());
        let request = match &route {
            Route::Resource(t) => gate::resource(&gate::ResourceCall {
                method: &method,
                group: &t.group,
                resource: &t.plural,
                subresource: t.subresource.as_deref(),
                namespace: &t.namespace,
                name: t.name.as_deref(),
                watch: watching,
                selected: selected.as_ref().and_then(|f| f.exact("metadata.name")),
            }),
            _ => gate::non_resource(&method, uri.path()),
        };
        if let Err(e) = gate::authorize(&s, &user, &request) {
            return error(e);
        }
        let (verb, resource) = match &route {
            Route::Resource(t) => (
                crate::traffic::verb(&method, t.name.is_some(), watching),
                match &t.subresource {
                    Some(sub) => format!("{}/{sub}", t.plural),
                    None => t.plural.clone(),
                },
            ),
            _ => (crate::traffic::verb(&method, true, false), String::new()),
        };
        s.traffic.request(&user.name, verb, &resource);
        user
    };
    match route {
        Route::Version => json_response(
            200,
            &json!({
                "major": "1", "minor": "35", "gitVersion": "v1.35.0-metallb-rs-lab", "platform": "linux/amd64",
                "goVersion": "n/a", "compiler": "rustc", "buildDate": "2026-01-01T00:00:00Z", "gitCommit": "", "gitTreeState": "clean",
            }),
        ),
        Route::Healthz => (StatusCode::OK, "ok").into_response(),
        Route::Metrics => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            lock(&shared).traffic.render(),
        )
            .into_response(),
        Route::CoreVersions => json_response(200, &lock(&shared).registry.core_versions()),
        Route::Groups => json_response(200, &lock(&shared).registry.groups()),
        Route::Resources(g, v) => {
            let s = lock(&shared);
            if s.registry.serves(&g, &v) {
                json_response(200, &s.registry.resources(&g, &v))
            } else {
                error(ApiError::not_found("group version", &format!("{g}/{v}")))
            }
        }
        Route::OpenApiRoot => json_response(200, &lock(&shared).registry.openapi_root()),
        Route::OpenApi(g, v) => match lock(&shared).registry.openapi_group_version(&g, &v) {
            Some(doc) => json_response(200, &doc),
            None => error(ApiError::not_found("group version", &format!("{g}/{v}"))),
        },
        Route::NotFound => error(ApiError::not_found("path", uri.path())),
        Route::Resource(target) => {
            resource(shared, &user, method, &uri, &headers, &body, target).await
        }
    }
}

/// A request on a resource type: its body read as JSON, then routed by
/// subresource and method.
async fn resource(
    shared: Shared,
    user: &User,
    method: Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
    target: Target,
) -> Response {
    let q = query(uri);
    let t = match resource_type(&shared, &target) {
        Ok(t) => t,
        Err(e) => return error(e),
    };
    // Reviews and TokenRequests are decoded from protobuf whatever their
    // kind; `kubectl create deployment` and Helm's release records (and
    // their deletes) come as protobuf only.
    let reviewing = t.review || target.subresource.as_deref() == Some("token");
    let decode = reviewing
        || (!body.is_empty()
            && target.subresource.is_none()
            && proto::decodes(&method, &t.group, &t.plural));
    let body = match body::json_body(body, body::content_type(headers), decode) {
        Ok(b) => b,
        Err(e) => return error(e),
    };
    let ns = ns_of(&t, &target);
    if reviewing {
        return review(&shared, user, &method, &t, &ns, &target, &body);
    }
    if let (Some("log"), Some(name)) = (target.subresource.as_deref(), target.name.as_deref())
        && t.group.is_empty()
        && t.plural == "pods"
    {
        return pod_log(&shared, &ns, name, &method, &q);
    }
    let part = match target.subresource.as_deref() {
        None => Part::Main,
        Some("status") if t.status => Part::Status,
        Some("scale") if t.has_scale() => Part::Main,
        Some(other) => return error(ApiError::not_found("subresource", other)),
    };
    let view = View::of(headers, &q);
    let (dry_run, manager) = match write_options(headers, &q) {
        Ok(options) => options,
        Err(e) => return error(e),
    };
    let ctx = write::Ctx {
        shared: &shared,
        user,
        dry_run,
        manager: &manager,
    };
    if let (Some("scale"), Some(name)) = (target.subresource.as_deref(), target.name.as_deref()) {
        return scale_request(&ctx, &t, &ns, name, &method, headers, &body).await;
    }
    let call = Call {
        t: &t,
        ns: &ns,
        target: &target,
        q: &q,
        headers,
        body: &body,
    };
    match (&method, target.name.as_deref()) {
        (&Method::GET, None) if q.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            let sent = lock(&shared).traffic.watch_counter(&user.name);
            let ns = target.namespace.clone();
            crate::watch::watch(shared.clone(), t.clone(), ns, &q, view, sent).await
        }
        (&Method::GET, _) => reply_response(200, read(&shared, &call, view).await),
        _ => write_request(&ctx, &call, &method, uri, part).await,
    }
}

/// The type `target` names, as the registry has it now.
fn resource_type(shared: &Shared, target: &Target) -> Result<ResourceType, ApiError> {
    lock(shared)
        .registry
        .get(&target.group, &target.version, &target.plural)
        .cloned()
        .ok_or_else(|| {
            ApiError::not_found(
                "the server could not find the requested resource",
                &format!("{}/{}/{}", target.group, target.version, target.plural),
            )
        })
}

/// A write's `?dryRun` (only `All`) and its field manager (from
/// `?fieldManager`, else the User-Agent).
fn write_options(
    headers: &HeaderMap,
    q: &HashMap<String, String>,
) -> Result<(bool, String), ApiError> {
    let dry_run = match q.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            )));
        }
    };
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let manager = apply::manager_name(
        q.get("fieldManager").map(String::as_str),
        user_agent.unwrap_or_default(),
    );
    Ok((dry_run, manager))
}

/// A request on a resource type's main or status part, past routing: what
/// the reads and writes below take.
#[derive(Clone, Copy)]
struct Call<'a> {
    t: &'a ResourceType,
    /// The namespace addressed ("" for cluster-scoped kinds).
    ns: &'a str,
    target: &'a Target,
    q: &'a HashMap<String, String>,
    headers: &'a HeaderMap,
    /// The body, as JSON.
    body: &'a Bytes,
}

/// GET: a list, or one object, converted to the version asked for.
async fn read(shared: &Shared, call: &Call<'_>, view: View) -> Reply {
    let result = match call.target.name.as_deref() {
        None => list(shared, call.t, &call.target.namespace, call.q, view).await,
        Some(name) => {
            let (found, rv) = {
                let s = lock(shared);
                (s.get(call.t, call.ns, name), s.store.resource_version())
            };
            match found {
                Ok(o) => conversion::served(shared, call.t, vec![o])
                    .await
                    .map(|mut v| view.one(call.t, v.remove(0), rv)),
                Err(e) => Err(e),
            }
        }
    };
    Reply {
        result,
        warnings: Vec::new(),
    }
}

/// POST, PUT, PATCH and DELETE, each through [`write`]; any other method
/// is not allowed.
async fn write_request(
    ctx: &write::Ctx<'_>,
    call: &Call<'_>,
    method: &Method,
    uri: &Uri,
    part: Part,
) -> Response {
    let Call {
        t,
        ns,
        target,
        q,
        headers,
        body,
    } = *call;
    let reply = match (method.clone(), target.name.as_deref()) {
        (Method::POST, None) => {
            return match parse_body(body) {
                Ok(b) => reply_response(201, write::create(ctx, t, ns, b).await),
                Err(e) => error(e),
            };
        }
        (Method::PUT, Some(name)) => match parse_body(body) {
            Ok(b) => write::update(ctx, t, ns, name, Change::Replace(b), part).await,
            Err(e) => return error(e),
        },
        (Method::PATCH, Some(name)) => match patch_body(headers, body, q, (t, name)) {
            Ok((config, PatchKind::Apply)) => {
                let force = q.get("force").is_some_and(|f| f == "true");
                let change = Change::Apply {
                    config: &config,
                    force,
                };
                write::update(ctx, t, ns, name, change, part).await
            }
            Ok((b, kind)) => write::update(ctx, t, ns, name, Change::Patch(&b, kind), part).await,
            Err(e) => return error(e),
        },
        (Method::DELETE, Some(name)) => write::delete(ctx, t, ns, name).await,
        (Method::DELETE, None) => delete_collection(ctx, t, &target.namespace, q).await,
        _ => Reply {
            result: Err(ApiError::method_not_allowed(format!(
                "{method} is not supported on {}",
                uri.path()
            ))),
            warnings: Vec::new(),
        },
    };
    reply_response(200, reply)
}

/// GET on `pods/log`: what the node agent logged for the container
/// (`container`, else the Pod's first), cut by `tailLines` and
/// `limitBytes`, as text. `follow` gets what is there now.
fn pod_log(
    shared: &Shared,
    ns: &str,
    name: &str,
    method: &Method,
    q: &HashMap<String, String>,
) -> Response {
    if *method != Method::GET {
        return error(ApiError::method_not_allowed(format!(
            "{method} is not supported on pods/log"
        )));
    }
    let (pod, dir) = {
        let s = lock(shared);
        let pods = s.registry.get("", "v1", "pods").cloned();
        let pod = match pods {
            Some(t) => s.get(&t, ns, name),
            None => Err(ApiError::not_found("pods", name)),
        };
        (pod, s.pod_logs.clone())
    };
    let pod = match pod {
        Ok(p) => p,
        Err(e) => return error(e),
    };
    let containers: Vec<&str> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    let container = match q.get("container").filter(|c| !c.is_empty()) {
        Some(c) if containers.contains(&c.as_str()) => c.clone(),
        Some(c) => {
            return error(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        None => containers.first().copied().unwrap_or_default().to_owned(),
    };
    let number = |key: &str| q.get(key).and_then(|v| v.parse::<usize>().ok());
    let text = match dir {
        Some(dir) => {
            let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
            let file = crate::podlog::path(&dir, ns, name, uid, &container);
            match crate::podlog::read(&file, number("tailLines"), number("limitBytes")) {
                Ok(text) => text,
                Err(e) => return error(ApiError::internal(format!("{}: {e}", file.display()))),
            }
        }
        None => String::new(),
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], text).into_response()
}

/// GET, PUT or PATCH on a `scale` subresource.
async fn scale_request(
    ctx: &write::Ctx<'_>,
    t: &ResourceType,
    ns: &str,
    name: &str,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let reply = match *method {
        Method::GET => Reply {
            result: lock(ctx.shared).get(t, ns, name).map(|o| scale::of(&o)),
            warnings: Vec::new(),
        },
        Method::PUT => match parse_body(body) {
            Ok(b) => scale::update(ctx, t, ns, name, scale::ScaleChange::Replace(b)).await,
            Err(e) => return error(e),
        },
        Method::PATCH => {
            let kind = match body::patch_kind(headers) {
                Ok(kind) => kind,
                Err(e) => return error(e),
            };
            match parse_body(body) {
                Ok(b) => scale::update(ctx, t, ns, name, scale::ScaleChange::Patch(&b, kind)).await,
                Err(e) => return error(e),
            }
        }
        _ => {
            return error(ApiError::method_not_allowed(format!(
                "{method} is not supported on scale"
            )));
        }
    };
    reply_response(200, reply)
}

/// DELETE on a collection: each selected object deleted (and admitted)
/// on its own; the list of what was selected.
async fn delete_collection(
    ctx: &write::Ctx<'_>,
    t: &ResourceType,
    ns: &str,
    q: &HashMap<String, String>,
) -> Reply {
    let (selected, rv) = {
        let s = lock(ctx.shared);
        (select(&s, t, ns, q), s.store.resource_version())
    };
    let items = match selected {
        Ok(items) => items,
        Err(e) => {
            return Reply {
                result: Err(e),
                warnings: Vec::new(),
            };
        }
    };
    let mut warnings = Vec::new();
    for o in &items {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let o_ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
        let r = write::delete(ctx, t, o_ns, name).await;
        warnings.extend(r.warnings);
        if let Err(e) = r.result {
            return Reply {
                result: Err(e),
                warnings,
            };
        }
    }
    let result = conversion::served(ctx.shared, t, items)
        .await
        .map(|items| list_body(t, rv, items));
    Reply { result, warnings }
}

/// The namespace a request addresses ("" for cluster-scoped kinds).
fn ns_of(t: &ResourceType, target: &Target) -> String {
    if t.namespaced {
        target.namespace.clone()
    } else {
        String::new()
    }
}

/// Reviews and TokenRequests: created, answered, never stored.
fn review(
    shared: &Shared,
    user: &User,
    method: &Method,
    t: &ResourceType,
    ns: &str,
    target: &Target,
    body: &Bytes,
) -> Response {
    if method != Method::POST {
        return error(ApiError::method_not_allowed(format!(
            "{method} is not supported on {}: only POST (create)",
            t.plural
        )));
    }
    let s = lock(shared);
    let answer = parse_body(body).and_then(|b| match (&target.name, t.review) {
        (None, true) => reviews::answer(&s, user, &t.plural, ns, b),
        (Some(name), false) if t.group.is_empty() && t.plural == "serviceaccounts" => {
            reviews::token_request(&s, ns, name, b)
        }
        _ => Err(ApiError::not_found("subresource", "token")),
    });
    match answer {
        Ok(v) => json_response(201, &v),
        Err(e) => error(e),
    }
}

fn select(
    s: &State,
    t: &ResourceType,
    ns: &str,
    q: &HashMap<String, String>,
) -> Result<Vec<Value>, ApiError> {
    let (labels, fields) = selectors(q, t)?;
    let scope = (t.namespaced && !ns.is_empty()).then_some(ns);
    let mut items: Vec<Value> = s
        .store
        .list(&t.collection(), scope)
        .iter()
        .filter(|o| labels.matches(o) && fields.matches(o))
        .map(|o| s.at_version(t, o))
        .collect();
    if crate::events::is_core_events(&t.group, &t.plural) {
        let newer = ("events.k8s.io".to_owned(), "events".to_owned());
        items.extend(
            s.store
                .list(&newer, scope)
                .iter()
                .map(|o| crate::events::core_of(o))
                .filter(|o| labels.matches(o) && fields.matches(o)),
        );
    }
    Ok(items)
}

async fn list(
    shared: &Shared,
    t: &ResourceType,
    ns: &str,
    q: &HashMap<String, String>,
    view: View,
) -> Result<Value, ApiError> {
    let mut page = {
        let s = lock(shared);
        let items = select(&s, t, ns, q)?;
        crate::page::of(
            items,
            s.store.resource_version(),
            q.get("limit").map(String::as_str),
            q.get("continue").map(String::as_str),
        )?
    };
    let items = conversion::served(shared, t, std::mem::take(&mut page.items)).await?;
    let mut out = view.many(t, items, page.rv);
    page.annotate(&mut out);
    Ok(out)
}
