//! The one error type of config loading, and where a value came from.

use std::fmt;
use std::path::PathBuf;

/// Where a configuration value came from, so an error can point at it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigOrigin {
    /// Nobody set it: the built-in default.
    Default,
    /// The TOML config file, with the 1-based line of the key when known.
    File {
        /// Path of the file as given.
        path: PathBuf,
        /// 1-based line of the key in the file, when it could be located.
        line: Option<usize>,
    },
    /// An environment variable such as `A2A_GATEWAY_SERVER__LISTEN`.
    Env {
        /// The variable's name, as it was set.
        var: String,
    },
    /// A command-line override of a dotted key.
    Override {
        /// The dotted key that was overridden, e.g. `server.listen`.
        key: String,
    },
}

impl fmt::Display for ConfigOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigOrigin::Default => f.write_str("built-in default"),
            ConfigOrigin::File {
                path,
                line: Some(line),
            } => write!(f, "config file {} line {line}", path.display()),
            ConfigOrigin::File { path, line: None } => {
                write!(f, "config file {}", path.display())
            }
            ConfigOrigin::Env { var } => write!(f, "environment variable {var}"),
            ConfigOrigin::Override { key } => write!(f, "command-line override of {key}"),
        }
    }
}

/// A configuration that cannot be used. `Display` is one line that names the key and where
/// its value came from; secrets are never part of it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A key has a value (or lacks one) that the gateway refuses.
    #[error("invalid configuration: `{key}` ({origin}): {message}")]
    Invalid {
        /// Dotted key, e.g. `upstream.connect_timeout_secs`.
        key: String,
        /// Where the offending value came from.
        origin: ConfigOrigin,
        /// What is wrong, and what would be accepted.
        message: String,
    },
    /// The config file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    ReadFile {
        /// Path of the file as given.
        path: PathBuf,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The config file is not valid TOML.
    #[error("config file {} line {line}, column {column} is not valid TOML: {message}", path.display())]
    Syntax {
        /// Path of the file as given.
        path: PathBuf,
        /// 1-based line of the syntax error.
        line: usize,
        /// 1-based column of the syntax error.
        column: usize,
        /// The parser's description.
        message: String,
    },
    /// An upstream URL was asked for, but neither `upstream.url` nor
    /// `upstream.agent_runtime_arn` is set.
    #[error(
        "no upstream configured: set `upstream.agent_runtime_arn` (AgentCore) or `upstream.url` (a full invocation URL)"
    )]
    NoUpstream,
    /// The stop-session URL was asked for, but `upstream.url` does not end in `/invocations`
    /// (load refuses that unless `upstream.stop_session_on_cancel = false`).
    #[error("cannot derive the stop-session URL: `upstream.url` does not end in /invocations")]
    NoStopSessionUrl,
}

/// A validation failure before its origin is known: the loader attaches the origin.
#[derive(Debug)]
pub(crate) struct Invalid {
    /// Dotted key named in the message.
    pub(crate) key: String,
    /// Dotted key whose origin is reported (usually `key`; for "X is required when Y" it is Y).
    pub(crate) origin_key: String,
    /// What is wrong.
    pub(crate) message: String,
}

impl Invalid {
    /// A failure of `key` itself.
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        let key = key.into();
        Invalid {
            origin_key: key.clone(),
            key,
            message: message.into(),
        }
    }

    /// A failure of `key`, caused by the value of `origin_key` (e.g. a required key missing
    /// because of a chosen kind).
    pub(crate) fn because_of(
        key: impl Into<String>,
        origin_key: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Invalid {
            key: key.into(),
            origin_key: origin_key.into(),
            message: message.into(),
        }
    }
}

/// Refuses a zero value for a duration or limit key.
pub(crate) fn nonzero(key: &str, value: u64) -> Result<(), Invalid> {
    if value == 0 {
        Err(Invalid::new(key, "must be greater than 0"))
    } else {
        Ok(())
    }
}
