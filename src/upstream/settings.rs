//! [`AgentCoreSettings`]: everything the AgentCore executor needs, as plain Rust
//! values (the `[upstream]` config section is converted into it).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;

use super::errors::UpstreamError;

/// Which HTTP version to speak to the runtime and the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpVersion {
    /// HTTP/2 when the TLS server offers it by ALPN, else HTTP/1.1; HTTP/1.1 on
    /// plain `http://`.
    #[default]
    Auto,
    /// HTTP/2 only: ALPN `h2` over TLS, prior knowledge (h2c) on plain `http://`.
    Http2,
    /// HTTP/1.1 only.
    Http1,
}

/// Where the OAuth token endpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenEndpoint {
    /// The token endpoint URL itself.
    Url(String),
    /// An OIDC / OAuth discovery document URL
    /// (`…/.well-known/openid-configuration`); its `token_endpoint` is fetched once
    /// and cached (runtime contract §2.2).
    Discovery(String),
}

/// OAuth 2.0 client-credentials settings (runtime contract §2.2).
#[derive(Clone)]
pub struct OAuth2Settings {
    /// The client id.
    pub client_id: String,
    /// The client secret, sent with HTTP Basic client authentication.
    pub client_secret: SecretString,
    /// Space-separated scopes; `None` lets the server grant its defaults.
    pub scope: Option<String>,
    /// Where to get tokens.
    pub endpoint: TokenEndpoint,
    /// Refresh this long before the token expires (config `refresh_before_expiry_secs`,
    /// default 30 s).
    pub refresh_before_expiry: Duration,
}

impl fmt::Debug for OAuth2Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth2Settings")
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .field("scope", &self.scope)
            .field("endpoint", &self.endpoint)
            .field("refresh_before_expiry", &self.refresh_before_expiry)
            .finish()
    }
}

/// How the executor authenticates to the runtime (`[upstream.auth] kind`).
#[derive(Clone)]
pub enum AuthSettings {
    /// No `Authorization` header (a local runtime).
    None,
    /// A static bearer token (`kind = "bearer"`). A 401 with it fails the task.
    Bearer(SecretString),
    /// Client-credentials tokens, cached (`kind = "oauth2"`).
    OAuth2(OAuth2Settings),
    /// The caller's own verified JWT
    /// ([`CallContext::caller_token`](crate::executor::CallContext::caller_token)), per
    /// request (`kind = "forward"`). A call without one fails its task; a 401 fails it
    /// too (the runtime refused the caller's token).
    Forward,
}

impl fmt::Debug for AuthSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Bearer(_) => f.write_str("Bearer([redacted])"),
            Self::OAuth2(o) => f.debug_tuple("OAuth2").field(o).finish(),
            Self::Forward => f.write_str("Forward"),
        }
    }
}

/// Settings of [`AgentCoreExecutor`](super::AgentCoreExecutor). Build one with
/// [`for_runtime_arn`](Self::for_runtime_arn) or [`for_url`](Self::for_url), then
/// adjust the public fields. All durations are exact (the config's `*_secs` keys are
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
    /// fails the task. Default 4 MiB ([`super::sse::DEFAULT_MAX_EVENT_BYTES`]).
    pub max_event_bytes: usize,
    /// Largest streamed (SSE) reply body in total, in bytes; a larger one fails the
    /// task. Default 100 MiB ([`super::sse::DEFAULT_MAX_STREAM_BYTES`]).
    pub max_stream_bytes: u64,
    /// Largest JSON or text (non-SSE) reply body, in bytes; a larger one fails the
    /// task. Default 16 MiB ([`super::reply::DEFAULT_MAX_REPLY_BYTES`]).
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
    /// Default [`DEFAULT_CALLER_HEADER`](crate::config::DEFAULT_CALLER_HEADER).
    pub caller_header: Option<http::HeaderName>,
    /// Header sending the tenant (omitted for the default tenant `""`); `None`
    /// disables it. Default [`DEFAULT_TENANT_HEADER`](crate::config::DEFAULT_TENANT_HEADER).
    pub tenant_header: Option<http::HeaderName>,
    /// Authentication.
    pub auth: AuthSettings,
}

