//! `kubectl get` output: `meta.k8s.io` Table responses (asked for with
//! `Accept: application/json;as=Table;g=meta.k8s.io;v=v1`, or v1beta1).
//! Built-in kinds get kube-apiserver's printer columns ([`builtin`]);
//! custom resources the `additionalPrinterColumns` of their CRD version,
//! evaluated as kube-apiserver does ([`custom`]). Columns with a priority
//! above 0 are sent too: kubectl shows them with `-o wide` only. The
//! column descriptions are the registry's ([`crate::registry::columns`]).
//!
//! Pure: objects and the current time in, JSON out.

mod builtin;
mod custom;

use crate::registry::ResourceType;
use crate::registry::columns::Column;
use serde_json::{Value, json};

/// What a client asked for in its `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain objects and lists.
    Object,
    /// A Table at this meta.k8s.io version ("v1" or "v1beta1").
    Table(&'static str),
}

impl Format {
    /// The first representation in `accept` this server can give.
    pub fn from_accept(accept: &str) -> Self {
        for media in accept.split(',') {
            let mut parts = media.split(';').map(str::trim);
            let base = parts.next().unwrap_or_default();
            let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
            let param = |k: &str| params.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
            if !matches!(base, "application/json" | "application/*" | "*/*") {
                continue;
            }
            match (param("as"), param("g"), param("v")) {
                (None, _, _) => return Format::Object,
                (Some("Table"), Some("meta.k8s.io"), Some("v1")) => return Format::Table("v1"),
                (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => {
                    return Format::Table("v1beta1");
                }
                // Another representation (PartialObjectMetadata, ...):
                // the full object carries everything it needs.
                (Some(other), _, _) if other != "Table" => return Format::Object,
                _ => continue,
            }
        }
        Format::Object
    }
}

/// How much of each object a row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    /// None.
    None,
    /// PartialObjectMetadata (the default: kubectl reads namespaces and
    /// labels from it).
    Metadata,
    /// The whole object.
    Object,
}

impl Include {
    /// The `includeObject` query parameter.
    pub fn from_query(value: Option<&str>) -> Self {
        match value {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

/// A column as a Table's `columnDefinitions` entry.
fn definition(c: &Column) -> Value {
    json!({ "name": c.name, "type": c.kind, "format": c.format,
        "description": c.description, "priority": c.priority })
}

/// A function giving an object's cells at a time.
type Cells<'a> = Box<dyn Fn(&Value, jiff::Timestamp) -> Vec<Value> + 'a>;

/// The columns of `t` and a function giving each object's cells.
fn printer(t: &ResourceType) -> (Vec<Column>, Cells<'_>) {
    if t.custom {
        return custom::printer(&t.columns);
    }
    builtin::printer(&t.group, &t.plural)
}

/// A Table of `objects` (already served at `t`'s version).
pub fn table(
    t: &ResourceType,
    objects: &[Value],
    resource_version: u64,
    version: &str,
    include: Include,
    now: jiff::Timestamp,
) -> Value {
    let (columns, cells) = printer(t);
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({ "cells": cells(o, now) });
            match include {
                Include::None => {}
                Include::Metadata => {
                    row["object"] = json!({ "kind": "PartialObjectMetadata",
                        "apiVersion": format!("meta.k8s.io/{version}"), "metadata": o["metadata"] })
                }
                Include::Object => row["object"] = o.clone(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": { "resourceVersion": resource_version.to_string() },
        "columnDefinitions": columns.iter().map(definition).collect::<Vec<_>>(),
        "rows": rows,
    })
}

/// kube's `HumanDuration`: how `AGE` and date columns read.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of a timestamp string (RFC 3339), or `<unknown>`.
pub fn age(timestamp: &Value, now: jiff::Timestamp) -> Value {
    match timestamp
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    {
        Some(t) => json!(human_duration(now.as_second() - t.as_second())),
        None => json!("<unknown>"),
    }
}

#[cfg(test)]
mod tests;
