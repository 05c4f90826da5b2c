//! One service: plan it (see [`plan::plan`]), apply the plan (announcer,
//! BGP speaker, status objects, events), and turn what changed into logs
//! and metrics.

use super::*;
use crate::speaker::plan::{self, Change, Note, Objects, ServicePlan};

/// Services applied before their status writes go out: the network
/// changes of a long pass are not held back by the API server.
const STATUS_BATCH: usize = 64;

/// The status writes of the services applied so far.
#[derive(Default)]
pub(super) struct StatusBatch {
    l2: Vec<super::writes::StatusWrites<ServiceL2Status>>,
    bgp: Vec<super::writes::StatusWrites<ServiceBGPStatus>>,
}

/// What applying one service's plan changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Applied {
    pub(super) layer2: Change,
    pub(super) bgp: Change,
}

impl Runner {
    /// The plain-data view every plan of this pass reads.
    fn world<'a>(
        &'a self,
        config: &'a Config,
        interfaces: &'a [String],
        objects: &'a Objects,
    ) -> plan::World<'a> {
        plan::World {
            node: &self.opts.node,
            config,
            nodes: &self.node_view,
            alive: &self.alive,
            isolated: self.isolated,
            interfaces,
            lb_class: self.opts.lb_class.as_deref(),
            ignore_exclude_lb: self.opts.ignore_exclude_lb,
            objects,
            elected: &self.elected,
        }
    }

    /// Plans, applies and reports every service of `keys`, reading
    /// `objects` (built once for the batch).
    pub(super) async fn process_services(
        &mut self,
        keys: impl IntoIterator<Item = ServiceKey>,
        objects: &Objects,
    ) {
        let interfaces = self.announcer.interface_names();
        self.elected.advance(&self.node_view, &self.alive);
        let mut writes = StatusBatch::default();
        for key in keys {
            // A long pass is progress too: `/healthz` must not fail on it.
            self.health.beat();
            let Some(config) = self.config.as_ref() else {
                tracing::debug!(service = %key, "not processing: no valid configuration loaded yet");
                return;
            };
            self.metrics.k8s.updates.inc();
            let mut plan = plan::plan(&self.world(config, &interfaces, objects), &key);
            self.elected.remember(&key, plan.elected.take());
            log_notes(&key, &plan);
            let applied = self.apply(&key, &plan, objects, &mut writes).await;
            self.report(&key, &plan, &applied);
            if writes.l2.len() >= STATUS_BATCH {
                self.send(std::mem::take(&mut writes)).await;
            }
        }
        self.send(writes).await;
    }

    /// Sends a batch's status writes: layer 2 first, then BGP.
    async fn send(&mut self, writes: StatusBatch) {
        self.send_statuses(writes.l2).await;
        self.send_statuses(writes.bgp).await;
    }

    /// Does what `plan` says for `key`: the announcer and the BGP speaker
    /// (they reach the network now) and the events; the status objects'
    /// writes it adds to `writes`, sent with the batch's.
    async fn apply(
        &mut self,
        key: &ServiceKey,
        plan: &ServicePlan,
        objects: &Objects,
        writes: &mut StatusBatch,
    ) -> Applied {
        let (before, layer2) = match &plan.layer2 {
            Some(interfaces) => {
                match self.announcer.set(key, &plan.ips, interfaces.clone()).await {
                    Ok(before) => (before, Some(plan.ips.as_slice())),
                    Err(e) => {
                        // The plan saw the same interfaces; this only happens
                        // if they changed in between.
                        tracing::warn!(service = %key, node = %self.opts.node, "{e}");
                        (self.announcer.withdraw(key).await, None)
                    }
                }
            }
            None => (self.announcer.withdraw(key).await, None),
        };
        let l2_status = plan.l2_status.as_ref().filter(|_| layer2.is_some());
        let layer2 = Change::between(before, layer2);
        let announced_bgp = plan.bgp_status.is_some().then_some(plan.ips.as_slice());
        let before = self.bgp.set_service(key, &plan.ips, plan.bgp.clone());
        let bgp = Change::between(before, announced_bgp);
        if let Some(svc) = objects.services.get(key) {
            let reference = Recorder::reference(svc.as_ref());
            for ev in &plan.events {
                self.recorder.publish(&reference, ev).await;
            }
        }
        let l2 = self.plan_status::<ServiceL2Status>(key, l2_status, objects.statuses.get(key));
        writes.l2.push(l2);
        let bgp_writes = self.plan_status::<ServiceBGPStatus>(
            key,
            plan.bgp_status.as_ref(),
            objects.bgp_statuses.get(key),
        );
        writes.bgp.push(bgp_writes);
        Applied { layer2, bgp }
    }

    /// Logs and `metallb_speaker_announced` from what changed.
    fn report(&self, key: &ServiceKey, plan: &ServicePlan, applied: &Applied) {
        for (protocol, change) in [
            (Protocol::Layer2, &applied.layer2),
            (Protocol::Bgp, &applied.bgp),
        ] {
            match change {
                Change::Started => {
                    tracing::info!(service = %key, protocol = protocol.name(), ips = ?plan.ips, "announcing");
                }
                Change::Stopped(_) => {
                    tracing::info!(service = %key, protocol = protocol.name(), "withdrawing");
                }
                Change::Idle | Change::Same | Change::Changed(_) => {}
            }
            self.set_announced_metrics(key, protocol, change.retired(), false);
            if change.sets_gauges() {
                self.set_announced_metrics(key, protocol, &plan.ips, true);
            }
        }
    }

    /// Sets (or removes) `metallb_speaker_announced` for `ips` of `key`
    /// announced with `protocol`.
    fn set_announced_metrics(
        &self,
        key: &ServiceKey,
        protocol: Protocol,
        ips: &[IpAddr],
        on: bool,
    ) {
        let service = key.to_string();
        for ip in ips {
            let labels = [
                service.as_str(),
                protocol.name(),
                &self.opts.node,
                &ip.to_string(),
            ];
            if on {
                self.metrics
                    .speaker
                    .announced
                    .with_label_values(&labels)
                    .set(1);
            } else {
                let _ = self.metrics.speaker.announced.remove_label_values(&labels);
            }
        }
    }

    /// Stops answering in layer 2 for every service at once (the plans
    /// and status writes that follow may wait on the API server).
    pub(super) async fn withdraw_layer2(&mut self) {
        let keys: Vec<ServiceKey> = self.announcer.services().cloned().collect();
        for key in keys {
            if let Some(ips) = self.announcer.withdraw(&key).await {
                tracing::info!(service = %key, protocol = Protocol::Layer2.name(), "withdrawing");
                self.set_announced_metrics(&key, Protocol::Layer2, &ips, false);
            }
        }
    }
}

/// Why a service is not announced, at the level each reason deserves.
fn log_notes(key: &ServiceKey, plan: &ServicePlan) {
    for note in &plan.notes {
        match note {
            Note::NoPool(ips) => {
                tracing::debug!(service = %key, ips = ?ips, "not announcing: the addresses are in no pool");
            }
            Note::Layer2(reason) => tracing::debug!(service = %key, %reason, "not announcing"),
            Note::NoInterface(names) => {
                tracing::warn!(service = %key, interfaces = ?names, "not announcing: none of the interfaces the L2Advertisements name exists on this node");
            }
            Note::Bgp(reason) if reason.is_config_problem() => {
                tracing::warn!(service = %key, %reason, "not announcing over BGP");
            }
            Note::Bgp(reason) => {
                tracing::debug!(service = %key, %reason, "not announcing over BGP");
            }
        }
    }
}
