//! Logging set-up with `tracing`: pretty or JSON lines; `RUST_LOG` overrides the
//! configured level. Submodules: [`tasks`] (task outcome and store write metrics) and
//! [`streams`] (the end of each SSE response stream: its metric and log line), [`trace`]
//! (W3C `traceparent` continued into the upstream call), [`log_url`] (URLs with
//! their secrets hidden, for log lines).

pub mod log_url;
pub mod otlp;
pub mod streams;
pub mod tasks;
pub mod trace;

use std::time::Duration;

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat, TelemetryConfig};

/// Installs the global subscriber. Safe to call more than once (later calls are
/// ignored).
pub fn init(config: &LogConfig) {
    let _ = init_with(config, &TelemetryConfig::default());
}

/// Installs the global subscriber: the log of `config` and, with
/// `telemetry.otlp_endpoint`, the OTLP span export ([`otlp`]). Keep the returned guard
/// until exit: dropping it flushes the spans still queued. Later calls install nothing.
///
/// # Errors
/// A readable reason for an unusable `otlp_endpoint`.
pub fn init_with(
    config: &LogConfig,
    telemetry: &TelemetryConfig,
) -> Result<Option<otlp::OtlpGuard>, String> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.level));
    // Colour only on a terminal: redirected logs stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let fmt = match config.format {
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            // The innermost span's fields once, under `span`; not again under `spans`.
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
        LogFormat::Pretty => fmt.compact().boxed(),
    };
    let (otel, guard) = match telemetry.otlp_endpoint.as_deref().map(str::trim) {
        Some(endpoint) if !endpoint.is_empty() => {
            let (layer, guard) = otlp::layer(endpoint, telemetry.service_name())?;
            (Some(layer), Some(guard))
        }
        _ => (None, None),
    };
    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init()
        .is_ok();
    Ok(guard.filter(|_| installed))
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
