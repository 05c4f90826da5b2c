//! HTTP routing: Kubernetes REST paths onto [`State`] operations, lists,
//! and watch streams (JSON lines, bookmarks, 410 on expired versions).

use super::auth::User;
use super::error::ApiError;
use super::patch::PatchKind;
use super::registry::ResourceType;
use super::selector::{FieldSelector, LabelSelector};
use super::state::{Part, State};
use super::store::{Event, EventKind};
use super::table::{self, Format, Include};
use super::{gate, proto, reviews};
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Shared server state.
pub type Shared = Arc<Mutex<State>>;

fn json_response(code: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error(e: ApiError) -> Response {
    json_response(e.code, &e.to_status())
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
        let s = lock(&shared);
        let user = match gate::authenticate(&s, &headers) {
            Ok(u) => u,
            Err(e) => return error(e),
        };
        let request = match &route {
            Route::Resource(t) => gate::resource(&gate::ResourceCall {
                method: &method,
                group: &t.group,
                resource: &t.plural,
                subresource: t.subresource.as_deref(),
                namespace: &t.namespace,
                name: t.name.as_deref(),
                watch: query(&uri)
                    .get("watch")
                    .is_some_and(|w| w == "true" || w == "1"),
            }),
            _ => gate::non_resource(&method, uri.path()),
        };
        if let Err(e) = gate::authorize(&s, &user, &request) {
            return error(e);
        }
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

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    // A panic while holding the lock would poison it; the state is still
    // consistent (every write is one store call), so keep serving.
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

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
    let t: ResourceType = {
        let s = lock(&shared);
        match s
            .registry
            .get(&target.group, &target.version, &target.plural)
        {
            Some(t) => t.clone(),
            None => {
                return error(ApiError::not_found(
                    "the server could not find the requested resource",
                    &format!("{}/{}/{}", target.group, target.version, target.plural),
                ));
            }
        }
    };
    // Bodies are JSON; protobuf/CBOR get 415, on which client-go retries
    // the request as JSON.
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let reviewing = t.review || target.subresource.as_deref() == Some("token");
    if reviewing && ct.contains("protobuf") {
        let decoded =
            proto::decode(body).and_then(|v| serde_json::to_vec(&v).map_err(|e| e.to_string()));
        return match decoded {
            Ok(json) => review(
                &shared,
                user,
                &method,
                &t,
                &ns_of(&t, &target),
                &target,
                &Bytes::from(json),
            ),
            Err(e) => error(ApiError::unsupported_media_type(e)),
        };
    }
    if !body.is_empty() && (ct.contains("protobuf") || ct.contains("cbor")) {
        return error(ApiError::unsupported_media_type(format!(
            "{ct} is not supported by the lab API server: send JSON"
        )));
    }
    let ns = ns_of(&t, &target);
    if reviewing {
        return review(&shared, user, &method, &t, &ns, &target, body);
    }
    let part = match target.subresource.as_deref() {
        None => Part::Main,
        Some("status") if t.status => Part::Status,
        Some(other) => return error(ApiError::not_found("subresource", other)),
    };
    let view = View::of(headers, &q);
    let result = match (method.clone(), target.name.as_deref()) {
        (Method::GET, None) => {
            if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
                return watch(shared, t, target.namespace.clone(), &q, view);
            }
            list(&shared, &t, &target.namespace, &q, view)
        }
        (Method::GET, Some(name)) => {
            let s = lock(&shared);
            s.get(&t, &ns, name)
                .map(|o| view.one(&t, o, s.store.resource_version()))
        }
        (Method::POST, None) => {
            return match parse_body(body).and_then(|b| lock(&shared).create(&t, &ns, b)) {
                Ok(o) => json_response(201, &o),
                Err(e) => error(e),
            };
        }
        (Method::PUT, Some(name)) => {
            parse_body(body).and_then(|b| lock(&shared).update(&t, &ns, name, b, part))
        }
        (Method::PATCH, Some(name)) => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            match PatchKind::from_content_type(ct) {
                None => Err(ApiError::unsupported_media_type(format!(
                    "the body of the request was in an unknown format: {ct:?}"
                ))),
                Some(kind) => parse_body(body)
                    .and_then(|b| lock(&shared).patch(&t, &ns, name, &b, kind, part)),
            }
        }
        (Method::DELETE, Some(name)) => lock(&shared).delete(&t, &ns, name),
        (Method::DELETE, None) => {
            let mut s = lock(&shared);
            let selected = select(&s, &t, &target.namespace, &q);
            selected.and_then(|items| {
                for o in &items {
                    let name = o["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let o_ns = o["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    s.delete(&t, &o_ns, &name)?;
                }
                Ok(list_body(&t, s.store.resource_version(), items))
            })
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "{method} is not supported on {}",
            uri.path()
        ))),
    };
    match result {
        Ok(v) => json_response(200, &v),
        Err(e) => error(e),
    }
}

