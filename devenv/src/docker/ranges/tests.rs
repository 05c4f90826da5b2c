//! `free_block` and `conflicts` over recorded `docker network inspect`
//! output (tests/fixtures/docker, see its README), plus an exhaustive check
//! against a brute-force oracle.

use super::*;
use bollard::models::{EndpointResource, Ipam, IpamConfig};
use rstest::rstest;
use std::collections::HashMap;

/// A recorded network, deserialized the way `docker network inspect`
/// prints it: an array of one.
fn fixture(name: &str) -> NetworkInspect {
    let path = format!(
        "{}/tests/fixtures/docker/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut networks: Vec<NetworkInspect> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(networks.len(), 1, "{path}: one network per fixture");
    networks.remove(0)
}

/// The blocks as the pool would list them, or the error's message.
fn blocks(
    network: &NetworkInspect,
    families: Families,
    per_family: u32,
) -> Result<Vec<String>, String> {
    free_block(network, families, per_family)
        .map(|ranges| ranges.iter().map(ToString::to_string).collect())
        .map_err(|e| e.to_string())
}

/// Every address the recording says is taken: endpoints and reported
/// gateways.
fn recorded_addresses(network: &NetworkInspect) -> Vec<IpAddr> {
    let gateways = network
        .ipam
        .iter()
        .flat_map(|i| i.config.iter().flatten())
        .filter_map(|c| c.gateway.as_deref()?.parse().ok());
    let endpoints = network
        .containers
        .iter()
        .flatten()
        .flat_map(|(_, e)| [e.ipv4_address.clone(), e.ipv6_address.clone()])
        .flatten()
        .filter_map(|a| a.parse::<IpNet>().ok().map(|n| n.addr()));
    gateways.chain(endpoints).collect()
}

#[rstest]
// Upstream sorted ["10.250.1.10/25", "10.250.1.100/25", "10.250.1.120/25",
// "10.250.1.4/25"] as strings, took .4 as the highest and offered .9-.19,
// over .10. The top run (.121-.126) is too short; the next one fits.
#[case::addresses_that_sort_wrongly_as_strings(
    "strings-as-text", Families::Ipv4, 16, Ok(vec!["10.250.1.104-10.250.1.119"])
)]
#[case::short_block_fits_the_top_run("strings-as-text", Families::Ipv4, 6, Ok(vec!["10.250.1.121-10.250.1.126"]))]
#[case::ipv4_only_network("ipv4-only", Families::Ipv4, 16, Ok(vec!["10.250.2.239-10.250.2.254"]))]
#[case::ipv6_requested_on_ipv4_only_network(
    "ipv4-only",
    Families::Ipv6,
    16,
    Err("network fx-v4 has no IPv6 subnet: recreate it with IPv6 or use --ip-family ipv4")
)]
#[case::dual_requested_on_ipv4_only_network(
    "ipv4-only",
    Families::Dual,
    16,
    Err("network fx-v4 has no IPv6 subnet: recreate it with IPv6 or use --ip-family ipv4")
)]
// .254 and ...:fffe are taken: both blocks move below them (the last
// address of the /64 stays free: the engine cannot hand it out).
#[case::dual_with_used_addresses_at_the_top(
    "dual",
    Families::Dual,
    16,
    Ok(vec![
        "10.250.3.238-10.250.3.253",
        "fd00:250:3:0:ffff:ffff:ffff:ffee-fd00:250:3:0:ffff:ffff:ffff:fffd",
    ])
)]
#[case::ipv6_only_request_on_dual(
    "dual",
    Families::Ipv6,
    2,
    Ok(vec!["fd00:250:3:0:ffff:ffff:ffff:fffc-fd00:250:3:0:ffff:ffff:ffff:fffd"])
)]
#[case::gateway_at_the_top("gateway-at-top", Families::Ipv4, 16, Ok(vec!["10.250.4.238-10.250.4.253"]))]
#[case::subnet_too_small(
    "small-subnet",
    Families::Ipv4,
    16,
    Err(
        "network fx-small: subnet 10.250.7.0/29 has only 4 free contiguous addresses, need 16: \
         use a bigger subnet or ask for fewer addresses"
    )
)]
#[case::small_subnet_small_block("small-subnet", Families::Ipv4, 4, Ok(vec!["10.250.7.3-10.250.7.6"]))]
// The /28 has 10 free (.5-.14): the second subnet takes a 16-block...
#[case::second_subnet_when_the_first_is_too_small(
    "multiple-ipv4-subnets",
    Families::Ipv4,
    16,
    Ok(vec!["10.250.9.238-10.250.9.253"])
)]
// ...and the first, in IPAM order, wins when the block fits.
#[case::first_subnet_when_it_fits("multiple-ipv4-subnets", Families::Ipv4, 8, Ok(vec!["10.250.8.7-10.250.8.14"]))]
#[case::no_subnet_fits(
    "multiple-ipv4-subnets",
    Families::Ipv4,
    300,
    Err(
        "network fx-multi: no subnet has 300 free contiguous addresses (10.250.8.0/28 has 10, \
         10.250.9.0/24 has 252): use a bigger subnet or ask for fewer addresses"
    )
)]
#[case::default_bridge_without_reported_gateway(
    "default-bridge",
    Families::Ipv4,
    16,
    Ok(vec!["172.17.255.239-172.17.255.254"])
)]
#[case::network_made_like_kind_makes_it(
    "kind-like",
    Families::Dual,
    16,
    Ok(vec![
        "172.19.255.239-172.19.255.254",
        "fc00:f853:ccd:e793:ffff:ffff:ffff:fff0-fc00:f853:ccd:e793:ffff:ffff:ffff:ffff",
    ])
)]
#[case::empty_block(
    "ipv4-only",
    Families::Ipv4,
    0,
    Err("asked for 0 addresses per family: ask for at least 1")
)]
fn free_blocks_of_recorded_networks(
    #[case] fixture_name: &str,
    #[case] families: Families,
    #[case] per_family: u32,
    #[case] want: Result<Vec<&str>, &str>,
) {
    let network = fixture(fixture_name);
    let got = blocks(&network, families, per_family);
    let want = want
        .map(|v| v.into_iter().map(String::from).collect::<Vec<_>>())
        .map_err(String::from);
    assert_eq!(got, want);
    // Whatever the case, a chosen block holds no recorded address.
    if let Ok(ranges) = free_block(&network, families, per_family) {
        for range in &ranges {
            assert_eq!(range.len(), u128::from(per_family), "{range}");
            for ip in recorded_addresses(&network) {
                assert!(!range.contains(ip), "{range} holds {ip}");
            }
        }
        assert!(conflicts(&ranges, &network).is_empty());
    }
}

