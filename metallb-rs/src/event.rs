//! An event to publish about an object (its type, upstream's reason and
//! message), as the deciding modules (`controller::converge`,
//! `speaker::plan`, `speaker::events`) decide it; `k8s::events` records
//! it. Pure.

/// Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something worked.
    Normal,
    /// Something the user should look at.
    Warning,
}

/// An event to publish, as decided by a pure module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// Normal or Warning.
    pub type_: EventType,
    /// Upstream's reason, e.g. `IPAllocated`.
    pub reason: String,
    /// Upstream's message text.
    pub message: String,
}

impl EventSpec {
    /// A Normal event.
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Normal,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// A Warning event.
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}
