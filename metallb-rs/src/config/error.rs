//! Configuration errors: each names the object (kind, namespace, name), the
//! field path inside it, and what is wrong.

use std::fmt;

/// The object an error is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectRef {
    /// Kind, e.g. `IPAddressPool`.
    pub kind: String,
    /// Namespace (empty when the object had none).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectRef {
    /// A reference to `kind` `namespace/name`.
    pub fn new(kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind.to_lowercase();
        if self.namespace.is_empty() {
            write!(f, "{kind} {:?}", self.name)
        } else {
            write!(f, "{kind} \"{}/{}\"", self.namespace, self.name)
        }
    }
}

/// One problem in one field of one object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConfigError {
    /// The object.
    pub object: ObjectRef,
    /// Dotted field path, e.g. `spec.addresses[1]` (empty for the whole object).
    pub field: String,
    /// What is wrong, lowercase, and what to do where that is not obvious.
    pub message: String,
}

impl ConfigError {
    /// An error about `field` of `object`.
    pub fn new(object: &ObjectRef, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            object: object.clone(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.object, self.message)
        } else {
            write!(f, "{}: {}: {}", self.object, self.field, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// A problem that leaves the configuration valid: upstream ignores what
/// it names (say, an advertisement listing a pool that does not exist),
/// and so do the components, but they report it. Same shape as an error.
pub type ConfigWarning = ConfigError;

/// Every error found in one configuration, sorted by object and field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
