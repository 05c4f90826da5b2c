//! The controller's validating webhooks against the lab API server, in
//! process (no root needed): the API server calls them as kube-apiserver
//! does (TLS verified against the configuration's caBundle for
//! `metallb-webhook-service.metallb-system.svc`), so a write is refused or
//! admitted at apply time. The controller runs as its ServiceAccount,
//! bound only by the manifests' RBAC.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, Client};
use lab_apiserver::ApiServer;
use metallb_rs::api::v1beta1::IPAddressPool;
use metallb_rs::api::{v1beta1, v1beta2};
use metallb_rs::controller::run::{self, Options, Webhooks};
use metallb_rs::k8s::webhook;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::oneshot;

mod common;
use common::{controller_client, install_controller_rbac, install_metallb_api};

const NS: &str = "metallb-system";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

struct Lab {
    _server: ApiServer,
    admin: Client,
    controller: Client,
    webhook_addr: SocketAddr,
}

/// The API server reaching the webhook Service at a loopback port, the
/// MetalLB API, the manifests' RBAC, Secret, Service and configuration.
async fn lab() -> Lab {
    metallb_rs::logging::init(
        metallb_rs::logging::LogFormat::Text,
        metallb_rs::logging::LogLevel::Warn,
    );
    let webhook_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let mut options = lab_apiserver::Options::default();
    options.webhook_services.insert(
        format!("{NS}/{}", webhook::SERVICE),
        webhook_addr.to_string(),
    );
    let server = ApiServer::start_with(listener, options)
        .await
        .expect("starts");
    let admin = test_support::client_for(&server.kubeconfig("lab")).await;
    install_metallb_api(&admin).await;
    convert_bgppeers_through_the_controller(&admin).await;
    install_controller_rbac(&admin).await;
    for o in [
        metallb_rs::manifests::webhooks::secret(NS),
        metallb_rs::manifests::webhooks::service(NS),
    ] {
        apply(&admin, o).await;
    }
    let vwc: ValidatingWebhookConfiguration =
        serde_json::from_value(metallb_rs::manifests::webhooks::configuration(NS)).expect("vwc");
    Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .create(&PostParams::default(), &vwc)
        .await
        .expect("configuration created");
    let controller = controller_client(&server, NS).await;
    Lab {
        _server: server,
        admin,
        controller,
        webhook_addr,
    }
}

/// BGPPeer's CRD as `metallb-native.yaml` has it: v1beta1 <-> v1beta2
/// through the controller's `/convert`.
async fn convert_bgppeers_through_the_controller(admin: &Client) {
    let crds = Api::<CustomResourceDefinition>::all(admin.clone());
    let wanted = metallb_rs::manifests::native_objects(&Default::default())
        .into_iter()
        .find(|o| o["metadata"]["name"] == webhook::CONVERSION_CRD)
        .expect("bgppeers CRD");
    let mut wanted: CustomResourceDefinition = serde_json::from_value(wanted).expect("CRD");
    let existing = crds
        .get(webhook::CONVERSION_CRD)
        .await
        .expect("bgppeers CRD");
    wanted.metadata.resource_version = existing.metadata.resource_version;
    crds.replace(webhook::CONVERSION_CRD, &PostParams::default(), &wanted)
        .await
        .expect("conversion webhook installed");
}

async fn apply(client: &Client, object: serde_json::Value) {
    match object["kind"].as_str() {
        Some("Secret") => {
            let s: Secret = serde_json::from_value(object).expect("secret");
            Api::<Secret>::namespaced(client.clone(), NS)
                .create(&PostParams::default(), &s)
                .await
                .expect("secret created");
        }
        Some("Service") => {
            let s: k8s_openapi::api::core::v1::Service =
                serde_json::from_value(object).expect("service");
            Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), NS)
                .create(&PostParams::default(), &s)
                .await
                .expect("service created");
        }
        other => panic!("no apply for {other:?}"),
    }
}

