//! Kubernetes events (events.k8s.io/v1) about the objects we act on.
//!
//! kube-runtime's `Recorder` folds repeated events into a series keyed by
//! reason alone, so a later "Assigned IP B" would be recorded as another
//! occurrence of an earlier "Assigned IP A" with A's text. Users (and the
//! e2e suites, which parse `nodeAssigned` messages) need the current text,
//! so this recorder keys series on the message too, as client-go's event
//! correlator does.
//!
//! Like client-go's broadcaster (what upstream's components use), it
//! never holds its caller up: [`Recorder::publish`] passes the event
//! through client-go's spam filter ([`SpamFilter`]: 25 events per object,
//! then one every 5 minutes) and queues it (at most 1000 waiting, further
//! ones dropped); one task writes them. Publishing is best effort:
//! failures are logged.

use super::call::{CallError, call};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub use crate::event::{EventSpec, EventType};

/// Events are folded into a series when repeated within this window.
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);
/// Events waiting to be written (client-go's `maxQueuedEvents`).
const QUEUE: usize = 1000;
/// How long one event write may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// client-go's per-object spam filter (`EventSourceObjectSpamFilter`):
/// each object gets a bucket of `burst` tokens, refilled one per
/// `refill`; an event finding its object's bucket empty is dropped.
/// Defaults: 25 and 5 minutes (`defaultSpamBurst`, `defaultSpamQPS`).
#[derive(Debug)]
pub struct SpamFilter {
    burst: f64,
    refill: Duration,
    buckets: HashMap<String, (f64, Instant)>,
    /// When full buckets were last forgotten.
    pruned: Option<Instant>,
}

impl Default for SpamFilter {
    fn default() -> Self {
        Self::new(25, Duration::from_secs(300))
    }
}

impl SpamFilter {
    /// A filter with `burst` tokens per object, one back every `refill`.
    pub fn new(burst: u32, refill: Duration) -> Self {
        Self {
            burst: f64::from(burst),
            refill,
            buckets: HashMap::new(),
            pruned: None,
        }
    }

    /// Whether an event about `object` may go out at `now` (takes a token).
    pub fn allow(&mut self, object: &str, now: Instant) -> bool {
        let (burst, refill) = (self.burst, self.refill.as_secs_f64());
        let level = |(tokens, at): (f64, Instant)| {
            (tokens + now.saturating_duration_since(at).as_secs_f64() / refill).min(burst)
        };
        // Full buckets are the same as none: forget them (bounded memory),
        // once per refill period rather than on every event, which would
        // cost a scan of every recent object per event.
        if self
            .pruned
            .is_none_or(|p| now.saturating_duration_since(p) >= self.refill)
        {
            self.buckets.retain(|_, b| level(*b) < burst);
            self.pruned = Some(now);
        }
        let tokens = self.buckets.get(object).map_or(burst, |b| level(*b));
        if tokens < 1.0 {
            return false;
        }
        self.buckets.insert(object.to_owned(), (tokens - 1.0, now));
        true
    }
}

#[derive(Hash, PartialEq, Eq)]
struct SeriesKey {
    regarding: (String, String, String, String),
    type_: EventType,
    reason: String,
    message: String,
}

/// What is kept of a published event to extend its series: its name,
/// count and when it was last seen (not the whole object).
#[derive(Clone)]
struct Published {
    name: String,
    count: i32,
    last: Timestamp,
}

/// Publishes events as one component instance.
#[derive(Clone)]
pub struct Recorder {
    queue: mpsc::Sender<(ObjectReference, EventSpec)>,
    spam: Arc<Mutex<SpamFilter>>,
}

impl Recorder {
    /// Events reported by `controller` (e.g. `metallb-controller`) from
    /// instance `instance` (pod or node name). Starts the writing task:
    /// call from within a Tokio runtime.
    pub fn new(client: kube::Client, controller: &str, instance: &str) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        let writer = Writer {
            client,
            controller: controller.to_owned(),
            instance: instance.to_owned(),
            series: HashMap::new(),
            pruned: None,
        };
        tokio::spawn(writer.run(rx));
        Self {
            queue,
            spam: Arc::default(),
        }
    }

    /// A reference to `obj` for events.
    pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
        obj.object_ref(&())
    }

    /// Queues `ev` about `regarding` unless the spam filter or a full
    /// queue drops it; never waits for the API.
    pub async fn publish(&self, regarding: &ObjectReference, ev: &EventSpec) {
        let object = format!(
            "{}/{}/{}/{}",
            regarding.kind.as_deref().unwrap_or_default(),
            regarding.namespace.as_deref().unwrap_or_default(),
            regarding.name.as_deref().unwrap_or_default(),
            regarding.uid.as_deref().unwrap_or_default(),
        );
        let allowed = self
            .spam
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .allow(&object, Instant::now());
        if !allowed {
            tracing::debug!(reason = %ev.reason, object = ?regarding.name, "event dropped: too many about this object (25, then one per 5 minutes)");
            return;
        }
        if self
            .queue
            .try_send((regarding.clone(), ev.clone()))
            .is_err()
        {
            tracing::warn!(reason = %ev.reason, object = ?regarding.name, "event dropped: {QUEUE} events already waiting");
        }
    }
}

