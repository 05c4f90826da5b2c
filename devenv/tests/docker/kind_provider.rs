//! The kind provider's Docker side on stand-in node containers.

use crate::harness::{
    Cleanup, container_addresses, create_test_network, engine, pause, run, start, unique,
};
use devenv::docker::AddressRange;
use devenv::image;
use std::net::IpAddr;
use testcontainers::ImageExt;

/// The kind provider's Docker side, on containers of our image standing in
/// for kind's node containers (no kind binary here): the second network
/// attached to every node (twice: idempotent), ranges chosen and kept for
/// e2e, the cluster handle reading nodes, bridges and ranges back, running
/// commands on a node, and `down` removing what dev-env added.
#[test]
fn kind_provider_networks_ranges_and_handle_on_stand_in_nodes() {
    run(async {
        use devenv::cluster::Cluster;
        use devenv::kind::{self, KindCluster, config::IpFamily};
        let Some(docker) = engine().await else { return };
        let cleanup = Cleanup::default();
        let name = unique("kt");
        /// The state directory `choose_ranges` writes, removed also on failure.
        struct StateDir(std::path::PathBuf);
        impl Drop for StateDir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let _state = StateDir(kind::cluster::state_dir(&name));
        let net = format!("{name}-kind");
        create_test_network(&docker, &cleanup, &net).await;
        cleanup.network(&kind::cluster::secondary_network(&name));
        let nodes: Vec<String> = ["control-plane", "worker", "worker2"]
            .iter()
            .map(|role| format!("{name}-{role}"))
            .collect();
        let kind_label = name.clone();
        let mut containers = Vec::new();
        for node in &nodes {
            let request = pause(&docker, node)
                .await
                .with_network(&net)
                .with_label("io.x-k8s.kind.cluster", &kind_label);
            containers.push(start(&docker, request).await);
        }
        for _ in 0..2 {
            kind::cluster::attach_secondary_network(&docker, &name, &nodes)
                .await
                .expect("second network");
        }
        let secondary = kind::cluster::secondary_network(&name);
        for node in &nodes {
            assert_eq!(
                container_addresses(&docker, node, &secondary).await.len(),
                2,
                "{node} on {secondary}"
            );
        }

        let ranges = kind::cluster::choose_ranges(&docker, &net, &name, IpFamily::Dual)
            .await
            .expect("ranges");
        println!("ranges: {ranges:?}");
        assert_eq!(ranges.dev_env.len(), 2, "one per family");
        assert_eq!(ranges.e2e.len(), 2);
        assert_eq!(
            ranges.secondary.len(),
            2,
            "docker gave the second network IPv4 too"
        );
        let parse = |r: &String| -> AddressRange { r.parse().expect("FIRST-LAST") };
        for (dev, e2e) in ranges
            .dev_env
            .iter()
            .map(parse)
            .zip(ranges.e2e.iter().map(parse))
        {
            assert_eq!(dev.len(), 16);
            assert_eq!(e2e.len(), 20);
            assert!(
                e2e.last < dev.first,
                "the dev-env pool is the top of the block"
            );
        }
        let used: Vec<IpAddr> = {
            let mut all = Vec::new();
            for node in &nodes {
                all.extend(container_addresses(&docker, node, &net).await);
                all.extend(container_addresses(&docker, node, &secondary).await);
            }
            all
        };
        for r in ranges
            .dev_env
            .iter()
            .chain(&ranges.e2e)
            .chain(&ranges.secondary)
            .map(parse)
        {
            assert!(
                !used.iter().any(|ip| r.contains(*ip)),
                "{r} holds a node address"
            );
        }

        let cluster = KindCluster::open_with(&docker, &name, &net)
            .await
            .expect("open");
        let names: Vec<String> = cluster.nodes().into_iter().map(|n| n.name).collect();
        assert_eq!(names, nodes);
        for n in cluster.nodes() {
            assert_eq!(
                n.addresses,
                container_addresses(&docker, &n.name, &net).await
            );
        }
        let pools = cluster.pool_ranges();
        assert_eq!(
            pools.v4.as_ref(),
            ranges.e2e.iter().find(|r| !r.contains(':'))
        );
        assert_eq!(
            pools.v6.as_ref(),
            ranges.e2e.iter().find(|r| r.contains(':'))
        );
        assert_eq!(
            pools.secondary_v4.as_ref(),
            ranges.secondary.iter().find(|r| !r.contains(':'))
        );
        for iface in ["eth0", "eth1"] {
            let bridge = cluster.external_interface(iface).expect("bridge");
            assert!(
                std::path::Path::new("/sys/class/net")
                    .join(&bridge)
                    .exists(),
                "{iface}: no host interface {bridge}"
            );
        }
        assert!(cluster.external_interface("eth7").is_err());
        let out = tokio::task::block_in_place(|| {
            cluster.exec_on_node(&nodes[1], &[image::BINARY_IN_IMAGE, "--version"])
        })
        .expect("docker exec");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")),
            "{out:?}"
        );

        let removed = tokio::task::spawn_blocking({
            let name = name.clone();
            move || kind::down(&name)
        })
        .await
        .expect("down thread")
        .expect("down");
        println!("down removed: {removed:?}");
        assert!(
            removed.iter().any(|r| r.contains(&secondary)),
            "{removed:?}"
        );
        assert!(
            docker.inspect_network(&secondary, None).await.is_err(),
            "{secondary} left behind"
        );
        assert!(!kind::cluster::state_dir(&name).exists());
    })
}
