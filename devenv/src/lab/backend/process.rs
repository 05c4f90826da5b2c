//! Runs what [`crate::lab::played::metallb`] decides for a metallb-rs container:
//! the lab's metallb-rs binary, in this node's network namespace (the
//! agent's own), with the container's arguments and environment and a
//! kubeconfig holding a token of the Pod's ServiceAccount (what kubelet
//! mounts; the binary reads `KUBECONFIG` first). Its output goes to the
//! container's log. It is restarted with a backoff when it exits (as
//! `restartPolicy: Always`), and on stop it gets SIGTERM, then SIGKILL
//! after its grace period; dropped (the agent stopping), it is killed.

use super::{Here, Log};
use crate::lab::played::Played;
use crate::lab::played::metallb::{self, Process};
use anyhow::{Context, Result};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

/// Where the lab's metallb-rs binary is and what its processes need.
#[derive(Debug, Clone)]
pub struct MetallbRs {
    /// The lab's built `metallb-rs`.
    pub binary: PathBuf,
    /// The agent's kubeconfig: the processes' kubeconfigs reach the API
    /// server the same way, with their ServiceAccount's token instead.
    pub kubeconfig: PathBuf,
    /// Where the processes' kubeconfigs are written (they hold tokens:
    /// not beside the logs the API server serves).
    pub token_dir: PathBuf,
}

/// How long a token request may take.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest wait before a process that exited is started again.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A kubeconfig like the agent's that authenticates with `token`.
fn with_token(agent: &Path, token: &str) -> Result<String> {
    let kc = kube::config::Kubeconfig::read_from(agent)
        .with_context(|| format!("reading {}", agent.display()))?;
    let mut v = serde_json::to_value(&kc)?;
    for user in v["users"].as_array_mut().into_iter().flatten() {
        user["user"] = serde_json::json!({ "token": token });
    }
    // JSON is YAML: kube and kubectl read it as a kubeconfig.
    Ok(serde_json::to_string_pretty(&v)?)
}

/// Issues a token of `account` in `ns` and writes the kubeconfig holding
/// it to `path`.
async fn write_kubeconfig(
    client: &kube::Client,
    rs: &MetallbRs,
    ns: &str,
    account: &str,
    path: &Path,
) -> Result<()> {
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), ns);
    // A day: kubelet refreshes its projected tokens, this runner does not;
    // the lab's runs are shorter.
    let request: TokenRequest = serde_json::from_value(
        serde_json::json!({ "spec": { "audiences": [], "expirationSeconds": 24 * 3600 } }),
    )?;
    let issued = tokio::time::timeout(
        TOKEN_TIMEOUT,
        accounts.create_token_request(account, &Default::default(), &request),
    )
    .await
    .with_context(|| format!("requesting a token for {ns}/{account}: timed out"))?
    .with_context(|| format!("requesting a token for {ns}/{account}"))?;
    let token = issued.status.map(|s| s.token).unwrap_or_default();
    std::fs::create_dir_all(&rs.token_dir)
        .with_context(|| format!("creating {}", rs.token_dir.display()))?;
    lab_apiserver::write_private(path, with_token(&rs.kubeconfig, &token)?.as_bytes())
}

/// The kubeconfig file of `pod`'s container `container`.
pub(super) fn kubeconfig_path(rs: &MetallbRs, pod: &Pod, container: &str) -> PathBuf {
    let m = &pod.metadata;
    rs.token_dir.join(format!(
        "{}_{}_{}_{container}.kubeconfig",
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default(),
    ))
}

