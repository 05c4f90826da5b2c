//! `--protocol bgp` on kind: an FRR router container on the kind network
//! that peers with every node, as upstream's dev-env does, and the MetalLB
//! objects that point the speakers at it.

use serde_json::{Value, json};
use std::net::IpAddr;

/// The FRR image (pulled by Docker on a machine with registry access).
pub const IMAGE: &str = "quay.io/frrouting/frr:9.1.0";
/// Both ends use this ASN (iBGP, like upstream's dev-env).
pub const ASN: u32 = 64512;
/// The BGP pools upstream's dev-env announces: outside every docker
/// network, so they cannot collide with container addresses.
pub const POOL: [&str; 2] = ["192.168.10.0/24", "fc00:f853:ccd:e799::/124"];

/// FRR's `daemons` file: bgpd only.
pub fn daemons() -> &'static str {
    "bgpd=yes\nospfd=no\nospf6d=no\nripd=no\nripngd=no\nisisd=no\npimd=no\nldpd=no\nnhrpd=no\neigrpd=no\nbabeld=no\nsharpd=no\npbrd=no\nbfdd=no\nfabricd=no\nvrrpd=no\npathd=no\nvtysh_enable=yes\nzebra_options=\"  -A 127.0.0.1 -s 90000000\"\nbgpd_options=\"   -A 127.0.0.1\"\n"
}

/// `frr.conf`: one neighbor per node address, IPv4 and IPv6 unicast
/// activated for the neighbors of each family, every route accepted.
pub fn frr_conf(node_addresses: &[IpAddr]) -> String {
    let mut conf = format!(
        "frr defaults traditional\nhostname frr\nlog stdout informational\n!\nrouter bgp {ASN}\n no bgp ebgp-requires-policy\n no bgp default ipv4-unicast\n no bgp network import-check\n"
    );
    for a in node_addresses {
        conf.push_str(&format!(" neighbor {a} remote-as {ASN}\n"));
    }
    for (family, v6) in [("ipv4", false), ("ipv6", true)] {
        let members: Vec<_> = node_addresses
            .iter()
            .filter(|a| a.is_ipv6() == v6)
            .collect();
        if members.is_empty() {
            continue;
        }
        conf.push_str(&format!(" !\n address-family {family} unicast\n"));
        for a in members {
            conf.push_str(&format!("  neighbor {a} activate\n"));
            conf.push_str(&format!("  neighbor {a} next-hop-self\n"));
        }
        conf.push_str(" exit-address-family\n");
    }
    conf.push_str("!\nline vty\n!\n");
    conf
}

/// One BGPPeer per router address, the BGP pool and an advertisement of it.
pub fn objects(namespace: &str, router_addresses: &[IpAddr], label: (&str, &str)) -> Vec<Value> {
    let meta = |name: String| json!({ "name": name, "namespace": namespace, "labels": { label.0: label.1 } });
    let mut objects: Vec<Value> = router_addresses
        .iter()
        .map(|a| {
            let family = if a.is_ipv6() { "v6" } else { "v4" };
            json!({
                "apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
                "metadata": meta(format!("frr-{family}")),
                "spec": { "myASN": ASN, "peerASN": ASN, "peerAddress": a.to_string() },
            })
        })
        .collect();
    objects.push(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": meta("dev-env-bgp".into()),
        "spec": { "addresses": POOL },
    }));
    objects.push(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
        "metadata": meta("empty".into()),
        "spec": {},
    }));
    objects
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frr_peers_with_every_node_per_family() {
        let nodes: Vec<IpAddr> = ["172.18.0.2", "172.18.0.3", "fc00:f853:ccd:e793::2"]
            .iter()
            .map(|a| a.parse().expect("ip"))
            .collect();
        let conf = frr_conf(&nodes);
        for a in &nodes {
            assert!(
                conf.contains(&format!(" neighbor {a} remote-as 64512\n")),
                "{conf}"
            );
            assert!(
                conf.contains(&format!("  neighbor {a} activate\n")),
                "{conf}"
            );
        }
        let v4 = conf.find("address-family ipv4 unicast").expect("v4 family");
        let v6 = conf.find("address-family ipv6 unicast").expect("v6 family");
        assert!(conf[v4..v6].contains("172.18.0.3") && !conf[v4..v6].contains("fc00"));
        assert!(conf[v6..].contains("fc00:f853:ccd:e793::2"));
        assert!(!frr_conf(&nodes[..2]).contains("ipv6 unicast"));
    }

    #[test]
    fn objects_are_valid_metallb_config() {
        let routers: Vec<IpAddr> = vec![
            "172.18.0.9".parse().expect("v4"),
            "fc00::9".parse().expect("v6"),
        ];
        let objects = objects(
            "metallb-system",
            &routers,
            ("metallb-rs.dev/dev-env", "kind"),
        );
        super::super::validate(&objects).expect("valid config");
        assert_eq!(objects.iter().filter(|o| o["kind"] == "BGPPeer").count(), 2);
    }
}
