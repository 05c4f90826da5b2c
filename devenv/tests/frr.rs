//! The lab's FRR router in a two-node lab network, against throw-away
//! bgpd peers in the node namespaces (stand-ins for speakers): sessions
//! over both families (one with TCP MD5), routes with next hops and
//! attributes, ECMP kernel routes in the external namespace and traffic
//! through them, a restart, a withdrawal, a stop. Needs root and FRR.
//!
//! With `FRR_RECORD=<dir>` it also writes FRR's raw output there: that is
//! how `tests/fixtures/frr` was recorded.

mod common;

use devenv::frr::{self, AddressFamily};
use devenv::lab::cluster::{down, lab_dir};
use devenv::lab::frr::{BFDD, BGPD, LabRouter, ZEBRA, lab_router_config};
use devenv::lab::netns::{self, LabHost, Topology};
use devenv::lab::process::Processes;
use devenv::wait::eventually;
use ipnet::IpNet;
use std::collections::BTreeSet;
use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

const PASSWORD: &str = "s3cret";
/// Announced by both nodes (an anycast service address).
const VIP4: &str = "198.51.100.1";
const VIP6: &str = "2001:db8:51::1";
const WAIT: Duration = Duration::from_secs(20);

fn address(host: &LabHost, v6: bool) -> IpAddr {
    host.addresses()
        .into_iter()
        .find(|a| a.is_ipv6() == v6)
        .expect("dual-stack host")
}

fn net(s: &str) -> IpNet {
    s.parse().expect("prefix")
}

fn record(name: &str, content: &str) {
    if let Some(dir) = std::env::var_os("FRR_RECORD") {
        let dir = Path::new(&dir);
        std::fs::create_dir_all(dir).expect("record dir");
        std::fs::write(dir.join(name), content).expect("record");
    }
}

/// The router's bfdd takes the BFD commands the e2e specs run: every
/// neighbor gets a BFD session (never up: the peers run no bfdd, and the
/// BGP sessions stay), shown by `show bfd peers json` with the profile's
/// timers; turning BFD off removes every session.
fn check_bfd_commands(router: &LabRouter, peers: &[IpAddr]) {
    use devenv::frr::bfd;
    let profile = bfd::BfdProfile::new("test").with_timers(200, 4);
    let on = bfd::enable_commands(&profile, frr::ASN, peers).expect("renders");
    router.vtysh(&on).expect("BFD on");
    let sessions = eventually(WAIT, "a BFD session per neighbor", || {
        let s = bfd::parse_peers(&router.vtysh(bfd::PEERS_COMMAND)?)?;
        Ok(peers.iter().all(|p| s.contains_key(p)).then_some(s))
    })
    .expect("BFD sessions");
    for p in peers {
        let s = &sessions[p];
        assert!(!s.up() && !s.multihop, "{s:?}");
        assert_eq!(s.detect_multiplier, Some(4), "{s:?}");
    }
    router
        .vtysh(&bfd::disable_commands("test", frr::ASN, peers))
        .expect("BFD off");
    eventually(WAIT, "no BFD session left", || {
        Ok(bfd::parse_peers(&router.vtysh(bfd::PEERS_COMMAND)?)?
            .is_empty()
            .then_some(()))
    })
    .expect("BFD sessions gone");
}

