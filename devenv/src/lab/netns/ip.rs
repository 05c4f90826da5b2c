//! Running `ip` and reading what it reports: every command the lab network
//! runs goes through [`run`] (arguments as separate values, no shell;
//! errors naming the command and its stderr, a permission error as
//! [`LabError::NeedsRoot`]), and the readers of links, addresses, sysctls
//! and namespaces that `ensure` and `destroy` decide on.

use super::{LabError, Mac, Result};
use ipnet::IpNet;
use std::net::IpAddr;

pub(super) fn display_command(program: &str, args: &[&str]) -> String {
    let mut s = program.to_string();
    for a in args {
        s.push(' ');
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
            s.push_str(&format!("{a:?}"));
        } else {
            s.push_str(a);
        }
    }
    s
}

/// Runs `program` with `args` (each a separate argument, no shell) and
/// returns its standard output; errors name the command and its stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let command = display_command(program, args);
    let out = duct::cmd(program, args)
        .stdin_null()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                LabError::MissingTool {
                    program: program.to_string(),
                }
            } else {
                LabError::Spawn {
                    command: command.clone(),
                    source,
                }
            }
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if stderr.contains("Operation not permitted") || stderr.contains("Permission denied") {
            return Err(LabError::NeedsRoot {
                detail: format!("`{command}`: {stderr}"),
            });
        }
        return Err(LabError::Command {
            command,
            status: out.status.to_string(),
            stderr,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(super) fn ip(args: &[&str]) -> Result<String> {
    run("ip", args)
}

/// Deletes `dev` in `ns`; `false` when it was already gone (a link the
/// kernel is tearing down with its namespace can vanish at any moment).
pub(super) fn del_link(ns: &str, dev: &str) -> Result<bool> {
    match ip(&["-n", ns, "link", "del", dev]) {
        Ok(_) => Ok(true),
        Err(LabError::Command { ref stderr, .. }) if stderr.contains("Cannot find device") => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

pub(super) fn ip_json(args: &[&str]) -> Result<Vec<serde_json::Value>> {
    let mut full = vec!["-j"];
    full.extend_from_slice(args);
    let out = ip(&full)?;
    if out.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(&out).map_err(|e| LabError::Parse {
        command: display_command("ip", &full),
        reason: e.to_string(),
    })
}

/// Whether the effective capabilities (`CapEff:` line of
/// `/proc/self/status`) include CAP_NET_ADMIN and CAP_SYS_ADMIN; `Err`
/// names what is missing.
pub fn check_caps(proc_status: &str) -> std::result::Result<(), String> {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    let caps = proc_status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .ok_or_else(|| "cannot read CapEff from /proc/self/status".to_string())?;
    let missing: Vec<&str> = [
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
    ]
    .into_iter()
    .filter(|(bit, _)| caps & (1 << bit) == 0)
    .map(|(_, name)| name)
    .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("this process lacks {}", missing.join(" and ")))
    }
}

/// Fails with [`LabError::NeedsRoot`] unless the process may manage
/// network namespaces.
pub fn require_privileges() -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| LabError::NeedsRoot {
        detail: format!("cannot read /proc/self/status: {e}"),
    })?;
    check_caps(&status).map_err(|detail| LabError::NeedsRoot { detail })
}

/// Parses `ip netns list` output (`name (id: 3)` or `name` per line).
pub fn parse_netns_list(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Every network namespace `ip netns` knows.
pub fn list_namespaces() -> Result<Vec<String>> {
    Ok(parse_netns_list(&ip(&["netns", "list"])?))
}

/// The namespaces among `all` that belong to lab `name`: those starting
/// with `<name>-`, except those of another lab whose name starts with
/// `<name>-` (recognised by its `<other>-net` namespace).
pub fn lab_namespaces(name: &str, all: &[String]) -> Vec<String> {
    let prefix = format!("{name}-");
    let others: Vec<String> = all
        .iter()
        .filter_map(|ns| ns.strip_suffix("-net"))
        .filter(|other| other.starts_with(&prefix))
        .map(|other| format!("{other}-"))
        .collect();
    all.iter()
        .filter(|ns| ns.starts_with(&prefix))
        .filter(|ns| !others.iter().any(|o| ns.starts_with(o.as_str())))
        .cloned()
        .collect()
}

/// A link as `ip -j -d link show` reports it.
#[derive(Debug, Clone)]
pub(super) struct Link {
    pub name: String,
    pub mac: Option<Mac>,
    pub up: bool,
    pub master: Option<String>,
    pub kind: Option<String>,
}

pub(super) fn links(ns: &str) -> Result<Vec<Link>> {
    let rows = ip_json(&["-d", "-n", ns, "link", "show"])?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let name = r.get("ifname")?.as_str()?.to_string();
            let up = r
                .get("flags")
                .and_then(|f| f.as_array())
                .is_some_and(|f| f.iter().any(|x| x.as_str() == Some("UP")));
            Some(Link {
                name,
                mac: r
                    .get("address")
                    .and_then(|a| a.as_str())
                    .and_then(|a| a.parse().ok()),
                up,
                master: r.get("master").and_then(|m| m.as_str()).map(str::to_string),
                kind: r
                    .get("linkinfo")
                    .and_then(|l| l.get("info_kind"))
                    .and_then(|k| k.as_str())
                    .map(str::to_string),
            })
        })
        .collect())
}

