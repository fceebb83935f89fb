//! [`Rpc`]: the JSON-RPC client of one A2A agent. One POST per call with the
//! `A2A-Version` header, the agent's answer read whole (`application/json`) or as an
//! event stream (`text/event-stream`, through the shared bounded SSE decoder), retries
//! before the first reply byte (connection failures, 429, 502/503/504 and AgentCore's
//! -32054 "session operation in progress"), and one refetch of the token on a 401.
//! [`Rpc::authorize`] is the one place a request gets its credentials.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::settings::A2aSettings;
use super::wire::{
    Binding, Method, SESSION_BUSY, TASK_NOT_CANCELABLE, TASK_NOT_FOUND, VERSION_NOT_SUPPORTED,
    WireVersion,
};
use crate::executor::CallContext;
use crate::upstream::auth::Credentials;
use crate::upstream::errors::{StatusError, TimeoutKind, UpstreamError};
use crate::upstream::http::{RetryPolicy, SendTimeouts, client};
use crate::upstream::{meter, reply};

/// Largest error body read from a non-2xx answer.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Why a call failed: the agent's JSON-RPC error, or anything else.
#[derive(Debug, Clone)]
pub enum RpcFailure {
    /// The agent answered a JSON-RPC error (also in a non-2xx answer's body, as
    /// AgentCore's A2A mode sends them).
    Rpc {
        /// The error code.
        code: i64,
        /// The agent's message (at most 200 characters kept).
        message: String,
    },
    /// Transport, status, time limit, or an answer that is not JSON-RPC.
    Upstream(UpstreamError),
}

impl From<UpstreamError> for RpcFailure {
    fn from(e: UpstreamError) -> Self {
        Self::Upstream(e)
    }
}

impl From<RpcFailure> for UpstreamError {
    fn from(f: RpcFailure) -> Self {
        match f {
            RpcFailure::Rpc { code, message } => UpstreamError::A2a(format!(
                "answered JSON-RPC error {code}{}",
                rpc_meaning(code)
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
                    + &if message.is_empty() {
                        String::new()
                    } else {
                        format!(": {message}")
                    }
            )),
            RpcFailure::Upstream(e) => e,
        }
    }
}

/// The readable name of an A2A or AgentCore JSON-RPC error code.
fn rpc_meaning(code: i64) -> Option<&'static str> {
    Some(match code {
        -32700 => "parse error",
        -32600 => "invalid request",
        -32601 => "method not found",
        -32602 => "invalid params",
        -32603 => "internal error",
        TASK_NOT_FOUND => "task not found",
        TASK_NOT_CANCELABLE => "task not cancelable",
        -32004 => "unsupported operation",
        -32005 => "content type not supported",
        -32006 => "invalid agent response",
        -32008 => "extension support required",
        VERSION_NOT_SUPPORTED => "version not supported",
        -32051 => "AgentCore: runtime not found",
        -32052 => "AgentCore: invalid request",
        -32053 => "AgentCore: throttled",
        SESSION_BUSY => "AgentCore: session operation in progress",
        -32055 => "AgentCore: the agent's container failed",
        _ => return None,
    })
}

/// The agent's answer to a streaming call.
pub enum Reply {
    /// A whole JSON-RPC result (the agent answered `application/json`).
    Whole(Value),
    /// The results of an event stream, in order; an item is an error when the stream
    /// broke, timed out, or carried a JSON-RPC error.
    Events(BoxStream<'static, Result<Value, UpstreamError>>),
}

/// `Cache-Control`'s freshness: `max-age=N` seconds; `no-cache` or `no-store` as 0;
/// `None` without either.
pub fn max_age(headers: &http::HeaderMap) -> Option<Duration> {
    let mut out = None;
    for v in headers.get_all(http::header::CACHE_CONTROL) {
        for d in v.to_str().unwrap_or("").split(',') {
            let d = d.trim().to_ascii_lowercase();
            if d == "no-cache" || d == "no-store" {
                return Some(Duration::ZERO);
            }
            if let Some(n) = d.strip_prefix("max-age=") {
                out = n.trim_matches('"').parse().ok().map(Duration::from_secs);
            }
        }
    }
    out
}

/// The answer to a card request.
#[derive(Debug)]
pub enum CardAnswer {
    /// The card, with its `Cache-Control: max-age` and `ETag` when sent.
    Card {
        /// The card as JSON.
        card: Value,
        /// How long it may be used without asking again.
        max_age: Option<std::time::Duration>,
        /// Its entity tag, for revalidation.
        etag: Option<String>,
    },
    /// 304: the card the gateway has is still the agent's.
    NotModified {
        /// How long it may be used now without asking again.
        max_age: Option<std::time::Duration>,
    },
}

/// Where and how one call goes.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The agent's endpoint (JSON-RPC URL, or HTTP+JSON base URL).
    pub endpoint: &'a str,
    /// The binding.
    pub binding: Binding,
    /// The version spoken.
    pub version: WireVersion,
    /// The runtime session (sent only to an AgentCore runtime).
    pub session: &'a str,
    /// The extensions the caller asked for that the agent's card declares: sent as
    /// `A2A-Extensions` (0.3: `X-A2A-Extensions`).
    pub extensions: &'a [String],
    /// On whose behalf.
    pub caller: &'a CallContext,
}