/// How objects are rendered for one request: as themselves or as
/// kubectl's Table rows.
#[derive(Clone, Copy)]
struct View {
    format: Format,
    include: Include,
}

impl View {
    fn of(headers: &HeaderMap, q: &HashMap<String, String>) -> Self {
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        Self {
            format: Format::from_accept(accept),
            include: Include::from_query(q.get("includeObject").map(String::as_str)),
        }
    }

    /// One object (a GET, a watch event).
    fn one(self, t: &ResourceType, object: Value, rv: u64) -> Value {
        match self.format {
            Format::Object => object,
            Format::Table(v) => {
                table::table(t, &[object], rv, v, self.include, jiff::Timestamp::now())
            }
        }
    }

    /// A list.
    fn many(self, t: &ResourceType, items: Vec<Value>, rv: u64) -> Value {
        match self.format {
            Format::Object => list_body(t, rv, items),
            Format::Table(v) => {
                table::table(t, &items, rv, v, self.include, jiff::Timestamp::now())
            }
        }
    }
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

fn selectors(q: &HashMap<String, String>) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(
        q.get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )
    .map_err(|e| ApiError::bad_request(format!("labelSelector: {e}")))?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )
    .map_err(|e| ApiError::bad_request(format!("fieldSelector: {e}")))?;
    Ok((labels, fields))
}

fn select(
    s: &State,
    t: &ResourceType,
    ns: &str,
    q: &HashMap<String, String>,
) -> Result<Vec<Value>, ApiError> {
    let (labels, fields) = selectors(q)?;
    let scope = (t.namespaced && !ns.is_empty()).then_some(ns);
    Ok(s.store
        .list(&t.collection(), scope)
        .iter()
        .filter(|o| labels.matches(o) && fields.matches(o))
        .map(|o| s.at_version(t, o))
        .collect())
}

fn list_body(t: &ResourceType, rv: u64, items: Vec<Value>) -> Value {
    json!({
        "kind": format!("{}List", t.kind),
        "apiVersion": t.api_version(),
        "metadata": { "resourceVersion": rv.to_string() },
        "items": items,
    })
}

fn list(
    shared: &Shared,
    t: &ResourceType,
    ns: &str,
    q: &HashMap<String, String>,
    view: View,
) -> Result<Value, ApiError> {
    let s = lock(shared);
    let items = select(&s, t, ns, q)?;
    Ok(view.many(t, items, s.store.resource_version()))
}

