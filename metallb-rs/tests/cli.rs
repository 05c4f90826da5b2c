//! The `metallb-rs` binary as users run it.

use std::path::Path;
use std::process::{Command, Output};

fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_metallb-rs"));
    cmd.env_remove("RUST_LOG").env_remove("METALLB_LOG_FORMAT");
    cmd
}

fn samples(dir: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/samples")
        .join(dir)
        .display()
        .to_string()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn validate_accepts_a_valid_directory() {
    let out = bin()
        .args(["validate", "-f", &samples("valid")])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).starts_with("valid: "), "{}", stdout(&out));
}

#[test]
fn validate_reports_each_bad_sample_with_its_field_path() {
    let dir = samples("invalid");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        let field = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# schema-error: "))
            .expect("expectation line");
        let out = bin()
            .args(["validate", "-f"])
            .arg(&file)
            .output()
            .expect("runs");
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: {}",
            file.display(),
            stdout(&out)
        );
        let needle = format!(": {field}: ");
        assert!(
            stdout(&out)
                .lines()
                .any(|l| l.starts_with(&file.display().to_string()) && l.contains(&needle)),
            "{}: no line naming {field:?}:\n{}",
            file.display(),
            stdout(&out)
        );
    }
}

#[test]
fn validate_prints_every_config_error_and_exits_1() {
    let dir = std::env::temp_dir().join(format!("metallb-rs-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: a, namespace: metallb-system}\nspec: {addresses: [10.0.0.0/33, 10.1.0.0/24]}\n---\napiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: b, namespace: metallb-system}\nspec: {addresses: [10.1.0.128/25]}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l2, namespace: metallb-system}\nspec: {ipAddressPools: [c]}\n",
    )
    .expect("write");
    let out = bin()
        .args(["validate", "-f"])
        .arg(&file)
        .output()
        .expect("runs");
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with(&file.display().to_string())),
        "{text}"
    );
    assert!(
        text.contains(
            r#"ipaddresspool "metallb-system/a": spec.addresses[0] "10.0.0.0/33": invalid CIDR"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"ipaddresspool "metallb-system/b": spec.addresses[0] "10.1.0.128/25": overlaps with "10.1.0.0/24""#), "{text}");
}

/// An advertisement naming a pool that does not exist: upstream skips the
/// name and the configuration stays valid, so this is a warning, fatal
/// only with --strict.
#[test]
fn validate_warns_about_a_missing_pool_and_fails_only_when_strict() {
    let dir = std::env::temp_dir().join(format!("metallb-rs-cli-warn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let file = dir.join("warn.yaml");
    std::fs::write(
        &file,
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: a, namespace: metallb-system}\nspec: {addresses: [10.1.0.0/24]}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l2, namespace: metallb-system}\nspec: {ipAddressPools: [a, c]}\n",
    )
    .expect("write");
    let run = |strict: bool| {
        let mut cmd = bin();
        cmd.args(["validate", "-f"]).arg(&file);
        if strict {
            cmd.arg("--strict");
        }
        cmd.output().expect("runs")
    };
    let (lenient, strict) = (run(false), run(true));
    std::fs::remove_dir_all(&dir).ok();
    let warning = format!(
        r#"{}: warning: l2advertisement "metallb-system/l2": spec.ipAddressPools[1]: ipaddresspool "c" does not exist and is ignored"#,
        file.display()
    );
    assert_eq!(lenient.status.code(), Some(0), "{}", stdout(&lenient));
    assert!(
        stdout(&lenient).lines().any(|l| l.starts_with(&warning)),
        "{}",
        stdout(&lenient)
    );
    assert!(
        stdout(&lenient).contains("valid: 2 MetalLB object(s)"),
        "{}",
        stdout(&lenient)
    );
    assert_eq!(strict.status.code(), Some(1), "{}", stdout(&strict));
    assert!(
        stdout(&strict).lines().any(|l| l.starts_with(&warning)),
        "{}",
        stdout(&strict)
    );
    assert!(String::from_utf8_lossy(&strict.stderr).contains("--strict"));
}

#[test]
fn validate_names_a_missing_file() {
    let out = bin()
        .args(["validate", "-f", "/nonexistent/metallb.yaml"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("/nonexistent/metallb.yaml") && stdout(&out).contains("cannot read"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn version_and_help_on_every_subcommand() {
    let out = bin().arg("--version").output().expect("runs");
    assert_eq!(
        stdout(&out).trim(),
        format!("metallb-rs {}", env!("CARGO_PKG_VERSION"))
    );
    for sub in ["controller", "speaker", "validate"] {
        let out = bin().args([sub, "--help"]).output().expect("runs");
        assert!(
            out.status.success() && stdout(&out).contains("Usage: metallb-rs"),
            "{sub}: {}",
            stdout(&out)
        );
    }
}

#[test]
fn speaker_requires_a_node_name() {
    let out = bin()
        .arg("speaker")
        .env_remove("NODE_NAME")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--node-name"));
}

/// A kubeconfig for an API server that does not answer: components must
/// keep retrying (not exit) and still stop cleanly on SIGTERM.
fn unreachable_kubeconfig() -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("metallb-rs-cli-{}.kubeconfig", std::process::id()));
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n",
    )
    .expect("write kubeconfig");
    path
}

#[test]
fn components_log_json_and_stop_on_sigterm() {
    let kubeconfig = unreachable_kubeconfig();
    let free_ports = [
        "--metrics-bind-address",
        "127.0.0.1:0",
        "--health-bind-address",
        "127.0.0.1:0",
    ];
    for (sub, extra) in [
        ("controller", {
            let mut v = vec!["--webhook-bind-address", "127.0.0.1:0"];
            v.extend(free_ports);
            v
        }),
        ("speaker", {
            let mut v = vec!["--node-name", "worker"];
            v.extend(free_ports);
            v
        }),
    ] {
        let mut child = bin()
            .arg(sub)
            .args(&extra)
            .env("KUBECONFIG", &kubeconfig)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawns");
        // Wait for the startup line, then ask it to stop.
        let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
        let mut first = String::new();
        std::io::BufRead::read_line(&mut stderr, &mut first).expect("reads");
        let line: serde_json::Value = serde_json::from_str(&first)
            .unwrap_or_else(|e| panic!("{sub}: not JSON ({e}): {first}"));
        assert_eq!(line["message"], format!("{sub} starting"));
        assert_eq!(line["level"], "INFO");
        let killed = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        let status = child.wait().expect("exits");
        assert!(status.success(), "{sub} exited {status}");
    }
}

#[test]
fn controller_without_any_kubeconfig_says_what_to_do() {
    let out = bin()
        .args([
            "controller",
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-bind-address",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("set KUBECONFIG, or run in a pod"),
        "{stderr}"
    );
}

#[test]
fn pause_is_hidden_and_exits_zero_on_sigterm() {
    let help = bin().arg("--help").output().expect("runs");
    assert!(!stdout(&help).contains("pause"), "{}", stdout(&help));

    let mut child = bin()
        .arg("pause")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    // The first log line comes after the signal handlers are installed.
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).expect("a log line");
    assert!(line.contains("pausing until SIGTERM"), "{line}");
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success(), "{kill}");
    let status = child.wait().expect("exits");
    assert!(status.success(), "{status}");
}

/// A bad metrics or TLS flag stops the component before it starts
/// (exit 2), naming the flag, the value and what to use.
#[test]
fn bad_metrics_and_tls_flags_are_refused_before_starting() {
    for (args, want) in [
        (
            vec!["controller", "--tls-min-version", "VersionTLS10"],
            "--tls-min-version \"VersionTLS10\": rustls offers TLS 1.2 and 1.3 only (use VersionTLS12 or VersionTLS13)",
        ),
        (
            vec![
                "speaker",
                "--node-name",
                "w",
                "--tls-cipher-suites",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            ],
            "cipher suites cannot be configured with TLS 1.3 (add --tls-min-version VersionTLS12",
        ),
        (
            vec![
                "controller",
                "--tls-min-version",
                "VersionTLS12",
                "--tls-cipher-suites",
                "TLS_RSA_WITH_AES_128_CBC_SHA,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            ],
            "--tls-cipher-suites \"TLS_RSA_WITH_AES_128_CBC_SHA\": not a TLS 1.2 suite rustls offers",
        ),
        (
            vec!["controller", "--tls-curve-preferences", "CurveP521"],
            "--tls-curve-preferences \"CurveP521\": not a curve rustls offers",
        ),
        (
            vec![
                "controller",
                "--insecure-metrics-bind-address",
                "0.0.0.0:9121",
            ],
            "--insecure-metrics-bind-address 0.0.0.0:9121: unauthenticated plain-HTTP metrics are served on loopback only",
        ),
        (
            vec![
                "speaker",
                "--node-name",
                "w",
                "--metrics-bind-address",
                "127.0.0.1:9555",
                "--health-bind-address",
                "127.0.0.1:9555",
            ],
            "--metrics-bind-address and --health-bind-address are both 127.0.0.1:9555: metrics are served over HTTPS and the probes over plain HTTP",
        ),
    ] {
        let out = bin()
            .args(&args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("starting"), "{args:?} started: {stderr}");
    }
}
