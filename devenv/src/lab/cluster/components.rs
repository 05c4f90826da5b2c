//! Starting the MetalLB components the lab runs itself: controller
//! replicas in the root namespace (plain metrics and probes on loopback,
//! webhooks on a port of their own) and a speaker per node namespace,
//! each with its component's kubeconfig.

use super::LabCluster;
use super::kubeconfigs::component_kubeconfig;
use super::layout::{
    SPEAKER_PLAIN_METRICS, controller_metrics_port, secure_metrics_port, webhook_port,
};
use super::scrape::answers_200;
use crate::cluster::Cluster;
use anyhow::{Context, Result, bail};
use std::time::{Duration, Instant};

impl LabCluster {
    /// Starts the metallb-rs controller (root namespace) unless it runs,
    /// and waits until it is ready: its webhooks answer, and an apply
    /// right after (failurePolicy Fail) is reviewed, not refused.
    pub fn start_controller(&self) -> Result<()> {
        let port = controller_metrics_port(self.api_port);
        self.start_controller_replica("controller", port)?;
        self.wait_ready("controller", port)
    }

    /// Waits up to 30 s for replica `name`'s `/readyz` on `port`.
    pub(super) fn wait_ready(&self, name: &str, port: u16) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !answers_200(port, "/readyz") {
            if Instant::now() > deadline {
                bail!(
                    "{name} was not ready within 30 s (its webhooks' certificate?): see {}",
                    self.procs().log_file(name).display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Starts controller replica `name` with its plain metrics and probes
    /// on 127.0.0.1:`port` (what the lab scrapes) and its HTTPS metrics
    /// on [`secure_metrics_port`], unless it runs.
    pub(super) fn start_controller_replica(&self, name: &str, port: u16) -> Result<()> {
        let metrics = format!("127.0.0.1:{port}");
        let argv = vec![
            self.bin_dir.join("metallb-rs").display().to_string(),
            "controller".into(),
            // As in the manifests: the lease makes restarts and a second
            // replica safe.
            "--leader-elect".into(),
            "--ml-secret-name".into(),
            metallb_rs::k8s::memberlist::DEFAULT_SECRET_NAME.into(),
            "--metrics-bind-address".into(),
            format!("127.0.0.1:{}", secure_metrics_port(port)),
            "--insecure-metrics-bind-address".into(),
            metrics.clone(),
            "--health-bind-address".into(),
            metrics,
            // Both replicas share the root namespace: upstream's
            // 0.0.0.0:9443 would collide between them (and listen on the
            // host).
            "--webhook-mode".into(),
            "enabled".into(),
            "--webhook-bind-address".into(),
            format!("127.0.0.1:{}", webhook_port(port, self.api_port)),
            "--log-format".into(),
            "text".into(),
            "--log-level".into(),
            self.log_level.clone(),
        ];
        self.procs().ensure_fresh(
            name,
            &argv,
            &[(
                "KUBECONFIG",
                component_kubeconfig(&self.dir, "controller")
                    .display()
                    .to_string(),
            )],
        )?;
        Ok(())
    }

    /// Starts `node`'s speaker, with the wall-clock test hook when
    /// `clock_offset` is set.
    pub(super) fn start_speaker_env(&self, node: &str, clock_offset: Option<i64>) -> Result<()> {
        let ns = self.namespace_of(node)?.to_owned();
        // A speaker stopped a moment ago may still be saying goodbye; a
        // start now would find it "running" and start nothing.
        let name = format!("speaker-{node}");
        if self.procs().take_stopping(&name)
            && !self.procs().wait_exit(&name, Duration::from_secs(5))
        {
            bail!("the stopped speaker on {node} did not exit within 5 s");
        }
        let bin = self.bin_dir.join("metallb-rs").display().to_string();
        // Gossip on the node's first address, as the manifests do with
        // the pod (= node) IP.
        let gossip_addr = self
            .nodes()
            .into_iter()
            .find(|n| n.name == node)
            .and_then(|n| n.addresses.first().copied())
            .with_context(|| format!("node {node} has no address"))?;
        let argv = vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            ns,
            bin,
            "speaker".into(),
            "--node-name".into(),
            node.to_owned(),
            "--ml-bindaddr".into(),
            gossip_addr.to_string(),
            // Upstream's 0.0.0.0:9120 would take the loopback port the
            // plain metrics need.
            "--metrics-bind-address".into(),
            std::net::SocketAddr::new(gossip_addr, metallb_rs::manifests::ports::METRICS)
                .to_string(),
            "--insecure-metrics-bind-address".into(),
            SPEAKER_PLAIN_METRICS.into(),
            "--log-format".into(),
            "text".into(),
            "--log-level".into(),
            self.log_level.clone(),
        ];
        let mut env = vec![(
            "KUBECONFIG",
            component_kubeconfig(&self.dir, &format!("speaker-{node}"))
                .display()
                .to_string(),
        )];
        if let Some(offset) = clock_offset {
            env.push((metallb_rs::clock::OFFSET_ENV, offset.to_string()));
        }
        self.procs()
            .ensure_fresh(&format!("speaker-{node}"), &argv, &env)?;
        Ok(())
    }
}
