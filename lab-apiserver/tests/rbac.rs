//! Authentication and RBAC over HTTP: ServiceAccount tokens from the
//! TokenRequest API, the MetalLB manifests' roles enforced with
//! kube-apiserver's 403 messages, access and token reviews, and
//! impersonation - through kube's client and the real kubectl.

mod common;

use common::*;
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SubjectAccessReview};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;

const SPEAKER: &str = "system:serviceaccount:metallb-system:speaker";

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other}"),
    }
}

async fn pool(client: &kube::Client) {
    let pool: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": { "name": "prod" }, "spec": { "addresses": ["172.30.0.100-172.30.0.110"] },
    }))
    .expect("pool");
    pools(client, "metallb-system")
        .create(&PostParams::default(), &pool)
        .await
        .expect("pool created");
}

#[tokio::test]
async fn service_accounts_get_what_the_manifests_grant_and_no_more() {
    let (server, admin) = start().await;
    install_metallb_crds(&admin).await;
    install_metallb_rbac(&admin).await;
    pool(&admin).await;
    let speaker =
        client_for(&service_account_kubeconfig(&admin, &server, "metallb-system", "speaker").await)
            .await;

    let listed = pools(&speaker, "metallb-system")
        .list(&ListParams::default())
        .await
        .expect("the speaker reads pools");
    assert_eq!(listed.items.len(), 1);
    let refused = api_error(
        pools(&speaker, "metallb-system")
            .delete("prod", &DeleteParams::default())
            .await
            .expect_err("the speaker may not delete pools"),
    );
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        refused.message,
        format!(
            r#"ipaddresspools.metallb.io "prod" is forbidden: User "{SPEAKER}" cannot delete resource "ipaddresspools" in API group "metallb.io" in the namespace "metallb-system""#
        )
    );
    let elsewhere = api_error(
        Api::<ConfigMap>::namespaced(speaker.clone(), "default")
            .list(&ListParams::default())
            .await
            .expect_err("configmaps outside metallb-system"),
    );
    assert_eq!(
        elsewhere.message,
        format!(
            r#"configmaps is forbidden: User "{SPEAKER}" cannot list resource "configmaps" in API group "" in the namespace "default""#
        )
    );

    // A list or watch selecting one name is authorized for that name: the
    // speaker reads metallb-excludel2 that way, and no other ConfigMap.
    let configmaps = Api::<ConfigMap>::namespaced(speaker.clone(), "metallb-system");
    configmaps
        .list(&ListParams::default().fields("metadata.name=metallb-excludel2"))
        .await
        .expect("the speaker lists its ConfigMap by name");
    for refused in [
        ListParams::default(),
        ListParams::default().fields("metadata.name=other"),
        ListParams::default().fields("metadata.name!=metallb-excludel2"),
    ] {
        let e = api_error(
            configmaps
                .list(&refused)
                .await
                .expect_err("only metallb-excludel2"),
        );
        assert_eq!(e.code, 403, "{:?}: {}", refused.field_selector, e.message);
    }

    // Reviews: the speaker asks about itself; the admin about anyone.
    let ssar: SelfSubjectAccessReview = serde_json::from_value(json!({ "spec": { "resourceAttributes": {
        "namespace": "metallb-system", "verb": "create", "group": "metallb.io", "resource": "servicel2statuses" } } }))
    .expect("review");
    let answered = Api::<SelfSubjectAccessReview>::all(speaker.clone())
        .create(&PostParams::default(), &ssar)
        .await
        .expect("self review");
    assert!(answered.status.expect("status").allowed);
    let sar: SubjectAccessReview = serde_json::from_value(json!({ "spec": { "user": SPEAKER,
        "groups": ["system:serviceaccounts", "system:serviceaccounts:metallb-system", "system:authenticated"],
        "resourceAttributes": { "namespace": "metallb-system", "verb": "delete", "group": "metallb.io", "resource": "ipaddresspools" } } }))
    .expect("review");
    let answered = Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &sar)
        .await
        .expect("review");
    assert!(!answered.status.expect("status").allowed);
    // The speaker may review others too (its metrics authorize who
    // scrapes them, as upstream's); a ServiceAccount without that grant
    // may not.
    let answered = Api::<SubjectAccessReview>::all(speaker.clone())
        .create(&PostParams::default(), &sar)
        .await
        .expect("the speaker reviews for its metrics");
    assert!(!answered.status.expect("status").allowed);
    let account: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "nobody" } })).expect("account");
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &account)
        .await
        .expect("account created");
    let nobody =
        client_for(&service_account_kubeconfig(&admin, &server, "default", "nobody").await).await;
    let refused = api_error(
        Api::<SubjectAccessReview>::all(nobody)
            .create(&PostParams::default(), &sar)
            .await
            .expect_err("only the granted review others"),
    );
    assert_eq!(refused.code, 403);

    // TokenReview tells who a token belongs to.
    let kubeconfig =
        service_account_kubeconfig(&admin, &server, "metallb-system", "controller").await;
    let token = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("token")
        .trim_matches('"')
        .to_owned();
    for (token, authenticated) in [(token.as_str(), true), ("lab.forged.token", false)] {
        let review: TokenReview =
            serde_json::from_value(json!({ "spec": { "token": token } })).expect("review");
        let status = Api::<TokenReview>::all(admin.clone())
            .create(&PostParams::default(), &review)
            .await
            .expect("token review")
            .status
            .expect("status");
        assert_eq!(status.authenticated, Some(authenticated), "{token}");
        if authenticated {
            let user = status.user.expect("user");
            assert_eq!(
                user.username.as_deref(),
                Some("system:serviceaccount:metallb-system:controller")
            );
            assert!(
                user.groups
                    .expect("groups")
                    .contains(&"system:serviceaccounts:metallb-system".to_owned())
            );
        }
    }
}

