//! The object store: every object as JSON, one global resourceVersion
//! counter, and a bounded event log from which watches resume. Pure data
//! structure; the HTTP layer holds it behind a mutex.

use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Identifies a collection: API group ("" for core) and plural.
pub type Collection = (String, String);

/// One change, as a watch delivers it.
#[derive(Debug, Clone)]
pub struct Event {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Collection the object belongs to.
    pub collection: Collection,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: EventKind,
    /// The object after the change (its final state, for deletes).
    pub object: Arc<Value>,
    /// The object before a modification, so selector-filtered watches can
    /// turn "no longer matches" into a delete.
    pub previous: Option<Arc<Value>>,
}

/// Watch event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted.
    Deleted,
}

impl EventKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// Why a watch cannot start where asked.
#[derive(Debug, PartialEq, Eq)]
pub struct Gone {
    /// The oldest resourceVersion a watch may still resume from.
    pub oldest: u64,
}

/// All objects plus the recent history.
#[derive(Debug)]
pub struct Store {
    objects: BTreeMap<Collection, BTreeMap<(String, String), Arc<Value>>>,
    log: VecDeque<Event>,
    log_capacity: usize,
    rv: u64,
    /// Events before this resourceVersion are no longer in the log.
    compacted_before: u64,
}

impl Store {
    /// An empty store keeping the last `log_capacity` events for watches.
    pub fn new(log_capacity: usize) -> Self {
        Self {
            objects: BTreeMap::new(),
            log: VecDeque::new(),
            log_capacity,
            rv: 1,
            compacted_before: 0,
        }
    }

    /// The current resourceVersion (of the newest change).
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// Hands out the next resourceVersion.
    pub fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// The object `namespace/name` of `collection`.
    pub fn get(&self, collection: &Collection, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.objects
            .get(collection)?
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Every object of `collection`, in `namespace` when given, sorted by
    /// namespace and name.
    pub fn list(&self, collection: &Collection, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let Some(objects) = self.objects.get(collection) else {
            return Vec::new();
        };
        objects
            .iter()
            .filter(|((ns, _), _)| namespace.is_none_or(|n| n == ns))
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// Every collection that holds objects.
    pub fn collections(&self) -> Vec<Collection> {
        self.objects.keys().cloned().collect()
    }

    /// Stores `object` (whose metadata.resourceVersion the caller set to a
    /// fresh [`Store::next_rv`]) and logs the change.
    pub fn put(
        &mut self,
        collection: &Collection,
        namespace: &str,
        name: &str,
        object: Value,
        kind: EventKind,
    ) -> Event {
        let object = Arc::new(object);
        let previous = self
            .objects
            .entry(collection.clone())
            .or_default()
            .insert((namespace.to_owned(), name.to_owned()), object.clone());
        self.record(collection, namespace, kind, object, previous)
    }

    /// Removes an object; `last` is its final state (with a fresh
    /// resourceVersion), as watchers see it.
    pub fn remove(
        &mut self,
        collection: &Collection,
        namespace: &str,
        name: &str,
        last: Value,
    ) -> Option<Event> {
        self.objects
            .get_mut(collection)?
            .remove(&(namespace.to_owned(), name.to_owned()))?;
        Some(self.record(
            collection,
            namespace,
            EventKind::Deleted,
            Arc::new(last),
            None,
        ))
    }

    fn record(
        &mut self,
        collection: &Collection,
        namespace: &str,
        kind: EventKind,
        object: Arc<Value>,
        previous: Option<Arc<Value>>,
    ) -> Event {
        let event = Event {
            rv: self.rv,
            collection: collection.clone(),
            namespace: namespace.to_owned(),
            kind,
            object,
            previous,
        };
        self.log.push_back(event.clone());
        while self.log.len() > self.log_capacity {
            if let Some(old) = self.log.pop_front() {
                self.compacted_before = old.rv + 1;
            }
        }
        event
    }

    /// The logged events of `collection` after resourceVersion `since`, or
    /// [`Gone`] when some of them were already compacted away.
    pub fn events_since(
        &self,
        collection: &Collection,
        namespace: Option<&str>,
        since: u64,
    ) -> Result<Vec<Event>, Gone> {
        if since + 1 < self.compacted_before {
            return Err(Gone {
                oldest: self.compacted_before,
            });
        }
        Ok(self
            .log
            .iter()
            .filter(|e| {
                e.rv > since
                    && &e.collection == collection
                    && namespace.is_none_or(|n| n == e.namespace)
            })
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn col() -> Collection {
        (String::new(), "configmaps".into())
    }

    fn put(store: &mut Store, ns: &str, name: &str) -> u64 {
        let rv = store.next_rv();
        store.put(
            &col(),
            ns,
            name,
            json!({ "metadata": { "name": name, "resourceVersion": rv.to_string() } }),
            EventKind::Added,
        );
        rv
    }

    #[test]
    fn events_resume_after_a_resource_version_in_order() {
        let mut store = Store::new(100);
        let a = put(&mut store, "x", "a");
        let b = put(&mut store, "y", "b");
        let c = put(&mut store, "x", "c");
        let since_a: Vec<u64> = store
            .events_since(&col(), None, a)
            .expect("kept")
            .iter()
            .map(|e| e.rv)
            .collect();
        assert_eq!(since_a, vec![b, c]);
        let in_x: Vec<u64> = store
            .events_since(&col(), Some("x"), 0)
            .expect("kept")
            .iter()
            .map(|e| e.rv)
            .collect();
        assert_eq!(in_x, vec![a, c]);
    }

    #[test]
    fn compacted_history_is_gone() {
        let mut store = Store::new(2);
        let first = put(&mut store, "x", "a");
        put(&mut store, "x", "b");
        let third = put(&mut store, "x", "c");
        put(&mut store, "x", "d");
        assert!(
            store.events_since(&col(), None, first).is_err(),
            "event after {first} was compacted"
        );
        assert_eq!(
            store.events_since(&col(), None, third).expect("kept").len(),
            1
        );
    }

    #[test]
    fn remove_logs_the_final_state() {
        let mut store = Store::new(10);
        put(&mut store, "x", "a");
        let rv = store.next_rv();
        let ev = store
            .remove(&col(), "x", "a", json!({"metadata": {"name": "a"}}))
            .expect("existed");
        assert_eq!((ev.kind, ev.rv), (EventKind::Deleted, rv));
        assert!(store.get(&col(), "x", "a").is_none());
        assert!(store.remove(&col(), "x", "a", json!({})).is_none());
    }
}
