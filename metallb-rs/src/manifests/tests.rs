//! The generated manifests read back as Kubernetes objects: the kinds,
//! the RBAC each component needs, the pod specs.

use super::*;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Parses `object` as its typed Kubernetes struct and back: a misspelt
/// field would be dropped and the round trip would differ.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(object: &Value) -> Value {
    let typed: T = serde_json::from_value(object.clone()).expect("object matches its kind");
    serde_json::to_value(typed).expect("serializes")
}

#[test]
fn every_object_uses_only_real_fields() {
    for object in native_objects(&NativeOptions::default()) {
        let back = match object["kind"].as_str().expect("kind") {
            "Namespace" => round_trip::<Namespace>(&object),
            "CustomResourceDefinition" => round_trip::<CustomResourceDefinition>(&object),
            "ServiceAccount" => round_trip::<ServiceAccount>(&object),
            "ClusterRole" => round_trip::<ClusterRole>(&object),
            "Role" => round_trip::<Role>(&object),
            "ClusterRoleBinding" => round_trip::<ClusterRoleBinding>(&object),
            "RoleBinding" => round_trip::<RoleBinding>(&object),
            "Deployment" => round_trip::<Deployment>(&object),
            "DaemonSet" => round_trip::<DaemonSet>(&object),
            "Secret" => round_trip::<Secret>(&object),
            "Service" => round_trip::<Service>(&object),
            "ValidatingWebhookConfiguration" => {
                round_trip::<ValidatingWebhookConfiguration>(&object)
            }
            "ValidatingAdmissionPolicy" => round_trip::<ValidatingAdmissionPolicy>(&object),
            "ValidatingAdmissionPolicyBinding" => {
                round_trip::<ValidatingAdmissionPolicyBinding>(&object)
            }
            other => panic!("unexpected kind {other}"),
        };
        assert_eq!(
            back, object,
            "{} {}",
            object["kind"], object["metadata"]["name"]
        );
    }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} missing"))
}

