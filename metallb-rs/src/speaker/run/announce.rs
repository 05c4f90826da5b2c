//! One service: decide whether and how this node announces it (layer 2,
//! BGP), announce or withdraw, events and metrics.

use super::*;

impl Runner {
    /// The service behind `key` when this speaker has to consider it: our
    /// class, a LoadBalancer, addresses from a pool.
    pub(super) fn subject(&self, key: &ServiceKey, index: &Index) -> Option<Subject> {
        let svc = self.stores.services.get(&key.object_ref())?;
        if !svcs::class_matches(&svc, self.opts.lb_class.as_deref())
            || !svcs::is_load_balancer(&svc)
        {
            return None;
        }
        let ips = svcs::ingress_ips(&svc).ok().filter(|i| !i.is_empty())?;
        let config = self.config.as_ref()?;
        let Some(pool) = config.pool_for(&ips) else {
            tracing::debug!(service = %key, ips = ?ips, "not announcing: the addresses are in no pool");
            return None;
        };
        let slices = index.slices.get(key).map(Vec::as_slice).unwrap_or_default();
        let endpoints = Endpoints::from_slices(slices.iter().map(|s| &**s));
        Some(Subject {
            pool: pool.name.clone(),
            svc,
            ips,
            endpoints,
        })
    }

    /// Whether this node announces `s` in layer 2, and from where.
    pub(super) fn decide(&self, key: &ServiceKey, s: &Subject) -> Option<Interfaces> {
        if self.isolated {
            return None;
        }
        let config = self.config.as_ref()?;
        let sharing = svcs::sharing_key(&s.svc);
        let input = election::Input {
            service_labels: s.svc.labels(),
            shared: !sharing.sharing.is_empty(),
            local: s.local(),
            first_ip: s.ips[0],
            pool: &s.pool,
            advertisements: &config.l2_advertisements,
            nodes: &self.node_view,
            alive: Some(&self.alive),
            endpoints: &s.endpoints,
            ignore_exclude_lb: self.opts.ignore_exclude_lb,
        };
        match election::decide(&input, &self.opts.node) {
            Decision::Announce(interfaces) => Some(interfaces),
            Decision::NotOwner(reason) => {
                tracing::debug!(service = %key, %reason, "not announcing");
                None
            }
        }
    }

    /// What this node announces for `s` over BGP, per peer.
    pub(super) fn decide_bgp(&self, key: &ServiceKey, s: &Subject) -> advertise::PeerRoutes {
        let me = self.node_view.iter().find(|n| n.name == self.opts.node);
        let (Some(config), Some(me)) = (self.config.as_ref(), me) else {
            return advertise::PeerRoutes::new();
        };
        if self.isolated || config.bgp_advertisements.is_empty() {
            return advertise::PeerRoutes::new();
        }
        let svc = advertise::Service {
            labels: s.svc.labels(),
            local: s.local(),
            ips: &s.ips,
            pool: &s.pool,
            endpoints: &s.endpoints,
        };
        match advertise::routes(config, me, &svc, self.opts.ignore_exclude_lb) {
            Ok(r) => r,
            Err(reason) => {
                if reason.is_config_problem() {
                    tracing::warn!(service = %key, %reason, "not announcing over BGP");
                } else {
                    tracing::debug!(service = %key, %reason, "not announcing over BGP");
                }
                advertise::PeerRoutes::new()
            }
        }
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
        let subject = self.subject(key, index);
        let l2 = subject
            .as_ref()
            .and_then(|s| Some((s.svc.clone(), s.ips.clone(), self.decide(key, s)?)));
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
        let bgp_desired = self.process_bgp(key, subject.as_ref()).await;
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
        subject: Option<&Subject>,
    ) -> Option<crate::api::v1beta1::MetalLBServiceBGPStatus> {
        let routes = subject.map(|s| self.decide_bgp(key, s)).unwrap_or_default();
        // Reaches the sessions now, before the status objects below (API
        // calls that may be slow).
        let name = key.to_string();
        self.bgp.set_service(&name, routes);
        let peers = self.bgp.peers_of(&name);
        let Some(s) = subject.filter(|_| !peers.is_empty()) else {
            if self.bgp_announced.contains_key(key) {
                tracing::info!(service = %key, "withdrawing (bgp)");
                self.set_announced_metrics(key, Protocol::Bgp, false);
                self.bgp_announced.remove(key);
            }
            return None;
        };
        if self.bgp_announced.get(key) != Some(&s.ips) {
            self.set_announced_metrics(key, Protocol::Bgp, false);
            if !self.bgp_announced.contains_key(key) {
                tracing::info!(service = %key, ips = ?s.ips, peers = ?peers, "announcing (bgp)");
            }
            self.bgp_announced.insert(key.clone(), s.ips.clone());
            self.set_announced_metrics(key, Protocol::Bgp, true);
        }
        let ev = events::node_assigned(&self.opts.node, Protocol::Bgp);
        self.recorder
            .publish(&Recorder::reference(s.svc.as_ref()), &ev)
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
