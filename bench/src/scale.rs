//! `cargo xtask bench scale`: N LoadBalancer services created at once in
//! the lab; time until every one has its IP, is announced and has its
//! ServiceL2Status, beside the time the API server alone took to accept
//! them (the baseline of the same run); then the resident memory of the
//! controller and of each speaker against the 20 MiB target.

use super::{rss_kib, service, setup, teardown};
use anyhow::Result;
use devenv::cluster::Cluster;
use devenv::lab::cluster::LabCluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams, PostParams};
use metallb_rs::api::v1beta1::ServiceL2Status;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// RSS target per component.
pub const RSS_TARGET_MIB: f64 = 20.0;

/// What was measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// Services created.
    pub services: usize,
    /// Time the API server took to accept all creations (baseline).
    pub created: Duration,
    /// Time until every service had an IP.
    pub assigned: Duration,
    /// Time until every service had its ServiceL2Status (announced).
    pub announced: Duration,
    /// (process, RSS, of which anonymous (heap), in KiB).
    pub rss: Vec<(String, u64, u64)>,
}

/// Runs the benchmark with `n` services and prints the report.
pub fn run(cluster: &LabCluster, n: usize) -> Result<Report> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let client = rt.block_on(devenv::lab::cluster::client(cluster.kubeconfig()))?;
    let nodes: Vec<String> = cluster.nodes().into_iter().map(|n| n.name).collect();
    rt.block_on(setup(&client, &["10.200.0.0/20"], &nodes))?;
    let result = rt.block_on(async {
        let svcs: Api<Service> = Api::namespaced(client.clone(), super::NAMESPACE);
        let statuses: Api<ServiceL2Status> =
            Api::namespaced(client.clone(), metallb_rs::api::DEFAULT_NAMESPACE);
        let start = Instant::now();
        let creations = futures::stream::iter(0..n)
            .map(|i| {
                let svcs = svcs.clone();
                async move {
                    let s = service(&format!("s{i:04}"))?;
                    svcs.create(&PostParams::default(), &s).await?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await;
        for r in creations {
            r?;
        }
        let created = start.elapsed();
        let (mut assigned, mut announced) = (None, None);
        let deadline = start + Duration::from_secs(600);
        while announced.is_none() || assigned.is_none() {
            anyhow::ensure!(Instant::now() < deadline, "not converged within 10 minutes");
            if assigned.is_none() {
                let list = svcs.list(&ListParams::default()).await?;
                let with_ip = list
                    .items
                    .iter()
                    .filter(|s| {
                        !metallb_rs::service::ingress_ips(s)
                            .unwrap_or_default()
                            .is_empty()
                    })
                    .count();
                if with_ip == n {
                    assigned = Some(start.elapsed());
                }
            }
            let list = statuses
                .list(&ListParams::default().labels(&format!(
                    "metallb.io/service-namespace={}",
                    super::NAMESPACE
                )))
                .await?;
            let done: BTreeSet<String> = list
                .items
                .iter()
                .filter(|o| o.status.as_ref().and_then(|s| s.node.as_ref()).is_some())
                .filter_map(|o| o.status.as_ref()?.service_name.clone())
                .collect();
            if done.len() == n && assigned.is_some() {
                announced = Some(start.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut rss = Vec::new();
        let mut names = vec!["controller".to_owned()];
        names.extend(nodes.iter().map(|n| format!("speaker-{n}")));
        for name in names {
            if let Some(pid) = cluster.pid_of(&name)
                && let Some(kib) = rss_kib(pid)
            {
                rss.push((name, kib, super::status_kib(pid, "RssAnon").unwrap_or(0)));
            }
        }
        anyhow::Ok(Report {
            services: n,
            created,
            assigned: assigned.unwrap_or_default(),
            announced: announced.unwrap_or_default(),
            rss,
        })
    });
    super::wait_if_interrupted();
    rt.block_on(teardown(&client))?;
    let report = result?;
    print(&report);
    Ok(report)
}

fn print(r: &Report) {
    println!(
        "scale: {} LoadBalancer services created at once (32 in flight)",
        r.services
    );
    println!(
        "  API server accepted all (baseline) {:>8.2}s",
        r.created.as_secs_f64()
    );
    println!(
        "  every service had its IP           {:>8.2}s",
        r.assigned.as_secs_f64()
    );
    println!(
        "  every service announced + status   {:>8.2}s",
        r.announced.as_secs_f64()
    );
    println!(
        "  ratio converged/accepted           {:>8.2}x",
        r.announced.as_secs_f64() / r.created.as_secs_f64().max(1e-9)
    );
    println!("  resident memory at that point (target {RSS_TARGET_MIB} MiB each):");
    for (name, kib, anon) in &r.rss {
        let mib = *kib as f64 / 1024.0;
        println!(
            "    {name:<28} {mib:>7.1} MiB  ({:.2}x of target; heap {:.1} MiB, mapped code {:.1} MiB)",
            mib / RSS_TARGET_MIB,
            *anon as f64 / 1024.0,
            (*kib - anon.min(kib)) as f64 / 1024.0
        );
    }
}
