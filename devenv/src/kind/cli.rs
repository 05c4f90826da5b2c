//! The `kind` CLI, through duct: the argument lists are pure functions
//! (tested), the runners only execute them and turn failures into errors
//! that say what to do.

use anyhow::{Context, Result, bail};
use std::path::Path;

/// `kind create cluster`: waits up to 5 minutes for the control plane.
pub fn create_args(name: &str, config: &Path) -> Vec<String> {
    vec![
        "create".into(),
        "cluster".into(),
        "--name".into(),
        name.into(),
        "--config".into(),
        config.display().to_string(),
        "--wait".into(),
        "5m".into(),
    ]
}

/// `kind delete cluster`.
pub fn delete_args(name: &str) -> Vec<String> {
    ["delete", "cluster", "--name", name]
        .map(String::from)
        .to_vec()
}

/// `kind get clusters`.
pub fn get_clusters_args() -> Vec<String> {
    ["get", "clusters"].map(String::from).to_vec()
}

/// `kind export kubeconfig` into `path` (the user's own kubeconfig is
/// left alone).
pub fn export_kubeconfig_args(name: &str, path: &Path) -> Vec<String> {
    vec![
        "export".into(),
        "kubeconfig".into(),
        "--name".into(),
        name.into(),
        "--kubeconfig".into(),
        path.display().to_string(),
    ]
}

/// `kind export logs` into `dir` (CI uploads it when a job fails).
pub fn export_logs_args(name: &str, dir: &Path) -> Vec<String> {
    vec![
        "export".into(),
        "logs".into(),
        dir.display().to_string(),
        "--name".into(),
        name.into(),
    ]
}

/// The cluster names `kind get clusters` printed (it prints "No kind
/// clusters found." on stderr when there are none).
pub fn parse_clusters(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether a `kind` binary answers.
pub fn available() -> bool {
    duct::cmd("kind", ["version"])
        .stdout_null()
        .stderr_null()
        .unchecked()
        .run()
        .is_ok_and(|o| o.status.success())
}

/// Fails with what to do when no `kind` binary answers.
pub fn require() -> Result<()> {
    if available() {
        return Ok(());
    }
    bail!(
        "the kind provider needs the `kind` CLI on PATH (https://kind.sigs.k8s.io/docs/user/quick-start/#installation) \
         and a Docker engine; without them use the lab: `sudo -E cargo xtask dev-env --provider lab`"
    )
}

/// Runs `kind args...`, streaming its output; fails naming the command.
pub fn run(args: &[String]) -> Result<()> {
    let shown = format!("kind {}", args.join(" "));
    eprintln!("$ {shown}");
    let status = duct::cmd("kind", args)
        .unchecked()
        .run()
        .with_context(|| format!("could not start `{shown}`: is kind installed?"))?
        .status;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}

/// Runs `kind args...` and returns its stdout.
pub fn read(args: &[String]) -> Result<String> {
    let shown = format!("kind {}", args.join(" "));
    let out = duct::cmd("kind", args)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .with_context(|| format!("could not start `{shown}`: is kind installed?"))?;
    if !out.status.success() {
        bail!(
            "`{shown}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The kind clusters that exist.
pub fn clusters() -> Result<Vec<String>> {
    Ok(parse_clusters(&read(&get_clusters_args())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_lists_are_what_kind_expects() {
        let p = Path::new("/tmp/x/kind-config.yaml");
        assert_eq!(
            create_args("dev", p).join(" "),
            "create cluster --name dev --config /tmp/x/kind-config.yaml --wait 5m"
        );
        assert_eq!(delete_args("dev").join(" "), "delete cluster --name dev");
        assert_eq!(get_clusters_args().join(" "), "get clusters");
        assert_eq!(
            export_kubeconfig_args("dev", Path::new("/s/kubeconfig")).join(" "),
            "export kubeconfig --name dev --kubeconfig /s/kubeconfig"
        );
        assert_eq!(
            export_logs_args("dev", Path::new("/logs")).join(" "),
            "export logs /logs --name dev"
        );
    }

    #[test]
    fn cluster_list_ignores_blank_lines() {
        assert_eq!(parse_clusters("kind\n\n lab2 \n"), ["kind", "lab2"]);
        assert!(parse_clusters("").is_empty());
    }
}