#[tokio::test]
async fn anonymous_and_bad_tokens_and_deleted_accounts_are_refused() {
    let (server, admin) = start().await;
    install_metallb_crds(&admin).await;
    install_metallb_rbac(&admin).await;
    let anonymous = client_for(&lab_apiserver::kubeconfig(
        &lab_apiserver::Endpoint::of(&server),
        "lab",
        "nobody",
        "",
    ))
    .await;
    let refused = api_error(
        Api::<ConfigMap>::namespaced(anonymous, "default")
            .list(&ListParams::default())
            .await
            .expect_err("anonymous"),
    );
    assert_eq!(refused.code, 403);
    assert!(
        refused.message.contains(r#"User "system:anonymous""#),
        "{}",
        refused.message
    );
    let forged = client_for(&lab_apiserver::kubeconfig(
        &lab_apiserver::Endpoint::of(&server),
        "lab",
        "x",
        "lab.e30.AAAA",
    ))
    .await;
    let refused = api_error(
        Api::<ConfigMap>::namespaced(forged, "default")
            .list(&ListParams::default())
            .await
            .expect_err("forged"),
    );
    assert_eq!(refused.code, 401);
    // A token dies with its ServiceAccount.
    let speaker =
        client_for(&service_account_kubeconfig(&admin, &server, "metallb-system", "speaker").await)
            .await;
    pools(&speaker, "metallb-system")
        .list(&ListParams::default())
        .await
        .expect("valid while the account exists");
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), "metallb-system")
        .delete("speaker", &DeleteParams::default())
        .await
        .expect("account deleted");
    let refused = api_error(
        pools(&speaker, "metallb-system")
            .list(&ListParams::default())
            .await
            .expect_err("account gone"),
    );
    assert_eq!(refused.code, 401);
    // Nor does it come back with an account of the same name.
    let namesake: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "speaker" } })).expect("account");
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), "metallb-system")
        .create(&PostParams::default(), &namesake)
        .await
        .expect("account recreated");
    let refused = api_error(
        pools(&speaker, "metallb-system")
            .list(&ListParams::default())
            .await
            .expect_err("bound to the old account's UID"),
    );
    assert_eq!(refused.code, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_whoami_and_impersonation() {
    if !kubectl_or_skip() {
        return;
    }
    let (server, admin) = start().await;
    install_metallb_crds(&admin).await;
    install_metallb_rbac(&admin).await;
    pool(&admin).await;
    let dir = tempfile::tempdir().expect("tmp");
    let kc = dir.path().join("kubeconfig");
    server.write_kubeconfig("lab", &kc).expect("kubeconfig");
    let as_speaker = format!("--as={SPEAKER}");
    let can_i = |verb: &'static str, resource: &'static str| {
        let kc = kc.clone();
        let as_speaker = as_speaker.clone();
        async move {
            kubectl_async(
                &kc,
                &[
                    "auth",
                    "can-i",
                    verb,
                    resource,
                    "-n",
                    "metallb-system",
                    &as_speaker,
                ],
                None,
            )
            .await
        }
    };
    let (ok, out) = can_i("delete", "ipaddresspools").await;
    assert!(!ok && out.trim() == "no", "{out}");
    let (ok, out) = can_i("create", "servicel2statuses").await;
    assert!(ok && out.trim() == "yes", "{out}");
    let (ok, out) = can_i("patch", "services/status").await;
    assert!(
        !ok && out.trim() == "no",
        "the controller's, not the speaker's: {out}"
    );

    let (ok, out) = kubectl_async(
        &kc,
        &["get", "ipaddresspools", "-n", "metallb-system", &as_speaker],
        None,
    )
    .await;
    assert!(ok && out.contains("prod"), "{out}");
    let (ok, out) = kubectl_async(
        &kc,
        &[
            "delete",
            "ipaddresspool",
            "prod",
            "-n",
            "metallb-system",
            &as_speaker,
        ],
        None,
    )
    .await;
    assert!(
        !ok && out.contains(&format!(r#"ipaddresspools.metallb.io "prod" is forbidden: User "{SPEAKER}" cannot delete resource "ipaddresspools" in API group "metallb.io" in the namespace "metallb-system""#)),
        "{out}"
    );
    let (ok, out) = kubectl_async(
        &kc,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
        None,
    )
    .await;
    assert!(
        ok && out.starts_with("kubernetes-admin ") && out.contains("system:masters"),
        "{out}"
    );
    let (ok, out) = kubectl_async(
        &kc,
        &["create", "token", "speaker", "-n", "metallb-system"],
        None,
    )
    .await;
    assert!(ok && out.starts_with("lab."), "{out}");

    // Impersonating needs the impersonate verb: the speaker has none
    // (kubectl impersonates on discovery too, so it fails there).
    let speaker_kc = dir.path().join("speaker");
    std::fs::write(
        &speaker_kc,
        service_account_kubeconfig(&admin, &server, "metallb-system", "speaker").await,
    )
    .expect("write");
    let (ok, out) = kubectl_async(
        &speaker_kc,
        &[
            "get",
            "pods",
            "--as=system:serviceaccount:metallb-system:controller",
        ],
        None,
    )
    .await;
    assert!(!ok && out.contains("Forbidden"), "{out}");
    let (ok, out) = kubectl_async(
        &speaker_kc,
        &[
            "auth",
            "can-i",
            "list",
            "ipaddresspools",
            "-n",
            "metallb-system",
        ],
        None,
    )
    .await;
    assert!(ok && out.trim() == "yes", "{out}");
    server.stop();
}

/// A RoleBinding grants in its namespace only: a cluster-scoped kind
/// reached through a namespaced URL is not found (as kube-apiserver
/// answers), and through its own URL a namespaced grant does not reach
/// it.
#[tokio::test]
async fn a_namespaced_grant_reaches_no_cluster_scoped_kind() {
    use k8s_openapi::api::core::v1::{Node, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
    use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
    let (server, admin) = start().await;
    let node: Node = serde_json::from_value(json!({ "metadata": { "name": "n1" } })).expect("node");
    Api::<Node>::all(admin.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("node created");
    let account: ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "tenant" } })).expect("account");
    Api::<ServiceAccount>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &account)
        .await
        .expect("account created");
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "everything" },
        "rules": [{ "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] }],
    }))
    .expect("role");
    Api::<Role>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &role)
        .await
        .expect("role created");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "everything" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "everything" },
        "subjects": [{ "kind": "ServiceAccount", "name": "tenant", "namespace": "default" }],
    }))
    .expect("binding");
    Api::<RoleBinding>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding created");
    let tenant =
        client_for(&service_account_kubeconfig(&admin, &server, "default", "tenant").await).await;
    Api::<ConfigMap>::namespaced(tenant.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("the grant works in its namespace");

    let label = Patch::Merge(json!({ "metadata": { "labels": { "owned": "yes" } } }));
    let nodes_in_default = Api::<DynamicObject>::namespaced_with(
        tenant.clone(),
        "default",
        &ApiResource::erase::<Node>(&()),
    );
    let refused = api_error(
        nodes_in_default
            .patch("n1", &PatchParams::default(), &label)
            .await
            .expect_err("nodes have no namespaced URL"),
    );
    assert_eq!(refused.code, 404, "{}", refused.message);
    let refused = api_error(
        Api::<Node>::all(tenant.clone())
            .patch("n1", &PatchParams::default(), &label)
            .await
            .expect_err("a Role grants no cluster-scoped kind"),
    );
    assert_eq!(refused.code, 403, "{}", refused.message);
    let labels = Api::<Node>::all(admin.clone())
        .get("n1")
        .await
        .expect("node")
        .metadata
        .labels
        .unwrap_or_default();
    assert!(!labels.contains_key("owned"), "{labels:?}");

    let escalate: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": "tenant-admin" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "kind": "ServiceAccount", "name": "tenant", "namespace": "default" }],
    }))
    .expect("cluster role binding");
    let bindings_in_default = Api::<DynamicObject>::namespaced_with(
        tenant.clone(),
        "default",
        &ApiResource::erase::<ClusterRoleBinding>(&()),
    );
    let refused = api_error(
        bindings_in_default
            .create(&PostParams::default(), &escalate)
            .await
            .expect_err("cluster role bindings have no namespaced URL"),
    );
    assert_eq!(refused.code, 404, "{}", refused.message);
    let all_bindings =
        Api::<DynamicObject>::all_with(tenant, &ApiResource::erase::<ClusterRoleBinding>(&()));
    let refused = api_error(
        all_bindings
            .create(&PostParams::default(), &escalate)
            .await
            .expect_err("a Role grants no cluster role binding"),
    );
    assert_eq!(refused.code, 403, "{}", refused.message);
    Api::<ClusterRoleBinding>::all(admin)
        .get("tenant-admin")
        .await
        .expect_err("no binding was made");
}