#[test]
fn empty_ipv6_address_strings_are_no_addresses() {
    let network = fixture("ipv4-only");
    let empty = network
        .containers
        .iter()
        .flatten()
        .filter(|(_, e)| e.ipv6_address.as_deref() == Some(""))
        .count();
    assert_eq!(empty, 3, "the recording has the engine's empty strings");
    assert!(free_block(&network, Families::Ipv4, DEFAULT_BLOCK).is_ok());
}

#[test]
fn containers_started_inside_the_block_afterwards_are_conflicts() {
    let before = fixture("dual");
    let ranges = free_block(&before, Families::Dual, DEFAULT_BLOCK).expect("fits");
    assert_eq!(conflicts(&ranges, &before), []);

    let after = fixture("dual-container-added");
    assert_eq!(
        conflicts(&ranges, &after),
        [
            (
                "fx-dual-late".to_owned(),
                "10.250.3.245".parse::<IpAddr>().expect("ip")
            ),
            (
                "fx-dual-late".to_owned(),
                "fd00:250:3::ffff:ffff:ffff:fff0".parse().expect("ip")
            ),
        ]
    );
    // Choosing again steps below the newcomer.
    assert_eq!(
        blocks(&after, Families::Dual, DEFAULT_BLOCK),
        Ok(vec![
            "10.250.3.229-10.250.3.244".to_owned(),
            "fd00:250:3:0:ffff:ffff:ffff:ffe0-fd00:250:3:0:ffff:ffff:ffff:ffef".to_owned(),
        ])
    );
}

#[test]
fn conflicts_ignore_addresses_outside_the_ranges_and_other_families() {
    let network = fixture("dual-container-added");
    let v4_only = [AddressRange {
        first: "10.250.3.240".parse().expect("ip"),
        last: "10.250.3.250".parse().expect("ip"),
    }];
    assert_eq!(
        conflicts(&v4_only, &network),
        [(
            "fx-dual-late".to_owned(),
            "10.250.3.245".parse::<IpAddr>().expect("ip")
        )]
    );
    assert_eq!(conflicts(&[], &network), []);
}

