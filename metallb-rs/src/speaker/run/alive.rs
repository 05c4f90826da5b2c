//! Who counts as alive: presence leases, gossip membership, isolation.

use super::*;

/// Reads the gossip secret: the mounted file, or the Secret through the
/// API; the error says which and what to do.
pub(super) async fn membership_secret(
    client: &kube::Client,
    namespace: &str,
    ml: &MembershipOptions,
) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context as _;
    if let Some(path) = &ml.secret_path {
        return std::fs::read(path).with_context(|| {
            format!(
                "reading the memberlist secret from {} (--ml-secret-key-path): mount Secret {}",
                path.display(),
                ml.secret_name
            )
        });
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = crate::k8s::call::call(secrets.get_opt(&ml.secret_name)).await?.with_context(|| {
        format!(
            "Secret {namespace}/{} does not exist yet: the controller creates it; or create it with a random `{SECRET_KEY}`",
            ml.secret_name
        )
    })?;
    let data = secret
        .data
        .and_then(|mut d| d.remove(SECRET_KEY))
        .filter(|v| !v.0.is_empty())
        .with_context(|| {
            format!(
                "Secret {namespace}/{} has no `{SECRET_KEY}`",
                ml.secret_name
            )
        })?;
    Ok(data.0)
}

/// Where each other node's speaker gossips: its InternalIP of the bind
/// address's family, on the bind port (speakers use the host network).
pub(super) fn seeds(nodes: &[Arc<Node>], me: &str, bind: SocketAddr) -> Vec<(String, SocketAddr)> {
    nodes
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.clone()?;
            if name == me {
                return None;
            }
            let ip = n
                .status
                .as_ref()?
                .addresses
                .as_ref()?
                .iter()
                .filter(|a| a.type_ == "InternalIP")
                .filter_map(|a| a.address.parse::<IpAddr>().ok())
                .find(|ip| ip.is_ipv6() == bind.is_ipv6())?;
            Some((name, SocketAddr::new(ip, bind.port())))
        })
        .collect()
}

/// What judging liveness remembers from one pass to the next.
#[derive(Default)]
pub(super) struct Judging {
    /// Each presence lease's version and when we first saw it: renewals
    /// are judged on our clock, never the renewer's (see `presence`).
    lease_seen: BTreeMap<String, crate::k8s::observed::Observation>,
    /// The rest of what `liveness::assess` remembers.
    pub(super) memory: liveness::Judging,
    /// The speakers partition safety weighs (`liveness::voters`), for
    /// the guard; `None` until the first pass.
    pub(super) voters: tokio::sync::watch::Sender<Option<BTreeSet<String>>>,
}

impl Runner {
    /// Recomputes who counts as alive and whether this speaker is cut off
    /// (see `liveness::assess`); true when either changed.
    pub(super) fn refresh_liveness(&mut self) -> bool {
        let now = std::time::Instant::now();
        let j = &mut self.judging;
        let cached = self.stores.leases.state();
        let leases = presence::states(cached.iter().map(|l| &**l), &mut j.lease_seen, now);
        let nodes = &self.stores.nodes;
        let marks = presence::marks(cached.iter().map(|l| &**l), |n| {
            nodes.get(&ObjectRef::new(n)).is_some()
        });
        let view = self.membership.as_ref().map(|m| m.view());
        let record = *self.renewals.borrow();
        let own_write_seen = presence::version_of(cached.iter().map(|l| &**l), &self.opts.node)
            .and_then(|version| record.sent_of(version));
        let a = liveness::assess(
            &mut j.memory,
            &liveness::Inputs {
                now,
                me: &self.opts.node,
                api_ok: record.api_ok(now),
                api_latency: record.latency,
                view: view.as_ref(),
                nodes: &self.node_view,
                leases: &leases,
                marks: &marks,
                own_write_seen,
                last_write_sent: record.witnesses[0].map(|(_, sent)| sent),
            },
        );
        if let Some(renewal) = &self.renewal {
            renewal.set_mark(a.mark());
            if a.renew_now {
                renewal.renew_now();
            }
        }
        if let Some(voters) = a.voters {
            j.voters.send_if_modified(|old| {
                let changed = old.as_ref() != Some(&voters);
                *old = Some(voters);
                changed
            });
        }
        let changed = a.alive != self.alive || a.isolated != self.isolated;
        if changed {
            if !a.gone.is_empty() {
                tracing::info!(gone = ?a.gone, "speakers not counted");
            }
            if a.isolated != self.isolated {
                if a.isolated {
                    tracing::warn!(
                        "cut off from the API server and from most speakers: not answering for any address until either comes back"
                    );
                } else {
                    tracing::info!("no longer cut off: announcing again");
                }
            }
            self.alive = a.alive;
            self.isolated = a.isolated;
        }
        changed
    }

