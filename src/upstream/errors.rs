//! Upstream failures as readable reasons (runtime contract §1.3, §6).
//!
//! An [`UpstreamError`] has two texts:
//!
//! - [`UpstreamError::public_reason`]: what a remote caller is told in the FAILED
//!   task: a short, stable sentence naming the category (the token endpoint is
//!   unreachable, the runtime timed out after N s, the runtime answered HTTP 503
//!   ThrottlingException, …). It never carries the gateway's own URLs, addresses or
//!   OS errors, nor free text of the runtime's error bodies; the executor appends a
//!   correlation id (see [`crate::telemetry::correlation_id`]).
//! - `Display`: the whole story for the operator's log, written under that
//!   correlation id: the transport's error chain, the runtime's `message`, the
//!   endpoint.
//!
//! Both name the upstream as its kind does ([`Peer`]): `Display` and
//! [`UpstreamError::public_reason`] as the AgentCore runtime,
//! [`UpstreamError::detail_for`] and [`UpstreamError::public_reason_for`] as the peer
//! passed in (the `a2a` kind: the A2A agent).
//!
//! Neither contains a token or a client secret: error bodies are reduced to their
//! `message` field (or a one-line excerpt) and any occurrence of the bearer token in
//! them is replaced with `[redacted]` before the error is built.

use std::fmt;
use std::time::Duration;

use http::HeaderMap;
use serde_json::Value;

use super::auth::TokenError;
use super::text::fmt_duration;

/// How the failure texts name the upstream: each kind passes its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Mid-sentence, with its article: `the AgentCore runtime`.
    pub the: &'static str,
    /// Where a status answer's text begins: `AgentCore runtime` (as in `AgentCore
    /// runtime answered HTTP 503`).
    pub lead: &'static str,
}

/// The upstream of `kind = "agentcore"` (and of `Display`).
pub const AGENTCORE_RUNTIME: Peer = Peer {
    the: "the AgentCore runtime",
    lead: "AgentCore runtime",
};

/// The longest excerpt of a non-JSON error body kept in a reason, in characters.
const BODY_EXCERPT_CHARS: usize = 300;

/// Which configured time limit fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// Opening the TCP (and TLS) connection took longer than `connect_timeout_secs`.
    Connect,
    /// Getting a usable connection (beyond connecting) took longer than `pool_timeout_secs`.
    Pool,
    /// Sending the request took longer than `write_timeout_secs`.
    Write,
    /// The reply was silent for longer than `read_timeout_secs`.
    Read,
    /// A JSON reply did not finish within `request_timeout_secs` (15 minutes by default).
    Request,
    /// A streamed reply did not finish within `max_stream_secs`.
    Stream,
}

impl TimeoutKind {
    /// The configuration key that sets this limit.
    pub fn setting(self) -> &'static str {
        match self {
            Self::Connect => "connect_timeout_secs",
            Self::Pool => "pool_timeout_secs",
            Self::Write => "write_timeout_secs",
            Self::Read => "read_timeout_secs",
            Self::Request => "request_timeout_secs",
            Self::Stream => "max_stream_secs",
        }
    }

    /// How the limit reads before its duration: a silence (`no progress after`) or a
    /// whole reply's length (`not finished after`: it may have been progressing).
    fn limit(self) -> &'static str {
        match self {
            Self::Connect | Self::Pool | Self::Write | Self::Read => "no progress after",
            Self::Request | Self::Stream => "not finished after",
        }
    }

    fn what(self, peer: Peer) -> String {
        let the = peer.the;
        match self {
            Self::Connect => format!("connecting to {the} took too long"),
            Self::Pool => format!("waiting for a connection to {the} took too long"),
            Self::Write => format!("sending the request to {the} took too long"),
            Self::Read => format!("{the} sent nothing for too long"),
            Self::Request => format!("{the}'s JSON reply did not finish in time"),
            Self::Stream => format!("{the}'s streamed reply did not finish in time"),
        }
    }
}

