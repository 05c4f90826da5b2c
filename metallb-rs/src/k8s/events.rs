//! Kubernetes events (events.k8s.io/v1) about the objects we act on.
//!
//! kube-runtime's `Recorder` folds repeated events into a series keyed by
//! reason alone, so a later "Assigned IP B" would be recorded as another
//! occurrence of an earlier "Assigned IP A" with A's text. Users (and the
//! e2e suites, which parse `nodeAssigned` messages) need the current text,
//! so this recorder keys series on the message too, as client-go's event
//! correlator does. Publishing is best effort: failures are logged.

use super::call::{CallError, call};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something worked.
    Normal,
    /// Something the user should look at.
    Warning,
}

/// An event to publish, as decided by a pure module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// Normal or Warning.
    pub type_: EventType,
    /// Upstream's reason, e.g. `IPAllocated`.
    pub reason: String,
    /// Upstream's message text.
    pub message: String,
}

impl EventSpec {
    /// A Normal event.
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Normal,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// A Warning event.
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

/// Events are folded into a series when repeated within this window.
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

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
    client: kube::Client,
    controller: String,
    instance: String,
    series: Arc<Mutex<HashMap<SeriesKey, Published>>>,
}

impl Recorder {
    /// Events reported by `controller` (e.g. `metallb-controller`) from
    /// instance `instance` (pod or node name).
    pub fn new(client: kube::Client, controller: &str, instance: &str) -> Self {
        Self {
            client,
            controller: controller.to_owned(),
            instance: instance.to_owned(),
            series: Arc::default(),
        }
    }

    /// A reference to `obj` for events.
    pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
        obj.object_ref(&())
    }

    /// Publishes `ev` about `regarding`; errors are logged, not returned.
    pub async fn publish(&self, regarding: &ObjectReference, ev: &EventSpec) {
        if let Err(e) = self.try_publish(regarding, ev).await {
            tracing::warn!(reason = %ev.reason, object = ?regarding.name, error = %e, "could not publish event");
        }
    }

    async fn try_publish(
        &self,
        regarding: &ObjectReference,
        ev: &EventSpec,
    ) -> Result<(), CallError> {
        let now = Timestamp::now();
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
        let previous = {
            let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
            series.retain(|_, p| p.last + SERIES_WINDOW > now);
            series.get(&key).cloned()
        };
        let published = if let Some(mut p) = previous {
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
        self.series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, published);
        Ok(())
    }
}
