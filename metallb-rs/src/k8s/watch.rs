//! Reflectors: a local cache ([`Store`]) of a kind, kept current by a
//! watch with kube-runtime's backoff, plus a callback per watch event so
//! the runner can queue work. Shared by controller and speaker.

use futures::StreamExt;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use tokio::task::JoinSet;

/// Starts watching `api` in `tasks` (aborted when the set is dropped) and
/// returns the store it fills. `on_event` sees every event after the
/// store applied it; watch errors are logged and retried with backoff.
/// Objects are cached without `managedFields` and kubectl's
/// last-applied annotation (often most of an object's size).
pub fn spawn<K>(
    tasks: &mut JoinSet<()>,
    api: Api<K>,
    config: watcher::Config,
    on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
) -> Store<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    spawn_trimmed(tasks, api, config, |_| {}, on_event)
}

/// Like [`spawn`], with `trim` removing further fields the caller never
/// reads before objects are cached.
pub fn spawn_trimmed<K>(
    tasks: &mut JoinSet<()>,
    api: Api<K>,
    config: watcher::Config,
    mut trim: impl FnMut(&mut K) + Send + 'static,
    mut on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
) -> Store<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(move |obj: &mut K| {
            let meta = obj.meta_mut();
            meta.managed_fields = None;
            if let Some(a) = meta.annotations.as_mut() {
                a.remove("kubectl.kubernetes.io/last-applied-configuration");
            }
            trim(obj);
        })
        .reflect(writer);
    tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => on_event(&event),
                Err(e) => tracing::warn!(kind = %kind, error = %e, "watch failed, retrying"),
            }
        }
    });
    reader
}

/// The object an event is about, if it is about one.
pub fn object<K>(event: &watcher::Event<K>) -> Option<&K> {
    match event {
        watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o) => {
            Some(o)
        }
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}
