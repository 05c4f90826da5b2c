//! Least-privilege RBAC for the two components. Each rule names the code
//! path that needs it; a verb nobody calls does not belong here. What
//! RBAC cannot restrict, an admission policy does ([`LEASE_POLICY`]).

use serde_json::{Value, json};

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({ "apiGroups": groups, "resources": resources, "verbs": verbs })
}

/// A rule for the objects called `names` only. Kubernetes cannot restrict
/// `create` (nor an unfiltered `list`/`watch`) by name: those go in a
/// rule of their own.
fn named(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> Value {
    json!({ "apiGroups": groups, "resources": resources, "resourceNames": names, "verbs": verbs })
}

const READ: &[&str] = &["get", "list", "watch"];
const CONFIG_KINDS: &[&str] = &[
    "ipaddresspools",
    "l2advertisements",
    "bgpadvertisements",
    "bgppeers",
    "bfdprofiles",
    "communities",
];

fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": { "name": format!("metallb-system:{name}"), "labels": { "app": "metallb" } },
        "rules": rules,
    })
}

fn role(name: &str, namespace: &str, rules: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": { "name": name, "namespace": namespace, "labels": { "app": "metallb" } },
        "rules": rules,
    })
}

fn binding(kind: &str, name: &str, namespace: &str, account: &str) -> Value {
    let mut metadata = json!({ "name": name, "labels": { "app": "metallb" } });
    let role_kind = if kind == "ClusterRoleBinding" {
        "ClusterRole"
    } else {
        metadata["namespace"] = json!(namespace);
        "Role"
    };
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata,
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name },
        "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": namespace }],
    })
}

/// Roles and bindings for controller and speaker.
pub fn objects(namespace: &str) -> Vec<Value> {
    let controller_cluster = cluster_role(
        "controller",
        vec![
            // Reconcile LoadBalancer services: read, patch the allocated-from
            // annotation, patch status.loadBalancer (controller::run).
            rule(&[""], &["services"], &["get", "list", "watch", "patch"]),
            rule(&[""], &["services/status"], &["patch"]),
            // Pool serviceAllocation.namespaceSelectors.
            rule(&[""], &["namespaces"], READ),
            // Webhook reviews: which nodes two peers or advertisements
            // share (k8s::webhook::current lists their metadata).
            rule(&[""], &["nodes"], &["list"]),
            // The webhooks' caBundle (k8s::webhook_certs::inject).
            named(
                &["admissionregistration.k8s.io"],
                &["validatingwebhookconfigurations"],
                &[crate::k8s::webhook::CONFIGURATION],
                &["get", "patch"],
            ),
            // BGPPeer's conversion webhook caBundle (the same inject);
            // upstream's cert-controller may write every MetalLB CRD.
            named(
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                &[crate::k8s::webhook::CONVERSION_CRD],
                &["get", "patch"],
            ),
            rule(&[""], &["events"], &["create", "patch"]),
            rule(&["events.k8s.io"], &["events"], &["create", "patch"]),
            // Who reads /metrics, and may they (k8s::metrics_auth).
            rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
            rule(
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
                &["create"],
            ),
        ],
    );
    let speaker_cluster = cluster_role(
        "speaker",
        vec![
            // Which services to announce, from which nodes.
            rule(&[""], &["services", "nodes"], READ),
            rule(&["discovery.k8s.io"], &["endpointslices"], READ),
            rule(&[""], &["events"], &["create", "patch"]),
            rule(&["events.k8s.io"], &["events"], &["create", "patch"]),
            // Who reads /metrics, and may they (k8s::metrics_auth).
            rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
            rule(
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
                &["create"],
            ),
        ],
    );
    let controller_ns = role(
        "controller",
        namespace,
        vec![
            rule(&["metallb.io"], CONFIG_KINDS, READ),
            // Pool counters in IPAddressPool.status (controller::run::sync_pools).
            rule(&["metallb.io"], &["ipaddresspools/status"], &["patch"]),
            // ConfigurationState "controller" (k8s::config_state: get,
            // create when missing, patch its status).
            named(
                &["metallb.io"],
                &["configurationstates"],
                &[crate::controller::run::CONFIG_STATE_NAME],
                &["get"],
            ),
            named(
                &["metallb.io"],
                &["configurationstates/status"],
                &[crate::controller::run::CONFIG_STATE_NAME],
                &["patch"],
            ),
            // Watched by name (a list or watch selecting
            // `metadata.name` is authorized as a request for that name)
            // so a hand edit is written back; created when missing
            // (RBAC cannot name what a create makes).
            named(
                &["metallb.io"],
                &["configurationstates"],
                &[crate::controller::run::CONFIG_STATE_NAME],
                &["list", "watch"],
            ),
            rule(&["metallb.io"], &["configurationstates"], &["create"]),
            // The memberlist key Secret, created when missing (k8s::memberlist).
            named(&[""], &["secrets"], &[super::MEMBERLIST_SECRET], &["get"]),
            // The webhooks' certificate, made, read and renewed
            // (k8s::webhook_certs::ensure_secret).
            named(
                &[""],
                &["secrets"],
                &[crate::k8s::webhook::SECRET],
                &["get", "update"],
            ),
            rule(&[""], &["secrets"], &["create"]),
            // Leader election (k8s::leader: get, create, replace).
            named(
                &["coordination.k8s.io"],
                &["leases"],
                &[crate::controller::run::LEASE_NAME],
                &["get", "update"],
            ),
            rule(&["coordination.k8s.io"], &["leases"], &["create"]),
        ],
    );
    let speaker_ns = role(
        "speaker",
        namespace,
        vec![
            rule(&["metallb.io"], CONFIG_KINDS, READ),
            // Its own announcement status objects, and replacing other
            // nodes' stale objects for a service it now leads (watched;
            // speaker::run::writes creates, deletes and patches status).
            rule(
                &["metallb.io"],
                &["servicel2statuses", "servicebgpstatuses"],
                &["list", "watch", "create", "delete"],
            ),
            rule(
                &["metallb.io"],
                &["servicel2statuses/status", "servicebgpstatuses/status"],
                &["patch"],
            ),
            // ConfigurationState "speaker-<node>" (k8s::config_state: get,
            // create when missing, watched so a hand edit is written back,
            // patch its status). One Role serves every node's speaker, so it
            // cannot name each node's object.
            rule(
                &["metallb.io"],
                &["configurationstates"],
                &["get", "list", "watch", "create"],
            ),
            rule(&["metallb.io"], &["configurationstates/status"], &["patch"]),
            // memberlist key, BGP passwordSecret (any name a BGPPeer
            // gives).
            rule(&[""], &["secrets"], READ),
            // metallb-excludel2, watched by name.
            named(
                &[""],
                &["configmaps"],
                &[crate::speaker::run::EXCLUDE_CONFIGMAP],
                READ,
            ),
            // Its own Pod, the owner of its status objects.
            rule(&[""], &["pods"], &["get"]),
            // speaker::presence: its own lease `metallb-speaker-<node>`
            // (create, patch) and the others' (watched). One Role serves
            // every node's speaker, so it cannot name each node's lease;
            // the admission policy of `lease_policy` keeps a speaker to
            // presence leases (not the controller's leader lease) and,
            // where its token names its node, to its own.
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &["list", "watch", "create", "patch"],
            ),
        ],
    );
    vec![
        controller_cluster,
        speaker_cluster,
        controller_ns,
        speaker_ns,
        binding(
            "ClusterRoleBinding",
            "metallb-system:controller",
            namespace,
            "controller",
        ),
        binding(
            "ClusterRoleBinding",
            "metallb-system:speaker",
            namespace,
            "speaker",
        ),
        binding("RoleBinding", "controller", namespace, "controller"),
        binding("RoleBinding", "speaker", namespace, "speaker"),
    ]
    .into_iter()
    .chain(lease_policy(namespace))
    .collect()
}

