//! LoadBalancer VIPs on the node's `lo`, as kube-proxy in IPVS mode
//! puts them: [`desired_vips`] decides which (pure), [`Vips`] adds and
//! removes them through a [`VipExecutor`], [`IpCommand`] in the agent's
//! network namespace.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// The label EndpointSlices carry to name their Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The LoadBalancer VIPs that belong on `node`'s `lo`: every ingress IP of
/// every LoadBalancer Service whose traffic the node may serve. With
/// `externalTrafficPolicy: Local` that takes an EndpointSlice of the
/// Service (by the `kubernetes.io/service-name` label) with a ready
/// endpoint on `node` (an unset `ready` counts as ready, as the API says);
/// otherwise every node serves it.
pub fn desired_vips(
    node: &str,
    services: &[Service],
    slices: &[EndpointSlice],
) -> BTreeSet<IpAddr> {
    let mut vips = BTreeSet::new();
    for svc in services {
        let Some(spec) = &svc.spec else { continue };
        if spec.type_.as_deref() != Some("LoadBalancer") {
            continue;
        }
        let local = spec.external_traffic_policy.as_deref() == Some("Local");
        if local && !has_local_endpoint(node, svc, slices) {
            continue;
        }
        let ingress = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref());
        for ing in ingress.into_iter().flatten() {
            if let Some(ip) = ing.ip.as_deref().and_then(|ip| ip.parse().ok()) {
                vips.insert(ip);
            }
        }
    }
    vips
}

fn has_local_endpoint(node: &str, svc: &Service, slices: &[EndpointSlice]) -> bool {
    slices
        .iter()
        .filter(|s| s.metadata.namespace == svc.metadata.namespace)
        .filter(|s| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                == svc.metadata.name.as_ref()
        })
        .flat_map(|s| &s.endpoints)
        .any(|e| {
            e.node_name.as_deref() == Some(node)
                && e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
        })
}

/// Puts VIPs on and takes them off the node. Injectable so tests need no
/// root.
pub trait VipExecutor: Send {
    /// Adds `ip` (idempotent: an address already there is success).
    fn add(&mut self, ip: IpAddr) -> anyhow::Result<()>;
    /// Removes `ip`.
    fn remove(&mut self, ip: IpAddr) -> anyhow::Result<()>;
}

/// [`VipExecutor`] running `ip addr add|del IP/32 dev DEVICE` (`/128` and
/// `nodad` for IPv6) in the agent's network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpCommand {
    /// The device holding the VIPs.
    pub device: String,
}

impl Default for IpCommand {
    fn default() -> Self {
        Self {
            device: "lo".to_owned(),
        }
    }
}

impl IpCommand {
    /// The `ip` arguments that add (or delete) `ip`.
    pub fn args(&self, verb: &str, ip: IpAddr) -> Vec<String> {
        let prefix = if ip.is_ipv4() { 32 } else { 128 };
        let mut args = vec![
            "addr".to_owned(),
            verb.to_owned(),
            format!("{ip}/{prefix}"),
            "dev".to_owned(),
            self.device.clone(),
        ];
        if ip.is_ipv6() && verb == "add" {
            args.push("nodad".to_owned());
        }
        args
    }

    fn ip(&self, verb: &str, ip: IpAddr) -> anyhow::Result<std::process::Output> {
        let out = duct::cmd("ip", self.args(verb, ip))
            .stderr_capture()
            .stdout_null()
            .unchecked()
            .run()?;
        Ok(out)
    }
}

impl VipExecutor for IpCommand {
    fn add(&mut self, ip: IpAddr) -> anyhow::Result<()> {
        let out = self.ip("add", ip)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || stderr.contains("File exists") {
            Ok(())
        } else {
            anyhow::bail!("ip addr add {ip} dev {}: {}", self.device, stderr.trim())
        }
    }

    fn remove(&mut self, ip: IpAddr) -> anyhow::Result<()> {
        let out = self.ip("del", ip)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Already gone (someone else removed it) is what we wanted.
        if out.status.success() || stderr.contains("Cannot assign requested address") {
            Ok(())
        } else {
            anyhow::bail!("ip addr del {ip} dev {}: {}", self.device, stderr.trim())
        }
    }
}

/// Keeps the node's VIPs equal to a desired set, touching only the VIPs it
/// added itself.
pub struct Vips {
    exec: Box<dyn VipExecutor>,
    ours: BTreeSet<IpAddr>,
}

impl Vips {
    /// Manages VIPs through `exec`, starting with none.
    pub fn new(exec: Box<dyn VipExecutor>) -> Self {
        Self {
            exec,
            ours: BTreeSet::new(),
        }
    }

    /// The VIPs added and not yet removed.
    pub fn ours(&self) -> &BTreeSet<IpAddr> {
        &self.ours
    }

    /// Adds what `desired` has and we lack, removes what we added and
    /// `desired` lacks. Failures are logged and retried next time.
    pub fn reconcile(&mut self, desired: &BTreeSet<IpAddr>) {
        for ip in desired.difference(&self.ours.clone()) {
            match self.exec.add(*ip) {
                Ok(()) => {
                    tracing::info!(%ip, "VIP added");
                    self.ours.insert(*ip);
                }
                Err(e) => tracing::warn!(%ip, error = %e, "adding VIP failed"),
            }
        }
        for ip in self.ours.clone().difference(desired) {
            match self.exec.remove(*ip) {
                Ok(()) => {
                    tracing::info!(%ip, "VIP removed");
                    self.ours.remove(ip);
                }
                Err(e) => tracing::warn!(%ip, error = %e, "removing VIP failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};
    use std::sync::{Arc, Mutex};

    fn svc(name: &str, type_: &str, policy: &str, ips: &[&str]) -> Service {
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "default" },
            "spec": { "type": type_, "externalTrafficPolicy": policy },
            "status": { "loadBalancer": { "ingress":
                ips.iter().map(|ip| json!({ "ip": ip })).collect::<Vec<_>>() } },
        }))
        .expect("service")
    }

