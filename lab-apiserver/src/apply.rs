//! Server-side apply and `metadata.managedFields`, decided without I/O:
//! an applied configuration merged into the live object, the fields its
//! manager applied before and now leaves out removed (unless someone
//! else owns them), conflicts with other managers found, and every
//! other write's fields recorded as its manager's `Update` entry. The
//! write path ([`crate::write`]) calls [`apply`] and [`record_update`]
//! and stores what they return; nothing here reads the store.

mod fields;
#[cfg(test)]
mod tests;

pub use fields::Lists;

use crate::error::ApiError;
use fields::{ListType, Set};
use serde_json::{Value, json};

/// Who writes, and what the server knows of the kind written.
pub struct Writer<'a> {
    /// The field manager.
    pub manager: &'a str,
    /// The request's `apiVersion`, recorded with the entry.
    pub api_version: &'a str,
    /// Now, as RFC 3339.
    pub time: &'a str,
    /// The kind's list types.
    pub lists: Lists<'a>,
    /// Which fields the write may set.
    pub scope: Scope,
}

/// The fields a write owns (the others are reset by kube-apiserver's
/// strategies, so nobody owns them through that endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole object: a kind without a status subresource.
    All,
    /// The object but its status (kept apart by a status subresource).
    AllButStatus,
    /// `/status`: only the status.
    Status,
}

impl Scope {
    /// The `subresource` of entries written through this scope.
    fn subresource(self) -> &'static str {
        if self == Scope::Status { "status" } else { "" }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Apply,
    Update,
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: Operation,
    api_version: String,
    time: String,
    subresource: String,
    fields: Set,
}

impl Entry {
    /// How kube-apiserver names the manager in a conflict.
    fn shown(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {} at {}", self.api_version, self.time));
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut e = json!({
            "manager": self.manager,
            "operation": match self.operation { Operation::Apply => "Apply", Operation::Update => "Update" },
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields::to_fields_v1(&self.fields),
        });
        if !self.subresource.is_empty() {
            e["subresource"] = json!(self.subresource);
        }
        e
    }
}

/// The entries of `object`'s `metadata.managedFields` (unreadable ones
/// dropped).
fn entries(object: &Value) -> Vec<Entry> {
    let text = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_owned();
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let operation = match e["operation"].as_str()? {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return None,
            };
            Some(Entry {
                manager: text(e, "manager"),
                operation,
                api_version: text(e, "apiVersion"),
                time: text(e, "time"),
                subresource: text(e, "subresource"),
                fields: fields::from_fields_v1(&e["fieldsV1"]),
            })
        })
        .collect()
}

/// `entries` as `metadata.managedFields` (empty ones left out), on
/// `object`.
fn set_entries(object: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_json)
        .collect();
    if let Some(meta) = object["metadata"].as_object_mut() {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// The part of `object` whose fields are tracked: what the server sets
/// (identity, versions, timestamps) and what `scope` resets left out.
fn tracked(object: &Value, scope: Scope) -> Value {
    let mut o = object.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        match scope {
            Scope::All => {}
            Scope::AllButStatus => {
                m.remove("status");
            }
            Scope::Status => m.retain(|k, _| k == "status"),
        }
    }
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "generation",
            "managedFields",
            "resourceVersion",
        ] {
            meta.remove(k);
        }
        if meta.is_empty()
            && let Some(m) = o.as_object_mut()
        {
            m.remove("metadata");
        }
    }
    o
}

/// Whether the value `to` has at `path` replaces a different one in
/// `from` (objects are compared through their own fields).
fn differs(from: &Value, to: &Value, path: &[fields::Step]) -> bool {
    match fields::get(to, path) {
        Some(Value::Object(m)) if !m.is_empty() => false,
        new => fields::get(from, path) != new,
    }
}

/// The fields a write by another manager changes, for `Update` entries.
fn changed(old: &Set, new: &Set, old_obj: &Value, new_obj: &Value) -> Set {
    new.iter()
        .filter(|p| !old.contains(*p) || differs(old_obj, new_obj, p))
        .cloned()
        .collect()
}

/// A field another manager owns with a different value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager, as kube-apiserver shows it (`"helm"`, or
    /// `"kubectl-edit" using v1 at <time>` for an update).
    pub manager: String,
    /// The field: `.spec.ports[port=80].name`.
    pub field: String,
}