/// A non-2xx answer from the runtime (contract §1.3), reduced to what is safe to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusError {
    /// The HTTP status code.
    pub status: u16,
    /// The exception name from `x-amzn-ErrorType` (the part before any `:`), if sent.
    pub error_type: Option<String>,
    /// The body's `message` (or `Message`, `error`, JSON-RPC `error.message`), or a
    /// one-line excerpt of a text body; `None` for an empty or HTML body.
    pub message: Option<String>,
    /// The runtime's `x-amzn-RequestId`, for the runtime operator's logs.
    pub request_id: Option<String>,
    /// Whether the body was an HTML page (a proxy or load balancer answered).
    pub html: bool,
    /// `Retry-After`, when sent and parseable.
    pub retry_after: Option<Duration>,
}

impl StatusError {
    /// Builds the error from a response's status, headers and body. `token` (the
    /// bearer token sent) is redacted from anything kept from the body.
    pub fn from_response(
        status: u16,
        headers: &HeaderMap,
        body: &[u8],
        token: Option<&str>,
    ) -> Self {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let error_type = header("x-amzn-errortype")
            .and_then(|v| v.split(':').next())
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        let request_id = header("x-amzn-requestid").map(str::to_owned);
        let content_type = header("content-type").unwrap_or("").to_ascii_lowercase();
        let text = String::from_utf8_lossy(body);
        let trimmed = text.trim();
        let html = content_type.starts_with("text/html")
            || trimmed
                .get(..15)
                .is_some_and(|s| s.eq_ignore_ascii_case("<!doctype html>"))
            || trimmed
                .get(..5)
                .is_some_and(|s| s.eq_ignore_ascii_case("<html"));
        let message = if html || trimmed.is_empty() {
            None
        } else if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
            json_message(&v).or_else(|| Some(excerpt(trimmed)))
        } else {
            Some(excerpt(trimmed))
        };
        let message = message.map(|m| redact(&m, token));
        let retry_after = headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| super::http::parse_retry_after(v, chrono::Utc::now()));
        Self {
            status,
            error_type,
            message,
            request_id,
            html,
            retry_after,
        }
    }

    /// Whether the runtime contract allows retrying this answer (before any reply
    /// byte): 429, 500, 502, 503, 504 and 409 `RetryableConflictException`.
    pub fn is_retryable(&self) -> bool {
        match self.status {
            429 | 500 | 502 | 503 | 504 => true,
            409 => {
                self.error_type.as_deref() == Some("RetryableConflictException")
                    || self
                        .message
                        .as_deref()
                        .is_some_and(|m| m.to_ascii_lowercase().contains("please retry"))
            }
            _ => false,
        }
    }

    fn hint(&self) -> Option<&'static str> {
        if let Some(h) = self.aws_auth_hint() {
            return Some(h);
        }
        Some(match self.status {
            400 => "the runtime rejected the request as invalid",
            401 => "the runtime did not accept the bearer token",
            403 => {
                "access denied: check the runtime's inbound authorizer (OAuth vs SigV4), allowed clients and scopes"
            }
            404 => "check agent_runtime_arn, qualifier or url",
            409 => "the runtime session is busy",
            424 => {
                "the agent's container failed, crashed or did not start in time; see the agent's own logs"
            }
            429 => "throttled by the runtime",
            402 => "a runtime quota is exhausted",
            _ => return None,
        })
    }
}

