//! `[telemetry]`: trace export.

use serde::{Deserialize, Serialize};

/// `[telemetry]`: where the gateway's spans go (see [`crate::telemetry::otlp`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP base URL of a collector, e.g. `http://otel-collector:4318`: spans
    /// are sent to `<otlp_endpoint>/v1/traces` (protobuf). Unset (the default): no
    /// export. The `OTEL_EXPORTER_OTLP_*` variables do not enable it; the batch settings
    /// (`OTEL_BSP_*`) apply.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` resource attribute. Default `a2a-gateway`.
    pub service_name: Option<String>,
}

impl TelemetryConfig {
    /// `service_name`, or `a2a-gateway`.
    pub fn service_name(&self) -> &str {
        self.service_name
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or("a2a-gateway")
    }
}
