//! The lab's BGP router: FRR's zebra, bgpd and bfdd running in the lab's
//! external namespace, so the external host is both the client and the
//! router the speakers peer with (as upstream's FRR container on the kind
//! network). zebra installs the BGP routes into the external namespace's kernel
//! table: `curl` from there goes through the announcing nodes, ECMP over
//! all of them.
//!
//! The daemons run in the foreground under [`Processes`] (`frr-zebra`,
//! `frr-bgpd`, `frr-bfdd`: pid files and logs with the lab's), with every
//! path FRR would otherwise share with a system FRR or another lab given
//! explicitly in `<lab dir>/frr` (config, zserv socket, vty sockets, pid files), and
//! no TCP vty (`-P 0`). They run as FRR's own user [`USER`]: zebra refuses
//! `-u root` (root is not in FRR's vty group), so the state directory is
//! handed to that user. vtysh (as root) reaches them through the sockets
//! in that directory (`vtysh --vty_socket <dir>`).
//!
//! Command lines (FRR 8.4, Debian 12):
//!
//! ```text
//! ip netns exec <lab>-external /usr/lib/frr/zebra -u frr -g frr -f <dir>/zebra.conf \
//!     -z <dir>/zserv.api -i <dir>/zebra.pid --vty_socket <dir> -P 0 --log stdout
//! ip netns exec <lab>-external /usr/lib/frr/bgpd -u frr -g frr -f <dir>/frr.conf \
//!     -z <dir>/zserv.api -i <dir>/bgpd.pid --vty_socket <dir> -P 0 --log stdout
//! ip netns exec <lab>-external /usr/lib/frr/bfdd -u frr -g frr -f <dir>/bfdd.conf \
//!     -z <dir>/zserv.api -i <dir>/bfdd.pid --vty_socket <dir> -P 0 --log stdout \
//!     --bfdctl <dir>/bfdd.sock
//! vtysh --vty_socket <dir> -c 'show bgp neighbors json'
//! ```
//!
//! bfdd runs on every router, idle until a spec turns BFD on for some
//! neighbors through vtysh (`crate::frr::bfd`): bgpd asks it for sessions
//! through zebra, so it needs no configuration of its own at start, and
//! its control socket (`--bfdctl`) is in the router's directory so that
//! the lab's routers and a system FRR do not share one.
//!
//! [`Vty`] talks to a daemon's vty socket directly, as vtysh does, for
//! callers that poll (the BGP benchmark): a query takes well under a
//! millisecond where a vtysh process takes tens.

use super::netns::{self, Lab};
use super::process::{Processes, alive, log_tail};
use crate::frr::{self, AddressFamily, BgpRoutes, KernelRoute, NeighborStatus, RouterConfig};
use crate::wait::eventually;
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod vty;

pub use vty::{Vty, vty_reply, vty_request};

/// Process name of zebra under [`Processes`].
pub const ZEBRA: &str = "frr-zebra";
/// Process name of bgpd under [`Processes`].
pub const BGPD: &str = "frr-bgpd";
/// Process name of bfdd under [`Processes`].
pub const BFDD: &str = "frr-bfdd";
/// The user FRR's daemons run as.
pub const USER: &str = "frr";
/// The lab router's FRR hostname.
pub const HOSTNAME: &str = "external";
/// Where distributions install FRR's daemons.
const DAEMON_DIRS: [&str; 2] = ["/usr/lib/frr", "/usr/libexec/frr"];
/// How long a daemon may take to start answering.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a daemon may take to exit on SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// FRR's programs on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// zebra.
    pub zebra: PathBuf,
    /// bgpd.
    pub bgpd: PathBuf,
    /// bfdd, FRR's BFD daemon.
    pub bfdd: PathBuf,
    /// vtysh.
    pub vtysh: PathBuf,
}

/// Finds zebra, bgpd, bfdd and vtysh; the error says which package to
/// install.
pub fn binaries() -> Result<Binaries> {
    let daemons = DAEMON_DIRS.iter().map(Path::new).find(|d| {
        ["zebra", "bgpd", "bfdd"]
            .iter()
            .all(|daemon| d.join(daemon).is_file())
    });
    let vtysh = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("vtysh"))
        .find(|p| p.is_file());
    match (daemons, vtysh) {
        (Some(d), Some(vtysh)) => Ok(Binaries {
            zebra: d.join("zebra"),
            bgpd: d.join("bgpd"),
            bfdd: d.join("bfdd"),
            vtysh,
        }),
        _ => bail!(
            "FRR is not installed (zebra, bgpd and bfdd in {} and vtysh on PATH): install the \
             `frr` package (Debian/Ubuntu: `apt-get install frr`; its services need not run)",
            DAEMON_DIRS.join(" or ")
        ),
    }
}

