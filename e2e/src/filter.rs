//! `--focus` / `--skip`: which specs run, with ginkgo's semantics.

use anyhow::{Context, Result};
use regex::Regex;

/// Selects specs by full name: a spec runs when `focus` (if given) matches its
/// full name and `skip` (if given) does not. Both are unanchored regexes.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only names this matches are selected.
    pub focus: Option<Regex>,
    /// Names this matches are never selected.
    pub skip: Option<Regex>,
}

impl Filter {
    /// Compiles the `--focus` and `--skip` patterns; an invalid one is an
    /// error naming the flag and the pattern.
    pub fn new(focus: Option<&str>, skip: Option<&str>) -> Result<Self> {
        Ok(Self {
            focus: compile("--focus", focus)?,
            skip: compile("--skip", skip)?,
        })
    }

    /// Whether the spec with this full name is selected.
    pub fn matches(&self, full_name: &str) -> bool {
        self.focus.as_ref().is_none_or(|re| re.is_match(full_name))
            && !self.skip.as_ref().is_some_and(|re| re.is_match(full_name))
    }
}

fn compile(flag: &str, pattern: Option<&str>) -> Result<Option<Regex>> {
    pattern
        .map(|p| Regex::new(p).with_context(|| format!("invalid {flag} regex {p:?}")))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const L2_V4: &str = "L2 should work for ExternalTrafficPolicy=Cluster [IPV4]";
    const L2_V6: &str = "L2 should work for ExternalTrafficPolicy=Local [IPV6]";
    const BGP_V4: &str = "BGP should announce the service [IPV4]";

    #[rstest]
    #[case(None, None, L2_V4, true)]
    #[case(Some("L2"), None, L2_V4, true)]
    #[case(Some("L2"), None, BGP_V4, false)]
    #[case(Some(r"\[IPV4\]"), None, BGP_V4, true)]
    #[case(Some(r"\[IPV4\]"), None, L2_V6, false)]
    #[case(None, Some("BGP"), BGP_V4, false)]
    #[case(None, Some("BGP"), L2_V4, true)]
    #[case(Some("L2"), Some(r"\[IPV6\]"), L2_V4, true)]
    #[case(Some("L2"), Some(r"\[IPV6\]"), L2_V6, false)]
    #[case(Some("^L2 .*Local"), None, L2_V6, true)]
    #[case(Some("^should"), None, L2_V4, false)]
    #[case(Some("L2|BGP"), Some("Local"), BGP_V4, true)]
    #[case(Some("L2|BGP"), Some("Local"), L2_V6, false)]
    fn focus_and_skip(
        #[case] focus: Option<&str>,
        #[case] skip: Option<&str>,
        #[case] name: &str,
        #[case] selected: bool,
    ) {
        let filter = Filter::new(focus, skip).expect("valid patterns");
        assert_eq!(filter.matches(name), selected, "{focus:?} {skip:?} {name}");
    }

    #[rstest]
    #[case(Some("L2("), None, "--focus", "L2(")]
    #[case(None, Some("[IPV4"), "--skip", "[IPV4")]
    fn invalid_regex_names_flag_and_pattern(
        #[case] focus: Option<&str>,
        #[case] skip: Option<&str>,
        #[case] flag: &str,
        #[case] pattern: &str,
    ) {
        let err = Filter::new(focus, skip).expect_err("invalid pattern");
        let msg = format!("{err:#}");
        assert!(msg.contains(flag), "{msg}");
        assert!(msg.contains(&format!("{pattern:?}")), "{msg}");
    }
}
