//! `[upstream]`: the hosted agent runtime the gateway forwards to.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::Url;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::arn::AgentRuntimeArn;
use super::auth::{AuthKind, UpstreamAuthConfig};
use super::error::{ConfigError, Invalid, nonzero};
use super::serde_util::http_url_opt;

/// `[upstream]`: the runtime each A2A message is forwarded to, one variant per runtime
/// kind, tagged by the key `kind` (absent: `agentcore`, so configs written before the key
/// existed keep loading). The `[upstream.auth]` section is shared by every kind.
///
/// Read with a hand-written `Deserialize` rather than serde's
/// internally tagged derive: that derive buffers the table, and an error would then name
/// `upstream` instead of the key (`upstream.max_retries`) and its line.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind")]
pub enum UpstreamConfig {
    /// `kind = "agentcore"`: Amazon Bedrock AgentCore Runtime, or anything speaking its
    /// invocation contract (`docs/upstream-contract.md`).
    #[serde(rename = "agentcore")]
    AgentCore(AgentCoreUpstreamConfig),
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig::AgentCore(AgentCoreUpstreamConfig::default())
    }
}

impl UpstreamConfig {
    /// The runtime kind (the `kind` key).
    pub fn kind(&self) -> UpstreamKind {
        match self {
            UpstreamConfig::AgentCore(_) => UpstreamKind::AgentCore,
        }
    }

    /// `[upstream.auth]`, shared by every kind.
    pub fn auth(&self) -> &UpstreamAuthConfig {
        match self {
            UpstreamConfig::AgentCore(c) => &c.auth,
        }
    }

    /// `[upstream.auth]`, mutable (the loader reads its `*_file` secrets into it).
    pub fn auth_mut(&mut self) -> &mut UpstreamAuthConfig {
        match self {
            UpstreamConfig::AgentCore(c) => &mut c.auth,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        match self {
            UpstreamConfig::AgentCore(c) => c.validate(),
        }
    }
}

impl<'de> Deserialize<'de> for UpstreamConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(KindVisitor)
    }
}

/// Reads the `[upstream]` table in one pass: the `kind` entry is taken out and every other
/// entry goes, unbuffered, to the variant's derived `Deserialize`, so errors keep the
/// key path the config loader reports. With one kind the variant's keys can be read before
/// `kind` is seen (keys arrive sorted); a second kind makes the variant depend on `kind`.
struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = UpstreamConfig;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the [upstream] table")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<UpstreamConfig, A::Error> {
        let mut kind = None;
        let fields = AgentCoreUpstreamConfig::deserialize(de::value::MapAccessDeserializer::new(
            WithoutKind {
                map,
                kind: &mut kind,
            },
        ))?;
        match kind.unwrap_or_default() {
            UpstreamKind::AgentCore => Ok(UpstreamConfig::AgentCore(fields)),
        }
    }
}

