//! What the external host sees: ARP and NDP answers (arping, ndisc6), HTTP
//! and UDP replies, neighbor caches; and nodes' interface MACs. Parsing is
//! pure and unit-tested; running goes through the Cluster handle.

use crate::Ctx;
use anyhow::{Result, bail};
use std::collections::BTreeSet;
use std::net::IpAddr;

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// MACs in arping output (`Unicast reply from IP [AA:BB:...]`), lowercase.
pub fn parse_arping(output: &str) -> BTreeSet<String> {
    output
        .lines()
        .filter(|l| l.contains("reply from"))
        .filter_map(|l| {
            let start = l.find('[')? + 1;
            let end = l[start..].find(']')? + start;
            Some(l[start..end].to_lowercase())
        })
        .collect()
}

/// The MAC in ndisc6 output (`Target link-layer address: AA:BB:...`).
pub fn parse_ndisc6(output: &str) -> Option<String> {
    output
        .lines()
        .find_map(|l| l.trim().strip_prefix("Target link-layer address:"))
        .map(|m| m.trim().to_lowercase())
}

/// The MACs answering ARP for `ip` on the external host's leg of the
/// nodes' network `node_iface` (`eth0`, `eth1`), `count` requests.
pub fn arp_macs(ctx: &Ctx, ip: IpAddr, node_iface: &str, count: u32) -> Result<BTreeSet<String>> {
    let iface = ctx.cluster().external_interface(node_iface)?;
    let out = ctx.cluster().exec_on_external(&[
        "arping",
        "-c",
        &count.to_string(),
        "-w",
        &(count + 1).to_string(),
        "-I",
        &iface,
        &ip.to_string(),
    ])?;
    Ok(parse_arping(&stdout(&out)))
}

/// The MAC answering NDP for `ip` on the external host's leg of the
/// nodes' network `node_iface`, if any.
pub fn ndp_mac(ctx: &Ctx, ip: IpAddr, node_iface: &str) -> Result<Option<String>> {
    let iface = ctx.cluster().external_interface(node_iface)?;
    let out = ctx.cluster().exec_on_external(&[
        "ndisc6",
        "-r",
        "2",
        "-w",
        "1000",
        &ip.to_string(),
        &iface,
    ])?;
    Ok(parse_ndisc6(&stdout(&out)))
}

/// The MAC answering for `ip` (ARP or NDP by family) on the nodes'
/// network `node_iface`.
pub fn mac_for(ctx: &Ctx, ip: IpAddr, iface: &str) -> Result<Option<String>> {
    match ip {
        IpAddr::V4(_) => Ok(arp_macs(ctx, ip, iface, 1)?.into_iter().next()),
        IpAddr::V6(_) => ndp_mac(ctx, ip, iface),
    }
}

/// The MAC of `node`'s interface `iface`.
pub fn node_mac(ctx: &Ctx, node: &str, iface: &str) -> Result<String> {
    let out = ctx
        .cluster()
        .exec_on_node(node, &["cat", &format!("/sys/class/net/{iface}/address")])?;
    let mac = stdout(&out).trim().to_lowercase();
    if mac.is_empty() {
        bail!("{node} has no interface {iface}");
    }
    Ok(mac)
}

/// Which node owns `mac` on `iface`.
pub fn node_with_mac(ctx: &Ctx, mac: &str, iface: &str) -> Result<Option<String>> {
    for n in ctx.cluster().nodes() {
        if node_mac(ctx, &n.name, iface)? == mac {
            return Ok(Some(n.name));
        }
    }
    Ok(None)
}

fn url_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// Forgets the external host's neighbor entry for `ip`, so the next
/// connection resolves it afresh.
pub fn forget_neighbor(ctx: &Ctx, ip: IpAddr) -> Result<()> {
    ctx.cluster()
        .exec_on_external(&["ip", "neigh", "flush", "to", &ip.to_string()])?;
    Ok(())
}

