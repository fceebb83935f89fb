//! `[telemetry]`: trace export.

use serde::{Deserialize, Serialize};

/// `[telemetry]`: where the gateway's spans go (see [`crate::telemetry::otlp`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP base URL of a collector, e.g. `http://otel-collector:4318`: spans
    /// are sent to `<otlp_endpoint>/v1/traces` (protobuf). Unset (the default): no
    /// export. The `OTEL_EXPORTER_OTLP_*` variables do not enable it; the batch settings
    /// (`OTEL_BSP_*`) apply. Printed (check-config) with any password as `***`.
    #[serde(serialize_with = "masked_opt")]
    pub otlp_endpoint: Option<String>,
    /// The `service.name` resource attribute. Default `a2a-gateway`.
    pub service_name: Option<String>,
}

/// Serializes `otlp_endpoint` with its password and secret-looking query values as
/// `***` ([`super::LogUrl`]).
fn masked_opt<S: serde::Serializer>(url: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match url {
        Some(url) => s.serialize_some(&super::LogUrl(url).to_string()),
        None => s.serialize_none(),
    }
}

impl TelemetryConfig {
    /// Refuses an `otlp_endpoint` that is not an http(s) URL, or holds credentials
    /// (a user name or password: the exporter would send them in the clear to every
    /// collector hop, and they would show wherever the URL is printed), as `serve`
    /// does, so `check-config` refuses it too.
    pub(crate) fn validate(&self) -> Result<(), super::error::Invalid> {
        let Some(endpoint) = self.otlp_endpoint.as_deref().map(str::trim) else {
            return Ok(());
        };
        if endpoint.is_empty() {
            return Ok(());
        }
        let ok = reqwest::Url::parse(endpoint).is_ok_and(|u| {
            matches!(u.scheme(), "http" | "https")
                && u.username().is_empty()
                && u.password().is_none()
        });
        if ok {
            Ok(())
        } else {
            Err(super::error::Invalid::new(
                "telemetry.otlp_endpoint",
                "must be an http:// or https:// URL without credentials",
            ))
        }
    }

    /// `service_name`, or `a2a-gateway`.
    pub fn service_name(&self) -> &str {
        self.service_name
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or("a2a-gateway")
    }
}
