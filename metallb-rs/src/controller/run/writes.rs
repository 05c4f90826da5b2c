//! The controller's writes: services (annotations, then status), in
//! batches of [`WRITES_IN_FLIGHT`], and the pools' status counters; each
//! only while this replica leads and cut off at its step-down.

use super::*;

/// Service writes in flight at once. Deciding is serial (one allocator,
/// upstream's order); the writes it asks for go out together, so a batch
/// of new services costs a few round trips to the API server rather than
/// two per service.
pub(super) const WRITES_IN_FLIGHT: usize = 16;

/// What a service write returned: the resourceVersions written, or why
/// not.
type WriteResult = Result<Vec<String>, CallError>;

/// A service write decided, not sent yet.
pub(super) struct Planned {
    pub(super) key: ServiceKey,
    pub(super) svc: Arc<Service>,
    /// The resourceVersion it was decided from.
    pub(super) seen: Option<String>,
    pub(super) write: Write,
}

impl Runner {
    /// Runs one write while this replica leads, cut off at its step-down
    /// (see [`Acting::write_budget`]): no write of a replica that lost
    /// the lease is still being waited for once another may lead. `None`:
    /// not leading, nothing sent.
    pub(super) async fn write<T>(
        &self,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Option<Result<T, CallError>> {
        let budget = self
            .leading
            .borrow()
            .write_budget(tokio::time::Instant::now(), API_CALL_TIMEOUT)?;
        Some(match tokio::time::timeout(budget, call(request)).await {
            Ok(r) => r,
            Err(_) => Err(CallError::Timeout),
        })
    }

    /// Sends the planned writes, [`WRITES_IN_FLIGHT`] at a time, and
    /// records each outcome: the pending-write table for those that
    /// landed, a retry with backoff for those that failed.
    pub(super) async fn send(&mut self, writes: Vec<Planned>) {
        if writes.is_empty() {
            return;
        }
        let this = &*self;
        let results: Vec<(Planned, Option<WriteResult>)> = futures::stream::iter(writes)
            .map(|p| async move {
                let r = this.write_service(&p.svc, &p.write).await;
                (p, r)
            })
            .buffer_unordered(WRITES_IN_FLIGHT)
            .collect()
            .await;
        for (p, result) in results {
            let work = Work::Service(p.key.clone());
            match result {
                // Leadership ended before anything was sent.
                None => {}
                Some(Ok(mut written)) => {
                    tracing::info!(service = %p.key, ingress = ?p.write.ingress, "updated service");
                    // Until the cache shows our last version: the one we
                    // decided from and our intermediate ones.
                    written.pop();
                    written.insert(0, p.seen.unwrap_or_default());
                    self.pending.wrote(p.key, written);
                    self.queue.done(&work);
                }
                Some(Err(e)) => {
                    self.metrics.k8s.update_errors.inc();
                    let class = classify(&e);
                    let retry_in = self.queue.retry(work, class);
                    tracing::warn!(service = %p.key, error = %e, ?class, ?retry_in, "could not update service");
                }
            }
        }
    }

    /// Keeps every pool's status counters equal to the allocator's (a
    /// manual edit is reverted on its watch event).
    pub(super) async fn sync_pools(&mut self) {
        self.metrics.allocator.update(&self.alloc, &[]);
        if !self.may_act() {
            return;
        }
        let api: Api<IPAddressPool> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        for pool in self.pools.state() {
            let name = pool.name_any();
            let Some(c) = self.alloc.counters(&name) else {
                continue;
            };
            let desired = IPAddressPoolStatus {
                assigned_ipv4: c.assigned_ipv4,
                assigned_ipv6: c.assigned_ipv6,
                available_ipv4: c.available_ipv4,
                available_ipv6: c.available_ipv6,
            };
            if pool.status.as_ref() == Some(&desired) {
                continue;
            }
            let patch = json!({ "status": desired });
            let written = self
                .write(api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)))
                .await;
            let Some(written) = written else {
                return;
            };
            if let Err(e) = written {
                self.metrics.k8s.update_errors.inc();
                tracing::warn!(pool = %name, error = %e, "could not update pool status");
            }
        }
    }

    /// Applies `w` to `svc`: annotations, then status, each conditional on
    /// the resourceVersion it was decided from, each only while leading
    /// (see [`Runner::write`]). Returns the resourceVersions written, in
    /// order; `None` when leadership ended before the first write.
    pub(super) async fn write_service(&self, svc: &Service, w: &Write) -> Option<WriteResult> {
        let api: Api<Service> =
            Api::namespaced(self.client.clone(), &svc.namespace().unwrap_or_default());
        let name = svc.name_any();
        let mut rv = svc.resource_version().unwrap_or_default();
        let mut written = Vec::new();
        if !w.annotations.is_empty() {
            let anns: serde_json::Map<String, serde_json::Value> = w
                .annotations
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            let patch = json!({ "metadata": { "resourceVersion": rv, "annotations": anns } });
            let updated = match self
                .write(api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)))
                .await?
            {
                Ok(u) => u,
                Err(e) => return Some(Err(e)),
            };
            rv = updated.resource_version().unwrap_or_default();
            written.push(rv.clone());
        }
        if let Some(ips) = &w.ingress {
            let ingress = if ips.is_empty() {
                serde_json::Value::Null
            } else {
                ips.iter()
                    .map(|ip| json!({ "ip": ip.to_string() }))
                    .collect()
            };
            let patch = json!({
                "metadata": { "resourceVersion": rv },
                "status": { "loadBalancer": { "ingress": ingress } },
            });
            // Leadership may end between the two writes: the status is
            // then left to the next leader (the annotations alone change
            // no address).
            let updated = match self
                .write(api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)))
                .await
            {
                None => return Some(Err(CallError::Timeout)),
                Some(Ok(u)) => u,
                Some(Err(e)) => return Some(Err(e)),
            };
            written.push(updated.resource_version().unwrap_or_default());
        }
        Some(Ok(written))
    }
}