impl StatusError {
    /// What an AWS authentication refusal means (runtime contract §8), by its
    /// exception name: clock skew, a signature mismatch, expired or unknown credentials,
    /// the wrong inbound auth mode of the runtime.
    fn aws_auth_hint(&self) -> Option<&'static str> {
        let mismatch = self
            .message
            .as_deref()
            .is_some_and(|m| m.contains("Authorization method mismatch"));
        Some(match self.error_type.as_deref()? {
            "RequestExpired" => {
                "clock skew: the request's signing time is more than 5 minutes from AWS's clock; sync this host's clock (NTP)"
            }
            "InvalidSignatureException"
            | "SignatureDoesNotMatch"
            | "IncompleteSignatureException" => {
                "the SigV4 signature was refused: most often the secret access key does not belong to the access key id (check the credential source); else the signing region (the ARN's, or upstream.auth.region) is not the runtime's, or a proxy rewrites the request"
            }
            "ExpiredTokenException" | "ExpiredToken" => {
                "the AWS credentials expired (refetched once); check the credential source"
            }
            "UnrecognizedClientException" | "InvalidClientTokenId" => {
                "AWS does not know the access key: check the credential source (a rotated or wrong key)"
            }
            "MissingAuthenticationTokenException" => {
                "the runtime got no credentials it recognises: check upstream.url and upstream.auth.kind"
            }
            "AccessDeniedException" if mismatch => {
                "authorization method mismatch: the runtime accepts one inbound auth mode; an IAM runtime needs upstream.auth.kind = \"sigv4\", a JWT-authorizer runtime a bearer kind"
            }
            "AccessDeniedException" => {
                "access denied: with SigV4 check the IAM policy (bedrock-agentcore:InvokeAgentRuntime, InvokeAgentRuntimeForUser with user_id, on the runtime and its runtime-endpoint/*) and the runtime's resource policy; with OAuth the authorizer's allowed clients and scopes"
            }
            _ => return None,
        })
    }

    /// The caller-facing form: status, exception name, hint and the runtime's
    /// request id; not the body's free text (that is in the `Display` form, for the
    /// log).
    pub fn public_reason(&self) -> String {
        self.public_reason_for(AGENTCORE_RUNTIME)
    }

    /// [`public_reason`](Self::public_reason) naming the upstream as `peer`.
    pub fn public_reason_for(&self, peer: Peer) -> String {
        let mut out = format!("{} answered HTTP {}", peer.lead, self.status);
        if let Some(t) = &self.error_type {
            out.push(' ');
            out.push_str(&token_text(t));
        }
        if self.html {
            out.push_str(" with an HTML page instead of an agent reply");
        }
        if let Some(h) = self.hint() {
            out.push_str(&format!(" ({h})"));
        }
        if let Some(id) = &self.request_id {
            out.push_str(&format!(" [request id {}]", token_text(id)));
        }
        out
    }
}

impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_for(f, AGENTCORE_RUNTIME)
    }
}

impl StatusError {
    /// The `Display` form naming the upstream as `peer`.
    pub fn detail_for(&self, peer: Peer) -> String {
        struct For<'a>(&'a StatusError, Peer);
        impl fmt::Display for For<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.write_for(f, self.1)
            }
        }
        For(self, peer).to_string()
    }

    fn write_for(&self, f: &mut fmt::Formatter<'_>, peer: Peer) -> fmt::Result {
        write!(f, "{} answered HTTP {}", peer.lead, self.status)?;
        if let Some(t) = &self.error_type {
            write!(f, " {t}")?;
        }
        match (&self.message, self.html) {
            (Some(m), _) => write!(f, ": {m}")?,
            (None, true) => f.write_str(" with an HTML page instead of an agent reply")?,
            (None, false) => {}
        }
        if let Some(h) = self.hint() {
            write!(f, " ({h})")?;
        }
        if let Some(id) = &self.request_id {
            write!(f, " [request id {id}]")?;
        }
        Ok(())
    }
}

