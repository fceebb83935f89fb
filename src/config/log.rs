//! `[log]`: log format and level.

use serde::{Deserialize, Serialize};

use super::error::Invalid;

/// `[log]`: how the gateway writes its logs. `RUST_LOG`, when set, wins over `level`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// Output format. Default `pretty`.
    pub format: LogFormat,
    /// `tracing` filter directive, e.g. `info` or `a2a_gateway=debug,info`. Default `info`.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Pretty,
            level: "info".to_owned(),
        }
    }
}

/// Log output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines for a terminal.
    #[default]
    Pretty,
    /// One JSON object per line, for log collectors.
    Json,
}

impl LogConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        tracing_subscriber::EnvFilter::builder()
            .parse(&self.level)
            .map(drop)
            .map_err(|e| Invalid::new("log.level", format!("not a valid filter directive: {e}")))
    }
}
