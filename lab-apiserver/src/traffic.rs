//! Who asks the API server for what: requests per user, verb and
//! resource, and
//! watch events delivered per user, served on `/metrics` in Prometheus'
//! text format under kube-apiserver's names (`apiserver_request_total`,
//! `apiserver_watch_events_total`) with a `user` label of our own, so a
//! benchmark can tell one speaker's load from another's.

use axum::http::Method;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Requests and watch events per user.
#[derive(Debug, Default)]
pub struct Traffic {
    requests: BTreeMap<(String, &'static str, String), u64>,
    watch_events: BTreeMap<String, Arc<AtomicU64>>,
}

/// The Kubernetes verb of a request: `name` whether it names one object,
/// `watch` whether it asks for a watch.
pub fn verb(method: &Method, name: bool, watch: bool) -> &'static str {
    match (method.as_str(), name, watch) {
        ("GET", _, true) => "watch",
        ("GET", true, _) => "get",
        ("GET", false, _) => "list",
        ("POST", _, _) => "create",
        ("PUT", _, _) => "update",
        ("PATCH", _, _) => "patch",
        ("DELETE", true, _) => "delete",
        ("DELETE", false, _) => "deletecollection",
        _ => "other",
    }
}

impl Traffic {
    /// Counts one request of `user` on `resource` (a plural, with its
    /// subresource after a `/`; empty for non-resource paths).
    pub fn request(&mut self, user: &str, verb: &'static str, resource: &str) {
        *self
            .requests
            .entry((user.to_owned(), verb, resource.to_owned()))
            .or_default() += 1;
    }

    /// The counter a watch of `user` adds each event it sends to (shared:
    /// watches stream outside the state lock).
    pub fn watch_counter(&mut self, user: &str) -> Arc<AtomicU64> {
        self.watch_events
            .entry(user.to_owned())
            .or_default()
            .clone()
    }

    /// Both counters in Prometheus' text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP apiserver_request_total Requests by user, verb and resource.\n");
        out.push_str("# TYPE apiserver_request_total counter\n");
        for ((user, verb, resource), n) in &self.requests {
            let _ = writeln!(
                out,
                "apiserver_request_total{{user=\"{}\",verb=\"{verb}\",resource=\"{}\"}} {n}",
                escape(user),
                escape(resource)
            );
        }
        out.push_str("# HELP apiserver_watch_events_total Watch events sent, by user.\n");
        out.push_str("# TYPE apiserver_watch_events_total counter\n");
        for (user, n) in &self.watch_events {
            let _ = writeln!(
                out,
                "apiserver_watch_events_total{{user=\"{}\"}} {}",
                escape(user),
                n.load(Ordering::Relaxed)
            );
        }
        out
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_as_kubernetes_names_them() {
        let rows = [
            (Method::GET, true, false, "get"),
            (Method::GET, false, false, "list"),
            (Method::GET, false, true, "watch"),
            (Method::POST, false, false, "create"),
            (Method::PUT, true, false, "update"),
            (Method::PATCH, true, false, "patch"),
            (Method::DELETE, true, false, "delete"),
            (Method::DELETE, false, false, "deletecollection"),
        ];
        for (m, name, watch, expected) in rows {
            assert_eq!(
                verb(&m, name, watch),
                expected,
                "{m} name={name} watch={watch}"
            );
        }
    }

    #[test]
    fn counts_render_per_user() {
        let mut t = Traffic::default();
        t.request(
            "system:serviceaccount:metallb-system:speaker",
            "update",
            "leases",
        );
        t.request(
            "system:serviceaccount:metallb-system:speaker",
            "update",
            "leases",
        );
        t.request(
            "system:serviceaccount:metallb-system:speaker",
            "patch",
            "services/status",
        );
        t.request("admin", "list", "nodes");
        t.watch_counter("a\"b").fetch_add(3, Ordering::Relaxed);
        t.watch_counter("a\"b").fetch_add(1, Ordering::Relaxed);
        let text = t.render();
        assert!(text.contains("apiserver_request_total{user=\"system:serviceaccount:metallb-system:speaker\",verb=\"update\",resource=\"leases\"} 2\n"), "{text}");
        assert!(text.contains("apiserver_request_total{user=\"system:serviceaccount:metallb-system:speaker\",verb=\"patch\",resource=\"services/status\"} 1\n"), "{text}");
        assert!(
            text.contains(
                "apiserver_request_total{user=\"admin\",verb=\"list\",resource=\"nodes\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("apiserver_watch_events_total{user=\"a\\\"b\"} 4\n"),
            "{text}"
        );
    }
}
