//! The Amazon Bedrock AgentCore Runtime kind: [`AgentCore`] (a [`Runtime`]) and
//! [`AgentCoreExecutor`], the executor over it. Each A2A message is forwarded to the
//! runtime's invocation URL, in the runtime session of its context.
//!
//! The wire contract it follows is `shared/docs/agentcore-runtime.md` ("the runtime
//! contract", sections cited as §n); what upstream agents can rely on is
//! `docs/upstream-contract.md`.
//!
//! - [`settings`]: [`AgentCoreSettings`], plain values.
//! - [`session`]: runtime session ids.
//!
//! What it shares with any runtime kind is in [`crate::upstream`]: the executor body
//! (`runtime`), `http` (client, retries, SSE decoding), `auth` (credentials, token
//! cache, OAuth), `reply` (reply → task events), `errors`.

pub mod session;
pub mod settings;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use secrecy::ExposeSecret;
use serde_json::json;

pub use settings::AgentCoreSettings;

use crate::executor::{CallContext, RequestContext};
use crate::upstream::auth::{self, CachedToken, Credentials, TokenSource};
use crate::upstream::errors::{StatusError, UpstreamError};
use crate::upstream::http::{HttpVersion, RetryPolicy, SendTimeouts, client};
use crate::upstream::runtime::{Limits, Runtime, RuntimeExecutor, STOP_TIMEOUT};

/// The request and response header carrying the runtime session id (contract §1.1).
pub const SESSION_HEADER: &str = "x-amzn-bedrock-agentcore-runtime-session-id";

/// The request header naming the end user the call is for (contract §1.1, §8):
/// AgentCore gives the agent that user's workload access token. Sent with
/// `upstream.user_id = "caller"`, only accepted from SigV4 callers.
pub const USER_ID_HEADER: &str = "x-amzn-bedrock-agentcore-runtime-user-id";

/// Longest `X-Amzn-Bedrock-AgentCore-Runtime-User-Id` AgentCore accepts (contract §1.1).
const MAX_USER_ID: usize = 1024;

/// Why a message is refused when its caller cannot be the runtime's user.
const USER_ID_TOO_LONG: &str = "the caller's name is too long to be sent as the runtime's user \
    (upstream.user_id = \"caller\"): at most 1024 characters once percent-encoded";

/// Why a message without text is refused when only text reaches the runtime.
const NO_TEXT: &str = "this agent takes text: the message has no text part (files and data \
                       parts reach the runtime only with upstream.include_message = true)";

/// The AgentCore executor: [`RuntimeExecutor`] over [`AgentCore`]. Cheap to clone.
pub type AgentCoreExecutor = RuntimeExecutor<AgentCore>;

/// The AgentCore kind: invocation URL, session header, identity headers, payload and
/// StopRuntimeSession from [`AgentCoreSettings`].
#[derive(Debug)]
pub struct AgentCore {
    settings: AgentCoreSettings,
    limits: Limits,
}

impl AgentCore {
    /// The settings in use.
    pub fn settings(&self) -> &AgentCoreSettings {
        &self.settings
    }

    /// Adds the caller and tenant headers (`upstream.caller_header` /
    /// `tenant_header`) and, with `user_id`, [`USER_ID_HEADER`], values
    /// percent-encoded ([`identity_header_value`]); the tenant header is left out for
    /// the default tenant `""`, the user id for an anonymous (empty) caller.
    fn identity_headers(
        &self,
        mut rb: reqwest::RequestBuilder,
        caller: &CallContext,
    ) -> reqwest::RequestBuilder {
        if let Some(name) = &self.settings.connection.caller_header {
            rb = rb.header(name.clone(), identity_header_value(&caller.owner));
        }
        if let Some(name) = &self.settings.connection.tenant_header
            && !caller.tenant.is_empty()
        {
            rb = rb.header(name.clone(), identity_header_value(&caller.tenant));
        }
        if self.settings.user_id && !caller.owner.is_empty() {
            rb = rb.header(USER_ID_HEADER, identity_header_value(&caller.owner));
        }
        rb
    }
}

#[async_trait]
impl Runtime for AgentCore {
    const REQUEST_ID_HEADER: &'static str = "x-amzn-requestid";
    const SESSION_HEADER: Option<&'static str> = Some(SESSION_HEADER);

    fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The runtime session of the caller's context (contract §1.1; see [`session`]).
    fn session(&self, ctx: &RequestContext) -> String {
        AgentCoreExecutor::session_for(ctx)
    }

