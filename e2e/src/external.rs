//! What the external host sees besides ARP and NDP answers (those are the
//! prober's, [`crate::prober`]): HTTP and UDP replies, neighbor caches,
//! metrics; and nodes' interface MACs. Parsing is pure and unit-tested;
//! running goes through the Cluster handle.

use crate::Ctx;
use anyhow::{Result, bail};
use std::net::IpAddr;

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
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

fn url_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// The external host's global addresses (what a backend sees as the
/// client when nothing masquerades).
pub fn addresses(ctx: &Ctx) -> Result<Vec<IpAddr>> {
    let out = ctx
        .cluster()
        .exec_on_external(&["ip", "-o", "addr", "show", "scope", "global"])?;
    let found = parse_addresses(&stdout(&out));
    if found.is_empty() {
        bail!("the external host shows no global address");
    }
    Ok(found)
}

/// The addresses of `ip -o addr show` output.
fn parse_addresses(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "inet" || *w == "inet6")?;
            words.next()?.split('/').next()?.parse().ok()
        })
        .collect()
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

/// GET `http://ip:port/path` from the external host: the status code and
/// the body, whatever the status.
pub fn http_status(ctx: &Ctx, ip: IpAddr, port: u16, path: &str) -> Result<(u16, String)> {
    let url = format!("http://{}:{port}{path}", url_host(ip));
    let out = ctx.cluster().exec_on_external(&[
        "curl",
        "-sS",
        "-m",
        "5",
        "--globoff",
        "-w",
        "\\n%{http_code}",
        &url,
    ])?;
    if !out.status.success() {
        bail!(
            "curl {url}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = stdout(&out);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
    Ok((code.trim().parse()?, body.to_owned()))
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

/// The `/metrics` text of the speaker on `node`, however the provider
/// reaches it.
pub fn speaker_metrics(ctx: &Ctx, node: &str) -> Result<String> {
    ctx.cluster().speaker_metrics(node)
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

/// Fails naming the packages to install when a command the suites run
/// on this machine is missing (better than every spec failing on "exec
/// of curl failed").
pub fn require_tools() -> Result<()> {
    let missing: Vec<&str> = devenv::prereq::E2E_TOOLS
        .iter()
        .filter(|(tool, _)| !devenv::prereq::on_path(tool))
        .map(|(_, package)| *package)
        .collect();
    if !missing.is_empty() {
        bail!(
            "the e2e suites run curl, python3, nft and ip on this machine; install them: apt-get install {}",
            missing.join(" ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses() {
        let out = "2: eth0    inet 172.30.0.2/24 brd 172.30.0.255 scope global eth0\\       valid_lft forever\n2: eth0    inet6 fc00::2/64 scope global \\       valid_lft forever\n";
        assert_eq!(
            parse_addresses(out),
            [
                "172.30.0.2".parse::<IpAddr>().expect("ip"),
                "fc00::2".parse().expect("ip")
            ]
        );
    }

    #[test]
    fn parses_metrics() {
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