/// A bgpd without zebra in node `i`'s namespace: announces the VIPs (with
/// communities, a large community and LOCAL_PREF 150) and a /32 of its own.
fn start_peer(lab_dir: &Path, node: &LabHost, i: usize, router: &LabHost, password: Option<&str>) {
    let dir = lab_dir.join(format!("peer{i}"));
    std::fs::create_dir_all(&dir).expect("peer dir");
    let (r4, r6) = (address(router, false), address(router, true));
    let password = password
        .map(|p| format!(" neighbor {r4} password {p}\n"))
        .unwrap_or_default();
    let conf = format!(
        "frr defaults traditional\nhostname peer{i}\n!\n\
         route-map tag permit 10\n set community 64512:100 no-export\n set large-community 64512:1:{i}\n set local-preference 150\nexit\n!\n\
         router bgp 64512\n bgp router-id {a4}\n no bgp default ipv4-unicast\n no bgp network import-check\n\
         \x20neighbor {r4} remote-as 64512\n neighbor {r4} timers connect 1\n{password}\
         \x20neighbor {r6} remote-as 64512\n neighbor {r6} timers connect 1\n\
         \x20address-family ipv4 unicast\n  network {VIP4}/32 route-map tag\n  network 198.51.100.{host}/32\n  neighbor {r4} activate\n exit-address-family\n\
         \x20address-family ipv6 unicast\n  network {VIP6}/128 route-map tag\n  neighbor {r6} activate\n exit-address-family\nexit\n",
        a4 = address(node, false),
        host = 10 + i,
    );
    std::fs::write(dir.join("frr.conf"), conf).expect("peer config");
    let bgpd = devenv::lab::frr::binaries().expect("frr").bgpd;
    let d = dir.display();
    let argv: Vec<String> = [
        "ip".into(),
        "netns".into(),
        "exec".into(),
        node.namespace.clone(),
        bgpd.display().to_string(),
        // No zebra: nothing to install, nothing to look up.
        "-Z".into(),
        "-S".into(),
        "-f".into(),
        format!("{d}/frr.conf"),
        "-i".into(),
        format!("{d}/bgpd.pid"),
        "--vty_socket".into(),
        d.to_string(),
        "-P".into(),
        "0".into(),
        "--log".into(),
        "stdout".into(),
    ]
    .to_vec();
    Processes::new(lab_dir)
        .ensure(&format!("peer{i}"), &argv, &[])
        .expect("peer starts");
}

fn gateways(routes: &[frr::KernelRoute], dst: &IpNet) -> BTreeSet<IpAddr> {
    routes
        .iter()
        .filter(|r| r.destination == *dst)
        .flat_map(|r| r.gateways.iter().copied())
        .collect()
}

/// Connects to `vip:8080` from the external namespace, with a listener on
/// that address in each node namespace, until every node got a connection
/// (ECMP hashes the ports: new connections take either path); returns how
/// many connections that took.
fn connect_through_nodes(lab: &netns::Lab, vip: IpAddr) -> usize {
    let mut listeners = Vec::new();
    for node in &lab.nodes {
        let listener = devenv::lab::enter::in_netns(&node.namespace, || {
            TcpListener::bind(SocketAddr::new(vip, 8080))
        })
        .expect("setns")
        .expect("listen on the VIP");
        listener.set_nonblocking(true).expect("nonblocking");
        listeners.push(listener);
    }
    let mut reached = BTreeSet::new();
    for attempt in 1..=40 {
        let stream = devenv::lab::enter::in_netns(&lab.external.namespace, || {
            TcpStream::connect_timeout(&SocketAddr::new(vip, 8080), Duration::from_secs(3))
        })
        .expect("setns")
        .unwrap_or_else(|e| panic!("connecting to {vip} from the external namespace: {e}"));
        drop(stream);
        let node = eventually(WAIT, "the connection accepted by a node", || {
            for (i, l) in listeners.iter().enumerate() {
                if let Ok((mut s, _)) = l.accept() {
                    let _ = s.read(&mut [0u8; 1]);
                    return Ok(Some(i));
                }
            }
            Ok(None)
        })
        .expect("accepted");
        reached.insert(node);
        if reached.len() == lab.nodes.len() {
            return attempt;
        }
    }
    panic!("40 connections to {vip} reached only nodes {reached:?}");
}

/// Whether this machine can run the router (root and FRR); otherwise
/// records why the test is skipped.
fn root_and_frr() -> bool {
    if !devenv::prereq::netns_or_skip() {
        return false;
    }
    if let Err(e) = devenv::lab::frr::binaries() {
        devenv::prereq::skip(e);
        return false;
    }
    true
}

