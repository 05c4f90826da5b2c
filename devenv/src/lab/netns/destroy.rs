//! Removing a lab network: [`destroy`] kills the processes in the lab's
//! namespaces and deletes them, whatever state a crash left behind;
//! [`kill_processes`] is also how `ensure` empties a namespace it drops.

use super::Result;
use super::ip::{ip, ip_json, lab_namespaces, list_namespaces, require_privileges};
use super::plan::validate_name;
use std::time::{Duration, Instant};

/// Parses `ip netns pids` output: one pid per line.
fn parse_pids(out: &str) -> Vec<i32> {
    out.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Kills every process living in `ns` (never this process): SIGTERM, then
/// SIGKILL after a grace period. Returns the pids it signalled.
pub fn kill_processes(ns: &str, grace: Duration) -> Result<Vec<i32>> {
    use crate::lab::process::alive;
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let me = std::process::id();
    let pids: Vec<i32> = parse_pids(&ip(&["netns", "pids", ns])?)
        .into_iter()
        .filter(|p| u32::try_from(*p).ok() != Some(me))
        .collect();
    for &pid in &pids {
        // Gone already is fine.
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &pid in pids.iter().filter(|&&p| alive(p)) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    Ok(pids)
}

/// Removes lab `name`: kills the processes in its namespaces, deletes every
/// namespace whose name starts with `<name>-` (with them go their links) and
/// any link in the root namespace with that prefix. Works on whatever a
/// crash left (also on nothing). Returns what it removed.
pub fn destroy(name: &str) -> Result<Vec<String>> {
    validate_name(name)?;
    require_privileges()?;
    let prefix = format!("{name}-");
    let mut removed = Vec::new();
    for ns in lab_namespaces(name, &list_namespaces()?) {
        kill_processes(&ns, Duration::from_secs(2))?;
        if let Err(e) = ip(&["netns", "del", &ns]) {
            // A concurrent destroy may have been faster.
            if list_namespaces()?.contains(&ns) {
                return Err(e);
            }
        }
        removed.push(format!("namespace {ns}"));
    }
    let root_links = ip_json(&["link", "show"])?;
    for l in root_links {
        if let Some(ifname) = l.get("ifname").and_then(|n| n.as_str())
            && ifname.starts_with(&prefix)
        {
            if let Err(e) = ip(&["link", "del", ifname]) {
                // Deleting one end of a veth pair already took the other.
                if ip(&["link", "show", "dev", ifname]).is_ok() {
                    return Err(e);
                }
            }
            removed.push(format!("link {ifname}"));
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pids() {
        assert_eq!(parse_pids("12\n345\n"), [12, 345]);
    }
}
