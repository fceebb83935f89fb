//! [`AgentCoreSettings`]: everything the AgentCore executor needs, as plain Rust
//! values (the gateway's `app` converts the `[upstream]` config section into it).

use std::path::PathBuf;
use std::time::Duration;

use crate::upstream::auth::AuthSettings;
use crate::upstream::http::HttpVersion;

/// Settings of [`AgentCoreExecutor`](super::AgentCoreExecutor). Build one with
/// [`for_url`](Self::for_url) (the gateway's `app` derives the URL from the runtime ARN
/// in `[upstream]`), then adjust the public fields. All durations are exact (the config's `*_secs` keys are
/// whole seconds; tests use milliseconds).
#[derive(Debug, Clone)]
pub struct AgentCoreSettings {
    /// The invocation URL: `https://bedrock-agentcore.{region}.amazonaws.com/runtimes/{ARN}/invocations?qualifier=…`
    /// (contract §1.1) or an override such as `http://127.0.0.1:8080/invocations`.
    pub invocation_url: String,
    /// The StopRuntimeSession URL used on cancel (contract §1.5); `None` disables it.
    pub stop_session_url: Option<String>,
    /// HTTP version policy.
    pub http_version: HttpVersion,
    /// A PEM file of extra root certificates for the runtime and the token endpoint
    /// (added to the built-in web PKI roots).
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
    /// start of the attempt. Default 900 s (the runtime's own 15-minute limit).
    pub request_timeout: Duration,
    /// A streamed (SSE) reply must be complete within this. Default 3600 s (the
    /// runtime's 60-minute streaming limit).
    pub max_stream: Duration,
    /// Largest SSE event (bytes received since the previous event); a larger one
    /// fails the task. Default 4 MiB ([`crate::upstream::http::sse::DEFAULT_MAX_EVENT_BYTES`]).
    pub max_event_bytes: usize,
    /// Largest streamed (SSE) reply body in total, in bytes; a larger one fails the
    /// task. Default 100 MiB ([`crate::upstream::http::sse::DEFAULT_MAX_STREAM_BYTES`]).
    pub max_stream_bytes: u64,
    /// Largest JSON or text (non-SSE) reply body, in bytes; a larger one fails the
    /// task. Default 16 MiB ([`crate::upstream::reply::DEFAULT_MAX_REPLY_BYTES`]).
    pub max_reply_bytes: u64,
    /// Retries of 429, 409 RetryableConflict, 500/502/503/504 and connection
    /// failures, before any reply byte. Default 3.
    pub max_retries: u32,
    /// First retry delay; doubles per retry, with full jitter. Default 200 ms.
    pub retry_base_delay: Duration,
    /// Longest retry delay, and longest `Retry-After` honoured (a longer one fails
    /// the task instead of waiting). Default 20 s.
    pub retry_max_delay: Duration,
    /// Also send the whole A2A `message`, `taskId` and `contextId` in the payload.
    /// Default false.
    pub include_message: bool,
    /// Call StopRuntimeSession when a task is canceled. Default true.
    pub stop_session_on_cancel: bool,
    /// Header sending the caller (the task owner) to the runtime; `None` disables it.
    /// Default `x-amzn-bedrock-agentcore-runtime-custom-caller` (the config's
    /// `caller_header` default).
    pub caller_header: Option<http::HeaderName>,
    /// Header sending the tenant (omitted for the default tenant `""`); `None`
    /// disables it. Default `x-amzn-bedrock-agentcore-runtime-custom-tenant` (the
    /// config's `tenant_header` default).
    pub tenant_header: Option<http::HeaderName>,
    /// Send the verified caller (the task owner) as
    /// `X-Amzn-Bedrock-AgentCore-Runtime-User-Id` (config `user_id = "caller"`).
    /// Default false.
    pub user_id: bool,
    /// Authentication.
    pub auth: AuthSettings,
}

impl AgentCoreSettings {
    /// Settings for an explicit invocation URL (a local runtime, a VPC endpoint). The
    /// stop-session URL is the same URL with a final `/invocations` path segment
    /// replaced by `/stopruntimesession` (none when the path does not end so).
    pub fn for_url(invocation_url: impl Into<String>) -> Self {
        let invocation_url = invocation_url.into();
        let stop_session_url = stop_url_for(&invocation_url);
        Self {
            invocation_url,
            stop_session_url,
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
            include_message: false,
            stop_session_on_cancel: true,
            caller_header: Some(http::HeaderName::from_static(
                "x-amzn-bedrock-agentcore-runtime-custom-caller",
            )),
            tenant_header: Some(http::HeaderName::from_static(
                "x-amzn-bedrock-agentcore-runtime-custom-tenant",
            )),
            user_id: false,
            auth: AuthSettings::None,
        }
    }
}

fn stop_url_for(invocation_url: &str) -> Option<String> {
    let (path, query) = match invocation_url.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (invocation_url, None),
    };
    let base = path.trim_end_matches('/').strip_suffix("/invocations")?;
    Some(match query {
        Some(q) => format!("{base}/stopruntimesession?{q}"),
        None => format!("{base}/stopruntimesession"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::auth::{OAuth2Settings, TokenEndpoint};
    use secrecy::SecretString;

    #[test]
    fn stop_url_for_override() {
        assert_eq!(
            AgentCoreSettings::for_url("http://127.0.0.1:8080/invocations")
                .stop_session_url
                .as_deref(),
            Some("http://127.0.0.1:8080/stopruntimesession")
        );
        assert_eq!(
            AgentCoreSettings::for_url("http://h/x").stop_session_url,
            None
        );
    }

    #[test]
    fn debug_hides_secrets() {
        let mut s = AgentCoreSettings::for_url("http://h/invocations");
        s.auth = AuthSettings::OAuth2(OAuth2Settings {
            client_id: "cid".into(),
            client_secret: SecretString::from("very-secret-value"),
            scope: None,
            endpoint: TokenEndpoint::Url("http://t".into()),
            refresh_before_expiry: Duration::from_secs(30),
        });
        assert!(!format!("{s:?}").contains("very-secret"));
        s.auth = AuthSettings::Bearer(SecretString::from("very-secret-value"));
        assert!(!format!("{s:?}").contains("very-secret"));
    }
}
