//! The HTTPS metrics against the lab API server, in process (no root
//! needed): the controller runs as its ServiceAccount, bound only by the
//! manifests' RBAC, and asks the API server who holds a scrape's token
//! and whether they may `get` `/metrics`.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::PostParams;
use kube::{Api, Client};
use metallb_rs::controller::run::{self, Options, Webhooks};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::{controller_client, install_controller_rbac, install_metallb_api};

const NS: &str = "metallb-system";

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

async fn create<K>(client: &Client, api: Api<K>, object: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let _ = client;
    let o: K = serde_json::from_value(object).expect("object");
    api.create(&PostParams::default(), &o)
        .await
        .expect("object created");
}

/// ServiceAccount `default/name` and a token for it.
async fn account_token(admin: &Client, name: &str) -> String {
    let sas = Api::<ServiceAccount>::namespaced(admin.clone(), "default");
    create(admin, sas.clone(), json!({ "metadata": { "name": name } })).await;
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    sas.create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("token")
        .status
        .expect("token status")
        .token
}

/// Skips certificate checks: the metrics' certificate is self-signed,
/// and what is tested here is who may read, not who serves.
#[derive(Debug)]
struct AnyCert;

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `GET /metrics` over HTTPS with `token`: (status line, body), or the
/// connection error.
async fn scrape(addr: SocketAddr, token: Option<&str>) -> std::io::Result<(String, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(AnyCert))
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    tls.write_all(format!("GET /metrics HTTP/1.0\r\nHost: x\r\n{auth}\r\n").as_bytes())
        .await?;
    let mut out = Vec::new();
    // A server closing without close_notify still sent the whole answer.
    let _ = tls.read_to_end(&mut out).await;
    let out = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    Ok((
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    ))
}

#[tokio::test]
async fn only_a_token_bound_to_get_metrics_reads_them() {
    let (server, admin) = test_support::start().await;
    install_metallb_api(&admin).await;
    install_controller_rbac(&admin).await;
    // The ClusterRole and binding the Prometheus artefacts ship
    // (manifests/prometheus/metallb-native-prometheus.yaml), for a reader here.
    let shipped = metallb_rs::manifests::prometheus::objects("default");
    let find = |kind: &str| {
        shipped
            .iter()
            .find(|o| o["kind"] == kind)
            .cloned()
            .expect(kind)
    };
    create(
        &admin,
        Api::<ClusterRole>::all(admin.clone()),
        find("ClusterRole"),
    )
    .await;
    create(
        &admin,
        Api::<ClusterRoleBinding>::all(admin.clone()),
        find("ClusterRoleBinding"),
    )
    .await;
    let reader = account_token(&admin, metallb_rs::manifests::prometheus::READER).await;
    let stranger = account_token(&admin, "stranger").await;
    let controller = controller_client(&server, NS).await;
    let addr = free_addr();
    let opts = Options {
        namespace: NS.into(),
        lb_class: None,
        leader_elect: false,
        identity: "c1".into(),
        lease: Default::default(),
        serving: metallb_rs::metrics::Serving {
            secure: Some(addr),
            ..Default::default()
        },
        memberlist_secret: None,
        webhooks: Webhooks::Disabled,
    };
    let task = tokio::spawn(run::run(controller, opts, std::future::pending()));
    let mut answer = None;
    for _ in 0..100 {
        if let Ok(a) = scrape(addr, None).await {
            answer = Some(a);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = answer.expect("the metrics server answers within 10 s");
    assert!(status.contains("401"), "{status} {body}");
    assert_eq!(body, "Unauthorized");

    let (status, body) = scrape(addr, Some("not-a-token")).await.expect("scrape");
    assert!(status.contains("401"), "{status} {body}");

    let (status, body) = scrape(addr, Some(&stranger)).await.expect("scrape");
    assert!(status.contains("403"), "{status} {body}");
    assert_eq!(
        body,
        "Authorization denied for user system:serviceaccount:default:stranger"
    );

    let (status, body) = scrape(addr, Some(&reader)).await.expect("scrape");
    assert!(status.contains("200"), "{status} {body}");
    assert!(body.contains("process_start_time_seconds "), "{body}");
    assert!(
        body.contains("metallb_k8s_client_config_loaded_bool"),
        "{body}"
    );
    task.abort();
}
