//! A secondary index over a watched kind: which objects belong to each
//! key (the service an EndpointSlice or a status object is for), kept
//! current by the watch's events. Work on one key then reads its few
//! objects instead of scanning the whole cache: a change of one service
//! costs the same with 1,000 services as with 10,000.
//!
//! Beside each object's reference the index can keep a summary of it
//! (`V`, computed from the object when its event arrives): a kind read
//! only through such summaries needs no cache of whole objects at all
//! (see [`crate::k8s::watch::Watches::spawn_uncached`]).
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

/// Objects of kind `K` by key `Q`, each with its summary `V` (none by
/// default). Cloning shares the index.
pub struct Index<Q, K: Resource, V = ()> {
    inner: Arc<Mutex<Inner<Q, K, V>>>,
    key: fn(&K) -> Option<Q>,
    value: fn(&K) -> V,
}

impl<Q, K: Resource, V> Clone for Index<Q, K, V> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            key: self.key,
            value: self.value,
        }
    }
}

struct Inner<Q, K: Resource, V> {
    current: Map<Q, K, V>,
    /// Being built by a relist.
    next: Option<Map<Q, K, V>>,
}

/// Most keys hold one object (one EndpointSlice or status object per
/// service), so each holds a small `Vec` rather than a hash set (whose
/// smallest table is several times the size of one reference), and the
/// references carry only kind, namespace and name.
struct Map<Q, K: Resource, V> {
    by_key: HashMap<Q, Vec<(ObjectRef<K>, V)>>,
    key_of: HashMap<ObjectRef<K>, Q>,
}

impl<Q, K: Resource, V> Default for Map<Q, K, V> {
    fn default() -> Self {
        Self {
            by_key: HashMap::new(),
            key_of: HashMap::new(),
        }
    }
}

impl<Q, K, V> Map<Q, K, V>
where
    Q: Eq + Hash + Clone,
    K: Resource,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    fn remove(&mut self, r: &ObjectRef<K>) {
        if let Some(old) = self.key_of.remove(r)
            && let Some(set) = self.by_key.get_mut(&old)
        {
            set.retain(|(o, _)| o != r);
            if set.is_empty() {
                self.by_key.remove(&old);
            }
        }
    }

    fn insert(&mut self, r: ObjectRef<K>, key: Option<Q>, value: V) {
        self.remove(&r);
        if let Some(key) = key {
            // Room for one: a `Vec`'s first growth makes room for four.
            self.by_key
                .entry(key.clone())
                .or_insert_with(|| Vec::with_capacity(1))
                .push((r.clone(), value));
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
    /// An empty index keying each object by `key` (None: not indexed),
    /// keeping only references (read the objects from their [`Store`]).
    pub fn new(key: fn(&K) -> Option<Q>) -> Self {
        Self::with_values(key, |_| ())
    }
}

impl<Q, K, V> Index<Q, K, V>
where
    Q: Eq + Hash + Clone,
    K: Resource + Clone,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    /// An empty index keying each object by `key` (None: not indexed)
    /// and keeping `value(object)` beside its reference.
    pub fn with_values(key: fn(&K) -> Option<Q>, value: fn(&K) -> V) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                current: Map::default(),
                next: None,
            })),
            key,
            value,
        }
    }

    /// Applies one watch event (call it from the watch's callback).
    pub fn observe(&self, event: &watcher::Event<K>) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            watcher::Event::Init => inner.next = Some(Map::default()),
            watcher::Event::InitApply(o) => {
                let (r, key, value) = (reference(o), (self.key)(o), (self.value)(o));
                match inner.next.as_mut() {
                    Some(next) => next.insert(r, key, value),
                    None => inner.current.insert(r, key, value),
                }
            }
            watcher::Event::InitDone => {
                if let Some(next) = inner.next.take() {
                    inner.current = next;
                }
            }
            watcher::Event::Apply(o) => {
                let (key, value) = ((self.key)(o), (self.value)(o));
                inner.current.insert(reference(o), key, value);
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
            .map(|v| v.iter().map(|(r, _)| r.clone()).collect())
            .unwrap_or_default()
    }

    /// The cached objects indexed under `key` (those `store` still has).
    pub fn get(&self, store: &Store<K>, key: &Q) -> Vec<Arc<K>> {
        self.refs(key).iter().filter_map(|r| store.get(r)).collect()
    }

    /// Calls `f` with the summaries of the objects under `key` (none: an
    /// empty slice).
    pub fn with<T>(&self, key: &Q, f: impl FnOnce(&mut dyn Iterator<Item = &V>) -> T) -> T {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let list = inner.current.by_key.get(key).map(Vec::as_slice);
        f(&mut list.unwrap_or_default().iter().map(|(_, v)| v))
    }

    /// Calls `f` once per key with the summaries of its objects.
    pub fn each(&self, mut f: impl FnMut(&Q, &mut dyn Iterator<Item = &V>)) {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        for (key, list) in &inner.current.by_key {
            f(key, &mut list.iter().map(|(_, v)| v));
        }
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
    fn keeps_each_objects_summary_beside_it() {
        let index = Index::with_values(group, |c: &ConfigMap| c.metadata.name.clone());
        let summaries = |key: &str| {
            let mut v: Vec<String> =
                index.with(&key.to_owned(), |it| it.flatten().cloned().collect());
            v.sort();
            v
        };
        index.observe(&watcher::Event::Apply(cm("a", Some("x"))));
        index.observe(&watcher::Event::Apply(cm("b", Some("x"))));
        assert_eq!(summaries("x"), ["a", "b"]);
        index.observe(&watcher::Event::Apply(cm("a", Some("y"))));
        assert_eq!(summaries("x"), ["b"], "moved away with its summary");
        assert_eq!(summaries("y"), ["a"]);
        assert!(summaries("z").is_empty());
        let mut all = Vec::new();
        index.each(|key, it| all.push((key.clone(), it.count())));
        all.sort();
        assert_eq!(all, [("x".to_owned(), 1), ("y".to_owned(), 1)]);
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