/// Writes queued events one at a time.
struct Writer {
    client: kube::Client,
    controller: String,
    instance: String,
    series: HashMap<SeriesKey, Published>,
    /// When series older than the window were last forgotten.
    pruned: Option<Timestamp>,
}

/// How often ended series are forgotten (a scan of every series).
const SERIES_PRUNE: SignedDuration = SignedDuration::from_mins(1);

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<(ObjectReference, EventSpec)>) {
        while let Some((regarding, ev)) = rx.recv().await {
            match tokio::time::timeout(CALL_TIMEOUT, self.write(&regarding, &ev)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(reason = %ev.reason, object = ?regarding.name, error = %e, "could not publish event")
                }
                Err(_) => {
                    tracing::warn!(reason = %ev.reason, object = ?regarding.name, "could not publish event: timed out")
                }
            }
        }
    }

    async fn write(
        &mut self,
        regarding: &ObjectReference,
        ev: &EventSpec,
    ) -> Result<(), CallError> {
        let now = crate::clock::wall_now();
        let key = SeriesKey {
            regarding: (
                regarding.kind.clone().unwrap_or_default(),
                regarding.namespace.clone().unwrap_or_default(),
                regarding.name.clone().unwrap_or_default(),
                regarding.uid.clone().unwrap_or_default(),
            ),
            type_: ev.type_,
            reason: ev.reason.clone(),
            message: ev.message.clone(),
        };
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if self.pruned.is_none_or(|p| p + SERIES_PRUNE <= now) {
            self.series.retain(|_, p| p.last + SERIES_WINDOW > now);
            self.pruned = Some(now);
        }
        let ongoing = self
            .series
            .get(&key)
            .filter(|p| p.last + SERIES_WINDOW > now)
            .cloned();
        let published = if let Some(mut p) = ongoing {
            p.count += 1;
            p.last = now;
            let patch = serde_json::json!({ "series": EventSeries {
                count: p.count,
                last_observed_time: MicroTime(now),
            } });
            call(api.patch(&p.name, &PatchParams::default(), &Patch::Merge(&patch))).await?;
            p
        } else {
            let event = Event {
                metadata: ObjectMeta {
                    name: Some(format!(
                        "{}.{:x}",
                        regarding.name.as_deref().unwrap_or("metallb"),
                        now.as_nanosecond()
                    )),
                    namespace: Some(namespace),
                    ..ObjectMeta::default()
                },
                action: Some(ev.reason.clone()),
                reason: Some(ev.reason.clone()),
                note: Some(ev.message.clone()),
                type_: Some(
                    match ev.type_ {
                        EventType::Normal => "Normal",
                        EventType::Warning => "Warning",
                    }
                    .into(),
                ),
                event_time: Some(MicroTime(now)),
                regarding: Some(regarding.clone()),
                reporting_controller: Some(self.controller.clone()),
                reporting_instance: Some(format!("{}-{}", self.controller, self.instance)),
                ..Event::default()
            };
            let created = call(api.create(&PostParams::default(), &event)).await?;
            Published {
                name: created.name_any(),
                count: 1,
                last: now,
            }
        };
        self.series.insert(key, published);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// client-go's spam filter: (seconds since start, object) per event,
    /// allowed or dropped, with a burst of 3 refilled one per 10 s.
    #[rstest]
    #[case::burst_then_drop(&[(0, "a"), (0, "a"), (0, "a"), (0, "a")], "yes yes yes no")]
    #[case::objects_apart(&[(0, "a"), (0, "a"), (0, "a"), (0, "b")], "yes yes yes yes")]
    #[case::one_back_per_refill(&[(0, "a"), (0, "a"), (0, "a"), (9, "a"), (10, "a"), (11, "a")], "yes yes yes no yes no")]
    #[case::refills_to_the_burst_only(&[(0, "a"), (1000, "a"), (1000, "a"), (1000, "a"), (1000, "a")], "yes yes yes yes no")]
    fn spam_filter(#[case] events: &[(u64, &str)], #[case] expected: &str) {
        let start = Instant::now();
        let mut f = SpamFilter::new(3, Duration::from_secs(10));
        let got: Vec<&str> = events
            .iter()
            .map(|(at, obj)| {
                if f.allow(obj, start + Duration::from_secs(*at)) {
                    "yes"
                } else {
                    "no"
                }
            })
            .collect();
        assert_eq!(got.join(" "), expected);
    }

    #[test]
    fn spam_filter_forgets_full_buckets() {
        let start = Instant::now();
        let mut f = SpamFilter::new(3, Duration::from_secs(10));
        for i in 0..100 {
            assert!(f.allow(&format!("o{i}"), start + Duration::from_millis(i)));
        }
        assert_eq!(f.buckets.len(), 100, "not yet refilled: all remembered");
        // Refilled a period later: the next event forgets them.
        assert!(f.allow("x", start + Duration::from_secs(11)));
        assert_eq!(f.buckets.len(), 1);
    }

    #[test]
    fn spam_filter_defaults_are_client_gos() {
        let start = Instant::now();
        let mut f = SpamFilter::default();
        let allowed = (0..30).filter(|_| f.allow("o", start)).count();
        assert_eq!(allowed, 25);
        assert!(!f.allow("o", start + Duration::from_secs(299)));
        assert!(f.allow("o", start + Duration::from_secs(300)));
    }
}
