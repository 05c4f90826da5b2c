//! The `metallb-rs` binary: one static executable, one subcommand per
//! component, so a single image serves the controller Deployment and the
//! speaker DaemonSet.

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use metallb_rs::logging::{self, LogFormat, LogLevel};
use std::path::PathBuf;
use std::process::ExitCode;

/// MetalLB-compatible load balancer for bare-metal Kubernetes.
#[derive(Parser, Debug)]
#[command(name = "metallb-rs", version, propagate_version = true)]
struct Cli {
    /// Log line format: JSON (the default, as in-cluster) or human text
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "json",
        env = "METALLB_LOG_FORMAT"
    )]
    log_format: LogFormat,
    /// Minimum level logged (RUST_LOG overrides it)
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "info",
        env = "METALLB_LOG_LEVEL"
    )]
    log_level: LogLevel,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Assign IPs from IPAddressPools to LoadBalancer services
    Controller(ControllerArgs),
    /// Announce service IPs from this node (layer 2 and BGP)
    Speaker(SpeakerArgs),
    /// Check MetalLB YAML offline: every error with its object and field
    Validate(ValidateArgs),
    /// Show each LoadBalancer service's IPs, pool, and the node(s) announcing it
    Status(StatusArgs),
    /// Wait for SIGTERM or SIGINT, then exit 0: the process of test containers
    /// of the image, which has no shell and no sleep
    #[command(hide = true)]
    Pause,
}

#[derive(Args, Debug)]
struct StatusArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Only services of this namespace (default: all namespaces)
    #[arg(short = 'n', long = "service-namespace")]
    service_namespace: Option<String>,
    /// Only this service (name, or namespace/name)
    service: Option<String>,
}

#[derive(Args, Debug)]
struct CommonArgs {
    /// Namespace holding the MetalLB configuration
    #[arg(long, env = "METALLB_NAMESPACE", default_value = metallb_rs::api::DEFAULT_NAMESPACE)]
    namespace: String,
}

/// The metrics listeners and the TLS policy of every HTTPS server.
#[derive(Args, Debug)]
struct MetricsArgs {
    /// Where to serve Prometheus metrics (/metrics) over HTTPS, to clients the API server authenticates and authorizes (get on the non-resource URL /metrics)
    #[arg(long, default_value = "0.0.0.0:9120")]
    metrics_bind_address: std::net::SocketAddr,
    /// Also serve /metrics over plain HTTP without authentication, on this loopback address (off by default)
    #[arg(long)]
    insecure_metrics_bind_address: Option<std::net::SocketAddr>,
    /// Directory holding tls.crt and tls.key for the metrics server (default: a self-signed certificate made at start)
    #[arg(long)]
    metrics_cert_dir: Option<PathBuf>,
    /// Oldest TLS version served (metrics and webhooks): VersionTLS12 or VersionTLS13 (empty: VersionTLS13)
    #[arg(long, default_value = "")]
    tls_min_version: String,
    /// TLS 1.2 cipher suites, comma-separated Go/IANA names (needs --tls-min-version VersionTLS12)
    #[arg(long, value_delimiter = ',')]
    tls_cipher_suites: Vec<String>,
    /// Key exchange curves in preference order, comma-separated: X25519, CurveP256, CurveP384
    #[arg(long, value_delimiter = ',')]
    tls_curve_preferences: Vec<String>,
}

impl MetricsArgs {
    /// The serving plan, checked: a bad flag is an error naming it,
    /// before anything starts.
    fn serving(self, health: std::net::SocketAddr) -> Result<metallb_rs::metrics::Serving> {
        use metallb_rs::tls::policy::{TlsFlags, decide};
        let tls = decide(&TlsFlags {
            min_version: self.tls_min_version,
            cipher_suites: self.tls_cipher_suites,
            curve_preferences: self.tls_curve_preferences,
        })?;
        let serving = metallb_rs::metrics::Serving {
            secure: Some(self.metrics_bind_address),
            insecure: self.insecure_metrics_bind_address,
            health: Some(health),
            tls,
            cert_dir: self.metrics_cert_dir.filter(|d| !d.as_os_str().is_empty()),
        };
        serving.listeners()?;
        Ok(serving)
    }
}