/// A map with its `kind` entry taken out into `kind`.
struct WithoutKind<'k, A> {
    map: A,
    kind: &'k mut Option<UpstreamKind>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for WithoutKind<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<String>()? {
            if key == "kind" {
                *self.kind = Some(self.map.next_value()?);
                continue;
            }
            return seed.deserialize(key.into_deserializer()).map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// `[upstream]` with `kind = "agentcore"`: where each A2A message is forwarded and how.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentCoreUpstreamConfig {
    /// The AgentCore runtime ARN; the invocation URL is derived from it (see
    /// [`AgentCoreUpstreamConfig::invocation_url`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_runtime_arn: Option<AgentRuntimeArn>,
    /// Runtime endpoint qualifier sent as `?qualifier=`. Default `DEFAULT`.
    pub qualifier: String,
    /// Full invocation URL that replaces the derived one (a local runtime, a VPC endpoint).
    /// With `stop_session_on_cancel`, its path must end in `/invocations`.
    #[serde(
        default,
        with = "http_url_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub url: Option<Url>,
    /// HTTP version towards the upstream. Default `auto`.
    pub http_version: HttpVersion,
    /// Extra PEM root certificate(s) trusted for the upstream and the token endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Seconds to establish a connection (TCP + TLS). Default 10.
    pub connect_timeout_secs: u64,
    /// Longest silence between bytes of the reply, in seconds. Default 900.
    pub read_timeout_secs: u64,
    /// Seconds to send the request. Default 30.
    pub write_timeout_secs: u64,
    /// Seconds to wait for a pooled connection. Default 10.
    pub pool_timeout_secs: u64,
    /// Seconds a JSON (non-streamed) reply may take in total. Default 900 (15 minutes).
    pub request_timeout_secs: u64,
    /// Seconds a streamed (SSE) reply may take in total. Default 3600.
    pub max_stream_secs: u64,
    /// Largest single SSE event of a streamed reply, in bytes (its fields, comments and
    /// blank lines since the previous event). A larger one fails the task. Default
    /// 4194304 (4 MiB).
    pub max_event_bytes: u64,
    /// Largest streamed (SSE) reply in total, in bytes. A larger one fails the task
    /// (its text so far is kept in the task's artifact). Default 104857600 (100 MiB,
    /// above the runtime's own 100 MB limit on a response).
    pub max_stream_bytes: u64,
    /// Largest JSON or text (non-streamed) reply body, in bytes. A larger one fails the
    /// task. Default 16777216 (16 MiB).
    pub max_reply_bytes: u64,
    /// Retries for 429, retryable 409 and 500/502/503/504, only before any reply byte.
    /// Default 3; 0 disables retries.
    pub max_retries: u32,
    /// Also send the whole A2A message, `taskId` and `contextId` in the request body, so the
    /// upstream agent can read file and data parts. Default false.
    pub include_message: bool,
    /// On CancelTask, also stop the upstream runtime session. Default true.
    pub stop_session_on_cancel: bool,
    /// Header carrying the caller (the task owner) to the runtime. Default
    /// `X-Amzn-Bedrock-AgentCore-Runtime-Custom-Caller`; empty disables it. AgentCore
    /// passes a custom header to the agent only when its name starts with
    /// `X-Amzn-Bedrock-AgentCore-Runtime-Custom-` and is in the runtime's request header
    /// allowlist. The value is percent-encoded (see `docs/upstream-contract.md`).
    pub caller_header: String,
    /// Header carrying the tenant to the runtime (omitted for the default tenant `""`).
    /// Default `X-Amzn-Bedrock-AgentCore-Runtime-Custom-Tenant`; empty disables it.
    pub tenant_header: String,
    /// Whether the verified caller is sent as the runtime's user,
    /// `X-Amzn-Bedrock-AgentCore-Runtime-User-Id` (percent-encoded as `caller_header`
    /// is): AgentCore then gives the agent that user's workload access token. Needs
    /// `[server.auth]` and `upstream.auth.kind = "sigv4"` (the header is only accepted
    /// from IAM callers allowed `bedrock-agentcore:InvokeAgentRuntimeForUser`).
    /// Default `none`.
    pub user_id: UserId,
    /// Credentials for the upstream.
    pub auth: UpstreamAuthConfig,
}

/// Default of `upstream.caller_header`.
pub const DEFAULT_CALLER_HEADER: &str = "X-Amzn-Bedrock-AgentCore-Runtime-Custom-Caller";
/// Default of `upstream.tenant_header`.
pub const DEFAULT_TENANT_HEADER: &str = "X-Amzn-Bedrock-AgentCore-Runtime-Custom-Tenant";
/// The runtime session header, which the AgentCore executor sets on every invocation
/// itself (the executor's own `SESSION_HEADER`): never a configured identity header.
pub const SESSION_HEADER: &str = "x-amzn-bedrock-agentcore-runtime-session-id";

/// Headers the gateway sets itself, refused as `caller_header` / `tenant_header`.
const RESERVED_HEADERS: &[&str] = &[
    "authorization",
    "content-type",
    "content-length",
    "accept",
    "host",
    "traceparent",
    "tracestate",
    "transfer-encoding",
    "connection",
    SESSION_HEADER,
    USER_ID_HEADER,
    "x-amz-date",
    "x-amz-security-token",
    "x-amz-content-sha256",
];

/// Checks a configured identity header name: empty (disabled) or a valid HTTP field
/// name the gateway does not set itself.
fn check_identity_header(key: &str, name: &str, other: Option<&str>) -> Result<(), Invalid> {
    if name.is_empty() {
        return Ok(());
    }
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(Invalid::new(
            key,
            format!("`{name}` is not a valid HTTP header name"),
        ));
    }
    if RESERVED_HEADERS
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
    {
        return Err(Invalid::new(
            key,
            format!("`{name}` is set by the gateway itself; choose another name"),
        ));
    }
    if other.is_some_and(|o| o.eq_ignore_ascii_case(name)) {
        return Err(Invalid::new(key, "must differ from upstream.caller_header"));
    }
    Ok(())
}

