//! `--protocol bgp` on kind: an FRR router container on the kind network
//! that peers with every node, as upstream's dev-env does. The config and
//! the MetalLB objects are [`crate::frr`]'s, shared with the lab; what is
//! kind's own is the image and FRR's `daemons` file.

pub use crate::frr::{ASN, POOL, objects};
use std::net::IpAddr;

/// The FRR image (pulled by Docker on a machine with registry access).
pub const IMAGE: &str = "quay.io/frrouting/frr:9.1.0";
/// The FRR container of kind cluster `cluster`.
pub fn container(cluster: &str) -> String {
    format!("{cluster}-frr")
}

/// FRR's `daemons` file: bgpd only (the image's init starts zebra anyway).
pub fn daemons() -> &'static str {
    "bgpd=yes\nospfd=no\nospf6d=no\nripd=no\nripngd=no\nisisd=no\npimd=no\nldpd=no\nnhrpd=no\neigrpd=no\nbabeld=no\nsharpd=no\npbrd=no\nbfdd=no\nfabricd=no\nvrrpd=no\npathd=no\nvtysh_enable=yes\nzebra_options=\"  -A 127.0.0.1 -s 90000000\"\nbgpd_options=\"   -A 127.0.0.1\"\n"
}

/// The container's router: every node address a neighbor. No router-id:
/// the container's address is known only once it runs, and FRR takes it.
pub fn router_config(node_addresses: &[IpAddr]) -> crate::frr::RouterConfig {
    crate::frr::RouterConfig::new("frr", None, node_addresses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_container_peers_with_every_node_and_picks_its_own_router_id() {
        let nodes: Vec<IpAddr> = ["172.18.0.2", "172.18.0.3", "fc00:f853:ccd:e793::2"]
            .iter()
            .map(|a| a.parse().expect("ip"))
            .collect();
        let conf = crate::frr::frr_conf(&router_config(&nodes)).expect("renders");
        assert!(!conf.contains("router-id"), "{conf}");
        assert!(conf.contains("hostname frr\n"), "{conf}");
        for a in &nodes {
            assert!(
                conf.contains(&format!("  neighbor {a} activate\n")),
                "{conf}"
            );
        }
    }

    #[test]
    fn objects_are_valid_metallb_config() {
        let routers: Vec<IpAddr> = vec![
            "172.18.0.9".parse().expect("v4"),
            "fc00::9".parse().expect("v6"),
        ];
        let objects = objects(
            "metallb-system",
            &[crate::frr::BgpRouter::single("frr", &routers)],
            ("metallb-rs.dev/dev-env", "kind"),
        );
        super::super::validate(&objects).expect("valid config");
        assert_eq!(objects.iter().filter(|o| o["kind"] == "BGPPeer").count(), 2);
    }
}