/// Why an invocation failed. The `Display` text is the operator's detail, logged under
/// the correlation id (see the module docs).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum UpstreamError {
    /// No bearer token could be had.
    Token(TokenError),
    /// The runtime answered with a non-2xx status.
    Status(Box<StatusError>),
    /// A configured time limit fired.
    Timeout {
        /// Which limit.
        kind: TimeoutKind,
        /// The configured limit.
        after: Duration,
    },
    /// The connection could not be opened (refused, DNS, TLS).
    Connect(String),
    /// The request failed before any reply arrived (connection closed, protocol error).
    Send(String),
    /// The reply broke off (reset, truncated body) after it had started.
    Broken {
        /// Reply body bytes received before the break.
        bytes: u64,
        /// The transport's description of the break.
        reason: String,
    },
    /// The agent reported an error (the SDK's trailing `{"error", "error_type"}` frame,
    /// or a `fail` control object).
    Agent {
        /// The agent's message, prefixed with its exception class when known.
        message: String,
    },
    /// A 2xx reply with an empty body, or one that is an HTML page.
    BadReply {
        /// The HTTP status.
        status: u16,
        /// `with an empty body` or `with an HTML page`.
        what: &'static str,
    },
    /// The reply is not well-formed (invalid UTF-8 in an SSE stream, a body declared
    /// JSON that is not). The text is the gateway's own, never the body's.
    Malformed(String),
    /// A 2xx reply whose `Content-Type` is none the gateway reads (contract §3).
    ContentType {
        /// The HTTP status.
        status: u16,
        /// The declared media type (reduced to token characters, at most 64).
        content_type: String,
    },
    /// One SSE event was larger than `upstream.max_event_bytes`.
    EventTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// A streamed (SSE) reply's body was larger in total than
    /// `upstream.max_stream_bytes`.
    StreamTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The SSE body ended in the middle of an event's line.
    Truncated,
    /// A JSON (non-SSE) reply was larger than `upstream.max_reply_bytes`.
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The agent sent a malformed control object (see `docs/upstream-contract.md`).
    Control(String),
    /// The executor's settings are unusable (bad URL, unreadable CA file).
    Settings(String),
    /// The runtime session's lease (one invocation per session across the instances
    /// of a cluster) could not be taken: the task store kept failing.
    SessionLease(String),
    /// An A2A agent (`kind = "a2a"`) answered a JSON-RPC error, or something that is
    /// not A2A; or it lost the task. The text is the gateway's, with the agent's error
    /// code and an excerpt of its message.
    A2a(String),
}

impl From<TokenError> for UpstreamError {
    fn from(e: TokenError) -> Self {
        Self::Token(e)
    }
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail_for(AGENTCORE_RUNTIME))
    }
}

impl std::error::Error for UpstreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Token(e) => Some(e),
            _ => None,
        }
    }
}

impl UpstreamError {
    /// A non-2xx answer.
    pub fn status(e: StatusError) -> Self {
        Self::Status(Box::new(e))
    }

    /// The session's lease could not be taken ([`Self::SessionLease`]).
    pub fn session_lease(e: crate::executor::LeaseError) -> Self {
        Self::SessionLease(e.to_string())
    }

    /// The whole story for the operator's log (the `Display` text), naming the upstream
    /// as `peer`.
    pub fn detail_for(&self, peer: Peer) -> String {
        let the = peer.the;
        match self {
            Self::Token(e) => e.to_string(),
            Self::Status(s) => s.detail_for(peer),
            Self::Timeout { kind, after } => format!(
                "{} ({} {}; setting `{}`)",
                kind.what(peer),
                kind.limit(),
                fmt_duration(*after),
                kind.setting()
            ),
            Self::Connect(d) => format!("could not connect to {the}: {d}"),
            Self::Send(d) => format!("the request to {the} failed before a reply arrived: {d}"),
            Self::Broken { bytes, reason } => format!(
                "{the}'s reply broke off after {bytes} bytes ({reason}); the partial output is not a complete answer"
            ),
            Self::Agent { message } => format!("the agent failed: {message}"),
            Self::BadReply { status, what } => {
                format!("{the} answered HTTP {status} {what} instead of an agent reply")
            }
            Self::Malformed(m) => format!("{the}'s reply is malformed: {m}"),
            Self::ContentType {
                status,
                content_type,
            } => format!(
                "{the} answered HTTP {status} with Content-Type `{content_type}` instead of an agent reply (text/event-stream, application/json or text/plain)"
            ),
            Self::EventTooLarge { limit } => format!(
                "an event in {the}'s stream exceeded {limit} bytes (setting `max_event_bytes`); the partial output is not a complete answer"
            ),
            Self::StreamTooLarge { limit } => format!(
                "{the}'s streamed reply exceeded {limit} bytes (setting `max_stream_bytes`); the partial output is not a complete answer"
            ),
            Self::Truncated => format!(
                "{the}'s event stream ended in the middle of an event line; the partial output is not a complete answer"
            ),
            Self::TooLarge { limit } => {
                format!("{the}'s reply exceeded {limit} bytes (setting `max_reply_bytes`)")
            }
            Self::Control(m) => format!("the agent sent an invalid control object: {m}"),
            Self::Settings(m) => format!("invalid upstream settings: {m}"),
            Self::SessionLease(m) => {
                format!("cannot take the runtime session's lease in the task store: {m}")
            }
            // Only the `a2a` kind raises it: the peer is an A2A agent whoever passes.
            Self::A2a(m) => format!("the A2A agent {m}"),
        }
    }

