//! What a played container's readinessProbe asks and what its answers
//! mean, without I/O: [`readiness_probes`] reads each container's probe
//! (httpGet or tcpSocket on a port, named ports through the container's
//! declared ports), [`Readiness::observe`] applies kubelet's thresholds
//! to one result, [`pod_ready`] joins the containers. The pod runner
//! ([`super::backend`]) sends the probes, with their timeouts, to what
//! the lab backend serves and writes the Pod's Ready condition.
//!
//! exec and grpc probes have nothing to run against in the lab: they
//! count as succeeding (the played container answers whatever it is
//! asked), as a container without a probe is ready once started.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::time::Duration;

/// What one probe checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// An HTTP GET: success on a status from 200 to 399.
    Http {
        /// The host asked (the pod IP when unset).
        host: Option<String>,
        /// The port, resolved.
        port: u16,
        /// The path with its query.
        path: String,
        /// HTTPS: the lab backend serves no TLS, so it always fails.
        https: bool,
    },
    /// A TCP connection: success when it is accepted.
    Tcp {
        /// The host asked (the pod IP when unset).
        host: Option<String>,
        /// The port, resolved.
        port: u16,
    },
    /// A port named in the probe but declared by no port of the
    /// container: fails, as kubelet's probe does.
    Unresolved(String),
    /// exec or grpc: counts as success.
    Played,
}

/// One container's readinessProbe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The container's index in the Pod's spec.
    pub container: usize,
    /// What is checked.
    pub check: Check,
    /// Before the first probe.
    pub initial_delay: Duration,
    /// Between probes (at least a second, as the API requires).
    pub period: Duration,
    /// How long one probe may take.
    pub timeout: Duration,
    /// Consecutive successes that make a not-ready container ready.
    pub success_threshold: u32,
    /// Consecutive failures that make a ready container not ready.
    pub failure_threshold: u32,
}

fn seconds(v: Option<i32>, default: u64, min: u64) -> Duration {
    let s = v.and_then(|s| u64::try_from(s).ok()).unwrap_or(default);
    Duration::from_secs(s.max(min))
}

fn port_of(c: &Container, port: &IntOrString) -> Result<u16, String> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n).map_err(|_| n.to_string()),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .ok_or_else(|| name.clone()),
    }
}

/// The readinessProbe of every container of `pod` that declares one.
pub fn readiness_probes(pod: &Pod) -> Vec<Probe> {
    let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
    containers
        .enumerate()
        .filter_map(|(i, c)| {
            let p = c.readiness_probe.as_ref()?;
            let check = if let Some(h) = &p.http_get {
                match port_of(c, &h.port) {
                    Ok(port) => Check::Http {
                        host: h.host.clone().filter(|h| !h.is_empty()),
                        port,
                        path: h.path.clone().unwrap_or_else(|| "/".to_owned()),
                        https: h.scheme.as_deref() == Some("HTTPS"),
                    },
                    Err(name) => Check::Unresolved(name),
                }
            } else if let Some(t) = &p.tcp_socket {
                match port_of(c, &t.port) {
                    Ok(port) => Check::Tcp {
                        host: t.host.clone().filter(|h| !h.is_empty()),
                        port,
                    },
                    Err(name) => Check::Unresolved(name),
                }
            } else {
                Check::Played
            };
            Some(Probe {
                container: i,
                check,
                initial_delay: seconds(p.initial_delay_seconds, 0, 0),
                period: seconds(p.period_seconds, 10, 1),
                timeout: seconds(p.timeout_seconds, 1, 1),
                success_threshold: p
                    .success_threshold
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(1)
                    .max(1),
                failure_threshold: p
                    .failure_threshold
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(3)
                    .max(1),
            })
        })
        .collect()
}

/// One container's readiness as its probe results made it: not ready
/// until the probe has succeeded `successThreshold` times in a row, then
/// ready until it has failed `failureThreshold` times in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Readiness {
    /// Ready now.
    pub ready: bool,
    /// The current run of results that disagree with `ready`.
    streak: u32,
}