/// A controller serving only the webhooks (`--webhook-mode onlywebhook`),
/// in this process until dropped; its probes on `health`.
struct Controller {
    _stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    health: SocketAddr,
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Controller {
    /// Stops it, and waits until its webhook port is free again (the
    /// server task it spawned closes its listener when next polled).
    async fn stop(mut self, webhook_addr: SocketAddr) {
        self.task.abort();
        let _ = (&mut self.task).await;
        for _ in 0..50 {
            if std::net::TcpListener::bind(webhook_addr).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{webhook_addr} still taken 5 s after the controller stopped");
    }
}

fn start_controller(lab: &Lab, identity: &str) -> Controller {
    start_replica(lab, identity, lab.webhook_addr)
}

/// A replica serving on `webhook_addr` (the API server reaches only the
/// one at `lab.webhook_addr`).
fn start_replica(lab: &Lab, identity: &str, webhook_addr: SocketAddr) -> Controller {
    let health = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let opts = Options {
        namespace: NS.into(),
        lb_class: None,
        leader_elect: false,
        identity: identity.into(),
        lease: Default::default(),
        serving: metallb_rs::metrics::Serving {
            health: Some(health),
            ..Default::default()
        },
        memberlist_secret: None,
        webhooks: Webhooks::Only(webhook::Options::new(webhook_addr, NS)),
    };
    let (tx, rx) = oneshot::channel();
    let client = lab.controller.clone();
    let task = tokio::spawn(async move {
        run::run(client, opts, async {
            let _ = rx.await;
        })
        .await
    });
    Controller {
        _stop: tx,
        task,
        health,
    }
}

/// `/readyz`'s status and body.
async fn readyz(addr: SocketAddr) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(b"GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    let code = out.split(' ').nth(1)?.parse().ok()?;
    Some((code, out.split_once("\r\n\r\n")?.1.to_owned()))
}

async fn wait_ready(c: &mut Controller) {
    let mut last = None;
    for _ in 0..100 {
        last = readyz(c.health).await;
        if matches!(last, Some((200, _))) {
            return;
        }
        if c.task.is_finished() {
            let exit = (&mut c.task).await;
            panic!("controller stopped ({exit:?}): last /readyz {last:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("controller not ready within 10 s: last /readyz {last:?}");
}

fn pool(name: &str, addresses: &[&str]) -> IPAddressPool {
    serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1",
        "kind": "IPAddressPool",
        "metadata": { "name": name, "namespace": NS },
        "spec": { "addresses": addresses },
    }))
    .expect("pool")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_pool_is_refused_at_apply_naming_both_pools() {
    let lab = lab().await;
    let mut controller = start_controller(&lab, "c1");
    wait_ready(&mut controller).await;

    // Ready means the API server can verify the controller: the
    // configuration carries the CA kept in the Secret.
    let (_, in_place) = ca_in_place(&lab.admin).await;
    assert!(in_place, "ready before the configuration carries the CA");

    let pools = Api::<IPAddressPool>::namespaced(lab.admin.clone(), NS);
    pools
        .create(&PostParams::default(), &pool("first", &["10.0.0.0/24"]))
        .await
        .expect("a valid pool is admitted");
    let refused = pools
        .create(&PostParams::default(), &pool("second", &["10.0.0.128/25"]))
        .await
        .expect_err("an overlapping pool is refused");
    let kube::Error::Api(status) = refused else {
        panic!("not an API error: {refused:?}")
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status
            .message
            .contains(r#"ipaddresspool "metallb-system/second""#)
            && status.message.contains(r#"ipaddresspool "first""#),
        "{}",
        status.message
    );
    assert!(
        status
            .message
            .contains("ipaddresspoolvalidationwebhook.metallb.io"),
        "{}",
        status.message
    );
    pools
        .create(&PostParams::default(), &pool("second", &["10.0.1.0/24"]))
        .await
        .expect("a disjoint pool is admitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_reuses_the_certificate() {
    let lab = lab().await;
    let mut first = start_controller(&lab, "c1");
    wait_ready(&mut first).await;
    let secrets = Api::<Secret>::namespaced(lab.admin.clone(), NS);
    let before = secrets.get(webhook::SECRET).await.expect("secret").data;
    first.stop(lab.webhook_addr).await;
    let mut second = start_controller(&lab, "c2");
    wait_ready(&mut second).await;
    let after = secrets.get(webhook::SECRET).await.expect("secret").data;
    assert_eq!(before, after, "the pair was replaced on restart");
    Api::<IPAddressPool>::namespaced(lab.admin.clone(), NS)
        .create(&PostParams::default(), &pool("p", &["10.0.0.0/24"]))
        .await
        .expect("admitted by the restarted controller");
}

/// The CA in the Secret, and whether every webhook of the configuration
/// carries it.
async fn ca_in_place(admin: &Client) -> (Vec<u8>, bool) {
    let secret = Api::<Secret>::namespaced(admin.clone(), NS)
        .get(webhook::SECRET)
        .await
        .expect("secret");
    let ca = secret
        .data
        .as_ref()
        .and_then(|d| d.get("ca.crt"))
        .expect("ca.crt")
        .0
        .clone();
    let vwc = Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .get(webhook::CONFIGURATION)
        .await
        .expect("configuration");
    let all = vwc
        .webhooks
        .iter()
        .flatten()
        .all(|w| w.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&ca));
    (ca, all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_starting_together_converge_on_one_certificate() {
    let lab = lab().await;
    let mut a = start_controller(&lab, "a");
    let b_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut b = start_replica(&lab, "b", b_addr);
    wait_ready(&mut a).await;
    wait_ready(&mut b).await;
    let (ca, in_place) = ca_in_place(&lab.admin).await;
    assert!(
        in_place,
        "the configuration carries another CA than the Secret"
    );
    // The replica the API server does not reach serves a leaf of the same
    // CA, as the API server would verify it.
    verify_serving(b_addr, &ca).await;
    Api::<IPAddressPool>::namespaced(lab.admin.clone(), NS)
        .create(&PostParams::default(), &pool("p", &["10.0.0.0/24"]))
        .await
        .expect("admitted with the shared certificate");
}

/// A TLS handshake with the server at `addr` succeeds trusting only `ca`
/// for the webhook Service's name.
async fn verify_serving(addr: SocketAddr, ca: &[u8]) {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca) {
        roots.add(cert.expect("CA PEM")).expect("CA");
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from(metallb_rs::certs::dns_name(webhook::SERVICE, NS))
        .expect("server name");
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("the replica's certificate verifies against the shared CA");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bgppeers_convert_both_ways_through_the_controller() {
    let lab = lab().await;
    let mut controller = start_controller(&lab, "c1");
    wait_ready(&mut controller).await;

    // Ready means the CRD's conversion webhook carries the CA too.
    let (ca, _) = ca_in_place(&lab.admin).await;
    let crd = Api::<CustomResourceDefinition>::all(lab.admin.clone())
        .get(webhook::CONVERSION_CRD)
        .await
        .expect("bgppeers CRD");
    let client_config = crd
        .spec
        .conversion
        .and_then(|c| c.webhook?.client_config)
        .expect("conversion webhook");
    assert_eq!(client_config.ca_bundle.map(|b| b.0), Some(ca));

    let old_api = Api::<v1beta1::BGPPeer>::namespaced(lab.admin.clone(), NS);
    let new_api = Api::<v1beta2::BGPPeer>::namespaced(lab.admin.clone(), NS);
    let old: v1beta1::BGPPeer = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "BGPPeer",
        "metadata": { "name": "old", "namespace": NS },
        "spec": { "myASN": 64512, "peerASN": 64513, "peerAddress": "10.0.0.1", "peerPort": 179, "holdTime": "90s",
                  "nodeSelectors": [{ "matchExpressions": [{ "key": "rack", "operator": "In", "values": ["r1"] }] }] },
    }))
    .expect("v1beta1 peer");
    old_api
        .create(&PostParams::default(), &old)
        .await
        .expect("created as v1beta1");
    // The API server may add v1beta2's defaults (disableMP, ...) on the
    // way: compare what v1beta1 holds.
    let as_new = new_api.get("old").await.expect("read as v1beta2");
    assert_eq!(as_new.spec.peer_asn, Some(64513));
    assert_eq!(as_new.spec.hold_time.as_deref(), Some("90s"));
    assert_eq!(v1beta1::BGPPeerSpec::from(as_new.spec), old.spec);
    let as_old = old_api.get("old").await.expect("read as v1beta1");
    assert_eq!(as_old.spec, old.spec);

    let new: v1beta2::BGPPeer = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
        "metadata": { "name": "new", "namespace": NS },
        "spec": { "myASN": 64512, "peerASN": 64514, "peerAddress": "10.0.0.2", "connectTime": "10s" },
    }))
    .expect("v1beta2 peer");
    new_api
        .create(&PostParams::default(), &new)
        .await
        .expect("created as v1beta2");
    let stored = new_api.get("new").await.expect("read as v1beta2");
    assert_eq!(stored.spec.connect_time.as_deref(), Some("10s"));
    let as_old = old_api.get("new").await.expect("read as v1beta1");
    assert_eq!(as_old.spec.peer_address, "10.0.0.2");
    assert_eq!(as_old.spec, v1beta1::BGPPeerSpec::from(stored.spec));
    // Raw, as served: converted by the controller, not relabelled (the
    // field v1beta1 has not is gone).
    let raw = Api::<kube::core::DynamicObject>::namespaced_with(
        lab.admin.clone(),
        NS,
        &kube::core::ApiResource::erase::<v1beta1::BGPPeer>(&()),
    )
    .get("new")
    .await
    .expect("read as v1beta1");
    assert_eq!(
        raw.types.map(|t| t.api_version).as_deref(),
        Some("metallb.io/v1beta1")
    );
    assert!(
        raw.data["spec"].get("connectTime").is_none(),
        "{}",
        raw.data
    );
}
