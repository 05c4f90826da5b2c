//! Duplicate list entries, rejected as upstream's `validateDuplicate` and
//! `validateLabelSelectorDuplicate` reject them: a string listed twice
//! (pool names, peers, communities as written, namespaces), two equal
//! label selectors in one list, and inside one selector a match
//! expression or an expression value listed twice. Selectors compare as
//! upstream's `String()` does: matchLabels as a map, matchExpressions in
//! order, each expression's values sorted.

use super::error::{ConfigError, ObjectRef};
use crate::api::v1beta1::LabelSelector;
use std::collections::BTreeMap;

/// Reports each entry of `list` (at `field`) that repeats an earlier one;
/// `what` names an entry in messages, e.g. `ipaddresspool`.
pub(super) fn strings(
    obj: &ObjectRef,
    field: &str,
    what: &str,
    list: Option<&Vec<String>>,
    errors: &mut Vec<ConfigError>,
) {
    let list = list.map(Vec::as_slice).unwrap_or_default();
    for (i, s) in list.iter().enumerate() {
        if let Some(first) = list[..i].iter().position(|o| o == s) {
            errors.push(ConfigError::new(
                obj,
                format!("{field}[{i}]"),
                format!(
                    "duplicate definition of {what} {s:?} (already {field}[{first}]): list it once"
                ),
            ));
        }
    }
}

/// One match expression as upstream compares them.
type Expression = (String, String, Vec<String>);

/// A selector as upstream compares them.
fn canonical(sel: &LabelSelector) -> (BTreeMap<String, String>, Vec<Expression>) {
    let labels = sel.match_labels.clone().unwrap_or_default();
    let exprs = sel
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            let mut values = e.values.clone().unwrap_or_default();
            values.sort();
            (e.key.clone(), e.operator.clone(), values)
        })
        .collect();
    (labels, exprs)
}

/// Reports repeated selectors of the list at `field`, and repeated
/// expressions or values inside each selector.
pub(super) fn selectors(
    obj: &ObjectRef,
    field: &str,
    list: Option<&Vec<LabelSelector>>,
    errors: &mut Vec<ConfigError>,
) {
    let list: Vec<_> = list.into_iter().flatten().map(canonical).collect();
    for (i, (_, exprs)) in list.iter().enumerate() {
        for (j, (key, op, values)) in exprs.iter().enumerate() {
            for (k, v) in values.iter().enumerate().skip(1) {
                if values[k - 1] == *v {
                    errors.push(ConfigError::new(
                        obj,
                        format!("{field}[{i}].matchExpressions[{j}].values"),
                        format!("duplicate definition of match expression value {v:?} in label selector: list it once"),
                    ));
                }
            }
            if let Some(first) = exprs[..j].iter().position(|e| e == &exprs[j]) {
                errors.push(ConfigError::new(
                    obj,
                    format!("{field}[{i}].matchExpressions[{j}]"),
                    format!("duplicate definition of match expression {key} {op} {values:?} (already matchExpressions[{first}]): list it once"),
                ));
            }
        }
        if let Some(first) = list[..i].iter().position(|s| s == &list[i]) {
            errors.push(ConfigError::new(
                obj,
                format!("{field}[{i}]"),
                format!("duplicate definition of label selector (equal to {field}[{first}]): list it once"),
            ));
        }
    }
}
