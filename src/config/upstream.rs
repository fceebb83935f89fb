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
    /// `kind = "a2a"`: an agent that speaks A2A itself (0.3 or 1.0): any A2A agent at
    /// `url`, or an AgentCore runtime with `serverProtocol = A2A` at
    /// `agent_runtime_arn`. The gateway terminates A2A on both sides; the agent is its
    /// executor (`docs/a2a-upstreams.md`).
    #[serde(rename = "a2a")]
    A2a(A2aUpstreamConfig),
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
            UpstreamConfig::A2a(_) => UpstreamKind::A2a,
        }
    }

    /// `[upstream.auth]`, shared by every kind.
    pub fn auth(&self) -> &UpstreamAuthConfig {
        match self {
            UpstreamConfig::AgentCore(c) => &c.auth,
            UpstreamConfig::A2a(c) => &c.connection.auth,
        }
    }

    /// `[upstream.auth]`, mutable (the loader reads its `*_file` secrets into it).
    pub fn auth_mut(&mut self) -> &mut UpstreamAuthConfig {
        match self {
            UpstreamConfig::AgentCore(c) => &mut c.auth,
            UpstreamConfig::A2a(c) => &mut c.connection.auth,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        match self {
            UpstreamConfig::AgentCore(c) => c.validate(),
            UpstreamConfig::A2a(c) => c.validate(),
        }
    }
}

impl<'de> Deserialize<'de> for UpstreamConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(KindVisitor)
    }
}

/// Reads the `[upstream]` table in one pass: the `kind` and `protocol_version` entries are
/// taken out and every other entry goes, unbuffered, to [`AgentCoreUpstreamConfig`]'s
/// derived `Deserialize` (the keys both kinds share), so errors keep the key path the
/// config loader reports. The variant is chosen once the table is read: keys arrive
/// sorted, so `kind` may come after keys of the variant.
struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = UpstreamConfig;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the [upstream] table")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<UpstreamConfig, A::Error> {
        let mut kind = None;
        let mut a2a = A2aOnlyKeys::default();
        let mut unknown = None;
        let mut agentcore_only = None;
        let fields = AgentCoreUpstreamConfig::deserialize(de::value::MapAccessDeserializer::new(
            WithoutKind {
                map,
                kind: &mut kind,
                a2a: &mut a2a,
                unknown: &mut unknown,
                agentcore_only: &mut agentcore_only,
            },
        ))?;
        let kind = kind.unwrap_or_default();
        // Known only now that the whole table is read: the keys of this kind.
        if let Some(key) = unknown {
            return Err(de::Error::unknown_field(
                &key,
                match kind {
                    UpstreamKind::AgentCore => AGENTCORE_KEYS,
                    UpstreamKind::A2a => A2A_KEYS,
                },
            ));
        }
        if kind == UpstreamKind::A2a
            && let Some(key) = agentcore_only
        {
            return Err(de::Error::custom(format!(
                "upstream.{key} applies to kind = \"agentcore\" only{}",
                if key == "include_message" {
                    " (an A2A agent is always sent the whole message)"
                } else {
                    ""
                }
            )));
        }
        match kind {
            UpstreamKind::AgentCore => match a2a.first_set() {
                Some(key) => Err(de::Error::custom(format!(
                    "upstream.{key} applies to kind = \"a2a\" only"
                ))),
                None => Ok(UpstreamConfig::AgentCore(fields)),
            },
            UpstreamKind::A2a => {
                let d = A2aUpstreamConfig::default();
                Ok(UpstreamConfig::A2a(A2aUpstreamConfig {
                    protocol_version: a2a.protocol_version.unwrap_or_default(),
                    protocol_binding: a2a.protocol_binding.unwrap_or_default(),
                    resume_secs: a2a.resume_secs.unwrap_or(d.resume_secs),
                    submitted_stall_secs: a2a
                        .submitted_stall_secs
                        .unwrap_or(d.submitted_stall_secs),
                    card_min_refresh_secs: a2a
                        .card_min_refresh_secs
                        .unwrap_or(d.card_min_refresh_secs),
                    card_refresh_secs: a2a.card_refresh_secs.unwrap_or(d.card_refresh_secs),
                    connection: fields,
                }))
            }
        }
    }
}

/// The keys of `[upstream]` every kind shares (the shared HTTP section, converted by
/// `app` into the upstream's `ConnectionSettings`), followed by the kind's own keys given
/// to the macro: one list, so that a shared key is named once.
macro_rules! upstream_keys {
    ($($own:literal),* $(,)?) => {
        &[
            $($own,)*
            "http_version",
            "ca_file",
            "connect_timeout_secs",
            "read_timeout_secs",
            "write_timeout_secs",
            "pool_timeout_secs",
            "request_timeout_secs",
            "max_stream_secs",
            "max_event_bytes",
            "max_stream_bytes",
            "max_reply_bytes",
            "max_retries",
            "caller_header",
            "tenant_header",
            "auth",
        ]
    };
}

