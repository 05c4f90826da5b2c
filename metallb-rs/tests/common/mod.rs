//! What the integration tests against the lab API server share: the
//! server in process and clients of it.

use kube::Client;
use kube::config::Kubeconfig;
use lab_apiserver::ApiServer;

/// A client from a kubeconfig the lab API server wrote.
pub async fn client_from(kubeconfig: &str) -> Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig parses");
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("client config");
    Client::try_from(config).expect("client")
}

/// The lab API server on a free loopback port, and an admin client.
pub async fn server_and_admin() -> (ApiServer, Client) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let server = ApiServer::start(listener).await.expect("starts");
    let client = client_from(&server.kubeconfig("lab")).await;
    (server, client)
}
