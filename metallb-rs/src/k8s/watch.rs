//! Reflectors: a local cache ([`Store`]) of a kind, kept current by a
//! watch with kube-runtime's backoff, plus a callback per watch event so
//! the runner can queue work. [`Watches`] holds a component's watches and
//! waits until every one has listed. Shared by controller and speaker.

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use tokio::task::JoinSet;

/// A component's watches: their tasks (aborted when this is dropped) and
/// whether each has listed.
#[derive(Default)]
pub struct Watches {
    tasks: JoinSet<()>,
    listed: Vec<(String, BoxFuture<'static, bool>)>,
}

impl Watches {
    /// No watches yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts watching `api` and returns the store it fills. `on_event`
    /// sees every event after the store applied it; watch errors are
    /// logged and retried with backoff. Objects are cached without
    /// `managedFields` and kubectl's last-applied annotation (often most
    /// of an object's size).
    pub fn spawn<K>(
        &mut self,
        api: Api<K>,
        config: watcher::Config,
        on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
    ) -> Store<K>
    where
        K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
    {
        self.spawn_trimmed(api, config, |_| {}, on_event)
    }

    /// Like [`Watches::spawn`], with `trim` removing further fields the
    /// caller never reads before objects are cached.
    pub fn spawn_trimmed<K>(
        &mut self,
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
        let what = kind.clone();
        self.tasks.spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(event) => on_event(&event),
                    Err(e) => tracing::warn!(kind = %what, error = %e, "watch failed, retrying"),
                }
            }
        });
        let store = reader.clone();
        self.listed.push((
            kind,
            Box::pin(async move { store.wait_until_ready().await.is_ok() }),
        ));
        reader
    }

    /// Watches `api` without caching its objects: `on_event` sees every
    /// event (typically feeding an [`crate::k8s::index::Index`] that keeps
    /// a summary of each object), and [`Watches::wait_until_listed`] waits
    /// for its first full list like any other watch.
    pub fn spawn_uncached<K>(
        &mut self,
        api: Api<K>,
        config: watcher::Config,
        mut on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
    ) where
        K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        let kind = K::kind(&K::DynamicType::default()).to_string();
        let (listed_tx, mut listed_rx) = tokio::sync::watch::channel(false);
        let stream = watcher(api, config).default_backoff();
        let what = kind.clone();
        self.tasks.spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(event) => {
                        on_event(&event);
                        if matches!(event, watcher::Event::InitDone) {
                            listed_tx.send_replace(true);
                        }
                    }
                    Err(e) => tracing::warn!(kind = %what, error = %e, "watch failed, retrying"),
                }
            }
        });
        self.listed.push((
            kind,
            Box::pin(async move { listed_rx.wait_for(|listed| *listed).await.is_ok() }),
        ));
    }

    /// Waits until every watch started so far has listed; an error names
    /// the first one that stopped before.
    pub async fn wait_until_listed(&mut self) -> anyhow::Result<()> {
        for (kind, listed) in std::mem::take(&mut self.listed) {
            anyhow::ensure!(listed.await, "the {kind} watch stopped before listing");
        }
        Ok(())
    }
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
