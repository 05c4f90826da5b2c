//! The metallb-rs controller against the lab API server (the
//! `lab-apiserver` crate), in process (no
//! root needed): assignment, release and hand-over, restart safety,
//! lb-class, leader election between two replicas, pool status counters,
//! ConfigurationState and invalid configurations.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use lab_apiserver::ApiServer;
use metallb_rs::api::v1beta1::{ConfigurationResult, ConfigurationState, IPAddressPool};
use metallb_rs::controller::run::{self, Options};
use metallb_rs::k8s::leader::Timings;
use serde_json::json;
use std::time::Duration;
use tokio::sync::oneshot;

const NS: &str = "metallb-system";

/// The lab API server and, beside the admin client the tests use, a
/// client for the controller: its ServiceAccount, bound only by the
/// manifests' RBAC - so a call the code makes that the RBAC does not grant
/// fails the test that needs it (the API server enforces RBAC for
/// everyone outside `system:masters`).
struct Lab {
    _server: ApiServer,
    controller: Client,
}

mod common;
use common::{controller_client, install_controller_rbac, install_metallb_api};

async fn start() -> (Lab, Client) {
    let (server, client) = start_admin().await;
    install_controller_rbac(&client).await;
    let controller = controller_client(&server, NS).await;
    (
        Lab {
            _server: server,
            controller,
        },
        client,
    )
}

async fn start_admin() -> (ApiServer, Client) {
    // Controller logs (warnings by default; RUST_LOG for more) show in failures.
    metallb_rs::logging::init(
        metallb_rs::logging::LogFormat::Text,
        metallb_rs::logging::LogLevel::Warn,
    );
    let (server, client) = test_support::start().await;
    install_metallb_api(&client).await;
    (server, client)
}

/// A controller running in this process until dropped or stopped.
struct Controller {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Controller {
    fn start(client: &Client, identity: &str, tweak: impl FnOnce(&mut Options)) -> Self {
        let mut opts = Options {
            namespace: NS.into(),
            lb_class: None,
            leader_elect: false,
            identity: identity.into(),
            lease: Timings {
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(300),
            },
            serving: Default::default(),
            memberlist_secret: Some("memberlist".into()),
            webhooks: run::Webhooks::Disabled,
        };
        tweak(&mut opts);
        let (tx, rx) = oneshot::channel();
        let client = client.clone();
        let task = tokio::spawn(async move {
            run::run(client, opts, async {
                let _ = rx.await;
            })
            .await
        });
        Self {
            stop: Some(tx),
            task,
        }
    }

    /// SIGTERM-like stop: returns once the controller has exited.
    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let r = (&mut self.task).await.expect("controller task");
        r.expect("controller exits cleanly");
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pool(client: &Client, name: &str, spec: serde_json::Value) {
    let p: IPAddressPool = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": { "name": name, "namespace": NS }, "spec": spec,
    }))
    .expect("pool");
    Api::<IPAddressPool>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &p)
        .await
        .expect("pool created");
}

async fn service(client: &Client, name: &str, extra: serde_json::Value) -> Service {
    let mut svc = json!({
        "metadata": { "name": name, "namespace": "default" },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "protocol": "TCP" }] },
    });
    json_patch::merge(&mut svc, &extra);
    let svc: Service = serde_json::from_value(svc).expect("service");
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &svc)
        .await
        .expect("service created")
}

fn ingress(svc: &Service) -> Vec<String> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .map(|i| i.iter().filter_map(|i| i.ip.clone()).collect())
        .unwrap_or_default()
}

/// How long a wait may take before the test fails: generous, since these
/// are waits for something that must happen, not timings, and the
/// machine may be busy (CI runs every test at once).
const PATIENCE: Duration = Duration::from_secs(30);