    fn refusal(&self, ctx: &RequestContext) -> Option<&'static str> {
        // AgentCore takes a user id of at most 1024 characters (contract §1.1).
        if self.settings.user_id
            && identity_header_value(&ctx.call_context.owner).len() > MAX_USER_ID
        {
            return Some(USER_ID_TOO_LONG);
        }
        // Only text reaches the runtime without `include_message`: a message of files or
        // data alone would arrive as an empty prompt.
        (!self.settings.include_message && ctx.user_input().trim().is_empty()).then_some(NO_TEXT)
    }

    fn payload(&self, ctx: &RequestContext) -> Bytes {
        let mut p = json!({
            "prompt": ctx.user_input(),
            "actor_id": format!("user-{}", ctx.context_id),
        });
        if self.settings.include_message {
            p["message"] = serde_json::to_value(&ctx.message).unwrap_or_default();
            p["taskId"] = json!(ctx.task_id);
            p["contextId"] = json!(ctx.context_id);
        }
        Bytes::from(serde_json::to_vec(&p).expect("JSON payload"))
    }

    fn request(
        &self,
        client: &reqwest::Client,
        session: &str,
        caller: &CallContext,
    ) -> reqwest::RequestBuilder {
        let rb = client
            .post(&self.settings.invocation_url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "text/event-stream, application/json")
            .header(SESSION_HEADER, session);
        self.identity_headers(rb, caller)
    }

    fn log_url(&self) -> &str {
        &self.settings.invocation_url
    }

    fn stops_on_cancel(&self) -> bool {
        self.settings.stop_session_on_cancel
    }

    /// Calls StopRuntimeSession for `session` (contract §1.5), authorized (bearer or
    /// SigV4) as invocations are. A 404 ("not found or already terminated") counts as
    /// done; a 401, or SigV4's expired credentials, refetches them once. With
    /// `upstream.auth.kind = "forward"` the token is `caller`'s (the canceling caller).
    async fn stop(
        &self,
        client: &reqwest::Client,
        credentials: &dyn Credentials,
        session: &str,
        caller: &CallContext,
    ) -> Result<(), UpstreamError> {
        let Some(url) = self.settings.stop_session_url.clone() else {
            return Ok(());
        };
        let mut refetched = false;
        loop {
            let rb = client
                .post(&url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(SESSION_HEADER, session)
                .timeout(STOP_TIMEOUT);
            let mut request = self
                .identity_headers(rb, caller)
                .body("{}")
                .build()
                .map_err(|e| {
                    UpstreamError::from_send(&e, self.settings.connection.connect_timeout)
                })?;
            let token = credentials.authorize(&mut request, caller).await?;
            let resp = client.execute(request).await.map_err(|e| {
                UpstreamError::from_send(&e, self.settings.connection.connect_timeout)
            })?;
            let status = resp.status().as_u16();
            if resp.status().is_success() || status == 404 {
                return Ok(());
            }
            let headers = resp.headers().clone();
            let error_type = StatusError::from_response(status, &headers, &[], None).error_type;
            let cured = match &token {
                Some(t) if status == 401 => credentials.on_unauthorized(t),
                _ if status == 401 => false,
                _ => credentials.on_rejected(status, error_type.as_deref()),
            };
            if cured && !refetched {
                refetched = true;
                continue;
            }
            let body = resp.bytes().await.unwrap_or_default();
            let tok = token.as_ref().map(|t| t.expose_secret());
            return Err(UpstreamError::status(
                self.refused(status, &headers, &body, tok),
            ));
        }
    }
}

impl RuntimeExecutor<AgentCore> {
    /// Builds the executor: the HTTP client (HTTP version, CA file, connect timeout),
    /// and the credentials `settings.auth` describes (for OAuth a token cache over a
    /// client-credentials source that uses a client with the same CA roots). Does no
    /// network I/O.
    ///
    /// # Errors
    /// [`UpstreamError::Settings`] for an unreadable `ca_file` or an invalid URL.
    pub fn new(settings: AgentCoreSettings) -> Result<Self, UpstreamError> {
        let (runtime, http) = AgentCore::open(settings)?;
        let s = &runtime.settings;
        let credentials = auth::from_settings(&s.connection.auth, || {
            client::build_client(
                HttpVersion::Auto,
                s.connection.ca_file.as_deref(),
                s.connection.connect_timeout,
            )
        })?;
        Ok(Self::new_over(runtime, http, credentials))
    }