impl Readiness {
    /// The readiness after one more probe result.
    pub fn observe(self, success: bool, probe: &Probe) -> Readiness {
        if success == self.ready {
            return Readiness {
                ready: self.ready,
                streak: 0,
            };
        }
        let streak = self.streak + 1;
        let threshold = if success {
            probe.success_threshold
        } else {
            probe.failure_threshold
        };
        if streak >= threshold {
            Readiness {
                ready: success,
                streak: 0,
            }
        } else {
            Readiness {
                ready: self.ready,
                streak,
            }
        }
    }
}

/// Whether a Pod is ready: every container is (`containers[i]`: `None`
/// for a container without a readinessProbe, which is ready once
/// started).
pub fn pod_ready(containers: &[Option<Readiness>]) -> bool {
    containers.iter().all(|c| c.is_none_or(|r| r.ready))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn pod(containers: Value) -> Pod {
        serde_json::from_value(json!({ "metadata": { "name": "p" },
                                       "spec": { "containers": containers } }))
        .expect("pod")
    }

    fn probe(success_threshold: u32, failure_threshold: u32) -> Probe {
        Probe {
            container: 0,
            check: Check::Played,
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold,
            failure_threshold,
        }
    }

    /// Feeds `results` (`+` success, `-` failure) and shows the readiness
    /// after each (`R` ready, `.` not).
    fn run(results: &str, p: &Probe) -> String {
        let mut r = Readiness::default();
        results
            .chars()
            .map(|c| {
                r = r.observe(c == '+', p);
                if r.ready { 'R' } else { '.' }
            })
            .collect()
    }

    #[rstest]
    #[case::ready_on_first_success(1, 3, "+", "R")]
    #[case::not_ready_until_the_first_success(1, 3, "--+", "..R")]
    #[case::three_failures_to_turn_unready(1, 3, "+--+---", "RRRRRR.")]
    #[case::success_threshold_needs_a_run(2, 1, "+-++-", "...R.")]
    #[case::a_success_breaks_a_failure_run(1, 2, "+-+-+--", "RRRRRR.")]
    #[case::back_to_ready(1, 1, "+-+", "R.R")]
    fn thresholds(
        #[case] success: u32,
        #[case] failure: u32,
        #[case] results: &str,
        #[case] expected: &str,
    ) {
        assert_eq!(run(results, &probe(success, failure)), expected);
    }

    #[test]
    fn a_pod_is_ready_when_every_probed_container_is() {
        let ready = Readiness {
            ready: true,
            streak: 0,
        };
        assert!(pod_ready(&[None, Some(ready)]));
        assert!(!pod_ready(&[Some(ready), Some(Readiness::default())]));
        assert!(pod_ready(&[]));
    }

    #[test]
    fn probes_resolve_ports_and_defaults() {
        let p = pod(json!([
            { "name": "a", "image": "nginx", "ports": [{ "name": "http", "containerPort": 8080 }],
              "readinessProbe": { "httpGet": { "path": "/healthz", "port": "http" },
                                  "periodSeconds": 2, "failureThreshold": 1 } },
            { "name": "b", "image": "nginx" },
            { "name": "c", "image": "redis",
              "readinessProbe": { "tcpSocket": { "port": 6379 }, "initialDelaySeconds": 5 } },
            { "name": "d", "image": "x", "readinessProbe": { "tcpSocket": { "port": "none" } } },
            { "name": "e", "image": "x", "readinessProbe": { "exec": { "command": ["true"] } } },
        ]));
        let probes = readiness_probes(&p);
        let shown: Vec<String> = probes
            .iter()
            .map(|p| {
                format!(
                    "{} {:?} delay {}s period {}s timeout {}s thresholds {}/{}",
                    p.container,
                    p.check,
                    p.initial_delay.as_secs(),
                    p.period.as_secs(),
                    p.timeout.as_secs(),
                    p.success_threshold,
                    p.failure_threshold
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                "0 Http { host: None, port: 8080, path: \"/healthz\", https: false } delay 0s period 2s timeout 1s thresholds 1/1",
                "2 Tcp { host: None, port: 6379 } delay 5s period 10s timeout 1s thresholds 1/3",
                "3 Unresolved(\"none\") delay 0s period 10s timeout 1s thresholds 1/3",
                "4 Played delay 0s period 10s timeout 1s thresholds 1/3",
            ]
        );
    }
}
