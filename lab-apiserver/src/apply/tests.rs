//! Server-side apply as table rows: each row a fresh object and a few
//! writes, each write answered by one line - the object's fields, then
//! every manager with its operation, time and fields - or the conflict.

use super::*;
use serde_json::json;

/// A write of a row: `apply M`, `force M` (apply with force) or
/// `update M` (a create, PUT or PATCH that leaves the object so).
type Write<'a> = (&'a str, Value);

fn managers(object: &Value) -> String {
    entries(object)
        .iter()
        .map(|e| {
            let fields: Vec<String> = e.fields.iter().map(|p| fields::display(p)).collect();
            format!(
                "{} {:?}@{} [{}]",
                e.manager,
                e.operation,
                e.time,
                fields.join(" ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The line each write of `writes` answers, on one object from nothing.
fn run(lists: Lists<'_>, scope: Scope, writes: &[Write<'_>]) -> Vec<String> {
    let mut live: Option<Value> = None;
    let mut out = Vec::new();
    for (i, (op, body)) in writes.iter().enumerate() {
        let (verb, manager) = op.split_once(' ').expect("`verb manager`");
        let time = format!("T{}", i + 1);
        let w = Writer {
            manager,
            api_version: "v1",
            time: &time,
            lists,
            scope,
        };
        let result = match verb {
            "apply" | "force" => apply(live.as_ref(), body, &w, verb == "force"),
            "update" => Ok(record_update(
                live.as_ref().unwrap_or(&Value::Null),
                body.clone(),
                &w,
            )),
            other => panic!("unknown write {other}"),
        };
        out.push(match result {
            Ok(object) => {
                let line = format!("{} | {}", tracked(&object, Scope::All), managers(&object));
                live = Some(object);
                line
            }
            Err(conflicts) => format!("409 {}", conflict_error(&conflicts).message),
        });
    }
    out
}

fn cm(data: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" }, "data": data })
}

#[test]
fn apply_creates_then_removes_what_its_manager_drops() {
    assert_eq!(
        run(
            Lists::Builtin,
            Scope::All,
            &[
                ("apply kubectl", cm(json!({ "a": "1", "b": "2" }))),
                ("apply kubectl", cm(json!({ "a": "3" }))),
                // Nothing changes: the entry keeps its time.
                ("apply kubectl", cm(json!({ "a": "3" }))),
            ]
        ),
        [
            r#"{"data":{"a":"1","b":"2"}} | kubectl Apply@T1 [.data.a .data.b]"#,
            r#"{"data":{"a":"3"}} | kubectl Apply@T2 [.data.a]"#,
            r#"{"data":{"a":"3"}} | kubectl Apply@T2 [.data.a]"#,
        ]
    );
}

#[test]
fn a_field_shared_with_another_manager_stays_when_one_drops_it() {
    assert_eq!(
        run(
            Lists::Builtin,
            Scope::All,
            &[
                ("apply one", cm(json!({ "a": "1", "b": "2" }))),
                ("apply two", cm(json!({ "b": "2" }))),
                ("apply one", cm(json!({ "a": "1" }))),
            ]
        ),
        [
            r#"{"data":{"a":"1","b":"2"}} | one Apply@T1 [.data.a .data.b]"#,
            r#"{"data":{"a":"1","b":"2"}} | one Apply@T1 [.data.a .data.b]; two Apply@T2 [.data.b]"#,
            r#"{"data":{"a":"1","b":"2"}} | one Apply@T3 [.data.a]; two Apply@T2 [.data.b]"#,
        ]
    );
}

#[test]
fn a_different_value_conflicts_until_forced() {
    assert_eq!(
        run(
            Lists::Builtin,
            Scope::All,
            &[
                ("apply one", cm(json!({ "a": "1", "b": "2" }))),
                ("apply two", cm(json!({ "a": "9" }))),
                ("apply two", cm(json!({ "a": "9", "b": "8" }))),
                ("force two", cm(json!({ "a": "9" }))),
            ]
        ),
        [
            r#"{"data":{"a":"1","b":"2"}} | one Apply@T1 [.data.a .data.b]"#,
            r#"409 Apply failed with 1 conflict: conflict with "one": .data.a"#,
            "409 Apply failed with 2 conflicts: conflicts with \"one\":\n- .data.a\n- .data.b",
            r#"{"data":{"a":"9","b":"2"}} | one Apply@T1 [.data.b]; two Apply@T4 [.data.a]"#,
        ]
    );
}

#[test]
fn updates_own_what_they_change_and_conflict_with_appliers() {
    assert_eq!(
        run(
            Lists::Builtin,
            Scope::All,
            &[
                ("update kubectl-create", cm(json!({ "a": "1" }))),
                ("apply ssa", cm(json!({ "a": "1", "b": "2" }))),
                ("update kubectl-edit", cm(json!({ "a": "1", "b": "5" }))),
                ("apply ssa", cm(json!({ "a": "1", "b": "2" }))),
                // An update that removes a field takes it from no one else.
                ("update kubectl-edit", cm(json!({ "a": "1" }))),
            ]
        ),
        [
            r#"{"data":{"a":"1"}} | kubectl-create Update@T1 [.data.a]"#,
            r#"{"data":{"a":"1","b":"2"}} | kubectl-create Update@T1 [.data.a]; ssa Apply@T2 [.data.a .data.b]"#,
            r#"{"data":{"a":"1","b":"5"}} | kubectl-create Update@T1 [.data.a]; ssa Apply@T2 [.data.a]; kubectl-edit Update@T3 [.data.b]"#,
            r#"409 Apply failed with 1 conflict: conflict with "kubectl-edit" using v1 at T3: .data.b"#,
            r#"{"data":{"a":"1"}} | kubectl-create Update@T1 [.data.a]; ssa Apply@T2 [.data.a]"#,
        ]
    );
}

fn pod(containers: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "p" }, "spec": { "containers": containers } })
}

#[test]
fn builtin_lists_merge_by_the_strategic_merge_keys() {
    assert_eq!(
        run(
            Lists::Builtin,
            Scope::All,
            &[
                (
                    "apply one",
                    pod(
                        json!([{ "name": "a", "image": "x", "ports": [{ "containerPort": 80 }] },
                               { "name": "b", "image": "y" }])
                    )
                ),
                ("apply two", pod(json!([{ "name": "c", "image": "z" }]))),
                ("apply one", pod(json!([{ "name": "a", "image": "x2" }]))),
                ("apply two", pod(json!([{ "name": "a", "image": "x3" }]))),
            ]
        ),
        [
            r#"{"spec":{"containers":[{"image":"x","name":"a","ports":[{"containerPort":80}]},{"image":"y","name":"b"}]}} | one Apply@T1 [.spec.containers[name="a"] .spec.containers[name="a"].image .spec.containers[name="a"].name .spec.containers[name="a"].ports[containerPort=80] .spec.containers[name="a"].ports[containerPort=80].containerPort .spec.containers[name="b"] .spec.containers[name="b"].image .spec.containers[name="b"].name]"#,
            r#"{"spec":{"containers":[{"image":"x","name":"a","ports":[{"containerPort":80}]},{"image":"y","name":"b"},{"image":"z","name":"c"}]}} | one Apply@T1 [.spec.containers[name="a"] .spec.containers[name="a"].image .spec.containers[name="a"].name .spec.containers[name="a"].ports[containerPort=80] .spec.containers[name="a"].ports[containerPort=80].containerPort .spec.containers[name="b"] .spec.containers[name="b"].image .spec.containers[name="b"].name]; two Apply@T2 [.spec.containers[name="c"] .spec.containers[name="c"].image .spec.containers[name="c"].name]"#,
            r#"{"spec":{"containers":[{"image":"x2","name":"a"},{"image":"z","name":"c"}]}} | one Apply@T3 [.spec.containers[name="a"] .spec.containers[name="a"].image .spec.containers[name="a"].name]; two Apply@T2 [.spec.containers[name="c"] .spec.containers[name="c"].image .spec.containers[name="c"].name]"#,
            // Dropping c is not a conflict; the image of a is.
            r#"409 Apply failed with 1 conflict: conflict with "one": .spec.containers[name="a"].image"#,
        ]
    );
}

#[test]
fn custom_lists_are_atomic_unless_the_schema_keys_them() {
    let schema = json!({ "properties": { "spec": { "properties": {
        "keyed": { "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"] },
        "tags": { "type": "array", "x-kubernetes-list-type": "set" },
        "plain": { "type": "array" },
    } } } });
    let obj = |spec: Value| json!({ "apiVersion": "v1", "kind": "X", "metadata": { "name": "x" }, "spec": spec });
    assert_eq!(
        run(
            Lists::Schema(Some(&schema)),
            Scope::All,
            &[
                (
                    "apply one",
                    obj(
                        json!({ "keyed": [{ "name": "a", "v": 1 }], "tags": ["t"], "plain": [{ "name": "a" }] })
                    )
                ),
                (
                    "apply two",
                    obj(json!({ "keyed": [{ "name": "b", "v": 2 }], "tags": ["u"] }))
                ),
                ("apply two", obj(json!({ "plain": [{ "name": "b" }] }))),
            ]
        ),
        [
            r#"{"spec":{"keyed":[{"name":"a","v":1}],"plain":[{"name":"a"}],"tags":["t"]}} | one Apply@T1 [.spec.keyed[name="a"] .spec.keyed[name="a"].name .spec.keyed[name="a"].v .spec.plain .spec.tags[="t"]]"#,
            r#"{"spec":{"keyed":[{"name":"a","v":1},{"name":"b","v":2}],"plain":[{"name":"a"}],"tags":["t","u"]}} | one Apply@T1 [.spec.keyed[name="a"] .spec.keyed[name="a"].name .spec.keyed[name="a"].v .spec.plain .spec.tags[="t"]]; two Apply@T2 [.spec.keyed[name="b"] .spec.keyed[name="b"].name .spec.keyed[name="b"].v .spec.tags[="u"]]"#,
            r#"409 Apply failed with 1 conflict: conflict with "one": .spec.plain"#,
        ]
    );
}

