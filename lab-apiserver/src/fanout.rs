//! Watch fan-out: each collection's changes go to that collection's live
//! watchers through a channel of its own.

use crate::store::{Collection, Event};

/// The changes of each collection, to that collection's live watchers.
/// One channel per collection, as a real API server keeps a watch cache
/// per resource: a watcher lags (and must relist) only behind its own
/// collection's changes, never because another collection had a burst.
#[derive(Default)]
pub struct Fanout {
    channels: std::collections::HashMap<Collection, tokio::sync::broadcast::Sender<Event>>,
}

impl Fanout {
    /// Changes a watcher may fall behind by before it must relist.
    pub const CAPACITY: usize = 4096;

    /// A receiver of `collection`'s changes from now on.
    pub fn subscribe(
        &mut self,
        collection: &Collection,
    ) -> tokio::sync::broadcast::Receiver<Event> {
        self.channels
            .entry(collection.clone())
            .or_insert_with(|| tokio::sync::broadcast::channel(Self::CAPACITY).0)
            .subscribe()
    }

    /// Sends `event` to its collection's watchers (none is fine).
    pub fn send(&self, event: Event) {
        if let Some(tx) = self.channels.get(&event.collection) {
            let _ = tx.send(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EventKind;
    use serde_json::json;
    use std::sync::Arc;
    use tokio::sync::broadcast::error::TryRecvError;

    fn event(collection: &Collection, rv: u64) -> Event {
        Event {
            rv,
            collection: collection.clone(),
            namespace: String::new(),
            kind: EventKind::Added,
            object: Arc::new(json!({})),
            previous: None,
        }
    }

    /// A burst of one collection's changes larger than a watcher may fall
    /// behind by makes that collection's slow watchers relist, and no
    /// other collection's.
    #[test]
    fn a_burst_lags_only_its_own_collections_watchers() {
        let services: Collection = ("".into(), "services".into());
        let secrets: Collection = ("".into(), "secrets".into());
        let mut fanout = Fanout::default();
        let mut service_watch = fanout.subscribe(&services);
        let mut secret_watch = fanout.subscribe(&secrets);
        let burst = Fanout::CAPACITY as u64 + 10;
        for rv in 1..=burst {
            fanout.send(event(&services, rv));
        }
        fanout.send(event(&secrets, burst + 1));
        assert!(matches!(
            service_watch.try_recv(),
            Err(TryRecvError::Lagged(_))
        ));
        let got = secret_watch.try_recv().expect("the secret's change");
        assert_eq!(got.rv, burst + 1);
        assert!(matches!(secret_watch.try_recv(), Err(TryRecvError::Empty)));
        // Nobody watches config maps: sending is fine.
        fanout.send(event(&("".into(), "configmaps".into()), burst + 2));
    }
}