#[test]
fn unparsable_strings_name_the_network_and_the_string() {
    let mut network = fixture("ipv4-only");
    let endpoint = network
        .containers
        .as_mut()
        .and_then(|c| {
            c.values_mut()
                .find(|e| e.name.as_deref() == Some("fx-v4-1"))
        })
        .expect("fx-v4-1 in the recording");
    endpoint.ipv4_address = Some("10.250.2.300/24".into());
    assert_eq!(
        blocks(&network, Families::Ipv4, 16),
        Err("network fx-v4: container fx-v4-1 IPv4Address \"10.250.2.300/24\" is not an IP address: \
             check `docker network inspect fx-v4`"
            .into())
    );

    let mut network = fixture("ipv4-only");
    if let Some(config) = network.ipam.as_mut().and_then(|i| i.config.as_mut()) {
        config[0].subnet = Some("10.250.2.0/33".into());
    }
    assert_eq!(
        blocks(&network, Families::Ipv4, 16),
        Err("network fx-v4: IPAM subnet \"10.250.2.0/33\" is not a CIDR: check `docker network inspect fx-v4`".into())
    );

    let mut network = fixture("gateway-at-top");
    if let Some(config) = network.ipam.as_mut().and_then(|i| i.config.as_mut()) {
        config[0].gateway = Some("gateway".into());
    }
    assert_eq!(
        blocks(&network, Families::Ipv4, 16),
        Err(
            "network fx-gwtop: gateway of subnet 10.250.4.0/24 \"gateway\" is not an IP address: \
             check `docker network inspect fx-gwtop`"
                .into()
        )
    );
}