/// Global addresses of `dev` in `ns`.
pub(super) fn addresses(ns: &str, dev: &str) -> Result<Vec<IpNet>> {
    let rows = ip_json(&["-n", ns, "addr", "show", "dev", dev])?;
    let mut out = Vec::new();
    for r in &rows {
        let Some(infos) = r.get("addr_info").and_then(|a| a.as_array()) else {
            continue;
        };
        for a in infos {
            let local = a.get("local").and_then(|l| l.as_str());
            let len = a.get("prefixlen").and_then(|p| p.as_u64());
            if let (Some(local), Some(len)) = (local, len)
                && let (Ok(addr), Ok(len)) = (local.parse::<IpAddr>(), u8::try_from(len))
                && let Ok(net) = IpNet::new(addr, len)
            {
                out.push(net);
            }
        }
    }
    Ok(out)
}

/// Reads sysctls inside `ns`: from `/proc/sys` on a thread that entered
/// `ns` (no process started: a rerun on a healthy lab reads dozens), else
/// with `ip netns exec NS sysctl -n`.
pub fn read_sysctls(ns: &str, keys: &[&str]) -> Result<Vec<String>> {
    let from_proc = crate::lab::enter::in_netns(ns, || {
        keys.iter()
            .map(|k| {
                std::fs::read_to_string(format!("/proc/sys/{}", k.replace('.', "/")))
                    .map(|v| v.trim().to_owned())
            })
            .collect::<std::io::Result<Vec<String>>>()
    });
    match from_proc {
        Ok(Ok(values)) => Ok(values),
        _ => read_sysctls_with_command(ns, keys),
    }
}

fn read_sysctls_with_command(ns: &str, keys: &[&str]) -> Result<Vec<String>> {
    let mut args = vec!["netns", "exec", ns, "sysctl", "-n"];
    args.extend_from_slice(keys);
    let out = ip(&args)?;
    let values: Vec<String> = out.lines().map(|l| l.trim().to_string()).collect();
    if values.len() != keys.len() {
        return Err(LabError::Parse {
            command: display_command("ip", &args),
            reason: format!("expected {} values, got {}", keys.len(), values.len()),
        });
    }
    Ok(values)
}

pub(super) fn find<'a>(links: &'a [Link], name: &str) -> Option<&'a Link> {
    links.iter().find(|l| l.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_namespaces_spare_other_labs() {
        let all: Vec<String> = [
            "t1-net",
            "t1-control-plane",
            "t1-external",
            "t12-net",
            "t12-worker",
            "t1-x-net",
            "t1-x-worker",
            "other",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            lab_namespaces("t1", &all),
            ["t1-net", "t1-control-plane", "t1-external"]
        );
        assert_eq!(lab_namespaces("t1-x", &all), ["t1-x-net", "t1-x-worker"]);
    }

    #[test]
    fn parses_netns_list() {
        assert_eq!(
            parse_netns_list("a-net (id: 2)\nb\n\n"),
            ["a-net".to_string(), "b".to_string()]
        );
    }

    #[test]
    fn caps_check_names_what_is_missing() {
        assert!(check_caps("Name:\tx\nCapEff:\t000001ffffffffff\n").is_ok());
        let err = check_caps("CapEff:\t0000000000000000\n").expect_err("no caps");
        assert!(err.contains("CAP_NET_ADMIN") && err.contains("CAP_SYS_ADMIN"));
        assert!(check_caps("nothing").is_err());
    }

    #[test]
    fn display_command_quotes_only_for_reading() {
        assert_eq!(
            display_command("ip", &["-n", "a b", "link"]),
            "ip -n \"a b\" link"
        );
    }
}
