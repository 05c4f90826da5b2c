//! kubectl (the real binary) against the API server: discovery, apply
//! with strategic merge, get, describe, schema errors, delete.

mod common;

use common::{kubectl_async, kubectl_or_skip, repo};
use lab_apiserver::ApiServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_gets_describes_and_deletes() {
    if !kubectl_or_skip() {
        return;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let server = ApiServer::start(listener).await.expect("starts");
    let dir = tempfile::tempdir().expect("tmp");
    let kc = dir.path().join("kubeconfig");
    server.write_kubeconfig("lab", &kc).expect("kubeconfig");
    let run = |args: Vec<String>, stdin: Option<String>| {
        let kc = kc.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl_async(&kc, &args, stdin.as_deref()).await
        }
    };
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let repo = |p: &str| repo(p).display().to_string();

    let (ok, out) = run(args(&["get", "namespaces"]), None).await;
    assert!(
        ok && out.contains("default") && out.contains("kube-system"),
        "{out}"
    );

    let (ok, out) = run(args(&["apply", "-f", &repo("manifests/crds")]), None).await;
    assert!(
        ok && out.contains("ipaddresspools.metallb.io created"),
        "{out}"
    );
    let (ok, out) = run(
        args(&["apply", "-f", "-"]),
        Some("apiVersion: v1\nkind: Namespace\nmetadata: {name: metallb-system}\n".into()),
    )
    .await;
    assert!(ok, "{out}");
    let (ok, out) = run(
        args(&[
            "apply",
            "-f",
            &repo("metallb-rs/tests/fixtures/samples/valid/ipaddresspools.yaml"),
        ]),
        None,
    )
    .await;
    assert!(
        ok && out.contains("ipaddresspool.metallb.io/production created"),
        "{out}"
    );
    let (ok, out) = run(
        args(&[
            "get",
            "ipaddresspools",
            "-n",
            "metallb-system",
            "-o",
            "name",
        ]),
        None,
    )
    .await;
    assert!(ok && out.contains("ipaddresspool.metallb.io/dev"), "{out}");
    let (ok, out) = run(
        args(&[
            "apply",
            "-f",
            &repo("metallb-rs/tests/fixtures/samples/invalid/pool-autoassign-string.yaml"),
        ]),
        None,
    )
    .await;
    assert!(
        !ok && out.contains("spec.autoAssign"),
        "schema violation reported with its field: {out}"
    );

    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec:\n  type: LoadBalancer\n  selector: {app: web}\n  ports: [{port: 80, name: http}, {port: 443, name: https}]\n";
    let (ok, out) = run(args(&["apply", "-f", "-"]), Some(svc.into())).await;
    assert!(ok && out.contains("service/web created"), "{out}");
    // Re-applying with one port changed goes through a strategic merge patch.
    let (ok, out) = run(
        args(&["apply", "-f", "-"]),
        Some(svc.replace("port: 443", "port: 8443")),
    )
    .await;
    assert!(ok && out.contains("service/web configured"), "{out}");
    let (ok, out) = run(
        args(&[
            "get",
            "service",
            "web",
            "-o",
            "jsonpath={.spec.ports[*].port}",
        ]),
        None,
    )
    .await;
    assert!(ok && out.trim() == "80 8443", "{out}");
    let (ok, out) = run(args(&["describe", "service", "web"]), None).await;
    assert!(
        ok && out.contains("Type:") && out.contains("LoadBalancer"),
        "{out}"
    );
    let (ok, out) = run(args(&["delete", "service", "web"]), None).await;
    assert!(ok && out.contains("deleted"), "{out}");
    let (ok, _) = run(args(&["get", "service", "web"]), None).await;
    assert!(!ok, "deleted service is gone");
    server.stop();
}