/// The JSON-RPC client of one agent. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct Rpc {
    http: reqwest::Client,
    credentials: Arc<dyn Credentials>,
    settings: Arc<A2aSettings>,
    ids: AtomicU64,
}

impl Rpc {
    /// A client sending with `http` and authenticating with `credentials`.
    pub fn new(
        http: reqwest::Client,
        credentials: Arc<dyn Credentials>,
        settings: Arc<A2aSettings>,
    ) -> Self {
        Self {
            http,
            credentials,
            settings,
            ids: AtomicU64::new(1),
        }
    }

    /// The credentials in use.
    pub fn credentials(&self) -> &dyn Credentials {
        self.credentials.as_ref()
    }

    fn timeouts(&self) -> SendTimeouts {
        let s = &self.settings;
        SendTimeouts {
            connect: s.connection.connect_timeout,
            pool: s.connection.pool_timeout,
            write: s.connection.write_timeout,
            read: s.connection.read_timeout,
        }
    }

    /// Builds `rb` with `body` and authorizes it on behalf of `caller`: the one place a
    /// request to the agent gets its credentials ([`Credentials::authorize`]: a bearer
    /// token, or a SigV4 signature over the final request, made again for each
    /// attempt). Returns the request and the bearer token sent, if any (to redact it
    /// from error bodies, and for [`Credentials::on_unauthorized`] on a 401).
    ///
    /// # Errors
    /// [`UpstreamError::Token`] when no credentials can be had; a request that cannot
    /// be built.
    pub async fn authorize(
        &self,
        rb: reqwest::RequestBuilder,
        body: Option<Bytes>,
        caller: &CallContext,
    ) -> Result<(reqwest::Request, Option<SecretString>), UpstreamError> {
        let rb = match body {
            Some(b) => rb.body(b),
            None => rb,
        };
        let mut request = rb
            .build()
            .map_err(|e| UpstreamError::from_send(&e, self.settings.connection.connect_timeout))?;
        let token = self.credentials.authorize(&mut request, caller).await?;
        Ok((request, token))
    }

    /// Whether a refusal with `status` (and the AWS exception named in `headers`) may
    /// be cured by one more attempt with fresh credentials: a 401 to a cached bearer
    /// token, or what [`Credentials::on_rejected`] accepts (SigV4's expired or rotated
    /// keys).
    fn refetch_cures(
        &self,
        status: u16,
        headers: &http::HeaderMap,
        token: &Option<SecretString>,
    ) -> bool {
        if status == 401 {
            return token
                .as_ref()
                .is_some_and(|t| self.credentials.on_unauthorized(t));
        }
        let error_type = StatusError::from_response(status, headers, &[], None).error_type;
        self.credentials.on_rejected(status, error_type.as_deref())
    }

