//! Field sets as server-side apply tracks them: the paths an object sets,
//! each step a field (`f:`), a list element by its keys (`k:`) or by its
//! value (`v:`), read from and written as `fieldsV1`. Which lists are
//! keyed, and by what, comes from [`Lists`]. Pure: JSON in, sets out.

use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::fmt;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// An object's field.
    Field(String),
    /// An element of a map list, by its keys: a JSON object, keys sorted.
    Key(String),
    /// An element of a set list, by its value (JSON).
    Value(String),
}

/// Where a value sits in an object.
pub type Path = Vec<Step>;
/// The paths an object sets, or a manager owns.
pub type Set = BTreeSet<Path>;

/// How a list merges and how its elements are tracked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Replaced and owned whole.
    Atomic,
    /// Elements merged and owned by these key fields.
    Map(Vec<String>),
    /// Scalars merged and owned by value.
    Set,
}

/// Where an object's list types come from.
#[derive(Debug, Clone, Copy)]
pub enum Lists<'a> {
    /// A built-in kind, and every object's `metadata`: the merge keys the
    /// strategic merge patch code knows, by field name.
    Builtin,
    /// A custom resource: its openAPIV3Schema at this point (`None`
    /// where it declares nothing: lists there are atomic).
    Schema(Option<&'a Value>),
}

impl<'a> Lists<'a> {
    /// The lists under field `name`.
    pub fn field(self, name: &str) -> Self {
        match self {
            Lists::Builtin => Lists::Builtin,
            // ObjectMeta is the same in every kind, whatever a CRD says.
            Lists::Schema(_) if name == "metadata" => Lists::Builtin,
            Lists::Schema(node) => Lists::Schema(node.and_then(|n| {
                n["properties"]
                    .get(name)
                    .or_else(|| n.get("additionalProperties").filter(|a| a.is_object()))
            })),
        }
    }

    /// The lists inside a list's elements.
    pub fn items(self) -> Self {
        match self {
            Lists::Builtin => Lists::Builtin,
            Lists::Schema(node) => Lists::Schema(node.and_then(|n| n.get("items"))),
        }
    }

    /// The type of the list `elements` held by field `field`. A map list
    /// with an element that is no object is taken as atomic.
    pub fn list_type(self, field: &str, elements: &[Value]) -> ListType {
        let declared = match self {
            Lists::Builtin if field == "finalizers" => ListType::Set,
            Lists::Builtin => match crate::patch::merge_key(field, elements) {
                Some(key) => ListType::Map(vec![key.to_owned()]),
                None => ListType::Atomic,
            },
            Lists::Schema(node) => {
                let node = node.unwrap_or(&Value::Null);
                match node["x-kubernetes-list-type"].as_str() {
                    Some("map") => ListType::Map(
                        node["x-kubernetes-list-map-keys"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|k| k.as_str().map(str::to_owned))
                            .collect(),
                    ),
                    Some("set") => ListType::Set,
                    _ => ListType::Atomic,
                }
            }
        };
        match declared {
            ListType::Map(keys) if keys.is_empty() || elements.iter().any(|e| !e.is_object()) => {
                ListType::Atomic
            }
            other => other,
        }
    }
}

/// The step naming `item` in a list of type `list` (`None` for atomic
/// lists, whose elements are not tracked).
pub fn element(list: &ListType, item: &Value) -> Option<Step> {
    match list {
        ListType::Atomic => None,
        ListType::Set => Some(Step::Value(item.to_string())),
        ListType::Map(keys) => {
            let mut keys: Vec<&String> = keys.iter().filter(|k| !item[k].is_null()).collect();
            keys.sort();
            let pairs: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), item[*k]))
                .collect();
            Some(Step::Key(format!("{{{}}}", pairs.join(","))))
        }
    }
}

/// Whether list element `item` is the one `step` names.
fn names(step: &Step, item: &Value) -> bool {
    match step {
        Step::Field(_) => false,
        Step::Value(v) => serde_json::from_str::<Value>(v).is_ok_and(|v| v == *item),
        Step::Key(k) => serde_json::from_str::<Map<String, Value>>(k)
            .is_ok_and(|keys| keys.iter().all(|(k, v)| item.get(k) == Some(v))),
    }
}

/// The paths `value` sets: its scalars, atomic lists and empty objects,
/// and the elements of map and set lists (with their own fields).
pub fn of(value: &Value, lists: Lists<'_>) -> Set {
    let mut out = Set::new();
    walk(value, lists, &mut Vec::new(), &mut out);
    out
}