/// Escalation prevention: who may create roles and bindings grants only
/// what they hold, unless they may `escalate` or `bind`.
#[tokio::test]
async fn rbac_writes_grant_only_what_the_writer_holds() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let (server, admin) = start().await;
    let account: ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "delegate" } })).expect("account");
    Api::<ServiceAccount>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &account)
        .await
        .expect("account created");
    let role = |name: &str, rules: serde_json::Value| -> Role {
        serde_json::from_value(json!({ "metadata": { "name": name }, "rules": rules }))
            .expect("role")
    };
    let binding = |name: &str, kind: &str, role: &str, who: &str| -> RoleBinding {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role },
            "subjects": [{ "kind": "ServiceAccount", "name": who, "namespace": "default" }],
        }))
        .expect("binding")
    };
    let roles = Api::<Role>::namespaced(admin.clone(), "default");
    let bindings = Api::<RoleBinding>::namespaced(admin.clone(), "default");
    // The delegate may manage roles and bindings, and read ConfigMaps.
    roles
        .create(
            &PostParams::default(),
            &role(
                "delegate",
                json!([
                    { "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "update", "get"] },
                    { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"] },
                ]),
            ),
        )
        .await
        .expect("role created");
    bindings
        .create(
            &PostParams::default(),
            &binding("delegate", "Role", "delegate", "delegate"),
        )
        .await
        .expect("binding created");
    let delegate =
        client_for(&service_account_kubeconfig(&admin, &server, "default", "delegate").await).await;
    let as_delegate = Api::<Role>::namespaced(delegate.clone(), "default");
    let binds_as_delegate = Api::<RoleBinding>::namespaced(delegate.clone(), "default");

    // What it holds it may grant; what it does not, it may not.
    as_delegate
        .create(
            &PostParams::default(),
            &role(
                "reader",
                json!([{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"] }]),
            ),
        )
        .await
        .expect("granting a held permission");
    let refused = api_error(
        as_delegate
            .create(
                &PostParams::default(),
                &role(
                    "secrets",
                    json!([{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get"] }]),
                ),
            )
            .await
            .expect_err("granting what it does not hold"),
    );
    assert_eq!(refused.code, 403, "{}", refused.message);
    assert!(
        refused.message.contains("not currently held"),
        "{}",
        refused.message
    );
    // Nor by widening a role it may update.
    let mut widened = role(
        "reader",
        json!([{ "apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get"] }]),
    );
    widened.metadata = as_delegate.get("reader").await.expect("reader").metadata;
    let refused = api_error(
        as_delegate
            .replace("reader", &PostParams::default(), &widened)
            .await
            .expect_err("widening beyond what it holds"),
    );
    assert_eq!(refused.code, 403, "{}", refused.message);

    // Bindings: a role whose permissions it holds, yes; cluster-admin, no.
    binds_as_delegate
        .create(
            &PostParams::default(),
            &binding("reader", "Role", "reader", "delegate"),
        )
        .await
        .expect("binding a held role");
    let refused = api_error(
        binds_as_delegate
            .create(
                &PostParams::default(),
                &binding("admin", "ClusterRole", "cluster-admin", "delegate"),
            )
            .await
            .expect_err("binding cluster-admin"),
    );
    assert_eq!(refused.code, 403, "{}", refused.message);
    // Unless it may `bind` that role.
    roles
        .create(
            &PostParams::default(),
            &role(
                "binder",
                json!([{ "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["cluster-admin"] }]),
            ),
        )
        .await
        .expect("role created");
    bindings
        .create(
            &PostParams::default(),
            &binding("binder", "Role", "binder", "delegate"),
        )
        .await
        .expect("binding created");
    binds_as_delegate
        .create(
            &PostParams::default(),
            &binding("admin", "ClusterRole", "cluster-admin", "delegate"),
        )
        .await
        .expect("bind allows it");
}
