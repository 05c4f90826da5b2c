//! The API semantics over the store, each write in two steps so webhooks
//! and conversion can run between them without the lock
//! ([`crate::write`]): prepare (generateName, defaults, schema and CEL,
//! optimistic concurrency, status subresources) and commit (stored only if
//! the object did not change meanwhile); deletes with finalizers and
//! ownerReference garbage collection, and the few controllers a
//! kube-apiserver runs itself (Namespace phase, CRD registration; Service
//! defaults in [`allocate`]).

mod allocate;

use super::error::ApiError;
use super::fanout::Fanout;
use super::registry::{Registry, ResourceType};
use super::schema;
use super::store::{Event, EventKind, Store};
use crate::auth::token::Signer;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Shared server state.
pub type Shared = std::sync::Arc<std::sync::Mutex<State>>;

/// The state behind `shared`, locked.
pub(crate) fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    // A panic while holding the lock would poison it; the state is still
    // consistent (every write is one store call), so keep serving.
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// Everything behind the server's lock.
pub struct State {
    /// Objects and history.
    pub store: Store,
    /// Served types.
    pub registry: Registry,
    /// Live watchers, per collection.
    pub events: Fanout,
    /// Signs and verifies bearer tokens.
    pub signer: Signer,
    /// Where webhook Services are reached ("ns/name" -> "host:port"),
    /// before their EndpointSlices are looked at.
    pub webhook_services: std::collections::BTreeMap<String, String>,
    /// Where container logs are kept (`pods/log`).
    pub pod_logs: Option<std::path::PathBuf>,
    /// Requests and watch events per user (`/metrics`).
    pub traffic: crate::traffic::Traffic,
    pub(crate) next_cluster_ip: u32,
    pub(crate) next_node_port: u16,
    name_seed: u64,
}

/// An update worked out against the current object, not stored yet.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The object to store, at the request's version.
    pub object: Value,
    /// Same as the current object: nothing to store.
    pub unchanged: bool,
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The object (status preserved when the type has a status subresource).
    Main,
    /// `/status`: only status changes.
    Status,
}