#[test]
fn lab_router_peers_learns_installs_restarts_and_stops_needs_root_and_frr() {
    if !root_and_frr() {
        return;
    }
    let name = format!("fr{}", std::process::id() % 100_000);
    // Stops FRR and the peers (pid files), deletes the namespaces.
    let _guard = test_support::Guard::new(&name, down);
    let lab = netns::ensure(&Topology::new(&name, 1)).expect("lab network");
    let dir = lab_dir(&name);
    let router = LabRouter::new(&dir, &lab.external.namespace);
    let (n0, n1) = (&lab.nodes[0], &lab.nodes[1]);
    let config = lab_router_config(&lab)
        .with_password(address(n1, false), PASSWORD)
        .expect("n1 is a neighbor");

    router.start(&config).expect("FRR starts");
    let procs = Processes::new(&dir);
    let pids = (procs.pid(ZEBRA), procs.pid(BGPD), procs.pid(BFDD));
    router.start(&config).expect("second start");
    assert_eq!(
        (procs.pid(ZEBRA), procs.pid(BGPD), procs.pid(BFDD)),
        pids,
        "nothing restarted"
    );
    assert!(router.running());

    start_peer(&dir, n0, 0, &lab.external, None);
    start_peer(&dir, n1, 1, &lab.external, Some(PASSWORD));
    let peers: Vec<IpAddr> = lab.nodes.iter().flat_map(LabHost::addresses).collect();
    let neighbors = router
        .wait_established(&peers, WAIT)
        .expect("every session up");
    assert!(neighbors[&address(n1, false)].authentication, "TCP MD5");
    check_bfd_commands(&router, &peers);
    // bgpd's vty socket answers as vtysh does, several commands on one
    // connection, and reports errors.
    let mut vty = router.bgpd_vty().expect("vty socket");
    for _ in 0..3 {
        let direct = frr::parse_neighbors(&vty.command(frr::NEIGHBORS_COMMAND).expect("vty"))
            .expect("neighbors through the socket");
        assert_eq!(frr::states(&direct), frr::states(&neighbors));
    }
    let err = vty.command("show no-such-thing").expect_err("unknown");
    assert!(err.to_string().contains("failed (status"), "{err:#}");
    assert!(
        vty.command("show bgp summary json").is_ok(),
        "usable after an error"
    );
    assert!(!neighbors[&address(n0, false)].authentication);
    assert_eq!(
        neighbors[&address(n0, false)].remote_router_id,
        Some("172.30.0.10".parse().expect("id"))
    );

    // Both nodes' paths, their attributes, ECMP.
    let vip4 = net(&format!("{VIP4}/32"));
    let vip6 = net(&format!("{VIP6}/128"));
    // Both paths in use: one best, the other multipath (FRR marks them a
    // moment after they arrive).
    let ecmp = |paths: Option<&Vec<frr::BgpPath>>| {
        paths.is_some_and(|p| {
            p.len() == 2
                && p.iter().filter(|p| p.best).count() == 1
                && p.iter().all(|p| p.best || p.multipath)
        })
    };
    let routes4 = eventually(WAIT, "both paths of the IPv4 VIP", || {
        let r = router.routes(AddressFamily::Ipv4)?;
        Ok((ecmp(r.get(&vip4)) && r.len() == 3).then_some(r))
    })
    .expect("IPv4 routes");
    let paths = &routes4[&vip4];
    let hops: BTreeSet<IpAddr> = paths.iter().flat_map(|p| p.nexthops.clone()).collect();
    assert_eq!(hops, [address(n0, false), address(n1, false)].into());
    for p in paths {
        assert_eq!(p.local_pref, Some(150), "{p:?}");
        assert_eq!(p.communities, ["64512:100", "no-export"], "{p:?}");
        assert_eq!(p.peer, p.nexthops.first().copied(), "{p:?}");
    }
    let large: BTreeSet<String> = paths
        .iter()
        .flat_map(|p| p.large_communities.clone())
        .collect();
    assert_eq!(large, ["64512:1:0".into(), "64512:1:1".into()].into());
    let own = &routes4[&net("198.51.100.11/32")];
    assert_eq!(own.len(), 1);
    assert_eq!(own[0].nexthops, [address(n1, false)]);
    assert_eq!(own[0].local_pref, Some(100));
    assert!(own[0].communities.is_empty());

    let routes6 = eventually(WAIT, "both paths of the IPv6 VIP", || {
        let r = router.routes(AddressFamily::Ipv6)?;
        Ok(ecmp(r.get(&vip6)).then_some(r))
    })
    .expect("IPv6 routes");
    let hops: BTreeSet<IpAddr> = routes6[&vip6]
        .iter()
        .flat_map(|p| p.nexthops.clone())
        .collect();
    assert_eq!(hops, [address(n0, true), address(n1, true)].into());

    // zebra installed them, ECMP, into the external namespace.
    let kernel = eventually(WAIT, "ECMP kernel routes", || {
        let k = router.kernel_routes()?;
        Ok((gateways(&k, &vip4).len() == 2 && gateways(&k, &vip6).len() == 2).then_some(k))
    })
    .expect("kernel routes");
    assert_eq!(
        gateways(&kernel, &vip4),
        [address(n0, false), address(n1, false)].into()
    );
    assert_eq!(
        gateways(&kernel, &net("198.51.100.10/32")),
        [address(n0, false)].into()
    );

    if std::env::var_os("FRR_RECORD").is_some() {
        record(
            "neighbors.json",
            &router.vtysh(frr::NEIGHBORS_COMMAND).expect("vtysh"),
        );
        record(
            "routes-ipv4-detail.json",
            &router
                .vtysh(&frr::routes_command(AddressFamily::Ipv4))
                .expect("vtysh"),
        );
        record(
            "routes-ipv6-detail.json",
            &router
                .vtysh(&frr::routes_command(AddressFamily::Ipv6))
                .expect("vtysh"),
        );
        record(
            "routes-ipv4.json",
            &router.vtysh("show bgp ipv4 unicast json").expect("vtysh"),
        );
        for (family, file) in [
            (AddressFamily::Ipv4, "kernel-ipv4.json"),
            (AddressFamily::Ipv6, "kernel-ipv6.json"),
        ] {
            let mut args = vec!["netns", "exec", lab.external.namespace.as_str()];
            args.extend(frr::kernel_routes_argv(family));
            let out = std::process::Command::new("ip")
                .args(&args)
                .output()
                .expect("ip");
            record(file, &String::from_utf8_lossy(&out.stdout));
        }
    }

    // Traffic to a VIP goes through the nodes.
    for node in &lab.nodes {
        for (vip, len) in [(VIP4, "32"), (VIP6, "128")] {
            let mut args = vec!["-n", node.namespace.as_str(), "addr", "add"];
            let a = format!("{vip}/{len}");
            args.extend([a.as_str(), "dev", "lo"]);
            if vip.contains(':') {
                args.push("nodad");
            }
            let st = std::process::Command::new("ip")
                .args(&args)
                .status()
                .expect("ip");
            assert!(st.success());
        }
    }
    for vip in [VIP4, VIP6] {
        let n = connect_through_nodes(&lab, vip.parse().expect("vip"));
        println!("{vip}: {n} connections reached both nodes");
    }

    // Several lines in one vtysh call run in order; a restart forgets them.
    let n0v4 = address(n0, false);
    router
        .vtysh(&format!(
            "configure terminal\nrouter bgp 64512\nneighbor {n0v4} description node-zero"
        ))
        .expect("configure through vtysh");
    assert!(
        router
            .vtysh("show running-config")
            .expect("vtysh")
            .contains(&format!("neighbor {n0v4} description node-zero"))
    );
    let unknown = router
        .vtysh("show no-such-thing")
        .expect_err("unknown command");
    println!("an unknown command: {unknown:#}");

    // Restart: new processes, sessions and routes come back.
    router.restart().expect("restart");
    assert_ne!((procs.pid(ZEBRA), procs.pid(BGPD), procs.pid(BFDD)), pids);
    router
        .wait_established(&peers, WAIT)
        .expect("sessions back after the restart");
    eventually(WAIT, "the ECMP route back after the restart", || {
        Ok((gateways(&router.kernel_routes()?, &vip4).len() == 2).then_some(()))
    })
    .expect("routes back");
    assert!(
        !router
            .vtysh("show running-config")
            .expect("vtysh")
            .contains("node-zero"),
        "the restart reads frr.conf again"
    );

    // A peer leaves: its paths are withdrawn, the ECMP route shrinks.
    procs.stop("peer1", Duration::from_secs(5));
    let states = eventually(WAIT, "node 1's sessions down", || {
        let s = router.neighbor_states()?;
        Ok((s[&address(n1, false)] != "Established").then_some(s))
    })
    .expect("n1 down");
    assert_eq!(states[&address(n0, false)], "Established");
    record(
        "neighbors-one-down.json",
        &router.vtysh(frr::NEIGHBORS_COMMAND).expect("vtysh"),
    );
    eventually(WAIT, "the VIP through node 0 only", || {
        Ok(
            (gateways(&router.kernel_routes()?, &vip4) == [address(n0, false)].into())
                .then_some(()),
        )
    })
    .expect("withdrawn");

    // Stop: no daemon, no BGP route left.
    let stopped = router.stop();
    assert_eq!(
        stopped,
        ["process frr-bgpd", "process frr-bfdd", "process frr-zebra"]
    );
    assert!(!router.running());
    assert!(router.kernel_routes().expect("ip").is_empty());
    assert!(router.vtysh(frr::NEIGHBORS_COMMAND).is_err());
}