/// The keys of `[upstream]` with `kind = "agentcore"` (named when a key is unknown).
const AGENTCORE_KEYS: &[&str] = upstream_keys!(
    "kind",
    "agent_runtime_arn",
    "qualifier",
    "url",
    "include_message",
    "stop_session_on_cancel",
    "user_id",
);

/// The keys of `kind = "a2a"` alone (refused with `kind = "agentcore"`).
const A2A_ONLY_KEYS: &[&str] = &[
    "protocol_version",
    "protocol_binding",
    "resume_secs",
    "submitted_stall_secs",
    "card_min_refresh_secs",
    "card_refresh_secs",
];

/// The keys of `kind = "agentcore"` that do not apply to `kind = "a2a"` (refused there).
const AGENTCORE_ONLY_KEYS: &[&str] = &["include_message", "user_id"];

/// The keys of `[upstream]` with `kind = "a2a"` (named when a key is unknown).
const A2A_KEYS: &[&str] = upstream_keys!(
    "kind",
    "url",
    "agent_runtime_arn",
    "qualifier",
    "protocol_version",
    "protocol_binding",
    "resume_secs",
    "submitted_stall_secs",
    "card_min_refresh_secs",
    "card_refresh_secs",
    "stop_session_on_cancel",
);

/// The keys of `kind = "a2a"` alone, as read (`None`: absent).
#[derive(Default)]
struct A2aOnlyKeys {
    protocol_version: Option<A2aProtocolVersion>,
    protocol_binding: Option<A2aProtocolBinding>,
    resume_secs: Option<u64>,
    submitted_stall_secs: Option<u64>,
    card_min_refresh_secs: Option<u64>,
    card_refresh_secs: Option<u64>,
}

impl A2aOnlyKeys {
    /// The name of the first key set, if any.
    fn first_set(&self) -> Option<&'static str> {
        [
            ("protocol_version", self.protocol_version.is_some()),
            ("protocol_binding", self.protocol_binding.is_some()),
            ("resume_secs", self.resume_secs.is_some()),
            ("submitted_stall_secs", self.submitted_stall_secs.is_some()),
            (
                "card_min_refresh_secs",
                self.card_min_refresh_secs.is_some(),
            ),
            ("card_refresh_secs", self.card_refresh_secs.is_some()),
        ]
        .into_iter()
        .find_map(|(key, set)| set.then_some(key))
    }
}

/// A map with its `kind` entry and the keys of `kind = "a2a"` alone taken out, and its
/// unknown keys (the first is kept, its value skipped) and the first key that is
/// `agentcore`'s only noted, for the kind to decide once the table is read.
struct WithoutKind<'k, A> {
    map: A,
    kind: &'k mut Option<UpstreamKind>,
    a2a: &'k mut A2aOnlyKeys,
    unknown: &'k mut Option<String>,
    agentcore_only: &'k mut Option<String>,
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
            let a2a = &mut *self.a2a;
            match key.as_str() {
                "protocol_version" => a2a.protocol_version = Some(self.map.next_value()?),
                "protocol_binding" => a2a.protocol_binding = Some(self.map.next_value()?),
                "resume_secs" => a2a.resume_secs = Some(self.map.next_value()?),
                "submitted_stall_secs" => {
                    a2a.submitted_stall_secs = Some(self.map.next_value()?);
                }
                "card_refresh_secs" => {
                    a2a.card_refresh_secs = Some(self.map.next_value()?);
                }
                "card_min_refresh_secs" => {
                    a2a.card_min_refresh_secs = Some(self.map.next_value()?);
                }
                _ => {}
            }
            if A2A_ONLY_KEYS.contains(&key.as_str()) {
                continue;
            }
            if !AGENTCORE_KEYS.contains(&key.as_str()) {
                self.map.next_value::<de::IgnoredAny>()?;
                self.unknown.get_or_insert(key);
                continue;
            }
            if AGENTCORE_ONLY_KEYS.contains(&key.as_str()) {
                self.agentcore_only.get_or_insert_with(|| key.clone());
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
    /// An agent speaking A2A itself (`kind = "a2a"`).
    #[serde(rename = "a2a")]
    A2a,
}

/// `upstream.protocol_version` of `kind = "a2a"`: the A2A version spoken to the agent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum A2aProtocolVersion {
    /// From the agent's card: 1.0 when it lists a 1.0 JSON-RPC interface, else 0.3; an
    /// AgentCore A2A runtime (`agent_runtime_arn`) is spoken to in 0.3 (the AWS contract
    /// shows 0.3; whether the platform forwards `A2A-Version` is undocumented). A 1.0
    /// call answered -32009 (version not supported) falls back to 0.3 once, for good.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// A2A 1.0 method names and shapes.
    #[serde(rename = "1.0")]
    V1_0,
    /// A2A 0.3 method names and shapes.
    #[serde(rename = "0.3")]
    V0_3,
}

