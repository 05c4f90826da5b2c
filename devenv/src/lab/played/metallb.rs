//! How the lab plays a container of the metallb-rs image (the chart's
//! controller Deployment and speaker DaemonSet, or the native manifest's):
//! no image is pulled, so the lab runs its own, already-built
//! `metallb-rs` binary with the container's arguments and environment
//! (the downward API's fields resolved for the Pod and its node), in the
//! node's network namespace, with a token of the Pod's ServiceAccount.
//!
//! Pure: it decides the process; [`crate::lab::backend`] starts it.

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};
use std::net::IpAddr;
use std::time::Duration;

/// The last path segment of the image names the lab plays with its own
/// binary (any registry, tag or digest: the chart's default
/// `ghcr.io/metallb-rs/metallb-rs`, the dev-env's `metallb-rs:dev`).
const IMAGE_NAME: &str = "metallb-rs";

/// Whether `command` names the binary (`/metallb-rs`, where the image
/// has it, or any path ending in it): a container may name it rather
/// than leave the entrypoint; the image holds no other program.
fn is_the_binary(command: &str) -> bool {
    command.rsplit('/').next() == Some(IMAGE_NAME)
}

/// The most a stopped process is given to exit before it is killed:
/// the lab keeps a Pod that went away for its drain
/// ([`crate::lab::backend`]'s 5 s), and a grace period is anyone's to
/// write.
pub const MAX_GRACE: Duration = Duration::from_secs(5);

/// Whether `image` is the metallb-rs image, whatever its registry, tag
/// or digest.
pub fn is_metallb_rs_image(image: &str) -> bool {
    let without_digest = image.split('@').next().unwrap_or_default();
    let last = without_digest.rsplit('/').next().unwrap_or_default();
    let name = last.split(':').next().unwrap_or_default();
    name == IMAGE_NAME
}

/// Where a Pod runs: the facts the downward API gives it.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// Its node.
    pub node: &'a str,
    /// Its node's addresses, first family first (host networking: the
    /// lab's pod IPs are its node's).
    pub addresses: &'a [IpAddr],
}

/// The process that plays one metallb-rs container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// The container's name.
    pub container: String,
    /// The binary's arguments: the container's `command` past the binary,
    /// then its `args`.
    pub args: Vec<String>,
    /// The container's environment, downward-API fields resolved, in spec
    /// order.
    pub env: Vec<(String, String)>,
    /// The ServiceAccount whose token it runs with; none when the Pod
    /// turns the token off.
    pub service_account: Option<String>,
    /// How long it may take to exit once told to stop (the Pod's
    /// termination grace period, at most [`MAX_GRACE`]).
    pub grace: Duration,
}

/// Why a metallb-rs container cannot be played.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcessError {
    /// The container has no such name.
    #[error("pod {pod}: no container {container}")]
    NoContainer {
        /// `namespace/name`.
        pod: String,
        /// The container asked for.
        container: String,
    },
    /// Its `command` runs something else than the binary.
    #[error(
        "pod {pod} container {container}: command {command:?} does not run metallb-rs, the only program in the metallb-rs image"
    )]
    Command {
        /// `namespace/name`.
        pod: String,
        /// The container.
        container: String,
        /// Its command.
        command: Vec<String>,
    },
    /// An environment variable the lab cannot give.
    #[error("pod {pod} container {container}: env {name}: {reason}")]
    Env {
        /// `namespace/name`.
        pod: String,
        /// The container.
        container: String,
        /// The variable.
        name: String,
        /// What is missing.
        reason: String,
    },
}

/// Whether `c` runs the metallb-rs image.
pub fn runs_metallb_rs(c: &Container) -> bool {
    c.image.as_deref().is_some_and(is_metallb_rs_image)
}

/// The process that plays `pod`'s container `container` at `at`.
pub fn process(pod: &Pod, container: &str, at: Placement<'_>) -> Result<Process, ProcessError> {
    let m = &pod.metadata;
    let pod_name = format!(
        "{}/{}",
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default()
    );
    let spec = pod.spec.as_ref();
    let c = spec
        .into_iter()
        .flat_map(|s| s.containers.iter())
        .find(|c| c.name == container)
        .ok_or_else(|| ProcessError::NoContainer {
            pod: pod_name.clone(),
            container: container.to_owned(),
        })?;
    let mut args: Vec<String> = match c.command.as_deref() {
        None | Some([]) => Vec::new(),
        Some([binary, rest @ ..]) if is_the_binary(binary) => rest.to_vec(),
        Some(command) => {
            return Err(ProcessError::Command {
                pod: pod_name,
                container: container.to_owned(),
                command: command.to_vec(),
            });
        }
    };
    args.extend(c.args.iter().flatten().cloned());
    let mut env = Vec::new();
    for var in c.env.iter().flatten() {
        let value = env_value(pod, var, at).map_err(|reason| ProcessError::Env {
            pod: pod_name.clone(),
            container: container.to_owned(),
            name: var.name.clone(),
            reason,
        })?;
        env.push((var.name.clone(), value));
    }
    let automount = spec
        .and_then(|s| s.automount_service_account_token)
        .unwrap_or(true);
    let account = spec
        .and_then(|s| {
            s.service_account_name
                .clone()
                .or_else(|| s.service_account.clone())
        })
        .unwrap_or_else(|| "default".to_owned());
    let grace = spec
        .and_then(|s| s.termination_grace_period_seconds)
        .map_or(MAX_GRACE, |s| {
            Duration::from_secs(u64::try_from(s).unwrap_or(0)).min(MAX_GRACE)
        });
    Ok(Process {
        container: container.to_owned(),
        args,
        env,
        service_account: automount.then_some(account),
        grace,
    })
}

/// One variable's value: a literal, or a downward-API field the lab
/// knows; anything else (Secrets, ConfigMaps, resources) is refused by
/// name rather than left empty, which would change what the process does.
fn env_value(pod: &Pod, var: &EnvVar, at: Placement<'_>) -> Result<String, String> {
    let Some(from) = &var.value_from else {
        return Ok(var.value.clone().unwrap_or_default());
    };
    let Some(field) = &from.field_ref else {
        let what = if from.secret_key_ref.is_some() {
            "secretKeyRef"
        } else if from.config_map_key_ref.is_some() {
            "configMapKeyRef"
        } else {
            "resourceFieldRef"
        };
        return Err(format!(
            "valueFrom.{what} is not played by the lab (only literal values and fieldRef)"
        ));
    };
    let m = &pod.metadata;
    let first_ip = || at.addresses.first().map(ToString::to_string);
    let value = match field.field_path.as_str() {
        "metadata.name" => m.name.clone(),
        "metadata.namespace" => m.namespace.clone(),
        "metadata.uid" => m.uid.clone(),
        "spec.nodeName" => Some(at.node.to_owned()),
        "spec.serviceAccountName" => pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone()),
        // Host networking: the Pod's address is its node's.
        "status.podIP" | "status.hostIP" => first_ip(),
        other => {
            return Err(format!(
                "fieldRef {other} is not played by the lab (metadata.name, metadata.namespace, metadata.uid, spec.nodeName, spec.serviceAccountName, status.podIP, status.hostIP)"
            ));
        }
    };
    value.ok_or_else(|| format!("fieldRef {} has no value here", field.field_path))
}

#[cfg(test)]
mod tests;
