//! What the lab backend plays for a Pod's containers, whatever their
//! image: no image is ever pulled in the lab, so each container becomes
//! an echo server in its node's network namespace. A container running
//! agnhost `netexec` serves its `--http-port` and `--udp-port`; any other
//! container serves every declared container port (HTTP on TCP ports, the
//! netexec UDP echo on UDP ports), and a Pod that declares no port at all
//! gets TCP port 80 on its first container (what nginx and httpd, the
//! images the tutorials use, listen on).
//!
//! A container of the metallb-rs image is the exception: the lab runs
//! its own metallb-rs binary for it ([`metallb`]), so the chart's
//! controller and speakers are the real thing.
//!
//! A Job's Pod is played as its containers completing at once with exit
//! code 0 ([`runs_to_completion`]), so the Job completes.
//!
//! Pure: the pod runner ([`super::backend`]) starts what this says.

use k8s_openapi::api::core::v1::{Container, Pod};
use std::collections::BTreeSet;

pub mod metallb;

/// What plays a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Player {
    /// agnhost netexec (the e2e suites' backend): its ports come from its
    /// arguments.
    Netexec,
    /// An echo server on the declared ports.
    Echo,
    /// The lab's metallb-rs binary ([`metallb::process`]): it listens
    /// on what its arguments say; the declared ports are listed for the
    /// EndpointSlices.
    MetallbRs,
}

/// A transport protocol a played container listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// HTTP over TCP.
    Tcp,
    /// The netexec UDP echo.
    Udp,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
        })
    }
}

/// One port a played container listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Port {
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The port number.
    pub number: u16,
}

impl std::fmt::Display for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.number, self.protocol)
    }
}

/// How one container is played.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Played {
    /// The container's name.
    pub container: String,
    /// What plays it.
    pub player: Player,
    /// What it listens on.
    pub ports: Vec<Port>,
}

/// The port served by a Pod that declares none.
pub const DEFAULT_PORT: Port = Port {
    protocol: Protocol::Tcp,
    number: 80,
};

/// The ports a netexec container serves: `--http-port` (default 8080) and
/// `--udp-port` (default 8081), in `--flag=N` or `--flag N` form.
pub fn netexec_ports(args: &[String]) -> (u16, u16) {
    let find = |flag: &str, default: u16| -> u16 {
        args.iter()
            .enumerate()
            .find_map(|(i, a)| match a.strip_prefix(&format!("{flag}=")) {
                Some(v) => v.parse().ok(),
                None if a == flag => args.get(i + 1).and_then(|v| v.parse().ok()),
                None => None,
            })
            .unwrap_or(default)
    };
    (find("--http-port", 8080), find("--udp-port", 8081))
}

fn declared(c: &Container) -> Vec<Port> {
    c.ports
        .iter()
        .flatten()
        .filter_map(|p| {
            let protocol = match p.protocol.as_deref().unwrap_or("TCP") {
                "TCP" => Protocol::Tcp,
                "UDP" => Protocol::Udp,
                // SCTP has no player.
                _ => return None,
            };
            let number = u16::try_from(p.container_port).ok()?;
            Some(Port { protocol, number })
        })
        .collect()
}

fn sorted(mut ports: Vec<Port>) -> Vec<Port> {
    ports.sort();
    ports.dedup();
    ports
}

/// How each of `pod`'s containers is played, in spec order.
pub fn play(pod: &Pod) -> Vec<Played> {
    let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
    let mut out: Vec<Played> = containers
        .map(|c| {
            let args: Vec<String> = c
                .command
                .iter()
                .flatten()
                .chain(c.args.iter().flatten())
                .cloned()
                .collect();
            if metallb::runs_metallb_rs(c) {
                Played {
                    container: c.name.clone(),
                    player: Player::MetallbRs,
                    ports: sorted(declared(c)),
                }
            } else if args.iter().any(|a| a == "netexec") {
                let (http, udp) = netexec_ports(&args);
                Played {
                    container: c.name.clone(),
                    player: Player::Netexec,
                    ports: vec![
                        Port {
                            protocol: Protocol::Tcp,
                            number: http,
                        },
                        Port {
                            protocol: Protocol::Udp,
                            number: udp,
                        },
                    ],
                }
            } else {
                Played {
                    container: c.name.clone(),
                    player: Player::Echo,
                    ports: sorted(declared(c)),
                }
            }
        })
        .collect();
    // Only echo servers default: a real program listens where it says.
    if out.iter().all(|p| p.ports.is_empty())
        && let Some(first) = out.first_mut()
        && first.player == Player::Echo
    {
        first.ports.push(DEFAULT_PORT);
    }
    out
}

