//! Log setup shared by every subcommand: `tracing` with JSON lines (the
//! in-cluster default, like upstream's go-kit logs) or human text.

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

/// Minimum level logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// Everything, including per-packet detail.
    All,
    /// Debugging detail.
    Debug,
    /// Normal operation (default).
    Info,
    /// Problems that do not stop the component.
    Warn,
    /// Failures.
    Error,
    /// Nothing.
    None,
}

impl LogLevel {
    fn directive(self) -> &'static str {
        match self {
            LogLevel::All => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
            LogLevel::None => "off",
        }
    }
}

/// Installs the global subscriber. `RUST_LOG`, when set, overrides `level`
/// for finer per-module filtering.
pub fn init(format: LogFormat, level: LogLevel) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level.directive()));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only on a terminal: lab and container logs are files.
        .with_ansi(std::io::stderr().is_terminal());
    // A second init (tests) keeps the first subscriber: ignoring is right.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