    /// The short, stable reason a remote caller is told (see the module doc). The
    /// executor appends a correlation id under which the `Display` text is logged.
    pub fn public_reason(&self) -> String {
        self.public_reason_for(AGENTCORE_RUNTIME)
    }

    /// [`public_reason`](Self::public_reason) naming the upstream as `peer`.
    pub fn public_reason_for(&self, peer: Peer) -> String {
        let the = peer.the;
        match self {
            Self::Token(e) => e.reason().to_owned(),
            Self::Status(s) => s.public_reason_for(peer),
            Self::Connect(detail) => {
                let d = detail.to_ascii_lowercase();
                let why = if d.contains("certificate") {
                    ": its TLS certificate is not trusted (see `ca_file`)"
                } else if d.contains("dns error") || d.contains("lookup") {
                    ": its host name does not resolve"
                } else {
                    ""
                };
                format!("could not connect to {the}{why}")
            }
            Self::Send(_) => format!("the request to {the} failed before a reply arrived"),
            Self::Broken { bytes, .. } => format!(
                "{the}'s reply broke off after {bytes} bytes; the partial output is not a complete answer"
            ),
            Self::Agent { message } => format!("the agent failed: {}", excerpt(message)),
            Self::Control(m) => format!("the agent sent an invalid control object: {}", excerpt(m)),
            Self::Settings(_) => "the gateway's upstream settings are invalid".to_owned(),
            Self::SessionLease(_) => {
                "the gateway could not take the runtime session's lease in its task store"
                    .to_owned()
            }
            Self::A2a(m) => format!("the A2A agent {}", excerpt(m)),
            Self::Timeout { .. }
            | Self::BadReply { .. }
            | Self::Malformed(_)
            | Self::ContentType { .. }
            | Self::EventTooLarge { .. }
            | Self::StreamTooLarge { .. }
            | Self::Truncated
            | Self::TooLarge { .. } => self.detail_for(peer),
        }
    }

    /// The bounded category of this failure: the `category` label of
    /// `a2a_upstream_failures_total` and the `reason` of `a2a_tasks_total{state="failed"}`.
    /// `broken` is a reply cut off after it began (a reset, a body shorter than its
    /// length), `truncated` an event stream that ended mid-line, `malformed` a reply
    /// that is not what it declares (garbage), `control` an invalid control object.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Token(_) => "token",
            Self::Status(s) if s.status == 429 => "throttled",
            Self::Status(s) if s.status < 500 => "status_4xx",
            Self::Status(_) => "status_5xx",
            Self::Timeout { .. } => "timeout",
            Self::Connect(_) => "connect",
            Self::Send(_) => "send",
            Self::Broken { .. } => "broken",
            Self::Agent { .. } => "agent_failed",
            Self::BadReply { .. } => "bad_reply",
            Self::Malformed(_) => "malformed",
            Self::ContentType { .. } => "content_type",
            Self::EventTooLarge { .. } => "event_too_large",
            Self::StreamTooLarge { .. } => "stream_too_large",
            Self::Truncated => "truncated",
            Self::TooLarge { .. } => "too_large",
            Self::Control(_) => "control",
            Self::Settings(_) => "settings",
            Self::SessionLease(_) => "session_lease",
            Self::A2a(_) => "a2a",
        }
    }

    /// Classifies a reqwest error raised before any reply byte.
    pub(crate) fn from_send(e: &reqwest::Error, connect_timeout: Duration) -> Self {
        if e.is_connect() {
            if e.is_timeout() || chain_mentions(e, "timed out") {
                return Self::Timeout {
                    kind: TimeoutKind::Connect,
                    after: connect_timeout,
                };
            }
            return Self::Connect(describe(e));
        }
        Self::Send(describe(e))
    }
}

