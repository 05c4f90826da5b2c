//! A whole lab (network, API server, controller manager, node agents) brought up twice and
//! torn down after a simulated crash. Needs root.

mod common;

use devenv::cluster::Cluster;
use devenv::lab::cluster::{LabSpec, api_port, down, lab_dir, up};
use devenv::lab::{netns, process};
use devenv::wait::eventually;
use std::time::{Duration, Instant};

fn pids(name: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(lab_dir(name).join("pids"))
        .expect("pid dir")
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "pid").then(|| std::fs::read_to_string(p).unwrap_or_default())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn lab_up_is_idempotent_and_down_cleans_up_after_a_crash_needs_root() {
    if !devenv::prereq::netns_or_skip() {
        return;
    }
    let name = format!("l{}", std::process::id() % 100_000);
    let _guard = test_support::Guard::new(&name, down);
    let tmp = tempfile::tempdir().expect("tmp");
    let mut spec = LabSpec::new(&common::bin_dir(tmp.path()));
    spec.name = name.clone();
    spec.nodes = 2;
    spec.api_port = api_port(&name);
    spec.metallb = devenv::lab::cluster::Metallb::Off;

    let started = Instant::now();
    let lab = up(&spec).expect("lab comes up");
    println!("lab up in {:.2}s", started.elapsed().as_secs_f64());
    assert_eq!(lab.nodes().len(), 2);
    let first = pids(&name);
    assert_eq!(
        first.len(),
        6,
        "API server, controller manager, two forwarders, two agents: {first:?}"
    );

    // Nodes register and turn Ready through the forwarders.
    let out = lab
        .exec_on_node(&lab.nodes()[1].name, &["cat", "/proc/net/tcp"])
        .expect("exec");
    assert!(out.status.success());
    let rt = tokio::runtime::Runtime::new().expect("rt");
    eventually(Duration::from_secs(20), "two Ready nodes", || {
        let ready = rt.block_on(async {
            let client = devenv::lab::cluster::client(lab.kubeconfig()).await?;
            let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
            let list = nodes.list(&Default::default()).await?;
            anyhow::Ok(
                list.items
                    .iter()
                    .filter(|n| {
                        n.status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|c| {
                                c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                            })
                    })
                    .count(),
            )
        })?;
        Ok((ready == 2).then_some(()))
    })
    .expect("nodes Ready");

    // A second `up` reuses everything.
    let again = up(&spec).expect("lab reused");
    assert_eq!(pids(&name), first, "no process restarted");
    assert_eq!(again.nodes(), lab.nodes());

    // Crash: an agent dies and a namespace vanishes; `up` repairs it.
    let node = lab.nodes()[1].name.clone();
    std::process::Command::new("ip")
        .args(["netns", "del", &node])
        .status()
        .expect("ip");
    let repaired = up(&spec).expect("lab repaired");
    assert!(netns::list_namespaces().expect("list").contains(&node));
    assert_ne!(
        pids(&name),
        first,
        "the recreated node's forwarder and agent restarted"
    );
    // The node reaches the API server again through its new namespace.
    let out = repaired
        .exec_on_node(
            &node,
            &[
                "bash",
                "-c",
                &format!("exec 3<>/dev/tcp/127.0.0.1/{}", spec.api_port),
            ],
        )
        .expect("exec");
    assert!(
        out.status.success(),
        "API server unreachable from the recreated node: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Down removes every namespace, process and file.
    let removed = down(&name).expect("down");
    assert!(!removed.is_empty());
    let left: Vec<String> = netns::list_namespaces()
        .expect("list")
        .into_iter()
        .filter(|n| n.starts_with(&format!("{name}-")))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    assert!(!lab_dir(&name).exists());
    for pid in first {
        let pid: i32 = pid.trim().parse().expect("a pid");
        assert!(!process::alive(pid), "process {pid} survived");
    }
}
