//! One API call: the timeout every call made from a component's loop
//! gets, and the classification of what went wrong, which decides how
//! the work is retried ([`super::queue`]).
//!
//! The client's own timeouts are minutes long (connect and write) or
//! absent (read); a call lost on a connection that went away (a node whose link went down, an API server
//! that stopped answering) must not hold a loop that safety depends on
//! for that long. [`API_CALL_TIMEOUT`] is well under the lease timings
//! that decide who counts as running.

use std::time::Duration;

/// How long one API call may take before it counts as a transient
/// failure. Under the controller's margin between stepping down and
/// anyone taking over (`lease_duration - renew_deadline`, 5 s; a test in
/// `leader` fails if this grows past it).
pub const API_CALL_TIMEOUT: Duration = Duration::from_secs(4);

/// Why an API call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The API server answered with an error, or the request failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// No answer within [`API_CALL_TIMEOUT`].
    #[error("no answer within {API_CALL_TIMEOUT:?}")]
    Timeout,
}

/// Awaits `request` for at most [`API_CALL_TIMEOUT`].
pub async fn call<T>(
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(API_CALL_TIMEOUT, request).await {
        Ok(r) => r.map_err(CallError::Api),
        Err(_) => Err(CallError::Timeout),
    }
}

/// What kind of failure an API error is; it picks the retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Server trouble, throttling, the network, a timeout: try again with
    /// backoff.
    Transient,
    /// The object changed since we read it: the watch brings the new
    /// version; try again with backoff (it may already have arrived).
    Conflict,
    /// The object is gone: the watch shows the deletion, which queues the
    /// work again; no retry of its own.
    NotFound,
    /// Not allowed (RBAC): nothing on the object will change that; try
    /// again slowly in case the permissions are fixed.
    Forbidden,
    /// The request itself is wrong: the same request fails the same way;
    /// wait for the object to change.
    Invalid,
}

/// Classifies a failed call.
pub fn classify(e: &CallError) -> ErrorClass {
    match e {
        CallError::Timeout => ErrorClass::Transient,
        CallError::Api(kube::Error::Api(status)) => match status.code {
            409 => ErrorClass::Conflict,
            404 | 410 => ErrorClass::NotFound,
            401 | 403 => ErrorClass::Forbidden,
            400 | 405 | 413 | 415 | 422 => ErrorClass::Invalid,
            _ => ErrorClass::Transient,
        },
        // A body we could not build or read fails again the same way.
        CallError::Api(kube::Error::SerdeError(_) | kube::Error::BuildRequest(_)) => {
            ErrorClass::Invalid
        }
        // Connection, TLS, service and stream errors.
        CallError::Api(_) => ErrorClass::Transient,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn api(code: u16) -> CallError {
        CallError::Api(kube::Error::Api(Box::new(
            kube::core::Status::failure("x", "y").with_code(code),
        )))
    }

    #[rstest]
    #[case::timeout(CallError::Timeout, ErrorClass::Transient)]
    #[case::server_error(api(500), ErrorClass::Transient)]
    #[case::unavailable(api(503), ErrorClass::Transient)]
    #[case::throttled(api(429), ErrorClass::Transient)]
    #[case::conflict(api(409), ErrorClass::Conflict)]
    #[case::not_found(api(404), ErrorClass::NotFound)]
    #[case::gone(api(410), ErrorClass::NotFound)]
    #[case::forbidden(api(403), ErrorClass::Forbidden)]
    #[case::unauthorized(api(401), ErrorClass::Forbidden)]
    #[case::invalid(api(422), ErrorClass::Invalid)]
    #[case::bad_request(api(400), ErrorClass::Invalid)]
    #[case::unreadable(
        CallError::Api(kube::Error::SerdeError(serde_json::Error::io(std::io::Error::other(
            "x"
        )))),
        ErrorClass::Invalid
    )]
    #[case::no_connection(
        CallError::Api(kube::Error::Service(Box::new(std::io::Error::other("reset")))),
        ErrorClass::Transient
    )]
    fn classification(#[case] error: CallError, #[case] class: ErrorClass) {
        assert_eq!(classify(&error), class, "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_never_answers_times_out() {
        let r = call(std::future::pending::<Result<(), kube::Error>>()).await;
        assert!(matches!(r, Err(CallError::Timeout)));
    }
}
