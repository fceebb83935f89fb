//! OTLP trace export (`[telemetry] otlp_endpoint`): the gateway's `tracing` spans become
//! OpenTelemetry spans (through `tracing-opentelemetry`) sent over OTLP/HTTP with
//! protobuf bodies to `<otlp_endpoint>/v1/traces` by a batch processor on its own thread.
//!
//! The spans: `a2a.operation` (one per A2A request, the handler operation; `rpc.method`),
//! `upstream` (one message's run against the runtime; `task.id`, `context.id`,
//! `upstream.session`), `upstream.attempt` (each invocation attempt; `attempt`,
//! `http.status_code`), `upstream.token_fetch` (each token endpoint call) and
//! `store.write` (each task-log write; `task.id`, `events`). An inbound `traceparent`
//! is their parent, and each attempt's `traceparent` to the runtime names the attempt
//! span, so the runtime's own spans join the trace. No span carries a token, a secret, a
//! message's text or a URL with credentials: attributes are ids, names and numbers.

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::trace::TraceParent;

/// The running exporter; [`OtlpGuard::shutdown`] (or dropping it) flushes the spans
/// still queued.
#[derive(Debug)]
pub struct OtlpGuard(SdkTracerProvider);

impl OtlpGuard {
    /// Flushes and stops the exporter (waits for the last batch, bounded by the
    /// exporter's timeout).
    pub fn shutdown(&self) {
        let _ = self.0.force_flush();
        let _ = self.0.shutdown();
    }
}

impl Drop for OtlpGuard {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The traces URL for `endpoint` (the collector's OTLP/HTTP base URL, as
/// `OTEL_EXPORTER_OTLP_ENDPOINT`): `<endpoint>/v1/traces`, unless it names that path.
pub fn traces_url(endpoint: &str) -> String {
    let e = endpoint.trim().trim_end_matches('/');
    if e.ends_with("/v1/traces") {
        e.to_owned()
    } else {
        format!("{e}/v1/traces")
    }
}

/// Builds the exporter for `endpoint` and the `tracing` layer that feeds it.
///
/// # Errors
/// A readable reason when `endpoint` is not an `http://` or `https://` URL or the
/// exporter cannot be built.
pub fn layer<S>(
    endpoint: &str,
    service_name: &str,
) -> Result<(impl tracing_subscriber::Layer<S>, OtlpGuard), String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let url = traces_url(endpoint);
    let parsed = reqwest::Url::parse(&url)
        .map_err(|e| format!("telemetry.otlp_endpoint is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || !parsed.username().is_empty() {
        return Err(
            "telemetry.otlp_endpoint must be an http:// or https:// URL without credentials".into(),
        );
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(std::time::Duration::from_secs(10))
        .with_headers(Default::default())
        .build()
        .map_err(|e| format!("telemetry.otlp_endpoint: cannot build the OTLP exporter: {e}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(service_name.to_owned())
                .build(),
        )
        .build();
    let tracer = provider.tracer("a2a-gateway");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false);
    Ok((layer, OtlpGuard(provider)))
}

/// Makes the inbound `traceparent` the parent of `span` (no-op without export or
/// without one).
pub fn adopt(span: &tracing::Span, inbound: Option<&TraceParent>) {
    let Some(tp) = inbound else { return };
    let (Ok(trace), Ok(parent)) = (
        TraceId::from_hex(&tp.trace_id),
        SpanId::from_hex(&tp.parent_id),
    ) else {
        return;
    };
    let flags = u8::from_str_radix(&tp.flags, 16).unwrap_or(1);
    let remote = SpanContext::new(
        trace,
        parent,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
}

/// The `traceparent` naming `span` itself, when spans are exported (its trace and
/// span ids); `None` otherwise.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}
