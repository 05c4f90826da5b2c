//! Watch streams: JSON lines of the backlog then live events, filtered by
//! namespace and selectors, bookmarks, 410 on expired versions, objects
//! converted to the watched version outside the server's lock.

use crate::conversion;
use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::render::{View, error, selectors};
use crate::state::State;
use crate::state::{Shared, lock};
use crate::store::{Collection, Event, EventKind};
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::broadcast;

fn watch_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({ "type": kind, "object": object }).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// What a watch asks for besides its selectors.
struct Asked {
    bookmarks: bool,
    timeout: Duration,
    /// The resourceVersion to resume after; `None`: from the current
    /// state.
    since: Option<u64>,
}

impl Asked {
    /// `allowWatchBookmarks`, `timeoutSeconds` (30 minutes if absent) and
    /// `resourceVersion` (empty or `"0"`: the current state).
    fn of(q: &HashMap<String, String>) -> Result<Asked, ApiError> {
        let since = match q
            .get("resourceVersion")
            .filter(|v| !v.is_empty() && *v != "0")
        {
            None => None,
            Some(v) => Some(
                v.parse::<u64>()
                    .map_err(|_| ApiError::bad_request("resourceVersion must be a number"))?,
            ),
        };
        Ok(Asked {
            bookmarks: q.get("allowWatchBookmarks").is_some_and(|v| v == "true"),
            timeout: q
                .get("timeoutSeconds")
                .and_then(|s| s.parse::<u64>().ok())
                .map(Duration::from_secs)
                .unwrap_or(Duration::from_secs(1800)),
            since,
        })
    }
}

/// Which objects a watch sends, and how: what every step of its live half
/// reads.
struct Feed {
    shared: Shared,
    t: ResourceType,
    collection: Collection,
    /// The namespace watched; `None`: all.
    scope: Option<String>,
    matches: Box<dyn Fn(&Value) -> bool + Send + Sync>,
    view: View,
    bookmarks: bool,
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
    let asked = match Asked::of(q) {
        Ok(a) => a,
        Err(e) => return error(e),
    };
    let feed = Feed {
        shared,
        collection: t.collection(),
        scope: (t.namespaced && !ns.is_empty()).then_some(ns),
        t,
        matches: Box::new(move |o: &Value| labels.matches(o) && fields.matches(o)),
        view,
        bookmarks: asked.bookmarks,
    };
    let start = start(&feed, asked.since);
    let (backlog, ended) = backlog_lines(&feed, start.backlog, start.expired).await;
    sent.fetch_add(backlog.len() as u64, Ordering::Relaxed);
    let backlog_stream =
        futures::stream::iter(backlog.into_iter().map(Ok::<Bytes, std::io::Error>));
    if ended {
        return stream_response(backlog_stream);
    }
    let live = Live {
        rx: start.rx,
        last_rv: start.rv,
        taken: start.rv,
        ended: false,
    };
    let feed = Arc::new(feed);
    let live = futures::stream::unfold(live, move |live| {
        let feed = feed.clone();
        async move { next_line(&feed, live).await }
    });
    let live = live.inspect(move |_| {
        sent.fetch_add(1, Ordering::Relaxed);
    });
    let stream = backlog_stream
        .chain(live)
        .take_until(tokio::time::sleep(asked.timeout));
    stream_response(stream)
}