    /// The headers every request to the agent carries: `A2A-Version`, the session
    /// (AgentCore), the caller and tenant, `traceparent`.
    fn headers(
        &self,
        mut rb: reqwest::RequestBuilder,
        version: WireVersion,
        session: &str,
        caller: &CallContext,
    ) -> reqwest::RequestBuilder {
        let s = &self.settings;
        rb = rb.header("A2A-Version", version.header()).header(
            "traceparent",
            crate::telemetry::trace::attempt_traceparent(caller.trace_parent.as_ref()),
        );
        // GetAgentCard has no session (the header is optional there; an empty one is
        // refused as shorter than 33 characters).
        if s.agentcore && !session.is_empty() {
            rb = rb.header(crate::upstream::SESSION_HEADER, session);
        }
        if let Some(name) = &s.connection.caller_header {
            rb = rb.header(
                name.clone(),
                crate::upstream::identity_header_value(&caller.owner),
            );
        }
        if let Some(name) = &s.connection.tenant_header
            && !caller.tenant.is_empty()
        {
            rb = rb.header(
                name.clone(),
                crate::upstream::identity_header_value(&caller.tenant),
            );
        }
        rb
    }

    /// GETs `url` (the agent's card), revalidating with `If-None-Match: etag` when
    /// given, and reads it as JSON with its caching headers.
    ///
    /// # Errors
    /// Transport and time limits, a non-2xx (and non-304) status, a body that is not
    /// JSON.
    pub async fn get_card(
        &self,
        url: &str,
        version: WireVersion,
        caller: &CallContext,
        etag: Option<&str>,
    ) -> Result<CardAnswer, UpstreamError> {
        let mut refetched = false;
        loop {
            let mut rb = self.headers(self.http.get(url), version, "", caller);
            if let Some(tag) = etag {
                rb = rb.header(http::header::IF_NONE_MATCH, tag);
            }
            let (request, token) = self
                .authorize(
                    rb.timeout(self.settings.connection.request_timeout),
                    None,
                    caller,
                )
                .await?;
            let resp = tokio::time::timeout(
                self.settings.connection.connect_timeout + self.settings.connection.read_timeout,
                self.http.execute(request),
            )
            .await
            .map_err(|_| UpstreamError::Timeout {
                kind: TimeoutKind::Read,
                after: self.settings.connection.read_timeout,
            })?
            .map_err(|e| UpstreamError::from_send(&e, self.settings.connection.connect_timeout))?;
            let status = resp.status().as_u16();
            if !resp.status().is_success()
                && !refetched
                && self.refetch_cures(status, resp.headers(), &token)
            {
                refetched = true;
                continue;
            }
            let max_age = max_age(resp.headers());
            if status == 304 && etag.is_some() {
                return Ok(CardAnswer::NotModified { max_age });
            }
            if !resp.status().is_success() {
                let headers = resp.headers().clone();
                let body = read_error_body(resp, self.settings.connection.read_timeout).await;
                let tok = token.as_ref().map(|t| t.expose_secret());
                return Err(UpstreamError::status(StatusError::from_response(
                    status, &headers, &body, tok,
                )));
            }
            let etag = resp
                .headers()
                .get(http::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = self.read_whole(resp, status).await?;
            let card = serde_json::from_slice(&body)
                .map_err(|e| UpstreamError::A2a(format!("served a card that is not JSON ({e})")))?;
            return Ok(CardAnswer::Card {
                card,
                max_age,
                etag,
            });
        }
    }

    /// StopRuntimeSession of an AgentCore runtime for `session` (a 404, already gone,
    /// counts as done; a 401 refetches the token once).
    ///
    /// # Errors
    /// The runtime's refusal or a transport failure.
    pub async fn stop_session(
        &self,
        url: &str,
        session: &str,
        caller: &CallContext,
    ) -> Result<(), UpstreamError> {
        let mut refetched = false;
        loop {
            let rb = self
                .http
                .post(url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(crate::upstream::SESSION_HEADER, session)
                .timeout(crate::upstream::runtime::STOP_TIMEOUT);
            let (request, token) = self
                .authorize(rb, Some(Bytes::from_static(b"{}")), caller)
                .await?;
            let resp = self.http.execute(request).await.map_err(|e| {
                UpstreamError::from_send(&e, self.settings.connection.connect_timeout)
            })?;
            let status = resp.status().as_u16();
            if resp.status().is_success() || status == 404 {
                return Ok(());
            }
            if !refetched && self.refetch_cures(status, resp.headers(), &token) {
                refetched = true;
                continue;
            }
            let headers = resp.headers().clone();
            let body = read_error_body(resp, self.settings.connection.read_timeout).await;
            let tok = token.as_ref().map(|t| t.expose_secret());
            return Err(UpstreamError::status(StatusError::from_response(
                status, &headers, &body, tok,
            )));
        }
    }

    /// Sends one call (a JSON-RPC request, or the HTTP+JSON request of `method`) and
    /// waits for the reply headers, with retries before the first reply byte and one
    /// token refetch on a 401. Each attempt is counted in the upstream metrics of the
    /// caller's agent (responses, request duration, retries). Returns the reply, the
    /// JSON-RPC id sent, and when the accepted attempt started.
    async fn post(
        &self,
        to: Target<'_>,
        method: Method,
        params: &Value,
        accept: &'static str,
    ) -> Result<(reqwest::Response, Option<u64>, tokio::time::Instant), RpcFailure> {
        let s = &self.settings;
        let policy = RetryPolicy {
            max_retries: s.connection.max_retries,
            base_delay: s.connection.retry_base_delay,
            max_delay: s.connection.retry_max_delay,
        };
        let name = to.version.method(method);
        let (verb, url, body, id) = match to.binding {
            Binding::JsonRpc => {
                let id = self.ids.fetch_add(1, Ordering::Relaxed);
                let envelope = json!({
                    "jsonrpc": "2.0", "id": id, "method": name, "params": params,
                });
                (
                    http::Method::POST,
                    to.endpoint.to_owned(),
                    Some(envelope),
                    Some(id),
                )
            }
            Binding::HttpJson => {
                let (verb, url, body) = super::rest::request(to.endpoint, method, params);
                (verb, url, body, None)
            }
        };
        let body = body.map_or_else(Bytes::new, |b| {
            Bytes::from(serde_json::to_vec(&b).expect("JSON request"))
        });
        let mut retries = 0u32;
        let mut refetched = false;
        loop {
            let mut rb = self
                .headers(
                    self.http.request(verb.clone(), &url),
                    to.version,
                    to.session,
                    to.caller,
                )
                .header(http::header::ACCEPT, accept);
            if !to.extensions.is_empty() {
                let name = match to.version {
                    WireVersion::V1_0 => "A2A-Extensions",
                    WireVersion::V0_3 => "X-A2A-Extensions",
                };
                rb = rb.header(name, to.extensions.join(", "));
            }
            if !body.is_empty() {
                rb = rb.header(http::header::CONTENT_TYPE, "application/json");
            }
            let (request, token) = self.authorize(rb, Some(body.clone()), to.caller).await?;
            let started = tokio::time::Instant::now();
            let sent =
                client::send_request(&self.http, request, body.clone(), self.timeouts()).await;
            let agent = to.caller.agent.as_str();
            match &sent {
                Ok(resp) => meter::attempt(resp.status().as_str(), started.elapsed(), agent),
                Err(_) => meter::attempt("error", started.elapsed(), agent),
            }
            let (failure, retry_after) = match sent {
                Ok(resp) if resp.status().is_success() => return Ok((resp, id, started)),
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    if !refetched && self.refetch_cures(status, resp.headers(), &token) {
                        refetched = true;
                        continue;
                    }
                    let headers = resp.headers().clone();
                    let body = read_error_body(resp, s.connection.read_timeout).await;
                    let tok = token.as_ref().map(|t| t.expose_secret());
                    let status_error = StatusError::from_response(status, &headers, &body, tok);
                    let retry_after = status_error.retry_after;
                    let retryable = matches!(status, 429 | 502 | 503 | 504);
                    let named = match to.binding {
                        Binding::JsonRpc => rpc_error(&body),
                        Binding::HttpJson => super::rest::error(status, &body),
                    };
                    match named {
                        Some((code, message)) => {
                            let f = RpcFailure::Rpc { code, message };
                            if code == SESSION_BUSY || (retryable && code != TASK_NOT_FOUND) {
                                (f, retry_after)
                            } else {
                                return Err(f);
                            }
                        }
                        None if retryable => {
                            (UpstreamError::status(status_error).into(), retry_after)
                        }
                        None => return Err(UpstreamError::status(status_error).into()),
                    }
                }
                Err(
                    e @ (UpstreamError::Connect(_)
                    | UpstreamError::Timeout {
                        kind: TimeoutKind::Connect | TimeoutKind::Pool,
                        ..
                    }),
                ) => (e.into(), None),
                Err(e) => return Err(e.into()),
            };
            if retries >= policy.max_retries {
                return Err(failure);
            }
            let Some(delay) = policy.delay(retries + 1, retry_after) else {
                return Err(failure);
            };
            retries += 1;
            let reason = match &failure {
                RpcFailure::Upstream(e) => meter::retry_reason(e),
                RpcFailure::Rpc { .. } => "status",
            };
            meter::retry(reason, to.caller.agent.as_str());
            tracing::warn!(
                retry = retries,
                delay_ms = delay.as_millis() as u64,
                rpc.method = name,
                "retrying the call to the A2A agent"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// A blocking call: the JSON-RPC `result` of `method`.
    ///
    /// # Errors
    /// The agent's JSON-RPC error; transport, status and time limits; an answer that
    /// is not a JSON-RPC response.
    pub async fn call(
        &self,
        to: Target<'_>,
        method: Method,
        params: &Value,
    ) -> Result<Value, RpcFailure> {
        let (resp, id, _) = self.post(to, method, params, "application/json").await?;
        let status = resp.status().as_u16();
        let body = tokio::time::timeout(
            self.settings.connection.request_timeout,
            self.read_whole(resp, status),
        )
        .await
        .map_err(|_| UpstreamError::Timeout {
            kind: TimeoutKind::Request,
            after: self.settings.connection.request_timeout,
        })??;
        result(to.binding, &body, id)
    }

    /// A streaming call: the agent's event stream, or its whole answer when it
    /// answered JSON.
    ///
    /// # Errors
    /// As [`call`](Self::call), for what comes before the stream.
    pub async fn stream(
        &self,
        to: Target<'_>,
        method: Method,
        params: &Value,
    ) -> Result<Reply, RpcFailure> {
        let (resp, id, started) = self
            .post(to, method, params, "text/event-stream, application/json")
            .await?;
        let status = resp.status().as_u16();
        let event_stream = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
        if !event_stream {
            let body = tokio::time::timeout(
                self.settings.connection.request_timeout,
                self.read_whole(resp, status),
            )
            .await
            .map_err(|_| UpstreamError::Timeout {
                kind: TimeoutKind::Request,
                after: self.settings.connection.request_timeout,
            })??;
            return result(to.binding, &body, id).map(Reply::Whole);
        }
        let s = &self.settings;
        let binding = to.binding;
        let body = meter::first_chunk(
            reply::body_stream(resp, s.connection.read_timeout),
            started,
            &to.caller.agent,
        );
        let events = crate::upstream::http::sse::event_data(
            body,
            s.connection.max_event_bytes,
            s.connection.max_stream_bytes,
        )
        .map(move |item| {
            item.and_then(|data| result(binding, data.as_bytes(), id).map_err(UpstreamError::from))
        });
        Ok(Reply::Events(events.boxed()))
    }

    /// Reads a whole 2xx body, at most `max_reply_bytes`.
    async fn read_whole(
        &self,
        resp: reqwest::Response,
        status: u16,
    ) -> Result<Vec<u8>, UpstreamError> {
        let limit = self.settings.connection.max_reply_bytes;
        if resp.content_length().is_some_and(|n| n > limit) {
            return Err(UpstreamError::TooLarge { limit });
        }
        let mut body = reply::body_stream(resp, self.settings.connection.read_timeout);
        let mut buf = Vec::new();
        while let Some(chunk) = body.next().await {
            buf.extend_from_slice(&chunk?);
            if buf.len() as u64 > limit {
                return Err(UpstreamError::TooLarge { limit });
            }
        }
        if buf.is_empty() {
            return Err(UpstreamError::BadReply {
                status,
                what: "with an empty body",
            });
        }
        Ok(buf)
    }
}

/// The result in a 2xx body (or an SSE event's data) of `binding`: a JSON-RPC
/// response's `result` (or its `error`) to the request `id`, or the HTTP+JSON body
/// itself.
fn result(binding: Binding, body: &[u8], id: Option<u64>) -> Result<Value, RpcFailure> {
    match binding {
        Binding::JsonRpc => rpc_result(body, id),
        Binding::HttpJson => serde_json::from_slice(body).map_err(|_| {
            UpstreamError::A2a(format!(
                "answered something that is not JSON ({} bytes beginning {:?})",
                body.len(),
                String::from_utf8_lossy(&body[..body.len().min(40)])
            ))
            .into()
        }),
    }
}

/// The `result` of a JSON-RPC response body, or its `error`. With the request's `id`,
/// a response with another `id` is not an answer to it (JSON-RPC 2.0 §5): refused (an
/// error may carry `null`, for a request the agent could not read).
fn rpc_result(body: &[u8], id: Option<u64>) -> Result<Value, RpcFailure> {
    let v: Value = serde_json::from_slice(body).map_err(|_| {
        UpstreamError::A2a(format!(
            "answered something that is not JSON ({} bytes beginning {:?})",
            body.len(),
            String::from_utf8_lossy(&body[..body.len().min(40)])
        ))
    })?;
    if let Some(want) = id {
        let got = v.get("id").unwrap_or(&Value::Null);
        let error_without_id = got.is_null() && v.get("error").is_some();
        if got.as_u64() != Some(want) && !error_without_id {
            return Err(UpstreamError::A2a(format!(
                "answered a JSON-RPC response whose id ({}) is not the request's ({want})",
                crate::telemetry::prefix_chars(&got.to_string(), 40)
            ))
            .into());
        }
    }
    if let Some((code, message)) = rpc_error_of(&v) {
        return Err(RpcFailure::Rpc { code, message });
    }
    match v {
        Value::Object(mut m) if m.contains_key("result") => {
            Ok(m.remove("result").unwrap_or(Value::Null))
        }
        _ => Err(UpstreamError::A2a(
            "answered JSON that is not a JSON-RPC response (no `result`, no `error`)".into(),
        )
        .into()),
    }
}

/// The JSON-RPC error in `body`, if it is one.
fn rpc_error(body: &[u8]) -> Option<(i64, String)> {
    rpc_error_of(&serde_json::from_slice::<Value>(body).ok()?)
}

fn rpc_error_of(v: &Value) -> Option<(i64, String)> {
    let e = v.get("error")?;
    let code = e.get("code")?.as_i64()?;
    let message: String = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .take(200)
        .collect();
    Some((code, message))
}

async fn read_error_body(resp: reqwest::Response, read_timeout: std::time::Duration) -> Vec<u8> {
    let mut body = reply::body_stream(resp, read_timeout);
    let mut buf = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        buf.extend_from_slice(&chunk);
        if buf.len() >= MAX_ERROR_BODY {
            buf.truncate(MAX_ERROR_BODY);
            break;
        }
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_results_and_errors() {
        assert_eq!(
            rpc_result(br#"{"jsonrpc":"2.0","id":1,"result":{"a":1}}"#, Some(1)).unwrap(),
            json!({"a": 1})
        );
        let Err(RpcFailure::Rpc { code, .. }) = rpc_result(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32009,"message":"no"}}"#,
            Some(1),
        ) else {
            panic!()
        };
        assert_eq!(code, VERSION_NOT_SUPPORTED);
        let e = UpstreamError::from(rpc_result(b"<html>", Some(1)).unwrap_err()).to_string();
        assert!(e.contains("not JSON"), "{e}");
        // Another request's answer is none to this one; an error may carry a null id.
        let e = UpstreamError::from(
            rpc_result(br#"{"jsonrpc":"2.0","id":7,"result":{"a":1}}"#, Some(1)).unwrap_err(),
        )
        .to_string();
        assert!(e.contains("id (7) is not the request's (1)"), "{e}");
        assert!(
            rpc_result(br#"{"jsonrpc":"2.0","result":{"a":1}}"#, Some(1)).is_err(),
            "a result without an id"
        );
        assert!(matches!(
            rpc_result(
                br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#,
                Some(1)
            ),
            Err(RpcFailure::Rpc { code: -32700, .. })
        ));
        let e = UpstreamError::from(RpcFailure::Rpc {
            code: -32055,
            message: "boom".into(),
        })
        .to_string();
        assert!(
            e.contains("-32055 (AgentCore: the agent's container failed): boom"),
            "{e}"
        );
    }
}