/// `upstream.protocol_binding` of `kind = "a2a"`: the binding the agent is called over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum A2aProtocolBinding {
    /// JSON-RPC when the card lists it (for the version), else HTTP+JSON (1.0).
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// JSON-RPC 2.0.
    #[serde(rename = "JSONRPC")]
    JsonRpc,
    /// HTTP+JSON (A2A 1.0 only).
    #[serde(rename = "HTTP+JSON")]
    HttpJson,
}

/// `[upstream]` with `kind = "a2a"`: an agent that speaks A2A itself.
///
/// Keys (besides `kind`): `url` (the agent's base URL; its card is read from
/// `<url>.well-known/agent-card.json`) or `agent_runtime_arn` (+ `qualifier`: an AgentCore
/// A2A runtime, JSON-RPC at `…/runtimes/{ARN}/invocations/`, its card below it),
/// `protocol_version`, `protocol_binding`, `resume_secs`, `submitted_stall_secs`,
/// `card_min_refresh_secs`, and the keys it shares with `kind = "agentcore"`: `http_version`,
/// `ca_file`, the `*_timeout_secs`, `max_stream_secs`, the byte limits, `max_retries`,
/// `stop_session_on_cancel` (AgentCore runtimes only), `caller_header`, `tenant_header`
/// and `[upstream.auth]`. `include_message` and `user_id` are refused (the whole message
/// is sent; the runtime user is not passed).
#[derive(Clone, Debug, Serialize)]
pub struct A2aUpstreamConfig {
    /// `protocol_version`: the A2A version spoken to the agent. Default `auto`.
    pub protocol_version: A2aProtocolVersion,
    /// `protocol_binding`: the binding the agent is called over. Default `auto`.
    pub protocol_binding: A2aProtocolBinding,
    /// `resume_secs`: after the agent's stream broke before its task settled (or a
    /// blocking answer left it unsettled), seconds the gateway tries to get the task
    /// back (resubscribing, then polling GetTask) before it fails the task. 1 to
    /// 86400; default 300.
    pub resume_secs: u64,
    /// `submitted_stall_secs`: after the agent's answer broke off with an error while
    /// its task was still SUBMITTED, seconds the task may stay SUBMITTED and unchanged
    /// before the gateway takes the agent's executor for crashed and fails the task
    /// (an a2a-sdk 0.3 agent whose executor raises leaves its task SUBMITTED for
    /// good). 1 to `resume_secs`; default 30.
    pub submitted_stall_secs: u64,
    /// `card_min_refresh_secs`: the shortest time between two reads of the agent's
    /// card, in seconds: a card answered with a shorter `max-age` (or `no-cache`) is
    /// kept this long, and an unreadable card (the agent down) is tried again after
    /// this. 1 to 3600; default 30.
    pub card_min_refresh_secs: u64,
    /// `card_refresh_secs`: how long a card answered without `Cache-Control: max-age`
    /// (as the official SDKs serve it) is used before it is read again (revalidated with
    /// `If-None-Match` when it came with an `ETag`), in seconds: how soon a changed card
    /// of such an agent is seen. `card_min_refresh_secs` to 86400; default 300.
    pub card_refresh_secs: u64,
    /// The keys shared with `kind = "agentcore"` (see the type's doc).
    #[serde(flatten)]
    pub connection: AgentCoreUpstreamConfig,
}

impl Default for A2aUpstreamConfig {
    fn default() -> Self {
        Self {
            protocol_version: A2aProtocolVersion::default(),
            protocol_binding: A2aProtocolBinding::default(),
            resume_secs: 300,
            submitted_stall_secs: 30,
            card_min_refresh_secs: 30,
            card_refresh_secs: 300,
            connection: AgentCoreUpstreamConfig::default(),
        }
    }
}