    /// Starts gossip membership when configured and its secret is
    /// readable; until then the speaker runs on leases alone (as upstream
    /// would wait for the Secret to be mounted) and retries on every lease
    /// renewal.
    pub(super) async fn start_membership(&mut self) {
        let Some(ml) = self.opts.membership.clone() else {
            return;
        };
        let started = async {
            let secret = membership_secret(&self.client, &self.opts.namespace, &ml).await?;
            let membership = Membership::start(crate::speaker::membership::Config {
                node: self.opts.node.clone(),
                bind: ml.bind,
                secret,
                timing: ml.timing.clone(),
                run: self.gossip_run.unwrap_or_else(|| {
                    crate::speaker::membership::next_run(
                        crate::speaker::membership::wall_millis(),
                        None,
                    )
                }),
            })
            .await?;
            anyhow::Ok(membership)
        };
        match started.await {
            Ok(m) => {
                m.join(seeds(&self.stores.nodes.state(), &self.opts.node, ml.bind));
                tracing::info!(bind = %ml.bind, "gossip membership started");
                if let Err(e) = self.registry.register(Box::new(m.metrics())) {
                    tracing::warn!(error = %e, "gossip metrics not served");
                }
                self.membership = Some(m);
                self.judging
                    .memory
                    .gossip_started(std::time::Instant::now());
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "gossip membership not started yet; retrying");
            }
        }
    }

    /// Reads the gossip keys from the cached `memberlist` Secret
    /// (`secretkey` seals, every `secretkey-*` opens too) and hands them
    /// to membership when they changed: a key rotation needs no restart.
    /// A Secret mounted as a file (`--ml-secret-key-path`) is read once.
    pub(super) fn refresh_keyring(&mut self) {
        let (Some(m), Some(ml)) = (&self.membership, &self.opts.membership) else {
            return;
        };
        if ml.secret_path.is_some() {
            return;
        }
        let Some(secret) = self.stores.config.secret(&ml.secret_name) else {
            return;
        };
        let data = secret.data.iter().flatten();
        let keyring = match super::super::membership::Keyring::from_secret_data(
            data.map(|(k, v)| (k.as_str(), v.0.as_slice())),
        ) {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!(error = %e, secret = %ml.secret_name, "gossip keys unchanged: the Secret's keys are unusable");
                return;
            }
        };
        if self.keyring.as_ref() == Some(&keyring) {
            return;
        }
        if self.keyring.is_some() {
            tracing::info!(secret = %ml.secret_name, "gossip keys changed: using the new keyring");
        }
        m.set_keyring(keyring.clone());
        self.keyring = Some(keyring);
    }

    /// Starts renewing this speaker's presence lease (once).
    pub(super) fn start_renewal(&mut self, api: &Api<Lease>) {
        if self.renewal.is_none() {
            self.renewal = Some(Renewal::start(
                api.clone(),
                self.opts.node.clone(),
                self.stores.leases.clone(),
                self.stores.nodes.clone(),
                self.renewals.clone(),
                self.gossip_run,
            ));
        }
    }
}
