//! API errors rendered as `metav1.Status`, the way clients expect them.

use serde_json::{Value, json};
use std::borrow::Cow;

/// An API error with its HTTP code and Kubernetes reason.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `reason` (NotFound, AlreadyExists, Conflict, Invalid, ...; a
    /// denying webhook's own, empty for some of kube-apiserver's 500s).
    pub reason: Cow<'static, str>,
    /// Human message.
    pub message: String,
    /// `details.causes` for 422s: (field, message).
    pub causes: Vec<(String, String)>,
    /// `details` name, group and kind (the resource, for 403s); boxed so
    /// every `Result<_, ApiError>` stays small.
    pub details: Option<Box<(String, String, String)>>,
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: Cow::Borrowed(reason),
            message: message.into(),
            causes: Vec::new(),
            details: None,
        }
    }
    /// 401.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }
    /// 403.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 404.
    pub fn not_found(what: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{what} {name:?} not found"))
    }
    /// 409 on create.
    pub fn already_exists(what: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{what} {name:?} already exists"),
        )
    }
    /// 409 on a stale resourceVersion.
    pub fn conflict(what: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {what} {name:?}: the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
    }
    /// 409 for a server-side apply whose fields other managers own: a
    /// `FieldManagerConflict` cause per field.
    pub fn apply_conflict(message: String, causes: Vec<(String, String)>) -> Self {
        Self {
            causes,
            ..Self::new(409, "Conflict", message)
        }
    }
    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }
    /// 405.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }
    /// 410 (watch too old).
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }
    /// 500 `InternalError`: `Internal error occurred: <message>`, the
    /// message also the one cause (kube-apiserver's `NewInternalError`).
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            causes: vec![(String::new(), message.clone())],
            ..Self::new(
                500,
                "InternalError",
                format!("Internal error occurred: {message}"),
            )
        }
    }
    /// An error with the code, reason and message someone else chose (a
    /// denying webhook's status).
    pub fn custom(code: u16, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: Cow::Owned(reason.into()),
            ..Self::new(code, "", message)
        }
    }
    /// 415.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }
    /// 422 with a message only.
    pub fn invalid_message(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }
    /// 422 with field causes.
    pub fn invalid(kind: &str, name: &str, causes: Vec<(String, String)>) -> Self {
        let summary: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        Self {
            code: 422,
            reason: Cow::Borrowed("Invalid"),
            message: format!("{kind} {name:?} is invalid: {}", summary.join(", ")),
            causes,
            details: None,
        }
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        // Only apply conflicts carry causes on a 409.
        let cause_reason = if self.code == 409 {
            "FieldManagerConflict"
        } else {
            "FieldValueInvalid"
        };
        let causes: Vec<Value> = self
            .causes
            .iter()
            .map(|(f, m)| {
                if f.is_empty() {
                    json!({ "message": m })
                } else {
                    json!({ "reason": cause_reason, "field": f, "message": m })
                }
            })
            .collect();
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": match self.details.as_deref() {
                Some((name, group, kind)) => json!({ "name": name, "group": group, "kind": kind }),
                None => json!({ "causes": causes }),
            },
            "code": self.code,
        })
    }
}
