//! The [`Cluster`] handle of a running lab: what the e2e suites and the
//! benchmarks do to it (nodes and links down and up, speakers stopped,
//! the API made slow or unreachable, controller takeover, the routers).

use super::layout::{controller_metrics_port, latency_file, standby_metrics_port};
use super::scrape::{metrics_at, read_configuration};
use super::up::fresh_for_chart;
use super::{LabCluster, STANDBY, netns, routers};
use crate::cluster::{Cluster, FreshCluster, NodeInfo, PoolRanges, Protocol, StopSignal};
use anyhow::{Context, Result, bail};
use std::net::IpAddr;
use std::ops::Range;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

impl Cluster for LabCluster {
    fn name(&self) -> &str {
        &self.name
    }

    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    fn nodes(&self) -> Vec<NodeInfo> {
        self.lab
            .nodes
            .iter()
            .map(|n| NodeInfo {
                name: n.name.clone(),
                addresses: n.addresses(),
            })
            .collect()
    }

    fn exec_on_node(&self, node: &str, argv: &[&str]) -> Result<Output> {
        let ns = self.namespace_of(node)?;
        let mut full = vec!["ip", "netns", "exec", ns];
        full.extend_from_slice(argv);
        crate::cluster::output(&full)
    }

    fn exec_on_external(&self, argv: &[&str]) -> Result<Output> {
        let mut full = vec!["ip", "netns", "exec", self.lab.external.namespace.as_str()];
        full.extend_from_slice(argv);
        crate::cluster::output(&full)
    }

    /// The node's link goes down and its forwarder to the API server is
    /// frozen (SIGSTOP): like a real node off the network, its agent and
    /// speaker lose the API too, so it turns NotReady after the grace period.
    fn node_down(&self, node: &str) -> Result<()> {
        let ns = self.namespace_of(node)?;
        netns::run("ip", &["-n", ns, "link", "set", "eth0", "down"])?;
        self.procs().signal(
            &format!("forward-{node}"),
            nix::sys::signal::Signal::SIGSTOP,
        );
        Ok(())
    }

    fn node_up(&self, node: &str) -> Result<()> {
        let ns = self.namespace_of(node)?;
        netns::run("ip", &["-n", ns, "link", "set", "eth0", "up"])?;
        self.restore_routes(node)?;
        self.procs().signal(
            &format!("forward-{node}"),
            nix::sys::signal::Signal::SIGCONT,
        );
        Ok(())
    }

    /// Only eth0 goes down: the forwarder to the API server listens on
    /// the node namespace's loopback and connects from the root
    /// namespace, so the node's agent and speaker keep the API.
    fn link_down(&self, node: &str) -> Result<()> {
        let ns = self.namespace_of(node)?;
        netns::run("ip", &["-n", ns, "link", "set", "eth0", "down"])?;
        Ok(())
    }

    fn link_up(&self, node: &str) -> Result<()> {
        let ns = self.namespace_of(node)?;
        netns::run("ip", &["-n", ns, "link", "set", "eth0", "up"])?;
        self.restore_routes(node)
    }

    fn stop_speaker(&self, node: &str, signal: StopSignal) -> Result<()> {
        use nix::sys::signal::Signal;
        let name = format!("speaker-{node}");
        let sig = match signal {
            StopSignal::Term => Signal::SIGTERM,
            StopSignal::Kill => Signal::SIGKILL,
            StopSignal::Pause => Signal::SIGSTOP,
        };
        // The pid file names `ip netns exec`, which execs the speaker: one process.
        if !self.procs().signal(&name, sig) {
            bail!("no speaker runs on {node}");
        }
        match signal {
            // Still running: a start finds it so and starts nothing.
            StopSignal::Pause => {}
            StopSignal::Term => {
                // A paused speaker acts on SIGTERM only once it runs again.
                self.procs().signal(&name, Signal::SIGCONT);
                self.procs().mark_stopping(&name);
            }
            StopSignal::Kill => self.procs().mark_stopping(&name),
        }
        Ok(())
    }

    fn resume_speaker(&self, node: &str) -> Result<()> {
        if !self.procs().signal(
            &format!("speaker-{node}"),
            nix::sys::signal::Signal::SIGCONT,
        ) {
            bail!("no speaker runs on {node}");
        }
        Ok(())
    }

    /// Freezes (SIGSTOP) or thaws the node's API forwarder: its agent and
    /// speaker lose the API server while its network stays up.
    fn set_api_reachable(&self, node: &str, reachable: bool) -> Result<()> {
        self.namespace_of(node)?;
        let signal = if reachable {
            nix::sys::signal::Signal::SIGCONT
        } else {
            nix::sys::signal::Signal::SIGSTOP
        };
        if !self.procs().signal(&format!("forward-{node}"), signal) {
            bail!("no API forwarder runs for {node}");
        }
        Ok(())
    }