fn walk(value: &Value, lists: Lists<'_>, path: &mut Path, out: &mut Set) {
    match value {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                path.push(Step::Field(k.clone()));
                walk(child, lists.field(k), path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            let field = match path.last() {
                Some(Step::Field(f)) => f.as_str(),
                _ => "",
            };
            let list = lists.list_type(field, items);
            if list == ListType::Atomic {
                out.insert(path.clone());
                return;
            }
            for item in items {
                let Some(step) = element(&list, item) else {
                    continue;
                };
                path.push(step);
                out.insert(path.clone());
                if matches!(list, ListType::Map(_)) {
                    walk(item, lists.items(), path, out);
                }
                path.pop();
            }
        }
        _ => {
            if !path.is_empty() {
                out.insert(path.clone());
            }
        }
    }
}

/// The value at `path` in `value`.
pub fn get<'v>(value: &'v Value, path: &[Step]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, step| match step {
        Step::Field(f) => v.get(f),
        _ => v.as_array()?.iter().find(|item| names(step, item)),
    })
}

/// Removes what `path` names from `value` (nothing if it is not there),
/// and the objects and lists that leaves empty, as kube-apiserver does.
pub fn remove(value: &mut Value, path: &[Step]) {
    emptied(value, path);
}

/// Removes `path` below `value`; whether that left `value` empty.
fn emptied(value: &mut Value, path: &[Step]) -> bool {
    let Some((step, rest)) = path.split_first() else {
        return false;
    };
    match (value, step) {
        (Value::Object(m), Step::Field(f)) => {
            let gone = match m.get_mut(f) {
                Some(child) => rest.is_empty() || emptied(child, rest),
                None => return false,
            };
            if gone {
                m.remove(f);
            }
            gone && m.is_empty()
        }
        (Value::Array(items), step) => {
            let Some(i) = items.iter().position(|item| names(step, item)) else {
                return false;
            };
            let gone = rest.is_empty() || emptied(&mut items[i], rest);
            if gone {
                items.remove(i);
            }
            gone && items.is_empty()
        }
        _ => false,
    }
}

impl fmt::Display for Step {
    /// The `fieldsV1` key: `f:name`, `k:{"name":"c"}`, `v:"x"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Field(name) => write!(f, "f:{name}"),
            Step::Key(keys) => write!(f, "k:{keys}"),
            Step::Value(v) => write!(f, "v:{v}"),
        }
    }
}

impl Step {
    fn parse(key: &str) -> Option<Self> {
        let (kind, rest) = key.split_once(':')?;
        Some(match kind {
            "f" => Step::Field(rest.to_owned()),
            "k" => Step::Key(rest.to_owned()),
            "v" => Step::Value(rest.to_owned()),
            _ => return None,
        })
    }
}

/// `path` as kube-apiserver names it in conflicts:
/// `.spec.containers[name="c"].image`, `.metadata.finalizers[="f"]`.
pub fn display(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Field(name) => {
                out.push('.');
                out.push_str(name);
            }
            Step::Key(keys) => {
                let keys: Map<String, Value> = serde_json::from_str(keys).unwrap_or_default();
                let pairs: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push_str(&format!("[{}]", pairs.join(",")));
            }
            Step::Value(v) => out.push_str(&format!("[={v}]")),
        }
    }
    out
}

/// `set` as `fieldsV1`: a tree of step keys, `".": {}` marking a path
/// that is owned itself and also has owned fields below it.
pub fn to_fields_v1(set: &Set) -> Value {
    let paths: Vec<&[Step]> = set.iter().map(Vec::as_slice).collect();
    encode(&paths)
}

fn encode(paths: &[&[Step]]) -> Value {
    let mut out = Map::new();
    // Sorted, so the paths under one first step are adjacent.
    for group in paths.chunk_by(|a, b| a.first() == b.first()) {
        let Some(head) = group.first().and_then(|p| p.first()) else {
            continue;
        };
        let below: Vec<&[Step]> = group
            .iter()
            .filter(|p| p.len() > 1)
            .map(|p| &p[1..])
            .collect();
        let mut node = encode(&below);
        if below.len() < group.len()
            && !below.is_empty()
            && let Value::Object(m) = &mut node
        {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        out.insert(head.to_string(), node);
    }
    Value::Object(out)
}

/// The set a `fieldsV1` tree holds (unknown keys are skipped).
pub fn from_fields_v1(tree: &Value) -> Set {
    let mut out = Set::new();
    decode(tree, &mut Vec::new(), &mut out);
    out
}

fn decode(tree: &Value, path: &mut Path, out: &mut Set) {
    let Some(m) = tree.as_object() else { return };
    if m.is_empty() && !path.is_empty() {
        out.insert(path.clone());
    }
    for (key, child) in m {
        if key == "." {
            out.insert(path.clone());
            continue;
        }
        let Some(step) = Step::parse(key) else {
            continue;
        };
        path.push(step);
        decode(child, path, out);
        path.pop();
    }
}