/// Whether `pod` belongs to a batch/v1 Job: the lab plays it as
/// completing at once, serving nothing.
pub fn runs_to_completion(pod: &Pod) -> bool {
    pod.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true) && o.kind == "Job" && o.api_version.starts_with("batch/")
    })
}

/// Every port `pod` listens on in its node's network namespace.
pub fn pod_ports(pod: &Pod) -> BTreeSet<Port> {
    play(pod).into_iter().flat_map(|p| p.ports).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    fn pod(containers: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({ "metadata": { "name": "p" }, "spec": { "containers": containers } }),
        )
        .expect("pod")
    }

    fn show(pod: &Pod) -> String {
        play(pod)
            .iter()
            .map(|p| {
                let ports: Vec<String> = p.ports.iter().map(ToString::to_string).collect();
                let kind = match p.player {
                    Player::Netexec => "netexec",
                    Player::Echo => "backend",
                    Player::MetallbRs => "metallb-rs",
                };
                format!("{}: {kind} {}", p.container, ports.join(" "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    #[test]
    fn only_a_jobs_pods_run_to_completion() {
        let owned = |api_version: &str, kind: &str| -> Pod {
            serde_json::from_value(json!({ "metadata": { "name": "p", "ownerReferences": [
                { "apiVersion": api_version, "kind": kind, "name": "o", "uid": "u", "controller": true }] } }))
            .expect("pod")
        };
        assert!(runs_to_completion(&owned("batch/v1", "Job")));
        assert!(!runs_to_completion(&owned("apps/v1", "ReplicaSet")));
        assert!(!runs_to_completion(&pod(
            json!([{ "name": "a", "image": "busybox" }])
        )));
    }

    #[test]
    fn netexec_flags() {
        assert_eq!(netexec_ports(&strings(&["netexec"])), (8080, 8081));
        assert_eq!(
            netexec_ports(&strings(&["netexec", "--http-port=80", "--udp-port", "90"])),
            (80, 90)
        );
        assert_eq!(
            netexec_ports(&strings(&["netexec", "--http-port", "x"])),
            (8080, 8081)
        );
    }

    #[test]
    fn netexec_serves_its_arguments_ports() {
        let p = pod(
            json!([{ "name": "n", "image": "agnhost", "args": ["netexec", "--http-port=9000"],
                             "ports": [{ "containerPort": 1 }] }]),
        );
        assert_eq!(show(&p), "n: netexec 9000/TCP 8081/UDP");
    }

    #[test]
    fn any_image_serves_its_declared_ports() {
        let p = pod(json!([{ "name": "web", "image": "nginx", "ports": [
            { "containerPort": 8443 }, { "containerPort": 53, "protocol": "UDP" },
            { "containerPort": 9, "protocol": "SCTP" }, { "containerPort": 8443, "protocol": "TCP" },
        ] }]));
        assert_eq!(show(&p), "web: backend 8443/TCP 53/UDP");
    }

    #[test]
    fn a_pod_without_ports_serves_80_on_its_first_container() {
        let p =
            pod(json!([{ "name": "a", "image": "nginx" }, { "name": "b", "image": "busybox" }]));
        assert_eq!(show(&p), "a: backend 80/TCP; b: backend ");
        let with_port = pod(json!([{ "name": "a", "image": "nginx" },
                                   { "name": "b", "image": "x", "ports": [{ "containerPort": 81 }] }]));
        assert_eq!(show(&with_port), "a: backend ; b: backend 81/TCP");
    }

    #[test]
    fn the_metallb_rs_image_is_run_not_echoed() {
        let p = pod(
            json!([{ "name": "speaker", "image": "ghcr.io/metallb-rs/metallb-rs:v0.1.0",
            "args": ["speaker"], "ports": [{ "containerPort": 9120 }, { "containerPort": 7946, "protocol": "UDP" }] }]),
        );
        assert_eq!(show(&p), "speaker: metallb-rs 9120/TCP 7946/UDP");
        let bare = pod(json!([{ "name": "controller", "image": "metallb-rs:dev" }]));
        assert_eq!(
            show(&bare),
            "controller: metallb-rs ",
            "no echo port 80 beside it"
        );
    }
}