#[test]
fn a_bgp_lab_runs_frr_behind_the_cluster_handle_needs_root_and_frr() {
    use devenv::cluster::{Cluster, Protocol};
    use devenv::lab::cluster::{LabSpec, api_port, up};
    if !root_and_frr() {
        return;
    }
    let name = format!("fb{}", std::process::id() % 100_000);
    // Stops FRR and the peers (pid files), deletes the namespaces.
    let _guard = test_support::Guard::new(&name, down);
    let tmp = tempfile::tempdir().expect("tmp");
    let mut spec = LabSpec::new(&common::bin_dir(tmp.path()));
    spec.name = name.clone();
    spec.nodes = 2;
    spec.api_port = api_port(&name);
    spec.metallb = devenv::lab::cluster::Metallb::Off;
    spec.protocol = Protocol::Bgp;

    let lab = up(&spec).expect("lab with FRR");
    let routers = lab.router_addresses();
    assert_eq!(
        routers,
        [ip("172.30.0.2"), ip("fc00:f853:ccd:e793::2")],
        "the external host's eth0"
    );
    // FRR knows every node, none connected (no speaker runs).
    let neighbors = lab.bgp_neighbors().expect("neighbors");
    let expected: BTreeSet<IpAddr> = lab
        .nodes()
        .iter()
        .flat_map(|n| n.addresses.clone())
        .collect();
    assert_eq!(neighbors.keys().copied().collect::<BTreeSet<_>>(), expected);
    assert!(neighbors.values().all(|n| !n.established()));
    // Upstream's four routers, each knowing every node; the multi-hop
    // ones a routed hop away from the nodes, both families.
    let all = lab.bgp_routers();
    assert_eq!(
        all.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        [
            "ibgp-single-hop",
            "ebgp-single-hop",
            "ibgp-multi-hop",
            "ebgp-multi-hop"
        ]
    );
    for r in &all {
        let n = lab.bgp_neighbors_on(&r.name).expect("neighbors");
        assert_eq!(
            n.keys().copied().collect::<BTreeSet<_>>(),
            expected,
            "{}",
            r.name
        );
        assert!(n.values().all(|n| n.authentication), "{}: MD5", r.name);
    }
    let node = lab.nodes()[0].name.clone();
    // The kernel drops the routes with the link; link_up puts them back.
    lab.link_down(&node).expect("link down");
    lab.link_up(&node).expect("link up");
    for target in all[2].addresses.iter().chain(&all[3].addresses) {
        // A connection to a closed port is refused by the router's kernel:
        // the SYN got there and the RST came back.
        let connect = format!("echo > /dev/tcp/{target}/9");
        let out = lab
            .exec_on_node(&node, &["timeout", "3", "bash", "-c", &connect])
            .expect("connect");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            err.contains("Connection refused"),
            "{node} cannot reach {target}: {err}"
        );
        let hops = lab
            .exec_on_node(&node, &["ip", "route", "get", &target.to_string()])
            .expect("ip route get");
        let via = String::from_utf8_lossy(&hops.stdout).into_owned();
        assert!(
            via.contains(" via "),
            "{target} is not a routed hop away: {via}"
        );
    }
    assert!(
        lab.bgp_routes(AddressFamily::Ipv4)
            .expect("routes")
            .is_empty()
    );
    assert!(lab.router_kernel_routes().expect("kernel").is_empty());
    let conf = lab.vtysh("show running-config").expect("vtysh");
    assert!(conf.contains("maximum-paths ibgp 8"), "{conf}");

    // The dev-env objects, created then replaced.
    let first = lab.apply_bgp_dev_env().expect("objects");
    // A BGPPeer per family for each of the four routers.
    let mut expected: Vec<String> = devenv::lab::routers::ROUTERS
        .iter()
        .flat_map(|r| {
            ["v4", "v6"].map(|f| format!("created BGPPeer metallb-system/{}-{f}", r.name))
        })
        .collect();
    expected.push("created IPAddressPool metallb-system/dev-env-bgp".into());
    expected.push("created BGPAdvertisement metallb-system/empty".into());
    assert_eq!(first, expected);
    assert!(
        lab.apply_bgp_dev_env()
            .expect("again")
            .iter()
            .all(|l| l.starts_with("unchanged ")),
        "nothing to write"
    );

    // A second `up` keeps FRR; restart_router replaces it.
    let pid = lab.pid_of(BGPD).expect("bgpd runs");
    let lab = up(&spec).expect("lab reused");
    assert_eq!(lab.pid_of(BGPD), Some(pid));
    lab.restart_router().expect("restart");
    assert_ne!(lab.pid_of(BGPD), Some(pid));
    assert!(lab.bgp_neighbors().is_ok());

    // Layer2: the router goes, its objects can be deleted.
    let mut deleted = lab.remove_dev_env_config().expect("delete");
    deleted.sort();
    assert_eq!(deleted.len(), 10, "{deleted:?}");
    spec.protocol = Protocol::Layer2;
    let lab = up(&spec).expect("layer2 lab");
    assert!(lab.router_addresses().is_empty());
    assert!(lab.pid_of(BGPD).is_none() && lab.pid_of(ZEBRA).is_none());
    let err = lab.vtysh("show bgp summary").expect_err("no router");
    assert!(err.to_string().contains("--protocol bgp"), "{err}");
    assert!(!lab_dir(&name).join("frr").exists());
    assert!(!lab_dir(&name).join("frr-ebgp-multi-hop").exists());
    assert!(lab.bgp_routers().is_empty());

    // Back to BGP, then down removes FRR with the rest.
    spec.protocol = Protocol::Bgp;
    up(&spec).expect("bgp again");
    let removed = down(&name).expect("down");
    assert!(
        removed.contains(&"process frr-bgpd".to_owned()),
        "{removed:?}"
    );
    assert!(!lab_dir(&name).exists());
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}