    /// Through the node's forwarder: its setting file, which the forwarder
    /// follows and acknowledges (waited for up to 2 s).
    fn set_api_latency(&self, node: &str, latency: Option<Range<Duration>>) -> Result<()> {
        self.namespace_of(node)?;
        crate::lab::latency::apply(
            &latency_file(&self.dir, node),
            latency.as_ref(),
            Duration::from_secs(2),
        )
        .with_context(|| format!("setting {node}'s API latency"))
    }

    /// The leading replica's metrics: the standby's after a takeover.
    fn controller_metrics(&self) -> Result<String> {
        let port = if self.procs().pid(STANDBY).is_some() {
            standby_metrics_port(self.api_port)
        } else {
            controller_metrics_port(self.api_port)
        };
        metrics_at(port)
    }

    /// Starts a standby replica, waits until it is up, SIGKILLs the
    /// leader (no hand-over: the standby waits out the lease, as after a
    /// node loss) and waits until the standby leads and has read the
    /// configuration. The standby stays the leader until
    /// [`Cluster::restart_controller`].
    fn controller_takeover(&self) -> Result<()> {
        let port = standby_metrics_port(self.api_port);
        self.start_controller_replica(STANDBY, port)?;
        // Ready: it serves the webhooks the leader's end leaves to it.
        self.wait_ready(STANDBY, port)?;
        if !self
            .procs()
            .signal("controller", nix::sys::signal::Signal::SIGKILL)
        {
            bail!("no controller runs to take over from");
        }
        self.procs().wait_exit("controller", Duration::from_secs(5));
        self.procs().stop("controller", Duration::ZERO);
        // The lease lasts 15 s after the killed leader's last renewal.
        let deadline = Instant::now() + Duration::from_secs(45);
        loop {
            if metrics_at(port).is_ok_and(|m| read_configuration(&m)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the standby controller did not lead and read the configuration within 45 s");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    /// Host numbers 100-119 of the node subnets (nodes use 10+, the
    /// external host 2; see `netns`).
    fn pool_ranges(&self) -> PoolRanges {
        PoolRanges {
            v4: Some("172.30.0.100-172.30.0.119".into()),
            v6: Some("fc00:f853:ccd:e793::100-fc00:f853:ccd:e793::11f".into()),
            secondary_v4: Some("172.30.1.100-172.30.1.119".into()),
        }
    }
    /// The external namespace has one leg on each bridge, named like the
    /// nodes' legs.
    fn external_interface(&self, node_iface: &str) -> Result<String> {
        match node_iface {
            "eth0" | "eth1" => Ok(node_iface.to_owned()),
            other => bail!("the lab has eth0 and eth1, not {other}"),
        }
    }

    fn external_netns(&self) -> Result<Option<String>> {
        Ok(Some(self.lab.external.namespace.clone()))
    }

    /// The external host's `eth0` addresses, when FRR runs there.
    fn router_addresses(&self) -> Vec<IpAddr> {
        if self.protocol == Protocol::Bgp {
            self.lab.external.addresses()
        } else {
            Vec::new()
        }
    }

    fn vtysh(&self, command: &str) -> Result<String> {
        self.bgp_router()?.vtysh(command)
    }

    fn bgp_routers(&self) -> Vec<crate::frr::BgpRouter> {
        if self.protocol == Protocol::Bgp {
            routers::bgp_routers(&self.lab)
        } else {
            Vec::new()
        }
    }

    fn vtysh_on(&self, router: &str, command: &str) -> Result<String> {
        self.bgp_router_named(router)?.vtysh(command)
    }

    /// Stops bgpd and zebra (SIGTERM: peers get a Cease) and starts them
    /// again from `<lab dir>/frr/frr.conf`.
    fn restart_router(&self) -> Result<()> {
        self.bgp_router()?.restart()
    }

    /// FRR runs in the external namespace.
    fn exec_on_router(&self, argv: &[&str]) -> Result<Output> {
        self.bgp_router()?;
        self.exec_on_external(argv)
    }

    /// FRR runs in the external namespace.
    fn router_netns(&self) -> Result<String> {
        self.bgp_router()?;
        Ok(self.lab.external.namespace.clone())
    }

    fn restart_controller(&self) -> Result<()> {
        // SIGTERM: it releases its lease, so the new process leads at once.
        // A standby left by a takeover goes too: the lab runs one replica.
        self.procs().stop(STANDBY, Duration::from_secs(5));
        self.procs().stop("controller", Duration::from_secs(5));
        self.start_controller()
    }

    fn start_speaker(&self, node: &str) -> Result<()> {
        self.start_speaker_env(node, None)
    }

    fn fresh_for_chart(&self) -> Result<Option<FreshCluster>> {
        fresh_for_chart(self).map(Some)
    }

    fn start_speaker_with_clock_offset(&self, node: &str, offset_secs: i64) -> Result<bool> {
        self.start_speaker_env(node, Some(offset_secs))?;
        Ok(true)
    }
}
