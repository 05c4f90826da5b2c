//! The speaker's status objects (ServiceL2Status, ServiceBGPStatus):
//! create, update and delete this node's, with retries through the queue.

use super::*;
use futures::StreamExt;

/// Services whose status writes are in flight at once. Each service's
/// own actions stay in order; a failover that hands this node thousands
/// of services then costs a few round trips per batch, not one per
/// object.
const STATUS_WRITES_IN_FLIGHT: usize = 16;

/// One service's status actions for kind `K`, planned, not sent yet.
pub(super) struct StatusWrites<K: StatusObject> {
    key: ServiceKey,
    actions: Vec<status::Action<K::Status>>,
}

/// How one service's actions went: whether it created an object, and the
/// action that failed with its error.
type Outcome = (bool, Result<(), (String, CallError)>);

impl Runner {
    /// What it takes to bring the status objects of kind `K` for `key` to
    /// `desired`.
    pub(super) fn plan_status<K: StatusObject>(
        &mut self,
        key: &ServiceKey,
        desired: Option<&K::Status>,
        existing: Option<&Vec<Arc<K>>>,
    ) -> StatusWrites<K> {
        let refs: Vec<&K> = existing.into_iter().flatten().map(|o| &**o).collect();
        let created_key = (K::GENERATE_NAME, key.clone());
        let mine_seen = refs
            .iter()
            .any(|o| o.labels().get(status::NODE_LABEL) == Some(&self.opts.node));
        let creating = self.created.in_flight(&created_key, |_| mine_seen);
        let alive = &self.alive;
        let gone = |node: &str| !alive.contains(node);
        let actions = status::plan(&self.opts.node, &refs, desired, gone)
            .into_iter()
            .filter(|a| !(creating && matches!(a, status::Action::Create(_))))
            .collect();
        StatusWrites {
            key: key.clone(),
            actions,
        }
    }

    /// Sends the planned writes, [`STATUS_WRITES_IN_FLIGHT`] services at
    /// a time, and records each service's outcome: objects created are
    /// remembered until the watch shows them, a failure is retried with
    /// backoff through the queue.
    pub(super) async fn send_statuses<K: StatusObject>(&mut self, writes: Vec<StatusWrites<K>>) {
        if writes.is_empty() {
            return;
        }
        let api: Api<K> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        let this = &*self;
        let outcomes: Vec<(ServiceKey, Outcome)> = futures::stream::iter(writes)
            .map(|w| {
                let api = api.clone();
                async move {
                    let outcome = this.run_actions(&api, &w).await;
                    (w.key, outcome)
                }
            })
            .buffer_unordered(STATUS_WRITES_IN_FLIGHT)
            .collect()
            .await;
        for (key, (created, result)) in outcomes {
            if created {
                self.created
                    .wrote((K::GENERATE_NAME, key.clone()), String::new());
            }
            let work = Work::Service(key.clone());
            match result {
                Ok(()) => self.queue.done(&work),
                Err((action, e)) => {
                    self.metrics.k8s.update_errors.inc();
                    // Look at the service again later, whatever else
                    // happens meanwhile.
                    let class = classify(&e);
                    let retry_in = self.queue.retry(work, class);
                    tracing::warn!(service = %key, kind = %K::kind(&()), action = %action, error = %e, ?class, ?retry_in, "could not update the status object");
                }
            }
        }
    }

    /// One service's actions, in order, up to the first failure.
    async fn run_actions<K: StatusObject>(&self, api: &Api<K>, w: &StatusWrites<K>) -> Outcome {
        let mut created = false;
        for action in &w.actions {
            let result = match action {
                status::Action::Delete { name } => {
                    match call(api.delete(name, &DeleteParams::default())).await {
                        Err(CallError::Api(kube::Error::Api(s))) if s.code == 404 => Ok(()),
                        other => other.map(|_| ()),
                    }
                }
                status::Action::PatchStatus { name, status } => call(api.patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": status })),
                ))
                .await
                .map(|_| ()),
                status::Action::Create(st) => self.create_status(api, &w.key, st).await,
            };
            match result {
                Ok(()) => created |= matches!(action, status::Action::Create(_)),
                Err(e) => return (created, Err((format!("{action:?}"), e))),
            }
        }
        (created, Ok(()))
    }

    pub(super) async fn create_status<K: StatusObject>(
        &self,
        api: &Api<K>,
        key: &ServiceKey,
        st: &K::Status,
    ) -> Result<(), CallError> {
        let obj: K = serde_json::from_value(json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "metadata": {
                "generateName": K::GENERATE_NAME,
                "namespace": self.opts.namespace,
                "labels": {
                    status::NODE_LABEL: self.opts.node,
                    status::SERVICE_NAME_LABEL: key.name,
                    status::SERVICE_NAMESPACE_LABEL: key.namespace,
                },
                "ownerReferences": self.owner.iter().collect::<Vec<_>>(),
            },
        }))
        .map_err(|e| CallError::Api(kube::Error::SerdeError(e)))?;
        let created = call(api.create(&PostParams::default(), &obj)).await?;
        call(api.patch_status(
            &created.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": st })),
        ))
        .await?;
        Ok(())
    }

    pub(super) async fn delete_own_statuses(&self) {
        self.delete_own::<ServiceL2Status>(&self.stores.statuses)
            .await;
        self.delete_own::<ServiceBGPStatus>(&self.stores.bgp_statuses)
            .await;
    }

    pub(super) async fn delete_own<K: StatusObject>(&self, store: &Store<K>) {
        let api: Api<K> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        for o in store.state() {
            if o.labels().get(status::NODE_LABEL) == Some(&self.opts.node) {
                let _ = crate::k8s::call::call(api.delete(&o.name_any(), &DeleteParams::default()))
                    .await;
            }
        }
    }
}