    /// Like [`new`](Self::new), but authenticating with `credentials` whatever
    /// `settings.auth` says (a test's or a bench's: SigV4 over a fixed provider, ...).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_credentials(
        settings: AgentCoreSettings,
        credentials: Arc<dyn Credentials>,
    ) -> Result<Self, UpstreamError> {
        let (runtime, http) = AgentCore::open(settings)?;
        Ok(Self::new_over(runtime, http, credentials))
    }

    /// Like [`new`](Self::new), but tokens come from `source` (cached with
    /// `refresh_before`, refetched once on a 401) whatever `settings.auth` says.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_token_source(
        settings: AgentCoreSettings,
        source: Arc<dyn TokenSource>,
        refresh_before: Duration,
    ) -> Result<Self, UpstreamError> {
        let (runtime, http) = AgentCore::open(settings)?;
        let credentials = Arc::new(CachedToken::new(source, refresh_before));
        Ok(Self::new_over(runtime, http, credentials))
    }

    /// The settings in use.
    pub fn settings(&self) -> &AgentCoreSettings {
        self.runtime().settings()
    }

    /// The runtime session id used for `context` (contract §1.1; see [`session`]).
    pub fn session_for(context: &RequestContext) -> String {
        session::session_id(
            &context.call_context.tenant,
            &context.call_context.owner,
            &context.context_id,
        )
    }
}

impl AgentCore {
    /// Checks the invocation URL and builds the kind and its HTTP client.
    fn open(settings: AgentCoreSettings) -> Result<(Self, reqwest::Client), UpstreamError> {
        reqwest::Url::parse(&settings.invocation_url).map_err(|e| {
            UpstreamError::Settings(format!(
                "upstream.url `{}` is not a valid URL: {e}",
                settings.invocation_url
            ))
        })?;
        let http = client::build_client(
            settings.connection.http_version,
            settings.connection.ca_file.as_deref(),
            settings.connection.connect_timeout,
        )?;
        let s = &settings;
        let limits = Limits {
            send: SendTimeouts {
                connect: s.connection.connect_timeout,
                pool: s.connection.pool_timeout,
                write: s.connection.write_timeout,
                read: s.connection.read_timeout,
            },
            retry: RetryPolicy {
                max_retries: s.connection.max_retries,
                base_delay: s.connection.retry_base_delay,
                max_delay: s.connection.retry_max_delay,
            },
            request_timeout: s.connection.request_timeout,
            max_stream: s.connection.max_stream,
            max_event_bytes: s.connection.max_event_bytes,
            max_stream_bytes: s.connection.max_stream_bytes,
            max_reply_bytes: s.connection.max_reply_bytes,
        };
        Ok((Self { settings, limits }, http))
    }
}

/// Bytes percent-encoded in the caller and tenant header values: controls, space, `%`
/// and (always, by `percent-encoding`) every non-ASCII byte. What remains is visible
/// ASCII, a valid header value everywhere; decoding is plain percent-decoding to UTF-8.
const HEADER_VALUE_ESCAPES: &percent_encoding::AsciiSet =
    &percent_encoding::CONTROLS.add(b' ').add(b'%');

/// A caller or tenant as a header value: its UTF-8 bytes, percent-encoded (RFC 3986
/// `%XX`) outside visible ASCII and for `%` itself. `alice@example.com` is sent as is;
/// `Zoë Q` as `Zo%C3%AB%20Q`.
pub fn identity_header_value(value: &str) -> http::HeaderValue {
    let encoded = percent_encoding::utf8_percent_encode(value, HEADER_VALUE_ESCAPES).to_string();
    http::HeaderValue::from_str(&encoded).expect("visible ASCII is a valid header value")
}

#[cfg(test)]
mod tests {
    use super::identity_header_value;

    #[test]
    fn identity_values_are_percent_encoded_outside_visible_ascii() {
        for (raw, sent) in [
            ("alice@example.com", "alice@example.com"),
            ("Zoë Q", "Zo%C3%AB%20Q"),
            ("a%b", "a%25b"),
            ("line\r\nX-Evil: 1", "line%0D%0AX-Evil:%201"),
            ("", ""),
        ] {
            assert_eq!(
                identity_header_value(raw).to_str().unwrap(),
                sent,
                "{raw:?}"
            );
        }
    }
}
