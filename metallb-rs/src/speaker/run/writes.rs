//! The speaker's status objects (ServiceL2Status, ServiceBGPStatus):
//! create, update and delete this node's, with retries through the queue.

use super::*;

impl Runner {
    /// Brings the status objects of kind `K` for `key` to `desired`.
    pub(super) async fn sync_status<K: StatusObject>(
        &mut self,
        key: &ServiceKey,
        desired: Option<&K::Status>,
        existing: Option<&Vec<Arc<K>>>,
    ) {
        let refs: Vec<&K> = existing.into_iter().flatten().map(|o| &**o).collect();
        let created_key = (K::GENERATE_NAME, key.clone());
        let mine_seen = refs
            .iter()
            .any(|o| o.labels().get(status::NODE_LABEL) == Some(&self.opts.node));
        let creating = self.created.in_flight(&created_key, |_| mine_seen);
        let alive = &self.alive;
        let gone = |node: &str| !alive.contains(node);
        let actions: Vec<status::Action<K::Status>> =
            status::plan(&self.opts.node, &refs, desired, gone)
                .into_iter()
                .filter(|a| !(creating && matches!(a, status::Action::Create(_))))
                .collect();
        let api: Api<K> = Api::namespaced(self.client.clone(), &self.opts.namespace);
        let work = Work::Service(key.clone());
        for action in actions {
            let result = match &action {
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
                status::Action::Create(st) => self.create_status(&api, key, st).await,
            };
            match result {
                Ok(()) => {
                    if matches!(action, status::Action::Create(_)) {
                        self.created.wrote(created_key.clone(), String::new());
                    }
                }
                Err(e) => {
                    self.metrics.k8s.update_errors.inc();
                    // Look at the service again later, whatever else
                    // happens meanwhile.
                    let class = classify(&e);
                    let retry_in = self.queue.retry(work, class);
                    tracing::warn!(service = %key, kind = %K::kind(&()), action = ?action, error = %e, ?class, ?retry_in, "could not update the status object");
                    return;
                }
            }
        }
        self.queue.done(&work);
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
