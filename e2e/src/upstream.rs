//! Upstream's e2e specs (MetalLB's `e2etest`, the ones its native-mode CI
//! runs: names without `FRR`, `FRR-MODE`, `FRRK8S-MODE`, `BFD`, `VRF` or
//! `DUALSTACK`) and which of ours checks the same setup and assertion, for
//! `cargo xtask e2e --list --upstream-map`. Upstream's names are ginkgo's
//! full texts (containers, table and entry joined by spaces); ours carry
//! the same words, so `--focus` with upstream's words finds them.
//!
//! So far this table holds `bgptests/bgp.go`; the other files follow as
//! their specs are ported. Pure: [`render`] checks every name of ours
//! against the registered specs, so the table cannot point at a spec that
//! was renamed or removed.

use crate::Spec;
use anyhow::{Result, bail};

/// How far one of ours covers an upstream spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Ours checks the same setup and assertion.
    Same(&'static str),
    /// Ours checks part of it.
    Partly(&'static str),
    /// Nothing of ours checks it yet.
    Missing,
}

/// One upstream spec and ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ported {
    /// Upstream's full name.
    pub upstream: &'static str,
    /// Ours.
    pub ours: Coverage,
}

const fn same(upstream: &'static str, ours: &'static str) -> Ported {
    Ported {
        upstream,
        ours: Coverage::Same(ours),
    }
}

const fn partly(upstream: &'static str, ours: &'static str) -> Ported {
    Ported {
        upstream,
        ours: Coverage::Partly(ours),
    }
}

const fn missing(upstream: &'static str) -> Ported {
    Ported {
        upstream,
        ours: Coverage::Missing,
    }
}

/// Upstream's native-mode specs, in upstream's order.
pub const UPSTREAM: &[Ported] = &[
    same(
        "BGP A service of protocol load balancer should work with ETP=cluster IPV4",
        "BGP A service of protocol load balancer should work with ETP=cluster [IPV4]",
    ),
    same(
        "BGP A service of protocol load balancer should work with ETP=cluster IPV6",
        "BGP A service of protocol load balancer should work with ETP=cluster [IPV6]",
    ),
    missing(
        "BGP A service of protocol load balancer should work with ETP=cluster IPV4 - request IPv4 via custom annotation",
    ),
    missing(
        "BGP Service with ETP=cluster IPV4 - should not be announced from a node with a NetworkUnavailable condition",
    ),
    same(
        "BGP A service of protocol load balancer should work with ETP=local IPV4",
        "BGP A service of protocol load balancer should work with ETP=local [IPV4]",
    ),
    same(
        "BGP A service of protocol load balancer should work with ETP=local IPV6",
        "BGP A service of protocol load balancer should work with ETP=local [IPV6]",
    ),
    missing("BGP A load balancer service should work with overlapping IPs IPV4"),
    missing("BGP A load balancer service should work with overlapping IPs IPV6"),
    missing(
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes IPV4 - test AddressPool defined by address range",
    ),
    missing(
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes IPV4 - test AddressPool defined by network prefix",
    ),
    missing(
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes IPV6 - test AddressPool defined by address range",
    ),
    missing(
        "BGP validate different AddressPools for type=Loadbalancer set different AddressPools ranges modes IPV6 - test AddressPool defined by network prefix",
    ),
    missing(
        "BGP configure peers with routerid and validate external containers are paired with nodes IPV4",
    ),
    missing(
        "BGP configure peers with routerid and validate external containers are paired with nodes IPV6",
    ),
    same(
        "BGP validate external containers are paired with nodes IPV4 with Secret Ref set for BGPPeer CR",
        "BGP validate external containers are paired with nodes with Secret Ref set for BGPPeer CR [IPV4]",
    ),
    same(
        "BGP validate external containers are paired with nodes IPV6 with Secret Ref set for BGPPeer CR",
        "BGP validate external containers are paired with nodes with Secret Ref set for BGPPeer CR [IPV6]",
    ),
    partly(
        "BGP ServiceBGPStatus IPV4",
        "BGP A service of protocol load balancer should work with ETP=cluster [IPV4]",
    ),
    partly(
        "BGP ServiceBGPStatus IPV6",
        "BGP A service of protocol load balancer should work with ETP=cluster [IPV6]",
    ),
    missing(
        "BGP validate configuration changes should work after subsequent configuration updates IPV4",
    ),
    missing(
        "BGP validate configuration changes should work after subsequent configuration updates IPV6",
    ),
    partly(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV4 - community and localpref",
        "BGP should carry communities, large communities and localPref [IPV4]",
    ),
    partly(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV4 - localpref",
        "BGP should carry communities, large communities and localPref [IPV4]",
    ),
    partly(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV4 - community",
        "BGP should carry communities, large communities and localPref [IPV4]",
    ),
    partly(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV4 - community from CRD",
        "BGP should carry communities, large communities and localPref [IPV4]",
    ),
    missing(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV4 - ip pool selector",
    ),
    missing(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV6 - community and localpref",
    ),
    missing(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV6 - community",
    ),
    missing(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV6 - community from CRD",
    ),
    missing(
        "BGP validate configuration changes configure bgp advertisement and verify it gets propagated IPV6 - localpref",
    ),
    missing(
        "BGP validate configuration changes IPV4 - overlapping bgp advertisements union communities for the same prefix",
    ),
    missing(
        "BGP BGP advertisement updates of communities and localpref and aggregation length IPV4",
    ),
    missing(
        "BGP BGP advertisement updates of communities and localpref and aggregation length IPV6",
    ),
    missing("BGP A service of protocol load balancer should work with two protocols IPV4"),
    missing("BGP A service of protocol load balancer should work with two protocols IPV6"),
];

