//! The BGP session password (TCP MD5 key): a type that never shows it
//! (Debug and Display print `[redacted]`) and wipes its bytes when
//! dropped, so it does not end up in logs, panic messages or freed
//! memory.

use zeroize::Zeroizing;

/// A BGP peer's password, from `password` or `passwordSecret`.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(Zeroizing<String>);

impl Password {
    /// Wraps `secret`.
    pub fn new(secret: String) -> Self {
        Self(Zeroizing::new(secret))
    }

    /// The password itself, for the one place that needs it (the socket
    /// option).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// It is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&str> for Password {
    fn from(s: &str) -> Self {
        Self::new(s.to_owned())
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::fmt::Display for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_printed() {
        let p = Password::from("s3cret");
        assert_eq!(format!("{p:?}"), "[redacted]");
        assert_eq!(format!("{p}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(p.clone())), "Some([redacted])");
        assert_eq!(p.expose(), "s3cret");
        assert_eq!(p.len(), 6);
    }
}