/// A streamed JSON answer of watch lines.
fn stream_response(
    stream: impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Where a watch starts, taken under one lock so no commit falls between
/// the backlog and the live events.
struct Start {
    backlog: Vec<Rendered>,
    rx: broadcast::Receiver<Event>,
    /// The store's resourceVersion when the backlog was taken.
    rv: u64,
    /// `since` is older than the event log: the backlog is the one ERROR
    /// saying so.
    expired: bool,
}

/// Subscribes to the live events and takes the backlog: the current
/// objects (`since` `None`), or the logged events after `since`.
fn start(feed: &Feed, since: Option<u64>) -> Start {
    let mut s = lock(&feed.shared);
    let rx = s.events.subscribe(&feed.collection);
    let rv = s.store.resource_version();
    let scope = feed.scope.as_deref();
    let (backlog, expired) = match since {
        None => (
            s.store
                .list(&feed.collection, scope)
                .iter()
                .filter(|o| (feed.matches)(o))
                .map(|o| ("ADDED", s.at_version(&feed.t, o), rv))
                .collect(),
            false,
        ),
        Some(since) => match s.store.events_since(&feed.collection, scope, since) {
            Ok(events) => (
                events
                    .iter()
                    .filter_map(|e| render(&s, &feed.t, e, &feed.matches))
                    .collect(),
                false,
            ),
            Err(gone) => {
                let status = ApiError::gone(format!(
                    "too old resource version: {since} ({})",
                    gone.oldest
                ))
                .to_status();
                (vec![("ERROR", status, since)], true)
            }
        },
    };
    Start {
        backlog,
        rx,
        rv,
        expired,
    }
}

/// The backlog's watch lines, and whether they end the watch: an expired
/// version's ERROR goes out as it is; a failed conversion is one ERROR
/// line instead of the backlog.
async fn backlog_lines(feed: &Feed, backlog: Vec<Rendered>, expired: bool) -> (Vec<Bytes>, bool) {
    if expired {
        let lines = backlog
            .iter()
            .map(|(kind, o, _)| watch_line(kind, o))
            .collect();
        return (lines, true);
    }
    match lines(&feed.shared, &feed.t, backlog, feed.view).await {
        Ok(lines) => (lines, false),
        Err(error) => (vec![error], true),
    }
}

/// A watch's live half as it goes from one line to the next.
struct Live {
    rx: broadcast::Receiver<Event>,
    /// The last resourceVersion sent.
    last_rv: u64,
    /// The last one taken from the channel (sent or filtered out).
    taken: u64,
    /// Whether the watch ended (after an ERROR event the client relists).
    ended: bool,
}

/// The next live line: an event that passes the filters, a bookmark
/// after 5 s without one (when asked for), or an ERROR once the watch
/// fell behind; `None` when the watch is over.
async fn next_line(feed: &Feed, mut live: Live) -> Option<(Result<Bytes, std::io::Error>, Live)> {
    if live.ended {
        return None;
    }
    loop {
        let next = if feed.bookmarks {
            tokio::time::timeout(Duration::from_secs(5), live.rx.recv())
                .await
                .ok()
        } else {
            Some(live.rx.recv().await)
        };
        match next {
            None => return Some((Ok(bookmark(feed, &live)), live)),
            Some(Ok(e)) => {
                live.taken = live.taken.max(e.rv);
                if e.rv <= live.last_rv
                    || e.collection != feed.collection
                    || feed.scope.as_deref().is_some_and(|n| n != e.namespace)
                {
                    continue;
                }
                let rendered = render(&lock(&feed.shared), &feed.t, &e, &feed.matches);
                if let Some(r) = rendered {
                    live.last_rv = e.rv;
                    return Some(
                        match lines(&feed.shared, &feed.t, vec![r], feed.view).await {
                            Ok(mut out) => (Ok(out.pop().unwrap_or_default()), live),
                            Err(error) => {
                                live.ended = true;
                                (Ok(error), live)
                            }
                        },
                    );
                }
            }
            Some(Err(broadcast::error::RecvError::Lagged(_))) => {
                let status = ApiError::gone("watch fell behind: relist").to_status();
                live.ended = true;
                return Some((Ok(watch_line("ERROR", &status)), live));
            }
            Some(Err(broadcast::error::RecvError::Closed)) => return None,
        }
    }
}

/// A BOOKMARK line at [`bookmark_version`].
fn bookmark(feed: &Feed, live: &Live) -> Bytes {
    let rv = {
        // Events are sent under the lock: an empty channel here means
        // every commit of the collection so far was taken.
        let s = lock(&feed.shared);
        bookmark_version(s.store.resource_version(), !live.rx.is_empty(), live.taken)
    };
    let mark = json!({ "kind": feed.t.kind, "apiVersion": feed.t.api_version(), "metadata": { "resourceVersion": rv.to_string() } });
    watch_line("BOOKMARK", &mark)
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