#[derive(Args, Debug)]
struct ControllerArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Elect one active controller through a coordination.k8s.io Lease
    #[arg(long)]
    leader_elect: bool,
    /// Only handle services with this spec.loadBalancerClass (default: services without one)
    #[arg(long)]
    lb_class: Option<String>,
    #[command(flatten)]
    metrics: MetricsArgs,
    /// Where to serve the probes (/healthz, /readyz), plain HTTP
    #[arg(long, default_value = "0.0.0.0:17472")]
    health_bind_address: std::net::SocketAddr,
    /// Create this Secret (the speakers' gossip key) when it is missing
    #[arg(long, env = "METALLB_ML_SECRET_NAME")]
    ml_secret_name: Option<String>,
    /// Validating webhooks: served beside the controller (enabled), not at all (disabled), or alone (onlywebhook: no service or pool handling)
    #[arg(long, value_enum, default_value_t = WebhookMode::Enabled)]
    webhook_mode: WebhookMode,
    /// Where to serve the validating webhooks (HTTPS)
    #[arg(long, default_value_t = std::net::SocketAddr::from(([0, 0, 0, 0], metallb_rs::k8s::webhook::PORT)))]
    webhook_bind_address: std::net::SocketAddr,
    /// The Secret holding the webhooks' serving certificate (made and renewed by the controller)
    #[arg(long, default_value = metallb_rs::k8s::webhook::SECRET)]
    webhook_secret: String,
    /// The webhooks' Service: the certificate is for <name>.<namespace>.svc
    #[arg(long, default_value = metallb_rs::k8s::webhook::SERVICE)]
    cert_service_name: String,
}

/// `--webhook-mode`, upstream's values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum WebhookMode {
    Enabled,
    Disabled,
    Onlywebhook,
}

#[derive(Args, Debug)]
struct SpeakerArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Name of the node this speaker runs on
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    /// Only handle services with this spec.loadBalancerClass (default: services without one)
    #[arg(long)]
    lb_class: Option<String>,
    /// Announce from nodes labelled node.kubernetes.io/exclude-from-external-load-balancers too
    #[arg(long)]
    ignore_exclude_lb: bool,
    #[command(flatten)]
    metrics: MetricsArgs,
    /// Where to serve the probes (/healthz, /readyz), plain HTTP; the node's loopback, as upstream
    #[arg(long, default_value = "127.0.0.1:17472")]
    health_bind_address: std::net::SocketAddr,
    /// The speaker Pod's name (owner of its ServiceL2Status objects)
    #[arg(long, env = "POD_NAME")]
    pod_name: Option<String>,
    /// Gossip membership: the address to gossip on (the node's); membership is off without it
    #[arg(long, env = "METALLB_ML_BIND_ADDR")]
    ml_bindaddr: Option<std::net::IpAddr>,
    /// Gossip port (UDP)
    #[arg(long, env = "METALLB_ML_BIND_PORT", default_value_t = metallb_rs::speaker::membership::DEFAULT_PORT)]
    ml_bindport: u16,
    /// Accepted for compatibility with upstream's manifests; members are found from the Nodes' InternalIPs
    #[arg(long, env = "METALLB_ML_LABELS")]
    ml_labels: Option<String>,
    /// File holding the gossip key (the mounted memberlist Secret); read from the API when absent
    #[arg(long, env = "METALLB_ML_SECRET_KEY_PATH")]
    ml_secret_key_path: Option<PathBuf>,
    /// The Secret holding the gossip key (key `secretkey`)
    #[arg(long, env = "METALLB_ML_SECRET_NAME", default_value = metallb_rs::k8s::memberlist::DEFAULT_SECRET_NAME)]
    ml_secret_name: String,
    /// Gossip probe period in milliseconds (detection is a few periods; see `membership::Timing`)
    #[arg(long, env = "METALLB_ML_PROBE_PERIOD_MS")]
    ml_probe_period_ms: Option<u64>,
    /// Milliseconds a suspected member has to refute before it is declared down
    #[arg(long, env = "METALLB_ML_SUSPECT_TIMEOUT_MS")]
    ml_suspect_timeout_ms: Option<u64>,
}

