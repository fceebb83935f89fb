//! Logging set-up with `tracing`: pretty or JSON lines; `RUST_LOG` overrides the
//! configured level.

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
            .with_current_span(true)
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