#[test]
fn a_network_without_subnets_has_no_family() {
    // `docker network inspect host` reports `"Config": []`.
    let network = NetworkInspect {
        name: Some("host".into()),
        ipam: Some(Ipam {
            config: Some(vec![]),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        blocks(&network, Families::Ipv4, 1),
        Err("network host has no IPv4 subnet: recreate it with an IPv4 subnet or use --ip-family ipv6".into())
    );
}

#[test]
fn a_custom_network_is_named_in_errors() {
    let network = fixture("kind-like");
    assert_eq!(
        network.name.as_deref(),
        Some(crate::docker::network_name_from(Some("kind-like")).as_str())
    );
    assert_eq!(
        blocks(&network, Families::Ipv4, 70000),
        Err("network kind-like: subnet 172.19.0.0/16 has only 65530 free contiguous addresses, need 70000: \
             use a bigger subnet or ask for fewer addresses"
            .into())
    );
}

#[test]
fn address_ranges_print_as_pools_list_them() {
    let range = AddressRange {
        first: "10.0.0.240".parse().expect("ip"),
        last: "10.0.0.255".parse().expect("ip"),
    };
    assert_eq!(range.to_string(), "10.0.0.240-10.0.0.255");
    assert_eq!(range.len(), 16);
    assert!(range.contains("10.0.0.255".parse().expect("ip")));
    assert!(!range.contains("10.0.1.0".parse().expect("ip")));
    assert!(
        !range.contains("::a00:f0".parse().expect("ip")),
        "families never mix"
    );

    let reversed = AddressRange {
        first: range.last,
        last: range.first,
    };
    assert!(reversed.is_empty());
    let mixed = AddressRange {
        first: range.first,
        last: "::1".parse().expect("ip"),
    };
    assert_eq!(mixed.len(), 0);
    assert!(!mixed.contains(range.first));

    let all_v6 = AddressRange {
        first: "::".parse().expect("ip"),
        last: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
            .parse()
            .expect("ip"),
    };
    assert_eq!(all_v6.len(), u128::MAX, "saturates");
}

#[rstest]
#[case("ipv4", Ok(Families::Ipv4))]
#[case("ipv6", Ok(Families::Ipv6))]
#[case("dual", Ok(Families::Dual))]
#[case("both", Err("unknown IP family \"both\": use ipv4, ipv6 or dual".to_owned()))]
fn families_parse_as_kind_spells_them(#[case] text: &str, #[case] want: Result<Families, String>) {
    assert_eq!(text.parse::<Families>(), want);
    if let Ok(families) = want {
        assert_eq!(families.to_string(), text);
    }
}

#[test]
fn the_pool_lists_the_ranges_and_passes_metallb_validation() {
    let ranges = free_block(&fixture("kind-like"), Families::Dual, DEFAULT_BLOCK).expect("fits");
    let pool = address_pool("dev-env", "metallb-system", &ranges);
    assert_eq!(pool.metadata.name.as_deref(), Some("dev-env"));
    assert_eq!(pool.metadata.namespace.as_deref(), Some("metallb-system"));
    assert_eq!(
        serde_json::to_value(&pool.spec).expect("serializes"),
        serde_json::json!({
            "addresses": [
                "172.19.255.239-172.19.255.254",
                "fc00:f853:ccd:e793:ffff:ffff:ffff:fff0-fc00:f853:ccd:e793:ffff:ffff:ffff:ffff",
            ]
        })
    );
    let resources = metallb_rs::config::Resources {
        pools: vec![pool],
        ..Default::default()
    };
    let options = metallb_rs::config::Options {
        namespace: "metallb-system".into(),
    };
    if let Err(errors) = metallb_rs::config::Config::build(&resources, &options) {
        panic!("{errors:?}");
    }
}

/// A network with one subnet, its gateway and endpoints at `used`.
fn synthetic(subnet: &str, gateway: &str, used: &[IpAddr]) -> NetworkInspect {
    let containers: HashMap<String, EndpointResource> = used
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            let (v4, v6) = match ip {
                IpAddr::V4(_) => (format!("{ip}/28"), String::new()),
                IpAddr::V6(_) => (String::new(), format!("{ip}/124")),
            };
            (
                format!("c{i}"),
                EndpointResource {
                    name: Some(format!("c{i}")),
                    ipv4_address: Some(v4),
                    ipv6_address: Some(v6),
                    ..Default::default()
                },
            )
        })
        .collect();
    NetworkInspect {
        name: Some("synthetic".into()),
        ipam: Some(Ipam {
            config: Some(vec![IpamConfig {
                subnet: Some(subnet.into()),
                gateway: Some(gateway.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        containers: Some(containers),
        ..Default::default()
    }
}

/// The highest run of `need` addresses in `lo..=hi` with none taken, or
/// the longest free run: the answer by brute force.
fn oracle(lo: u128, hi: u128, taken: &BTreeSet<u128>, need: u128) -> Result<(u128, u128), u128> {
    let free = |a: u128| !taken.contains(&a);
    for last in (lo..=hi).rev() {
        if last + 1 >= lo + need && (last + 1 - need..=last).all(free) {
            return Ok((last + 1 - need, last));
        }
    }
    let (mut longest, mut run) = (0, 0);
    for a in lo..=hi {
        run = if free(a) { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    Err(longest)
}

/// Every subset of used hosts of a /28 (gateway .1, hosts .2-.14) and of a
/// /124 (gateway ::1, hosts ::2-::f), every block size: the block is free,
/// the highest possible, and the error's count is the longest free run.
#[rstest]
#[case::ipv4("10.9.8.0/28", "10.9.8.1", Families::Ipv4, 14)]
#[case::ipv6("fd00::/124", "fd00::1", Families::Ipv6, 15)]
fn exhaustive_against_brute_force(
    #[case] subnet: &str,
    #[case] gateway: &str,
    #[case] families: Families,
    #[case] highest_host: u128,
) {
    let net: IpNet = subnet.parse().expect("cidr");
    let base = to_u128(net.network());
    let family = Family::of(net.addr());
    let hosts: Vec<u128> = (2..=highest_host).collect();
    for mask in 0u32..(1 << hosts.len()) {
        let taken: BTreeSet<u128> = hosts
            .iter()
            .enumerate()
            .filter(|(bit, _)| mask & (1 << bit) != 0)
            .map(|(_, &h)| h)
            .chain([1]) // the gateway
            .collect();
        let used: Vec<IpAddr> = taken
            .iter()
            .filter(|&&h| h != 1)
            .map(|&h| from_u128(family, base + h))
            .collect();
        let network = synthetic(subnet, gateway, &used);
        // The whole path once per subset...
        let want = oracle(1, highest_host, &taken, 4)
            .map(|(first, last)| vec![range(family, base + first, base + last)])
            .map_err(|longest| RangeError::TooSmall {
                network: "synthetic".into(),
                subnets: vec![(net, longest)],
                need: 4,
            });
        assert_eq!(
            free_block(&network, families, 4),
            want,
            "{subnet} taken {taken:?}"
        );
        // ...and the search for every block size.
        let parsed = subnets(&network).expect("parses");
        let used_now = used_addresses(&network).expect("parses");
        for need in 1..=highest_host + 1 {
            let want = oracle(1, highest_host, &taken, need)
                .map(|(first, last)| range(family, base + first, base + last));
            assert_eq!(
                top_block(&parsed[0], &used_now, need),
                want,
                "{subnet} taken {taken:?} need {need}"
            );
        }
    }
}

#[test]
fn ranges_read_back_and_split_at_the_top() {
    let r: AddressRange = "10.0.0.1-10.0.0.36".parse().expect("range");
    assert_eq!(r.len(), 36);
    assert_eq!(r.to_string().parse::<AddressRange>(), Ok(r));
    let (top, rest) = r.split_top(16).expect("36 > 16");
    assert_eq!(top.to_string(), "10.0.0.21-10.0.0.36");
    assert_eq!(rest.to_string(), "10.0.0.1-10.0.0.20");
    assert_eq!(r.split_top(36), None);
    let v6: AddressRange = "fc00::ffdc-fc00::ffff".parse().expect("v6");
    let (top, rest) = v6.split_top(16).expect("split");
    assert_eq!(
        (top.to_string(), rest.to_string()),
        (
            "fc00::fff0-fc00::ffff".into(),
            "fc00::ffdc-fc00::ffef".into()
        )
    );
    for bad in [
        "10.0.0.1",
        "10.0.0.9-10.0.0.1",
        "10.0.0.1-fc00::1",
        "x-10.0.0.1",
    ] {
        assert!(bad.parse::<AddressRange>().is_err(), "{bad}");
    }
}
}
