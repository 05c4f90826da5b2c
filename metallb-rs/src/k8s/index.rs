//! A secondary index over a watched kind: which cached objects belong to
//! each key (the service an EndpointSlice or a status object is for),
//! kept current by the watch's events. Work on one key then reads its few
//! objects instead of scanning the whole cache: a change of one service
//! costs the same with 1,000 services as with 10,000.
//!
//! A relist (the watch's `Init` .. `InitDone`) builds the index afresh
//! and swaps it in whole, so objects deleted while the watch was down do
//! not linger.

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

/// Objects of kind `K` by key `Q`. Cloning shares the index.
pub struct Index<Q, K: Resource> {
    inner: Arc<Mutex<Inner<Q, K>>>,
    key: fn(&K) -> Option<Q>,
}

impl<Q, K: Resource> Clone for Index<Q, K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            key: self.key,
        }
    }
}

struct Inner<Q, K: Resource> {
    current: Map<Q, K>,
    /// Being built by a relist.
    next: Option<Map<Q, K>>,
}

/// Most keys hold one object (one EndpointSlice or status object per
/// service), so each holds a small `Vec` rather than a hash set (whose
/// smallest table is several times the size of one reference), and the
/// references carry only kind, namespace and name: an index of 10,000
/// services stays a few hundred KiB.
struct Map<Q, K: Resource> {
    by_key: HashMap<Q, Vec<ObjectRef<K>>>,
    key_of: HashMap<ObjectRef<K>, Q>,
}

impl<Q, K: Resource> Default for Map<Q, K> {
    fn default() -> Self {
        Self {
            by_key: HashMap::new(),
            key_of: HashMap::new(),
        }
    }
}

impl<Q, K> Map<Q, K>
where
    Q: Eq + Hash + Clone,
    K: Resource,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    fn remove(&mut self, r: &ObjectRef<K>) {
        if let Some(old) = self.key_of.remove(r)
            && let Some(set) = self.by_key.get_mut(&old)
        {
            set.retain(|o| o != r);
            if set.is_empty() {
                self.by_key.remove(&old);
            }
        }
    }

    fn insert(&mut self, r: ObjectRef<K>, key: Option<Q>) {
        self.remove(&r);
        if let Some(key) = key {
            self.by_key.entry(key.clone()).or_default().push(r.clone());
            self.key_of.insert(r, key);
        }
    }
}

/// `o`'s kind, namespace and name: what identifies it in a [`Store`]
/// (its resource version and uid would only take room).
fn reference<K>(o: &K) -> ObjectRef<K>
where
    K: Resource,
    K::DynamicType: Default,
{
    let mut r = ObjectRef::from_obj(o);
    r.extra = Default::default();
    r
}

impl<Q, K> Index<Q, K>
where
    Q: Eq + Hash + Clone,
    K: Resource + Clone,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    /// An empty index keying each object by `key` (None: not indexed).
    pub fn new(key: fn(&K) -> Option<Q>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                current: Map::default(),
                next: None,
            })),
            key,
        }
    }

    /// Applies one watch event (call it from the watch's callback).
    pub fn observe(&self, event: &watcher::Event<K>) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            watcher::Event::Init => inner.next = Some(Map::default()),
            watcher::Event::InitApply(o) => {
                let r = reference(o);
                let key = (self.key)(o);
                match inner.next.as_mut() {
                    Some(next) => next.insert(r, key),
                    None => inner.current.insert(r, key),
                }
            }
            watcher::Event::InitDone => {
                if let Some(next) = inner.next.take() {
                    inner.current = next;
                }
            }
            watcher::Event::Apply(o) => {
                let key = (self.key)(o);
                inner.current.insert(reference(o), key);
            }
            watcher::Event::Delete(o) => inner.current.remove(&reference(o)),
        }
    }

    /// The references indexed under `key`.
    pub fn refs(&self, key: &Q) -> Vec<ObjectRef<K>> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .current
            .by_key
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    /// The cached objects indexed under `key` (those `store` still has).
    pub fn get(&self, store: &Store<K>, key: &Q) -> Vec<Arc<K>> {
        self.refs(key).iter().filter_map(|r| store.get(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(name: &str, group: Option<&str>) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some("ns".into());
        if let Some(g) = group {
            c.metadata.labels = Some([("group".to_owned(), g.to_owned())].into());
        }
        c
    }

    fn group(c: &ConfigMap) -> Option<String> {
        c.metadata.labels.as_ref()?.get("group").cloned()
    }

    fn names(index: &Index<String, ConfigMap>, key: &str) -> Vec<String> {
        let mut v: Vec<String> = index
            .refs(&key.to_owned())
            .into_iter()
            .map(|r| r.name)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn follows_applies_relabels_and_deletes() {
        let index = Index::new(group);
        index.observe(&watcher::Event::Apply(cm("a", Some("x"))));
        index.observe(&watcher::Event::Apply(cm("b", Some("x"))));
        index.observe(&watcher::Event::Apply(cm("c", None)));
        assert_eq!(names(&index, "x"), ["a", "b"]);
        index.observe(&watcher::Event::Apply(cm("b", Some("y"))));
        assert_eq!(names(&index, "x"), ["a"]);
        assert_eq!(names(&index, "y"), ["b"]);
        index.observe(&watcher::Event::Delete(cm("a", Some("x"))));
        assert!(names(&index, "x").is_empty());
        let inner = index.inner.lock().expect("lock");
        assert!(
            !inner.current.by_key.contains_key("x"),
            "no empty sets kept"
        );
    }

    #[test]
    fn a_relist_replaces_the_index_whole() {
        let index = Index::new(group);
        index.observe(&watcher::Event::Apply(cm("gone", Some("x"))));
        index.observe(&watcher::Event::Apply(cm("kept", Some("x"))));
        index.observe(&watcher::Event::Init);
        index.observe(&watcher::Event::InitApply(cm("kept", Some("x"))));
        // Until the relist is done, the old index answers.
        assert_eq!(names(&index, "x"), ["gone", "kept"]);
        index.observe(&watcher::Event::InitDone);
        assert_eq!(names(&index, "x"), ["kept"], "deleted while not watching");
    }
}