/// Removes the kubeconfigs of the Pod `namespace/name` with `uid` (its
/// tokens stay valid until they expire: nothing else should read them).
pub(super) fn forget(rs: &MetallbRs, namespace: &str, name: &str, uid: &str) {
    let prefix = format!("{namespace}_{name}_{uid}_");
    let Ok(entries) = std::fs::read_dir(&rs.token_dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// How a metallb-rs container's start went.
pub(super) enum Started {
    /// Its process runs (under this supervising task).
    Task(tokio::task::JoinHandle<()>),
    /// It cannot be played, and why.
    Refused(String),
}

/// Starts the lab's metallb-rs binary for `play`'s container: refused
/// for good when the lab cannot play it, an error to retry otherwise.
pub(super) async fn start_container(
    here: &Here<'_>,
    pod: &Pod,
    play: &Played,
    log: Log,
    stopped: tokio::sync::oneshot::Receiver<()>,
) -> Result<Started> {
    let Some(rs) = here.metallb_rs else {
        return Ok(Started::Refused(
            "this node's agent was started without --metallb-rs-binary, so it has no metallb-rs to run".into(),
        ));
    };
    let at = metallb::Placement {
        node: here.node,
        addresses: here.addresses,
    };
    match metallb::process(pod, &play.container, at) {
        Ok(plan) => Ok(Started::Task(
            start(here.client, rs, pod, plan, log, stopped).await?,
        )),
        Err(e) => Ok(Started::Refused(refused(&e))),
    }
}

/// Prepares `process` (its kubeconfig) and returns the task that runs it
/// until `stop` fires or is dropped.
pub(super) async fn start(
    client: &kube::Client,
    rs: &MetallbRs,
    pod: &Pod,
    process: Process,
    log: Log,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> Result<tokio::task::JoinHandle<()>> {
    let mut cmd = std::process::Command::new(&rs.binary);
    // A container's environment is its spec's, not the agent's.
    cmd.env_clear()
        .args(&process.args)
        .envs(process.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(account) = &process.service_account {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let path = kubeconfig_path(rs, pod, &process.container);
        write_kubeconfig(client, rs, ns, account, &path).await?;
        cmd.env("KUBECONFIG", &path);
    }
    log.line(&format!(
        "running {} {}",
        rs.binary.display(),
        process.args.join(" ")
    ));
    Ok(tokio::spawn(supervise(cmd, process.grace, log, stop)))
}

/// A running process, killed when dropped (an aborted task, an agent
/// that stops): a container never outlives what plays its Pod.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// How often a running process is looked at (std's `Child` has no
/// future to await; tokio's `process` feature would rebuild every crate
/// over tokio for this one use).
const POLL: Duration = Duration::from_millis(200);

/// Runs `cmd` again after each exit (1 s, doubling to [`MAX_BACKOFF`])
/// until `stop`; then SIGTERM, and SIGKILL after `grace`.
async fn supervise(
    mut cmd: std::process::Command,
    grace: Duration,
    log: Log,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let started = tokio::time::Instant::now();
        match cmd.spawn() {
            Ok(mut child) => {
                forward(child.stdout.take(), log.clone());
                forward(child.stderr.take(), log.clone());
                let mut child = Guard(child);
                let status = loop {
                    tokio::select! {
                        _ = &mut stop => {
                            terminate(&mut child, grace).await;
                            log.line("stopped");
                            return;
                        }
                        () = tokio::time::sleep(POLL) => {}
                    }
                    match child.0.try_wait() {
                        Ok(Some(status)) => break status.to_string(),
                        Ok(None) => {}
                        Err(e) => break e.to_string(),
                    }
                };
                log.line(&format!("exited ({status}); started again in {backoff:?}"));
            }
            Err(e) => log.line(&format!("cannot start: {e}; trying again in {backoff:?}")),
        }
        // A process that ran a while starts over with a short wait.
        if started.elapsed() > MAX_BACKOFF {
            backoff = Duration::from_secs(1);
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// SIGTERM, then SIGKILL when the process has not exited after `grace`.
async fn terminate(child: &mut Guard, grace: Duration) {
    if let Ok(pid) = i32::try_from(child.0.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let deadline = tokio::time::Instant::now() + grace;
    while matches!(child.0.try_wait(), Ok(None)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Guard's drop kills what is left.
}

/// Copies each line of `out` to `log` until it closes (on a thread of
/// its own: the pipe is a blocking std one).
fn forward(out: Option<impl std::io::Read + Send + 'static>, log: Log) {
    let Some(out) = out else { return };
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines() {
            match line {
                Ok(line) => log.line(&line),
                Err(_) => return,
            }
        }
    });
}

/// What the event of a metallb-rs container says.
pub(super) fn event_message(image: &str, container: &str, rs: &MetallbRs) -> String {
    format!(
        "image {image} is not pulled in the lab: container {container} runs the lab's {} with its arguments and environment",
        rs.binary.display()
    )
}

/// Why a metallb-rs container cannot be played.
fn refused(e: &metallb::ProcessError) -> String {
    format!("the lab cannot run this container: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log of container `c` of a Pod in `dir`, once it holds
    /// `want` (its lines come from reader threads: give them 5 s).
    async fn log_once(dir: &Path, want: &str) -> String {
        let file = lab_apiserver::podlog::path(dir, "n", "p", "u", "c");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if text.contains(want) || std::time::Instant::now() > deadline {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn sh(dir: &Path, script: &str) -> (std::process::Command, Log) {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "p", "namespace": "n", "uid": "u" } }))
        .expect("pod");
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        (cmd, Log::open(dir, &pod, "c"))
    }

    #[tokio::test]
    async fn a_process_that_exits_is_started_again_after_a_backoff() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cmd, log) = sh(dir.path(), "echo started; exit 3");
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(supervise(cmd, Duration::from_secs(1), log, stopped));
        // Started at 0 s and about 1.2 s; the third start would come near 3.4 s.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let _ = stop.send(());
        task.await.expect("supervisor");
        let text = log_once(dir.path(), "exited").await;
        assert_eq!(text.matches("started\n").count(), 2, "{text}");
        assert!(
            text.contains("exited (exit status: 3); started again in 1s"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_stopped_process_gets_sigterm_within_its_grace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cmd, log) = sh(
            dir.path(),
            "trap 'echo terminated; exit 0' TERM; echo up; while :; do sleep 0.05; done",
        );
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(supervise(cmd, Duration::from_secs(3), log, stopped));
        assert!(log_once(dir.path(), "up").await.contains("up"));
        let asked = tokio::time::Instant::now();
        let _ = stop.send(());
        task.await.expect("supervisor");
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "waited out the grace: no SIGTERM"
        );
        let text = log_once(dir.path(), "terminated").await;
        assert!(
            text.contains("terminated") && text.contains("stopped"),
            "{text}"
        );
    }

    #[test]
    fn the_process_kubeconfig_keeps_the_cluster_and_swaps_the_user() {
        let dir = tempfile::tempdir().expect("tempdir");
        let agent = dir.path().join("kubeconfig");
        let endpoint = lab_apiserver::Endpoint {
            url: "https://127.0.0.1:6443".into(),
            ca_pem: "-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n".into(),
        };
        std::fs::write(
            &agent,
            lab_apiserver::kubeconfig(&endpoint, "lab", "admin", "admin-token"),
        )
        .expect("written");
        let text = with_token(&agent, "sa-token").expect("kubeconfig");
        let kc: kube::config::Kubeconfig = serde_yaml::from_str(&text).expect("parses");
        assert_eq!(
            kc.clusters[0]
                .cluster
                .as_ref()
                .and_then(|c| c.server.clone()),
            Some("https://127.0.0.1:6443".to_owned())
        );
        assert!(
            text.contains("sa-token") && !text.contains("admin-token"),
            "{text}"
        );
    }
}
