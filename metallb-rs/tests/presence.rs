//! Presence leases against the lab API server (the `lab-apiserver`
//! crate), in process: what a renewal writes, and that a renewal never
//! takes back a lease its speaker cleared on leaving.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use lab_apiserver::ApiServer;

mod common;
use metallb_rs::speaker::presence::{self, LEASE_PREFIX, Mark, Marks, Mode, TROUBLE_ANNOTATION};

const NS: &str = "metallb-system";

async fn start() -> (ApiServer, Client) {
    let (server, client) = test_support::start().await;
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NS.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    (server, client)
}

async fn lease(api: &Api<Lease>, node: &str) -> Lease {
    api.get(&format!("{LEASE_PREFIX}{node}"))
        .await
        .expect("lease")
}

fn holder(l: &Lease) -> Option<&str> {
    l.spec.as_ref()?.holder_identity.as_deref()
}

fn mark(l: &Lease) -> Option<&str> {
    l.metadata
        .annotations
        .as_ref()?
        .get(TROUBLE_ANNOTATION)
        .map(String::as_str)
}

#[tokio::test]
async fn renewals_write_the_mark_and_never_take_back_a_cleared_lease() {
    let (_server, client) = start().await;
    let api: Api<Lease> = Api::namespaced(client, NS);
    presence::join(&api, "n1", Mode::Slow, None)
        .await
        .expect("join");
    let doubts = Mark::parse("n2,n3");
    let marked = Marks {
        trouble: Some(&doubts),
        link_down: None,
        run: None,
    };
    let written = presence::renew_if_held(&api, "n1", Mode::Trouble, marked)
        .await
        .expect("renew")
        .expect("held");
    let l = lease(&api, "n1").await;
    assert_eq!(mark(&l), Some("n2,n3"));
    // The version the write made, as a watch shows it: the witness of
    // how current this speaker's watch is (`renewal::Record::sent_of`).
    assert_eq!(written.version, l.metadata.resource_version);
    assert_eq!(
        l.spec.as_ref().and_then(|s| s.lease_duration_seconds),
        Some(3)
    );
    // Doubts over: the mark goes, the period is slow again.
    presence::renew(&api, "n1", Mode::Slow, Marks::default())
        .await
        .expect("renew");
    let l = lease(&api, "n1").await;
    assert_eq!((mark(&l), holder(&l)), (None, Some("n1")));
    assert_eq!(
        l.spec.as_ref().and_then(|s| s.lease_duration_seconds),
        Some(45)
    );
    // SIGTERM: cleared. A renewal that lands afterwards writes nothing.
    presence::leave(&api, "n1").await.expect("leave");
    assert!(
        presence::renew_if_held(&api, "n1", Mode::Slow, Marks::default())
            .await
            .expect("answered")
            .is_none()
    );
    assert_eq!(holder(&lease(&api, "n1").await), None, "still cleared");
    // A running speaker whose lease was cleared under it (its previous
    // run's leave landing late) takes it back; one that never had a
    // lease creates it.
    presence::renew(&api, "n1", Mode::Slow, Marks::default())
        .await
        .expect("renew");
    assert_eq!(holder(&lease(&api, "n1").await), Some("n1"));
    assert!(
        presence::renew_if_held(&api, "n9", Mode::Slow, Marks::default())
            .await
            .expect("answered")
            .is_none()
    );
    presence::renew(&api, "n9", Mode::Slow, Marks::default())
        .await
        .expect("created");
    assert_eq!(holder(&lease(&api, "n9").await), Some("n9"));
}

/// A restarted speaker reads its previous run's gossip number from its
/// lease (`membership::next_run`): every write keeps it, a leave too.
#[tokio::test]
async fn the_lease_keeps_the_gossip_run_for_the_next_run() {
    let (_server, client) = start().await;
    let api: Api<Lease> = Api::namespaced(client, NS);
    let run = |l: &Lease| presence::last_run([l], "n1");
    presence::join(&api, "n1", Mode::Slow, Some(7))
        .await
        .expect("join");
    assert_eq!(run(&lease(&api, "n1").await), Some(7));
    let doubts = Mark::parse("n2");
    let marked = Marks {
        trouble: Some(&doubts),
        link_down: Some("eth0"),
        run: Some(7),
    };
    assert!(
        presence::renew_if_held(&api, "n1", Mode::Trouble, marked)
            .await
            .expect("renew")
            .is_some()
    );
    let l = lease(&api, "n1").await;
    assert_eq!((run(&l), mark(&l)), (Some(7), Some("n2")));
    presence::leave(&api, "n1").await.expect("leave");
    let l = lease(&api, "n1").await;
    assert_eq!((run(&l), holder(&l)), (Some(7), None), "kept by a leave");
    assert_eq!(presence::last_run([&l], "n2"), None, "another node's lease");
}

/// What RBAC cannot say, the manifests' admission policy does: a speaker
/// writes presence leases only, never the controller's leader lease (a
/// huge leaseDurationSeconds there would stop assignment). Without the
/// policy, the same patch goes through.
#[tokio::test]
async fn a_speaker_may_write_presence_leases_only() {
    use kube::api::{Patch, PatchParams};
    let (server, admin) = start().await;
    let admin_leases: Api<Lease> = Api::namespaced(admin.clone(), NS);
    let controller_lease = Lease {
        metadata: ObjectMeta {
            name: Some(metallb_rs::controller::run::LEASE_NAME.to_owned()),
            ..ObjectMeta::default()
        },
        ..Lease::default()
    };
    admin_leases
        .create(&PostParams::default(), &controller_lease)
        .await
        .expect("controller lease");
    let speaker = common::account_client(&server, NS, "speaker").await;
    let leases: Api<Lease> = Api::namespaced(speaker, NS);
    let grab = serde_json::json!({ "spec": { "leaseDurationSeconds": 1_000_000 } });
    let (params, patch) = (PatchParams::default(), Patch::Merge(&grab));
    let take = || leases.patch(metallb_rs::controller::run::LEASE_NAME, &params, &patch);
    common::install_rbac(&admin, "speaker").await;
    let refused = take().await.expect_err("refused");
    match refused {
        kube::Error::Api(e) => {
            assert_eq!(e.code, 403, "{e:?}");
            assert!(e.message.contains("presence leases"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
    presence::join(&leases, "n1", Mode::Slow, None)
        .await
        .expect("its own presence lease");
    // The control: the Role alone lets a speaker patch any lease.
    let policies: Api<kube::api::DynamicObject> = Api::all_with(
        admin.clone(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
        )),
    );
    policies
        .delete(
            metallb_rs::manifests::rbac::LEASE_POLICY,
            &Default::default(),
        )
        .await
        .expect("binding deleted");
    take()
        .await
        .expect("without the policy, the Role lets it through");
}