#[derive(Args, Debug)]
struct ValidateArgs {
    /// YAML files or directories (searched for *.yaml, *.yml, *.json)
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// The MetalLB namespace objects must be in
    #[arg(long, default_value = metallb_rs::api::DEFAULT_NAMESPACE)]
    namespace: String,
    /// Fail on warnings too (what the components ignore, such as an
    /// advertisement naming a pool that does not exist)
    #[arg(long)]
    strict: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `validate` is a user-facing tool: human text unless asked otherwise.
    let format = match (&cli.command, std::env::var_os("METALLB_LOG_FORMAT")) {
        (Command::Validate(_) | Command::Status(_), None) => LogFormat::Text,
        _ => cli.log_format,
    };
    logging::init(format, cli.log_level);
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command) -> Result<ExitCode> {
    match command {
        #[cfg(feature = "validate")]
        Command::Validate(args) => Ok(validate(&args)),
        #[cfg(not(feature = "validate"))]
        Command::Validate(_) => anyhow::bail!(
            "this metallb-rs was built without `validate` (the image leaves it out): \
             run `cargo run -p metallb-rs -- validate` from a checkout, or a binary built \
             with the default features"
        ),
        Command::Controller(args) => controller(args),
        Command::Speaker(args) => speaker(args),
        Command::Status(args) => status(args),
        Command::Pause => run_component("pause", Threads::One, |shutdown| async move {
            tracing::info!("pausing until SIGTERM or SIGINT");
            shutdown.await;
            Ok(())
        }),
    }
}

fn status(args: StatusArgs) -> Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (ns_filter, name_filter) = match args.service.as_deref().map(|s| s.split_once('/')) {
        Some(Some((ns, name))) => (Some(ns.to_owned()), Some(name.to_owned())),
        Some(None) => (args.service_namespace.clone(), args.service.clone()),
        None => (args.service_namespace.clone(), None),
    };
    let rows = rt.block_on(async {
        let client = metallb_rs::k8s::client().await?;
        // Ten list calls: a hung API server ends the command with an
        // error instead of leaving it waiting.
        let fetch =
            metallb_rs::report::fetch(&client, &args.common.namespace, ns_filter.as_deref());
        let rows = tokio::time::timeout(std::time::Duration::from_secs(30), fetch)
            .await
            .map_err(|_| anyhow::anyhow!("reading the cluster timed out after 30 s"))??;
        anyhow::Ok(rows)
    })?;
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|r| name_filter.as_ref().is_none_or(|n| r.service.name == *n))
        .collect();
    if rows.is_empty() {
        eprintln!("no LoadBalancer service found");
        return Ok(ExitCode::from(1));
    }
    print!("{}", metallb_rs::report::render(&rows));
    Ok(ExitCode::SUCCESS)
}

/// Resolves when SIGTERM or SIGINT arrives. The handlers are installed
/// before this returns, so a signal sent after the first log line is never
/// lost.
fn shutdown_signal() -> Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::info!("signal received, stopping");
    })
}

/// The threads a component's runtime gets.
#[derive(Debug, Clone, Copy)]
enum Threads {
    /// Everything on the calling thread.
    One,
    /// The component's own future on the calling thread, and every task
    /// it spawns on this many workers: a long pass of the loop never
    /// delays what runs beside it.
    Workers(usize),
}

/// The speaker's workers: its ARP/NDP responders, gossip, presence
/// renewal and watches run there, beside the loop, which runs on the main
/// thread. Fixed rather than one per core, so a big node does not pay a
/// stack per core.
const SPEAKER_WORKERS: usize = 2;

/// Runs a long-lived component: the signal handlers are installed before
/// `start` logs, so a signal sent after the first log line is never lost;
/// `start` gets the shutdown future.
fn run_component<F, Fut>(name: &str, threads: Threads, start: F) -> Result<ExitCode>
where
    F: FnOnce(std::pin::Pin<Box<dyn Future<Output = ()>>>) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let rt = match threads {
        Threads::One => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        Threads::Workers(n) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build()?,
    };
    rt.block_on(async {
        let shutdown = shutdown_signal()?;
        start(Box::pin(shutdown)).await
    })?;
    tracing::info!("{name} stopped");
    Ok(ExitCode::SUCCESS)
}

fn controller(args: ControllerArgs) -> Result<ExitCode> {
    let serving = args.metrics.serving(args.health_bind_address)?;
    let webhooks = {
        use metallb_rs::controller::run::Webhooks;
        let mut w = metallb_rs::k8s::webhook::Options::new(
            args.webhook_bind_address,
            &args.common.namespace,
        );
        w.secret = args.webhook_secret;
        w.service = args.cert_service_name;
        match args.webhook_mode {
            WebhookMode::Enabled => Webhooks::Enabled(w),
            WebhookMode::Disabled => Webhooks::Disabled,
            WebhookMode::Onlywebhook => Webhooks::Only(w),
        }
    };
    let opts = metallb_rs::controller::run::Options {
        namespace: args.common.namespace,
        lb_class: args.lb_class,
        leader_elect: args.leader_elect,
        identity: metallb_rs::k8s::identity(),
        lease: metallb_rs::k8s::leader::Timings::default(),
        serving,
        memberlist_secret: args.ml_secret_name.filter(|n| !n.is_empty()),
        webhooks,
    };
    // Webhook tasks run on a worker, so a long pass of the controller's
    // loop (on the main thread) never delays an answer to the API server.
    let threads = match opts.webhooks {
        metallb_rs::controller::run::Webhooks::Disabled => Threads::One,
        _ => Threads::Workers(1),
    };
    run_component("controller", threads, |shutdown| async move {
        tracing::info!(namespace = %opts.namespace, leader_elect = opts.leader_elect, lb_class = ?opts.lb_class, identity = %opts.identity, version = env!("CARGO_PKG_VERSION"), "controller starting");
        let client = metallb_rs::k8s::client().await?;
        metallb_rs::controller::run::run(client, opts, shutdown).await
    })
}