/// A reqwest/hyper error as one line: the innermost causes, without the URL.
pub(crate) fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        // reqwest's text (also when a wrapper such as oauth2's repeats it) may carry the
        // URL, credentials and all; keep the kind only.
        let s = err.to_string();
        let s = s.split(" for url (").next().unwrap_or(&s).to_owned();
        if !s.is_empty() && !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}

fn chain_mentions(e: &(dyn std::error::Error + 'static), needle: &str) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.to_string().to_ascii_lowercase().contains(needle) {
            return true;
        }
        cur = err.source();
    }
    false
}

/// A header value from the peer reduced to token characters (`[A-Za-z0-9._:/+-]`),
/// at most 64 of them: safe to repeat to a caller.
pub(crate) fn token_text(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || "._:/+-".contains(*c))
        .take(64)
        .collect()
}

/// The message of a JSON error body: restJson1 `message`/`Message`, the container's
/// `{"error": "..."}`, or JSON-RPC `{"error": {"message": ...}}`.
fn json_message(v: &Value) -> Option<String> {
    let obj = v.as_object()?;
    for key in ["message", "Message", "error_description"] {
        if let Some(Value::String(s)) = obj.get(key) {
            return Some(excerpt(s));
        }
    }
    match obj.get("error") {
        Some(Value::String(s)) => Some(excerpt(s)),
        Some(Value::Object(e)) => e.get("message").and_then(Value::as_str).map(excerpt),
        _ => None,
    }
}

/// One line of at most [`BODY_EXCERPT_CHARS`] characters.
fn excerpt(s: &str) -> String {
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= BODY_EXCERPT_CHARS {
        one_line
    } else {
        let mut out: String = one_line.chars().take(BODY_EXCERPT_CHARS).collect();
        out.push('…');
        out
    }
}