/// Polls `f` every 50 ms (the API server is in process) until it returns
/// `Some`, panicking after `timeout` with `what`. The shape of
/// `devenv::wait::eventually_async`, which the lab tests and e2e suites
/// share; this package's tests cannot depend on devenv (devenv depends on
/// this package), and this file is the only one here that polls.
async fn eventually<T, F: Future<Output = Option<T>>>(
    timeout: Duration,
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn ips_of(client: &Client, name: &str) -> Vec<String> {
    Api::<Service>::namespaced(client.clone(), "default")
        .get_opt(name)
        .await
        .expect("get")
        .map(|s| ingress(&s))
        .unwrap_or_default()
}

async fn wait_ips(client: &Client, name: &str) -> Vec<String> {
    eventually(PATIENCE, &format!("an IP on {name}"), || async {
        let ips = ips_of(client, name).await;
        (!ips.is_empty()).then_some(ips)
    })
    .await
}

/// Events about service `name` with `reason`, as (reporting instance, note).
async fn events(client: &Client, name: &str, reason: &str) -> Vec<(String, String)> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .map(|e| {
            (
                e.reporting_instance.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn assigns_releases_and_hands_the_ip_to_a_waiting_service() {
    let (lab, client) = start().await;
    pool(&client, "one", json!({ "addresses": ["10.0.0.7/32"] })).await;
    let c = Controller::start(&lab.controller, "c1", |_| {});
    service(&client, "first", json!({})).await;
    assert_eq!(wait_ips(&client, "first").await, ["10.0.0.7"]);
    let svc = Api::<Service>::namespaced(client.clone(), "default")
        .get("first")
        .await
        .expect("get");
    assert_eq!(
        svc.annotations()
            .get("metallb.io/ip-allocated-from-pool")
            .map(String::as_str),
        Some("one")
    );
    let allocated = eventually(PATIENCE, "IPAllocated event", || async {
        let e = events(&client, "first", "IPAllocated").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(allocated[0].1, r#"Assigned IP ["10.0.0.7"]"#);

    service(&client, "waiting", json!({})).await;
    let failed = eventually(PATIENCE, "AllocationFailed event", || async {
        let e = events(&client, "waiting", "AllocationFailed").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert!(
        failed[0]
            .1
            .starts_with(r#"Failed to allocate IP for "default/waiting": no available IPs"#),
        "{failed:?}"
    );
    assert!(ips_of(&client, "waiting").await.is_empty());

    Api::<Service>::namespaced(client.clone(), "default")
        .delete("first", &DeleteParams::default())
        .await
        .expect("delete");
    assert_eq!(wait_ips(&client, "waiting").await, ["10.0.0.7"]);
    c.stop().await;
}

#[tokio::test]
async fn restart_keeps_every_ip() {
    let (lab, client) = start().await;
    pool(&client, "p", json!({ "addresses": ["10.0.0.0/29"] })).await;
    let c = Controller::start(&lab.controller, "c1", |_| {});
    for i in 0..5 {
        service(&client, &format!("s{i}"), json!({})).await;
        wait_ips(&client, &format!("s{i}")).await;
    }
    let mut before = Vec::new();
    for i in 0..5 {
        before.push(ips_of(&client, &format!("s{i}")).await);
    }
    c.stop().await;
    // The speakers' gossip key was created, and a restart keeps it.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), NS);
    let key = |s: k8s_openapi::api::core::v1::Secret| {
        s.data
            .and_then(|mut d| d.remove("secretkey"))
            .expect("secretkey")
    };
    let first_key = key(secrets.get("memberlist").await.expect("memberlist secret"));
    assert_eq!(first_key.0.len(), 128);
    // While it is down: the lowest address frees up and a new service
    // arrives, listed before the holders (by name).
    Api::<Service>::namespaced(client.clone(), "default")
        .delete("s0", &DeleteParams::default())
        .await
        .expect("delete");
    service(&client, "a-new", json!({})).await;
    let c = Controller::start(&lab.controller, "c2", |_| {});
    assert_eq!(
        wait_ips(&client, "a-new").await,
        before[0],
        "the new service gets the freed address"
    );
    for (i, ips) in before.iter().enumerate().skip(1) {
        assert_eq!(
            &ips_of(&client, &format!("s{i}")).await,
            ips,
            "s{i} kept its address"
        );
    }
    c.stop().await;
    assert_eq!(
        key(secrets.get("memberlist").await.expect("memberlist secret")),
        first_key,
        "an existing gossip key is never replaced"
    );
}

#[tokio::test]
async fn lb_class_selects_services() {
    let (lab, client) = start().await;
    pool(&client, "p", json!({ "addresses": ["10.0.0.0/29"] })).await;
    let c = Controller::start(&lab.controller, "c1", |o| {
        o.lb_class = Some("metallb.io/rs".into())
    });
    service(
        &client,
        "mine",
        json!({ "spec": { "loadBalancerClass": "metallb.io/rs" } }),
    )
    .await;
    service(&client, "classless", json!({})).await;
    service(
        &client,
        "other",
        json!({ "spec": { "loadBalancerClass": "other" } }),
    )
    .await;
    assert_eq!(wait_ips(&client, "mine").await, ["10.0.0.0"]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(ips_of(&client, "classless").await.is_empty());
    assert!(ips_of(&client, "other").await.is_empty());
    c.stop().await;

    // Without --lb-class only services without a class are served (the
    // other class's addresses are not ours to track: its service goes).
    Api::<Service>::namespaced(client.clone(), "default")
        .delete("mine", &DeleteParams::default())
        .await
        .expect("delete");
    let c = Controller::start(&lab.controller, "c2", |_| {});
    assert_eq!(wait_ips(&client, "classless").await, ["10.0.0.0"]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(ips_of(&client, "other").await.is_empty());
    c.stop().await;
}

#[tokio::test]
async fn two_replicas_never_both_assign() {
    let (lab, client) = start().await;
    pool(&client, "p", json!({ "addresses": ["10.0.0.0/28"] })).await;
    let a = Controller::start(&lab.controller, "replica-a", |o| o.leader_elect = true);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let holder = |l: Lease| l.spec.and_then(|s| s.holder_identity);
    eventually(PATIENCE, "replica-a leading", || async {
        let l = leases.get_opt(run::LEASE_NAME).await.ok().flatten()?;
        (holder(l).as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    let b = Controller::start(&lab.controller, "replica-b", |o| o.leader_elect = true);
    for i in 0..8 {
        service(&client, &format!("s{i}"), json!({})).await;
    }
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..8 {
        let ips = wait_ips(&client, &format!("s{i}")).await;
        assert!(seen.insert(ips.clone()), "{ips:?} given twice");
    }
    // Only the leader acted: one IPAllocated per service, all from replica-a.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..8 {
        let ev = events(&client, &format!("s{i}"), "IPAllocated").await;
        assert_eq!(ev.len(), 1, "s{i}: {ev:?}");
        assert_eq!(ev[0].0, "metallb-controller-replica-a");
    }
    // The leader stops (SIGTERM): it releases the lease and b takes over
    // without waiting for it to expire.
    a.stop().await;
    eventually(PATIENCE, "replica-b leading", || async {
        let l = leases.get_opt(run::LEASE_NAME).await.ok().flatten()?;
        (holder(l).as_deref() == Some("replica-b")).then_some(())
    })
    .await;
    service(&client, "after", json!({})).await;
    let ips = wait_ips(&client, "after").await;
    assert!(
        !seen.contains(&ips),
        "b took over with the same allocations: {ips:?} is new"
    );
    assert_eq!(
        events(&client, "after", "IPAllocated").await[0].0,
        "metallb-controller-replica-b"
    );
    b.stop().await;
}

#[tokio::test]
async fn pool_status_counts_and_reverts_manual_edits() {
    let (lab, client) = start().await;
    pool(
        &client,
        "p",
        json!({ "addresses": ["10.0.0.0/30", "fc00::/126"] }),
    )
    .await;
    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), NS);
    let counts = || async {
        let p = pools.get("p").await.ok()?;
        let s = p.status?;
        Some((
            s.assigned_ipv4,
            s.available_ipv4,
            s.assigned_ipv6,
            s.available_ipv6,
        ))
    };
    let c = Controller::start(&lab.controller, "c1", |_| {});
    eventually(PATIENCE, "status 0/4 0/4", || async {
        (counts().await? == (0, 4, 0, 4)).then_some(())
    })
    .await;
    service(&client, "s", json!({})).await;
    wait_ips(&client, "s").await;
    eventually(PATIENCE, "status 1/3", || async {
        (counts().await? == (1, 3, 0, 4)).then_some(())
    })
    .await;
    pools
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "assignedIPv4": 42 } })),
        )
        .await
        .expect("manual edit");
    eventually(PATIENCE, "manual edit reverted", || async {
        (counts().await? == (1, 3, 0, 4)).then_some(())
    })
    .await;
    c.stop().await;
}

#[tokio::test]
async fn invalid_configuration_keeps_the_last_good_one() {
    let (lab, client) = start().await;
    pool(&client, "good", json!({ "addresses": ["10.0.0.0/30"] })).await;
    let c = Controller::start(&lab.controller, "c1", |_| {});
    let states: Api<ConfigurationState> = Api::namespaced(client.clone(), NS);
    let result = || async {
        let s = states
            .get_opt(run::CONFIG_STATE_NAME)
            .await
            .ok()
            .flatten()?
            .status?;
        Some((s.result?, s.error_summary.unwrap_or_default()))
    };
    eventually(PATIENCE, "Valid", || async {
        (result().await?.0 == ConfigurationResult::Valid).then_some(())
    })
    .await;
    service(&client, "before", json!({})).await;
    assert_eq!(wait_ips(&client, "before").await, ["10.0.0.0"]);

    // An overlapping pool makes the whole configuration invalid.
    pool(&client, "bad", json!({ "addresses": ["10.0.0.2/31"] })).await;
    let (_, summary) = eventually(PATIENCE, "Invalid", || async {
        let r = result().await?;
        (r.0 == ConfigurationResult::Invalid).then_some(r)
    })
    .await;
    assert!(
        summary.contains(
            "ipaddresspool \"metallb-system/bad\": spec.addresses[0] \"10.0.0.2/31\": overlaps"
        ),
        "{summary}"
    );
    let obj = states.get(run::CONFIG_STATE_NAME).await.expect("state");
    assert_eq!(
        obj.labels()
            .get("metallb.io/component-type")
            .map(String::as_str),
        Some("controller")
    );
    // The last good configuration stays in force.
    service(&client, "during", json!({})).await;
    assert_eq!(wait_ips(&client, "during").await, ["10.0.0.1"]);
    assert_eq!(ips_of(&client, "before").await, ["10.0.0.0"]);

    Api::<IPAddressPool>::namespaced(client.clone(), NS)
        .delete("bad", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(PATIENCE, "Valid again", || async {
        (result().await?.0 == ConfigurationResult::Valid).then_some(())
    })
    .await;
    c.stop().await;
}

#[tokio::test]
async fn changing_the_pool_annotation_moves_the_service() {
    let (lab, client) = start().await;
    pool(&client, "a", json!({ "addresses": ["10.0.0.0/30"] })).await;
    pool(
        &client,
        "b",
        json!({ "addresses": ["10.0.1.0/30"], "autoAssign": false }),
    )
    .await;
    let c = Controller::start(&lab.controller, "c1", |_| {});
    service(&client, "s", json!({})).await;
    assert_eq!(wait_ips(&client, "s").await, ["10.0.0.0"]);
    Api::<Service>::namespaced(client.clone(), "default")
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(
                json!({ "metadata": { "annotations": { "metallb.io/address-pool": "b" } } }),
            ),
        )
        .await
        .expect("annotate");
    eventually(PATIENCE, "move to pool b", || async {
        (ips_of(&client, "s").await == ["10.0.1.0"]).then_some(())
    })
    .await;
    // Turning it into a ClusterIP service clears what MetalLB wrote.
    Api::<Service>::namespaced(client.clone(), "default")
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "type": "ClusterIP" } })),
        )
        .await
        .expect("retype");
    eventually(PATIENCE, "cleared", || async {
        let s = Api::<Service>::namespaced(client.clone(), "default")
            .get("s")
            .await
            .ok()?;
        (ingress(&s).is_empty()
            && !s
                .annotations()
                .contains_key("metallb.io/ip-allocated-from-pool"))
        .then_some(())
    })
    .await;
    c.stop().await;
}

/// GET `path` from `addr` (plain HTTP/1.0): (status line, body).
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
        (
            head.lines().next().unwrap_or_default().to_owned(),
            body.to_owned(),
        )
    })
    .await
    .expect("http task")
}