#[test]
fn status_is_tracked_only_through_its_own_scope() {
    let obj = json!({ "apiVersion": "v1", "kind": "X", "metadata": { "name": "x", "labels": { "l": "1" } },
                      "spec": { "a": 1 }, "status": { "s": 1 } });
    let main = run(
        Lists::Builtin,
        Scope::AllButStatus,
        &[("apply one", obj.clone())],
    );
    assert_eq!(
        main[0],
        r#"{"metadata":{"labels":{"l":"1"}},"spec":{"a":1},"status":{"s":1}} | one Apply@T1 [.metadata.labels.l .spec.a]"#
    );
    let status = run(Lists::Builtin, Scope::Status, &[("apply one", obj)]);
    assert!(
        status[0].ends_with(" | one Apply@T1 [.status.s]"),
        "{}",
        status[0]
    );
}

#[test]
fn fields_v1_marks_owned_elements_and_round_trips() {
    let object = json!({ "metadata": { "finalizers": ["f"] },
                         "spec": { "containers": [{ "name": "a", "image": "x" }], "volumes": [] } });
    let set = fields::of(&object, Lists::Builtin);
    let tree = fields::to_fields_v1(&set);
    assert_eq!(
        tree,
        json!({
            "f:metadata": { "f:finalizers": { "v:\"f\"": {} } },
            "f:spec": { "f:containers": { "k:{\"name\":\"a\"}": { ".": {}, "f:image": {}, "f:name": {} } } },
        })
    );
    assert_eq!(fields::from_fields_v1(&tree), set);
}