/// Replaces every occurrence of `secret` in `text` with `[redacted]`.
pub(crate) fn redact(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(s) if s.len() >= 4 => text.replace(s, "[redacted]"),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_drops_urls_also_from_wrapping_errors() {
        #[derive(Debug)]
        struct Wrapper;
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("error sending request for url (http://u:PASS@h/t?secret=Q)")
            }
        }
        impl std::error::Error for Wrapper {}
        let text = describe(&Wrapper);
        assert_eq!(text, "error sending request");
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn runtime_client_error_is_readable() {
        let h = headers(&[
            (
                "x-amzn-ErrorType",
                "RuntimeClientError:http://internal.amazon.com/coral/",
            ),
            ("x-amzn-RequestId", "req-1"),
            ("content-type", "application/json"),
        ]);
        let body = br#"{"message":"Runtime initialization time exceeded. Please make sure that initialization completes in 30s."}"#;
        let e = StatusError::from_response(424, &h, body, None);
        assert_eq!(e.error_type.as_deref(), Some("RuntimeClientError"));
        let s = e.to_string();
        assert!(
            s.starts_with(
                "AgentCore runtime answered HTTP 424 RuntimeClientError: Runtime initialization"
            ),
            "{s}"
        );
        assert!(s.contains("[request id req-1]"), "{s}");
        assert!(!e.is_retryable());
    }

    #[test]
    fn html_body_is_not_dumped() {
        let h = headers(&[("content-type", "text/html; charset=utf-8")]);
        let e = StatusError::from_response(
            502,
            &h,
            b"<html><body>Bad gateway <script>...</script></body></html>",
            None,
        );
        assert_eq!(e.message, None);
        assert!(e.to_string().contains("HTML page"), "{e}");
        assert!(e.is_retryable());
    }

    #[test]
    fn conflict_retryable_only_when_marked() {
        let h = headers(&[("x-amzn-ErrorType", "RetryableConflictException")]);
        assert!(StatusError::from_response(409, &h, b"{}", None).is_retryable());
        let h = headers(&[("x-amzn-ErrorType", "ConflictException")]);
        assert!(!StatusError::from_response(409, &h, b"{}", None).is_retryable());
        assert!(!StatusError::from_response(400, &HeaderMap::new(), b"", None).is_retryable());
    }

    #[test]
    fn aws_auth_refusals_read_as_what_they_mean() {
        for (status, error_type, body, says) in [
            (400, "RequestExpired", "Signature expired", "clock skew"),
            (403, "InvalidSignatureException", "", "secret access key"),
            (403, "SignatureDoesNotMatch", "", "signing region"),
            (403, "ExpiredTokenException", "", "expired"),
            (403, "UnrecognizedClientException", "", "access key"),
            (
                403,
                "AccessDeniedException",
                r#"{"message": "Authorization method mismatch. The agent is configured for a different authorization method than what was used in your request (OAuth or SigV4)"}"#,
                "upstream.auth.kind = \"sigv4\"",
            ),
            (403, "AccessDeniedException", "{}", "IAM policy"),
        ] {
            let h = headers(&[("x-amzn-ErrorType", error_type)]);
            let e = StatusError::from_response(status, &h, body.as_bytes(), None);
            assert!(
                e.public_reason().contains(says),
                "{error_type}: {}",
                e.public_reason()
            );
        }
    }

    #[test]
    fn token_echoed_in_body_is_redacted() {
        let e = StatusError::from_response(
            401,
            &HeaderMap::new(),
            b"bad token abc.def.ghi",
            Some("abc.def.ghi"),
        );
        assert_eq!(e.message.as_deref(), Some("bad token [redacted]"));
    }

    #[test]
    fn timeout_names_its_setting() {
        let e = UpstreamError::Timeout {
            kind: TimeoutKind::Read,
            after: Duration::from_millis(300),
        };
        assert_eq!(
            e.to_string(),
            "the AgentCore runtime sent nothing for too long (no progress after 300 ms; setting `read_timeout_secs`)"
        );
        // A whole reply's limit does not claim the reply was silent.
        let e = UpstreamError::Timeout {
            kind: TimeoutKind::Stream,
            after: Duration::from_secs(5),
        };
        assert_eq!(
            e.to_string(),
            "the AgentCore runtime's streamed reply did not finish in time (not finished after 5 s; setting `max_stream_secs`)"
        );
    }

    /// Every reason the upstream executor can give a caller, with internals planted
    /// in each variant's detail: the caller-facing text is the category only.
    #[test]
    fn every_caller_reason_is_a_category_without_internals() {
        let internal = "http://10.1.2.3:8443/oauth2/token: tcp connect error: Connection refused (os error 111)";
        let mut h = HeaderMap::new();
        h.insert(
            "x-amzn-errortype",
            "ThrottlingException:http://internal/".parse().unwrap(),
        );
        h.insert("x-amzn-requestid", "req-9".parse().unwrap());
        let throttled = StatusError::from_response(503, &h, internal.as_bytes(), None);
        let cases: Vec<(UpstreamError, &str)> = vec![
            (
                UpstreamError::Token(
                    TokenError::new("the upstream token endpoint is unreachable")
                        .with_detail(internal),
                ),
                "the upstream token endpoint is unreachable",
            ),
            (
                UpstreamError::status(throttled),
                "AgentCore runtime answered HTTP 503 ThrottlingException [request id req-9]",
            ),
            (
                UpstreamError::Timeout {
                    kind: TimeoutKind::Read,
                    after: Duration::from_secs(900),
                },
                "the AgentCore runtime sent nothing for too long (no progress after 900 s; setting `read_timeout_secs`)",
            ),
            (
                UpstreamError::Connect(internal.into()),
                "could not connect to the AgentCore runtime",
            ),
            (
                UpstreamError::Connect(format!(
                    "{internal}: invalid peer certificate: UnknownIssuer"
                )),
                "could not connect to the AgentCore runtime: its TLS certificate is not trusted (see `ca_file`)",
            ),
            (
                UpstreamError::Send(internal.into()),
                "the request to the AgentCore runtime failed before a reply arrived",
            ),
            (
                UpstreamError::Broken {
                    bytes: 12,
                    reason: internal.into(),
                },
                "the AgentCore runtime's reply broke off after 12 bytes; the partial output is not a complete answer",
            ),
            (
                UpstreamError::Agent {
                    message: "ValueError: boom".into(),
                },
                "the agent failed: ValueError: boom",
            ),
            (
                UpstreamError::BadReply {
                    status: 200,
                    what: "with an empty body",
                },
                "the AgentCore runtime answered HTTP 200 with an empty body instead of an agent reply",
            ),
            (
                UpstreamError::Malformed("the event stream is not UTF-8".into()),
                "the AgentCore runtime's reply is malformed: the event stream is not UTF-8",
            ),
            (
                UpstreamError::ContentType {
                    status: 200,
                    content_type: "application/xml".into(),
                },
                "the AgentCore runtime answered HTTP 200 with Content-Type `application/xml` instead of an agent reply (text/event-stream, application/json or text/plain)",
            ),
            (
                UpstreamError::EventTooLarge { limit: 4 },
                "an event in the AgentCore runtime's stream exceeded 4 bytes (setting `max_event_bytes`); the partial output is not a complete answer",
            ),
            (
                UpstreamError::StreamTooLarge { limit: 64 },
                "the AgentCore runtime's streamed reply exceeded 64 bytes (setting `max_stream_bytes`); the partial output is not a complete answer",
            ),
            (
                UpstreamError::Truncated,
                "the AgentCore runtime's event stream ended in the middle of an event line; the partial output is not a complete answer",
            ),
            (
                UpstreamError::TooLarge { limit: 16 },
                "the AgentCore runtime's reply exceeded 16 bytes (setting `max_reply_bytes`)",
            ),
            (
                UpstreamError::Control("unknown `a2a_control` kind `x`".into()),
                "the agent sent an invalid control object: unknown `a2a_control` kind `x`",
            ),
            (
                UpstreamError::Settings(format!("upstream.url `{internal}` is not a valid URL")),
                "the gateway's upstream settings are invalid",
            ),
            (
                UpstreamError::SessionLease(format!(
                    "error communicating with database: connection to {internal} refused"
                )),
                "the gateway could not take the runtime session's lease in its task store",
            ),
            (
                UpstreamError::A2a("answered JSON-RPC error -32603 (internal error): boom".into()),
                "the A2A agent answered JSON-RPC error -32603 (internal error): boom",
            ),
        ];
        for (e, want) in &cases {
            // Adding a variant must add a case here.
            match e {
                UpstreamError::Token(_)
                | UpstreamError::Status(_)
                | UpstreamError::Timeout { .. }
                | UpstreamError::Connect(_)
                | UpstreamError::Send(_)
                | UpstreamError::Broken { .. }
                | UpstreamError::Agent { .. }
                | UpstreamError::BadReply { .. }
                | UpstreamError::Malformed(_)
                | UpstreamError::ContentType { .. }
                | UpstreamError::EventTooLarge { .. }
                | UpstreamError::StreamTooLarge { .. }
                | UpstreamError::Truncated
                | UpstreamError::TooLarge { .. }
                | UpstreamError::Control(_)
                | UpstreamError::Settings(_)
                | UpstreamError::SessionLease(_)
                | UpstreamError::A2a(_) => {}
            }
            let public = e.public_reason();
            assert_eq!(&public, want);
            for leak in ["10.1.2.3", "http://", "os error", "refused"] {
                assert!(!public.contains(leak), "{leak} in {public}");
            }
        }
        assert_eq!(cases.len(), 19);
        // The log form keeps the details.
        assert!(cases[0].0.to_string().contains("os error 111"));
        assert!(cases[1].0.to_string().contains("10.1.2.3"));
    }
}
