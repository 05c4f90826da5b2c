//! A request's body as the handlers read it: JSON, with the protobuf
//! bodies real clients send without a JSON fallback decoded to JSON first
//! ([`crate::proto`]), and a PATCH's kind from its Content-Type.

use crate::apply;
use crate::error::ApiError;
use crate::patch::PatchKind;
use crate::proto;
use crate::registry::ResourceType;
use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;

/// The request's Content-Type ("" when absent).
pub(super) fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// `body` as JSON bytes. A protobuf body is decoded when `decode` says
/// this request's kind is one the server decodes (a failure is 415);
/// any other non-empty protobuf or CBOR body is 415, on which client-go
/// retries the request as JSON.
pub(super) fn json_body<'a>(
    body: &'a Bytes,
    ct: &str,
    decode: bool,
) -> Result<Cow<'a, Bytes>, ApiError> {
    if decode && ct.contains("protobuf") {
        return proto::decode(body)
            .and_then(|v| serde_json::to_vec(&v).map_err(|e| e.to_string()))
            .map(|json| Cow::Owned(Bytes::from(json)))
            .map_err(ApiError::unsupported_media_type);
    }
    if !body.is_empty() && (ct.contains("protobuf") || ct.contains("cbor")) {
        return Err(ApiError::unsupported_media_type(format!(
            "{ct} is not supported by the lab API server: send JSON"
        )));
    }
    Ok(Cow::Borrowed(body))
}

pub(super) fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

/// A PATCH's kind, by its Content-Type.
pub(super) fn patch_kind(headers: &HeaderMap) -> Result<PatchKind, ApiError> {
    let ct = content_type(headers);
    PatchKind::from_content_type(ct).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format: {ct:?}"
        ))
    })
}

/// A PATCH's kind (by Content-Type) and body, its options checked: an
/// apply's configuration is YAML or JSON, and must name the URL's object.
pub(super) fn patch_body(
    headers: &HeaderMap,
    body: &Bytes,
    q: &HashMap<String, String>,
    (t, name): (&ResourceType, &str),
) -> Result<(Value, PatchKind), ApiError> {
    let kind = patch_kind(headers)?;
    let is_apply = kind == PatchKind::Apply;
    let option = |k: &str| q.get(k).map(String::as_str);
    apply::check_options(is_apply, option("fieldManager"), option("force"))?;
    let body = if is_apply {
        apply::config(body, &t.api_version(), &t.kind, name)?
    } else {
        parse_body(body)?
    };
    Ok((body, kind))
}