#[test]
fn the_status_subresource_records_its_entries_apart() {
    let w = Writer {
        manager: "ctl",
        api_version: "v1",
        time: "T1",
        lists: Lists::Builtin,
        scope: Scope::Status,
    };
    let old = json!({ "metadata": { "name": "x" }, "spec": { "a": 1 } });
    let new = record_update(
        &old,
        json!({ "metadata": { "name": "x" }, "spec": { "a": 1 }, "status": { "s": 1 } }),
        &w,
    );
    assert_eq!(
        new["metadata"]["managedFields"],
        json!([{ "manager": "ctl", "operation": "Update", "apiVersion": "v1", "time": "T1",
                 "fieldsType": "FieldsV1", "fieldsV1": { "f:status": { "f:s": {} } }, "subresource": "status" }])
    );
}

#[test]
fn requests_are_checked_as_kube_apiserver_checks_them() {
    let message = |r: Result<(), ApiError>| r.map_err(|e| e.message);
    assert_eq!(
        message(check_options(true, None, None)),
        Err(r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#.into())
    );
    assert_eq!(
        message(check_options(false, None, Some("true"))),
        Err(r#"PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch"#.into())
    );
    assert_eq!(
        message(check_options(true, Some("m"), Some("true"))),
        Ok(())
    );
    let config = |body: &str| {
        config(body.as_bytes(), "v1", "ConfigMap", "a").map_err(|e| (e.code, e.message))
    };
    assert!(config("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n").is_ok());
    assert!(config(r#"{"apiVersion": "v1", "kind": "ConfigMap"}"#).is_ok());
    assert_eq!(
        config("apiVersion: v2\nkind: ConfigMap\n"),
        Err((
            400,
            "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1"
                .into()
        ))
    );
    assert_eq!(
        config("apiVersion: v1\nkind: Secret\n"),
        Err((
            400,
            "the kind of the object (Secret) does not match the kind on the URL (ConfigMap)".into()
        ))
    );
    assert_eq!(
        config("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"),
        Err((
            400,
            "the name of the object (b) does not match the name on the URL (a)".into()
        ))
    );
    let (code, message) = config("kind: [").expect_err("malformed");
    assert!(
        code == 400 && message.starts_with("error decoding YAML: "),
        "{message}"
    );
    assert_eq!(
        manager_name(None, "kubectl/v1.35.0 (linux/amd64) kubernetes/abc"),
        "kubectl"
    );
    assert_eq!(manager_name(Some("helm"), "Go-http-client/1.1"), "helm");
}
