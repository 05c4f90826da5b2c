//! Watch streams: JSON lines of the backlog then live events, filtered by
//! namespace and selectors, bookmarks, 410 on expired versions, objects
//! converted to the watched version outside the server's lock.

use crate::conversion;
use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::render::{View, error, selectors};
use crate::state::State;
use crate::state::{Shared, lock};
use crate::store::{Event, EventKind};
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

fn watch_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({ "type": kind, "object": object }).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// A watch: the backlog (synthetic ADDED for the current state when no
/// resourceVersion is given, or the logged events after it), then live
/// events, filtered by namespace and selectors, converted to the watched
/// version outside the lock. A failed conversion ends the watch with an
/// ERROR event.
pub async fn watch(
    shared: Shared,
    t: ResourceType,
    ns: String,
    q: &HashMap<String, String>,
    view: View,
    sent: Arc<AtomicU64>,
) -> Response {
    let (labels, fields) = match selectors(q, &t) {
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

    let (backlog, rx, rv_now, expired): (Vec<Rendered>, _, u64, bool) = {
        let mut s = lock(&shared);
        let rx = s.events.subscribe(&t.collection());
        let mut expired = false;
        let rv = s.store.resource_version();
        let backlog = match since {
            None => s
                .store
                .list(&t.collection(), scope.as_deref())
                .iter()
                .filter(|o| matches(o))
                .map(|o| ("ADDED", s.at_version(&t, o), rv))
                .collect(),
            Some(Err(_)) => {
                return error(ApiError::bad_request("resourceVersion must be a number"));
            }
            Some(Ok(rv)) => match s.store.events_since(&t.collection(), scope.as_deref(), rv) {
                Ok(events) => events
                    .iter()
                    .filter_map(|e| render(&s, &t, e, &matches))
                    .collect(),
                Err(gone) => {
                    expired = true;
                    let status =
                        ApiError::gone(format!("too old resource version: {rv} ({})", gone.oldest))
                            .to_status();
                    vec![("ERROR", status, rv)]
                }
            },
        };
        (backlog, rx, rv, expired)
    };
    let (backlog, ended) = if expired {
        let lines = backlog
            .iter()
            .map(|(kind, o, _)| watch_line(kind, o))
            .collect();
        (lines, true)
    } else {
        match lines(&shared, &t, backlog, view).await {
            Ok(lines) => (lines, false),
            Err(error) => (vec![error], true),
        }
    };
    sent.fetch_add(backlog.len() as u64, Ordering::Relaxed);
    let backlog_stream =
        futures::stream::iter(backlog.into_iter().map(Ok::<Bytes, std::io::Error>));
    if ended {
        return Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from_stream(backlog_stream))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let live_shared = shared.clone();
    let collection = t.collection();
    // The state: the receiver, the last resourceVersion sent, the last
    // one taken from the channel (sent or filtered out), and whether the
    // watch ended (after an ERROR event the client relists).
    let live = futures::stream::unfold(
        (rx, rv_now, rv_now, false),
        move |(mut rx, last_rv, mut taken, ended)| {
            let shared = live_shared.clone();
            let t = t.clone();
            let collection = collection.clone();
            let scope = scope.clone();
            let matches = matches.clone();
            async move {
                if ended {
                    return None;
                }
                loop {
                    let next = if bookmarks {
                        tokio::time::timeout(Duration::from_secs(5), rx.recv())
                            .await
                            .ok()
                    } else {
                        Some(rx.recv().await)
                    };
                    match next {
                        None => {
                            let rv = {
                                // Events are sent under the lock: an empty
                                // channel here means every commit of the
                                // collection so far was taken.
                                let s = lock(&shared);
                                bookmark_version(s.store.resource_version(), !rx.is_empty(), taken)
                            };
                            let mark = json!({ "kind": t.kind, "apiVersion": t.api_version(), "metadata": { "resourceVersion": rv.to_string() } });
                            return Some((
                                Ok(watch_line("BOOKMARK", &mark)),
                                (rx, last_rv, taken, false),
                            ));
                        }
                        Some(Ok(e)) => {
                            taken = taken.max(e.rv);
                            if e.rv <= last_rv
                                || e.collection != collection
                                || scope.as_deref().is_some_and(|n| n != e.namespace)
                            {
                                continue;
                            }
                            let rendered = render(&lock(&shared), &t, &e, &matches);
                            if let Some(r) = rendered {
                                return Some(match lines(&shared, &t, vec![r], view).await {
                                    Ok(mut out) => (
                                        Ok(out.pop().unwrap_or_default()),
                                        (rx, e.rv, taken, false),
                                    ),
                                    Err(error) => (Ok(error), (rx, e.rv, taken, true)),
                                });
                            }
                        }
                        Some(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {
                            let status = ApiError::gone("watch fell behind: relist").to_status();
                            return Some((
                                Ok(watch_line("ERROR", &status)),
                                (rx, last_rv, taken, true),
                            ));
                        }
                        Some(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return None,
                    }
                }
            }
        },
    );
    let live = live.inspect(move |_| {
        sent.fetch_add(1, Ordering::Relaxed);
    });
    let stream = backlog_stream
        .chain(live)
        .take_until(tokio::time::sleep(timeout));
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The resourceVersion of a bookmark: the store's, unless events of the
/// collection are still queued for this watch, in which case the last
/// one it took. A client that restarts from a bookmark resumes after its
/// version, so a bookmark past a queued event would make it miss that
/// event.
fn bookmark_version(store: u64, queued: bool, taken: u64) -> u64 {
    if queued { taken } else { store }
}

/// A watch event before conversion: type, object (as `at_version` gives
/// it), resourceVersion.
type Rendered = (&'static str, Value, u64);

/// Watch lines for `events`, converted to `t`'s version in one go; a
/// failed conversion is one ERROR line instead.
async fn lines(
    shared: &Shared,
    t: &ResourceType,
    events: Vec<Rendered>,
    view: View,
) -> Result<Vec<Bytes>, Bytes> {
    let (meta, objects): (Vec<(&str, u64)>, Vec<Value>) =
        events.into_iter().map(|(k, o, rv)| ((k, rv), o)).unzip();
    match conversion::served(shared, t, objects).await {
        Ok(objects) => Ok(meta
            .into_iter()
            .zip(objects)
            .map(|((kind, rv), o)| watch_line(kind, &view.one(t, o, rv)))
            .collect()),
        Err(e) => Err(watch_line("ERROR", &e.to_status())),
    }
}

/// One event as a watch line's parts, or none when filtered out. A
/// modification that makes an object stop matching is delivered as
/// DELETED.
fn render(
    s: &State,
    t: &ResourceType,
    e: &Event,
    matches: &impl Fn(&Value) -> bool,
) -> Option<Rendered> {
    let now = matches(&e.object);
    let before = e.previous.as_deref().is_some_and(matches);
    let kind = match (e.kind, now, before) {
        (EventKind::Modified, true, false) => "ADDED",
        (EventKind::Modified, false, true) => "DELETED",
        (_, false, _) => return None,
        (k, true, _) => k.as_str(),
    };
    Some((kind, s.at_version(t, &e.object), e.rv))
}

#[cfg(test)]
mod tests {
    use super::bookmark_version;

    #[test]
    fn a_bookmark_never_passes_a_queued_event() {
        // Nothing queued: every commit was taken (sent or filtered out),
        // so the store's version is safe and lets the client skip the
        // filtered ones.
        assert_eq!(bookmark_version(40, false, 31), 40);
        // Version 35 committed and queued, not yet sent: a bookmark at
        // 40 would make a restarted watch resume after it.
        assert_eq!(bookmark_version(40, true, 31), 31);
    }
}
