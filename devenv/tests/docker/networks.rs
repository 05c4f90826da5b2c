//! Free address blocks of a Docker network with containers on it, and
//! the error for a network that is not there.

use crate::harness::{
    Cleanup, connect_at, container_addresses, create_test_network, engine, pause, run, start,
    unique,
};
use devenv::docker::{self, AddressRange, DockerError, Families};
use ipnet::IpNet;
use std::net::IpAddr;
use testcontainers::ImageExt;

#[test]
fn free_block_avoids_every_container_and_conflicts_find_latecomers() {
    run(async {
        let Some(docker) = engine().await else { return };
        let cleanup = Cleanup::default();
        let net = unique("devenv-test");
        let (v4, v6) = create_test_network(&docker, &cleanup, &net).await;
        let at = |subnet: &IpNet, offset: u128| -> IpAddr {
            match subnet.network() {
                IpAddr::V4(base) => IpAddr::V4((u32::from(base) + offset as u32).into()),
                IpAddr::V6(base) => IpAddr::V6((u128::from(base) + offset).into()),
            }
        };
        let v6_top = (1u128 << 64) - 1;

        // Two containers where Docker puts them (bottom-up), one pinned high:
        // the top blocks would hold it. The pinned one starts on the default
        // bridge and joins the test network at its address.
        let mut containers = Vec::new();
        let mut names = Vec::new();
        for i in 1..=2 {
            let name = format!("{net}-c{i}");
            containers.push(start(&docker, pause(&docker, &name).await.with_network(&net)).await);
            names.push(name);
        }
        let pinned = (at(&v4, 250), at(&v6, v6_top - 7));
        let name = format!("{net}-pinned");
        containers.push(start(&docker, pause(&docker, &name).await).await);
        connect_at(&docker, &name, &net, pinned.0, pinned.1).await;
        names.push(name);

        let network = docker::inspect(&docker, &net)
            .await
            .expect("inspect test network");
        let ranges = docker::free_block(&network, Families::Dual, docker::DEFAULT_BLOCK)
            .expect("blocks fit");
        println!(
            "{net}: {v4} {v6} -> {}",
            ranges
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert_eq!(
            ranges,
            [
                AddressRange {
                    first: at(&v4, 234),
                    last: at(&v4, 249)
                },
                AddressRange {
                    first: at(&v6, v6_top - 23),
                    last: at(&v6, v6_top - 8)
                },
            ]
        );

        let mut taken = vec![at(&v4, 0), at(&v4, 1), at(&v4, 255), at(&v6, 0), at(&v6, 1)];
        for name in &names {
            let addresses = container_addresses(&docker, name, &net).await;
            assert_eq!(addresses.len(), 2, "{name}: {addresses:?}");
            taken.extend(addresses);
        }
        assert!(taken.contains(&pinned.0) && taken.contains(&pinned.1));
        for address in &taken {
            for range in &ranges {
                assert!(!range.contains(*address), "{range} holds {address}");
            }
        }
        assert_eq!(docker::conflicts(&ranges, &network), []);

        // A container started afterwards inside the blocks is reported.
        let late = (at(&v4, 240), at(&v6, v6_top - 10));
        let late_name = format!("{net}-late");
        let _late = start(&docker, pause(&docker, &late_name).await).await;
        connect_at(&docker, &late_name, &net, late.0, late.1).await;
        let network = docker::inspect(&docker, &net)
            .await
            .expect("inspect test network");
        assert_eq!(
            docker::conflicts(&ranges, &network),
            [(late_name.clone(), late.0), (late_name, late.1)]
        );
    })
}

#[test]
fn a_missing_network_says_what_to_do() {
    run(async {
        let Some(docker) = engine().await else { return };
        let name = unique("devenv-test-missing");
        let err = docker::inspect(&docker, &name)
            .await
            .expect_err("no such network");
        assert!(
            matches!(err, DockerError::NetworkNotFound { .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "docker network {name} not found: is the kind cluster up? (set KIND_EXPERIMENTAL_DOCKER_NETWORK for another network)"
            )
        );
    })
}