/// The mapping as lines `upstream -> ours` (`(partly)` after a partial
/// one, `-` where nothing of ours checks it), then a count; fails when a
/// name of ours is not among `specs`.
pub fn render(table: &[Ported], specs: &[Spec]) -> Result<Vec<String>> {
    let ours: std::collections::BTreeSet<String> = specs.iter().map(Spec::full_name).collect();
    let mut lines = Vec::new();
    let (mut same, mut partial) = (0, 0);
    for p in table {
        let line = match p.ours {
            Coverage::Same(name) | Coverage::Partly(name) if !ours.contains(name) => {
                bail!(
                    "the upstream map names {name:?} for {:?}, which is no spec of ours",
                    p.upstream
                )
            }
            Coverage::Same(name) => {
                same += 1;
                format!("{} -> {name}", p.upstream)
            }
            Coverage::Partly(name) => {
                partial += 1;
                format!("{} -> {name} (partly)", p.upstream)
            }
            Coverage::Missing => format!("{} -> -", p.upstream),
        };
        lines.push(line);
    }
    lines.push(format!(
        "{same} of {} upstream specs mapped, {partial} partly (the table holds bgptests/bgp.go so far)",
        table.len()
    ));
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_the_map_names_exists() {
        let lines = render(UPSTREAM, &crate::suites::all()).expect("the map names real specs");
        assert_eq!(lines.len(), UPSTREAM.len() + 1);
        assert!(lines.iter().any(|l| l
            == "BGP A service of protocol load balancer should work with ETP=cluster IPV4 -> BGP A service of protocol load balancer should work with ETP=cluster [IPV4]"));
    }

    #[test]
    fn upstream_names_appear_once_and_skip_what_native_ci_skips() {
        let mut seen = std::collections::BTreeSet::new();
        for p in UPSTREAM {
            assert!(seen.insert(p.upstream), "{} twice", p.upstream);
            for skipped in ["FRR", "BFD", "VRF", "DUALSTACK"] {
                assert!(!p.upstream.contains(skipped), "{}", p.upstream);
            }
        }
    }

    #[test]
    fn a_renamed_spec_of_ours_is_an_error() {
        fn pass(_: &crate::Ctx) -> Result<()> {
            Ok(())
        }
        let table = [same("BGP x IPV4", "BGP x [IPV4]")];
        let specs = [Spec::new("BGP", "y", &["IPV4"], pass)];
        let err = render(&table, &specs).expect_err("no such spec");
        assert!(err.to_string().contains("BGP x [IPV4]"), "{err}");
        let specs = [Spec::new("BGP", "x", &["IPV4"], pass)];
        assert_eq!(
            render(&table, &specs).expect("maps"),
            [
                "BGP x IPV4 -> BGP x [IPV4]",
                "1 of 1 upstream specs mapped, 0 partly (the table holds bgptests/bgp.go so far)"
            ]
        );
    }
}