impl AgentCoreSettings {
    /// Settings for a hosted runtime: the invocation and stop-session URLs are
    /// derived from the ARN (`arn:aws:bedrock-agentcore:{region}:{account}:runtime/{id}`,
    /// fully percent-encoded as one path segment, region taken from the ARN) and
    /// `qualifier` (`DEFAULT` when `None`). Auth defaults to [`AuthSettings::None`].
    ///
    /// # Errors
    /// [`UpstreamError::Settings`] naming `agent_runtime_arn` when the ARN is malformed.
    pub fn for_runtime_arn(arn: &str, qualifier: Option<&str>) -> Result<Self, UpstreamError> {
        let parsed: crate::config::AgentRuntimeArn = arn.parse().map_err(|e| {
            UpstreamError::Settings(format!("upstream.agent_runtime_arn `{arn}`: {e}"))
        })?;
        let qualifier = qualifier.unwrap_or("DEFAULT");
        if qualifier.is_empty()
            || !qualifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(UpstreamError::Settings(format!(
                "upstream.qualifier `{qualifier}` must be an endpoint name ([A-Za-z0-9_-])"
            )));
        }
        let mut s = Self::for_url(parsed.action_url("invocations", qualifier));
        s.stop_session_url = Some(parsed.action_url("stopruntimesession", qualifier));
        Ok(s)
    }

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
            max_event_bytes: super::sse::DEFAULT_MAX_EVENT_BYTES,
            max_stream_bytes: super::sse::DEFAULT_MAX_STREAM_BYTES,
            max_reply_bytes: super::reply::DEFAULT_MAX_REPLY_BYTES,
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
            auth: AuthSettings::None,
        }
    }
}

impl TryFrom<&crate::config::UpstreamConfig> for AgentCoreSettings {
    type Error = UpstreamError;

