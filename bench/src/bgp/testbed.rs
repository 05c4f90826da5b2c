//! The throughput testbed: two network namespaces of its own joined by a
//! veth, a router bgpd in one and each run's announcer in the other, and
//! the command lines and FRR configurations it starts them with.

use super::{
    ANNOUNCE_BIN, ANNOUNCER_ADDR, ANNOUNCER_NS, Announcer, FIRST_PREFIX, POLL_PAUSE, ROUTER_ADDR,
    ROUTER_NS, Run,
};
use anyhow::{Context, Result, bail};
use devenv::frr::{self, NeighborStatus};
use devenv::lab::frr::Vty;
use devenv::lab::netns;
use devenv::lab::process::{Processes, alive, log_tail};
use ipnet::Ipv4Net;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Process name of the router bgpd under [`Processes`].
const ROUTER: &str = "router";
/// Process name of the announcer under [`Processes`].
const ANNOUNCER: &str = "announcer";
/// How long the router may take to answer after its start.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the throughput testbed keeps configs, pid files and logs.
pub fn state_dir() -> PathBuf {
    std::env::temp_dir().join("metallb-rs-bench-bgp")
}

/// `bgp-announce`'s command line in `namespace`: one session to `peer` in
/// AS `asn` (iBGP) announcing `count` /32s from `first`.
pub fn announce_argv(
    bin: &Path,
    namespace: &str,
    peer: Ipv4Addr,
    asn: u32,
    count: usize,
    first: Ipv4Addr,
) -> Vec<String> {
    [
        "ip",
        "netns",
        "exec",
        namespace,
        &bin.display().to_string(),
        "--peer",
        &peer.to_string(),
        "--asn",
        &asn.to_string(),
        "--count",
        &count.to_string(),
        "--first",
        &first.to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// A bgpd without zebra (`-Z`) as root (`-S`) in `namespace`, every path
/// in `dir` (`frr.conf`, `bgpd.pid`, `bgpd.vty`), no TCP vty; logging to
/// standard output when `log`.
pub fn bgpd_argv(bgpd: &Path, namespace: &str, dir: &Path, log: bool) -> Vec<String> {
    let d = |f: &str| dir.join(f).display().to_string();
    let mut argv: Vec<String> = [
        "ip",
        "netns",
        "exec",
        namespace,
        &bgpd.display().to_string(),
        "-Z",
        "-S",
        "-f",
        &d("frr.conf"),
        "-i",
        &d("bgpd.pid"),
        "--vty_socket",
        &dir.display().to_string(),
        "-P",
        "0",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if log {
        argv.extend(["--log".into(), "stdout".into()]);
    }
    argv
}

/// The router's `frr.conf`: AS [`frr::ASN`], one passive iBGP neighbor
/// `announcer` (the announcer connects, as the speaker does), IPv4 unicast.
pub fn router_conf(router_id: Ipv4Addr, announcer: Ipv4Addr) -> String {
    let asn = frr::ASN;
    format!(
        "frr defaults traditional\nhostname mlbbench-router\n!\nrouter bgp {asn}\n \
         bgp router-id {router_id}\n no bgp default ipv4-unicast\n \
         neighbor {announcer} remote-as {asn}\n neighbor {announcer} passive\n \
         address-family ipv4 unicast\n  neighbor {announcer} activate\n exit-address-family\n\
         exit\n!\n"
    )
}

/// The baseline announcer's `frr.conf`: a `network` statement for each of
/// `prefixes` (announced without being in a RIB: `no bgp network
/// import-check`), one neighbor `router`; with `coalesce_ms`, the update
/// groups' `coalesce-time` (FRR waits 1000 ms by default).
pub fn announcer_conf(
    router_id: Ipv4Addr,
    router: Ipv4Addr,
    prefixes: &[Ipv4Net],
    coalesce_ms: Option<u32>,
) -> String {
    use std::fmt::Write;
    let asn = frr::ASN;
    let mut conf = format!(
        "frr defaults traditional\nhostname mlbbench-announcer\nlog stdout informational\n!\n\
         router bgp {asn}\n bgp router-id {router_id}\n no bgp default ipv4-unicast\n \
         no bgp network import-check\n"
    );
    if let Some(ms) = coalesce_ms {
        let _ = writeln!(conf, " coalesce-time {ms}");
    }
    let _ = write!(
        conf,
        " neighbor {router} remote-as {asn}\n address-family ipv4 unicast\n"
    );
    for p in prefixes {
        let _ = writeln!(conf, "  network {p}");
    }
    let _ = write!(
        conf,
        "  neighbor {router} activate\n exit-address-family\nexit\n!\n"
    );
    conf
}

/// The router and announcer namespaces, the veth between them and the
/// router bgpd; removed on drop (and by [`Testbed::destroy`] after a
/// crash or from a Ctrl-C handler).
pub struct Testbed {
    procs: Processes,
    dir: PathBuf,
    bgpd: PathBuf,
    vty: Vty,
    polls: u64,
    polling: Duration,
}

fn ip(args: &[&str]) -> Result<()> {
    netns::run("ip", args)?;
    Ok(())
}

impl Testbed {
    /// Removes what an earlier run left, then makes the namespaces and the
    /// veth, and starts the router; returns once it answers. Removes what
    /// it made when it fails; a Ctrl-C meanwhile waits for it.
    pub fn create() -> Result<Testbed> {
        netns::require_privileges()?;
        let _guard = crate::cleanup_lock();
        Self::destroy()?;
        Self::make().inspect_err(|_| {
            if let Err(e) = Self::destroy() {
                eprintln!("removing the bgp testbed: {e:#}");
            }
        })
    }

    fn make() -> Result<Testbed> {
        let dir = state_dir();
        let bgpd = devenv::lab::frr::binaries()?.bgpd;
        for d in [dir.join(ROUTER), dir.join(ANNOUNCER)] {
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        }
        ip(&["netns", "add", ROUTER_NS])?;
        ip(&["netns", "add", ANNOUNCER_NS])?;
        // Made inside the router's namespace, its peer moved at once: the
        // root namespace never holds either end.
        ip(&[
            "-n",
            ROUTER_NS,
            "link",
            "add",
            "veth0",
            "type",
            "veth",
            "peer",
            "name",
            "veth0",
            "netns",
            ANNOUNCER_NS,
        ])?;
        for (ns, addr) in [(ROUTER_NS, ROUTER_ADDR), (ANNOUNCER_NS, ANNOUNCER_ADDR)] {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "veth0",
            ])?;
            ip(&["-n", ns, "link", "set", "veth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let router_dir = dir.join(ROUTER);
        std::fs::write(
            router_dir.join("frr.conf"),
            router_conf(ROUTER_ADDR, ANNOUNCER_ADDR),
        )?;
        let procs = Processes::new(&dir);
        let pid = procs.ensure(
            ROUTER,
            &bgpd_argv(&bgpd, ROUTER_NS, &router_dir, false),
            &[],
        )?;
        let deadline = Instant::now() + START_TIMEOUT;
        let vty = loop {
            if !alive(pid) {
                bail!(
                    "the router bgpd exited right after starting: {}",
                    log_tail(&procs.log_file(ROUTER), 10)
                );
            }
            if let Ok(mut vty) = Vty::connect(&router_dir.join("bgpd.vty"))
                && vty
                    .command(frr::NEIGHBORS_COMMAND)
                    .is_ok_and(|n| frr::parse_neighbors(&n).is_ok())
            {
                break vty;
            }
            if Instant::now() > deadline {
                bail!("the router bgpd did not answer within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(Testbed {
            procs,
            dir,
            bgpd,
            vty,
            polls: 0,
            polling: Duration::ZERO,
        })
    }

    /// The router's view of the announcer.
    fn neighbor(&mut self) -> Result<NeighborStatus> {
        let t = Instant::now();
        let text = self
            .vty
            .command(&format!("show bgp neighbors {ANNOUNCER_ADDR} json"))?;
        self.polls += 1;
        self.polling += t.elapsed();
        frr::parse_neighbors(&text)?
            .remove(&IpAddr::V4(ANNOUNCER_ADDR))
            .with_context(|| format!("the router has no neighbor {ANNOUNCER_ADDR}"))
    }

    /// Waits until the router listens for the announcer again (after a
    /// session ends FRR stays Idle for about a second) with no prefix.
    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let n = self.neighbor()?;
            if matches!(n.state.as_str(), "Active" | "Connect") && n.accepted_prefixes == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the router did not get ready for the next run within 180 s: {} with {} prefixes",
                    n.state,
                    n.accepted_prefixes
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One run of `who` announcing `prefixes`; `bin_dir` holds
    /// `bgp-announce`.
    pub fn run(&mut self, who: Announcer, bin_dir: &Path, prefixes: &[Ipv4Net]) -> Result<Run> {
        self.wait_ready()?;
        let dir = self.dir.join(ANNOUNCER);
        let argv = match who {
            Announcer::MetallbRs => announce_argv(
                &bin_dir.join(ANNOUNCE_BIN),
                ANNOUNCER_NS,
                ROUTER_ADDR,
                frr::ASN,
                prefixes.len(),
                prefixes.first().map_or(FIRST_PREFIX, Ipv4Net::addr),
            ),
            Announcer::Frr | Announcer::FrrNoCoalesce => {
                let coalesce = (who == Announcer::FrrNoCoalesce).then_some(0);
                std::fs::write(
                    dir.join("frr.conf"),
                    announcer_conf(ANNOUNCER_ADDR, ROUTER_ADDR, prefixes, coalesce),
                )?;
                bgpd_argv(&self.bgpd, ANNOUNCER_NS, &dir, true)
            }
        };
        let timeout = Duration::from_secs(60) + Duration::from_millis(prefixes.len() as u64);
        let t0 = Instant::now();
        let pid = self.procs.ensure(ANNOUNCER, &argv, &[])?;
        let measured = (|| {
            let mut established = None;
            loop {
                let n = self.neighbor()?;
                let now = t0.elapsed();
                if established.is_none() && n.established() {
                    established = Some(now);
                }
                if let Some(e) = established
                    && n.accepted_prefixes >= prefixes.len() as u64
                {
                    return Ok(Run {
                        start_to_established: e,
                        established_to_all: now - e,
                    });
                }
                if !alive(pid) {
                    bail!(
                        "the announcer exited: {}",
                        log_tail(&self.procs.log_file(ANNOUNCER), 10)
                    );
                }
                if now > timeout {
                    bail!(
                        "the router did not accept {} prefixes within {timeout:?}: {}, {} accepted",
                        prefixes.len(),
                        n.state,
                        n.accepted_prefixes
                    );
                }
                std::thread::sleep(POLL_PAUSE);
            }
        })();
        self.procs.stop(ANNOUNCER, Duration::from_secs(5));
        forget_crash_dir(pid);
        measured.with_context(|| format!("{} run", who.label()))
    }

    /// Mean time one poll of the router took (its reply, parsing included),
    /// plus the pause between polls.
    pub fn poll_interval(&self) -> Duration {
        if self.polls == 0 {
            return Duration::ZERO;
        }
        self.polling / u32::try_from(self.polls).unwrap_or(u32::MAX) + POLL_PAUSE
    }

    /// Stops the testbed's processes and removes its namespaces and state
    /// directory, whatever state a crash left; returns what it removed.
    pub fn destroy() -> Result<Vec<String>> {
        netns::require_privileges()?;
        let dir = state_dir();
        let procs = Processes::new(&dir);
        let mut removed = Vec::new();
        for name in [ANNOUNCER, ROUTER] {
            if let Some(pid) = procs.pid(name) {
                procs.stop(name, Duration::from_secs(5));
                forget_crash_dir(pid);
                removed.push(format!("process {name}"));
            }
        }
        let all = netns::list_namespaces()?;
        for ns in [ANNOUNCER_NS, ROUTER_NS] {
            if all.iter().any(|n| n == ns) {
                netns::kill_processes(ns, Duration::from_secs(2))?;
                ip(&["netns", "del", ns])?;
                removed.push(format!("namespace {ns}"));
            }
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
            removed.push(format!("directory {}", dir.display()));
        }
        Ok(removed)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // After Ctrl-C the interrupt handler removes it.
        let _guard = crate::cleanup_lock();
        if let Err(e) = Self::destroy() {
            eprintln!("removing the bgp testbed: {e:#}");
        }
    }
}

/// FRR keeps a crash-log directory per daemon process in `/var/tmp/frr`;
/// removes the one of bgpd `pid` (nothing when it was no bgpd).
fn forget_crash_dir(pid: i32) {
    let _ = std::fs::remove_dir_all(format!("/var/tmp/frr/bgpd.{pid}"));
}
