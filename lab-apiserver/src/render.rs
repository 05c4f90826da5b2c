//! How the server's answers look: JSON responses and errors, objects as
//! themselves or as kubectl's Table rows, lists, and the label and field
//! selectors of a list or watch. Below both the routes ([`crate::http`])
//! and the watches ([`crate::watch`]), which render alike.

use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::table::{self, Format, Include};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::HashMap;

/// `body` as a JSON response with status `code`.
pub(crate) fn json_response(code: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// An error as the Status object kube-apiserver answers with.
pub(crate) fn error(e: ApiError) -> Response {
    json_response(e.code, &e.to_status())
}

/// How objects are rendered for one request: as themselves or as
/// kubectl's Table rows.
#[derive(Clone, Copy)]
pub(crate) struct View {
    format: Format,
    include: Include,
}

impl View {
    pub(crate) fn of(headers: &HeaderMap, q: &HashMap<String, String>) -> Self {
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
    pub(crate) fn one(self, t: &ResourceType, object: Value, rv: u64) -> Value {
        match self.format {
            Format::Object => object,
            Format::Table(v) => {
                table::table(t, &[object], rv, v, self.include, jiff::Timestamp::now())
            }
        }
    }

    /// A list.
    pub(crate) fn many(self, t: &ResourceType, items: Vec<Value>, rv: u64) -> Value {
        match self.format {
            Format::Object => list_body(t, rv, items),
            Format::Table(v) => {
                table::table(t, &items, rv, v, self.include, jiff::Timestamp::now())
            }
        }
    }
}

/// The label and field selectors of a list or watch request, checked
/// against what kind `t` can be selected by.
pub(crate) fn selectors(
    q: &HashMap<String, String>,
    t: &ResourceType,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
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
    fields
        .check(&t.group, &t.plural)
        .map_err(ApiError::bad_request)?;
    Ok((labels, fields))
}

/// A list of `items` of kind `t` at resource version `rv`.
pub(crate) fn list_body(t: &ResourceType, rv: u64, items: Vec<Value>) -> Value {
    json!({
        "kind": format!("{}List", t.kind),
        "apiVersion": t.api_version(),
        "metadata": { "resourceVersion": rv.to_string() },
        "items": items,
    })
}