/// Whether FRR is installed (see [`binaries`]).
pub fn installed() -> bool {
    binaries().is_ok()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// A daemon's command line in `namespace`: its configuration `conf` and
/// pid file `pid` in `dir`, which also holds the vty sockets and zebra's
/// API socket (bgpd reaches zebra through `<dir>/zserv.api`).
fn daemon_argv(binary: &Path, namespace: &str, dir: &Path, conf: &str, pid: &str) -> Vec<String> {
    let mut argv = strings(&["ip", "netns", "exec", namespace]);
    argv.extend([
        path_str(binary),
        "-u".into(),
        USER.into(),
        "-g".into(),
        USER.into(),
        "-f".into(),
        path_str(&dir.join(conf)),
        "-z".into(),
        path_str(&dir.join("zserv.api")),
        "-i".into(),
        path_str(&dir.join(pid)),
        "--vty_socket".into(),
        path_str(dir),
        "-P".into(),
        "0".into(),
        "--log".into(),
        "stdout".into(),
    ]);
    argv
}

/// zebra's command line in `namespace`, state in `dir`.
pub fn zebra_argv(zebra: &Path, namespace: &str, dir: &Path) -> Vec<String> {
    daemon_argv(zebra, namespace, dir, "zebra.conf", "zebra.pid")
}

/// bgpd's command line in `namespace`, state in `dir`.
pub fn bgpd_argv(bgpd: &Path, namespace: &str, dir: &Path) -> Vec<String> {
    daemon_argv(bgpd, namespace, dir, "frr.conf", "bgpd.pid")
}

/// bfdd's command line in `namespace`, state in `dir`: its control
/// socket there too, not in `/var/run/frr` where every bfdd of the
/// machine would look for it.
pub fn bfdd_argv(bfdd: &Path, namespace: &str, dir: &Path) -> Vec<String> {
    let mut argv = daemon_argv(bfdd, namespace, dir, "bfdd.conf", "bfdd.pid");
    argv.extend(["--bfdctl".to_owned(), path_str(&dir.join("bfdd.sock"))]);
    argv
}

/// The lab router's configuration: a neighbor for every address of every
/// node's `eth0`, router-id the external host's IPv4 address on `eth0`
/// (in an IPv6-only lab, the one it would have).
pub fn lab_router_config(lab: &Lab) -> RouterConfig {
    let nodes: Vec<IpAddr> = lab.nodes.iter().flat_map(|n| n.addresses()).collect();
    let router_id = lab
        .external
        .addresses()
        .into_iter()
        .find_map(|a| match a {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
        .unwrap_or_else(|| {
            let net = netns::default_subnets()[0].ipv4.network();
            Ipv4Addr::from(u32::from(net) + netns::EXTERNAL_HOST)
        });
    RouterConfig::new(HOSTNAME, Some(router_id), &nodes)
}

/// FRR running (or to run) in one namespace with its state in one
/// directory.
#[derive(Debug, Clone)]
pub struct LabRouter {
    namespace: String,
    lab_dir: PathBuf,
    /// `None`: the external host's router, whose files and processes keep
    /// their unqualified names (`frr`, `frr-zebra`, `frr-bgpd`).
    name: Option<String>,
    port: u16,
}

impl LabRouter {
    /// The router in `namespace` of the lab whose state lives in `lab_dir`
    /// (its pid files and logs go with the lab's; FRR's own files in
    /// `<lab_dir>/frr`).
    pub fn new(lab_dir: &Path, namespace: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            lab_dir: lab_dir.to_owned(),
            name: None,
            port: frr::BGP_PORT,
        }
    }

    /// Another router of the same lab, called `name` (its files in
    /// `<lab_dir>/frr-<name>`, its processes `frr-<name>-zebra`,
    /// `frr-<name>-bgpd` and `frr-<name>-bfdd`), bgpd listening on `port`.
    pub fn named(lab_dir: &Path, namespace: &str, name: &str, port: u16) -> Self {
        Self {
            namespace: namespace.to_owned(),
            lab_dir: lab_dir.to_owned(),
            name: Some(name.to_owned()),
            port,
        }
    }

    /// The process name of `daemon` ([`ZEBRA`], [`BGPD`] or [`BFDD`]) of
    /// this router.
    fn process(&self, daemon: &str) -> String {
        match &self.name {
            None => daemon.to_owned(),
            Some(n) => format!("frr-{n}-{}", daemon.trim_start_matches("frr-")),
        }
    }

    /// The router of lab `name`, in its external namespace.
    pub fn of_lab(name: &str) -> Self {
        Self::new(
            &super::paths::lab_dir(name),
            &netns::external_namespace(name),
        )
    }

    /// FRR's state directory: `frr.conf`, `zebra.conf`, sockets, pid files.
    pub fn dir(&self) -> PathBuf {
        match &self.name {
            None => self.lab_dir.join("frr"),
            Some(n) => self.lab_dir.join(format!("frr-{n}")),
        }
    }

    /// The namespace FRR runs in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn procs(&self) -> Processes {
        Processes::new(&self.lab_dir)
    }

    /// Every daemon runs.
    pub fn running(&self) -> bool {
        let procs = self.procs();
        [ZEBRA, BGPD, BFDD]
            .iter()
            .all(|d| procs.pid(&self.process(d)).is_some())
    }

    /// Writes `config` and starts whichever daemon is not running; bgpd is
    /// restarted when the configuration changed. Returns once bgpd answers
    /// vtysh.
    pub fn start(&self, config: &RouterConfig) -> Result<()> {
        let bins = binaries()?;
        let conf = frr::frr_conf(config)?;
        let dir = self.dir();
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let user = nix::unistd::User::from_name(USER)
            .with_context(|| format!("looking up user {USER}"))?
            .with_context(|| {
                format!("FRR's user `{USER}` does not exist: install FRR from its package (`apt-get install frr`)")
            })?;
        nix::unistd::chown(&dir, Some(user.uid), Some(user.gid))
            .with_context(|| format!("handing {} to user {USER}", dir.display()))?;
        write_if_changed(
            &dir.join("zebra.conf"),
            &format!("hostname {}\n!\n", config.hostname),
        )?;
        // Profiles and peers come later, from specs, through vtysh.
        write_if_changed(
            &dir.join("bfdd.conf"),
            &format!("hostname {}\n!\n", config.hostname),
        )?;
        if write_if_changed(&dir.join("frr.conf"), &conf)? {
            self.stop_daemon(&self.process(BGPD));
        }
        self.start_daemons(&bins)
    }

    fn start_daemons(&self, bins: &Binaries) -> Result<()> {
        let procs = self.procs();
        let dir = self.dir();
        let (zebra, bgpd) = (self.process(ZEBRA), self.process(BGPD));
        if procs.pid(&zebra).is_none() {
            remove_files(&dir, &["zserv.api", "zebra.vty", "zebra.pid"]);
            let pid = procs.ensure(&zebra, &zebra_argv(&bins.zebra, &self.namespace, &dir), &[])?;
            self.wait_started(&zebra, pid, || Ok(dir.join("zserv.api").exists()))?;
        }
        // Before bgpd: bgpd registers its BFD sessions through zebra,
        // which hands them to bfdd (and replays them when bfdd connects
        // later, so the order is for a quiet log, not for correctness).
        let bfdd = self.process(BFDD);
        if procs.pid(&bfdd).is_none() {
            remove_files(&dir, &["bfdd.vty", "bfdd.pid", "bfdd.sock"]);
            let pid = procs.ensure(&bfdd, &bfdd_argv(&bins.bfdd, &self.namespace, &dir), &[])?;
            self.wait_started(&bfdd, pid, || Ok(dir.join("bfdd.vty").exists()))?;
        }
        if procs.pid(&bgpd).is_none() {
            remove_files(&dir, &["bgpd.vty", "bgpd.pid"]);
            let mut argv = bgpd_argv(&bins.bgpd, &self.namespace, &dir);
            if self.port != frr::BGP_PORT {
                argv.extend(["-p".to_owned(), self.port.to_string()]);
            }
            let pid = procs.ensure(&bgpd, &argv, &[])?;
            self.wait_started(&bgpd, pid, || {
                Ok(dir.join("bgpd.vty").exists()
                    && frr::parse_neighbors(&self.vtysh(frr::NEIGHBORS_COMMAND)?).is_ok())
            })?;
        }
        Ok(())
    }

    /// Waits until `ready` holds; fails at once, with its log, when `name`
    /// (process `pid`) exits.
    fn wait_started(
        &self,
        name: &str,
        pid: i32,
        mut ready: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let procs = self.procs();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // Not `procs.pid`: until `ip netns exec` has exec'd, the
            // child still shows its parent's command line.
            if !alive(pid) {
                bail!(
                    "{name} exited right after starting; the end of {}:\n{}",
                    procs.log_file(name).display(),
                    log_tail(&procs.log_file(name), 15)
                );
            }
            if ready().unwrap_or(false) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{name} did not answer within {START_TIMEOUT:?}; the end of {}:\n{}",
                    procs.log_file(name).display(),
                    log_tail(&procs.log_file(name), 15)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM (SIGKILL after a grace period) to daemon `name`, and the
    /// crash-log directory FRR keeps for it in `/var/tmp/frr` removed.
    fn stop_daemon(&self, name: &str) -> bool {
        let procs = self.procs();
        let pid = procs.pid(name);
        procs.stop(name, STOP_GRACE);
        if let Some(pid) = pid {
            let daemon = ["zebra", "bfdd"]
                .into_iter()
                .find(|d| name.ends_with(*d))
                .unwrap_or("bgpd");
            let _ = std::fs::remove_dir_all(format!("/var/tmp/frr/{daemon}.{pid}"));
        }
        pid.is_some()
    }

    /// Stops bgpd (its peers get a Cease and its routes are withdrawn),
    /// then bfdd, then zebra, and flushes BGP routes a crashed zebra may
    /// have left in the namespace. Keeps the configuration. Returns what it stopped;
    /// never fails (it also runs on a half-removed lab).
    pub fn stop(&self) -> Vec<String> {
        let (zebra, bgpd, bfdd) = (self.process(ZEBRA), self.process(BGPD), self.process(BFDD));
        let had_pid_files = self
            .procs()
            .names()
            .iter()
            .any(|n| *n == bgpd || *n == zebra || *n == bfdd);
        let mut stopped = Vec::new();
        for name in [&bgpd, &bfdd, &zebra] {
            if self.stop_daemon(name) {
                stopped.push(format!("process {name}"));
            }
        }
        if had_pid_files && netns::list_namespaces().is_ok_and(|all| all.contains(&self.namespace))
        {
            for family in ["-4", "-6"] {
                let _ = netns::run(
                    "ip",
                    &[
                        "-n",
                        &self.namespace,
                        family,
                        "route",
                        "flush",
                        "proto",
                        "bgp",
                    ],
                );
            }
        }
        stopped
    }

    /// [`LabRouter::stop`], then its state directory removed.
    pub fn remove(&self) -> Result<Vec<String>> {
        let mut removed = self.stop();
        let dir = self.dir();
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
            removed.push(format!("directory {}", dir.display()));
        }
        Ok(removed)
    }

    /// Stops every daemon and starts them again from the configuration on
    /// disk; returns once bgpd answers. Sessions drop and come back.
    pub fn restart(&self) -> Result<()> {
        let bins = binaries()?;
        if !self.dir().join("frr.conf").exists() {
            bail!(
                "no FRR configuration in {}: the router was never started",
                self.dir().display()
            );
        }
        self.stop();
        self.start_daemons(&bins)
    }

    /// Runs `command` in vtysh (lines separated by `\n` run in order) and
    /// returns its standard output.
    pub fn vtysh(&self, command: &str) -> Result<String> {
        let bins = binaries()?;
        let dir = self.dir();
        let out = duct::cmd(
            &bins.vtysh,
            ["--vty_socket", &path_str(&dir), "-c", command],
        )
        .stdin_null()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .with_context(|| format!("running {}", bins.vtysh.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            bail!(
                "`vtysh --vty_socket {} -c {command:?}` failed ({}): {} {}",
                dir.display(),
                out.status,
                stdout.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(stdout)
    }

    /// A connection to bgpd's vty socket, for fast repeated queries.
    pub fn bgpd_vty(&self) -> Result<Vty> {
        Vty::connect(&self.dir().join("bgpd.vty"))
    }

    /// Every neighbor, by address.
    pub fn neighbors(&self) -> Result<BTreeMap<IpAddr, NeighborStatus>> {
        frr::parse_neighbors(&self.vtysh(frr::NEIGHBORS_COMMAND)?)
    }

    /// Peer address -> FSM state (`Established`, `Active`, ...).
    pub fn neighbor_states(&self) -> Result<BTreeMap<IpAddr, String>> {
        Ok(frr::states(&self.neighbors()?))
    }

    /// The BGP table of `family`.
    pub fn routes(&self, family: AddressFamily) -> Result<BgpRoutes> {
        frr::parse_routes(&self.vtysh(&frr::routes_command(family))?)
    }

    /// The BGP routes zebra installed in the namespace's kernel table, both
    /// families.
    pub fn kernel_routes(&self) -> Result<Vec<KernelRoute>> {
        let mut routes = Vec::new();
        for family in [AddressFamily::Ipv4, AddressFamily::Ipv6] {
            let argv = frr::kernel_routes_argv(family);
            let mut args = vec!["netns", "exec", self.namespace.as_str()];
            args.extend_from_slice(&argv);
            let out = netns::run("ip", &args)?;
            routes.extend(frr::parse_kernel_routes(&out).with_context(|| argv.join(" "))?);
        }
        Ok(routes)
    }

    /// Waits until every one of `peers` is Established; returns the
    /// neighbors then. The timeout error lists every state.
    pub fn wait_established(
        &self,
        peers: &[IpAddr],
        timeout: Duration,
    ) -> Result<BTreeMap<IpAddr, NeighborStatus>> {
        eventually(
            timeout,
            &format!("BGP sessions with {peers:?} Established"),
            || {
                let neighbors = self.neighbors()?;
                if peers
                    .iter()
                    .all(|p| neighbors.get(p).is_some_and(NeighborStatus::established))
                {
                    Ok(Some(neighbors))
                } else {
                    bail!("states: {:?}", frr::states(&neighbors))
                }
            },
        )
    }
}

/// Writes `content` to `path` unless it already holds exactly that;
/// returns whether it wrote.
fn write_if_changed(path: &Path, content: &str) -> Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == content) {
        return Ok(false);
    }
    std::fs::write(path, content).with_context(|| format!("writing {}", path.display()))?;
    Ok(true)
}

fn remove_files(dir: &Path, names: &[&str]) {
    for n in names {
        let _ = std::fs::remove_file(dir.join(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemons_get_every_path_explicitly_and_no_tcp_vty() {
        let dir = Path::new("/tmp/metallb-rs-lab/lab/frr");
        let zebra = zebra_argv(Path::new("/usr/lib/frr/zebra"), "lab-external", dir);
        assert_eq!(
            zebra[..5],
            ["ip", "netns", "exec", "lab-external", "/usr/lib/frr/zebra"]
        );
        let joined = zebra.join(" ");
        for part in [
            "-u frr -g frr",
            "-f /tmp/metallb-rs-lab/lab/frr/zebra.conf",
            "-z /tmp/metallb-rs-lab/lab/frr/zserv.api",
            "-i /tmp/metallb-rs-lab/lab/frr/zebra.pid",
            "--vty_socket /tmp/metallb-rs-lab/lab/frr",
            "-P 0",
            "--log stdout",
        ] {
            assert!(joined.contains(part), "{part} missing: {joined}");
        }
        let bgpd = bgpd_argv(Path::new("/usr/lib/frr/bgpd"), "lab-external", dir).join(" ");
        for part in [
            "-f /tmp/metallb-rs-lab/lab/frr/frr.conf",
            "-z /tmp/metallb-rs-lab/lab/frr/zserv.api",
            "-i /tmp/metallb-rs-lab/lab/frr/bgpd.pid",
            "-P 0",
        ] {
            assert!(bgpd.contains(part), "{part} missing: {bgpd}");
        }
    }

    #[test]
    fn the_lab_router_peers_with_every_node_address() {
        let topology = netns::Topology::new("lab", 2);
        let plan = netns::plan(&topology).expect("plan");
        let lab = Lab::planned(&plan, netns::Mac([2, 0, 0, 0, 0, 1])).expect("lab");
        let config = lab_router_config(&lab);
        assert_eq!(config.router_id, Some(Ipv4Addr::new(172, 30, 0, 2)));
        let addresses: Vec<String> = config
            .neighbors
            .iter()
            .map(|n| n.address.to_string())
            .collect();
        assert_eq!(
            addresses,
            [
                "172.30.0.10",
                "fc00:f853:ccd:e793::10",
                "172.30.0.11",
                "fc00:f853:ccd:e793::11",
                "172.30.0.12",
                "fc00:f853:ccd:e793::12"
            ]
        );
        // IPv6 only: the router-id is still an IPv4 number, the one the
        // external host would have.
        let mut v6 = lab.clone();
        for h in v6.nodes.iter_mut().chain([&mut v6.external]) {
            h.interfaces[0].addresses.retain(|a| a.addr().is_ipv6());
        }
        let config = lab_router_config(&v6);
        assert_eq!(config.router_id, Some(Ipv4Addr::new(172, 30, 0, 2)));
        assert!(config.neighbors.iter().all(|n| n.address.is_ipv6()));
    }
}