pub(crate) fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn name_of(obj: &Value) -> String {
    obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

impl State {
    /// A fresh API server state (no namespaces yet: see [`State::bootstrap`]).
    pub fn new() -> Self {
        Self::with_history(10_000)
    }

    /// A fresh state keeping `history` changes for watch resumption, with
    /// a random token key.
    pub fn with_history(history: usize) -> Self {
        Self::with_key(history, &Signer::random_secret())
    }

    /// A fresh state keeping `history` changes, signing tokens with
    /// `secret`.
    pub fn with_key(history: usize, secret: &[u8]) -> Self {
        let events = Fanout::default();
        Self {
            store: Store::new(history),
            registry: Registry::default(),
            events,
            signer: Signer::new(secret),
            webhook_services: Default::default(),
            pod_logs: None,
            traffic: Default::default(),
            next_cluster_ip: 1,
            next_node_port: 30000,
            name_seed: 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// Creates the namespaces and the RBAC policy every cluster has.
    pub fn bootstrap(&mut self) {
        let ns = self.registry.get("", "v1", "namespaces").cloned();
        if let Some(ns) = ns {
            for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                let _ = self.create(&ns, "", json!({ "metadata": { "name": name } }));
            }
        }
        let (roles, bindings) = crate::auth::bootstrap::objects();
        for (plural, objects) in [("clusterroles", roles), ("clusterrolebindings", bindings)] {
            let t = self
                .registry
                .get("rbac.authorization.k8s.io", "v1", plural)
                .cloned();
            for o in objects {
                if let Some(t) = &t {
                    let _ = self.create(t, "", o);
                }
            }
        }
    }

    fn emit(&self, event: Event) {
        self.events.send(event);
    }

    fn random_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        self.name_seed ^= self.name_seed << 13;
        self.name_seed ^= self.name_seed >> 7;
        self.name_seed ^= self.name_seed << 17;
        let mut n = self.name_seed ^ (jiff::Timestamp::now().as_nanosecond() as u64);
        (0..5)
            .map(|_| {
                let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
                n /= ALPHABET.len() as u64;
                c
            })
            .collect()
    }

    fn uid(&mut self) -> String {
        let a = self.random_suffix();
        let b = self.store.next_rv();
        format!(
            "{:08x}-{a}-4000-8000-{b:012x}",
            jiff::Timestamp::now().as_second() as u32
        )
    }

    /// The stored object `ns/name` of `t`.
    pub fn stored(&self, t: &ResourceType, ns: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        self.store
            .get(&t.collection(), ns, name)
            .ok_or_else(|| ApiError::not_found(&self.what(t), name))
    }

    /// GET one object.
    pub fn get(&self, t: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.store
            .get(&t.collection(), ns, name)
            .map(|o| self.at_version(t, &o))
            .ok_or_else(|| ApiError::not_found(&self.what(t), name))
    }

    /// An object as served at `t`'s version, for CRDs with conversion
    /// `None` (only apiVersion rewritten); as stored for CRDs converted by
    /// a webhook, which the caller converts without holding the lock
    /// (`crate::conversion`).
    pub fn at_version(&self, t: &ResourceType, obj: &Value) -> Value {
        let mut o = obj.clone();
        if t.conversion.is_some() {
            return o;
        }
        o["apiVersion"] = json!(t.api_version());
        o["kind"] = json!(t.kind);
        o
    }

    fn what(&self, t: &ResourceType) -> String {
        if t.group.is_empty() {
            t.plural.clone()
        } else {
            format!("{}.{}", t.plural, t.group)
        }
    }

    fn check_namespace(&self, t: &ResourceType, ns: &str) -> Result<(), ApiError> {
        if !t.namespaced {
            return Ok(());
        }
        if ns.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{} is namespaced: a namespace is required",
                t.plural
            )));
        }
        let namespaces = ("".to_owned(), "namespaces".to_owned());
        match self.store.get(&namespaces, "", ns) {
            Some(n) if n["metadata"]["deletionTimestamp"].is_null() => Ok(()),
            Some(_) => Err(ApiError::forbidden(format!(
                "namespace {ns} is being terminated"
            ))),
            None => Err(ApiError::not_found("namespaces", ns)),
        }
    }

    /// Validates against the CRD schema after defaulting and pruning,
    /// then evaluates its CEL rules (transition rules against `old`, the
    /// stored object, on an update).
    fn admit(
        &self,
        t: &ResourceType,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        if let Some(s) = &t.schema {
            schema::default_and_prune(obj, &s.1);
            let mut causes: Vec<(String, String)> =
                s.0.iter_errors(obj)
                    .map(|e| (field_path(e.instance_path()), e.to_string()))
                    .collect();
            if causes.is_empty() {
                causes = crd_cel::validate(obj, old, &s.1)
                    .into_iter()
                    .map(|v| (v.field, v.message))
                    .collect();
            }
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    &format!("{}.{}", t.kind, t.group),
                    &name_of(obj),
                    causes,
                ));
            }
        }
        Ok(())
    }

    /// POST, all at once (the server's own objects: no webhooks).
    pub fn create(&mut self, t: &ResourceType, ns: &str, obj: Value) -> Result<Value, ApiError> {
        let prepared = self.prepare_create(t, ns, obj)?;
        let stored = self.commit_create(t, ns, prepared)?;
        Ok(self.at_version(t, &stored))
    }

    /// A create up to storing: names, server-owned metadata, defaults,
    /// schema and CEL, what kube-apiserver's registries fill in.
    pub fn prepare_create(
        &mut self,
        t: &ResourceType,
        ns: &str,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        self.check_namespace(t, ns)?;
        let meta = obj["metadata"].as_object().cloned().unwrap_or_default();
        let mut name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if name.is_empty() {
            match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => loop {
                    let candidate = format!("{prefix}{}", self.random_suffix());
                    if self.store.get(&t.collection(), ns, &candidate).is_none() {
                        name = candidate;
                        break;
                    }
                },
                _ => {
                    return Err(ApiError::invalid(
                        &t.kind,
                        "",
                        vec![(
                            "metadata.name".into(),
                            "name or generateName is required".into(),
                        )],
                    ));
                }
            }
        }
        if let Some(body_ns) = meta.get("namespace").and_then(Value::as_str)
            && t.namespaced
            && !body_ns.is_empty()
            && body_ns != ns
        {
            return Err(ApiError::bad_request(format!(
                "the namespace of the object ({body_ns}) does not match the namespace on the request ({ns})"
            )));
        }
        if self.store.get(&t.collection(), ns, &name).is_some() {
            return Err(ApiError::already_exists(&self.what(t), &name));
        }
        let uid = self.uid();
        obj["apiVersion"] = json!(t.api_version());
        obj["kind"] = json!(t.kind);
        let m = &mut obj["metadata"];
        if !m.is_object() {
            *m = json!({});
        }
        m["name"] = json!(name);
        if t.namespaced {
            m["namespace"] = json!(ns);
        } else if let Some(o) = m.as_object_mut() {
            o.remove("namespace");
        }
        m["uid"] = json!(uid);
        m["creationTimestamp"] = json!(now());
        m["generation"] = json!(1);
        if let Some(o) = m.as_object_mut() {
            o.remove("deletionTimestamp");
        }
        if t.status
            && t.custom
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        self.admit(t, &mut obj, None)?;
        self.builtin_on_create(t, &mut obj)?;
        crate::builtins::check(t, &mut obj)?;
        Ok(obj)
    }

    /// Stores a prepared create (in the storage version); the stored
    /// object.
    pub fn commit_create(
        &mut self,
        t: &ResourceType,
        ns: &str,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        // The namespace or a namesake may have come or gone meanwhile.
        self.check_namespace(t, ns)?;
        let name = name_of(&obj);
        if self.store.get(&t.collection(), ns, &name).is_some() {
            return Err(ApiError::already_exists(&self.what(t), &name));
        }
        let rv = self.store.next_rv();
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        if crate::builtins::is_crd(t) {
            self.registry
                .add_crd(&obj)
                .map_err(|e| ApiError::invalid(&t.kind, &name, vec![("spec".into(), e)]))?;
        }
        let ev = self
            .store
            .put(&t.collection(), ns, &name, obj.clone(), EventKind::Added);
        self.emit(ev);
        Ok(obj)
    }

    /// PUT (and the tail of PATCH) up to storing: the object or its status
    /// replaced in `current` (the stored object at the request's version).
    pub fn prepare_update(
        &mut self,
        t: &ResourceType,
        name: &str,
        mut obj: Value,
        part: Part,
        current: &Value,
    ) -> Result<Prepared, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        if let Some(body_name) = obj["metadata"]["name"].as_str()
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        match obj["metadata"]["resourceVersion"].as_str() {
            Some(rv)
                if !rv.is_empty()
                    && Some(rv) != current["metadata"]["resourceVersion"].as_str() =>
            {
                return Err(ApiError::conflict(&self.what(t), name));
            }
            _ => {}
        }
        // Which part may change.
        let mut next = match part {
            Part::Status => {
                let mut n = current.clone();
                n["status"] = obj["status"].take();
                n["metadata"]["managedFields"] = obj["metadata"]["managedFields"].take();
                n
            }
            Part::Main => {
                if t.status {
                    // Kept as it is, absent included: a custom resource
                    // created without status has none (`null` would fail
                    // its schema).
                    match current.get("status") {
                        Some(status) => obj["status"] = status.clone(),
                        None => {
                            if let Some(o) = obj.as_object_mut() {
                                o.remove("status");
                            }
                        }
                    }
                }
                // Fields the server owns.
                for key in [
                    "uid",
                    "creationTimestamp",
                    "generation",
                    "deletionTimestamp",
                    "namespace",
                ] {
                    obj["metadata"][key] = current["metadata"][key].clone();
                }
                obj["metadata"]["name"] = json!(name);
                obj
            }
        };
        if let Some(m) = next["metadata"].as_object_mut() {
            m.retain(|_, v| !v.is_null());
        }
        next["apiVersion"] = json!(t.api_version());
        next["kind"] = json!(t.kind);
        if part == Part::Main && t.plural == "services" && t.group.is_empty() {
            // clusterIP is immutable; node ports stay allocated.
            for key in [
                "clusterIP",
                "clusterIPs",
                "ipFamilies",
                "healthCheckNodePort",
            ] {
                if next["spec"][key].is_null() {
                    next["spec"][key] = current["spec"][key].clone();
                }
            }
            self.service_defaults(&mut next);
        }
        self.admit(t, &mut next, Some(current))?;
        if part == Part::Main {
            crate::builtins::check(t, &mut next)?;
        }
        if next["spec"] != current["spec"] {
            let generation = current["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            next["metadata"]["generation"] = json!(generation);
        }
        // Unchanged: no new resourceVersion, no event (like kube-apiserver).
        let mut comparable = next.clone();
        comparable["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        let unchanged = comparable == *current;
        Ok(Prepared {
            object: next,
            unchanged,
        })
    }

    /// Stores a prepared update (in the storage version) when the stored
    /// object is still at `expected_rv` (`None` otherwise: prepare again);
    /// the stored object (its last state when this removed the last
    /// finalizer of an object being deleted).
    pub fn commit_update(
        &mut self,
        t: &ResourceType,
        ns: &str,
        name: &str,
        mut next: Value,
        expected_rv: &Value,
    ) -> Result<Option<Value>, ApiError> {
        let current = self
            .store
            .get(&t.collection(), ns, name)
            .ok_or_else(|| ApiError::not_found(&self.what(t), name))?;
        if current["metadata"]["resourceVersion"] != *expected_rv {
            return Ok(None);
        }
        if !next["metadata"]["deletionTimestamp"].is_null()
            && next["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty)
        {
            return self.finish_delete(t, ns, name, next).map(Some);
        }
        let rv = self.store.next_rv();
        next["metadata"]["resourceVersion"] = json!(rv.to_string());
        if crate::builtins::is_crd(t) {
            self.registry
                .add_crd(&next)
                .map_err(|e| ApiError::invalid(&t.kind, name, vec![("spec".into(), e)]))?;
        }
        let ev = self
            .store
            .put(&t.collection(), ns, name, next.clone(), EventKind::Modified);
        self.emit(ev);
        Ok(Some(next))
    }

    /// DELETE when the stored object is still at `expected_rv` (`None`
    /// otherwise): marks objects with finalizers, removes the rest, and
    /// collects what they owned; the object's last stored state.
    pub fn commit_delete(
        &mut self,
        t: &ResourceType,
        ns: &str,
        name: &str,
        expected_rv: &Value,
    ) -> Result<Option<Value>, ApiError> {
        let current = self
            .store
            .get(&t.collection(), ns, name)
            .ok_or_else(|| ApiError::not_found(&self.what(t), name))?;
        if current["metadata"]["resourceVersion"] != *expected_rv {
            return Ok(None);
        }
        let has_finalizers = current["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
            && !(t.group.is_empty() && t.plural == "namespaces");
        if has_finalizers {
            if current["metadata"]["deletionTimestamp"].is_null() {
                let mut next = (*current).clone();
                next["metadata"]["deletionTimestamp"] = json!(now());
                let rv = self.store.next_rv();
                next["metadata"]["resourceVersion"] = json!(rv.to_string());
                let ev =
                    self.store
                        .put(&t.collection(), ns, name, next.clone(), EventKind::Modified);
                self.emit(ev);
                return Ok(Some(next));
            }
            return Ok(Some((*current).clone()));
        }
        self.finish_delete(t, ns, name, (*current).clone())
            .map(Some)
    }

    fn finish_delete(
        &mut self,
        t: &ResourceType,
        ns: &str,
        name: &str,
        last: Value,
    ) -> Result<Value, ApiError> {
        let last = self.drop_object(&t.collection(), ns, name, last);
        let uid = last["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match (t.group.as_str(), t.plural.as_str()) {
            ("", "namespaces") => self.delete_namespace_contents(name),
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                let group = last["spec"]["group"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let plural = last["spec"]["names"]["plural"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                self.delete_all(&(group.clone(), plural.clone()), None);
                self.registry.remove_crd(&group, &plural);
            }
            _ => {}
        }
        self.collect_garbage(BTreeSet::from([uid]));
        Ok(last)
    }

    fn delete_all(&mut self, collection: &(String, String), ns: Option<&str>) {
        for obj in self.store.list(collection, ns) {
            let o_ns = obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            self.drop_object(collection, &o_ns, &name_of(&obj), (*obj).clone());
        }
    }

    /// Removes one object with a fresh resourceVersion on its final state
    /// (what watchers see in the DELETED event) and returns that state.
    fn drop_object(
        &mut self,
        collection: &(String, String),
        ns: &str,
        name: &str,
        mut last: Value,
    ) -> Value {
        let rv = self.store.next_rv();
        last["metadata"]["resourceVersion"] = json!(rv.to_string());
        if let Some(ev) = self.store.remove(collection, ns, name, last.clone()) {
            self.emit(ev);
        }
        last
    }

    /// Namespace deletion is immediate here (kube-apiserver goes through a
    /// Terminating phase first).
    fn delete_namespace_contents(&mut self, ns: &str) {
        for collection in self.store.collections() {
            if collection.1 != "namespaces" {
                self.delete_all(&collection, Some(ns));
            }
        }
    }

    /// Deletes every object whose owners are all gone (background
    /// propagation), repeating for what those owned.
    fn collect_garbage(&mut self, mut deleted: BTreeSet<String>) {
        while !deleted.is_empty() {
            let mut next = BTreeSet::new();
            for collection in self.store.collections() {
                for obj in self.store.list(&collection, None) {
                    let owners: Vec<&str> = obj["metadata"]["ownerReferences"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|o| o["uid"].as_str())
                        .collect();
                    if owners.is_empty() || !owners.iter().any(|o| deleted.contains(*o)) {
                        continue;
                    }
                    let live = owners
                        .iter()
                        .any(|o| !deleted.contains(*o) && self.uid_exists(o));
                    if live {
                        continue;
                    }
                    let ns = obj["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    self.drop_object(&collection, &ns, &name_of(&obj), (*obj).clone());
                    if let Some(uid) = obj["metadata"]["uid"].as_str() {
                        next.insert(uid.to_owned());
                    }
                }
            }
            deleted = next;
        }
    }

    fn uid_exists(&self, uid: &str) -> bool {
        self.store.collections().iter().any(|c| {
            self.store
                .list(c, None)
                .iter()
                .any(|o| o["metadata"]["uid"] == uid)
        })
    }
}

/// A schema error's location as a field path (`spec.addresses[1]`).
fn field_path(location: &jsonschema::paths::Location) -> String {
    let mut out = String::new();
    for seg in location.iter() {
        match seg {
            jsonschema::paths::LocationSegment::Index(i) => out.push_str(&format!("[{i}]")),
            jsonschema::paths::LocationSegment::Property(p) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&p);
            }
        }
    }
    out
}

impl Default for State {
    fn default() -> Self {
        Self::new()
    }
}