#[test]
fn speaker_daemonset_has_host_network_net_raw_and_node_name() {
    let objects = native_objects(&NativeOptions::default());
    let ds = find(&objects, "DaemonSet", "speaker");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    let container = &pod["containers"][0];
    assert_eq!(container["args"][0], "speaker");
    assert_eq!(
        container["securityContext"]["capabilities"]["add"],
        json!(["NET_RAW"])
    );
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    // The image runs as 65534 by default; an added capability only takes
    // effect for root.
    assert_eq!(container["securityContext"]["runAsUser"], 0);
    let env = container["env"].as_array().expect("env");
    assert!(
        env.iter().any(|e| e["name"] == "NODE_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName")
    );
    let ports: Vec<_> = container["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| p["containerPort"].clone())
        .collect();
    assert_eq!(
        ports,
        vec![
            json!(ports::METRICS),
            json!(ports::HEALTH),
            json!(ports::MEMBERLIST)
        ]
    );
    // Gossip on the node address, keyed by the Secret the controller makes.
    let var = |name: &str| env.iter().find(|e| e["name"] == name).cloned();
    assert_eq!(
        var("METALLB_ML_BIND_ADDR").expect("bind address")["valueFrom"]["fieldRef"]["fieldPath"],
        "status.podIP"
    );
    assert_eq!(
        var("METALLB_ML_SECRET_NAME").expect("secret name")["value"],
        "memberlist"
    );
    let controller = find(&objects, "Deployment", "controller");
    let cenv = controller["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("controller env");
    assert!(
        cenv.iter()
            .any(|e| e["name"] == "METALLB_ML_SECRET_NAME" && e["value"] == "memberlist")
    );
}

#[test]
fn both_components_run_the_one_image_with_subcommands() {
    let opts = NativeOptions {
        image: "example/metallb-rs:test".into(),
        ..Default::default()
    };
    let objects = native_objects(&opts);
    for (kind, name) in [("Deployment", "controller"), ("DaemonSet", "speaker")] {
        let c = &find(&objects, kind, name)["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "example/metallb-rs:test");
        assert_eq!(c["args"][0], name);
    }
    let controller = &find(&objects, "Deployment", "controller")["spec"]["template"]["spec"];
    assert_eq!(controller["securityContext"]["runAsNonRoot"], true);
    assert!(
        controller["containers"][0]["args"]
            .as_array()
            .expect("args")
            .contains(&json!("--leader-elect"))
    );
}

/// Every (group, resource, verb) a role grants.
fn grants(role: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for rule in role["rules"].as_array().expect("rules") {
        for g in rule["apiGroups"].as_array().expect("groups") {
            for r in rule["resources"].as_array().expect("resources") {
                for v in rule["verbs"].as_array().expect("verbs") {
                    out.push((
                        g.as_str().unwrap_or_default().into(),
                        r.as_str().unwrap_or_default().into(),
                        v.as_str().unwrap_or_default().into(),
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn speaker_may_write_only_its_status_kinds_events_configuration_state_and_presence_lease() {
    let objects = native_objects(&NativeOptions::default());
    let mut all = grants(find(&objects, "ClusterRole", "metallb-system:speaker"));
    all.extend(grants(find(&objects, "Role", "speaker")));
    let writable: std::collections::BTreeSet<_> = all
        .iter()
        .filter(|(_, _, verb)| !["get", "list", "watch"].contains(&verb.as_str()))
        .map(|(g, r, _)| format!("{g}/{r}"))
        .collect();
    let allowed = [
        "/events",
        "events.k8s.io/events",
        "metallb.io/servicel2statuses",
        "metallb.io/servicel2statuses/status",
        "metallb.io/servicebgpstatuses",
        "metallb.io/servicebgpstatuses/status",
        "metallb.io/configurationstates",
        "metallb.io/configurationstates/status",
        // speaker::presence (graceful leave).
        "coordination.k8s.io/leases",
        // Reviews of who scrapes /metrics: questions, nothing stored.
        "authentication.k8s.io/tokenreviews",
        "authorization.k8s.io/subjectaccessreviews",
    ];
    for w in &writable {
        assert!(allowed.contains(&w.as_str()), "speaker may write {w}");
    }
    assert!(!writable.contains("/services") && !writable.contains("/secrets"));
    assert!(
        all.iter().all(|(_, r, v)| r != "*" && v != "*"),
        "no wildcards"
    );
}

#[test]
fn rendering_is_deterministic_and_contains_every_crd() {
    let a = native(&NativeOptions::default()).expect("renders");
    let b = native(&NativeOptions::default()).expect("renders");
    assert_eq!(a, b);
    for crd in api::crds() {
        assert!(a.contains(&format!("name: {}", crd.metadata.name.expect("named"))));
    }
    assert_eq!(crd_files().expect("renders").len(), 9);
}

#[test]
fn both_pods_run_seccomp_runtime_default_with_requests_memory_limits_and_a_liveness_probe() {
    let objects = native_objects(&NativeOptions::default());
    for (kind, name) in [("Deployment", "controller"), ("DaemonSet", "speaker")] {
        let pod = &find(&objects, kind, name)["spec"]["template"]["spec"];
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
            "{name}"
        );
        let c = &pod["containers"][0];
        for r in ["cpu", "memory"] {
            assert!(
                c["resources"]["requests"][r].is_string(),
                "{name} requests {r}"
            );
        }
        assert!(c["resources"]["limits"]["memory"].is_string(), "{name}");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz", "{name}");
    }
}

#[test]
fn webhook_configuration_matches_upstream_and_reaches_the_controller() {
    let objects = native_objects(&NativeOptions::default());
    let vwc = find(
        &objects,
        "ValidatingWebhookConfiguration",
        "metallb-webhook-configuration",
    );
    let summary: Vec<String> = vwc["webhooks"]
        .as_array()
        .expect("webhooks")
        .iter()
        .map(|w| {
            let rule = &w["rules"][0];
            format!(
                "{} {} {}/{} {} {} {} {}s {}",
                w["name"].as_str().unwrap_or_default(),
                w["clientConfig"]["service"]["path"]
                    .as_str()
                    .unwrap_or_default(),
                rule["apiVersions"][0].as_str().unwrap_or_default(),
                rule["resources"][0].as_str().unwrap_or_default(),
                rule["operations"],
                w["failurePolicy"].as_str().unwrap_or_default(),
                w["sideEffects"].as_str().unwrap_or_default(),
                w["timeoutSeconds"],
                w["clientConfig"]["service"]["name"]
                    .as_str()
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            r#"ipaddresspoolvalidationwebhook.metallb.io /validate-metallb-io-v1beta1-ipaddresspool v1beta1/ipaddresspools ["CREATE","UPDATE"] Fail None 5s metallb-webhook-service"#,
            r#"l2advertisementvalidationwebhook.metallb.io /validate-metallb-io-v1beta1-l2advertisement v1beta1/l2advertisements ["CREATE","UPDATE"] Fail None 5s metallb-webhook-service"#,
            r#"bgpadvertisementvalidationwebhook.metallb.io /validate-metallb-io-v1beta1-bgpadvertisement v1beta1/bgpadvertisements ["CREATE","UPDATE"] Fail None 5s metallb-webhook-service"#,
            r#"bgppeersvalidationwebhook.metallb.io /validate-metallb-io-v1beta2-bgppeer v1beta2/bgppeers ["CREATE","UPDATE"] Fail None 5s metallb-webhook-service"#,
            r#"communityvalidationwebhook.metallb.io /validate-metallb-io-v1beta1-community v1beta1/communities ["CREATE","UPDATE"] Fail None 5s metallb-webhook-service"#,
            r#"bfdprofilevalidationwebhook.metallb.io /validate-metallb-io-v1beta1-bfdprofile v1beta1/bfdprofiles ["CREATE","DELETE"] Fail None 5s metallb-webhook-service"#,
        ]
    );
    let svc = find(&objects, "Service", "metallb-webhook-service");
    assert_eq!(svc["spec"]["selector"], labels("controller"));
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "webhook-server");
    let deployment = find(&objects, "Deployment", "controller");
    let ports = &deployment["spec"]["template"]["spec"]["containers"][0]["ports"];
    assert!(
        ports
            .as_array()
            .expect("ports")
            .contains(&json!({"name": "webhook-server", "containerPort": 9443}))
    );
    // The configuration comes before the controller that fills it.
    let at = |kind: &str| objects.iter().position(|o| o["kind"] == kind);
    assert!(at("ValidatingWebhookConfiguration") < at("Deployment"));
}

#[test]
fn controller_may_touch_only_its_own_webhook_configuration_and_certificate() {
    let objects = native_objects(&NativeOptions::default());
    let rules: Vec<&Value> = ["ClusterRole", "Role"]
        .iter()
        .zip(["metallb-system:controller", "controller"])
        .flat_map(|(k, n)| find(&objects, k, n)["rules"].as_array().expect("rules"))
        .collect();
    for rule in &rules {
        let resources = rule["resources"].as_array().expect("resources");
        if resources.contains(&json!("validatingwebhookconfigurations")) {
            assert_eq!(
                rule["resourceNames"],
                json!(["metallb-webhook-configuration"])
            );
        }
        if resources.contains(&json!("customresourcedefinitions")) {
            assert_eq!(rule["resourceNames"], json!(["bgppeers.metallb.io"]));
            assert_eq!(rule["verbs"], json!(["get", "patch"]));
        }
        let verbs = rule["verbs"].as_array().expect("verbs");
        if resources.contains(&json!("secrets")) && verbs.contains(&json!("update")) {
            assert_eq!(rule["resourceNames"], json!(["metallb-webhook-cert"]));
        }
    }
}

#[test]
fn both_components_may_review_who_reads_their_metrics_served_over_https() {
    let objects = native_objects(&NativeOptions::default());
    for (kind, name) in [("Deployment", "controller"), ("DaemonSet", "speaker")] {
        let role = grants(find(
            &objects,
            "ClusterRole",
            &format!("metallb-system:{name}"),
        ));
        for (group, resource) in [
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
        ] {
            assert!(
                role.contains(&(group.into(), resource.into(), "create".into())),
                "{name} may not create {group}/{resource}"
            );
        }
        let template = &find(&objects, kind, name)["spec"]["template"];
        assert_eq!(
            template["metadata"]["annotations"]["prometheus.io/scheme"],
            "https"
        );
        let declared = template["spec"]["containers"][0]["ports"]
            .as_array()
            .expect("ports");
        assert!(
            declared.contains(&json!({ "name": "metricshttps", "containerPort": ports::METRICS })),
            "{declared:?}"
        );
    }
}

/// The Prometheus artefacts: the core objects read back as their kinds;
/// each PodMonitor selects its component's pods and scrapes the port
/// the pod template names, over HTTPS with the reader's token; the
/// token Secret belongs to the reader the ClusterRole is bound to.
#[test]
fn prometheus_artefacts_scrape_what_the_pods_serve() {
    let opts = NativeOptions::default();
    let native = native_objects(&opts);
    let objects = prometheus::objects(&opts.namespace);
    for object in &objects {
        let kind = object["kind"].as_str().expect("kind");
        let back = match kind {
            "ServiceAccount" => round_trip::<ServiceAccount>(object),
            "Secret" => round_trip::<Secret>(object),
            "ClusterRole" => round_trip::<ClusterRole>(object),
            "ClusterRoleBinding" => round_trip::<ClusterRoleBinding>(object),
            // Operator kinds: no typed struct here.
            "PodMonitor" | "PrometheusRule" => continue,
            other => panic!("unexpected kind {other}"),
        };
        assert_eq!(&back, object, "{kind}");
    }
    for (component, kind) in [("controller", "Deployment"), ("speaker", "DaemonSet")] {
        let workload = find(&native, kind, component);
        let template = &workload["spec"]["template"];
        let monitor = find(&objects, "PodMonitor", &format!("metallb-{component}"));
        let selector = monitor["spec"]["selector"]["matchLabels"]
            .as_object()
            .expect("labels");
        for (k, v) in selector {
            assert_eq!(&template["metadata"]["labels"][k], v, "{component}: {k}");
        }
        let endpoint = &monitor["spec"]["podMetricsEndpoints"][0];
        let port = endpoint["port"].as_str().expect("port");
        let ports = &template["spec"]["containers"][0]["ports"];
        assert!(
            ports
                .as_array()
                .expect("ports")
                .iter()
                .any(|p| p["name"] == port && p["containerPort"] == ports::METRICS),
            "{component} has no port {port}: {ports}"
        );
        assert_eq!(endpoint["scheme"], "https");
        assert_eq!(
            endpoint["authorization"]["credentials"]["name"],
            prometheus::TOKEN_SECRET
        );
    }
    let secret = find(&objects, "Secret", prometheus::TOKEN_SECRET);
    assert_eq!(
        secret["metadata"]["annotations"]["kubernetes.io/service-account.name"],
        prometheus::READER
    );
    let binding = find(&objects, "ClusterRoleBinding", prometheus::READER);
    assert_eq!(binding["subjects"][0]["name"], prometheus::READER);
    assert_eq!(binding["subjects"][0]["namespace"], opts.namespace.as_str());
    let rules = &find(&objects, "PrometheusRule", "metallb")["spec"]["groups"][0]["rules"];
    let alerts: Vec<&str> = rules
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| r["alert"].as_str().expect("alert"))
        .collect();
    assert_eq!(
        alerts,
        [
            "MetalLBStaleConfig",
            "MetalLBConfigNotLoaded",
            "MetalLBAddressPoolExhausted",
            "MetalLBAddressPoolUsage75Percent",
            "MetalLBAddressPoolUsage85Percent",
            "MetalLBAddressPoolUsage95Percent",
            "MetalLBBGPSessionDown",
        ]
    );
}

/// Every metric an alert reads is one the components serve: a registry
/// with the controller's and the speaker's families, each vector given
/// a sample, renders every name the rules use.
#[test]
fn alerts_read_metrics_the_components_serve() {
    let registry = ::prometheus::Registry::new();
    let k8s = crate::metrics::K8sClientMetrics::new(&registry);
    k8s.config_loaded.set(1);
    let bgp = crate::metrics::BgpMetrics::new(&registry);
    bgp.session_up.with_label_values(&["10.0.0.1:179"]).set(1);
    let alloc = crate::metrics::AllocatorMetrics::new(&registry);
    let mut allocator = crate::allocator::Allocator::new();
    let pool = crate::config::Pool {
        name: "p".into(),
        cidrs: vec!["10.0.0.0/30".parse().expect("cidr")],
        auto_assign: true,
        avoid_buggy_ips: false,
        allocation: None,
        aggregation_floor: (30, 128),
    };
    allocator.set_pools(&[("p".to_owned(), pool)].into());
    alloc.update(&allocator, &[]);
    let served = crate::metrics::render(&registry);
    let rules = prometheus::objects("metallb-system")
        .into_iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .expect("rule");
    for rule in rules["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("rules")
    {
        let expr = rule["expr"].as_str().expect("expr");
        for name in expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("metallb_"))
        {
            assert!(
                served.contains(&format!("\n{name}{{")) || served.contains(&format!("\n{name} ")),
                "{}: {name} is not served",
                rule["alert"]
            );
        }
    }
}

#[test]
fn only_the_bgppeer_crd_of_metallb_native_converts_through_the_controller() {
    let objects = native_objects(&NativeOptions {
        namespace: "lb".into(),
        ..NativeOptions::default()
    });
    let converting: Vec<(&str, &Value)> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter(|o| o["spec"].get("conversion").is_some())
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap_or_default(),
                &o["spec"]["conversion"],
            )
        })
        .collect();
    assert_eq!(
        converting,
        [(
            "bgppeers.metallb.io",
            &json!({"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"service": {"name": "metallb-webhook-service", "namespace": "lb", "path": "/convert"}},
            }})
        )]
    );
    // The CRD files stay as upstream's bases: usable without a controller.
    let files = crd_files().expect("renders");
    assert!(!files["metallb.io_bgppeers.yaml"].contains("conversion"));
}

/// The controller's NetworkPolicy lets in exactly the ports its container
/// serves (webhooks, metrics, health), selects its pods, and is a real
/// NetworkPolicy.
#[test]
fn the_network_policy_opens_what_the_controller_serves() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    let opts = NativeOptions::default();
    let objects = native_objects(&opts);
    let controller = find(&objects, "Deployment", "controller");
    let pod = &controller["spec"]["template"];
    let mut served: Vec<Value> = pod["spec"]["containers"][0]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| p["containerPort"].clone())
        .collect();
    served.sort_by_key(Value::to_string);
    let policies = netpol::objects(&opts.namespace);
    let [policy] = policies.as_slice() else {
        panic!("one policy: {policies:?}")
    };
    assert_eq!(round_trip::<NetworkPolicy>(policy), *policy);
    let mut opened: Vec<Value> = policy["spec"]["ingress"][0]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| p["port"].clone())
        .collect();
    opened.sort_by_key(Value::to_string);
    assert_eq!(opened, served);
    let wanted = policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .expect("labels");
    for (k, v) in wanted {
        assert_eq!(
            &pod["metadata"]["labels"][k], v,
            "selects the controller's pods by {k}"
        );
    }
    assert_eq!(policy["metadata"]["namespace"], json!(opts.namespace));
}
