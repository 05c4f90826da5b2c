//! What a test is: a ginkgo-style `describe` / `it` pair with tags and a body.

use crate::Ctx;
use std::fmt;

/// One e2e test.
///
/// Its full name is `"{describe} {it}"` followed by ` [TAG]` for each tag,
/// e.g. `L2 should work for ExternalTrafficPolicy=Cluster [IPV4]`; `--focus`
/// and `--skip` match against that full name.
#[derive(Clone, Copy)]
pub struct Spec {
    /// The container, e.g. `L2` or `BGP`.
    pub describe: &'static str,
    /// What it checks, e.g. `should work for ExternalTrafficPolicy=Cluster`.
    pub it: &'static str,
    /// Tags rendered as ` [TAG]` after the name, e.g. `IPV4`, `Disruptive`.
    pub tags: &'static [&'static str],
    /// The body. It gets a fresh namespace in `ctx`; returning an error (or
    /// panicking) fails the test, returning [`crate::skip`]'s error skips it.
    pub run: fn(&Ctx) -> anyhow::Result<()>,
}

impl Spec {
    /// A spec from its parts (usable in `const` tables).
    pub const fn new(
        describe: &'static str,
        it: &'static str,
        tags: &'static [&'static str],
        run: fn(&Ctx) -> anyhow::Result<()>,
    ) -> Self {
        Self {
            describe,
            it,
            tags,
            run,
        }
    }

    /// The ginkgo-style full name: `describe it [TAG1] [TAG2]`.
    pub fn full_name(&self) -> String {
        let mut name = format!("{} {}", self.describe, self.it);
        for tag in self.tags {
            name.push_str(" [");
            name.push_str(tag);
            name.push(']');
        }
        name
    }
}

impl fmt::Debug for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spec")
            .field("full_name", &self.full_name())
            .finish_non_exhaustive()
    }
}

/// A suite: a function returning its specs (registered in [`crate::suites`]).
pub type Suite = fn() -> Vec<Spec>;

/// The error a spec returns to say "not applicable here" (e.g. an IPv6 test on
/// a v4-only cluster). The test is reported as skipped, not failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(pub String);

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "skipped: {}", self.0)
    }
}

impl std::error::Error for Skip {}

/// Returns the error that marks the running test as skipped:
/// `return Err(e2e::skip("cluster has no IPv6"))`.
pub fn skip(reason: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Skip(reason.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn pass(_: &Ctx) -> anyhow::Result<()> {
        Ok(())
    }

    #[rstest]
    #[case(&[], "L2 should work for ExternalTrafficPolicy=Cluster")]
    #[case(&["IPV4"], "L2 should work for ExternalTrafficPolicy=Cluster [IPV4]")]
    #[case(
        &["IPV4", "Disruptive"],
        "L2 should work for ExternalTrafficPolicy=Cluster [IPV4] [Disruptive]"
    )]
    fn full_name_renders_tags(#[case] tags: &'static [&'static str], #[case] want: &str) {
        let spec = Spec::new(
            "L2",
            "should work for ExternalTrafficPolicy=Cluster",
            tags,
            pass,
        );
        assert_eq!(spec.full_name(), want);
        assert!(format!("{spec:?}").contains(want));
    }

    #[test]
    fn skip_error_is_recognisable() {
        let err = skip("no IPv6");
        assert_eq!(err.downcast_ref::<Skip>(), Some(&Skip("no IPv6".into())));
        assert_eq!(err.to_string(), "skipped: no IPv6");
    }
}
