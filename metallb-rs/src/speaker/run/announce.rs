//! One service: decide whether and how this node announces it (layer 2,
//! BGP), announce or withdraw, events and metrics.

use super::*;
use crate::speaker::plan::{self, Note, ServicePlan};

impl Runner {
    /// Decides for `key` (see [`plan::plan`]) and logs why something is
    /// not announced.
    fn plan(&self, key: &ServiceKey, svc: Option<&Service>, index: &Index) -> Option<ServicePlan> {
        let config = self.config.as_ref()?;
        let world = plan::World {
            node: &self.opts.node,
            config,
            nodes: &self.node_view,
            alive: &self.alive,
            isolated: self.isolated,
            lb_class: self.opts.lb_class.as_deref(),
            ignore_exclude_lb: self.opts.ignore_exclude_lb,
        };
        let slices = index.slices.get(key).map(Vec::as_slice).unwrap_or_default();
        let plan = plan::plan(&world, svc, slices);
        for note in &plan.notes {
            match note {
                Note::NoPool(ips) => {
                    tracing::debug!(service = %key, ips = ?ips, "not announcing: the addresses are in no pool");
                }
                Note::Layer2(reason) => tracing::debug!(service = %key, %reason, "not announcing"),
                Note::Bgp(reason) if reason.is_config_problem() => {
                    tracing::warn!(service = %key, %reason, "not announcing over BGP");
                }
                Note::Bgp(reason) => {
                    tracing::debug!(service = %key, %reason, "not announcing over BGP");
                }
            }
        }
        Some(plan)
    }

    pub(super) async fn process_service(&mut self, key: &ServiceKey, index: &Index) {
        if self.config.is_none() {
            tracing::debug!(
                service = %key,
                "not processing: no valid configuration loaded yet"
            );
            return;
        }
        self.metrics.k8s.updates.inc();
        let svc = self.stores.services.get(&key.object_ref());
        let plan = self.plan(key, svc.as_deref(), index).unwrap_or_default();
        let l2 = svc
            .as_ref()
            .zip(plan.layer2.clone())
            .map(|(svc, interfaces)| (svc.clone(), plan.ips.clone(), interfaces));
        let desired = match l2 {
            Some((svc, ips, interfaces)) => {
                match self
                    .announcer
                    .set(&key.to_string(), &ips, interfaces.clone())
                    .await
                {
                    Ok(()) => {
                        self.failed.remove(key);
                        let now = Announced {
                            ips,
                            interfaces: status::reported_interfaces(&interfaces),
                        };
                        if self.announced.get(key) != Some(&now) {
                            self.set_announced_metrics(key, Protocol::Layer2, false);
                            if !self.announced.contains_key(key) {
                                tracing::info!(service = %key, ips = ?now.ips, interfaces = ?now.interfaces, "announcing");
                            }
                            self.announced.insert(key.clone(), now);
                            self.set_announced_metrics(key, Protocol::Layer2, true);
                        }
                        let ev = events::node_assigned(&self.opts.node, Protocol::Layer2);
                        self.recorder
                            .publish(&Recorder::reference(svc.as_ref()), &ev)
                            .await;
                        let interfaces = self.announced.get(key).and_then(|a| a.interfaces.clone());
                        Some(status::desired_status(
                            &self.opts.node,
                            &key.namespace,
                            &key.name,
                            interfaces,
                        ))
                    }
                    Err(e) => {
                        let message = format!("{e} (node {})", self.opts.node);
                        if self.failed.get(key) != Some(&message) {
                            tracing::warn!(service = %key, "{message}");
                            self.failed.insert(key.clone(), message);
                        }
                        for ev in events::announce_failed(&ips, &self.opts.node) {
                            self.recorder
                                .publish(&Recorder::reference(svc.as_ref()), &ev)
                                .await;
                        }
                        self.withdraw(key).await;
                        None
                    }
                }
            }
            None => {
                self.failed.remove(key);
                self.withdraw(key).await;
                None
            }
        };
        self.sync_status::<ServiceL2Status>(key, desired.as_ref(), index.statuses.get(key))
            .await;
        let bgp_desired = self.process_bgp(key, svc.as_ref(), plan).await;
        self.sync_status::<ServiceBGPStatus>(
            key,
            bgp_desired.as_ref(),
            index.bgp_statuses.get(key),
        )
        .await;
    }

    /// Hands the service's routes to the BGP speaker; the status this
    /// node's ServiceBGPStatus should carry when it announces.
    pub(super) async fn process_bgp(
        &mut self,
        key: &ServiceKey,
        svc: Option<&Arc<Service>>,
        plan: ServicePlan,
    ) -> Option<crate::api::v1beta1::MetalLBServiceBGPStatus> {
        // Reaches the sessions now, before the status objects below (API
        // calls that may be slow).
        let name = key.to_string();
        self.bgp.set_service(&name, plan.bgp);
        let peers = self.bgp.peers_of(&name);
        let svc = svc.filter(|_| !plan.ips.is_empty() && !peers.is_empty());
        let Some(svc) = svc else {
            if self.bgp_announced.contains_key(key) {
                tracing::info!(service = %key, "withdrawing (bgp)");
                self.set_announced_metrics(key, Protocol::Bgp, false);
                self.bgp_announced.remove(key);
            }
            return None;
        };
        if self.bgp_announced.get(key) != Some(&plan.ips) {
            self.set_announced_metrics(key, Protocol::Bgp, false);
            if !self.bgp_announced.contains_key(key) {
                tracing::info!(service = %key, ips = ?plan.ips, peers = ?peers, "announcing (bgp)");
            }
            self.bgp_announced.insert(key.clone(), plan.ips.clone());
            self.set_announced_metrics(key, Protocol::Bgp, true);
        }
        let ev = events::node_assigned(&self.opts.node, Protocol::Bgp);
        self.recorder
            .publish(&Recorder::reference(svc.as_ref()), &ev)
            .await;
        Some(status::desired_bgp_status(
            &self.opts.node,
            &key.namespace,
            &key.name,
            peers,
        ))
    }

    /// Sets (or removes) `metallb_speaker_announced` for what `key`
    /// announces with `protocol`.
    pub(super) fn set_announced_metrics(&self, key: &ServiceKey, protocol: Protocol, on: bool) {
        let ips: &[IpAddr] = match protocol {
            Protocol::Bgp => self.bgp_announced.get(key).map(Vec::as_slice),
            Protocol::Layer2 => self.announced.get(key).map(|a| a.ips.as_slice()),
        }
        .unwrap_or_default();
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

    pub(super) async fn withdraw(&mut self, key: &ServiceKey) {
        if self.announced.contains_key(key) {
            tracing::info!(service = %key, "withdrawing");
            self.set_announced_metrics(key, Protocol::Layer2, false);
            self.announced.remove(key);
        }
        self.announcer.withdraw(&key.to_string()).await;
    }
}
