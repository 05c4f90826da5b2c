//! Objects through kube's own client: create, read, update, delete with
//! selectors, conflicts and patches; owner references garbage collected;
//! lists paged with `limit` and `continue`; a Secret's stringData folded
//! into data.

mod common;

use common::objects::{cm, namespace, status_code};
use common::start;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

#[tokio::test]
async fn crud_selectors_conflicts_and_patches() {
    let (_server, client) = start().await;
    namespace(&client, "t").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "t");
    let a = cms
        .create(&PostParams::default(), &cm("a", json!({ "app": "web" })))
        .await
        .expect("created");
    cms.create(&PostParams::default(), &cm("b", json!({ "app": "db" })))
        .await
        .expect("created");
    assert_eq!(
        status_code(
            cms.create(&PostParams::default(), &cm("a", json!({})))
                .await
                .expect_err("exists")
        ),
        409
    );
    assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());

    let web = cms
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("list");
    assert_eq!(web.items.len(), 1);
    let not_web = cms
        .list(&ListParams::default().labels("app!=web"))
        .await
        .expect("list");
    assert_eq!(not_web.items[0].metadata.name.as_deref(), Some("b"));
    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .expect("list");
    assert_eq!(by_name.items.len(), 1);

    // Optimistic concurrency: an update with a stale resourceVersion fails.
    let mut stale = a.clone();
    let mut fresh = cms.get("a").await.expect("get");
    fresh.data = Some([("k".to_owned(), "v2".to_owned())].into());
    cms.replace("a", &PostParams::default(), &fresh)
        .await
        .expect("replaced");
    stale.data = Some([("k".to_owned(), "v3".to_owned())].into());
    assert_eq!(
        status_code(
            cms.replace("a", &PostParams::default(), &stale)
                .await
                .expect_err("stale")
        ),
        409
    );

    let merged = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "extra": "1" } } })),
        )
        .await
        .expect("merge");
    assert_eq!(
        merged
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("extra"))
            .map(String::as_str),
        Some("1")
    );
    let patch: json_patch::Patch =
        serde_json::from_value(json!([{ "op": "replace", "path": "/data/k", "value": "jp" }]))
            .expect("patch");
    let jp = cms
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect("json patch");
    assert_eq!(
        jp.data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("jp")
    );
    let ssa = cms
        .patch(
            "a",
            &PatchParams::apply("test"),
            &Patch::Apply(
                json!({ "apiVersion": "v1", "kind": "ConfigMap", "data": { "s": "ssa" } }),
            ),
        )
        .await
        .expect("server-side apply");
    let managers: Vec<_> = ssa
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|e| (e.manager.clone(), e.operation.clone()))
        .collect();
    assert!(
        managers.contains(&(Some("test".into()), Some("Apply".into()))),
        "{managers:?}"
    );

    cms.delete("a", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(status_code(cms.get("a").await.expect_err("gone")), 404);
    let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    assert_eq!(
        status_code(
            missing
                .create(&PostParams::default(), &cm("x", json!({})))
                .await
                .expect_err("no ns")
        ),
        404
    );
}

#[tokio::test]
async fn owner_references_are_garbage_collected() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .expect("owner");
    let mut child = cm("child", json!({}));
    child.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.metadata.uid.clone().expect("uid"),
            ..Default::default()
        },
    ]);
    cms.create(&PostParams::default(), &child)
        .await
        .expect("child");
    cms.delete("owner", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(
        status_code(cms.get("child").await.expect_err("collected")),
        404
    );
}

/// `limit` and `continue`: kube's client pages through a list in key
/// order, and kube-runtime's watcher, which lists in pages of 500, sees
/// every object of a longer list.
#[tokio::test]
async fn lists_page_with_limit_and_continue() {
    let (_server, client) = start().await;
    namespace(&client, "paged").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "paged");
    let want: Vec<String> = (0..503).map(|i| format!("cm-{i:03}")).collect();
    for name in want.iter().rev() {
        cms.create(&PostParams::default(), &cm(name, json!({})))
            .await
            .expect("created");
    }
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut params = ListParams::default().limit(200);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = cms.list(&params).await.expect("page");
        pages += 1;
        assert!(page.items.len() <= 200);
        seen.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!((pages, &seen), (3, &want));
    let watched: Vec<ConfigMap> = watcher(cms.clone(), watcher::Config::default())
        .take_while(|e| futures::future::ready(!matches!(e, Ok(watcher::Event::InitDone))))
        .try_filter_map(|e| async move {
            Ok(match e {
                watcher::Event::InitApply(o) => Some(o),
                _ => None,
            })
        })
        .try_collect()
        .await
        .expect("watcher lists");
    assert_eq!(watched.len(), 503);
    let refused = cms
        .list(&ListParams::default().limit(1).continue_token("forged"))
        .await
        .expect_err("a forged token");
    assert_eq!(status_code(refused), 400);
}

/// A Secret's stringData is folded into data and never stored, on create
/// and update, as kube-apiserver does.
#[tokio::test]
async fn secret_string_data_is_folded_into_data() {
    use k8s_openapi::api::core::v1::Secret;
    let (_server, client) = start().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "bgp-password" },
        "type": "kubernetes.io/basic-auth",
        "data": { "username": "YWRtaW4=", "password": "b2xk" },
        "stringData": { "password": "s3cret" },
    }))
    .expect("secret");
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("created");
    let stored = secrets.get("bgp-password").await.expect("stored");
    for s in [&created, &stored] {
        assert!(s.string_data.is_none(), "stringData stored: {s:?}");
        let data = s.data.clone().expect("data");
        assert_eq!(data["password"].0, b"s3cret");
        assert_eq!(data["username"].0, b"admin");
    }
    let patched = secrets
        .patch(
            "bgp-password",
            &PatchParams::default(),
            &Patch::Merge(json!({ "stringData": { "extra": "x" } })),
        )
        .await
        .expect("patched");
    assert!(patched.string_data.is_none());
    assert_eq!(patched.data.expect("data")["extra"].0, b"x");
}