/// kube-apiserver's 409 for `conflicts`: its message, and a
/// `FieldManagerConflict` cause per field.
pub fn conflict_error(conflicts: &[Conflict]) -> ApiError {
    let message = match conflicts {
        [one] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager, one.field
        ),
        _ => {
            let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
            managers.sort();
            managers.dedup();
            let mut lines = Vec::new();
            for m in managers {
                lines.push(format!("conflicts with {m}:"));
                for c in conflicts.iter().filter(|c| c.manager == m) {
                    lines.push(format!("- {}", c.field));
                }
            }
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                lines.join("\n")
            )
        }
    };
    let causes = conflicts
        .iter()
        .map(|c| (c.field.clone(), format!("conflict with {}", c.manager)))
        .collect();
    ApiError::apply_conflict(message, causes)
}

/// Merges `config` into `live`: objects field by field, map lists
/// element by key, set lists by value, everything else replaced.
fn merge(live: &mut Value, config: &Value, lists: Lists<'_>, field: &str) {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) => {
            for (k, cv) in c {
                match l.get_mut(k) {
                    Some(lv) => merge(lv, cv, lists.field(k), k),
                    None => {
                        l.insert(k.clone(), cv.clone());
                    }
                }
            }
        }
        (Value::Array(l), Value::Array(c)) => {
            let both: Vec<Value> = l.iter().chain(c).cloned().collect();
            let list = lists.list_type(field, &both);
            if list == ListType::Atomic {
                *l = c.clone();
                return;
            }
            for item in c {
                let step = fields::element(&list, item);
                let at = l.iter().position(|e| fields::element(&list, e) == step);
                match at {
                    Some(i) => merge(&mut l[i], item, lists.items(), ""),
                    None => l.push(item.clone()),
                }
            }
        }
        (live, config) => *live = config.clone(),
    }
}

/// Removes from `object` the paths of `gone` that nobody in `owned`
/// holds, deepest first, keeping a path with owned fields below it and
/// the key fields of elements that stay.
fn prune(object: &mut Value, gone: &Set, owned: &Set) {
    let mut gone: Vec<&fields::Path> = gone.iter().collect();
    gone.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for path in gone {
        let below = owned
            .range(path.clone()..)
            .next()
            .is_some_and(|o| o.len() > path.len() && o.starts_with(path));
        let key_field = match path.as_slice() {
            [.., fields::Step::Key(keys), fields::Step::Field(f)] => {
                keys.contains(&format!("{f:?}:"))
            }
            _ => false,
        };
        if !below && !key_field {
            fields::remove(object, path);
        }
    }
}

/// `config` applied by `w` to `live` (`None`: not there yet): the
/// object to store, with its managedFields, or the fields other managers
/// hold with other values when `force` is not given.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    w: &Writer<'_>,
    force: bool,
) -> Result<Value, Vec<Conflict>> {
    let empty = json!({ "metadata": {} });
    let live = live.unwrap_or(&empty);
    let mut entries = entries(live);
    let applied = fields::of(&tracked(config, w.scope), w.lists);
    let mine = |e: &Entry| e.manager == w.manager && e.subresource == w.scope.subresource();

    let mut conflicts = Vec::new();
    for e in entries.iter_mut().filter(|e| !mine(e)) {
        let lost: Set = e
            .fields
            .intersection(&applied)
            .filter(|p| differs(live, config, p))
            .cloned()
            .collect();
        conflicts.extend(lost.iter().map(|p| Conflict {
            manager: e.shown(),
            field: fields::display(p),
        }));
        // Forced: the fields move to the applier.
        e.fields.retain(|p| !lost.contains(p));
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }

    let mut object = live.clone();
    merge(&mut object, config, w.lists, "");
    let before = entries
        .iter()
        .position(|e| mine(e) && e.operation == Operation::Apply);
    let last = before
        .map(|i| entries[i].fields.clone())
        .unwrap_or_default();
    // Every other entry keeps its fields, the applier's own Update
    // entry included (kube-apiserver keeps Apply and Update apart).
    let mut owned: Set = applied.clone();
    for (i, e) in entries.iter().enumerate() {
        if Some(i) != before {
            owned.extend(e.fields.iter().cloned());
        }
    }
    let gone: Set = last.difference(&owned).cloned().collect();
    prune(&mut object, &gone, &owned);

    // An apply that changes nothing keeps its time, so it stores nothing.
    let same = last == applied && tracked(&object, Scope::All) == tracked(live, Scope::All);
    let entry = Entry {
        manager: w.manager.to_owned(),
        operation: Operation::Apply,
        api_version: w.api_version.to_owned(),
        time: match before {
            Some(i) if same => entries[i].time.clone(),
            _ => w.time.to_owned(),
        },
        subresource: w.scope.subresource().to_owned(),
        fields: applied,
    };
    match before {
        Some(i) => entries[i] = entry,
        None => entries.push(entry),
    }
    set_entries(&mut object, &entries);
    Ok(object)
}