impl Default for AgentCoreUpstreamConfig {
    fn default() -> Self {
        AgentCoreUpstreamConfig {
            agent_runtime_arn: None,
            qualifier: "DEFAULT".to_owned(),
            url: None,
            http_version: HttpVersion::Auto,
            ca_file: None,
            connect_timeout_secs: 10,
            read_timeout_secs: 900,
            write_timeout_secs: 30,
            pool_timeout_secs: 10,
            request_timeout_secs: 900,
            max_stream_secs: 3600,
            max_event_bytes: 4 * 1024 * 1024,
            max_stream_bytes: 100 * 1024 * 1024,
            max_reply_bytes: 16 * 1024 * 1024,
            max_retries: 3,
            include_message: false,
            stop_session_on_cancel: true,
            caller_header: DEFAULT_CALLER_HEADER.to_owned(),
            tenant_header: DEFAULT_TENANT_HEADER.to_owned(),
            user_id: UserId::None,
            auth: UpstreamAuthConfig::default(),
        }
    }
}

/// `upstream.user_id`: what the runtime is told about the end user of a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UserId {
    /// No `X-Amzn-Bedrock-AgentCore-Runtime-User-Id` header.
    #[default]
    None,
    /// The verified caller (the task owner: the API key's caller or the JWT subject).
    Caller,
}

/// The request header naming the runtime's user (`upstream.user_id = "caller"`).
pub const USER_ID_HEADER: &str = "x-amzn-bedrock-agentcore-runtime-user-id";

/// The kind of upstream runtime (the value of `upstream.kind`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum UpstreamKind {
    /// Amazon Bedrock AgentCore Runtime (or anything speaking its invocation contract).
    #[default]
    #[serde(rename = "agentcore")]
    AgentCore,
}

/// HTTP version used towards the upstream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpVersion {
    /// HTTP/2 when TLS ALPN offers it, else HTTP/1.1 (always HTTP/1.1 on plain `http`).
    #[default]
    Auto,
    /// HTTP/2 only (prior knowledge on plain `http`).
    Http2,
    /// HTTP/1.1 only.
    Http1,
}

/// Last path segment of an invocation URL, replaced to reach the stop-session action.
const INVOCATIONS: &str = "invocations";
const STOP_SESSION: &str = "stopruntimesession";

impl AgentCoreUpstreamConfig {
    /// The URL each message is POSTed to: `url` when set, else
    /// `https://bedrock-agentcore.{region}.amazonaws.com/runtimes/{percent-encoded ARN}/invocations?qualifier={qualifier}`.
    ///
    /// Errors with [`ConfigError::NoUpstream`] when neither is set (allowed at load so that
    /// `demo` can fill `url` itself).
    pub fn invocation_url(&self) -> Result<Url, ConfigError> {
        self.action_url(INVOCATIONS)
    }

    /// The URL that stops a runtime session on cancel: as [`AgentCoreUpstreamConfig::invocation_url`]
    /// with `/stopruntimesession` in place of `/invocations` (for `url` too).
    pub fn stop_session_url(&self) -> Result<Url, ConfigError> {
        self.action_url(STOP_SESSION)
    }

    fn action_url(&self, action: &str) -> Result<Url, ConfigError> {
        if let Some(url) = &self.url {
            if action == INVOCATIONS {
                return Ok(url.clone());
            }
            return replace_last_segment(url, action).ok_or(ConfigError::NoStopSessionUrl);
        }
        let arn = self
            .agent_runtime_arn
            .as_ref()
            .ok_or(ConfigError::NoUpstream)?;
        Ok(Url::parse(&arn.action_url(action, &self.qualifier))
            .expect("a checked ARN and an encoded qualifier make a valid URL"))
    }

