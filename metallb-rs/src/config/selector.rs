//! Label selectors: parsed and validated once, then matched against label
//! maps without allocation. Semantics of metav1.LabelSelector: matchLabels
//! and matchExpressions are ANDed; an empty selector matches everything.

use crate::api::v1beta1::{LabelSelector, MatchExpression, NodeSelector};
use std::collections::BTreeMap;

/// A validated label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Selector {
    /// The selector that matches every object.
    pub fn everything() -> Self {
        Self {
            requirements: Vec::new(),
        }
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }

    /// Parses a metav1.LabelSelector. Errors are `(relative field, message)`.
    pub fn parse(selector: &LabelSelector) -> Result<Self, Vec<(String, String)>> {
        let exprs: Vec<(String, String, Vec<String>)> = selector
            .match_expressions
            .iter()
            .flatten()
            .map(|e| {
                (
                    e.key.clone(),
                    e.operator.clone(),
                    e.values.clone().unwrap_or_default(),
                )
            })
            .collect();
        build(selector.match_labels.as_ref(), &exprs)
    }

    /// Parses BGPPeer v1beta1's own node selector type.
    pub fn parse_v1beta1(selector: &NodeSelector) -> Result<Self, Vec<(String, String)>> {
        let exprs: Vec<(String, String, Vec<String>)> = selector
            .match_expressions
            .iter()
            .flatten()
            .map(
                |MatchExpression {
                     key,
                     operator,
                     values,
                 }| (key.clone(), operator.clone(), values.clone()),
            )
            .collect();
        build(selector.match_labels.as_ref(), &exprs)
    }
}

fn build(
    labels: Option<&BTreeMap<String, String>>,
    exprs: &[(String, String, Vec<String>)],
) -> Result<Selector, Vec<(String, String)>> {
    let mut errors = Vec::new();
    let mut requirements = Vec::new();
    for (k, v) in labels.into_iter().flatten() {
        let field = format!("matchLabels[{k:?}]");
        if let Err(e) = validate_key(k) {
            errors.push((field.clone(), e));
        }
        if let Err(e) = validate_value(v) {
            errors.push((field, e));
        }
        requirements.push(Requirement::Equals(k.clone(), v.clone()));
    }
    for (i, (key, op, values)) in exprs.iter().enumerate() {
        let field = format!("matchExpressions[{i}]");
        if let Err(e) = validate_key(key) {
            errors.push((format!("{field}.key"), e));
        }
        for v in values {
            if let Err(e) = validate_value(v) {
                errors.push((format!("{field}.values"), e));
            }
        }
        let req = match op.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                errors.push((
                    format!("{field}.values"),
                    format!("operator {op} needs at least one value"),
                ));
                continue;
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                errors.push((
                    format!("{field}.values"),
                    format!("operator {op} takes no values"),
                ));
                continue;
            }
            "In" => Requirement::In(key.clone(), values.clone()),
            "NotIn" => Requirement::NotIn(key.clone(), values.clone()),
            "Exists" => Requirement::Exists(key.clone()),
            "DoesNotExist" => Requirement::DoesNotExist(key.clone()),
            other => {
                errors.push((
                    format!("{field}.operator"),
                    format!("unknown operator {other:?}: use In, NotIn, Exists or DoesNotExist"),
                ));
                continue;
            }
        };
        requirements.push(req);
    }
    if errors.is_empty() {
        Ok(Selector { requirements })
    } else {
        Err(errors)
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
}

/// A label name part or value: at most 63 characters, alphanumerics plus
/// `-_.`, starting and ending alphanumeric.
fn validate_name(s: &str, what: &str) -> Result<(), String> {
    let ok = s.len() <= 63
        && s.chars().all(is_name_char)
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid label {what} {s:?}: at most 63 characters of [A-Za-z0-9-_.], starting and ending with a letter or digit"
        ))
    }
}

fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let dns_ok = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !dns_ok {
            return Err(format!(
                "invalid label key {key:?}: the prefix must be a lowercase DNS subdomain"
            ));
        }
    }
    validate_name(name, "key")
}

fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    validate_name(value, "value")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use rstest::rstest;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelector {
        LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: Some(values.iter().map(|v| (*v).into()).collect()),
            }]),
            match_labels: None,
        }
    }

    #[rstest]
    #[case::in_hit(expr("zone", "In", &["a", "b"]), &[("zone", "a")], true)]
    #[case::in_miss(expr("zone", "In", &["a"]), &[("zone", "c")], false)]
    #[case::in_absent(expr("zone", "In", &["a"]), &[], false)]
    #[case::notin_absent(expr("zone", "NotIn", &["a"]), &[], true)]
    #[case::notin_hit(expr("zone", "NotIn", &["a"]), &[("zone", "a")], false)]
    #[case::exists(expr("zone", "Exists", &[]), &[("zone", "")], true)]
    #[case::does_not_exist(expr("zone", "DoesNotExist", &[]), &[("zone", "x")], false)]
    #[case::empty_matches_all(LabelSelector::default(), &[("any", "thing")], true)]
    fn matching(#[case] sel: LabelSelector, #[case] l: &[(&str, &str)], #[case] expected: bool) {
        assert_eq!(
            Selector::parse(&sel).expect("valid").matches(&labels(l)),
            expected
        );
    }

    #[rstest]
    #[case::bad_operator(expr("zone", "Equals", &["a"]), "matchExpressions[0].operator")]
    #[case::in_without_values(expr("zone", "In", &[]), "matchExpressions[0].values")]
    #[case::exists_with_values(expr("zone", "Exists", &["a"]), "matchExpressions[0].values")]
    #[case::bad_key(expr("-zone", "Exists", &[]), "matchExpressions[0].key")]
    #[case::bad_prefix(expr("Example.com/zone", "Exists", &[]), "matchExpressions[0].key")]
    #[case::bad_value(expr("zone", "In", &["a b"]), "matchExpressions[0].values")]
    fn invalid(#[case] sel: LabelSelector, #[case] field: &str) {
        let errors = Selector::parse(&sel).expect_err("invalid");
        assert_eq!(errors[0].0, field, "{errors:?}");
    }
}