impl A2aUpstreamConfig {
    /// The agent's JSON-RPC endpoint as configured: `url` (a path without a final `/`
    /// gets one, so that the card's `.well-known/…` is resolved below it), or for
    /// `agent_runtime_arn`
    /// `https://bedrock-agentcore.{region}.amazonaws.com/runtimes/{ARN}/invocations/?qualifier=…`.
    /// With both, a host-only `https` `url` (no path, no query: a VPC endpoint) gets
    /// the runtime's path `/runtimes/{percent-encoded ARN}/invocations/?qualifier=…`;
    /// any other `url` (a plain-http one: the container run locally) is taken as it is.
    ///
    /// # Errors
    /// [`ConfigError::NoUpstream`] when neither is set.
    pub fn base_url(&self) -> Result<Url, ConfigError> {
        let c = &self.connection;
        if let (Some(url), Some(arn)) = (&c.url, &c.agent_runtime_arn)
            && url.scheme() == "https"
            && url.path() == "/"
            && url.query().is_none()
        {
            // A host-only https `url` beside the ARN (a VPC endpoint, a proxy): the
            // runtime's path below it, as at the derived host. A plain-http one is the
            // container run locally, which serves A2A at `/`: taken as it is.
            let invocations = arn.action_url(INVOCATIONS, &c.qualifier);
            let derived = Url::parse(&invocations)
                .expect("a checked ARN and an encoded qualifier make a valid URL");
            let mut u = url.clone();
            u.set_path(&format!("{}/", derived.path()));
            u.set_query(derived.query());
            return Ok(u);
        }
        if let Some(url) = &c.url {
            let mut u = url.clone();
            if !u.path().ends_with('/') {
                let path = format!("{}/", u.path());
                u.set_path(&path);
            }
            return Ok(u);
        }
        let arn = c
            .agent_runtime_arn
            .as_ref()
            .ok_or(ConfigError::NoUpstream)?;
        let invocations = arn.action_url(INVOCATIONS, &c.qualifier);
        let (path, query) = invocations
            .split_once('?')
            .unwrap_or((invocations.as_str(), ""));
        Ok(Url::parse(&format!("{path}/?{query}"))
            .expect("a checked ARN and an encoded qualifier make a valid URL"))
    }

    /// The URL of the agent's card: `.well-known/agent-card.json` below
    /// [`base_url`](Self::base_url) (its query kept: an AgentCore qualifier).
    ///
    /// # Errors
    /// As [`base_url`](Self::base_url).
    pub fn card_url(&self) -> Result<Url, ConfigError> {
        let base = self.base_url()?;
        let mut card = base.clone();
        card.set_path(&format!("{}.well-known/agent-card.json", base.path()));
        Ok(card)
    }

    /// Whether the agent is an AgentCore A2A runtime (`agent_runtime_arn` is set; a
    /// `url` beside it replaces the derived endpoint, as for `kind = "agentcore"`: a VPC
    /// endpoint, a local runtime).
    pub fn is_agentcore(&self) -> bool {
        self.connection.agent_runtime_arn.is_some()
    }

    /// The StopRuntimeSession URL of an AgentCore A2A runtime (used after a cancel when
    /// `stop_session_on_cancel`): derived from the ARN, or from a `url` beside it whose
    /// path ends in `/invocations/` (`/stopruntimesession` in its place); `None` for any
    /// other agent.
    pub fn stop_session_url(&self) -> Option<Url> {
        let c = &self.connection;
        if !self.is_agentcore() || !c.stop_session_on_cancel {
            return None;
        }
        match &c.url {
            None => c.stop_session_url().ok(),
            Some(_) => {
                let url = self.base_url().ok()?;
                let mut trimmed = url.clone();
                trimmed.set_path(url.path().trim_end_matches('/'));
                replace_last_segment(&trimmed, STOP_SESSION)
            }
        }
    }

    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        let c = &self.connection;
        if c.url.is_none() && c.agent_runtime_arn.is_none() {
            return Err(Invalid::because_of(
                "upstream.url",
                "upstream.kind",
                "is required with kind = \"a2a\" (the agent's base URL; its card is read from \
                 <url>.well-known/agent-card.json), or set upstream.agent_runtime_arn for an \
                 AgentCore A2A runtime",
            ));
        }
        let within = |key: &str, value: u64, max: u64, why: &str| {
            if (1..=max).contains(&value) {
                Ok(())
            } else {
                Err(Invalid::new(
                    format!("upstream.{key}"),
                    format!("is {value}; it must be 1 to {max}{why}"),
                ))
            }
        };
        within("resume_secs", self.resume_secs, 86_400, "")?;
        within(
            "submitted_stall_secs",
            self.submitted_stall_secs,
            self.resume_secs,
            " (at most upstream.resume_secs)",
        )?;
        within(
            "card_min_refresh_secs",
            self.card_min_refresh_secs,
            3600,
            "",
        )?;
        within("card_refresh_secs", self.card_refresh_secs, 86_400, "")?;
        if self.card_refresh_secs < self.card_min_refresh_secs {
            return Err(Invalid::new(
                "upstream.card_refresh_secs",
                format!(
                    "is {}; it must be at least upstream.card_min_refresh_secs ({})",
                    self.card_refresh_secs, self.card_min_refresh_secs
                ),
            ));
        }
        c.validate_shared()
    }
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
        self.validate_shared()?;
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
        Ok(())
    }

    /// The checks of the keys every kind shares.
    fn validate_shared(&self) -> Result<(), Invalid> {
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