    /// `connect_timeout_secs` as a [`Duration`].
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout_secs)
    }

    /// `read_timeout_secs` as a [`Duration`].
    pub fn read_timeout(&self) -> Duration {
        Duration::from_secs(self.read_timeout_secs)
    }

    /// `write_timeout_secs` as a [`Duration`].
    pub fn write_timeout(&self) -> Duration {
        Duration::from_secs(self.write_timeout_secs)
    }

    /// `pool_timeout_secs` as a [`Duration`].
    pub fn pool_timeout(&self) -> Duration {
        Duration::from_secs(self.pool_timeout_secs)
    }

    /// `request_timeout_secs` as a [`Duration`].
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }

    /// `max_stream_secs` as a [`Duration`].
    pub fn max_stream(&self) -> Duration {
        Duration::from_secs(self.max_stream_secs)
    }

    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if self.qualifier.trim().is_empty() {
            return Err(Invalid::new("upstream.qualifier", "must not be empty"));
        }
        for (key, value) in [
            ("upstream.connect_timeout_secs", self.connect_timeout_secs),
            ("upstream.read_timeout_secs", self.read_timeout_secs),
            ("upstream.write_timeout_secs", self.write_timeout_secs),
            ("upstream.pool_timeout_secs", self.pool_timeout_secs),
            ("upstream.request_timeout_secs", self.request_timeout_secs),
            ("upstream.max_stream_secs", self.max_stream_secs),
            ("upstream.max_event_bytes", self.max_event_bytes),
            ("upstream.max_stream_bytes", self.max_stream_bytes),
            ("upstream.max_reply_bytes", self.max_reply_bytes),
        ] {
            nonzero(key, value)?;
        }
        if let Some(url) = &self.url
            && self.stop_session_on_cancel
            && replace_last_segment(url, STOP_SESSION).is_none()
        {
            return Err(Invalid::new(
                "upstream.url",
                format!(
                    "path must end in /{INVOCATIONS} so the /{STOP_SESSION} URL can be derived \
                     (or set upstream.stop_session_on_cancel = false)"
                ),
            ));
        }
        if let Some(path) = &self.ca_file {
            super::check_readable_file("upstream.ca_file", path)?;
        }
        check_identity_header("upstream.caller_header", &self.caller_header, None)?;
        check_identity_header(
            "upstream.tenant_header",
            &self.tenant_header,
            Some(&self.caller_header)
                .filter(|c| !c.is_empty())
                .map(String::as_str),
        )?;
        self.auth.validate()?;
        self.validate_sigv4()
    }

    /// The SigV4 region against the ARN, and `user_id = "caller"` against the auth kind.
    fn validate_sigv4(&self) -> Result<(), Invalid> {
        if self.user_id == UserId::Caller && self.auth.kind != AuthKind::SigV4 {
            return Err(Invalid::because_of(
                "upstream.user_id",
                "upstream.auth.kind",
                "\"caller\" sends X-Amzn-Bedrock-AgentCore-Runtime-User-Id, which AgentCore \
                 accepts only from IAM (SigV4) callers allowed \
                 bedrock-agentcore:InvokeAgentRuntimeForUser: set upstream.auth.kind = \"sigv4\"",
            ));
        }
        if self.auth.kind != AuthKind::SigV4 {
            return Ok(());
        }
        match (&self.agent_runtime_arn, &self.auth.region) {
            (None, None) => Err(Invalid::because_of(
                "upstream.auth.region",
                "upstream.auth.kind",
                "is required with upstream.auth.kind = \"sigv4\" when there is no \
                 upstream.agent_runtime_arn to take the signing region from",
            )),
            (Some(arn), Some(region)) if arn.region() != region => Err(Invalid::new(
                "upstream.auth.region",
                format!(
                    "`{region}` differs from the region of upstream.agent_runtime_arn (`{}`); \
                     requests are signed for the runtime's region: leave upstream.auth.region unset",
                    arn.region()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The SigV4 signing region: `upstream.auth.region`, else the ARN's; `None` when
    /// neither is set.
    pub fn signing_region(&self) -> Option<&str> {
        self.auth
            .region
            .as_deref()
            .or_else(|| self.agent_runtime_arn.as_ref().map(AgentRuntimeArn::region))
    }
}

/// `url` with its last path segment `invocations` replaced by `action`; `None` when the path
/// does not end in `invocations`.
fn replace_last_segment(url: &Url, action: &str) -> Option<Url> {
    // String surgery rather than `path_segments_mut`, which would encode `%` again in a path
    // that already holds a percent-encoded ARN.
    let base = url.path().strip_suffix(INVOCATIONS)?;
    if !base.ends_with('/') {
        return None;
    }
    let mut out = url.clone();
    out.set_path(&format!("{base}{action}"));
    Some(out)
}

#[cfg(test)]
mod tests {
    /// The header refused here is the one the executor sets.
    #[test]
    fn the_reserved_session_header_is_the_executors() {
        assert_eq!(super::SESSION_HEADER, crate::upstream::SESSION_HEADER);
    }
}