/// The name of the ValidatingAdmissionPolicy (and its binding) that keeps
/// speakers to their presence leases.
pub const LEASE_POLICY: &str = "metallb-speaker-leases";

/// What RBAC cannot say: a speaker writes only presence leases
/// (`metallb-speaker-*`), never the controller's leader lease (a huge
/// `leaseDurationSeconds` there would stop assignment cluster-wide), and,
/// where its ServiceAccount token carries the node it runs on
/// (`authentication.kubernetes.io/node-name`, Kubernetes 1.30+), only its
/// own node's. A ValidatingAdmissionPolicy (GA in 1.30), bound to deny.
fn lease_policy(namespace: &str) -> [Value; 2] {
    let prefix = crate::speaker::presence::LEASE_PREFIX;
    let node_claim = "authentication.kubernetes.io/node-name";
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": LEASE_POLICY },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": { "resourceRules": [{
                "apiGroups": ["coordination.k8s.io"],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE", "DELETE"],
                "resources": ["leases"],
            }] },
            "matchConditions": [{
                "name": "speaker",
                "expression": format!("request.userInfo.username == 'system:serviceaccount:{namespace}:speaker'"),
            }],
            "validations": [
                {
                    "expression": format!("request.name.startsWith('{prefix}')"),
                    "message": format!("the speaker writes only presence leases ({prefix}<node>)"),
                    "reason": "Forbidden",
                },
                {
                    "expression": format!("!('{node_claim}' in request.userInfo.extra) || request.name == '{prefix}' + request.userInfo.extra['{node_claim}'][0]"),
                    "message": "a speaker writes only its own node's presence lease",
                    "reason": "Forbidden",
                },
            ],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": { "name": LEASE_POLICY },
        "spec": { "policyName": LEASE_POLICY, "validationActions": ["Deny"] },
    });
    [policy, binding]
}
