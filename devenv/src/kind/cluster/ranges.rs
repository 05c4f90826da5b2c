//! The address ranges a kind dev-env takes from its docker networks: a
//! block from the top of each subnet, split into the dev-env's own pool
//! and the suites' ranges, kept in the state directory for e2e runs, and
//! the dev-env's layer2 objects over them. Pure.

use super::{DEV_ENV_LABEL, NAMESPACE};
use crate::docker::{self, AddressRange, Families};
use crate::kind::config::IpFamily;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Addresses of the dev-env's own pool, per family.
pub(super) const DEV_ENV_BLOCK: u32 = 16;
/// Addresses below it that the e2e suites use for their pools.
pub(super) const E2E_BLOCK: u32 = 20;

/// Address ranges chosen at dev-env time, kept for e2e runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ranges {
    /// The dev-env's own pool (`dev-env-l2`), one range per family.
    pub dev_env: Vec<String>,
    /// Free ranges for the suites' pools on the kind network.
    pub e2e: Vec<String>,
    /// Free ranges on the second network.
    pub secondary: Vec<String>,
}

/// Splits the block taken from the top of a subnet: the top
/// [`DEV_ENV_BLOCK`] addresses for the dev-env pool, the rest for e2e.
pub fn split_block(block: &AddressRange) -> Result<(AddressRange, AddressRange)> {
    let want = u128::from(DEV_ENV_BLOCK + E2E_BLOCK);
    if block.len() < want {
        bail!("{block}: need {want} addresses to split");
    }
    block
        .split_top(u128::from(DEV_ENV_BLOCK))
        .with_context(|| format!("{block}: cannot split off {DEV_ENV_BLOCK} addresses"))
}

pub(super) fn families(f: IpFamily) -> Families {
    match f {
        IpFamily::Ipv4 => Families::Ipv4,
        IpFamily::Ipv6 => Families::Ipv6,
        IpFamily::Dual => Families::Dual,
    }
}

/// The dev-env layer2 objects: pool `dev-env-l2` over `ranges` and an
/// L2Advertisement of every pool, labelled as dev-env's.
pub fn layer2_objects(cluster: &str, ranges: &[AddressRange]) -> Result<Vec<Value>> {
    let mut pool = serde_json::to_value(docker::address_pool("dev-env-l2", NAMESPACE, ranges))?;
    pool["metadata"]["labels"] = json!({ DEV_ENV_LABEL: cluster });
    Ok(vec![
        pool,
        json!({
            "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
            "metadata": { "name": "empty", "namespace": NAMESPACE, "labels": { DEV_ENV_LABEL: cluster } },
            "spec": {},
        }),
    ])
}

pub(super) fn parse_ranges(ranges: &[String]) -> Result<Vec<AddressRange>> {
    ranges
        .iter()
        .map(|r| r.parse().map_err(anyhow::Error::msg))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn range(a: &str, b: &str) -> AddressRange {
        AddressRange {
            first: a.parse().expect("first"),
            last: b.parse().expect("last"),
        }
    }

    #[rstest]
    #[case::v4(
        range("172.18.255.219", "172.18.255.254"),
        "172.18.255.239-172.18.255.254",
        "172.18.255.219-172.18.255.238"
    )]
    #[case::v6(
        range("fc00:f853:ccd:e793::ffdc", "fc00:f853:ccd:e793::ffff"),
        "fc00:f853:ccd:e793::fff0-fc00:f853:ccd:e793::ffff",
        "fc00:f853:ccd:e793::ffdc-fc00:f853:ccd:e793::ffef"
    )]
    fn the_top_of_the_block_is_dev_envs_the_rest_e2es(
        #[case] block: AddressRange,
        #[case] dev: &str,
        #[case] e2e: &str,
    ) {
        let (d, e) = split_block(&block).expect("split");
        assert_eq!((d.to_string().as_str(), e.to_string().as_str()), (dev, e2e));
    }

    #[test]
    fn a_block_too_small_to_split_is_refused() {
        let err = split_block(&range("10.0.0.1", "10.0.0.20")).expect_err("20 < 36");
        assert!(err.to_string().contains("need 36"), "{err}");
    }

    #[test]
    fn layer2_objects_are_a_valid_config() {
        let objects = layer2_objects(
            "kind",
            &[
                range("172.18.255.239", "172.18.255.254"),
                range("fc00:f853:ccd:e793::fff0", "fc00:f853:ccd:e793::ffff"),
            ],
        )
        .expect("objects");
        crate::kind::validate(&objects).expect("valid");
        assert_eq!(objects[0]["metadata"]["labels"][DEV_ENV_LABEL], "kind");
        assert_eq!(
            objects[0]["spec"]["addresses"],
            json!([
                "172.18.255.239-172.18.255.254",
                "fc00:f853:ccd:e793::fff0-fc00:f853:ccd:e793::ffff"
            ])
        );
        let bad =
            layer2_objects("kind", &[range("172.18.255.254", "172.18.255.239")]).expect("objects");
        assert!(
            crate::kind::validate(&bad).is_err(),
            "reversed range accepted"
        );
    }

    #[test]
    fn ranges_read_back_as_typed_ranges() {
        let parsed = parse_ranges(&["10.0.0.5-10.0.0.9".into()]).expect("parse");
        assert_eq!(parsed, vec![range("10.0.0.5", "10.0.0.9")]);
        assert!(parse_ranges(&["10.0.0.5".into()]).is_err());
    }
}
