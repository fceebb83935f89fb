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

/// The levels `log.level` takes alone or as a directive's default.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

impl LogConfig {
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        // A bare word is a target to `tracing` ("verbose" would log only that target,
        // that is nothing): here it must be a level.
        for directive in self.level.split(',').map(str::trim) {
            if !directive.is_empty()
                && !directive.contains(['=', '[', ':'])
                && !LEVELS.contains(&directive)
            {
                return Err(Invalid::new(
                    "log.level",
                    format!(
                        "{directive:?} is not a level: use one of {} (lowercase), or \
                         TARGET=LEVEL for one target",
                        LEVELS.join(", ")
                    ),
                ));
            }
        }
        tracing_subscriber::EnvFilter::builder()
            .parse(&self.level)
            .map(drop)
            .map_err(|e| Invalid::new("log.level", format!("not a valid filter directive: {e}")))
    }
}
