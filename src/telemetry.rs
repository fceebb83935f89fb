//! Logging set-up with `tracing`: pretty or JSON lines; `RUST_LOG` overrides the
//! configured level. Submodules: [`tasks`] (task outcome and store write metrics) and
//! [`streams`] (the end of each SSE response stream: its metric and log line), [`trace`]
//! (W3C `traceparent` continued into the upstream call).

pub mod streams;
pub mod tasks;
pub mod trace;

use std::time::Duration;

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber. Safe to call more than once (later calls are
/// ignored).
pub fn init(config: &LogConfig) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only on a terminal: redirected logs stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match config.format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            // The innermost span's fields once, under `span`; not again under `spans`.
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Pretty => builder.compact().try_init(),
    };
}

/// A fresh correlation id (12 hex digits). A failure reason shown to a remote caller
/// carries it (see [`with_correlation`]); the log line with the details (URLs,
/// addresses, OS errors, store errors) carries it as `correlation_id`.
pub fn correlation_id() -> String {
    use rand::Rng;
    format!("{:012x}", rand::rng().random::<u64>() & 0xffff_ffff_ffff)
}

/// `reason` as a remote caller sees it: `<reason> [correlation id <id>]`.
pub fn with_correlation(reason: &str, id: &str) -> String {
    format!("{reason} [correlation id {id}]")
}

/// `d` in milliseconds, rounded to the microsecond: the `duration_ms` field of log
/// lines (`12.345`, not `12.345678901`).
pub fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}