fn free_port() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

#[tokio::test]
async fn serves_upstream_metrics_and_probes() {
    let (lab, client) = start().await;
    pool(
        &client,
        "p",
        json!({ "addresses": ["10.0.0.0/30", "fc00::/127"] }),
    )
    .await;
    let addr = free_port();
    let c = Controller::start(&lab.controller, "c1", |o| {
        // Plain metrics on loopback may share the probes' address.
        o.serving.insecure = Some(addr);
        o.serving.health = Some(addr);
    });
    service(&client, "s", json!({})).await;
    wait_ips(&client, "s").await;
    let body = eventually(PATIENCE, "metrics", || async {
        let (status, body) = http_get(addr, "/metrics").await;
        (status.contains("200")
            && body.contains("metallb_allocator_addresses_in_use_total{pool=\"p\"} 1"))
        .then_some(body)
    })
    .await;
    for line in [
        "metallb_allocator_addresses_total{pool=\"p\"} 6",
        "metallb_allocator_ipv4_addresses_total{pool=\"p\"} 4",
        "metallb_allocator_ipv6_addresses_total{pool=\"p\"} 2",
        "metallb_allocator_ipv4_addresses_in_use_total{pool=\"p\"} 1",
        "metallb_allocator_ipv6_addresses_in_use_total{pool=\"p\"} 0",
        "metallb_k8s_client_config_loaded_bool 1",
        "metallb_k8s_client_config_stale_bool 0",
    ] {
        assert!(body.contains(line), "{line} missing from:\n{body}");
    }
    assert!(body.contains("metallb_k8s_client_updates_total"), "{body}");
    assert!(http_get(addr, "/readyz").await.0.contains("200"));
    assert!(http_get(addr, "/healthz").await.0.contains("200"));
    c.stop().await;
}
