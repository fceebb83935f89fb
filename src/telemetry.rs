//! Logging set-up with `tracing`: pretty or JSON lines; `RUST_LOG` overrides the
//! configured level. Submodules: [`metrics`] (the catalogue of every metric: name, type,
//! description), [`tasks`] (task outcome and store write metrics) and
//! [`streams`] (the end of each SSE response stream: its metric and log line), [`trace`]
//! (W3C `traceparent` continued into the upstream call), and, beside it, [`crate::log_url`]
//! (URLs with their secrets hidden, for log lines and the configuration's own output).

pub mod log_fields;
pub mod metrics;
pub mod otlp;
pub mod streams;
pub mod tasks;
pub mod trace;

use std::sync::Mutex;
use std::time::Duration;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat, TelemetryConfig};

/// Installs the global subscriber. Safe to call more than once (later calls are
/// ignored).
pub fn init(config: &LogConfig) {
    let _ = init_with(config, &TelemetryConfig::default());
}

/// Log lines (formatted on the thread that logs) queued for the writer thread at
/// most: past this, a thread that logs waits for room (no line is dropped). About
/// 2 MB of lines of 250 bytes.
const LOG_QUEUE_LINES: usize = 8192;

/// The log writer thread's buffer in bytes: the lines ready at once go to stderr in
/// one write of up to this size.
const LOG_WRITE_BUFFER: usize = 64 * 1024;

/// The writer thread of the installed log ([`init_with`]); [`flush_log`] stops it.
static LOG_WRITER: Mutex<Option<WorkerGuard>> = Mutex::new(None);

/// Installs the global subscriber: the log of `config` and, with
/// `telemetry.otlp_endpoint`, the OTLP span export ([`otlp`]). Keep the returned guard
/// until exit: dropping it flushes the spans still queued. Later calls install nothing.
///
/// Log lines go to stderr through one writer thread (`tracing-appender`'s
/// non-blocking writer): each line is formatted where it is logged and queued, and the
/// thread writes every line that is ready in one `write` (one system call per line
/// cost a request about 5% of its CPU at 30,000 requests/s; BENCHMARKS.md, issue 14,
/// tenth pass). The queue holds [`LOG_QUEUE_LINES`] lines; a full queue makes the
/// logging thread wait, it never drops a line. Call [`flush_log`] before the process
/// exits, or the last lines may be lost.
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

    // reqwest logs each new connection's URL, user-info password included, at debug:
    // its connector stays at info whatever the level, so no configured URL is printed
    // unmasked (issue 43, item 6).
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(&config.level))
        .add_directive(
            "reqwest::connect=info"
                .parse()
                .expect("a valid static directive"),
        );
    // Colour only on a terminal: redirected logs stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, worker) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .thread_name("a2a-gateway-log")
        .finish(std::io::BufWriter::with_capacity(
            LOG_WRITE_BUFFER,
            std::io::stderr(),
        ));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    let fmt = match config.format {
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            // The innermost span's fields once, under `span`; not again under `spans`.
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
        // Control characters escaped in every field (telemetry::log_fields).
        LogFormat::Pretty => fmt.compact().fmt_fields(log_fields::Escaping).boxed(),
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
    if installed {
        *LOG_WRITER.lock().unwrap_or_else(|p| p.into_inner()) = Some(worker);
    }
    Ok(guard.filter(|_| installed))
}

/// Writes out every log line still queued and stops the log's writer thread (waits
/// up to 1 s for it): call it once, before the process exits. Lines logged after it
/// are not written. Does nothing when [`init_with`] installed no log.
pub fn flush_log() {
    let worker = LOG_WRITER.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(worker);
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

/// `s` cut after `max` characters: a borrowed prefix, for a log field that must stay
/// short (a caller's method name, say) without a copy.
pub fn prefix_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((end, _)) => &s[..end],
        None => s,
    }
}

/// A request log line's `peer` field: the client's address, or `-` when the server
/// did not record it. Formats in place (no `String` per line).
#[derive(Clone, Copy, Debug)]
pub struct LogPeer(pub Option<std::net::SocketAddr>);

impl std::fmt::Display for LogPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(addr) => addr.fmt(f),
            None => f.write_str("-"),
        }
    }
}

/// `d` in milliseconds, rounded to the microsecond: the `duration_ms` field of log
/// lines (`12.345`, not `12.345678901`).
pub fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn log_fields_cut_and_show_what_they_are_given() {
        assert_eq!(super::prefix_chars("SendMessage", 4), "Send");
        assert_eq!(super::prefix_chars("ab", 64), "ab");
        // Cut on a character boundary, counted in characters, not bytes.
        assert_eq!(super::prefix_chars("héllo", 2), "hé");
        assert_eq!(super::LogPeer(None).to_string(), "-");
        let addr: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(super::LogPeer(Some(addr)).to_string(), "127.0.0.1:9");
    }
}