/// GET `http://ip:port/path` from the external host (5 s timeout, as
/// upstream's wget); the body.
pub fn http_get(ctx: &Ctx, ip: IpAddr, port: u16, path: &str) -> Result<String> {
    let url = format!("http://{}:{port}{path}", url_host(ip));
    let out = ctx
        .cluster()
        .exec_on_external(&["curl", "-sS", "-m", "5", "--globoff", &url])?;
    if !out.status.success() {
        bail!(
            "curl {url}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(stdout(&out).trim().to_owned())
}

/// Sends `payload` over UDP to ip:port from the external host; the reply.
pub fn udp_request(ctx: &Ctx, ip: IpAddr, port: u16, payload: &str) -> Result<String> {
    let script = "import socket,sys\nip,port,msg=sys.argv[1],int(sys.argv[2]),sys.argv[3]\nfam=socket.AF_INET6 if ':' in ip else socket.AF_INET\ns=socket.socket(fam,socket.SOCK_DGRAM)\ns.settimeout(3)\ns.sendto(msg.encode(),(ip,port))\nprint(s.recvfrom(2048)[0].decode())\n";
    let out = ctx.cluster().exec_on_external(&[
        "python3",
        "-c",
        script,
        &ip.to_string(),
        &port.to_string(),
        payload,
    ])?;
    if !out.status.success() {
        bail!(
            "UDP {ip}:{port}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(stdout(&out).trim().to_owned())
}

/// Scrapes `http://127.0.0.1:9120/metrics` on `node` (the speaker).
pub fn speaker_metrics(ctx: &Ctx, node: &str) -> Result<String> {
    let out = ctx.cluster().exec_on_node(
        node,
        &["curl", "-sS", "-m", "5", "http://127.0.0.1:9120/metrics"],
    )?;
    if !out.status.success() {
        bail!(
            "scraping the speaker on {node}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(stdout(&out))
}

/// The value of the first sample of `metric` whose line contains every
/// string of `labels`.
pub fn sample(text: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with(['{', ' ']))
        .find(|l| labels.iter().all(|s| l.contains(s)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The tools the suites run on the external host and the nodes, with the
/// Debian package of each.
pub const TOOLS: [(&str, &str); 5] = [
    ("arping", "iputils-arping"),
    ("ndisc6", "ndisc6"),
    ("curl", "curl"),
    ("python3", "python3"),
    ("nft", "nftables"),
];

/// Fails naming the packages to install when a tool the suites run here is
/// missing (better than every spec failing on "exec of arping failed").
pub fn require_tools() -> Result<()> {
    let missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(tool, _)| {
            !std::env::var_os("PATH")
                .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(tool).is_file()))
        })
        .map(|(_, package)| *package)
        .collect();
    if !missing.is_empty() {
        bail!(
            "the e2e suites run arping, ndisc6, curl, python3 and nft on this machine; install them: apt-get install {}",
            missing.join(" ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tool_output() {
        let arping = "ARPING 10.0.0.1 from 10.0.0.2 eth0\nUnicast reply from 10.0.0.1 [E2:F1:98:B7:81:B9]  0.868ms\nUnicast reply from 10.0.0.1 [AA:F1:98:B7:81:B9]  0.7ms\nSent 2 probes\n";
        assert_eq!(
            parse_arping(arping),
            [
                "aa:f1:98:b7:81:b9".to_owned(),
                "e2:f1:98:b7:81:b9".to_owned()
            ]
            .into()
        );
        assert!(parse_arping("Sent 1 probes\nReceived 0 response(s)\n").is_empty());
        let ndisc = "Soliciting fc00::1 (fc00::1) on eth0...\nTarget link-layer address: E2:F1:98:B7:81:B9\n from fc00::1\n";
        assert_eq!(parse_ndisc6(ndisc).as_deref(), Some("e2:f1:98:b7:81:b9"));
        assert_eq!(parse_ndisc6("Timed out.\nNo response.\n"), None);
        let metrics = "# HELP x\nmetallb_layer2_requests_received{ip=\"10.0.0.1\"} 3\nmetallb_layer2_requests_received_other 9\n";
        assert_eq!(
            sample(metrics, "metallb_layer2_requests_received", &["10.0.0.1"]),
            Some(3.0)
        );
        assert_eq!(
            sample(metrics, "metallb_layer2_requests_received", &["10.0.0.9"]),
            None
        );
    }
}