fn watch_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({ "type": kind, "object": object }).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// A watch: the backlog (synthetic ADDED for the current state when no
/// resourceVersion is given, or the logged events after it), then live
/// events, filtered by namespace and selectors.
fn watch(
    shared: Shared,
    t: ResourceType,
    ns: String,
    q: &HashMap<String, String>,
    view: View,
) -> Response {
    let (labels, fields) = match selectors(q) {
        Ok(s) => s,
        Err(e) => return error(e),
    };
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let since = q
        .get("resourceVersion")
        .filter(|v| !v.is_empty() && *v != "0")
        .map(|v| v.parse::<u64>());
    let scope = (t.namespaced && !ns.is_empty()).then(|| ns.clone());
    let matches = move |o: &Value| labels.matches(o) && fields.matches(o);

    let (backlog, rx, rv_now, expired): (Vec<Bytes>, _, u64, bool) = {
        let s = lock(&shared);
        let rx = s.events.subscribe();
        let mut expired = false;
        let backlog = match since {
            None => s
                .store
                .list(&t.collection(), scope.as_deref())
                .iter()
                .filter(|o| matches(o))
                .map(|o| {
                    let o = view.one(&t, s.at_version(&t, o), s.store.resource_version());
                    watch_line("ADDED", &o)
                })
                .collect(),
            Some(Err(_)) => {
                return error(ApiError::bad_request("resourceVersion must be a number"));
            }
            Some(Ok(rv)) => match s.store.events_since(&t.collection(), scope.as_deref(), rv) {
                Ok(events) => events
                    .iter()
                    .filter_map(|e| render(&s, &t, e, &matches, view))
                    .collect(),
                Err(gone) => {
                    expired = true;
                    let status =
                        ApiError::gone(format!("too old resource version: {rv} ({})", gone.oldest))
                            .to_status();
                    vec![watch_line("ERROR", &status)]
                }
            },
        };
        (backlog, rx, s.store.resource_version(), expired)
    };
    let backlog_stream =
        futures::stream::iter(backlog.into_iter().map(Ok::<Bytes, std::io::Error>));
    if expired {
        return Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from_stream(backlog_stream))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let live_shared = shared.clone();
    let collection = t.collection();
    let live = futures::stream::unfold((rx, rv_now), move |(mut rx, last_rv)| {
        let shared = live_shared.clone();
        let t = t.clone();
        let collection = collection.clone();
        let scope = scope.clone();
        let matches = matches.clone();
        async move {
            loop {
                let next = if bookmarks {
                    tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.ok()
                } else {
                    Some(rx.recv().await)
                };
                match next {
                    None => {
                        let rv = lock(&shared).store.resource_version();
                        let mark = json!({ "kind": t.kind, "apiVersion": t.api_version(), "metadata": { "resourceVersion": rv.to_string() } });
                        return Some((Ok(watch_line("BOOKMARK", &mark)), (rx, last_rv)));
                    }
                    Some(Ok(e)) => {
                        if e.rv <= last_rv || e.collection != collection || scope.as_deref().is_some_and(|n| n != e.namespace) {
                            continue;
                        }
                        let line = render(&lock(&shared), &t, &e, &matches, view);
                        if let Some(line) = line {
                            return Some((Ok(line), (rx, e.rv)));
                        }
                    }
                    Some(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {
                        let status = ApiError::gone("watch fell behind: relist").to_status();
                        return Some((Ok(watch_line("ERROR", &status)), (rx, u64::MAX)));
                    }
                    Some(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return None,
                }
            }
        }
    })
    // After a lag error the stream ends (the client relists).
    .take_while(|item| futures::future::ready(item.as_ref().is_ok()));
    let stream = backlog_stream
        .chain(live)
        .take_until(tokio::time::sleep(timeout));
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// One event as a watch line, or none when filtered out. A modification
/// that makes an object stop matching is delivered as DELETED.
fn render(
    s: &State,
    t: &ResourceType,
    e: &Event,
    matches: &impl Fn(&Value) -> bool,
    view: View,
) -> Option<Bytes> {
    let now = matches(&e.object);
    let before = e.previous.as_deref().is_some_and(matches);
    let kind = match (e.kind, now, before) {
        (EventKind::Modified, true, false) => "ADDED",
        (EventKind::Modified, false, true) => "DELETED",
        (_, false, _) => return None,
        (k, true, _) => k.as_str(),
    };
    Some(watch_line(
        kind,
        &view.one(t, s.at_version(t, &e.object), e.rv),
    ))
}
