//! The registry of e2e suites. A suite module exposes `fn specs() -> Vec<Spec>`
//! and is listed in [`SUITES`].

use crate::spec::{Spec, Suite};

pub mod bgp;
pub mod configuration_state;
pub mod devenv;
pub mod docs;
pub mod helm;
pub mod invalid_config;
pub mod ip_assignment;
pub mod l2;
pub mod metrics;
pub mod pool_selection;
pub mod proxy;
pub mod quickstart;
pub mod webhooks;
pub mod workloads;

/// Every registered suite, in run order.
pub const SUITES: &[Suite] = &[
    devenv::specs,
    ip_assignment::specs,
    pool_selection::specs,
    l2::specs,
    proxy::specs,
    invalid_config::specs,
    configuration_state::specs,
    bgp::specs,
    webhooks::specs,
    metrics::specs,
    quickstart::specs,
    workloads::specs,
    docs::specs,
    helm::specs,
];

/// Every spec of every registered suite.
pub fn all() -> Vec<Spec> {
    SUITES.iter().flat_map(|suite| suite()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn full_names_are_unique() {
        let specs = all();
        let names: HashSet<String> = specs.iter().map(Spec::full_name).collect();
        assert_eq!(names.len(), specs.len());
    }
}