    fn slice(service: &str, endpoints: Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": { "name": format!("{service}-x"), "namespace": "default",
                          "labels": { SERVICE_NAME_LABEL: service } },
            "addressType": "IPv4",
            "endpoints": endpoints,
        }))
        .expect("slice")
    }

    fn ips(list: &[&str]) -> BTreeSet<IpAddr> {
        list.iter().map(|ip| ip.parse().expect("ip")).collect()
    }

    #[rstest]
    #[case::cluster_everywhere(
        vec![svc("a", "LoadBalancer", "Cluster", &["192.0.2.1", "2001:db8::1"])], vec![],
        &["192.0.2.1", "2001:db8::1"])]
    #[case::not_load_balancer(vec![svc("a", "ClusterIP", "Cluster", &["192.0.2.1"])], vec![], &[])]
    #[case::no_ingress_yet(vec![svc("a", "LoadBalancer", "Cluster", &[])], vec![], &[])]
    #[case::local_without_endpoints(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"])], vec![], &[])]
    #[case::local_endpoint_here(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"])],
        vec![slice("a", json!([{ "addresses": ["10.1.0.1"], "nodeName": "n1",
                                 "conditions": { "ready": true } }]))],
        &["192.0.2.1"])]
    #[case::local_ready_unset_counts(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"])],
        vec![slice("a", json!([{ "addresses": ["10.1.0.1"], "nodeName": "n1" }]))],
        &["192.0.2.1"])]
    #[case::local_endpoint_not_ready(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"])],
        vec![slice("a", json!([{ "addresses": ["10.1.0.1"], "nodeName": "n1",
                                 "conditions": { "ready": false } }]))],
        &[])]
    #[case::local_endpoint_elsewhere(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"])],
        vec![slice("a", json!([{ "addresses": ["10.1.0.1"], "nodeName": "n2" }]))],
        &[])]
    #[case::local_other_services_slice(
        vec![svc("a", "LoadBalancer", "Local", &["192.0.2.1"]),
             svc("b", "LoadBalancer", "Local", &["192.0.2.2"])],
        vec![slice("b", json!([{ "addresses": ["10.1.0.1"], "nodeName": "n1" }]))],
        &["192.0.2.2"])]
    #[case::garbage_ip_ignored(
        vec![svc("a", "LoadBalancer", "Cluster", &["not-an-ip", "192.0.2.3"])], vec![],
        &["192.0.2.3"])]
    fn desired_vips_cases(
        #[case] services: Vec<Service>,
        #[case] slices: Vec<EndpointSlice>,
        #[case] expected: &[&str],
    ) {
        assert_eq!(desired_vips("n1", &services, &slices), ips(expected));
    }

    #[rstest]
    #[case("192.0.2.1", "add", &["addr", "add", "192.0.2.1/32", "dev", "lo"])]
    #[case("2001:db8::1", "add", &["addr", "add", "2001:db8::1/128", "dev", "lo", "nodad"])]
    #[case("2001:db8::1", "del", &["addr", "del", "2001:db8::1/128", "dev", "lo"])]
    fn ip_command_args(#[case] ip: &str, #[case] verb: &str, #[case] expected: &[&str]) {
        let args = IpCommand::default().args(verb, ip.parse().expect("ip"));
        assert_eq!(args, expected);
    }

    #[derive(Clone, Default)]
    struct Recorder {
        calls: Arc<Mutex<Vec<String>>>,
        fail: Option<IpAddr>,
    }

    impl VipExecutor for Recorder {
        fn add(&mut self, ip: IpAddr) -> anyhow::Result<()> {
            self.calls.lock().expect("lock").push(format!("add {ip}"));
            if Some(ip) == self.fail {
                anyhow::bail!("no");
            }
            Ok(())
        }
        fn remove(&mut self, ip: IpAddr) -> anyhow::Result<()> {
            self.calls.lock().expect("lock").push(format!("del {ip}"));
            Ok(())
        }
    }

    #[test]
    fn vips_touch_only_their_own_addresses() {
        let rec = Recorder {
            fail: Some("192.0.2.9".parse().expect("ip")),
            ..Recorder::default()
        };
        let calls = rec.calls.clone();
        let mut vips = Vips::new(Box::new(rec));
        vips.reconcile(&ips(&["192.0.2.1", "192.0.2.9"]));
        assert_eq!(vips.ours(), &ips(&["192.0.2.1"]));
        vips.reconcile(&ips(&["192.0.2.2"]));
        assert_eq!(vips.ours(), &ips(&["192.0.2.2"]));
        vips.reconcile(&ips(&["192.0.2.2"]));
        assert_eq!(
            *calls.lock().expect("lock"),
            [
                "add 192.0.2.1",
                "add 192.0.2.9",
                "add 192.0.2.2",
                "del 192.0.2.1"
            ]
        );
    }
}