    /// Converts the loaded `[upstream]` section (secret files already read by the
    /// config loader). The URLs come from
    /// [`UpstreamConfig::invocation_url`](crate::config::UpstreamConfig::invocation_url)
    /// and `stop_session_url` (none when it cannot be derived or
    /// `stop_session_on_cancel` is off); timeouts are whole seconds; retry delays
    /// keep their defaults.
    ///
    /// # Errors
    /// [`UpstreamError::Settings`] when no upstream is configured or an OAuth /
    /// bearer key the loader should have required is missing.
    fn try_from(c: &crate::config::UpstreamConfig) -> Result<Self, Self::Error> {
        use crate::config::{AuthKind, HttpVersion as Cfg};
        let settings_err = |e: &dyn fmt::Display| UpstreamError::Settings(e.to_string());
        let url = c.invocation_url().map_err(|e| settings_err(&e))?;
        let mut s = Self::for_url(url.as_str());
        s.stop_session_url = c.stop_session_url().ok().map(|u| u.to_string());
        s.stop_session_on_cancel = c.stop_session_on_cancel;
        s.http_version = match c.http_version {
            Cfg::Auto => HttpVersion::Auto,
            Cfg::Http2 => HttpVersion::Http2,
            Cfg::Http1 => HttpVersion::Http1,
        };
        s.ca_file = c.ca_file.clone();
        s.connect_timeout = c.connect_timeout();
        s.read_timeout = c.read_timeout();
        s.write_timeout = c.write_timeout();
        s.pool_timeout = c.pool_timeout();
        s.request_timeout = c.request_timeout();
        s.max_stream = c.max_stream();
        s.max_event_bytes = usize::try_from(c.max_event_bytes).unwrap_or(usize::MAX);
        s.max_stream_bytes = c.max_stream_bytes;
        s.max_reply_bytes = c.max_reply_bytes;
        s.max_retries = c.max_retries;
        s.include_message = c.include_message;
        let header = |key: &str, name: &str| {
            if name.is_empty() {
                return Ok(None);
            }
            http::HeaderName::from_bytes(name.as_bytes())
                .map(Some)
                .map_err(|_| {
                    UpstreamError::Settings(format!(
                        "upstream.{key} `{name}` is not a valid HTTP header name"
                    ))
                })
        };
        s.caller_header = header("caller_header", &c.caller_header)?;
        s.tenant_header = header("tenant_header", &c.tenant_header)?;
        let a = &c.auth;
        let missing =
            |key: &str| UpstreamError::Settings(format!("upstream.auth.{key} is required"));
        s.auth = match a.kind {
            AuthKind::None => AuthSettings::None,
            AuthKind::Forward => AuthSettings::Forward,
            AuthKind::Bearer => {
                AuthSettings::Bearer(a.token.clone().ok_or_else(|| missing("token"))?)
            }
            AuthKind::OAuth2 => AuthSettings::OAuth2(OAuth2Settings {
                client_id: a.client_id.clone().ok_or_else(|| missing("client_id"))?,
                client_secret: a
                    .client_secret
                    .clone()
                    .ok_or_else(|| missing("client_secret"))?,
                scope: a.scope.clone(),
                endpoint: match (&a.token_url, &a.discovery_url) {
                    (Some(t), _) => TokenEndpoint::Url(t.to_string()),
                    (None, Some(d)) => TokenEndpoint::Discovery(d.to_string()),
                    (None, None) => return Err(missing("token_url")),
                },
                refresh_before_expiry: a.refresh_before_expiry(),
            }),
        };
        Ok(s)
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

    #[test]
    fn derives_urls_from_arn() {
        let s = AgentCoreSettings::for_runtime_arn(
            "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/my_agent-AbC123",
            None,
        )
        .unwrap();
        assert_eq!(
            s.invocation_url,
            "https://bedrock-agentcore.eu-west-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aeu-west-1%3A123456789012%3Aruntime%2Fmy_agent-AbC123/invocations?qualifier=DEFAULT"
        );
        assert!(
            s.stop_session_url
                .unwrap()
                .contains("/stopruntimesession?qualifier=DEFAULT")
        );
    }

    #[test]
    fn malformed_arn_names_the_key() {
        for arn in [
            "",
            "arn:aws:s3:::bucket",
            "arn:aws:bedrock-agentcore:us-east-1:123:runtime/x",
            "arn:aws:bedrock-agentcore::123456789012:runtime/x",
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:agent/x",
        ] {
            let e = AgentCoreSettings::for_runtime_arn(arn, None)
                .unwrap_err()
                .to_string();
            assert!(e.contains("upstream.agent_runtime_arn"), "{e}");
        }
        let e = AgentCoreSettings::for_runtime_arn(
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/x",
            Some("a b"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("upstream.qualifier"), "{e}");
    }

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
    fn converts_the_config_section() {
        let toml = r#"
            agent_runtime_arn = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-1"
            qualifier = "prod"
            http_version = "http2"
            read_timeout_secs = 60
            max_retries = 1
            [auth]
            kind = "oauth2"
            client_id = "cid"
            client_secret = "very-secret-value"
            scope = "a/invoke"
            discovery_url = "https://idp.example.com/.well-known/openid-configuration"
            refresh_before_expiry_secs = 120
        "#;
        let c: crate::config::UpstreamConfig = toml::from_str(toml).unwrap();
        let s = AgentCoreSettings::try_from(&c).unwrap();
        assert!(
            s.invocation_url.starts_with(
                "https://bedrock-agentcore.us-west-2.amazonaws.com/runtimes/arn%3Aaws"
            )
        );
        assert!(
            s.invocation_url.ends_with("/invocations?qualifier=prod"),
            "{}",
            s.invocation_url
        );
        assert!(
            s.stop_session_url
                .as_deref()
                .unwrap()
                .ends_with("/stopruntimesession?qualifier=prod")
        );
        assert_eq!(s.http_version, HttpVersion::Http2);
        assert_eq!(s.read_timeout, Duration::from_secs(60));
        assert_eq!(s.max_retries, 1);
        let AuthSettings::OAuth2(o) = &s.auth else {
            panic!("{:?}", s.auth)
        };
        assert_eq!(
            o.endpoint,
            TokenEndpoint::Discovery(
                "https://idp.example.com/.well-known/openid-configuration".into()
            )
        );
        assert_eq!(o.refresh_before_expiry, Duration::from_secs(120));
        assert_eq!(
            s.caller_header.as_ref().map(|h| h.as_str()),
            Some("x-amzn-bedrock-agentcore-runtime-custom-caller")
        );
        let c: crate::config::UpstreamConfig = toml::from_str(
            "url = \"http://h/invocations\"\ncaller_header = \"X-Who\"\ntenant_header = \"\"\n[auth]\nkind = \"forward\"",
        )
        .unwrap();
        let s = AgentCoreSettings::try_from(&c).unwrap();
        assert_eq!(s.caller_header.as_ref().map(|h| h.as_str()), Some("x-who"));
        assert_eq!(s.tenant_header, None);
        assert!(matches!(s.auth, AuthSettings::Forward));
        assert!(AgentCoreSettings::try_from(&crate::config::UpstreamConfig::default()).is_err());
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
