//! `kubectl get` against the server: Table responses with kube-apiserver's
//! columns for built-in kinds and the CRDs' printer columns.

mod common;

use common::{install_metallb_crds, kubectl_async, kubectl_or_skip, start};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

async fn node(client: &kube::Client, name: &str, ready: &str, role: Option<&str>, ip: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut labels = json!({ "kubernetes.io/hostname": name });
    if let Some(role) = role {
        labels[format!("node-role.kubernetes.io/{role}")] = json!("");
    }
    let n: Node = serde_json::from_value(json!({ "metadata": { "name": name, "labels": labels } }))
        .expect("node");
    nodes
        .create(&PostParams::default(), &n)
        .await
        .expect("node created");
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "conditions": [{ "type": "Ready", "status": ready, "reason": "KubeletReady" }],
                "addresses": [{ "type": "InternalIP", "address": ip }],
                "nodeInfo": { "kubeletVersion": "v1.35.0-lab", "osImage": "lab", "kernelVersion": "6.1.0",
                    "containerRuntimeVersion": "lab://0.1", "architecture": "amd64", "operatingSystem": "linux",
                    "bootID": "", "machineID": "", "systemUUID": "", "kubeProxyVersion": "" },
            } })),
        )
        .await
        .expect("node status");
}

/// The whitespace-separated fields of each line of kubectl's table.
fn table(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_kube_apiserver_columns() {
    if !kubectl_or_skip() {
        return;
    }
    let (server, client) = start().await;
    let dir = tempfile::tempdir().expect("tmp");
    let kc = dir.path().join("kubeconfig");
    server.write_kubeconfig("lab", &kc).expect("kubeconfig");
    node(
        &client,
        "lab-control-plane",
        "True",
        Some("control-plane"),
        "172.30.0.10",
    )
    .await;
    node(&client, "lab-worker", "False", None, "172.30.0.11").await;

    let (ok, out) = kubectl_async(&kc, &["get", "nodes"], None).await;
    assert!(ok, "{out}");
    let rows = table(&out);
    assert_eq!(
        rows[0],
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{out}"
    );
    assert_eq!(
        rows[1][..3],
        ["lab-control-plane", "Ready", "control-plane"],
        "{out}"
    );
    assert_eq!(rows[1][4], "v1.35.0-lab", "{out}");
    assert_eq!(rows[2][..3], ["lab-worker", "NotReady", "<none>"], "{out}");

    let (ok, out) = kubectl_async(&kc, &["get", "nodes", "-o", "wide"], None).await;
    assert!(ok, "{out}");
    let rows = table(&out);
    assert_eq!(
        rows[0],
        [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME"
        ],
        "{out}"
    );
    assert_eq!(
        rows[1][5..],
        ["172.30.0.10", "<none>", "lab", "6.1.0", "lab://0.1"],
        "{out}"
    );

    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec:\n  type: LoadBalancer\n  selector: {app: web}\n  ports: [{port: 80, targetPort: 8080}]\n";
    let (ok, out) = kubectl_async(&kc, &["apply", "-f", "-"], Some(svc)).await;
    assert!(ok, "{out}");
    let (ok, out) = kubectl_async(&kc, &["get", "services", "-o", "wide"], None).await;
    assert!(ok, "{out}");
    let rows = table(&out);
    assert_eq!(
        rows[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ],
        "{out}"
    );
    let web = rows.iter().find(|r| r[0] == "web").expect("web listed");
    assert_eq!(web[1], "LoadBalancer");
    assert!(web[2].starts_with("10.96."), "{out}");
    assert_eq!(web[3], "<pending>");
    assert!(
        web[4].starts_with("80:3") && web[4].ends_with("/TCP"),
        "{out}"
    );
    assert_eq!(web[6], "app=web");

    install_metallb_crds(&client).await;
    let pools = "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: prod, namespace: metallb-system}\nspec:\n  addresses: [172.30.0.100-172.30.0.110]\n  autoAssign: false\n";
    let (ok, out) = kubectl_async(&kc, &["apply", "-f", "-"], Some(pools)).await;
    assert!(ok, "{out}");
    let (ok, out) = kubectl_async(&kc, &["get", "ipaddresspools", "-A"], None).await;
    assert!(ok, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        table(lines[0]).concat(),
        [
            "NAMESPACE",
            "NAME",
            "AUTO",
            "ASSIGN",
            "AVOID",
            "BUGGY",
            "IPS",
            "ADDRESSES"
        ],
        "{out}"
    );
    assert_eq!(
        table(lines[1]).concat(),
        [
            "metallb-system",
            "prod",
            "false",
            "false",
            "[\"172.30.0.100-172.30.0.110\"]"
        ],
        "{out}"
    );
    server.stop();
}
