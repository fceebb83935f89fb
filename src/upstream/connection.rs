//! [`ConnectionSettings`]: how the gateway reaches a runtime over HTTP, the part of a
//! kind's settings every kind shares (the "shared HTTP section" of `[upstream]`: HTTP
//! version, extra roots, per-phase timeouts, size limits, retries, identity headers,
//! authentication). Each kind's settings hold one ([`AgentCoreSettings`](super::AgentCoreSettings),
//! [`A2aSettings`](super::a2a::A2aSettings)); the gateway's `app` converts the shared
//! `[upstream]` keys into it once for every kind.

use std::path::PathBuf;
use std::time::Duration;

use crate::upstream::auth::AuthSettings;
use crate::upstream::http::HttpVersion;

/// The runtime-independent HTTP settings of an upstream. All durations are exact (the
/// config's `*_secs` keys are whole seconds; tests use milliseconds). [`Default`] gives
/// the defaults of `[upstream]`.
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// HTTP version policy. Default [`HttpVersion::Auto`].
    pub http_version: HttpVersion,
    /// A PEM file of extra root certificates for the runtime and the token endpoint
    /// (added to the built-in web PKI roots). Default none.
    pub ca_file: Option<PathBuf>,
    /// Longest time to open a TCP + TLS connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Longest silence between reply bytes, including the wait for the reply headers
    /// after the request was sent. Default 900 s.
    pub read_timeout: Duration,
    /// Longest time to send the request once a connection is ready. Default 30 s.
    pub write_timeout: Duration,
    /// Longest wait for a usable connection, beyond `connect_timeout`. Default 10 s.
    pub pool_timeout: Duration,
    /// A JSON (non-streamed) reply must be complete within this, counted from the
    /// start of the attempt. Default 900 s (AgentCore's own 15-minute limit).
    pub request_timeout: Duration,
    /// A streamed (SSE) reply must be complete within this. Default 3600 s
    /// (AgentCore's 60-minute streaming limit).
    pub max_stream: Duration,
    /// Largest SSE event (bytes received since the previous event); a larger one
    /// fails the task. Default 4 MiB ([`crate::upstream::http::sse::DEFAULT_MAX_EVENT_BYTES`]).
    pub max_event_bytes: usize,
    /// Largest streamed (SSE) reply body in total, in bytes; a larger one fails the
    /// task. Default 100 MiB ([`crate::upstream::http::sse::DEFAULT_MAX_STREAM_BYTES`]).
    pub max_stream_bytes: u64,
    /// Largest JSON or text (non-SSE) reply body (and an A2A agent's card), in bytes;
    /// a larger one fails the task. Default 16 MiB
    /// ([`crate::upstream::reply::DEFAULT_MAX_REPLY_BYTES`]).
    pub max_reply_bytes: u64,
    /// Retries of connection failures, 429 and the 5xx answers each kind deems
    /// retryable (and its own retryable errors), before any reply byte. Default 3.
    pub max_retries: u32,
    /// First retry delay; doubles per retry, with full jitter. Default 200 ms.
    pub retry_base_delay: Duration,
    /// Longest retry delay, and longest `Retry-After` honoured (a longer one fails
    /// the task instead of waiting). Default 20 s.
    pub retry_max_delay: Duration,
    /// Header sending the caller (the task owner) to the runtime; `None` disables it.
    /// Default `x-amzn-bedrock-agentcore-runtime-custom-caller` (the config's
    /// `caller_header` default).
    pub caller_header: Option<http::HeaderName>,
    /// Header sending the tenant (omitted for the default tenant `""`); `None`
    /// disables it. Default `x-amzn-bedrock-agentcore-runtime-custom-tenant` (the
    /// config's `tenant_header` default).
    pub tenant_header: Option<http::HeaderName>,
    /// Authentication. Default [`AuthSettings::None`].
    pub auth: AuthSettings,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            http_version: HttpVersion::Auto,
            ca_file: None,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(900),
            write_timeout: Duration::from_secs(30),
            pool_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(900),
            max_stream: Duration::from_secs(3600),
            max_event_bytes: crate::upstream::http::sse::DEFAULT_MAX_EVENT_BYTES,
            max_stream_bytes: crate::upstream::http::sse::DEFAULT_MAX_STREAM_BYTES,
            max_reply_bytes: crate::upstream::reply::DEFAULT_MAX_REPLY_BYTES,
            max_retries: 3,
            retry_base_delay: Duration::from_millis(200),
            retry_max_delay: Duration::from_secs(20),
            caller_header: Some(http::HeaderName::from_static(
                "x-amzn-bedrock-agentcore-runtime-custom-caller",
            )),
            tenant_header: Some(http::HeaderName::from_static(
                "x-amzn-bedrock-agentcore-runtime-custom-tenant",
            )),
            auth: AuthSettings::None,
        }
    }
}
