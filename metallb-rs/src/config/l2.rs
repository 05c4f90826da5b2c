//! L2Advertisement -> [`L2Advertisement`]: resolved pools, node and service
//! selectors, interfaces and weighted node preferences.

use super::error::{ConfigError, ConfigWarning, ObjectRef};
use super::selector::Selector;
use crate::api::v1beta1;
use std::collections::{BTreeMap, BTreeSet};

/// A validated layer 2 advertisement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L2Advertisement {
    /// The object's name.
    pub name: String,
    /// Names of the pools it applies to.
    pub pools: BTreeSet<String>,
    /// Nodes allowed to announce (empty: all).
    pub node_selectors: Vec<Selector>,
    /// Interfaces to announce from (empty: all eligible).
    pub interfaces: Vec<String>,
    /// Services it applies to (empty: all).
    pub service_selectors: Vec<Selector>,
    /// `(weight, selector)` node preferences.
    pub preferred_node_selectors: Vec<(i32, Selector)>,
}

/// Linux interface names: 1-15 bytes, no `/`, no whitespace.
pub(crate) fn check_interface(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 15
        || name.contains('/')
        || name.chars().any(char::is_whitespace)
    {
        Err(format!(
            "invalid interface name {name:?}: Linux names are 1-15 characters without '/' or spaces"
        ))
    } else {
        Ok(())
    }
}

/// Builds an [`L2Advertisement`], pushing every problem into `errors`.
pub fn build(
    ad: &v1beta1::L2Advertisement,
    namespace: &str,
    pool_labels: &BTreeMap<String, BTreeMap<String, String>>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<ConfigWarning>,
) -> Option<L2Advertisement> {
    let name = ad.metadata.name.clone().unwrap_or_default();
    let obj = ObjectRef::new("L2Advertisement", namespace, &name);
    let before = errors.len();
    let spec = &ad.spec;
    let pools = super::select_pools(
        &obj,
        spec.ip_address_pools.as_ref(),
        spec.ip_address_pool_selectors.as_ref(),
        pool_labels,
        errors,
        warnings,
    );
    let node_selectors = super::selectors(
        &obj,
        "spec.nodeSelectors",
        spec.node_selectors.as_ref(),
        errors,
    );
    let service_selectors = super::selectors(
        &obj,
        "spec.serviceSelectors",
        spec.service_selectors.as_ref(),
        errors,
    );
    let interfaces: Vec<String> = spec.interfaces.clone().unwrap_or_default();
    for (i, iface) in interfaces.iter().enumerate() {
        if let Err(e) = check_interface(iface) {
            errors.push(ConfigError::new(&obj, format!("spec.interfaces[{i}]"), e));
        }
    }
    let mut preferred = Vec::new();
    for (i, p) in spec.preferred_node_selectors.iter().flatten().enumerate() {
        let field = format!("spec.preferredNodeSelectors[{i}]");
        if !(1..=100).contains(&p.weight) {
            errors.push(ConfigError::new(
                &obj,
                format!("{field}.weight"),
                format!("weight {} is outside 1-100", p.weight),
            ));
        }
        match Selector::parse(&p.preference) {
            Ok(s) => preferred.push((p.weight, s)),
            Err(errs) => errors.extend(
                errs.into_iter()
                    .map(|(f, m)| ConfigError::new(&obj, format!("{field}.preference.{f}"), m)),
            ),
        }
    }
    (errors.len() == before).then_some(L2Advertisement {
        name,
        pools,
        node_selectors,
        interfaces,
        service_selectors,
        preferred_node_selectors: preferred,
    })
}