/// `new` with the managedFields of a create, update or patch from `old`
/// (`Null` for a create): the fields it changed recorded as the writer's
/// `Update` entry (and taken from other entries), the fields it removed
/// dropped from it. The client's own `managedFields` are not read.
pub fn record_update(old: &Value, mut new: Value, w: &Writer<'_>) -> Value {
    let old_tracked = tracked(old, w.scope);
    let new_tracked = tracked(&new, w.scope);
    let old_set = fields::of(&old_tracked, w.lists);
    let new_set = fields::of(&new_tracked, w.lists);
    let changed = changed(&old_set, &new_set, &old_tracked, &new_tracked);
    let removed: Set = old_set.difference(&new_set).cloned().collect();
    let mut entries = entries(old);
    // An update takes what it changes from the other managers, forced,
    // as kube-apiserver does; what it removes leaves only its own entry.
    for e in &mut entries {
        e.fields.retain(|p| !changed.contains(p));
    }
    let at = entries.iter().position(|e| {
        e.manager == w.manager
            && e.operation == Operation::Update
            && e.subresource == w.scope.subresource()
    });
    if let Some(i) = at {
        entries[i].fields.retain(|p| !removed.contains(p));
    }
    if !changed.is_empty() {
        let i = at.unwrap_or_else(|| {
            entries.push(Entry {
                manager: w.manager.to_owned(),
                operation: Operation::Update,
                api_version: String::new(),
                time: String::new(),
                subresource: w.scope.subresource().to_owned(),
                fields: Set::new(),
            });
            entries.len() - 1
        });
        let e = &mut entries[i];
        e.fields.extend(changed);
        e.api_version = w.api_version.to_owned();
        e.time = w.time.to_owned();
    }
    if !new["metadata"].is_object() {
        new["metadata"] = json!({});
    }
    set_entries(&mut new, &entries);
    new
}

/// A field manager's name from a request: `fieldManager`, else what
/// kube-apiserver derives from the User-Agent (before its first `/`).
pub fn manager_name(query: Option<&str>, user_agent: &str) -> String {
    match query.filter(|m| !m.is_empty()) {
        Some(m) => m.to_owned(),
        None => user_agent
            .split('/')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_control())
            .take(128)
            .collect(),
    }
}

/// The PatchOptions checks kube-apiserver makes before any patch: a
/// `fieldManager` for apply, no `force` for other patches.
pub fn check_options(
    is_apply: bool,
    field_manager: Option<&str>,
    force: Option<&str>,
) -> Result<(), ApiError> {
    let cause = match (is_apply, field_manager.unwrap_or_default(), force) {
        (true, "", _) => (
            "fieldManager",
            "Required value: is required for apply patch",
        ),
        (false, _, Some(_)) => (
            "force",
            "Forbidden: may not be specified for non-apply patch",
        ),
        _ => return Ok(()),
    };
    Err(ApiError::invalid(
        "PatchOptions.meta.k8s.io",
        "",
        vec![(cause.0.into(), cause.1.into())],
    ))
}

/// The applied configuration of a request body (YAML or JSON) checked
/// against the URL's kind and name, as kube-apiserver checks it.
pub fn config(body: &[u8], api_version: &str, kind: &str, name: &str) -> Result<Value, ApiError> {
    let config: Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the applied configuration must be an object",
        ));
    }
    let text = |k: &str| config[k].as_str().unwrap_or_default().to_owned();
    if text("apiVersion") != api_version {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {}, expected: {api_version}",
            text("apiVersion")
        )));
    }
    if text("kind") != kind {
        return Err(ApiError::bad_request(format!(
            "the kind of the object ({}) does not match the kind on the URL ({kind})",
            text("kind")
        )));
    }
    if !config["metadata"]["managedFields"].is_null() {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    match config["metadata"]["name"].as_str() {
        Some(n) if n != name => Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
        _ => Ok(config),
    }
}