fn speaker(args: SpeakerArgs) -> Result<ExitCode> {
    let serving = args.metrics.serving(args.health_bind_address)?;
    if let Some(labels) = &args.ml_labels {
        eprintln!(
            "note: --ml-labels {labels:?} is accepted for upstream compatibility; gossip members are found from the Nodes' InternalIPs"
        );
    }
    let opts = metallb_rs::speaker::run::Options {
        namespace: args.common.namespace,
        node: args.node_name,
        lb_class: args.lb_class,
        ignore_exclude_lb: args.ignore_exclude_lb,
        serving,
        pod_name: args.pod_name.filter(|p| !p.is_empty()),
        rescan: std::time::Duration::from_secs(10),
        membership: args.ml_bindaddr.map(|ip| {
            let mut timing = metallb_rs::speaker::membership::Timing::default();
            if let Some(ms) = args.ml_probe_period_ms {
                timing.probe_period = std::time::Duration::from_millis(ms);
            }
            if let Some(ms) = args.ml_suspect_timeout_ms {
                timing.suspect_to_down_after = std::time::Duration::from_millis(ms);
            }
            metallb_rs::speaker::run::MembershipOptions {
                bind: std::net::SocketAddr::new(ip, args.ml_bindport),
                secret_path: args.ml_secret_key_path,
                secret_name: args.ml_secret_name,
                timing,
            }
        }),
    };
    run_component(
        "speaker",
        Threads::Workers(SPEAKER_WORKERS),
        |shutdown| async move {
            tracing::info!(namespace = %opts.namespace, node = %opts.node, lb_class = ?opts.lb_class, ignore_exclude_lb = opts.ignore_exclude_lb, version = env!("CARGO_PKG_VERSION"), "speaker starting");
            let client = metallb_rs::k8s::client().await?;
            metallb_rs::speaker::run::run(client, opts, shutdown).await
        },
    )
}

#[cfg(feature = "validate")]
fn validate(args: &ValidateArgs) -> ExitCode {
    use metallb_rs::config::{self, Config, Options};
    let loaded = config::load::load_paths(&args.files);
    let mut problems: Vec<String> = loaded
        .errors
        .iter()
        .map(|(path, e)| format!("{}: {e}", path.display()))
        .collect();
    let opts = Options {
        namespace: args.namespace.clone(),
    };
    let res = &loaded.resources;
    let objects = res.pools.len()
        + res.l2_advertisements.len()
        + res.bgp_advertisements.len()
        + res.peers.len()
        + res.bfd_profiles.len()
        + res.communities.len();
    let origin = |e: &config::ConfigError| {
        loaded
            .origins
            .get(&(e.object.kind.clone(), e.object.name.clone()))
            .map(|p| format!("{}: ", p.display()))
            .unwrap_or_default()
    };
    let mut warnings = Vec::new();
    match Config::build(res, &opts) {
        Ok(c) => warnings.extend(
            c.warnings
                .iter()
                .map(|w| format!("{}warning: {w}", origin(w))),
        ),
        Err(errors) => problems.extend(errors.0.iter().map(|e| format!("{}{e}", origin(e)))),
    }
    for line in problems.iter().chain(&warnings) {
        println!("{line}");
    }
    if !problems.is_empty() {
        eprintln!("invalid: {} error(s)", problems.len());
        return ExitCode::from(1);
    }
    if args.strict && !warnings.is_empty() {
        eprintln!("invalid (--strict): {} warning(s)", warnings.len());
        return ExitCode::from(1);
    }
    println!(
        "valid: {objects} MetalLB object(s), {} other document(s) ignored, {} warning(s)",
        loaded.skipped,
        warnings.len()
    );
    ExitCode::SUCCESS
}
